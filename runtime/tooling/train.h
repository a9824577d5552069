//===- train.h - the training loop ------------------------------*- C++ -*-===//
//
// `train` (bt-run train, ./model train; docs/training.md, "Training loop"):
// trains the model of an artifact compiled with the training entry points
// (bt-run compile --train):
//
//   train_step  the compiled optimizer step (docs/training.md), driven
//               through bt::rt::Trainer (bt/runtime/trainer.h), which owns
//               the in-out param.* / adam_m.* / adam_v.* buffers and passes
//               step, peak_lr, warmup_steps and total_steps;
//   eval_loss   (docs/abi.md) for the held-out loss, run with the trainer's
//               current parameters in place of the artifact's weights
//               (Model::Run's `params`).
//
// The loop (RunTraining): data (bt/runtime/data.h: documents → the artifact's
// SentencePiece model → official block packing, held-out split) → for each
// step a batch of B samples in a seeded order → Trainer::Step → progress
// (step, loss, tokens/s, ETA) → every eval_every steps the held-out loss and
// perplexity → every save_every steps (and at the end) a checkpoint:
//
//   OUT/step-000200/   config.yaml        official trainer YAML (loads with
//                                         LoadModelConfig and bt-run compile)
//                      model.safetensors  every official tensor, F32
//                                         (Trainer::SaveCheckpoint)
//                      optimizer.safetensors  Trainer::SaveState: param.*,
//                                         adam_m.*, adam_v.*, step, schedule
//                      trainer_state.json step, data position, seeds, data
//                                         fingerprint, options, last eval
//                      tokenizer.model    the SentencePiece model, or
//                      tokenizer.json     the tokenizer.json (HF BPE)
//   OUT/latest -> step-000200             (symlink, replaced atomically)
//   OUT/log.csv, OUT/loss.png             the loss curve (both atomic)
//
// A checkpoint is assembled in a temporary directory OUT/.tmp-step-*, every
// file fsync'ed, renamed to OUT/step-NNNNNN, and only then is `latest`
// switched (symlink + rename) and the previous checkpoint removed: a crash at
// any point leaves `latest` on a complete checkpoint. --resume restores the
// trainer state and the data position (samples consumed; the order is a pure
// function of the seed), so the resumed steps are bit-identical to an
// uninterrupted run (same machine, same thread count).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_TOOLING_TRAIN_H
#define BT_RUNTIME_TOOLING_TRAIN_H

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bt/runtime/train/data.h"
#include "bt/runtime/exec/model.h"
#include "bt/runtime/train/trainer.h"

namespace bt::rt {

/// Everything `train` needs besides the model.
struct TrainOptions {
  /// Text files and how they are cut into documents (data.h).
  std::vector<std::string> data_paths;
  DocumentSplit split = DocumentSplit::kParagraph;
  /// Fraction of the documents held out for evaluation (SplitHeldOut).
  double holdout_fraction = 0.02;
  /// Output directory (created); --resume: a previous OUT (its `latest`) or a
  /// checkpoint directory.
  std::string output_dir;
  std::string resume_dir;
  /// Total optimizer steps of the run (a resumed run continues to this).
  int64_t steps = 0;
  int64_t batch = 8;
  /// Tokens per sample (max_length); 0: the config's max_length, else 256.
  int64_t seq_len = 0;
  /// Held-out evaluation every K steps (0: only at the end; also at step 0
  /// when K > 0) over at most eval_batches batches of `batch` samples.
  int64_t eval_every = 0;
  int64_t eval_batches = 16;
  /// A checkpoint every K steps (0: only at the end).
  int64_t save_every = 0;
  /// Seeds: sample order and held-out split (`seed`), left pads
  /// (`pad_seed`, numpy RandomState, official 42).
  uint64_t seed = 0;
  uint32_t pad_seed = 42;
  /// The schedule inputs of train_step (--lr, --warmup, --lr-total-steps;
  /// total defaults to --steps).
  TrainerSchedule schedule;
  /// BLAS threads (0: leave as is).
  int threads = 0;
  /// Progress: "auto" (a bar on a terminal, else a line every ~5 s), "bar",
  /// "lines", "none".
  std::string progress = "auto";
  /// Write OUT/loss.png with gnuplot after each evaluation and at the end
  /// (skipped with a note when gnuplot is missing).
  bool plot = true;
  /// Keep every checkpoint (default: only the latest).
  bool keep_checkpoints = false;
  /// --overwrite: train into an output directory that holds other files
  /// (another run's checkpoints) instead of refusing (CheckTrainOutputDir).
  bool overwrite = false;
  /// Dump the batches of the first `dump_steps` steps (input_ids,
  /// attention_mask, labels [S, B, N_blk, L_B], block_attention_mask
  /// [S, B, N_blk]) to this safetensors file, and the initial parameters to
  /// OUT/initial/ (for the PyTorch baseline).
  std::string dump_batches;
  int64_t dump_steps = 0;
  /// PyTorch baseline (bench/bt_torch.py --train) on the dumped batches after
  /// training: "torch" or "none".
  std::string baseline = "none";
  /// The script and its interpreter (empty: BaselineScript and
  /// BaselinePython of child_process.h decide).
  std::string torch_script;
  std::string python;
  /// Information recorded in trainer_state.json (e.g. how the tokenizer was
  /// trained).
  std::map<std::string, std::string> notes;
};

/// Parses the arguments after `train` (launcher and bt-run):
///   --data FILE... [--split paragraph|heading|line|file] [--holdout F]
///   -o DIR [--resume DIR] --steps N [--batch B] [--seq-len T]
///   [--eval-every K] [--eval-batches K] [--save-every K] [--seed S]
///   [--pad-seed S] [--lr X] [--warmup N] [--lr-total-steps N] [--threads N]
///   [--progress auto|bar|lines|none] [--no-plot] [--keep-checkpoints]
///   [--dump-batches FILE --dump-steps N] [--baseline torch|none]
///   [--torch-script PATH] [--python PATH] [--note KEY=VALUE]
/// The schedule's total steps default to --steps. Errors: InvalidArgument
/// with a usage message.
absl::StatusOr<TrainOptions> ParseTrainArgs(const std::vector<std::string> &args);

/// Usage text of the train command.
std::string TrainUsage();

/// Mean token loss of `batches` (each weighted by CountTargets) through
/// eval_loss with `params` (official names, e.g. Trainer::Parameters()) in
/// place of the artifact's weights. Errors: those of Model::Run;
/// FailedPrecondition when the batches have no targets.
absl::StatusOr<double> HeldOutLoss(const Model &model, const TensorMap &params,
                                   const std::vector<TensorMap> &batches);

/// The AdamW settings bt-generate-train-step compiles into train_step by
/// default (docs/training.md; the official trainer YAMLs): recorded in the
/// checkpoints' config.yaml.
struct CompiledOptimizerSettings {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double max_grad_norm = 1.0;
};

/// The official trainer YAML for `config` with every architecture field
/// explicit (so that LoadModelConfig gives `config` back: round trip), plus
/// the trainer fields (learning rate, betas, weight decay, batch, max_length,
/// steps, warmup). `tokenizer_note` becomes a comment.
std::string OfficialTrainerYaml(const proto::ModelConfig &config,
                                const TrainOptions &options,
                                const std::string &tokenizer_note = "",
                                const CompiledOptimizerSettings &optimizer = {});

/// The whole `train` command on `model` (an artifact with train_step,
/// eval_loss and a tokenizer section). Progress on `log`, the final summary
/// (held-out loss and perplexity, checkpoint path, tokens/s) on `out`.
absl::Status RunTraining(const Model &model, const TrainOptions &options,
                         std::ostream &out, std::ostream &log);

/// Whether the run may write into `options.output_dir` (issue 14: a run never
/// silently replaces another's files): OK when it does not exist, is empty,
/// is the directory of the checkpoint being resumed (--resume, compared by
/// st_dev/st_ino), or with --overwrite. `after_prepare`: OUT may hold what
/// `bt-run train` wrote before the loop (model-config.yaml, tokenizer.model,
/// model.btart). Errors: FailedPrecondition naming the directory, some of its
/// files and the options that would proceed; the same when OUT is a file.
absl::Status CheckTrainOutputDir(const TrainOptions &options, bool after_prepare);

/// What `bt-run train` decides before it compiles (PrepareTrainingModel).
struct TrainModelSetup {
  /// --config: official trainer YAML / config.json of the architecture
  /// (required unless the loop resumes).
  std::string config_path;
  /// --tokenizer: an existing SentencePiece model or Hugging Face
  /// tokenizer.json (DetectTokenizerKind); empty: train a SentencePiece model
  /// on the training text with `spm` (vocab_size 0: the config's vocab_size).
  std::string tokenizer_path;
  SentencePieceTrainOptions spm;
  /// The loop's options (data files, split, seq_len, output dir, resume).
  TrainOptions train;
};

/// The files `bt-run train` compiles from.
struct TrainModelFiles {
  /// OUT/model-config.yaml: the official trainer YAML of the model to
  /// train (vocab_size = the tokenizer's, max_length = the loop's), or the
  /// resumed checkpoint's config.yaml.
  std::string config_path;
  /// OUT/tokenizer.model or OUT/tokenizer.json, or the resumed checkpoint's.
  std::string tokenizer_path;
};

/// Prepares a `bt-run train` run: with train.resume_dir, the config and
/// tokenizer of the checkpoint (--config / --tokenizer are then an error);
/// otherwise loads the config, takes or trains the tokenizer (documents of
/// the training files: TrainSentencePiece with EOS = the config's EOS id),
/// sets the config's vocab_size to the tokenizer's size (a tokenizer.json's
/// only if it has more ids: checkpoints pad the embeddings) and max_length to
/// the loop's sequence length, and writes both files into the output
/// directory (atomically). Progress on `log`. Errors: the config's,
/// tokenizer's and data's, each naming its file.
absl::StatusOr<TrainModelFiles> PrepareTrainingModel(const TrainModelSetup &setup,
                                                     std::ostream &log);

/// Environment variable for tests: "STEP:PATH" makes the checkpoint write of
/// step STEP stop halfway (model.safetensors written into the temporary
/// directory, nothing renamed), create the file PATH and sleep until killed.
inline constexpr char kPauseInCheckpointEnv[] = "BT_TEST_PAUSE_IN_CHECKPOINT_WRITE";

} // namespace bt::rt

#endif // BT_RUNTIME_TOOLING_TRAIN_H
