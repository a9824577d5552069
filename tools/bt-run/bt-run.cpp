//===- bt-run.cpp - compile and run Block Transformer checkpoints ----------===//
//
//   bt-run compile <checkpoint> [--emit bt|bt-layer|llvm|artifact|executable]
//                  [--target cpu] [--cpu NAME] [-o OUT]
//   bt-run compile <checkpoint> --target cuda
//                  [--emit executable|artifact|ptx|llvm|bt|bt-layer]
//                  [--cuda-path DIR] [--gpu-chip sm_90] [-o OUT]
//   bt-run eval <checkpoint|artifact|executable> --inputs IN -o OUT
//   bt-run grad <checkpoint|artifact|executable> --inputs IN -o OUT
//   bt-run generate <checkpoint|artifact|executable>
//                  (--inputs PROMPT.safetensors -o OUT | --prompt TEXT...)
//                  [--max-new-tokens N] [--greedy | --temperature T --top-k K
//                  --top-p P --seed S] [--official-generate-positions]
//                  [--ignore-eos]
//   bt-run info <checkpoint|artifact|executable>
//   bt-run init-from-vanilla <vanilla checkpoint> --config <block yaml> -o DIR
//   bt-run train (--config C | --resume DIR) --data FILE... -o DIR --steps N
//                [--tokenizer spm.model | --vocab-size V] [--init-seed S]
//                [loop options, bt/runtime/train.h]
//   bt-run plan <checkpoint|--config FILE> [--memory 80GiB] [--prompt 2048]
//               [--gen 128] [--batch N] [--dtype f32|bf16|f16]
//   bt-run bench [--device cpu] <checkpoint|artifact|executable | --config C
//                --random-init> [--setting forward,prefill-heavy,decode-heavy]
//                [--batch 1,8[,max]] [--memory 8GiB] [--seq-blocks N |
//                --tokens N] [--prompt P] [--gen G]
//                [--iters K] [--warmup W] [--threads T] [--csv OUT]
//                [--baseline torch|none] [--progress auto|bar|dots|none]
//   bt-run train-step <checkpoint|artifact|executable>
//                (--inputs BATCH | --grads GRADS) --lr X -o DIR
//                [--warmup-steps N] [--total-steps N] [--state-out FILE]
//                [--step-outputs FILE]
//
// A checkpoint is a directory with the official trainer YAML (config.yaml)
// or a resolved config.json, and model.safetensors (official tensor names);
// --config / --weights name the files explicitly; compile --tokenizer embeds a
// SentencePiece model (for generate --prompt). The pipeline
// (DESIGN.md §2): import (eval, eval_loss) → bt-generate-entry-points
// (prefill, decode_block, decode_tokens; vanilla prefill, decode_step) →
// [bt-generate-train-step (train_step, apply_gradients) for train-step and
// compile --train] →
// bt-decompose → bt-generate-gradients (grad: compile, and the grad command)
// → bt-lower-kv-caches → bt-cpu-pipeline → LLVM → shared object → artifact
// (docs/abi.md), optionally prefixed by the runtime
// launcher to make a standalone executable. MLIR's pass-manager options
// (--mlir-print-ir-after-all, --mlir-timing, ...) apply to the pipeline.
//
//===----------------------------------------------------------------------===//

#include "RuntimeBridge.h"

#include "bt/Codegen/CPUCodegen.h"
#include "bt/Codegen/CUDACodegen.h"
#include "bt/Codegen/Passes.h"
#include "bt/Codegen/Pipelines.h"
#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Import/Import.h"
#include "bt/Transforms/KVPlan.h"
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
#include "llvm/Support/Format.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <algorithm>
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
             "(layer-level IR), llvm (LLVM IR; the host code for cuda), "
             "artifact, executable, ptx (cuda: the kernels)"),
    cl::init("executable"), cl::cat(btCategory));
cl::opt<std::string> target("target",
                            cl::desc("Target: cpu, or cuda (NVIDIA GPUs, "
                                     "PTX for --gpu-chip)"),
                            cl::init("cpu"), cl::cat(btCategory));
cl::opt<std::string> cudaPath(
    "cuda-path",
    cl::desc("--target cuda: the CUDA toolkit whose libdevice resolves the "
             "kernels' math functions (default: the build's, usually "
             "/usr/local/cuda)"),
    cl::cat(btCategory));
cl::opt<std::string> gpuChip("gpu-chip",
                             cl::desc("--target cuda: the GPU architecture "
                                      "(default sm_90: H100/H200)"),
                             cl::init("sm_90"), cl::cat(btCategory));
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
cl::opt<uint64_t> seed("seed",
                       cl::desc("Seed of --random-init, and of generate's "
                                "sampling (with --temperature/--top-k/--top-p)"),
                       cl::init(0), cl::cat(btCategory));
cl::opt<std::string> inputsPath("inputs",
                                cl::desc("eval / generate: input tensors (safetensors)"),
                                cl::cat(btCategory));
cl::opt<std::string> launcherPath(
    "launcher", cl::desc("bt-launcher binary for --emit executable (default: "
                         "next to bt-run)"),
    cl::cat(btCategory));
// train-step (the runtime's command, bt/runtime/trainer.h) and compile --train.
cl::opt<bool> trainEntries(
    "train",
    cl::desc("compile: also build the training entry points train_step and "
             "apply_gradients (bt-generate-train-step)"),
    cl::cat(btCategory));
cl::opt<std::string> gradsPath(
    "grads",
    cl::desc("train-step: apply these gradients (grad.<name>, e.g. a fixture's "
             "outputs.safetensors) with apply_gradients instead of computing "
             "them from --inputs"),
    cl::cat(btCategory));
cl::opt<std::string> learningRate(
    "lr", cl::desc("train-step: peak learning rate (default 1e-3)"),
    cl::init("1e-3"), cl::cat(btCategory));
cl::opt<std::string> warmupSteps(
    "warmup-steps", cl::desc("train-step: LR warmup steps (default 0)"),
    cl::init("0"), cl::cat(btCategory));
cl::opt<std::string> totalSteps(
    "total-steps", cl::desc("train-step: total steps of the LR schedule "
                            "(default 0)"),
    cl::init("0"), cl::cat(btCategory));
cl::opt<std::string> stateOut(
    "state-out",
    cl::desc("train-step: also write the optimizer state (parameters, "
             "moments, step) to this safetensors file"),
    cl::cat(btCategory));

cl::opt<std::string> stepOutputs(
    "step-outputs",
    cl::desc("train-step: also write loss, grad_norm, lr and step to this "
             "safetensors file"),
    cl::cat(btCategory));

cl::opt<bool> noBlas("no-blas", cl::desc("Keep GEMMs as generated loops"),
                     cl::cat(btCategory));
cl::opt<bool> gradEntry(
    "grad-entry",
    cl::desc("compile: build the 'grad' entry point (loss and parameter "
             "gradients, bt-generate-gradients; default on). eval, generate "
             "and bench on a checkpoint never build it, grad always does"),
    cl::init(true), cl::cat(btCategory));
cl::opt<std::string> tokenizerPath(
    "tokenizer",
    cl::desc("compile / generate: SentencePiece model (.model) to embed in the "
             "artifact (for generate --prompt)"),
    cl::value_desc("spm.model"), cl::cat(btCategory));

// generate (passed on to the runtime's command, bt/runtime/commands.h).
cl::list<std::string> prompts("prompt",
                              cl::desc("generate: a text prompt (repeatable); "
                                       "plan, bench: prompt tokens (bench: "
                                       "replaces each generation setting's "
                                       "length)"),
                              cl::cat(btCategory));
cl::opt<std::string> maxNewTokens("max-new-tokens",
                                  cl::desc("generate: new tokens per prompt "
                                           "(default 32)"),
                                  cl::cat(btCategory));
cl::opt<bool> greedy("greedy", cl::desc("generate: argmax decoding (default)"),
                     cl::cat(btCategory));
cl::opt<std::string> temperature("temperature",
                                 cl::desc("generate: sample at this temperature "
                                          "(0 = greedy)"),
                                 cl::cat(btCategory));
cl::opt<std::string> topK("top-k", cl::desc("generate: sample among the K most "
                                            "likely tokens"),
                          cl::cat(btCategory));
cl::opt<std::string> topP("top-p", cl::desc("generate: nucleus sampling mass"),
                          cl::cat(btCategory));
cl::opt<bool> officialPositions(
    "official-generate-positions",
    cl::desc("generate: token-decoder positions of the official generate "
             "([0]*P, 1, 2, ..) instead of the training ones"),
    cl::cat(btCategory));
cl::opt<bool> ignoreEos("ignore-eos",
                        cl::desc("generate: do not stop sequences at EOS"),
                        cl::cat(btCategory));
cl::opt<bool> fuseLocalAttention(
    "fuse-local-attention",
    cl::desc("Fuse the token decoder's QKV split, rotary and local attention "
             "into one kernel (bt-fuse-local-attention; default on)"),
    cl::init(true), cl::cat(btCategory));
cl::opt<std::string> memoryBudget(
    "memory", cl::desc("plan, bench --batch max: memory budget, e.g. 80GiB "
                       "(binary), 80GB (decimal), or bytes (bench default: "
                       "this machine's available memory)"),
    cl::cat(btCategory));
cl::opt<int64_t> genTokens("gen", cl::desc("plan, bench: tokens to generate "
                                           "(bench: replaces each generation "
                                           "setting's length)"),
                           cl::init(128), cl::cat(btCategory));
cl::opt<std::string> planDType(
    "dtype",
    cl::desc("plan: element type of weights and caches: f32 (the compiled "
             "IR's, default), bf16, f16"),
    cl::init("f32"), cl::cat(btCategory));

// bench (options of the runtime's bench command, bt/runtime/bench.h).
cl::opt<std::string> device("device", cl::desc("bench: device (cpu)"),
                            cl::init("cpu"), cl::cat(btCategory));
cl::opt<std::string> batches(
    "batch",
    cl::desc("bench: batch sizes, comma-separated (default 1,8); 'max' adds "
             "the largest batch the KV-cache plan allows for --memory "
             "(generation settings); plan: one batch size to check against "
             "--memory"),
    cl::init("1,8"), cl::cat(btCategory));
cl::opt<std::string> benchSettings(
    "setting",
    cl::desc("bench: settings, comma-separated: forward (eval), prefill-heavy "
             "(2048 prompt / 128 generated tokens), decode-heavy (128 / 2048); "
             "NAME=P/G gives the lengths (default: all three)"),
    cl::init("forward,prefill-heavy,decode-heavy"), cl::cat(btCategory));
cl::opt<std::string> progressMode(
    "progress",
    cl::desc("bench: progress of generation calls: auto (a bar on a "
             "terminal, else dots), bar, dots, none"),
    cl::init("auto"), cl::cat(btCategory));
cl::opt<unsigned> seqBlocks("seq-blocks",
                            cl::desc("bench: blocks per row (tokens = N * L_B)"),
                            cl::init(0), cl::cat(btCategory));
cl::opt<unsigned> tokens("tokens",
                         cl::desc("bench: tokens per row (a multiple of L_B; "
                                  "default 512)"),
                         cl::init(0), cl::cat(btCategory));
cl::opt<unsigned> iters("iters", cl::desc("bench: timed calls per setting"),
                        cl::init(5), cl::cat(btCategory));
cl::opt<unsigned> warmup("warmup", cl::desc("bench: untimed calls first"),
                         cl::init(1), cl::cat(btCategory));
// bench --threads N: BLAS/intra-op threads of bt and of the PyTorch
// baseline. libLLVM already registers a (hidden) `threads` option, so this
// one is taken out of argv before LLVM's parser sees it (takeThreadsOption).
unsigned threads = 2;
cl::opt<std::string> csvPath("csv", cl::desc("bench: write the results as CSV"),
                             cl::value_desc("path"), cl::cat(btCategory));
cl::opt<std::string> baseline("baseline",
                              cl::desc("bench: torch (bench/bt_torch.py, same "
                                       "weights and threads) or none"),
                              cl::init("torch"), cl::cat(btCategory));
cl::opt<std::string> torchScript(
    "torch-script", cl::desc("bench: the PyTorch baseline script"),
    cl::init(BT_SOURCE_DIR "/bench/bt_torch.py"), cl::cat(btCategory));
cl::opt<std::string> torchMalloc(
    "torch-malloc",
    cl::desc("bench: glibc malloc of the PyTorch baseline: tuned (as bt's "
             "runtime: no mmap, no trim) or default"),
    cl::init("tuned"), cl::cat(btCategory));
cl::opt<std::string> pythonPath(
    "python", cl::desc("bench: Python with torch for the baseline (default "
                       "/usr/bin/python3, or $BT_PYTHON)"),
    cl::cat(btCategory));

constexpr const char *kUsage =
    "bt-run: compile and run Block Transformer checkpoints\n\n"
    "  bt-run compile <checkpoint> [--emit bt|bt-layer|llvm|artifact|executable]"
    " [-o OUT]\n"
    "  bt-run compile <checkpoint> --target cuda [--emit ptx|llvm|artifact|"
    "executable]\n         [--cuda-path DIR] [--gpu-chip sm_90] [-o OUT]\n"
    "  bt-run eval <checkpoint|artifact|executable> --inputs IN -o OUT\n"
    "  bt-run grad <checkpoint|artifact|executable> --inputs IN -o OUT\n"
    "  bt-run generate <checkpoint|artifact|executable>\n"
    "         (--inputs PROMPT.safetensors -o OUT | --prompt TEXT...) "
    "[--max-new-tokens N]\n"
    "         [--greedy | --temperature T --top-k K --top-p P --seed S]\n"
    "         [--official-generate-positions] [--ignore-eos]\n"
    "  bt-run info <checkpoint|artifact|executable>\n"
    "  bt-run init-from-vanilla <vanilla checkpoint> --config <block trainer "
    "yaml> -o DIR [--seed S]\n"
    "  bt-run plan <checkpoint|--config FILE> [--memory 80GiB] [--prompt 2048]"
    " [--gen 128] [--batch N] [--dtype f32|bf16|f16]\n"
    "  bt-run bench [--device cpu] <checkpoint|artifact|executable | --config C "
    "--random-init>\n"
    "               [--setting forward|prefill-heavy|decode-heavy[=P/G],...] "
    "[--batch 1,8[,max]] [--memory M]\n"
    "               [--seq-blocks N | --tokens N] [--prompt P] "
    "[--gen G] [--iters K] [--warmup W]\n"
    "               [--threads T (default 2)] [--csv OUT] [--baseline torch|none]"
    " [--progress auto|bar|dots|none]\n"
    "  bt-run train-step <checkpoint|artifact|executable> (--inputs BATCH | "
    "--grads GRADS)\n"
    "               [--lr 1e-3] [--warmup-steps N] [--total-steps N] -o DIR "
    "[--state-out FILE]\n"
    "               [--step-outputs FILE]\n"
    "  bt-run train (--config C | --resume DIR) --data FILE... -o DIR --steps N\n"
    "               [--tokenizer spm.model | --vocab-size V [--spm-model-type "
    "unigram|bpe]]\n"
    "               [--init-seed S | --init-from-vanilla DIR] [--cpu NAME] [the loop's options: bt-run train "
    "--help]\n";

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
  // In-out arguments (TensorSpec.inout; KV caches of the generation entry
  // points): a unit attribute, or a bool attribute that is true.
  if (Attribute io = attrs ? attrs.get("bt.inout") : Attribute())
    info.inout = !llvm::isa<BoolAttr>(io) || llvm::cast<BoolAttr>(io).getValue();
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
    if (!fn) {
      fail("internal error: no lowered entry point '" + e.name + "'");
      return failure();
    }
    // No attribute: the function reads no bt.param (e.g. train_step and
    // apply_gradients, whose weights are in-out arguments).
    auto params = fn->getAttrOfType<ArrayAttr>("bt.params");
    if (!params)
      continue;
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

/// Whether --target and --emit `emitKind` go together (checked before a
/// checkpoint is loaded).
LogicalResult checkTarget(const std::string &emitKind) {
  if (target != "cpu" && target != "cuda") {
    fail("--target " + target + ": expected cpu or cuda");
    return failure();
  }
  if (target == "cpu" && emitKind == "ptx") {
    fail("--emit ptx needs --target cuda");
    return failure();
  }
  return success();
}

/// --target cuda, after bt-lower-kv-caches: bt-cuda-pipeline; returns the
/// PTX of the kernels and leaves the host code (LLVM dialect) in `module`.
FailureOr<std::string> lowerCUDA(ModuleOp module,
                                 std::vector<bt::bridge::EntryInfo> &entries) {
  bt::CUDAPipelineOptions options;
  options.blas = !noBlas;
  options.fuseLocalAttention = static_cast<bool>(fuseLocalAttention);
  options.chip = std::string(gpuChip);
  if (!cudaPath.empty())
    options.cudaPath = std::string(cudaPath);
  if (failed(bt::runCUDAPipeline(module, options)) ||
      failed(setEntryParams(module, entries)))
    return failure();
  return bt::takePTX(module);
}

/// Compiles `model` as `--emit` asks. For artifact/executable, writes to
/// `outPath`; for IR, prints to `outPath` (stdout if empty). `thisMachine`:
/// the artifact runs here and now, so the kernels target the host CPU
/// unless --cpu says otherwise. `withGrad`: also build the `grad` entry point
/// (bt-generate-gradients).
/// Which training entry points compile builds (bt-generate-train-step).
struct TrainingEntries {
  bool trainStep = false;
  bool applyGradients = false;
};

LogicalResult compile(MLIRContext &context, const bt::bridge::Model &model,
                      const std::string &emitKind, const std::string &outPath,
                      const char *argv0, bool withGrad,
                      bool thisMachine = false,
                      TrainingEntries training = {}) {
  if (failed(checkTarget(emitKind)))
    return failure();
  if (target == "cuda") {
    // The backward and optimizer ops have no GPU lowering yet (issue 6):
    // the default grad entry is left out, an explicit request is an error.
    if (training.trainStep || training.applyGradients ||
        (withGrad && gradEntry.getNumOccurrences() > 0 && gradEntry)) {
      fail("--target cuda: the training entry points (grad, train_step, "
           "apply_gradients) are not implemented for the GPU yet; compile "
           "without --train / --grad-entry");
      return failure();
    }
    withGrad = false;
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
  // The KV-cache memory plan (bt-plan-kv-memory) of the imported model, as
  // `bt-run plan` computes it (from the model ops, before the generation
  // functions exist, so that both give the same numbers), stored as
  // per-sequence coefficients for the runtime (bench --batch max, memory
  // per sample).
  bt::bridge::KVPlanInfo kvPlanInfo;
  {
    FailureOr<bt::KVPlan> plan = bt::computeKVPlan(*module, {});
    if (failed(plan))
      return failure();
    kvPlanInfo.blockLength = plan->vanilla ? 1 : plan->blockLength;
    kvPlanInfo.globalBytesPerEntry = plan->global.bytesPerEntry();
    kvPlanInfo.localBytesPerSequence = plan->localBytesPerSequence;
    kvPlanInfo.weightBytes = plan->weightBytes;
    kvPlanInfo.source = plan->source;
  }

  // The generation entry points, derived from the forward.
  if (failed(runPasses([&](PassManager &pm) {
        pm.addPass(bt::createBTGenerateEntryPoints());
        pm.addPass(bt::createBTVerifyKVLifetimes());
        if (training.trainStep || training.applyGradients) {
          bt::BTGenerateTrainStepOptions train;
          train.trainStep = training.trainStep;
          train.applyGradients = training.applyGradients;
          pm.addPass(bt::createBTGenerateTrainStep(train));
        }
      })))
    return failure();
  if (emitKind == "bt")
    return writeText(outPath, [&](llvm::raw_ostream &os) { module->print(os); });

  if (failed(runPasses([&](PassManager &pm) {
        pm.addPass(bt::createBTDecompose());
        pm.addPass(bt::createBTVerifyKVLifetimes());
        // grad: loss and d loss / d param, from eval_loss.
        if (withGrad)
          pm.addPass(bt::createBTGenerateGradients());
      })))
    return failure();
  if (emitKind == "bt-layer")
    return writeText(outPath, [&](llvm::raw_ostream &os) { module->print(os); });

  // KV caches → in-out tensors, so that the entry points have their final
  // signatures (the pipelines run this pass again, with nothing to do); on
  // the CUDA target their attention becomes the GPU kernels here.
  if (failed(runPasses([](PassManager &pm) {
        bt::BTLowerKVCachesOptions caches;
        caches.gpuAttention = target == "cuda";
        pm.addPass(bt::createBTLowerKVCaches(caches));
      })))
    return failure();
  std::vector<bt::bridge::EntryInfo> entries = collectEntries(*module);
  // The CUDA target: the kernels as PTX, the rest as for the CPU on the
  // host code (docs/codegen-cuda.md).
  bt::bridge::GPUArtifactInfo gpu;
  if (target == "cuda") {
    FailureOr<std::string> ptx = lowerCUDA(*module, entries);
    if (failed(ptx))
      return failure();
    if (emitKind == "ptx")
      return writeText(outPath, [&](llvm::raw_ostream &os) { os << *ptx; });
    gpu.ptx = std::move(*ptx);
    gpu.chip = std::string(gpuChip);
  } else {
    bt::CPUPipelineOptions pipelineOptions;
    pipelineOptions.blas = !noBlas;
    pipelineOptions.fuseLocalAttention = static_cast<bool>(fuseLocalAttention);
    if (failed(bt::runCPUPipeline(*module, pipelineOptions)) ||
        failed(setEntryParams(*module, entries)))
      return failure();
  }
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
  std::string error, tokenizer;
  if (!tokenizerPath.empty() &&
      !bt::bridge::readTokenizer(model, tokenizerPath, tokenizer, error)) {
    fail(error);
    return failure();
  }
  if (!bt::bridge::writeArtifact(model, entries, *so, cpu, launcher, outPath,
                                 error, tokenizer, kvPlanInfo, gpu)) {
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
               const std::vector<std::string> &launcherArgs, const char *argv0,
               bool progress = false, TrainingEntries training = {}) {
  if (!input.empty() && bt::bridge::isArtifact(input))
    return bt::bridge::runLauncher(input, launcherArgs);
  std::unique_ptr<bt::bridge::Model> model = loadModel(input, true);
  if (!model)
    return 1;
  std::string artifact = temporaryArtifact();
  if (artifact.empty())
    return fail("cannot create a temporary file");
  if (progress)
    llvm::errs() << "bt-run: compiling " << model->spec().name
                 << " for this machine ... ";
  llvm::TimeRecord start = llvm::TimeRecord::getCurrentTime(true);
  // Only `grad` needs the backward sweep (it doubles the compile time).
  bool withGrad = !launcherArgs.empty() && launcherArgs[0] == "grad";
  bool ok = succeeded(compile(context, *model, "artifact", artifact, argv0,
                              withGrad, /*thisMachine=*/true, training));
  if (progress && ok)
    llvm::errs() << llvm::format(
        "done (%.1f s)\n",
        llvm::TimeRecord::getCurrentTime(false).getWallTime() -
            start.getWallTime());
  model.reset(); // the weights now live in the artifact
  int rc = !ok ? 1 : bt::bridge::runLauncher(artifact, launcherArgs);
  llvm::sys::fs::remove(artifact);
  return rc;
}

/// `bt-run plan`: the KV-cache memory plan (bt-plan-kv-memory) of a model.
int plan(MLIRContext &context, const std::string &input) {
  bt::KVPlanRequest request;
  // `--prompt` is shared with generate (text there); plan takes a token count.
  int64_t promptTokens = 2048;
  if (prompts.size() > 1 ||
      (prompts.size() == 1 &&
       llvm::StringRef(prompts[0]).getAsInteger(10, promptTokens)))
    return usage("plan: --prompt takes one token count, e.g. --prompt 2048");
  request.promptTokens = promptTokens;
  request.genTokens = genTokens;
  // `--batch` is shared with bench (a list there); plan takes one size.
  int64_t planBatch = 0;
  if (batches.getNumOccurrences() &&
      llvm::StringRef(batches).getAsInteger(10, planBatch))
    return usage("plan: --batch takes one batch size, e.g. --batch 64");
  request.batch = planBatch;
  if (promptTokens < 0 || genTokens < 0 || planBatch < 0)
    return usage("--prompt, --gen and --batch must be >= 0");
  if (!memoryBudget.empty() &&
      !bt::parseByteSize(memoryBudget, request.memoryBytes))
    return usage("--memory " + memoryBudget +
                 ": expected a size such as 80GiB, 80GB or 1073741824");
  if (planDType == "bf16" || planDType == "f16")
    request.eltBytes = 2;
  else if (planDType != "f32")
    return usage("--dtype " + planDType + ": expected f32, bf16 or f16");
  std::unique_ptr<bt::bridge::Model> model = loadModel(input, false);
  if (!model)
    return 1;
  OwningOpRef<ModuleOp> module = bt::importModel(&context, model->spec());
  if (!module)
    return 1;
  FailureOr<bt::KVPlan> kvPlan = bt::computeKVPlan(*module, request);
  if (failed(kvPlan))
    return 1;
  bt::printKVPlan(llvm::outs(), *kvPlan, model->spec().name);
  return 0;
}

/// Removes `--threads N` / `--threads=N` (also with one dash) from the
/// arguments into `threads`. Returns false (after a message) on a bad value.
bool takeThreadsOption(int &argc, char **argv) {
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef a = argv[i];
    if (a == "--") {
      for (; i < argc; ++i)
        argv[out++] = argv[i];
      break;
    }
    llvm::StringRef value;
    if (a == "--threads" || a == "-threads") {
      if (i + 1 >= argc) {
        usage("--threads needs a value");
        return false;
      }
      value = argv[++i];
    } else if (a.consume_front("--threads=") || a.consume_front("-threads=")) {
      value = a;
    } else {
      argv[out++] = argv[i];
      continue;
    }
    if (value.getAsInteger(10, threads) || threads == 0) {
      usage("--threads " + value + ": expected a positive integer");
      return false;
    }
  }
  argc = out;
  argv[argc] = nullptr;
  return true;
}

} // namespace

/// `bt-run train`: prepares the tokenizer and the config
/// (bt::bridge::prepareTraining), compiles a randomly initialized model
/// (--init-seed; official initialization) with the training entry points
/// into OUT/model.btart, and runs the launcher's `train` on it. Options of
/// its own: --config, --tokenizer, --vocab-size, --spm-model-type,
/// --init-seed, --cpu (and --threads, taken out before); every other
/// argument belongs to the loop (bt/runtime/train.h).
int trainCommand(int argc, char **argv) {
  std::vector<std::string> loop;
  std::string config, tokenizer, spmType = "unigram", cpu, vanillaInit;
  int64_t vocab = 0;
  uint64_t initSeed = 0;
  for (int i = 2; i < argc; ++i) {
    llvm::StringRef a = argv[i];
    if (a == "-h" || a == "--help") {
      llvm::outs() << "usage: bt-run train (--config C | --resume DIR) --data FILE... "
                      "-o DIR --steps N\n"
                      "         [--tokenizer spm.model | --vocab-size V [--spm-model-type "
                      "unigram|bpe]]\n"
                      "         [--init-seed S | --init-from-vanilla VANILLA_DIR] "
                      "[--cpu NAME] [--threads T]\n"
                      "the loop's options:\n  "
                   << bt::bridge::trainLoopUsage();
      return 0;
    }
    std::string name = a.str(), value;
    bool inlineValue = false;
    if (a.starts_with("--") && a.contains('=')) {
      name = a.split('=').first.str();
      value = a.split('=').second.str();
      inlineValue = true;
    }
    auto take = [&]() -> bool {
      if (inlineValue)
        return true;
      if (i + 1 >= argc)
        return false;
      value = argv[++i];
      return true;
    };
    if (name == "--config" || name == "--tokenizer" || name == "--spm-model-type" ||
        name == "--cpu" || name == "--vocab-size" || name == "--init-seed" ||
        name == "--init-from-vanilla") {
      if (!take())
        return usage("train: " + name + " needs a value");
      if (name == "--config")
        config = value;
      else if (name == "--tokenizer")
        tokenizer = value;
      else if (name == "--spm-model-type")
        spmType = value;
      else if (name == "--cpu")
        cpu = value;
      else if (name == "--init-from-vanilla")
        vanillaInit = value;
      else if (name == "--vocab-size" &&
               (llvm::StringRef(value).getAsInteger(10, vocab) || vocab < 2))
        return usage("train: --vocab-size " + value + ": expected an integer >= 2");
      else if (name == "--init-seed" && llvm::StringRef(value).getAsInteger(10, initSeed))
        return usage("train: --init-seed " + value + ": expected an integer >= 0");
      continue;
    }
    loop.push_back(argv[i]);
  }
  if (spmType != "unigram" && spmType != "bpe")
    return usage("train: --spm-model-type " + spmType + ": expected unigram or bpe");
  if (!tokenizer.empty() && vocab != 0)
    return usage("train: --vocab-size applies when the tokenizer is trained; drop it "
                 "with --tokenizer");
  loop.insert(loop.end(), {"--threads", std::to_string(threads)});
  // --baseline torch: this source tree's PyTorch model unless named.
  if (std::find(loop.begin(), loop.end(), "--torch-script") == loop.end())
    loop.insert(loop.end(), {"--torch-script", BT_SOURCE_DIR "/bench/bt_torch.py"});
  // The compiler's own options (pass manager, --cpu) must be registered and
  // parsed for compile().
  std::vector<std::string> clStrings = {argv[0], "train"};
  if (!cpu.empty())
    clStrings.push_back("--cpu=" + cpu);
  std::vector<const char *> clArgs;
  for (const std::string &s : clStrings)
    clArgs.push_back(s.c_str());
  cl::ParseCommandLineOptions(static_cast<int>(clArgs.size()), clArgs.data(), kUsage);

  std::string compileConfig, tokenizerFile, outDir, error;
  bool usageError = false;
  if (!bt::bridge::prepareTraining(loop, config, tokenizer, vocab, spmType, compileConfig,
                                   tokenizerFile, outDir, error, usageError))
    return usageError ? usage(error) : fail(error);
  std::unique_ptr<bt::bridge::Model> model =
      vanillaInit.empty()
          ? bt::bridge::randomModel(compileConfig, initSeed, error)
          : bt::bridge::vanillaInitModel(compileConfig, vanillaInit, initSeed, error);
  if (!model)
    return fail(error);
  tokenizerPath = tokenizerFile;
  DialectRegistry registry;
  registry.insert<bt::BTDialect>();
  bt::registerCPUCodegenDialects(registry);
  MLIRContext context(registry);
  const std::string artifact = outDir + "/model.btart";
  llvm::errs() << "bt-run: compiling " << model->spec().name
               << " with train_step for this machine ... ";
  llvm::TimeRecord start = llvm::TimeRecord::getCurrentTime(true);
  TrainingEntries training;
  training.trainStep = true;
  if (failed(compile(context, *model, "artifact", artifact, argv[0], /*withGrad=*/false,
                     /*thisMachine=*/true, training)))
    return 1;
  llvm::errs() << llvm::format("done (%.1f s) -> %s\n",
                               llvm::TimeRecord::getCurrentTime(false).getWallTime() -
                                   start.getWallTime(),
                               artifact.c_str());
  model.reset(); // the weights now live in the artifact
  std::vector<std::string> args = {"train"};
  args.insert(args.end(), loop.begin(), loop.end());
  return bt::bridge::runLauncher(artifact, args);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  if (!takeThreadsOption(argc, argv))
    return 2;
  if (argc > 1 && llvm::StringRef(argv[1]) == "train") {
    bt::registerBTTransformsPasses();
    bt::registerBTCodegenPasses();
    registerAsmPrinterCLOptions();
    registerMLIRContextCLOptions();
    registerPassManagerCLOptions();
    registerDefaultTimingManagerCLOptions();
    return trainCommand(argc, argv);
  }
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
  std::string input;
  if (positional.size() == 1 && !configPath.empty()) {
    // --config C [--random-init] [--weights W]: the config names the model.
  } else if (positional.size() != 2) {
    return usage("'" + command + "' takes exactly one input");
  } else {
    input = positional[1];
  }

  DialectRegistry registry;
  registry.insert<bt::BTDialect>();
  bt::registerCUDACodegenDialects(registry);
  MLIRContext context(registry);

  if (command == "compile") {
    static const llvm::StringSet<> kinds = {"bt",       "bt-layer",
                                            "llvm",     "artifact",
                                            "executable", "ptx"};
    if (!kinds.contains(emit))
      return usage("--emit " + emit +
                   ": expected bt, bt-layer, llvm, artifact, executable or ptx");
    if (failed(checkTarget(emit)))
      return 1;
    bool binary = emit == "artifact" || emit == "executable";
    if (binary && outputPath.empty())
      return usage("compile --emit " + emit + " needs -o <path>");
    std::unique_ptr<bt::bridge::Model> model = loadModel(input, binary);
    if (!model)
      return 1;
    TrainingEntries training;
    training.trainStep = training.applyGradients = trainEntries;
    return failed(compile(context, *model, emit, outputPath, argv[0],
                          gradEntry, /*thisMachine=*/false, training))
               ? 1
               : 0;
  }
  if (command == "eval") {
    if (inputsPath.empty() || outputPath.empty())
      return usage("eval needs --inputs <file> and -o <file>");
    return runOnModel(context, input, {"eval", "--inputs", inputsPath, "-o", outputPath},
                      argv[0]);
  }
  if (command == "grad") {
    if (inputsPath.empty() || outputPath.empty())
      return usage("grad needs --inputs <file> and -o <file>");
    return runOnModel(context, input, {"grad", "--inputs", inputsPath, "-o", outputPath},
                      argv[0]);
  }
  if (command == "generate") {
    std::vector<std::string> args = {"generate"};
    if (!inputsPath.empty())
      args.insert(args.end(), {"--inputs", inputsPath});
    for (const std::string &p : prompts)
      args.insert(args.end(), {"--prompt", p});
    if (!outputPath.empty())
      args.insert(args.end(), {"-o", outputPath});
    if (!maxNewTokens.empty())
      args.insert(args.end(), {"--max-new-tokens", maxNewTokens});
    if (greedy)
      args.push_back("--greedy");
    const bool sampling = temperature.getNumOccurrences() > 0 ||
                          topK.getNumOccurrences() > 0 ||
                          topP.getNumOccurrences() > 0;
    if (temperature.getNumOccurrences())
      args.insert(args.end(), {"--temperature", temperature});
    if (topK.getNumOccurrences())
      args.insert(args.end(), {"--top-k", topK});
    if (topP.getNumOccurrences())
      args.insert(args.end(), {"--top-p", topP});
    if (sampling && seed.getNumOccurrences())
      args.insert(args.end(), {"--seed", std::to_string(seed)});
    if (officialPositions)
      args.push_back("--official-generate-positions");
    if (ignoreEos)
      args.push_back("--ignore-eos");
    if (!prompts.empty() && tokenizerPath.empty() &&
        !bt::bridge::isArtifact(input))
      return usage("generate --prompt on a checkpoint needs --tokenizer <spm.model>");
    if (!tokenizerPath.empty() && bt::bridge::isArtifact(input))
      return usage("--tokenizer applies when compiling a checkpoint; " + input +
                   " is already compiled");
    return runOnModel(context, input, args, argv[0]);
  }
  if (command == "bench") {
    std::vector<std::string> args = {
        "bench",       "--device",  device,
        "--batch",     batches,     "--iters",
        std::to_string(iters),      "--warmup",
        std::to_string(warmup),     "--threads",
        std::to_string(threads),    "--baseline",
        baseline,      "--torch-script", torchScript,
        "--seed",      std::to_string(seed),
        "--torch-malloc", torchMalloc,
        "--progress",  progressMode};
    if (benchSettings.getNumOccurrences())
      args.insert(args.end(), {"--setting", benchSettings});
    if (seqBlocks && tokens)
      return usage("bench: give --seq-blocks or --tokens, not both");
    // `--prompt` is shared with generate (text there) and plan; bench takes
    // one token count. `--gen` defaults to plan's 128: forwarded only when
    // given, so that each setting keeps its own length otherwise.
    if (prompts.size() > 1)
      return usage("bench: --prompt takes one token count, e.g. --prompt 512");
    if (prompts.size() == 1)
      args.insert(args.end(), {"--prompt", prompts[0]});
    if (genTokens.getNumOccurrences())
      args.insert(args.end(), {"--gen", std::to_string(genTokens)});
    if (!memoryBudget.empty())
      args.insert(args.end(), {"--memory", memoryBudget});
    if (seqBlocks)
      args.insert(args.end(), {"--seq-blocks", std::to_string(seqBlocks)});
    if (tokens)
      args.insert(args.end(), {"--tokens", std::to_string(tokens)});
    if (!csvPath.empty())
      args.insert(args.end(), {"--csv", csvPath});
    if (!pythonPath.empty())
      args.insert(args.end(), {"--python", pythonPath});
    if (device != "cpu")
      return fail("bench --device " + device +
                  ": only 'cpu' is implemented in this version");
    return runOnModel(context, input, args, argv[0], /*progress=*/true);
  }
  if (command == "init-from-vanilla") {
    if (configPath.empty() || outputPath.empty())
      return usage("init-from-vanilla needs --config <block trainer yaml> and "
                   "-o <new checkpoint directory>");
    std::string error;
    if (!bt::bridge::initFromVanilla(input, configPath, outputPath, seed, error))
      return fail(error);
    return 0;
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
  if (command == "train-step") {
    if (inputsPath.empty() == gradsPath.empty())
      return usage("train-step needs --inputs <batch> or --grads <gradients>");
    if (outputPath.empty())
      return usage("train-step needs -o <checkpoint directory>");
    std::vector<std::string> args = {
        "train-step",     "-o",          outputPath,   "--lr",
        learningRate,     "--warmup-steps", warmupSteps, "--total-steps",
        totalSteps};
    if (!inputsPath.empty())
      args.insert(args.end(), {"--inputs", inputsPath});
    else
      args.insert(args.end(), {"--grads", gradsPath});
    if (!stateOut.empty())
      args.insert(args.end(), {"--state-out", stateOut});
    if (!stepOutputs.empty())
      args.insert(args.end(), {"--step-outputs", stepOutputs});
    TrainingEntries training;
    // apply_gradients needs no differentiation; train_step does.
    training.applyGradients = true;
    training.trainStep = gradsPath.empty();
    if (!bt::bridge::isArtifact(input) && !randomInit) {
      // The checkpoint the step starts from: its weights (as compiled), its
      // unused tensors and its config are written back.
      if (llvm::sys::fs::is_directory(input) && weightsPath.empty())
        args.insert(args.end(), {"--checkpoint", input});
      if (!configPath.empty())
        args.insert(args.end(), {"--config-file", configPath});
      else if (!llvm::sys::fs::is_directory(input))
        args.insert(args.end(), {"--config-file", input});
    }
    return runOnModel(context, input, args, argv[0], /*progress=*/false,
                      training);
  }
  if (command == "plan")
    return plan(context, input);
  return usage("unknown command '" + command + "'");
}
