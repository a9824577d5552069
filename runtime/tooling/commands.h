//===- commands.h - launcher commands ---------------------------*- C++ -*-===//
//
// The commands of a standalone executable (bt-launcher + appended artifact,
// docs/design.md §5), in the library so that bt-run reuses them:
//
//   ./model info
//   ./model eval --inputs inputs.safetensors -o outputs.safetensors
//   ./model grad --inputs inputs.safetensors -o grads.safetensors
//   ./model generate --inputs prompt.safetensors --max-new-tokens 32 -o out.safetensors
//   ./model generate --prompt "In the beginning" --temperature 0.8 --top-p 0.95
//   ./model bench [--batch 1,8] [--tokens 512] [--baseline torch|none] ...
//   ./model train-step --inputs batch.safetensors --checkpoint ckpt/ -o out/
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_COMMANDS_H
#define BT_RUNTIME_COMMANDS_H

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bt/runtime/generate/generate.h"
#include "bt/runtime/tooling/command_flags.h"
#include "bt/runtime/exec/model.h"

namespace bt::rt {

/// Prints the artifact (target, producer), the model configuration
/// (DescribeModelConfig) and every entry point with its params count,
/// inputs and outputs (dtype and shape; a dynamic dim prints as its
/// dim_names name, or '?') to `out`.
absl::Status RunInfoCommand(const Model &model, std::ostream &out);
/// The same from the artifact alone (no kernels loaded, no GPU opened): the
/// launcher's `info` of a cuda artifact, which works without a GPU.
absl::Status RunInfoCommand(const Artifact &artifact, std::ostream &out);
/// `info` as bt-launcher and bt-run run it: a cuda artifact from the
/// artifact alone (no GPU needed); any other opened on `device` first
/// (Model::Open), so that kernels that do not load are reported. Errors:
/// those of Model::Open.
absl::Status RunInfoCommand(std::shared_ptr<const Artifact> artifact,
                            const DeviceOptions &device, std::ostream &out);

/// The entry point `eval` picks for an inputs file: "eval_loss" if the file
/// has a `labels` tensor and the model has that entry, else "eval".
/// Errors: NotFound if the model has neither entry needed.
absl::StatusOr<std::string> ChooseEvalEntry(const Model &model,
                                            bool has_labels);

/// Reads the entry's inputs by name (fixture names: input_ids,
/// attention_mask, block_attention_mask, labels) from the safetensors file
/// `inputs_path` (other tensors are ignored, with a note on `log`), runs
/// ChooseEvalEntry's entry, and writes its outputs (logits, loss) to
/// `output_path` atomically as safetensors with metadata entry_point,
/// model and producer. Scalar outputs are echoed to `log`
/// ("loss = 6.2871").
/// Errors: those of SafetensorsFile::Open, Model::Run (located: entry,
/// tensor, expected dtype/shape), WriteSafetensors; NotFound naming the
/// inputs file and tensor for a missing input.
absl::Status RunEvalCommand(const Model &model, const std::string &inputs_path,
                            const std::string &output_path, std::ostream &log);

/// Runs the entry point `grad` (loss and d loss / d param of every
/// parameter, bt-generate-gradients) on the inputs of `inputs_path` (as
/// RunEvalCommand: input_ids, attention_mask, block_attention_mask, labels)
/// and writes `loss` and `grad.<param>` (the fixtures' names) to
/// `output_path`. Logs the loss and the total L2 norm of the gradients
/// ("grad norm = 3.8047 (37 parameters)", the fixtures' grad_norm_preclip).
/// Errors: NotFound if the artifact has no `grad` entry point; those of
/// RunEvalCommand.
absl::Status RunGradCommand(const Model &model, const std::string &inputs_path,
                            const std::string &output_path, std::ostream &log);

/// What `generate` does: token ids from a file, or text prompts.
struct GenerateCommandOptions {
  /// --inputs: a safetensors file with `prompt.input_ids` I64 [B, T] and
  /// optionally `prompt.attention_mask` (left padding = 0); without the
  /// `prompt.` names, `input_ids` / `attention_mask` of rank 2.
  std::string inputs_path;
  /// --prompt (repeatable): texts, tokenized with the artifact's
  /// SentencePiece model and left-padded into one batch.
  std::vector<std::string> prompts;
  /// -o: writes new_tokens I64 [B, N], step_logits F32 [N, B, V] (the
  /// fixtures' names), finished I64 [B] and lengths I64 [B]. Required with
  /// --inputs, optional with --prompt.
  std::string output_path;
  GenerateOptions generate;
};

/// Collects the arguments after `generate` into flags (no value checked).
/// Errors: InvalidArgument for an unknown argument or a missing value.
absl::StatusOr<GenerateCommandFlags>
ParseGenerateFlags(const std::vector<std::string> &args);

/// Checks `flags` and makes the command's options (the rules below).
/// Errors: InvalidArgument with a usage message naming the flag.
absl::StatusOr<GenerateCommandOptions>
ResolveGenerateFlags(const GenerateCommandFlags &flags);

/// Parses the arguments after `generate` (ParseGenerateFlags, then
/// ResolveGenerateFlags):
///   (--inputs FILE | --prompt TEXT...) [-o FILE] [--max-new-tokens N]
///   [--greedy | [--temperature T] [--top-k K] [--top-p P] [--seed S]]
///   [--official-generate-positions] [--ignore-eos] [--no-step-logits]
/// (--no-step-logits: GenerateOptions::keep_step_logits false; -o then
/// writes no step_logits.) Greedy unless --temperature (> 0), --top-k or --top-p asks for sampling
/// (--temperature 0 is greedy); --seed needs sampling. Default
/// --max-new-tokens: 32. Errors: InvalidArgument with a usage message.
absl::StatusOr<GenerateCommandOptions>
ParseGenerateArgs(const std::vector<std::string> &args);

/// Runs Generate on the command's prompts. With --prompt, prints each prompt
/// followed by its continuation (up to EOS) to `out` ("[i] " before each
/// when there are several). Prints the work counters (FormatCounters) to
/// `log`. Errors: those of SafetensorsFile::Open, Tokenizer (FailedPrecondition
/// when the artifact has no tokenizer section), Generate and WriteSafetensors;
/// NotFound naming the inputs file for missing prompt tensors.
absl::Status RunGenerateCommand(const Model &model,
                                const GenerateCommandOptions &options,
                                std::ostream &out, std::ostream &log);

/// main() of bt-launcher: parses
///   <prog> [--artifact <path>] info
///   <prog> [--artifact <path>] eval --inputs <file> -o|--output <file>
///   <prog> [--artifact <path>] grad --inputs <file> -o|--output <file>
///   <prog> [--artifact <path>] generate ... (ParseGenerateArgs)
///   <prog> [--artifact <path>] train-step ... (ParseTrainStepArgs,
///          RunTrainStepCommand, bt/runtime/trainer.h)
///   <prog> [--artifact <path>] compare <actual> <reference>
///          [--absent-as-zero] [--mask-file <file>] --check ...
///          (CompareTensors, bt/runtime/compare.h)
///   <prog> [--artifact <path>] bench [--device cpu] [--batch 1,8]
///          [--seq-blocks N | --tokens N] [--iters K] [--warmup W]
///          [--threads T] [--csv F] [--baseline torch|none]
///          [--torch-script F] [--python F] [--seed S]
///          [--torch-malloc tuned|default]
///          (RunBenchCommand, bt/runtime/bench.h; default 512 tokens per
///          row, batches 1 and 8, 5 timed calls after 1 warmup, 2 threads)
///   <prog> --help
/// opens the model (default artifact: /proc/self/exe) and runs the command.
/// Returns 0 on success, 1 on a runtime error (message on `err`), 2 on a
/// usage error (usage on `err`).
int LauncherMain(int argc, const char *const *argv, std::ostream &out,
                 std::ostream &err);

} // namespace bt::rt

#endif // BT_RUNTIME_COMMANDS_H
