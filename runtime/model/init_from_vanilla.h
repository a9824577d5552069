//===- init_from_vanilla.h - uptraining init from a vanilla GPT-NeoX -*- C++ -*-===//
//
// Paper §3.5 (uptraining) and the official
// `model.utils.load_block_from_vanilla_checkpoint` (itsnamgyu/block-transformer
// @ 17842dd) with `method: partition`, `initialize_mean_embedder_projection`
// and `initialize_identity_expansion_layer`.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_MODEL_INIT_FROM_VANILLA_H
#define BT_RUNTIME_MODEL_INIT_FROM_VANILLA_H

#include "bt/proto/bt.pb.h"
#include "bt/runtime/model/checkpoint.h"
#include "bt/runtime/base/tensor.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <map>
#include <string>

namespace bt::rt {

/// Block Transformer weights initialized from a vanilla GPT-NeoX (fp32,
/// official names), the partition init of the official uptraining path:
///  - `embedder.embeddings` and `token_decoder.gpt_neox.embed_in` ← vanilla
///    `gpt_neox.embed_in` `[V, D]`;
///  - block-decoder layer i ← vanilla layer i (i < n_block_layers);
///    token-decoder layer j ← vanilla layer j + n_block_layers;
///  - `token_decoder.gpt_neox.final_layer_norm` and `token_decoder.embed_out`
///    ← vanilla;
///  - `embedder.projection_layer.weight[o, i, k] = (o == i) / L_B` (the mean
///    of the block's token embeddings), bias 0;
///  - `token_decoder.expansion_layer.weight[s·T + o, i, 0] = (o == i)` for
///    every prefix slot s, bias 0;
///  - `block_decoder.gpt_neox.final_layer_norm`: weight 1, bias 0 (the fresh
///    init; not in the vanilla model); the unused
///    `block_decoder.gpt_neox.embed_in`: normal(0, 0.02) from `seed`.
///
/// `block` must be a Block Transformer with `projection_method:
/// projection_layer`, the prefix strategy, n_block_layers + n_token_layers =
/// the vanilla layer count and every width, head count, MLP width, rotary
/// dims and vocabulary equal to the vanilla model's (embedder width E = D =
/// T). Errors: InvalidArgument naming the mismatching field; a vanilla tensor
/// with an unexpected shape names the tensor and the expected shape.
absl::StatusOr<std::map<std::string, Tensor>>
InitBlockFromVanilla(const proto::ModelConfig &block,
                     const proto::ModelConfig &vanilla,
                     const std::map<std::string, Tensor> &vanilla_weights,
                     uint64_t seed);

/// The vanilla checkpoint of an uptraining init: `vanilla_dir` with its
/// config (LoadCheckpoint: config.yaml / config.json + model.safetensors),
/// or, when the directory has no config, a released checkpoint folder
/// (`checkpoint-<step>/` holding only model.safetensors, bf16 or fp32) whose
/// config is the vanilla trainer YAML that the block trainer YAML
/// `block_config` names in `load_from_vanilla.config_path` (official
/// pretrain_block_transformer.py; a relative path is tried against the
/// block YAML's directory, then the working directory, where the official
/// code joins it with the project root). Errors: those of LoadCheckpoint;
/// NotFound naming the field when the folder has no config and
/// `load_from_vanilla.config_path` is absent or names no file.
absl::StatusOr<Checkpoint> LoadVanillaCheckpoint(const std::string &vanilla_dir,
                                                 const std::string &block_config);

/// `bt-run init-from-vanilla`: loads the vanilla checkpoint directory
/// `vanilla_dir` (LoadVanillaCheckpoint: config.yaml/config.json +
/// model.safetensors, or a released folder with only model.safetensors), the block
/// trainer YAML `block_config`, and writes a new checkpoint directory
/// `out_dir` in the official layout: `config.yaml` (a copy of
/// `block_config`) and `model.safetensors` (fp32, InitBlockFromVanilla).
/// `out_dir` is created; it must not exist or be empty (nothing is
/// overwritten). Files are written atomically.
absl::Status InitFromVanillaCommand(const std::string &vanilla_dir,
                                    const std::string &block_config,
                                    const std::string &out_dir, uint64_t seed);

} // namespace bt::rt

#endif // BT_RUNTIME_MODEL_INIT_FROM_VANILLA_H
