//===- random_init.h - seeded random weights of a model config --*- C++ -*-===//
//
// The weights of `bt-run --random-init` (benchmarks of the paper's models,
// which have no released checkpoints) and of artifacts that store the seed
// instead of the weights (Manifest.random_init, docs/abi.md): one definition,
// so that an artifact drawn at load time holds bit-identical weights to one
// whose weights were drawn by the compiler.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_MODEL_RANDOM_INIT_H
#define BT_RUNTIME_MODEL_RANDOM_INIT_H

#include "bt/proto/bt.pb.h"
#include "bt/runtime/base/tensor.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <map>
#include <string>

namespace bt::rt {

/// Every parameter ExpectedParams(config) lists, F32, drawn from one
/// std::mt19937_64 seeded with `seed`, parameter by parameter in official
/// state_dict order, as the official model initializes them:
///  - LayerNorm weights 1, every 1-D tensor (biases, LayerNorm biases) 0
///    (HF GPT-NeoX `_init_weights`);
///  - `token_decoder.expansion_layer.weight`: normal(0, D^-1/2), D the block
///    decoder's hidden size (official token_decoder/base.py);
///  - `embedder.projection_layer.weight`: normal(0, (E * L_B)^-1/2)
///    (official embedder/lookup.py);
///  - every other tensor: normal(0, 0.02) (GPT-NeoX initializer_range).
/// Deterministic for one build of the standard library (std::normal_
/// distribution's algorithm is the library's). Cost: one normal draw per
/// element, single-threaded (about 10 ns each). Errors: ResourceExhausted
/// when a tensor cannot be allocated (Tensor::Allocate).
absl::StatusOr<std::map<std::string, Tensor>>
RandomInitWeights(const proto::ModelConfig &config, uint64_t seed);

} // namespace bt::rt

#endif // BT_RUNTIME_MODEL_RANDOM_INIT_H
