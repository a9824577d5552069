//===- bt-run.cpp - compile and run Block Transformer checkpoints ----------===//
//
// bt-run's commands (the usage text is kUsage in Options.cpp):
//
//   compile   a checkpoint → model IR, layer IR, LLVM IR, PTX, an artifact or
//             a standalone executable (lib/Compiler's phases; the artifact
//             by the runtime's writer, docs/abi.md)
//   eval, grad, generate, bench, train-step, train
//             compile for this machine, then run the runtime's command
//             (RuntimeCommands.cpp)
//   info      a checkpoint's configuration, or an artifact's manifest
//   init-from-vanilla
//             a block checkpoint initialized from a vanilla GPT-NeoX one
//             (uptraining, paper §3.5; bt/runtime/model/init_from_vanilla.h)
//   plan      the KV-cache memory plan (bt-plan-kv-memory)
//
// A checkpoint is a directory with the official trainer YAML (config.yaml)
// or a resolved config.json, and model.safetensors (official tensor names);
// --config / --weights name the files explicitly. MLIR's pass-manager
// options (--mlir-print-ir-after-all, --mlir-timing, ...) apply to the
// compile.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "bt/Compiler/Compiler.h"
#include "bt/Import/Import.h"
#include "bt/Transforms/KVPlan.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"

#include <cstdlib>

using namespace mlir;
using namespace bt;
using namespace bt::run;

std::unique_ptr<bridge::Model> bt::run::loadModel(const Tool &tool,
                                                  const std::string &input,
                                                  bool withWeights) {
  const RunOptions &o = tool.options;
  std::string error = bridge::damagedArtifactError(input);
  if (!error.empty()) {
    fail(error);
    return nullptr;
  }
  std::unique_ptr<bridge::Model> model =
      o.randomInit
          ? bridge::randomModel(o.config.empty() ? input : o.config, o.seed,
                                error)
          : bridge::loadModel({input, o.config, o.weights}, withWeights,
                              error);
  if (!model) {
    fail(error);
    return nullptr;
  }
  for (const std::string &notice : model->notices())
    llvm::WithColor::note(llvm::errs(), "bt-run") << notice << "\n";
  for (const std::string &warning : model->warnings())
    llvm::WithColor::warning(llvm::errs(), "bt-run") << warning << "\n";
  return model;
}

LogicalResult bt::run::printWarning(Diagnostic &diagnostic) {
  if (diagnostic.getSeverity() == DiagnosticSeverity::Error)
    return failure();
  // As MLIR prints an error without a handler: the message alone (its
  // notes, e.g. the whole module as "see current operation", are not).
  llvm::raw_ostream &os = llvm::errs();
  if (!isa<UnknownLoc>(diagnostic.getLocation()))
    os << diagnostic.getLocation() << ": ";
  os << (diagnostic.getSeverity() == DiagnosticSeverity::Warning ? "warning: "
         : diagnostic.getSeverity() == DiagnosticSeverity::Remark
             ? "remark: "
             : "note: ")
     << diagnostic << "\n";
  return success();
}

FailureOr<compiler::Options>
bt::run::compileOptions(const Tool &tool, bool withGrad, bool thisMachine,
                        TrainingEntries training) {
  const RunOptions &o = tool.options;
  std::optional<compiler::Target> target = compiler::parseTarget(o.target);
  if (!target) {
    fail("--target " + o.target + ": expected cpu or cuda");
    return failure();
  }
  compiler::Options options;
  options.target = *target;
  options.gradEntry = withGrad;
  options.trainStep = training.trainStep;
  options.applyGradients = training.applyGradients;
  options.blas = !o.noBlas;
  options.fuseLocalAttention = o.fuseLocalAttention;
  // Files may travel to other machines; in-process runs use this one.
  options.cpu = !o.cpu.empty() ? o.cpu : thisMachine ? "native" : "x86-64-v3";
  options.gpuChip = o.gpuChip;
  options.cudaPath = o.cudaPath;
  options.nvvmKernels = o.nvvmKernels;
  options.cacheDir = o.cacheDir;
  if (options.cacheDir.empty())
    if (const char *env = std::getenv("BT_CACHE_DIR"))
      options.cacheDir = env;
  // --mlir-timing, --mlir-print-ir-*, ... watch the passes: they must run.
  options.cacheWholeCompile = !mlirOptionGiven();
  if (!o.nvvmKernels.empty() && *target != compiler::Target::CUDA) {
    fail("--nvvm-kernels needs --target cuda");
    return failure();
  }
  const bool trains = withGrad || training.trainStep || training.applyGradients;
  const std::string dtype =
      o.compileDType(*target == compiler::Target::CUDA, trains);
  if (dtype != "f32" && (dtype != "bf16" || *target != compiler::Target::CUDA))
    return (fail("--dtype " + dtype + ": code is compiled in f32, or in "
                 "bf16 with --target cuda"), failure());
  if (dtype != "f32" && trains)
    return (fail("--dtype bf16: gradients and training steps are compiled "
                 "in f32 only (fp32 weights; bf16 training is not "
                 "implemented): use --dtype f32"), failure());
  if (dtype == "bf16")
    options.dtype = "bf16";
  return options;
}

namespace {

std::string defaultLauncher(const char *argv0) {
  std::string exe = llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&defaultLauncher));
  llvm::SmallString<256> path(llvm::sys::path::parent_path(exe));
  llvm::sys::path::append(path, "bt-launcher");
  return std::string(path);
}

} // namespace

FailureOr<bridge::ArtifactParts>
bt::run::compileArtifactParts(const Tool &tool, const bridge::Model &model,
                              const compiler::Options &options) {
  const RunOptions &o = tool.options;
  // The tokenizer is checked before the (long) compilation.
  if (o.seededWeights && !o.randomInit) {
    fail("--seeded-weights needs --random-init (the artifact stores the seed "
         "of the random weights instead of weights)");
    return failure();
  }
  bridge::ArtifactParts parts;
  parts.seededWeights = o.seededWeights;
  std::string error;
  if (!o.tokenizer.empty() &&
      !bridge::readTokenizer(model, o.tokenizer, parts.tokenizer, error)) {
    fail(error);
    return failure();
  }
  FailureOr<compiler::Compilation> compilation =
      compiler::Compilation::import(tool.context, model.spec(), options);
  if (failed(compilation))
    return failure();
  FailureOr<compiler::CompiledKernels> kernels = compilation->compileKernels();
  if (failed(kernels))
    return failure();
  parts.interface = std::move(kernels->interface);
  parts.kernels = std::move(kernels->sharedObject);
  parts.cpu = kernels->cpu;
  parts.gpu = {kernels->ptx, kernels->gpuChip, kernels->cudaEmu};
  return parts;
}

LogicalResult bt::run::compileArtifact(const Tool &tool,
                                       const bridge::Model &model,
                                       const compiler::Options &options,
                                       const std::string &path,
                                       bool executable) {
  const RunOptions &o = tool.options;
  std::string launcher;
  if (executable) {
    launcher = o.launcher.empty() ? defaultLauncher(tool.argv0) : o.launcher;
    if (!llvm::sys::fs::exists(launcher)) {
      fail("the runtime launcher " + launcher +
           " does not exist (build bt-launcher or pass --launcher)");
      return failure();
    }
  }
  FailureOr<bridge::ArtifactParts> parts =
      compileArtifactParts(tool, model, options);
  if (failed(parts))
    return failure();
  std::string error;
  if (!bridge::writeArtifact(model, *parts, launcher, path, error)) {
    fail(error);
    return failure();
  }
  return success();
}

namespace {

/// Writes IR or PTX to `path` (stdout if empty or "-"); a file is written
/// through the runtime's AtomicFileWriter (bridge::writeOutputFile).
int writeText(const std::string &path, llvm::StringRef text) {
  if (path.empty() || path == "-") {
    llvm::outs() << text;
    return 0;
  }
  std::string error;
  if (!bridge::writeOutputFile(path, text.str(), error))
    return fail(error);
  return 0;
}

/// `bt-run compile`: the IR of a phase, the kernels' PTX, LLVM IR, an
/// artifact or an executable.
int compileCommand(const Tool &tool, const std::string &input) {
  const RunOptions &o = tool.options;
  static const llvm::StringSet<> kinds = {
      "bt",         "bt-layer", "llvm", "artifact",
      "executable", "ptx",      "nvvm", "emu-llvm"};
  if (!kinds.contains(o.emit))
    return usage("--emit " + o.emit +
                 ": expected bt, bt-layer, llvm, artifact, executable, ptx, "
                 "nvvm or emu-llvm");
  if (!compiler::parseTarget(o.target))
    return fail("--target " + o.target + ": expected cpu or cuda");
  if ((o.emit == "ptx" || o.emit == "nvvm" || o.emit == "emu-llvm") &&
      o.target != "cuda")
    return fail("--emit " + o.emit + " needs --target cuda");
  bool binary = o.emit == "artifact" || o.emit == "executable";
  if (binary && o.output.empty())
    return usage("compile --emit " + o.emit + " needs -o <path>");
  TrainingEntries training{o.trainEntries, o.trainEntries};
  // --target cuda builds grad with --train or when asked (--grad-entry):
  // an inference artifact for the GPU box stays quick to build and small.
  bool grad = o.gradEntry;
  if (o.target == "cuda" && !o.gradEntryGiven)
    grad = o.trainEntries;
  FailureOr<compiler::Options> options =
      compileOptions(tool, grad, /*thisMachine=*/false, training);
  if (failed(options))
    return 1;
  // nvvm: the kernels stop before PTX; the emulator's kernels are built
  // only where they are written.
  options->gpuBinary = o.emit != "nvvm";
  options->emulatorKernels = binary || o.emit == "emu-llvm";
  std::unique_ptr<bridge::Model> model = loadModel(tool, input, binary);
  if (!model)
    return 1;
  if (binary)
    return failed(compileArtifact(tool, *model, *options, o.output,
                                  o.emit == "executable"));
  FailureOr<compiler::Compilation> compilation =
      compiler::Compilation::import(tool.context, model->spec(), *options);
  if (failed(compilation))
    return 1;
  if (o.emit == "llvm" || o.emit == "emu-llvm") {
    FailureOr<std::string> ir = o.emit == "llvm"
                                    ? compilation->emitLLVMIR()
                                    : compilation->emitEmulatorLLVMIR();
    return failed(ir) ? 1 : writeText(o.output, *ir);
  }
  compiler::Phase phase = o.emit == "bt"         ? compiler::Phase::Model
                          : o.emit == "bt-layer" ? compiler::Phase::Layer
                                                 : compiler::Phase::LLVM;
  if (failed(compilation->runTo(phase)))
    return 1;
  if (o.emit == "ptx")
    return writeText(o.output, compilation->getPTX());
  std::string text;
  llvm::raw_string_ostream os(text);
  if (o.emit == "nvvm") {
    // The kernels' NVVM gpu.module, as --nvvm-kernels reads it back.
    for (auto kernels : compilation->getModule().getOps<gpu::GPUModuleOp>())
      kernels.print(os);
    os << "\n";
  } else {
    compilation->getModule().print(os);
  }
  return writeText(o.output, text);
}

/// `bt-run plan`: the KV-cache memory plan (bt-plan-kv-memory) of a model.
int planCommand(const Tool &tool, const std::string &input) {
  const RunOptions &o = tool.options;
  KVPlanRequest request;
  // `--prompt` is shared with generate (text there); plan takes a token count.
  int64_t promptTokens = 2048;
  if (o.prompts.size() > 1 ||
      (o.prompts.size() == 1 &&
       llvm::StringRef(o.prompts[0]).getAsInteger(10, promptTokens)))
    return usage("plan: --prompt takes one token count, e.g. --prompt 2048");
  request.promptTokens = promptTokens;
  request.genTokens = o.genTokens;
  // `--batch` is shared with bench (a list there); plan takes one size.
  int64_t planBatch = 0;
  if (o.batchesGiven && llvm::StringRef(o.batches).getAsInteger(10, planBatch))
    return usage("plan: --batch takes one batch size, e.g. --batch 64");
  request.batch = planBatch;
  if (promptTokens < 0 || o.genTokens < 0 || planBatch < 0)
    return usage("--prompt, --gen and --batch must be >= 0");
  if (!o.memory.empty() && !parseByteSize(o.memory, request.memoryBytes))
    return usage("--memory " + o.memory +
                 ": expected a size such as 80GiB, 80GB or 1073741824");
  if (o.planDType == "bf16" || o.planDType == "f16")
    request.eltBytes = 2;
  else if (!o.planDType.empty() && o.planDType != "f32")
    return usage("--dtype " + o.planDType + ": expected f32, bf16 or f16");
  std::unique_ptr<bridge::Model> model = loadModel(tool, input, false);
  if (!model)
    return 1;
  OwningOpRef<ModuleOp> module = importModel(&tool.context, model->spec());
  if (!module)
    return 1;
  FailureOr<KVPlan> kvPlan = computeKVPlan(*module, request);
  if (failed(kvPlan))
    return 1;
  printKVPlan(llvm::outs(), *kvPlan, model->spec().name);
  return 0;
}

/// `bt-run init-from-vanilla <vanilla checkpoint> --config <block yaml> -o
/// DIR [--seed S]`: the official uptraining init (partition of the vanilla
/// layers, mean embedder projection, identity expansion layer).
int initFromVanillaCommand(const Tool &tool, const std::string &input) {
  const RunOptions &o = tool.options;
  if (o.config.empty() || o.output.empty())
    return usage("init-from-vanilla needs --config <block trainer yaml> and "
                 "-o <new checkpoint directory>");
  std::string error;
  if (!bridge::initFromVanilla(input, o.config, o.output, o.seed, error))
    return fail(error);
  return 0;
}

/// `bt-run info`: an artifact's manifest, or a checkpoint's configuration.
int infoCommand(const Tool &tool, const std::string &input) {
  if (bridge::isArtifact(input)) {
    std::string error;
    std::unique_ptr<bridge::CompiledArtifact> artifact =
        bridge::openArtifact(input, error);
    if (!artifact)
      return fail(error);
    return bridge::runInfo(*artifact, tool.options.device);
  }
  std::unique_ptr<bridge::Model> model = loadModel(tool, input, false);
  if (!model)
    return 1;
  llvm::outs() << model->describe() << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  if (argc > 1 && llvm::StringRef(argv[1]) == "train")
    return trainCommand(argc, argv);
  RunOptions options;
  if (!parseOptions(argc, argv, options))
    return 2;
  if (options.threadsGiven)
    bridge::setThreads(options.threads);
  if (options.positional.empty())
    return usage("missing command");
  std::string command = options.positional[0];
  std::string input;
  if (options.positional.size() == 1 && !options.config.empty()) {
    // --config C [--random-init] [--weights W]: the config names the model.
  } else if (options.positional.size() != 2) {
    return usage("'" + command + "' takes exactly one input");
  } else {
    input = options.positional[1];
  }

  DialectRegistry registry;
  compiler::registerCompilerDialects(registry);
  MLIRContext context(registry);
  ScopedDiagnosticHandler warnings(&context, printWarning);
  Tool tool{argv[0], context, options};
  using Command = int (*)(const Tool &, const std::string &);
  static const std::pair<const char *, Command> commands[] = {
      {"compile", compileCommand}, {"eval", evalCommand},
      {"grad", gradCommand},       {"generate", generateCommand},
      {"bench", benchCommand},     {"info", infoCommand},
      {"train-step", trainStepCommand}, {"plan", planCommand},
      {"init-from-vanilla", initFromVanillaCommand}};
  for (const auto &[name, run] : commands)
    if (command == name)
      return run(tool, input);
  return usage("unknown command '" + command + "'");
}
