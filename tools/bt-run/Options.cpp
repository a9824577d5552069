//===- Options.cpp - bt-run's command line --------------------------------===//
//
// bt-run's options (Options.h): one llvm::cl option per RunOptions field,
// stored into it (cl::location), and the parse that hides every option
// that is not bt-run's from --help.
//
//===----------------------------------------------------------------------===//

#include "Options.h"

#include "bt/Codegen/CUDA/Passes.h"
#include "bt/Codegen/Passes.h"
#include "bt/Transforms/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/WithColor.h"

using namespace bt::run;
namespace cl = llvm::cl;

namespace {

/// Where the options below store their values.
RunOptions S;

cl::OptionCategory btCategory("bt-run options");

cl::list<std::string, std::vector<std::string>> positional(cl::Positional, cl::desc("<command> <input>"),
                                 cl::location(S.positional), cl::cat(btCategory));
cl::opt<std::string, true> outputPath("o", cl::desc("Output file"),
                                cl::value_desc("path"), cl::location(S.output), cl::cat(btCategory));
cl::opt<std::string, true> emit(
    "emit",
    cl::desc("compile: what to write — bt (model-level IR), bt-layer "
             "(layer-level IR), llvm (LLVM IR; the host code for cuda), "
             "artifact, executable, ptx (cuda: the kernels), nvvm (cuda: "
             "the kernels' NVVM gpu.module as it goes to PTX), emu-llvm "
             "(cuda: the kernels as the CUDA emulator runs them, LLVM IR)"),
    cl::location(S.emit), cl::cat(btCategory));
cl::opt<std::string, true> target("target",
                            cl::desc("Target: cpu, or cuda (NVIDIA GPUs, "
                                     "PTX for --gpu-chip)"), cl::location(S.target), cl::cat(btCategory));
cl::opt<std::string, true> cudaPath(
    "cuda-path",
    cl::desc("--target cuda: the CUDA toolkit whose libdevice resolves the "
             "kernels' math functions (default: the build's, usually "
             "/usr/local/cuda)"),
    cl::location(S.cudaPath), cl::cat(btCategory));
cl::opt<std::string, true> nvvmKernels(
    "nvvm-kernels",
    cl::desc("compile --target cuda: use the kernels of this file (a "
             "gpu.module as `--emit nvvm` writes it, e.g. edited to debug a "
             "kernel) instead of the generated ones, for the PTX and the "
             "CUDA emulator (docs/cuda-emulator.md)"),
    cl::value_desc("nvvm.mlir"), cl::location(S.nvvmKernels),
    cl::cat(btCategory));
cl::opt<std::string, true> cacheDir(
    "cache-dir",
    cl::desc("Commands that compile: keep the compiled kernels (host code, "
             "PTX, the CUDA emulator's kernels) in this directory, keyed by "
             "the module, the codegen options and this build of bt, and "
             "reuse them (default: $BT_CACHE_DIR; none when unset; "
             "docs/codegen.md, \"Compile cache\")"),
    cl::value_desc("dir"), cl::location(S.cacheDir), cl::cat(btCategory));
cl::opt<std::string, true> gpuChip("gpu-chip",
                             cl::desc("--target cuda: the GPU architecture "
                                      "(default sm_90: H100/H200)"), cl::location(S.gpuChip), cl::cat(btCategory));
cl::opt<std::string, true> cpuName(
    "cpu",
    cl::desc("LLVM CPU of the kernels: 'native' (this machine), or a name such "
             "as x86-64-v3, znver4, sapphirerapids. Default: x86-64-v3 for "
             "compile (portable to any AVX2 machine), native for eval"), cl::location(S.cpu), cl::cat(btCategory));
cl::opt<std::string, true> configPath("config",
                                cl::desc("Model config (YAML or JSON) to use "
                                         "instead of the checkpoint's"),
                                cl::location(S.config), cl::cat(btCategory));
cl::opt<std::string, true> weightsPath("weights",
                                 cl::desc("model.safetensors to use instead "
                                          "of the checkpoint's"),
                                 cl::location(S.weights), cl::cat(btCategory));
cl::opt<bool, true> randomInit("random-init",
                         cl::desc("Random weights instead of the checkpoint's "
                                  "(needs only a config)"),
                         cl::location(S.randomInit), cl::cat(btCategory));
cl::opt<bool, true> seededWeights(
    "seeded-weights",
    cl::desc("With --random-init, compile: the artifact stores the seed, not "
             "the weights; the runtime draws the same weights when it loads "
             "it (small artifacts of large random-weight models)"),
    cl::location(S.seededWeights), cl::cat(btCategory));
cl::opt<uint64_t, true> seed("seed",
                       cl::desc("Seed of --random-init, and of generate's "
                                "sampling (with --temperature/--top-k/--top-p)"), cl::location(S.seed), cl::callback([](const uint64_t &) { S.seedGiven = true; }), cl::cat(btCategory));
cl::opt<std::string, true> inputsPath("inputs",
                                cl::desc("eval / generate: input tensors (safetensors)"),
                                cl::location(S.inputs), cl::cat(btCategory));
cl::opt<std::string, true> launcherPath(
    "launcher", cl::desc("bt-launcher binary for --emit executable (default: "
                         "next to bt-run)"),
    cl::location(S.launcher), cl::cat(btCategory));
// train-step (the runtime's command, bt/runtime/trainer.h) and compile --train.
cl::opt<bool, true> trainEntries(
    "train",
    cl::desc("compile: also build the training entry points train_step and "
             "apply_gradients (bt-generate-train-step)"),
    cl::location(S.trainEntries), cl::cat(btCategory));
cl::opt<std::string, true> gradsPath(
    "grads",
    cl::desc("train-step: apply these gradients (grad.<name>, e.g. a fixture's "
             "outputs.safetensors) with apply_gradients instead of computing "
             "them from --inputs"),
    cl::location(S.grads), cl::cat(btCategory));
cl::opt<std::string, true> learningRate(
    "lr", cl::desc("train-step: peak learning rate (default 1e-3)"), cl::location(S.learningRate), cl::cat(btCategory));
cl::opt<std::string, true> warmupSteps(
    "warmup-steps", cl::desc("train-step: LR warmup steps (default 0)"), cl::location(S.warmupSteps), cl::cat(btCategory));
cl::opt<std::string, true> totalSteps(
    "total-steps", cl::desc("train-step: total steps of the LR schedule "
                            "(default 0)"), cl::location(S.totalSteps), cl::cat(btCategory));
cl::opt<std::string, true> stateOut(
    "state-out",
    cl::desc("train-step: also write the optimizer state (parameters, "
             "moments, step) to this safetensors file"),
    cl::location(S.stateOut), cl::cat(btCategory));

cl::opt<std::string, true> stepOutputs(
    "step-outputs",
    cl::desc("train-step: also write loss, grad_norm, lr and step to this "
             "safetensors file"),
    cl::location(S.stepOutputs), cl::cat(btCategory));

cl::opt<bool, true> noBlas("no-blas", cl::desc("Keep GEMMs as generated loops"),
                     cl::location(S.noBlas), cl::cat(btCategory));
cl::opt<bool, true> gradEntry(
    "grad-entry",
    cl::desc("compile: build the 'grad' entry point (loss and parameter "
             "gradients, bt-generate-gradients; default on, with --target cuda "
             "only with --train). eval, generate "
             "and bench on a checkpoint never build it, grad always does"), cl::location(S.gradEntry), cl::callback([](const bool &) { S.gradEntryGiven = true; }), cl::cat(btCategory));
cl::opt<std::string, true> tokenizerPath(
    "tokenizer",
    cl::desc("compile / generate: SentencePiece model (.model) or Hugging Face "
             "tokenizer.json (byte-level BPE: GPT-2, Pythia) to embed in the "
             "artifact (for generate --prompt)"),
    cl::value_desc("spm.model|tokenizer.json"), cl::location(S.tokenizer),
    cl::cat(btCategory));

// generate (passed on to the runtime's command, bt/runtime/commands.h).
cl::list<std::string, std::vector<std::string>> prompts("prompt",
                              cl::desc("generate: a text prompt (repeatable); "
                                       "plan, bench: prompt tokens (bench: "
                                       "replaces each generation setting's "
                                       "length)"),
                              cl::location(S.prompts), cl::cat(btCategory));
cl::opt<std::string> maxNewTokens("max-new-tokens",
                                  cl::desc("generate: new tokens per prompt "
                                           "(default 32)"),
                                  cl::callback([](const std::string &v) { S.generate.max_new_tokens = v; }), cl::cat(btCategory));
cl::opt<bool, true> greedy("greedy", cl::desc("generate: argmax decoding (default)"),
                     cl::location(S.generate.greedy), cl::cat(btCategory));
cl::opt<std::string> temperature("temperature",
                                 cl::desc("generate: sample at this temperature "
                                          "(0 = greedy)"),
                                 cl::callback([](const std::string &v) { S.generate.temperature = v; }), cl::cat(btCategory));
cl::opt<std::string> topK("top-k", cl::desc("generate: sample among the K most "
                                            "likely tokens"),
                          cl::callback([](const std::string &v) { S.generate.top_k = v; }), cl::cat(btCategory));
cl::opt<std::string> topP("top-p", cl::desc("generate: nucleus sampling mass"),
                          cl::callback([](const std::string &v) { S.generate.top_p = v; }), cl::cat(btCategory));
cl::opt<bool, true> officialPositions(
    "official-generate-positions",
    cl::desc("generate: token-decoder positions of the official generate "
             "([0]*P, 1, 2, ..) instead of the training ones"),
    cl::location(S.generate.official_generate_positions), cl::cat(btCategory));
cl::opt<bool, true> ignoreEos("ignore-eos",
                        cl::desc("generate: do not stop sequences at EOS"),
                        cl::location(S.generate.ignore_eos), cl::cat(btCategory));
cl::opt<bool, true> fuseLocalAttention(
    "fuse-local-attention",
    cl::desc("Fuse the token decoder's QKV split, rotary and local attention "
             "into one kernel (bt-fuse-local-attention; default on)"), cl::location(S.fuseLocalAttention), cl::cat(btCategory));
cl::opt<std::string, true> memoryBudget(
    "memory", cl::desc("plan, bench --batch max: memory budget, e.g. 80GiB "
                       "(binary), 80GB (decimal), or bytes (bench default: "
                       "this machine's available memory)"),
    cl::location(S.memory), cl::cat(btCategory));
cl::opt<int64_t, true> genTokens("gen", cl::desc("plan, bench: tokens to generate "
                                           "(bench: replaces each generation "
                                           "setting's length)"), cl::location(S.genTokens), cl::callback([](const int64_t &) { S.genTokensGiven = true; }), cl::cat(btCategory));
cl::opt<std::string, true> planDType(
    "dtype",
    cl::desc("plan: element type of weights and caches: f32 (the compiled "
             "IR's, default), bf16, f16. Commands that compile for --target "
             "cuda: bf16 (the default for inference: GEMM weights, their "
             "inputs and products, KV caches and sampled logits in bf16, f32 "
             "accumulation; docs/codegen-cuda.md, \"bf16\") or f32 (the "
             "fixture checks; the default with --train and for grad and "
             "train-step, which are compiled in f32 only)"),
    cl::location(S.planDType), cl::cat(btCategory));

// bench (options of the runtime's bench command, bt/runtime/bench.h).
cl::opt<std::string, true> device(
    "device",
    cl::desc("eval, generate, grad, train-step, bench: the device to run on: "
             "cpu, cuda, or cuda-emu (the CUDA emulator: the kernels of a "
             "--target cuda artifact on the CPU, with memory and "
             "synchronization checks; docs/cuda-emulator.md). Default: the "
             "artifact's"),
    cl::location(S.device), cl::cat(btCategory));
cl::opt<std::string, true> batches(
    "batch",
    cl::desc("bench: batch sizes, comma-separated (default 1,8); 'max' adds "
             "the largest batch the KV-cache plan allows for --memory "
             "(generation settings); plan: one batch size to check against "
             "--memory"), cl::location(S.batches), cl::callback([](const std::string &) { S.batchesGiven = true; }), cl::cat(btCategory));
cl::opt<std::string, true> benchSettings(
    "setting",
    cl::desc("bench: settings, comma-separated: forward (eval), prefill-heavy "
             "(2048 prompt / 128 generated tokens), decode-heavy (128 / 2048); "
             "NAME=P/G gives the lengths; train (one train_step per call, "
             "no PyTorch baseline) (default: the first three)"), cl::location(S.bench.settings), cl::cat(btCategory));
cl::opt<std::string, true> progressMode(
    "progress",
    cl::desc("bench: progress of generation calls: auto (a bar on a "
             "terminal, else dots), bar, dots, none"), cl::location(S.bench.progress), cl::cat(btCategory));
cl::opt<std::string, true> emuLengths(
    "emu-lengths",
    cl::desc("bench --device cuda-emu: PROMPT/GEN lengths of the counted "
             "generation runs instead of each setting's (a run the emulator "
             "can finish); with --batch max the planned max batch is not "
             "run but derived at the setting's own lengths from the largest "
             "counted batch (docs/bench.md)"),
    cl::location(S.bench.emuLengths), cl::cat(btCategory));
cl::opt<unsigned, true> seqBlocks("seq-blocks",
                            cl::desc("bench: blocks per row (tokens = N * L_B)"), cl::location(S.bench.seqBlocks), cl::cat(btCategory));
cl::opt<unsigned, true> tokens("tokens",
                         cl::desc("bench: tokens per row (a multiple of L_B; "
                                  "default 512)"), cl::location(S.bench.tokens), cl::cat(btCategory));
cl::opt<unsigned, true> iters("iters", cl::desc("bench: timed calls per setting"), cl::location(S.bench.iters), cl::cat(btCategory));
cl::opt<unsigned, true> warmup("warmup", cl::desc("bench: untimed calls first"), cl::location(S.bench.warmup), cl::cat(btCategory));
cl::opt<std::string, true> csvPath("csv", cl::desc("bench: write the results as CSV"),
                             cl::value_desc("path"), cl::location(S.bench.csv), cl::cat(btCategory));
cl::opt<std::string, true> baseline("baseline",
                              cl::desc("bench: torch (bench/bt_torch.py, same "
                                       "weights and threads) or none"), cl::location(S.bench.baseline), cl::cat(btCategory));
cl::opt<std::string, true> torchScript(
    "torch-script", cl::desc("bench: the PyTorch baseline script"), cl::location(S.bench.torchScript), cl::cat(btCategory));
cl::opt<std::string, true> torchMalloc(
    "torch-malloc",
    cl::desc("bench: glibc malloc of the PyTorch baseline: tuned (as bt's "
             "runtime: no mmap, no trim) or default"), cl::location(S.bench.torchMalloc), cl::cat(btCategory));
cl::opt<std::string, true> pythonPath(
    "python", cl::desc("bench: Python with torch for the baseline (default "
                       "/usr/bin/python3, or $BT_PYTHON)"),
    cl::location(S.bench.python), cl::cat(btCategory));

} // namespace

const char *const bt::run::kUsage =
    "bt-run: compile and run Block Transformer checkpoints\n\n"
    "  bt-run compile <checkpoint> [--emit bt|bt-layer|llvm|artifact|executable]"
    " [-o OUT]\n"
    "  bt-run compile <checkpoint> --target cuda [--emit ptx|nvvm|emu-llvm|llvm|"
    "artifact|executable]\n         [--cuda-path DIR] [--gpu-chip sm_90] "
    "[--nvvm-kernels FILE] [-o OUT]\n"
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
    "  bt-run bench [--device cpu|cuda|cuda-emu] <checkpoint|artifact|executable | --config C "
    "--random-init>\n"
    "               [--setting forward|prefill-heavy|decode-heavy[=P/G]|train,...] "
    "[--batch 1,8[,max]] [--memory M]\n"
    "               [--seq-blocks N | --tokens N] [--prompt P] "
    "[--gen G] [--iters K] [--warmup W]\n"
    "               [--threads T (default 2)] [--csv OUT] [--baseline torch|none]"
    " [--progress auto|bar|dots|none]\n"
    "               [--emu-lengths P/G (cuda-emu)]\n"
    "  bt-run train-step <checkpoint|artifact|executable> (--inputs BATCH | "
    "--grads GRADS)\n"
    "               [--lr 1e-3] [--warmup-steps N] [--total-steps N] -o DIR "
    "[--state-out FILE]\n"
    "               [--step-outputs FILE]\n"
    "  bt-run train (--config C | --resume DIR) --data FILE... -o DIR --steps N\n"
    "               [--tokenizer spm.model|tokenizer.json | --vocab-size V "
    "[--spm-model-type unigram|bpe]]\n"
    "               [--init-seed S | --init-from-vanilla DIR] [--cpu NAME] [the loop's options: bt-run train "
    "--help]\n\n"
    "eval, grad, generate, bench and train-step take --device cpu|cuda|cuda-emu"
    " (default: the artifact's).\n"
    "MLIR's pass-manager options (--mlir-print-ir-after-all, --mlir-timing, "
    "...) apply to the\ncompile; --help-hidden lists them.\n";

int bt::run::fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "bt-run") << message << "\n";
  return 1;
}

int bt::run::usage(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "bt-run") << message << "\n" << kUsage;
  return 2;
}

bool bt::run::takeThreadsOption(int &argc, char **argv, unsigned &threads) {
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

namespace {

/// MLIR's options that apply to the compile: printing, context, pass
/// manager (--mlir-print-ir-after-all, ...) and timing (--mlir-timing).
void registerMLIROptions() {
  // Named so that --mlir-print-ir-after=<pass> and friends can refer to them.
  bt::registerBTTransformsPasses();
  bt::registerBTCodegenPasses();
  bt::registerBTCUDACodegenPasses();
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
}

/// --help lists bt-run's options only: MLIR's move to --help-hidden, every
/// other option libLLVM registers (backend flags) is hidden entirely.
void hideForeignOptions() {
  cl::HideUnrelatedOptions(btCategory);
  for (auto &entry : cl::getRegisteredOptions())
    if (entry.getKey().starts_with("mlir-"))
      entry.getValue()->setHiddenFlag(cl::Hidden);
}

} // namespace

bool bt::run::parseOptions(int &argc, char **argv, RunOptions &options) {
  S.bench.torchScript = BT_SOURCE_DIR "/bench/bt_torch.py";
  const int argcWithThreads = argc;
  if (!takeThreadsOption(argc, argv, S.threads))
    return false;
  S.threadsGiven = argc != argcWithThreads;
  registerMLIROptions();
  hideForeignOptions();
  cl::ParseCommandLineOptions(argc, argv, kUsage);
  options = S;
  return true;
}

RunOptions
bt::run::parseCompilerOptions(const std::vector<std::string> &compilerArgs) {
  registerMLIROptions();
  hideForeignOptions();
  std::vector<const char *> args;
  for (const std::string &a : compilerArgs)
    args.push_back(a.c_str());
  cl::ParseCommandLineOptions(static_cast<int>(args.size()), args.data(),
                              kUsage);
  return S;
}

bool bt::run::mlirOptionGiven() {
  for (const auto &entry : llvm::cl::getRegisteredOptions())
    if (entry.getKey().starts_with("mlir-") &&
        entry.getValue()->getNumOccurrences() > 0)
      return true;
  return false;
}
