//===- launcher_main.cc - bt-launcher's argv front end --------------------===//
//
// LauncherMain (commands.h): parses argv, opens the model and calls the
// command functions (commands.h, bench.h, train.h, compare.h), which take
// parsed option structs and can be called in process without argv.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/tooling/commands.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/device/cpu/cpu_device.h"
#include "bt/runtime/exec/drivers.h"
#include "bt/runtime/tooling/bench.h"
#include "bt/runtime/tooling/compare.h"
#include "bt/runtime/tooling/train.h"
#include "bt/runtime/train/trainer.h"

namespace bt::rt {
namespace {

std::string Usage(const std::string &prog) {
  return absl::StrCat(
      "usage: ", prog, " [--artifact <path>] <command> [options]\n",
      "\n",
      "commands:\n",
      "  info                                   print the model configuration "
      "and entry points\n",
      "  eval --inputs <in.safetensors> -o <out.safetensors>\n",
      "                                         run 'eval_loss' (inputs with "
      "labels) or 'eval'\n",
      "                                         and write the outputs (logits, "
      "loss)\n",
      "  grad --inputs <in.safetensors> -o <out.safetensors>\n",
      "                                         run 'grad' (inputs with labels) "
      "and write loss and\n",
      "                                         grad.<param> for every parameter "
      "(raw, unclipped)\n",
      "  generate (--inputs <prompt.safetensors> | --prompt TEXT...) [-o <out.safetensors>]\n",
      "           [--max-new-tokens N] [--greedy | --temperature T --top-k K --top-p P --seed S]\n",
      "           [--official-generate-positions] [--ignore-eos] [--no-step-logits]\n",
      "                                         generate N tokens per prompt (default 32, greedy):\n",
      "                                         --inputs reads prompt.input_ids and\n",
      "                                         prompt.attention_mask (left padding = 0) and -o\n",
      "                                         writes new_tokens [B, N] and step_logits [N, B, V];\n",
      "                                         --prompt tokenizes with the artifact's SentencePiece\n",
      "                                         model and prints the text\n",
      "  devices                                list the CPU and the CUDA GPU (or why "
      "none is usable)\n",
      "  train-step (--inputs <batch.safetensors> | --grads <grads.safetensors>) -o <dir>\n",
      "           [--checkpoint <dir>] [--config-file <file>] [--lr X] [--warmup-steps N]\n",
      "           [--total-steps N] [--state-out <state.safetensors>]\n",
      "           [--step-outputs <out.safetensors>]\n",
      "                                         one optimizer step ('train_step' on a batch,\n",
      "                                         or 'apply_gradients' on grad.<name> tensors) from\n",
      "                                         the weights with zero moments, step 1; writes the\n",
      "                                         parameters as a checkpoint directory (atomically)\n",
      "  ", TrainUsage(),
      "                                         train the model (entry points train_step,\n"
      "                                         eval_loss; docs/training.md) on text files:\n"
      "                                         checkpoints, held-out loss, log.csv, loss.png\n",
      "  compare <actual> <reference> --check NAME[=REFNAME]:atol=X|rtol=X|equal ...\n",
      "          [--mask-file <masks.safetensors>] [--absent-as-zero]\n",
      "                                         check tensors of two safetensors "
      "files against\n",
      "                                         tolerances (rtol: max|d| / max|ref|);"
      " NAME may be\n",
      "                                         * or PREFIX* (every matching "
      "reference tensor);\n",
      "                                         atol/rtol may add "
      ",where=|MASK|*F>T (or <=T):\n",
      "                                         only elements whose |MASK| * F "
      "exceeds T, MASK\n",
      "                                         from --mask-file (default: the "
      "reference), {} = NAME\n",
      "                                         --absent-as-zero: a tensor missing from "
      "<actual> counts as zeros\n",
      "  bench [--setting forward|prefill-heavy|decode-heavy[=P/G]|train,...]\n"
      "        [--batch 1,8[,max]] [--memory 8GiB] [--prompt P] [--gen G]\n"
      "        [--seq-blocks N | --tokens N] [--iters K] [--warmup W] [--threads T]\n"
      "        [--csv out.csv] [--baseline torch|none] [--torch-script bt_torch.py]\n"
      "        [--python PATH] [--seed S] [--torch-malloc tuned|default]\n"
      "        [--progress auto|bar|dots|none] [--emu-lengths P/G (cuda-emu)]\n",
      "                                         tokens/s per setting and batch "
      "size, median of K calls\n",
      "                                         after W warmups (default: all "
      "three settings, batches\n",
      "                                         1,8, forward 512 tokens, K 5, W 1, "
      "2 threads), side by\n",
      "                                         side with the PyTorch baseline "
      "bench/bt_torch.py;\n",
      "                                         prefill-heavy (2048/128) and "
      "decode-heavy (128/2048)\n",
      "                                         generate greedily, EOS ignored "
      "(--prompt/--gen replace\n",
      "                                         the lengths); --batch max: the "
      "largest batch the\n",
      "                                         KV-cache plan fits in --memory "
      "(default: available)\n",
      "\n",
      "Every command that runs the model takes --device cpu|cuda|cuda-emu: "
      "cuda-emu runs a cuda\n"
      "artifact's kernels on the CPU in the CUDA emulator, with memory and "
      "synchronization\n"
      "checks (docs/cuda-emulator.md; also $BT_DEVICE=cuda-emu).\n"
      "Every command that runs the model takes --dtype f32|bf16: the dtype "
      "the artifact's\n"
      "kernels must have been compiled with (bt-run compile --target cuda "
      "--dtype, bf16 by\n"
      "default; an artifact of the other dtype is refused with how to "
      "compile it).\n"
      "Every command that runs the model also takes --threads N: the CPU "
      "threads of the\n"
      "compiled kernels and OpenBLAS (one OpenMP pool,\n"
      "docs/codegen.md; default: OMP_NUM_THREADS, else every core).\n"
      "The artifact is read from the end of this executable unless --artifact "
      "is given.\n");
}

/// What every command of one LauncherMain call shares: the program name,
/// the streams, the artifact path and the device options.
struct Launcher {
  std::string prog;
  std::ostream &out;
  std::ostream &err;
  std::string artifact = kSelfExe;
  DeviceOptions device_options;

  /// A usage error: the message and the usage on `err`; exit status 2.
  int UsageError(const std::string &msg) const {
    err << prog << ": " << msg << "\n\n" << Usage(prog);
    return 2;
  }
  /// A runtime error on `err`; exit status 1 (0 for OK).
  int Finish(const absl::Status &s) const {
    if (s.ok())
      return 0;
    err << prog << ": " << s.message() << "\n";
    return 1;
  }
  /// Prints the usage on `out` if `args` asks for help.
  bool Help(const std::vector<std::string> &args) const {
    for (const std::string &a : args)
      if (a == "-h" || a == "--help") {
        out << Usage(prog);
        return true;
      }
    return false;
  }
  /// The model of the artifact on the chosen device (its target must be
  /// the artifact's: OpenDeviceFor).
  absl::StatusOr<std::unique_ptr<Model>> OpenModel() const {
    return Model::Open(artifact, device_options);
  }
};

/// `devices`: the devices this binary can run on (no model needed): always
/// the CPU, and a CUDA GPU or the reason there is none.
int DevicesMain(const Launcher &l, const std::vector<std::string> &args) {
  if (!args.empty())
    return l.UsageError(absl::StrCat("devices takes no arguments, got '",
                                     args[0], "'"));
  for (const std::string &line : DescribeDevices())
    l.out << line << "\n";
  return 0;
}

/// `compare <actual> <reference> --check NAME:atol=X ...` (no model needed).
int CompareMain(const Launcher &l, const std::vector<std::string> &args) {
  std::vector<std::string> files;
  std::vector<TensorCheck> checks;
  CompareOptions compare_options;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--absent-as-zero") {
      compare_options.absent_as_zero = true;
    } else if (args[i] == "--mask-file") {
      if (i + 1 >= args.size())
        return l.UsageError("--mask-file needs a path");
      compare_options.mask_path = args[++i];
    } else if (args[i] == "--check") {
      if (i + 1 >= args.size())
        return l.UsageError("--check needs NAME:atol=X, NAME:rtol=X or NAME:equal");
      absl::StatusOr<TensorCheck> check = ParseTensorCheck(args[++i]);
      if (!check.ok())
        return l.UsageError(std::string(check.status().message()));
      checks.push_back(*check);
    } else if (args[i].rfind("-", 0) == 0) {
      return l.UsageError(absl::StrCat("compare: unexpected option '", args[i], "'"));
    } else {
      files.push_back(args[i]);
    }
  }
  if (files.size() != 2 || checks.empty())
    return l.UsageError("compare needs <actual> <reference> and at least one --check");
  absl::StatusOr<std::vector<TensorCheckResult>> results =
      CompareTensors(files[0], files[1], checks, l.out, compare_options);
  if (!results.ok())
    return l.Finish(results.status());
  for (const TensorCheckResult &r : *results)
    if (!r.passed) {
      l.err << l.prog << ": compare: " << r.check.tensor
            << " is outside its tolerance\n";
      return 1;
    }
  return 0;
}

/// `bench ...`: ParseBenchArgs, ResolveBenchOptions, RunBenchCommand.
int BenchMain(const Launcher &l, const std::vector<std::string> &args) {
  absl::StatusOr<BenchCommandOptions> command = ParseBenchArgs(args);
  if (!command.ok())
    return l.UsageError(std::string(command.status().message()));
  if (command->help) {
    l.out << Usage(l.prog);
    return 0;
  }
  auto model = l.OpenModel();
  if (!model.ok())
    return l.Finish(model.status());
  absl::StatusOr<BenchOptions> opts = ResolveBenchOptions(**model, *command);
  if (absl::IsInvalidArgument(opts.status()))
    return l.UsageError(std::string(opts.status().message()));
  if (!opts.ok())
    return l.Finish(opts.status());
  return l.Finish(RunBenchCommand(**model, *opts, l.out, l.err));
}

/// `train ...`: ParseTrainArgs, RunTraining.
int TrainMain(const Launcher &l, const std::vector<std::string> &args) {
  for (const std::string &a : args)
    if (a == "-h" || a == "--help") {
      l.out << "usage: " << l.prog << " " << TrainUsage();
      return 0;
    }
  absl::StatusOr<TrainOptions> opts = ParseTrainArgs(args);
  if (!opts.ok())
    return l.UsageError(std::string(opts.status().message()));
  auto model = l.OpenModel();
  if (!model.ok())
    return l.Finish(model.status());
  return l.Finish(RunTraining(**model, *opts, l.out, l.err));
}

/// The --inputs and -o|--output of `eval` and `grad`; -1 to go on, else the
/// exit status (help or a usage error).
int ParseInputsOutput(const Launcher &l, const std::string &cmd,
                      const std::vector<std::string> &args, std::string &inputs,
                      std::string &output) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "-h" || a == "--help") {
      l.out << Usage(l.prog);
      return 0;
    }
    if (a == "--inputs" || a == "-o" || a == "--output") {
      if (i + 1 >= args.size())
        return l.UsageError(absl::StrCat(a, " needs a path"));
      (a == "--inputs" ? inputs : output) = args[++i];
    } else {
      return l.UsageError(absl::StrCat(cmd, ": unexpected argument '", a, "'"));
    }
  }
  if (inputs.empty())
    return l.UsageError(absl::StrCat(cmd, ": missing --inputs <inputs.safetensors>"));
  if (output.empty())
    return l.UsageError(absl::StrCat(cmd, ": missing -o <outputs.safetensors>"));
  return -1;
}

/// The commands that run one entry point of the model: info, eval, grad,
/// generate, train-step.
int ModelCommandMain(const Launcher &l, const std::string &cmd,
                     const std::vector<std::string> &args) {
  std::string inputs, output;
  GenerateCommandOptions gen;
  TrainStepCommandOptions train;
  if (cmd == "train-step") {
    if (l.Help(args))
      return 0;
    absl::StatusOr<TrainStepCommandOptions> parsed = ParseTrainStepArgs(args);
    if (!parsed.ok())
      return l.UsageError(std::string(parsed.status().message()));
    train = std::move(parsed).value();
  } else if (cmd == "generate") {
    if (l.Help(args))
      return 0;
    absl::StatusOr<GenerateCommandOptions> parsed = ParseGenerateArgs(args);
    if (!parsed.ok())
      return l.UsageError(std::string(parsed.status().message()));
    gen = std::move(parsed).value();
  } else if (cmd == "info") {
    if (!args.empty())
      return l.UsageError(absl::StrCat("info takes no arguments, got '",
                                       args[0], "'"));
  } else if (cmd == "eval" || cmd == "grad") {
    if (int rc = ParseInputsOutput(l, cmd, args, inputs, output); rc >= 0)
      return rc;
  } else {
    return l.UsageError(absl::StrCat("unknown command '", cmd, "'"));
  }

  if (cmd == "info") {
    absl::StatusOr<std::shared_ptr<const Artifact>> a = Artifact::Open(l.artifact);
    if (!a.ok())
      return l.Finish(a.status());
    return l.Finish(RunInfoCommand(*std::move(a), l.device_options, l.out));
  }
  auto model = l.OpenModel();
  if (!model.ok())
    return l.Finish(model.status());
  return l.Finish(
      cmd == "generate"   ? RunGenerateCommand(**model, gen, l.out, l.err)
      : cmd == "grad"       ? RunGradCommand(**model, inputs, output, l.err)
      : cmd == "train-step" ? RunTrainStepCommand(**model, train, l.out)
                            : RunEvalCommand(**model, inputs, output, l.err));
}

} // namespace

int LauncherMain(int argc, const char *const *argv, std::ostream &out,
                 std::ostream &err) {
  Launcher l{argc > 0 && argv[0] ? argv[0] : "bt-launcher", out, err};
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  size_t i = 0;
  while (i < args.size() && args[i].rfind("-", 0) == 0) {
    if (args[i] == "-h" || args[i] == "--help") {
      out << Usage(l.prog);
      return 0;
    }
    if (args[i] == "--artifact") {
      if (i + 1 >= args.size())
        return l.UsageError("--artifact needs a path");
      l.artifact = args[i + 1];
      i += 2;
      continue;
    }
    return l.UsageError(absl::StrCat("unknown option '", args[i], "'"));
  }
  if (i >= args.size())
    return l.UsageError("missing command");
  const std::string cmd = args[i++];

  // --device cpu|cuda|cuda-emu, for every command that runs the model: the
  // artifact's device, or the CUDA emulator for a cuda artifact
  // (docs/cuda-emulator.md; also $BT_DEVICE=cuda-emu).
  for (size_t k = i; k < args.size(); ++k) {
    if (args[k] != "--device")
      continue;
    const std::string names = absl::StrJoin(DeviceNames(), "|");
    if (k + 1 >= args.size())
      return l.UsageError(absl::StrCat("--device needs ", names));
    l.device_options.device = args[k + 1];
    if (!absl::c_linear_search(DeviceNames(), l.device_options.device))
      return l.UsageError(absl::StrCat("--device ", l.device_options.device,
                                       ": expected ", names));
    args.erase(args.begin() + k, args.begin() + k + 2);
    break;
  }
  // --dtype f32|bf16, for every command that runs the model: the dtype the
  // artifact's kernels must have been compiled with (an artifact holds one;
  // OpenDeviceFor refuses the other with how to compile it).
  for (size_t k = i; k < args.size(); ++k) {
    if (args[k] != "--dtype")
      continue;
    if (k + 1 >= args.size() ||
        (args[k + 1] != "f32" && args[k + 1] != "bf16"))
      return l.UsageError(absl::StrCat(
          "--dtype needs f32 or bf16",
          k + 1 < args.size() ? absl::StrCat(", got '", args[k + 1], "'")
                              : std::string()));
    l.device_options.dtype = args[k + 1];
    args.erase(args.begin() + k, args.begin() + k + 2);
    break;
  }
  // --threads N, for every command that runs the model: the CPU threads of
  // the generated kernels and OpenBLAS (SetBlasThreads). bench and train
  // parse it themselves (they hand it to the PyTorch baseline too).
  if (cmd != "bench" && cmd != "train") {
    for (size_t k = i; k < args.size(); ++k) {
      if (args[k] != "--threads")
        continue;
      int threads = 0;
      if (k + 1 >= args.size() || !absl::SimpleAtoi(args[k + 1], &threads) ||
          threads <= 0)
        return l.UsageError("--threads needs a positive integer");
      SetBlasThreads(threads);
      args.erase(args.begin() + k, args.begin() + k + 2);
      break;
    }
  }
  const std::vector<std::string> rest(args.begin() + i, args.end());
  if (cmd == "devices")
    return DevicesMain(l, rest);
  if (cmd == "compare")
    return CompareMain(l, rest);
  if (cmd == "bench")
    return BenchMain(l, rest);
  if (cmd == "train")
    return TrainMain(l, rest);
  return ModelCommandMain(l, cmd, rest);
}

} // namespace bt::rt
