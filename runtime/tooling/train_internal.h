//===- train_internal.h - helpers of the train command ----------*- C++ -*-===//
//
// Private to runtime/tooling (train.cc, train_files.cc, train_data.cc): the
// run directory's files and directories, child processes, plots and the
// training data of a run.
//
//===----------------------------------------------------------------------===//
#ifndef BT_RUNTIME_TOOLING_TRAIN_INTERNAL_H
#define BT_RUNTIME_TOOLING_TRAIN_INTERNAL_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bt/runtime/base/tensor.h"
#include "bt/runtime/train/data.h"
#include "nlohmann/json.hpp"

namespace bt::rt {
class Model;
class ProgressDisplay;
struct TrainOptions;
} // namespace bt::rt

namespace bt::rt::train_internal {

/// The training data of a run: the tokenized, packed training samples and
/// the held-out batches (docs/training.md).
struct TrainingData {
  proto::TokenizerKind tokenizer_kind;
  PackedDataset train;
  /// Held-out batches of at most --batch samples, --eval-batches of them.
  std::vector<TensorMap> eval_batches;
  int64_t held_samples = 0, eval_targets = 0;
  /// TokenizedCorpus::Fingerprint of the training documents (a resumed run
  /// must have the same).
  uint64_t train_fingerprint = 0;
};

/// With --resume: the checkpoint (`resume_ckpt`) and its trainer state
/// (`resumed`), whose data settings must be this run's. Errors:
/// InvalidArgument naming the checkpoint and the setting.
absl::Status ReadResumeState(const TrainOptions &o, std::string &resume_ckpt,
                             nlohmann::json &resumed);

/// Reads, tokenizes (the artifact's tokenizer), splits and packs the
/// documents of `o` into [batch, seq_len] samples of L_B-token blocks, and
/// reports the counts on `progress`. `resumed` (a trainer_state.json, or
/// null) must have the same training data. Errors: FailedPrecondition
/// without a tokenizer; InvalidArgument for a tokenizer that does not fit
/// the model, too few documents or samples, or other data than the resumed
/// run's; those of ReadDocuments and PackedDataset::Create.
absl::StatusOr<TrainingData> LoadTrainingData(const Model &model,
                                              const TrainOptions &o,
                                              const std::string &resume_ckpt,
                                              const nlohmann::json &resumed,
                                              ProgressDisplay &progress);


/// `v` with 17 significant digits (round-trips a double; YAML and logs).
std::string Num(double v);
/// Whether `path` exists (stat succeeds; a dangling link does not).
bool Exists(const std::string &path);
/// Whether `path` is a directory (following links).
bool IsDir(const std::string &path);
/// The training sequence length: `seq_len` (--seq-len) if given, else the
/// config's max_length, else 256; it must be a multiple of the block length
/// with at least 2 blocks. The error names where the length came from
/// (--seq-len, or `config_source`'s max_length).
absl::Status ResolveSeqLen(const proto::ModelConfig &config, int64_t &seq_len,
                           const std::string &config_source);

/// mkdir -p `path`. Errors: Internal with the path and errno's text.
absl::Status MakeDirs(const std::string &path);
/// rm -r `path` (absent: OK). Errors: Internal with the path.
absl::Status RemoveTree(const std::string &path);
/// fsync of directory `dir` (best effort).
void FsyncDir(const std::string &dir);
/// The names in `dir` (without . and ..; empty if unreadable).
std::vector<std::string> ListDir(const std::string &dir);
/// The target of symbolic link `path` ("" if it is none).
std::string ReadLink(const std::string &path);
/// "step-NNNNNN" of a checkpoint at `step`.
std::string CheckpointName(int64_t step);
/// `v` as 16 hexadecimal digits.
std::string Hex(uint64_t v);
/// Where a checkpoint of `dir` is: dir/latest, or dir itself.
absl::StatusOr<std::string> ResolveCheckpoint(const std::string &dir);
/// The directory a checkpoint belongs to (its OUT): the parent of
/// step-NNNNNN, or the directory itself.
std::string RunDirOf(const std::string &checkpoint);
/// Runs argv (environment + `env_over`), waits; returns the exit status
/// (128 + signal for a killed child). With `quiet`, its stdout and stderr go
/// to /dev/null.
absl::StatusOr<int> RunProcess(const std::vector<std::string> &argv,
                               const std::map<std::string, std::string> &env_over,
                               bool quiet = false);
/// Whether `name` is an executable on $PATH.
bool HaveProgram(const std::string &name);
/// Plots with gnuplot into DIR/NAME (`commands` after the terminal and
/// output settings; the image written atomically). Returns "" or a note
/// saying why there is no plot (gnuplot missing or failing: not an error).
std::string RenderGnuplot(const std::string &dir, const std::string &name,
                          const std::string &commands);

} // namespace bt::rt::train_internal

#endif // BT_RUNTIME_TOOLING_TRAIN_INTERNAL_H
