//===- trainer.h - training state and optimizer steps -----------*- C++ -*-===//
//
// The runtime side of training (docs/training.md): a Trainer owns writable
// f32 copies of the trained parameters and the AdamW moments, counts steps,
// and runs the compiled `train_step` (forward, backward, clipping, AdamW,
// LR schedule in one call, parameters and moments updated in place) or
// `apply_gradients` (the same optimizer on given gradients). It saves and
// loads parameters (official checkpoint layout) and optimizer state.
//
//   auto trainer = Trainer::Create(model, {.peak_lr = 6e-4,
//                                          .warmup_steps = 3000,
//                                          .total_steps = 572000});
//   for (batch : batches) {
//     TrainerStepResult r = trainer->Step(batch);     // loss, grad_norm, lr
//   }
//   trainer->SaveCheckpoint("ckpt-1000", {.config_path = "config.yaml"});
//   trainer->SaveState("ckpt-1000/optimizer.safetensors");
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_TRAINER_H
#define BT_RUNTIME_TRAINER_H

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bt/runtime/exec/model.h"
#include "bt/runtime/base/tensor.h"

namespace bt::rt {

/// Names of the entry points and of their in-out state (docs/training.md).
namespace train_abi {
inline constexpr char kTrainStepEntry[] = "train_step";
inline constexpr char kApplyGradientsEntry[] = "apply_gradients";
inline constexpr char kParamPrefix[] = "param.";
inline constexpr char kAdamMPrefix[] = "adam_m.";
inline constexpr char kAdamVPrefix[] = "adam_v.";
inline constexpr char kGradPrefix[] = "grad.";
} // namespace train_abi

/// The learning-rate schedule's inputs (bt.lr_schedule, compiled into the
/// entry points: linear warmup over max(2, warmup_steps) steps, cosine decay
/// to 10% of peak_lr at total_steps, step 1 at peak_lr as with the official
/// DeepSpeed setup; docs/training.md). The official configs: peak_lr =
/// `learning_rate`, warmup_steps = `num_warmup_steps`, total_steps =
/// `num_train_steps`.
struct TrainerSchedule {
  double peak_lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
};

/// What one optimizer step reports (the entry's outputs).
struct TrainerStepResult {
  int64_t step = 0;        // 1-based number of the step just taken
  float loss = 0.0f;       // train_step only (NaN for apply_gradients)
  float grad_norm = 0.0f;  // global gradient L2 norm before clipping
  float lr = 0.0f;         // learning rate the step used
};

/// Where SaveCheckpoint writes.
struct CheckpointWriteOptions {
  /// A config file to copy into the directory (official config.yaml or a
  /// config.json); it keeps its name when that is config.yaml / config.json,
  /// otherwise becomes config.yaml or config.json by its extension. Empty:
  /// no config is written.
  std::string config_path;
  /// Tensors written next to the trained parameters, e.g. the known-unused
  /// `block_decoder.gpt_neox.embed_in.weight` of an official checkpoint
  /// (Checkpoint::unused), so that the directory holds every official name.
  const std::map<std::string, Tensor> *extra = nullptr;
};

/// The checks Trainer::SaveCheckpoint makes on its output directory `dir`
/// before it writes, for a command to call before its work (issue 14, data
/// loss): OK for a new or empty directory or a checkpoint (a directory with
/// a *.safetensors file, which SaveCheckpoint replaces atomically);
/// InvalidArgument "<dir>: exists and is not a directory"; FailedPrecondition
/// "refusing to replace <dir>: ..." for the working directory or one
/// containing it, and for any other non-empty directory (naming its first
/// entries).
absl::Status CheckCheckpointOutputDir(const std::string &dir);

class Trainer {
public:
  /// A trainer for `model` (which must outlive it and have `train_step` or
  /// `apply_gradients`): the trained parameters are the in-out `param.*`
  /// arguments of those entries (the parameters the loss reads, official
  /// state_dict order), initialized with copies of the artifact's weights;
  /// the moments are zero and step() is 0.
  /// Errors: NotFound if the artifact has neither entry or lacks a weight;
  /// InvalidArgument if the two entries disagree on the state or a state
  /// argument is not F32 with a static shape.
  static absl::StatusOr<std::unique_ptr<Trainer>>
  Create(const Model &model, const TrainerSchedule &schedule = {});

  const Model &model() const { return model_; }
  /// Official names of the trained parameters, in entry order.
  const std::vector<std::string> &param_names() const { return names_; }
  /// Number of optimizer steps taken (the next step is step() + 1).
  int64_t step() const { return step_; }
  const TrainerSchedule &schedule() const { return schedule_; }
  void set_schedule(const TrainerSchedule &schedule) { schedule_ = schedule; }

  /// One optimizer step on a batch: runs `train_step` with `batch` (its
  /// batch inputs by name: input_ids, attention_mask, block_attention_mask,
  /// labels; vanilla: input_ids, attention_mask, labels; other tensors are
  /// an error) and the schedule scalars; parameters and moments are updated
  /// in place and step() advances. Errors: NotFound without `train_step`,
  /// and those of Model::Run. Input errors (Model::CheckInputs) leave the
  /// state untouched; a device call that fails midway may leave the resident
  /// state (resident_state()) partly updated, and step() does not advance.
  absl::StatusOr<TrainerStepResult> Step(const TensorMap &batch);

  /// One optimizer step with given gradients: runs `apply_gradients` with
  /// `grads` = `grad.<name>` for every trained parameter (the fixtures'
  /// outputs.safetensors names; F32; tensors of other names are ignored).
  /// Errors: NotFound without `apply_gradients` or for a missing gradient,
  /// and those of Model::Run.
  absl::StatusOr<TrainerStepResult> ApplyGradients(const TensorMap &grads);

  /// The current value of trained parameter `name` (official name), or
  /// nullptr (also when SyncToHost fails).
  const Tensor *parameter(const std::string &name) const;
  /// The AdamW moments of `name` (m = exp_avg, v = exp_avg_sq), or nullptr.
  const Tensor *exp_avg(const std::string &name) const;
  const Tensor *exp_avg_sq(const std::string &name) const;
  /// Views of all trained parameters by official name (sharing the
  /// trainer's host buffers; valid while the trainer lives; updated by
  /// steps, on the resident path at the next sync: call again).
  /// Errors: those of SyncToHost.
  absl::StatusOr<TensorMap> Parameters() const;

  /// Overwrites trained parameters with `params` (official names, F32 or
  /// BF16/F16 converted; names that are not trained parameters are
  /// ignored and listed in `ignored` if given). Moments and step are kept.
  /// Errors: InvalidArgument for a shape mismatch; NotFound if
  /// `require_all` and a trained parameter is missing.
  absl::Status SetParameters(const TensorMap &params, bool require_all = true,
                             std::vector<std::string> *ignored = nullptr);

  /// Writes an official-layout checkpoint directory `dir`: the config (see
  /// CheckpointWriteOptions) and model.safetensors with the trained
  /// parameters plus `extra` under their official names (F32). Atomic: the
  /// directory is assembled under a temporary name in the same parent
  /// directory and renamed into place (an existing `dir` is swapped out
  /// with renameat2(RENAME_EXCHANGE) and then removed), so `dir` is either
  /// the old or the complete new checkpoint. `dir` is checked first by
  /// CheckCheckpointOutputDir (nothing a user owns is deleted). Errors:
  /// those of CheckCheckpointOutputDir; InvalidArgument if an extra tensor
  /// has a trained parameter's name; I/O errors naming the path.
  absl::Status SaveCheckpoint(const std::string &dir,
                              const CheckpointWriteOptions &options = {}) const;

  /// Writes the whole training state to one safetensors file, atomically:
  /// `param.<name>`, `adam_m.<name>`, `adam_v.<name>` (F32), `step` (I64 []),
  /// `peak_lr` (F64 []), `warmup_steps`, `total_steps` (I64 []).
  absl::Status SaveState(const std::string &path) const;
  /// Restores a SaveState file (every state tensor of this trainer must be
  /// present with its shape). Errors: NotFound / InvalidArgument naming the
  /// file and tensor; the trainer is unchanged on error.
  absl::Status LoadState(const std::string &path);

  /// Whether the state lives in device memory across steps: on a device
  /// with resident calls (Device::resident_calls: cuda, cuda-emu) unless
  /// BT_RESIDENT_STATE=0 at Create. Each step then moves only its batch
  /// up and the loss, grad_norm and lr down; the parameters and moments
  /// are updated in place on the device and come down when read (the
  /// accessors above, SaveCheckpoint, SaveState: SyncToHost).
  bool resident_state() const { return !resident_.empty(); }
  /// Brings the host copies up to date with the device's (a download of
  /// every state tensor if a step ran since the last sync; nothing when the
  /// state is not resident). parameter(), exp_avg(), exp_avg_sq() and
  /// Parameters() call it (the first three return nullptr when it fails).
  /// Errors: the device's for the copies.
  absl::Status SyncToHost() const;

  /// Releases the device copies of the state.
  ~Trainer();
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;

private:
  Trainer(const Model &model) : model_(model) {}
  absl::StatusOr<TrainerStepResult> Run(const std::string &entry, TensorMap inputs);
  /// Uploads the host copies where they are newer (after SetParameters or
  /// LoadState) before a resident step.
  absl::Status SyncToDevice();

  const Model &model_;
  std::vector<std::string> names_;
  /// The in-out arguments: param.*, adam_m.*, adam_v.* (owning, F32). On
  /// the resident path, the host copies (current after SyncToHost): mutable
  /// so that the const readers can refresh them.
  mutable TensorMap state_;
  /// The device copies of state_ by name (resident_state()), owned.
  std::map<std::string, DeviceTensor> resident_;
  /// resident_ newer than state_ (a step ran) / state_ newer than resident_.
  mutable bool host_stale_ = false;
  bool device_stale_ = false;
  int64_t step_ = 0;
  TrainerSchedule schedule_;
};

/// What `train-step` does (RunTrainStepCommand).
struct TrainStepCommandOptions {
  /// --inputs: a batch (train_step's inputs by name, e.g. a fixture's
  /// inputs.safetensors). --grads: gradients `grad.<name>` (e.g. a fixture's
  /// outputs.safetensors) to apply with apply_gradients instead of
  /// computing them. Exactly one of the two.
  std::string inputs_path;
  std::string grads_path;
  /// --checkpoint: the checkpoint directory the artifact was compiled from;
  /// its weights initialize the parameters (instead of the artifact's), its
  /// known-unused tensors are written back unchanged, and its config file
  /// (config.yaml, else config.json) is copied, unless --config-file names
  /// another one.
  std::string checkpoint_dir;
  std::string config_path;
  /// --lr, --warmup-steps, --total-steps (defaults: 1e-3, 0, 0).
  TrainerSchedule schedule;
  /// -o: the checkpoint directory to write (Trainer::SaveCheckpoint).
  std::string output_dir;
  /// --state-out: also write the optimizer state (Trainer::SaveState).
  std::string state_path;
  /// --step-outputs: also write the step's outputs as safetensors: `loss`
  /// (train_step only), `grad_norm`, `lr` (F32 []), `step` (I64 []).
  std::string outputs_path;
};

/// Parses the arguments after `train-step`:
///   (--inputs FILE | --grads FILE) -o DIR [--checkpoint DIR]
///   [--config-file FILE] [--lr X] [--warmup-steps N] [--total-steps N]
///   [--state-out FILE] [--step-outputs FILE]
/// Errors: InvalidArgument with a usage message.
absl::StatusOr<TrainStepCommandOptions>
ParseTrainStepArgs(const std::vector<std::string> &args);

/// Runs one optimizer step from the model's weights (or the checkpoint's),
/// zero moments, step 1, and writes the parameters after the step as a
/// checkpoint directory. Prints "step 1: loss = ..., grad_norm = ..., lr =
/// ..." to `log`.
absl::Status RunTrainStepCommand(const Model &model,
                                 const TrainStepCommandOptions &options,
                                 std::ostream &log);

} // namespace bt::rt

#endif // BT_RUNTIME_TRAINER_H
