//===- bt-run.cpp - compile and run Block Transformer checkpoints ----------===//
//
//   bt-run compile <checkpoint> [--emit bt|bt-layer|llvm|artifact|executable]
//                  [--target cpu] [--cpu NAME] [-o OUT]
//   bt-run eval <checkpoint|artifact|executable> --inputs IN -o OUT
//   bt-run info <checkpoint|artifact|executable>
//
// A checkpoint is a directory with the official trainer YAML (config.yaml)
// or a resolved config.json, and model.safetensors (official tensor names);
// --config / --weights name the files explicitly. The pipeline
// (DESIGN.md §2): import (eval, eval_loss) → bt-generate-entry-points
// (prefill, decode_block, decode_tokens; vanilla prefill, decode_step) →
// bt-decompose → bt-lower-kv-caches → bt-cpu-pipeline → LLVM → shared
// object → artifact (docs/abi.md), optionally prefixed by the runtime
// launcher to make a standalone executable. MLIR's pass-manager options
// (--mlir-print-ir-after-all, --mlir-timing, ...) apply to the pipeline.
//
//===----------------------------------------------------------------------===//

#include "RuntimeBridge.h"

#include "bt/Codegen/CPUCodegen.h"
#include "bt/Codegen/Passes.h"
#include "bt/Codegen/Pipelines.h"
#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Import/Import.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <optional>

using namespace mlir;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory btCategory("bt-run options");

cl::list<std::string> positional(cl::Positional, cl::desc("<command> <input>"),
                                 cl::cat(btCategory));
cl::opt<std::string> outputPath("o", cl::desc("Output file"),
                                cl::value_desc("path"), cl::cat(btCategory));
cl::opt<std::string> emit(
    "emit",
    cl::desc("compile: what to write — bt (model-level IR), bt-layer "
             "(layer-level IR), llvm (LLVM IR), artifact, executable"),
    cl::init("executable"), cl::cat(btCategory));
cl::opt<std::string> target("target", cl::desc("Target: cpu"), cl::init("cpu"),
                            cl::cat(btCategory));
cl::opt<std::string> cpuName(
    "cpu",
    cl::desc("LLVM CPU of the kernels: 'native' (this machine), or a name such "
             "as x86-64-v3, znver4, sapphirerapids. Default: x86-64-v3 for "
             "compile (portable to any AVX2 machine), native for eval"),
    cl::init(""), cl::cat(btCategory));
cl::opt<std::string> configPath("config",
                                cl::desc("Model config (YAML or JSON) to use "
                                         "instead of the checkpoint's"),
                                cl::cat(btCategory));
cl::opt<std::string> weightsPath("weights",
                                 cl::desc("model.safetensors to use instead "
                                          "of the checkpoint's"),
                                 cl::cat(btCategory));
cl::opt<bool> randomInit("random-init",
                         cl::desc("Random weights instead of the checkpoint's "
                                  "(needs only a config)"),
                         cl::cat(btCategory));
cl::opt<uint64_t> seed("seed", cl::desc("Seed of --random-init"), cl::init(0),
                       cl::cat(btCategory));
cl::opt<std::string> inputsPath("inputs",
                                cl::desc("eval: input tensors (safetensors)"),
                                cl::cat(btCategory));
cl::opt<std::string> launcherPath(
    "launcher", cl::desc("bt-launcher binary for --emit executable (default: "
                         "next to bt-run)"),
    cl::cat(btCategory));
cl::opt<bool> noBlas("no-blas", cl::desc("Keep GEMMs as generated loops"),
                     cl::cat(btCategory));

constexpr const char *kUsage =
    "bt-run: compile and run Block Transformer checkpoints\n\n"
    "  bt-run compile <checkpoint> [--emit bt|bt-layer|llvm|artifact|executable]"
    " [-o OUT]\n"
    "  bt-run eval <checkpoint|artifact|executable> --inputs IN -o OUT\n"
    "  bt-run info <checkpoint|artifact|executable>\n";

int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "bt-run") << message << "\n";
  return 1;
}

int usage(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "bt-run") << message << "\n" << kUsage;
  return 2;
}

/// The tensor specs of a function's arguments or results (bt.name, bt.dims
/// attributes set by the importer and bt-generate-entry-points; bt.inout
/// from bt-lower-kv-caches).
bt::bridge::TensorInfo tensorInfo(Type type, DictionaryAttr attrs) {
  bt::bridge::TensorInfo info;
  auto t = llvm::cast<RankedTensorType>(type);
  if (auto name = attrs ? attrs.getAs<StringAttr>("bt.name") : StringAttr())
    info.name = name.str();
  Type elt = t.getElementType();
  info.dtype = elt.isF32() ? "F32" : elt.isInteger(64) ? "I64"
             : elt.isInteger(32) ? "I32" : elt.isBF16() ? "BF16" : "F16";
  for (int64_t d : t.getShape())
    info.shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
  if (auto dims = attrs ? attrs.getAs<ArrayAttr>("bt.dims") : ArrayAttr())
    for (Attribute d : dims)
      info.dimNames.push_back(llvm::cast<StringAttr>(d).str());
  info.inout = attrs && attrs.get("bt.inout");
  return info;
}

/// The entry points of a module after bt-lower-kv-caches: each public
/// function's named inputs and outputs. Results that are in-out arguments
/// (bt.inout_arg) are not outputs: the kernel updates those arguments in
/// place (docs/abi.md). Parameters are filled in by setEntryParams once the
/// pipeline has fixed their order.
std::vector<bt::bridge::EntryInfo> collectEntries(ModuleOp module) {
  std::vector<bt::bridge::EntryInfo> entries;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (!fn.isPublic() || fn.isExternal())
      continue;
    bt::bridge::EntryInfo e;
    e.name = fn.getSymName().str();
    e.symbol = "bt_entry_" + e.name;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      e.inputs.push_back(tensorInfo(fn.getArgumentTypes()[i], fn.getArgAttrDict(i)));
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      if (!fn.getResultAttr(i, "bt.inout_arg"))
        e.outputs.push_back(
            tensorInfo(fn.getResultTypes()[i], fn.getResultAttrDict(i)));
    entries.push_back(std::move(e));
  }
  return entries;
}

/// Copies each entry's parameter order from the `bt.params` attribute that
/// bt-params-to-arguments leaves on the lowered function (the order in which
/// the kernels take their weights, docs/abi.md).
LogicalResult setEntryParams(ModuleOp lowered,
                             std::vector<bt::bridge::EntryInfo> &entries) {
  for (bt::bridge::EntryInfo &e : entries) {
    Operation *fn = SymbolTable::lookupSymbolIn(lowered, e.name);
    auto params = fn ? fn->getAttrOfType<ArrayAttr>("bt.params") : ArrayAttr();
    if (!params) {
      fail("internal error: lowered entry point '" + e.name +
           "' has no bt.params attribute");
      return failure();
    }
    for (Attribute p : params)
      e.params.push_back(llvm::cast<StringAttr>(p).str());
  }
  return success();
}

LogicalResult writeText(const std::string &path, llvm::function_ref<void(llvm::raw_ostream &)> fn) {
  std::string error;
  auto out = mlir::openOutputFile(path.empty() ? "-" : path, &error);
  if (!out) {
    llvm::errs() << error << "\n";
    return failure();
  }
  fn(out->os());
  out->keep();
  return success();
}

std::string defaultLauncher(const char *argv0) {
  std::string exe = llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&defaultLauncher));
  llvm::SmallString<256> path(llvm::sys::path::parent_path(exe));
  llvm::sys::path::append(path, "bt-launcher");
  return std::string(path);
}

/// Loads the model of `input` (a checkpoint) per the options.
std::unique_ptr<bt::bridge::Model> loadModel(const std::string &input,
                                             bool withWeights) {
  std::string error;
  std::unique_ptr<bt::bridge::Model> model;
  if (randomInit) {
    model = bt::bridge::randomModel(configPath.empty() ? input : configPath,
                                    seed, error);
  } else {
    model = bt::bridge::loadModel({input, configPath, weightsPath},
                                  withWeights, error);
  }
  if (!model) {
    fail(error);
    return nullptr;
  }
  for (const std::string &notice : model->notices())
    llvm::WithColor::note(llvm::errs(), "bt-run") << notice << "\n";
  return model;
}

/// Compiles `model` as `--emit` asks. For artifact/executable, writes to
/// `outPath`; for IR, prints to `outPath` (stdout if empty). `thisMachine`:
/// the artifact runs here and now, so the kernels target the host CPU
/// unless --cpu says otherwise.
LogicalResult compile(MLIRContext &context, const bt::bridge::Model &model,
                      const std::string &emitKind, const std::string &outPath,
                      const char *argv0, bool thisMachine = false) {
  if (target != "cpu") {
    fail("--target " + target + ": only 'cpu' is implemented in this version");
    return failure();
  }
  OwningOpRef<ModuleOp> module = bt::importModel(&context, model.spec());
  if (!module)
    return failure();
  // Runs `build`'s passes with the MLIR pass-manager options and timing.
  auto runPasses = [&](llvm::function_ref<void(PassManager &)> build) {
    PassManager pm(&context);
    if (failed(applyPassManagerCLOptions(pm)))
      return failure();
    DefaultTimingManager timing;
    applyDefaultTimingManagerCLOptions(timing);
    TimingScope root = timing.getRootScope();
    pm.enableTiming(root);
    build(pm);
    return pm.run(*module);
  };
  // The generation entry points, derived from the forward.
  if (failed(runPasses([](PassManager &pm) {
        pm.addPass(bt::createBTGenerateEntryPoints());
        pm.addPass(bt::createBTVerifyKVLifetimes());
      })))
    return failure();
  if (emitKind == "bt")
    return writeText(outPath, [&](llvm::raw_ostream &os) { module->print(os); });

  if (failed(runPasses([](PassManager &pm) {
        pm.addPass(bt::createBTDecompose());
        pm.addPass(bt::createBTVerifyKVLifetimes());
      })))
    return failure();
  if (emitKind == "bt-layer")
    return writeText(outPath, [&](llvm::raw_ostream &os) { module->print(os); });

  // KV caches → in-out tensors, so that the entry points have their final
  // signatures (bt-cpu-pipeline runs this pass again, with nothing to do).
  if (failed(runPasses(
          [](PassManager &pm) { pm.addPass(bt::createBTLowerKVCaches()); })))
    return failure();
  std::vector<bt::bridge::EntryInfo> entries = collectEntries(*module);
  bt::CPUPipelineOptions pipelineOptions;
  pipelineOptions.blas = !noBlas;
  if (failed(bt::runCPUPipeline(*module, pipelineOptions)) ||
      failed(setEntryParams(*module, entries)))
    return failure();
  bt::CPUCodegenOptions codegenOptions;
  // Files may travel to other machines; in-process runs use this one.
  std::string cpu = !cpuName.empty() ? std::string(cpuName)
                    : thisMachine ? std::string("native")
                                                  : std::string("x86-64-v3");
  codegenOptions.cpu = cpu == "native" ? "" : cpu;
  if (cpu == "native")
    cpu = bt::getHostCPUName();
  if (emitKind == "llvm") {
    llvm::Expected<std::string> ir = bt::compileToLLVMIR(*module, codegenOptions);
    if (!ir) {
      fail(llvm::toString(ir.takeError()));
      return failure();
    }
    return writeText(outPath, [&](llvm::raw_ostream &os) { os << *ir; });
  }
  llvm::Expected<std::string> so =
      bt::compileToSharedObject(*module, codegenOptions);
  if (!so) {
    fail(llvm::toString(so.takeError()));
    return failure();
  }
  std::string launcher;
  if (emitKind == "executable") {
    launcher = launcherPath.empty() ? defaultLauncher(argv0) : launcherPath;
    if (!llvm::sys::fs::exists(launcher)) {
      fail("the runtime launcher " + launcher +
           " does not exist (build bt-launcher or pass --launcher)");
      return failure();
    }
  }
  std::string error;
  if (!bt::bridge::writeArtifact(model, entries, *so, cpu, launcher, outPath,
                                 error)) {
    fail(error);
    return failure();
  }
  return success();
}

/// Makes a temporary artifact path (removed by the caller).
std::string temporaryArtifact() {
  llvm::SmallString<128> path;
  if (llvm::sys::fs::createTemporaryFile("bt-run", "btart", path))
    return "";
  return std::string(path);
}

int runOnModel(MLIRContext &context, const std::string &input,
               const std::vector<std::string> &launcherArgs, const char *argv0) {
  if (bt::bridge::isArtifact(input))
    return bt::bridge::runLauncher(input, launcherArgs);
  std::unique_ptr<bt::bridge::Model> model = loadModel(input, true);
  if (!model)
    return 1;
  std::string artifact = temporaryArtifact();
  if (artifact.empty())
    return fail("cannot create a temporary file");
  int rc = failed(compile(context, *model, "artifact", artifact, argv0,
                          /*thisMachine=*/true))
               ? 1
               : bt::bridge::runLauncher(artifact, launcherArgs);
  llvm::sys::fs::remove(artifact);
  return rc;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // Named so that --mlir-print-ir-after=<pass> and friends can refer to them.
  bt::registerBTTransformsPasses();
  bt::registerBTCodegenPasses();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  cl::ParseCommandLineOptions(argc, argv, kUsage);

  if (positional.empty())
    return usage("missing command");
  std::string command = positional[0];
  if (positional.size() != 2)
    return usage("'" + command + "' takes exactly one input");
  std::string input = positional[1];

  DialectRegistry registry;
  registry.insert<bt::BTDialect>();
  bt::registerCPUCodegenDialects(registry);
  MLIRContext context(registry);

  if (command == "compile") {
    static const llvm::StringSet<> kinds = {"bt", "bt-layer", "llvm", "artifact",
                                            "executable"};
    if (!kinds.contains(emit))
      return usage("--emit " + emit + ": expected bt, bt-layer, llvm, artifact or executable");
    bool binary = emit == "artifact" || emit == "executable";
    if (binary && outputPath.empty())
      return usage("compile --emit " + emit + " needs -o <path>");
    std::unique_ptr<bt::bridge::Model> model = loadModel(input, binary);
    if (!model)
      return 1;
    return failed(compile(context, *model, emit, outputPath, argv[0])) ? 1 : 0;
  }
  if (command == "eval") {
    if (inputsPath.empty() || outputPath.empty())
      return usage("eval needs --inputs <file> and -o <file>");
    return runOnModel(context, input, {"eval", "--inputs", inputsPath, "-o", outputPath},
                      argv[0]);
  }
  if (command == "info") {
    if (bt::bridge::isArtifact(input))
      return bt::bridge::runLauncher(input, {"info"});
    std::unique_ptr<bt::bridge::Model> model = loadModel(input, false);
    if (!model)
      return 1;
    llvm::outs() << model->describe() << "\n";
    return 0;
  }
  return usage("unknown command '" + command + "'");
}
