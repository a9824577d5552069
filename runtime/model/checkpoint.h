//===- checkpoint.h - official checkpoints ----------------------*- C++ -*-===//
//
// Loading a checkpoint (a ModelConfig plus model.safetensors with official
// state_dict keys, fixtures/official/README.md) and validating its tensors
// against the parameter list of runtime/model/param_names.h.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_CHECKPOINT_H
#define BT_RUNTIME_CHECKPOINT_H

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bt/proto/bt.pb.h"
#include "bt/runtime/base/tensor.h"

namespace bt::rt {

struct CheckpointOptions {
  /// Convert BF16/F16 weights to F32 (the CPU target computes in f32). When
  /// false the tensors keep the dtype they have in the file.
  bool convert_to_f32 = true;
};

/// A validated checkpoint: every tensor ExpectedParams(config) lists, with
/// the expected shape. F32 tensors are zero-copy views of the mapped files
/// (kept alive by the tensors); converted tensors own their buffers.
struct Checkpoint {
  proto::ModelConfig config;
  /// Parameter names in official state_dict order (ExpectedParams).
  std::vector<std::string> param_names;
  /// name -> tensor, one per entry of param_names.
  std::map<std::string, Tensor> weights;
  /// dtype of the tensors in the files (F32, BF16 or F16; the first seen).
  proto::DType file_dtype = proto::DTYPE_UNSPECIFIED;
  /// The known-unused tensors present in the files (KnownUnusedParams, e.g.
  /// the block decoder's embed_in), converted like `weights`: the model
  /// never reads them, but a checkpoint written back (e.g. after a training
  /// step) carries them unchanged.
  std::map<std::string, Tensor> unused;
  /// Human-readable notes, e.g. "ignored unused tensor
  /// block_decoder.gpt_neox.embed_in.weight [512, 64]".
  std::vector<std::string> notices;
  /// Suspicious but loadable contents, one line each: a parameter holding
  /// NaN or infinite values ("tensor 'W' [64, 64] holds 3 NaN and 0
  /// infinite values (the first at flat index 17): ..."). The official code
  /// loads such weights silently, so they are warnings, not errors.
  std::vector<std::string> warnings;
};

/// Loads a checkpoint directory: the config by LoadModelConfig(dir)
/// (config.yaml preferred, else config.json) and the weights from
/// dir/model.safetensors, or, when that is absent, from the shards listed in
/// dir/model.safetensors.index.json ("weight_map").
/// Errors: as LoadModelConfig, NotFound if no weights file exists, and the
/// errors of the overload below.
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string &dir,
                                          const CheckpointOptions &opts = {});

/// Loads the weights of `config` from `safetensors_paths` (one or more
/// shards; a tensor may appear in only one of them) and validates them:
///  - every expected tensor present (NotFound otherwise), with the expected
///    shape and a dtype of F32, BF16 or F16 (InvalidArgument otherwise); the
///    message names the tensor, the file, and the expected shape;
///  - known-unused tensors (KnownUnusedParams, e.g. the block decoder's
///    embed_in) are kept apart in `unused`, with a notice;
///  - any other tensor is an InvalidArgument error ("unexpected tensor");
///  - duplicate tensors across shards are an InvalidArgument error;
///  - a parameter with NaN or infinite values adds a line to `warnings`.
/// The config is validated first (ValidateModelConfig).
absl::StatusOr<Checkpoint>
LoadCheckpoint(const proto::ModelConfig &config,
               const std::vector<std::string> &safetensors_paths,
               const CheckpointOptions &opts = {});

} // namespace bt::rt

#endif // BT_RUNTIME_CHECKPOINT_H
