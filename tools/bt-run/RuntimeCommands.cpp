//===- RuntimeCommands.cpp - bt-run's commands that run a model -----------===//
//
// eval, grad, generate, bench, train-step and train: a checkpoint is
// compiled for this machine (Driver.h). eval, grad, generate, bench and
// train-step build the artifact in memory and call the runtime's command
// functions in process (RuntimeBridge.h); train compiles into its output
// directory (OUT/model.btart, kept) and runs the launcher's `train` on it.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "mlir/IR/DialectRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Timer.h"

#include <algorithm>

using namespace mlir;
using namespace bt;
using namespace bt::run;

namespace {

double secondsSince(const llvm::TimeRecord &start) {
  return llvm::TimeRecord::getCurrentTime(false).getWallTime() -
         start.getWallTime();
}

} // namespace

std::unique_ptr<bridge::CompiledArtifact>
bt::run::compiledForThisMachine(const Tool &tool, const std::string &input,
                                bool withGrad, bool progress,
                                TrainingEntries training) {
  std::string error;
  if (!input.empty() && bridge::isArtifact(input)) {
    std::unique_ptr<bridge::CompiledArtifact> a =
        bridge::openArtifact(input, error);
    if (!a) {
      fail(error);
      return nullptr;
    }
    // --dtype with an artifact: the dtype its kernels must have (an
    // artifact holds one; the compile options choose it for a checkpoint).
    if (!bridge::checkArtifactDType(*a, tool.options.planDType, error)) {
      fail(error);
      return nullptr;
    }
    return a;
  }
  FailureOr<compiler::Options> options =
      compileOptions(tool, withGrad, /*thisMachine=*/true, training);
  if (failed(options))
    return nullptr;
  std::unique_ptr<bridge::Model> model = loadModel(tool, input, true);
  if (!model)
    return nullptr;
  if (progress)
    llvm::errs() << "bt-run: compiling " << model->spec().name
                 << " for this machine ... ";
  llvm::TimeRecord start = llvm::TimeRecord::getCurrentTime(true);
  FailureOr<bridge::ArtifactParts> parts =
      compileArtifactParts(tool, *model, *options);
  if (failed(parts))
    return nullptr;
  std::unique_ptr<bridge::CompiledArtifact> artifact =
      bridge::buildArtifact(*model, *parts, error);
  if (!artifact) {
    fail(error);
    return nullptr;
  }
  if (progress)
    llvm::errs() << llvm::format("done (%.1f s)\n", secondsSince(start));
  return artifact;
}

namespace {

/// `eval` and `grad`: the runtime's command on the compiled model.
int runEvalOrGrad(const Tool &tool, const std::string &input, bool grad) {
  const RunOptions &o = tool.options;
  if (o.inputs.empty() || o.output.empty())
    return usage(std::string(grad ? "grad" : "eval") +
                 " needs --inputs <file> and -o <file>");
  // Only `grad` needs the backward sweep (it doubles the compile time).
  std::unique_ptr<bridge::CompiledArtifact> artifact =
      compiledForThisMachine(tool, input, /*withGrad=*/grad);
  if (!artifact)
    return 1;
  return bridge::runEval(*artifact, o.device, o.inputs, o.output, grad);
}

} // namespace

int bt::run::evalCommand(const Tool &tool, const std::string &input) {
  return runEvalOrGrad(tool, input, /*grad=*/false);
}

int bt::run::gradCommand(const Tool &tool, const std::string &input) {
  return runEvalOrGrad(tool, input, /*grad=*/true);
}

int bt::run::generateCommand(const Tool &tool, const std::string &input) {
  const RunOptions &o = tool.options;
  rt::GenerateCommandFlags flags = o.generate;
  flags.inputs_path = o.inputs;
  flags.prompts = o.prompts;
  flags.output_path = o.output;
  // --seed also seeds --random-init: it is the sampler's only with sampling.
  bool sampling = flags.temperature || flags.top_k || flags.top_p;
  if (sampling && o.seedGiven)
    flags.seed = std::to_string(o.seed);
  if (!o.prompts.empty() && o.tokenizer.empty() && !bridge::isArtifact(input))
    return usage(
        "generate --prompt on a checkpoint needs --tokenizer "
        "<spm.model|tokenizer.json>");
  if (!o.tokenizer.empty() && bridge::isArtifact(input))
    return usage("--tokenizer applies when compiling a checkpoint; " + input +
                 " is already compiled");
  std::unique_ptr<bridge::CompiledArtifact> artifact =
      compiledForThisMachine(tool, input, /*withGrad=*/false);
  if (!artifact)
    return 1;
  return bridge::runGenerate(*artifact, o.device, flags);
}

int bt::run::benchCommand(const Tool &tool, const std::string &input) {
  const RunOptions &o = tool.options;
  bridge::BenchRequest r = o.bench;
  // The options bench shares with other commands.
  r.batches = o.batches;
  r.threads = o.threads;
  r.seed = o.seed;
  r.memory = o.memory;
  if (r.seqBlocks && r.tokens)
    return usage("bench: give --seq-blocks or --tokens, not both");
  // `--prompt` is shared with generate (text there) and plan; bench takes
  // one token count. `--gen` defaults to plan's 128: passed on only when
  // given, so that each setting keeps its own length otherwise.
  if (o.prompts.size() > 1)
    return usage("bench: --prompt takes one token count, e.g. --prompt 512");
  if (o.prompts.size() == 1)
    r.promptTokens = o.prompts[0];
  if (o.genTokensGiven)
    r.genTokens = o.genTokens;
  // The train setting runs train_step: a checkpoint is compiled with it.
  TrainingEntries training;
  llvm::SmallVector<llvm::StringRef> items;
  llvm::StringRef(r.settings).split(items, ',');
  for (llvm::StringRef item : items)
    training.trainStep |= item.trim() == "train";
  std::unique_ptr<bridge::CompiledArtifact> artifact =
      compiledForThisMachine(tool, input, /*withGrad=*/false,
                             /*progress=*/true, training);
  if (!artifact)
    return 1;
  return bridge::runBench(*artifact, o.device, r);
}

int bt::run::trainStepCommand(const Tool &tool, const std::string &input) {
  const RunOptions &o = tool.options;
  if (o.inputs.empty() == o.grads.empty())
    return usage("train-step needs --inputs <batch> or --grads <gradients>");
  if (o.output.empty())
    return usage("train-step needs -o <checkpoint directory>");
  // Before the compile: -o must not name a directory the step would replace.
  if (std::string error; !bridge::checkCheckpointOutputDir(o.output, error))
    return fail(error);
  std::vector<std::string> args = {
      "-o",         o.output,        "--lr",
      o.learningRate, "--warmup-steps", o.warmupSteps, "--total-steps",
      o.totalSteps};
  if (!o.inputs.empty())
    args.insert(args.end(), {"--inputs", o.inputs});
  else
    args.insert(args.end(), {"--grads", o.grads});
  if (!o.stateOut.empty())
    args.insert(args.end(), {"--state-out", o.stateOut});
  if (!o.stepOutputs.empty())
    args.insert(args.end(), {"--step-outputs", o.stepOutputs});
  // apply_gradients needs no differentiation; train_step does.
  TrainingEntries training{/*trainStep=*/o.grads.empty(),
                          /*applyGradients=*/true};
  if (!bridge::isArtifact(input) && !o.randomInit) {
    // The checkpoint the step starts from: its weights (as compiled), its
    // unused tensors and its config are written back.
    if (llvm::sys::fs::is_directory(input) && o.weights.empty())
      args.insert(args.end(), {"--checkpoint", input});
    if (!o.config.empty())
      args.insert(args.end(), {"--config-file", o.config});
    else if (!llvm::sys::fs::is_directory(input))
      args.insert(args.end(), {"--config-file", input});
  }
  std::unique_ptr<bridge::CompiledArtifact> artifact = compiledForThisMachine(
      tool, input, /*withGrad=*/false, /*progress=*/false, training);
  if (!artifact)
    return 1;
  return bridge::runTrainStep(*artifact, o.device, args);
}

//===----------------------------------------------------------------------===//
// bt-run train
//===----------------------------------------------------------------------===//

namespace {

/// bt-run train's own options; everything else belongs to the training
/// loop (bt/runtime/train.h).
struct TrainArgs {
  std::string config, tokenizer, spmType = "unigram", cpu;
  /// --target cpu|cuda: the target train_step is compiled for; --device:
  /// where the launcher runs it (cuda, or cuda-emu: the CUDA emulator).
  std::string target, device;
  /// --init-from-vanilla: a vanilla GPT-NeoX checkpoint to initialize from
  /// (uptraining, bt/runtime/model/init_from_vanilla.h).
  std::string vanillaInit;
  int64_t vocab = 0;
  uint64_t initSeed = 0;
  std::vector<std::string> loop;
};

constexpr const char *kTrainUsage =
    "usage: bt-run train (--config C | --resume DIR) --data FILE... "
    "-o DIR --steps N\n"
    "         [--tokenizer spm.model|tokenizer.json | --vocab-size V "
    "[--spm-model-type unigram|bpe]]\n"
    "         [--init-seed S | --init-from-vanilla VANILLA_DIR] [--cpu NAME] "
    "[--threads T]\n"
    "         [--target cpu|cuda [--device cuda|cuda-emu]]\n"
    "the loop's options:\n  ";

/// Parses `argv[2..]` into `args`. Returns -1 to go on, else the exit code
/// (0 after --help).
int parseTrainArgs(int argc, char **argv, TrainArgs &args) {
  for (int i = 2; i < argc; ++i) {
    llvm::StringRef a = argv[i];
    if (a == "-h" || a == "--help") {
      llvm::outs() << kTrainUsage << bridge::trainLoopUsage();
      return 0;
    }
    std::string name = a.str(), value;
    bool inlineValue = a.starts_with("--") && a.contains('=');
    if (inlineValue) {
      name = a.split('=').first.str();
      value = a.split('=').second.str();
    }
    static const char *const own[] = {"--config", "--tokenizer",
                                      "--spm-model-type", "--cpu",
                                      "--vocab-size", "--init-seed",
                                      "--init-from-vanilla", "--target",
                                      "--device"};
    if (!llvm::is_contained(own, name)) {
      args.loop.push_back(argv[i]);
      continue;
    }
    if (!inlineValue && i + 1 >= argc)
      return usage("train: " + name + " needs a value");
    if (!inlineValue)
      value = argv[++i];
    if (name == "--config")
      args.config = value;
    else if (name == "--tokenizer")
      args.tokenizer = value;
    else if (name == "--spm-model-type")
      args.spmType = value;
    else if (name == "--cpu")
      args.cpu = value;
    else if (name == "--init-from-vanilla")
      args.vanillaInit = value;
    else if (name == "--target")
      args.target = value;
    else if (name == "--device")
      args.device = value;
    else if (name == "--vocab-size" &&
             (llvm::StringRef(value).getAsInteger(10, args.vocab) ||
              args.vocab < 2))
      return usage("train: --vocab-size " + value +
                   ": expected an integer >= 2");
    else if (name == "--init-seed" &&
             llvm::StringRef(value).getAsInteger(10, args.initSeed))
      return usage("train: --init-seed " + value +
                   ": expected an integer >= 0");
  }
  if (args.spmType != "unigram" && args.spmType != "bpe")
    return usage("train: --spm-model-type " + args.spmType +
                 ": expected unigram or bpe");
  if (!args.tokenizer.empty() && args.vocab != 0)
    return usage("train: --vocab-size applies when the tokenizer is trained; "
                 "drop it with --tokenizer");
  return -1;
}

} // namespace

/// `bt-run train`: prepares the tokenizer and the config
/// (bridge::prepareTraining), compiles a randomly initialized model
/// (--init-seed; official initialization) or one initialized from a vanilla
/// checkpoint (--init-from-vanilla) with the training entry points
/// into OUT/model.btart, and runs the launcher's `train` on it.
int bt::run::trainCommand(int argc, char **argv) {
  unsigned threads = 2;
  if (!takeThreadsOption(argc, argv, threads))
    return 2;
  TrainArgs args;
  if (int rc = parseTrainArgs(argc, argv, args); rc >= 0)
    return rc;
  args.loop.insert(args.loop.end(), {"--threads", std::to_string(threads)});
  // --baseline torch: this source tree's PyTorch model unless named.
  if (std::find(args.loop.begin(), args.loop.end(), "--torch-script") ==
      args.loop.end())
    args.loop.insert(args.loop.end(),
                     {"--torch-script", BT_SOURCE_DIR "/bench/bt_torch.py"});
  // The compiler's own options (pass manager, --cpu).
  std::vector<std::string> compilerArgs = {argv[0], "train"};
  if (!args.cpu.empty())
    compilerArgs.push_back("--cpu=" + args.cpu);
  RunOptions options = parseCompilerOptions(compilerArgs);
  if (!args.target.empty())
    options.target = args.target;

  std::string compileConfig, outDir, error;
  bool usageError = false;
  if (!bridge::prepareTraining(args.loop, args.config, args.tokenizer,
                               args.vocab, args.spmType, compileConfig,
                               options.tokenizer, outDir, error, usageError))
    return usageError ? usage(error) : fail(error);
  std::unique_ptr<bridge::Model> model =
      args.vanillaInit.empty()
          ? bridge::randomModel(compileConfig, args.initSeed, error)
          : bridge::vanillaInitModel(compileConfig, args.vanillaInit,
                                     args.initSeed, error, args.config);
  if (!model)
    return fail(error);
  // E.g. where --init-from-vanilla took the weights from.
  for (const std::string &notice : model->notices())
    llvm::errs() << "bt-run: note: " << notice << "\n";
  DialectRegistry registry;
  compiler::registerCompilerDialects(registry);
  MLIRContext context(registry);
  ScopedDiagnosticHandler warnings(&context, printWarning);
  Tool tool{argv[0], context, options};
  FailureOr<compiler::Options> compileOpts =
      compileOptions(tool, /*withGrad=*/false, /*thisMachine=*/true,
                     {/*trainStep=*/true, /*applyGradients=*/false});
  if (failed(compileOpts))
    return 1;
  const std::string artifact = outDir + "/model.btart";
  llvm::errs() << "bt-run: compiling " << model->spec().name
               << " with train_step for "
               << (args.target == "cuda" ? "the GPU" : "this machine")
               << " ... ";
  llvm::TimeRecord start = llvm::TimeRecord::getCurrentTime(true);
  if (failed(compileArtifact(tool, *model, *compileOpts, artifact,
                             /*executable=*/false)))
    return 1;
  llvm::errs() << llvm::format("done (%.1f s) -> %s\n", secondsSince(start),
                               artifact.c_str());
  model.reset(); // the weights now live in the artifact
  std::vector<std::string> launcherArgs = {"train"};
  launcherArgs.insert(launcherArgs.end(), args.loop.begin(), args.loop.end());
  if (!args.device.empty())
    launcherArgs.insert(launcherArgs.end(), {"--device", args.device});
  return bridge::runLauncher(artifact, launcherArgs);
}
