//===- random_init.cc - seeded random weights of a model config -----------===//

#include "bt/runtime/model/random_init.h"

#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/model/config.h"

#include "absl/strings/match.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace bt::rt {

absl::StatusOr<std::map<std::string, Tensor>>
RandomInitWeights(const proto::ModelConfig &config, uint64_t seed) {
  std::map<std::string, Tensor> weights;
  std::mt19937_64 rng(seed);
  const double context_width =
      static_cast<double>(config.block_decoder().hidden_size());
  const double projection_fan_in = static_cast<double>(
      config.embedder_width() * config.block_length());
  for (const ParamSpec &p : ExpectedParams(config)) {
    BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DType::F32, p.shape));
    float *data = t.data_as<float>();
    const int64_t n = t.num_elements();
    if (absl::EndsWith(p.name, "layernorm.weight") ||
        absl::EndsWith(p.name, "layer_norm.weight")) {
      std::fill(data, data + n, 1.0f);
    } else if (p.shape.size() != 1) {
      // Tensor::Allocate zero-fills: the 1-D tensors (biases) stay 0.
      const double std =
          absl::EndsWith(p.name, "expansion_layer.weight")
              ? 1.0 / std::sqrt(context_width)
          : absl::EndsWith(p.name, "projection_layer.weight")
              ? 1.0 / std::sqrt(projection_fan_in)
              : 0.02;
      std::normal_distribution<float> dist(0.0f, static_cast<float>(std));
      for (int64_t i = 0; i < n; ++i)
        data[i] = dist(rng);
    }
    weights.emplace(p.name, std::move(t));
  }
  return weights;
}

} // namespace bt::rt
