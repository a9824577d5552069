//===- request.cc - a generation request's prompts and checks -------------===//
//
// LeftPadPrompts and CheckGenerationRequest (generate.h): the prompts
// padded into one batch, and the limits a request is checked against before
// anything runs (the block decoder's positions; the outputs' and planned KV
// caches' bytes against the available memory).
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/generate/generate.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/model/kv_plan.h"

namespace bt::rt {

absl::StatusOr<std::pair<Tensor, Tensor>>
LeftPadPrompts(const std::vector<std::vector<int64_t>> &prompts, int64_t pad_id) {
  if (prompts.empty())
    return absl::InvalidArgumentError("no prompts");
  int64_t T = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty())
      return absl::InvalidArgumentError(
          absl::StrCat("prompt ", i, " has no tokens"));
    T = std::max<int64_t>(T, static_cast<int64_t>(prompts[i].size()));
  }
  const int64_t B = static_cast<int64_t>(prompts.size());
  BT_ASSIGN_OR_RETURN(Tensor ids, Tensor::Allocate(proto::I64, {B, T}));
  BT_ASSIGN_OR_RETURN(Tensor mask, Tensor::Allocate(proto::I64, {B, T}));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = static_cast<int64_t>(prompts[b].size());
    for (int64_t t = 0; t < T; ++t) {
      const bool real = t >= T - n;
      ids.data_as<int64_t>()[b * T + t] = real ? prompts[b][t - (T - n)] : pad_id;
      mask.data_as<int64_t>()[b * T + t] = real ? 1 : 0;
    }
  }
  return std::make_pair(std::move(ids), std::move(mask));
}

absl::Status CheckGenerationRequest(const Model &model, int64_t batch, int64_t prompt_length,
                                    const GenerateOptions &options) {
  const proto::ModelConfig &cfg = model.config();
  const int64_t N = options.max_new_tokens, V = cfg.vocab_size();
  // Positions: the block decoder has one per block. (A vanilla model has
  // none to check: HF GPT-NeoX's rotary embedding extends past
  // max_position_embeddings, and the paper's 2048 + 128 settings use that.)
  if (cfg.kind() == proto::ModelConfig::BLOCK_TRANSFORMER) {
    const int64_t L = std::max<int64_t>(cfg.block_length(), 1);
    const int64_t max_pos = cfg.block_decoder().max_position_embeddings();
    const int64_t prompt_pos = prompt_length / L + (prompt_length % L != 0 ? 1 : 0);
    const int64_t new_pos = N / L + (N % L != 0 ? 1 : 0);
    if (max_pos > 0 && (prompt_pos > max_pos || new_pos > max_pos - prompt_pos))
      return absl::InvalidArgumentError(absl::StrCat(
          "generate: the prompt (", prompt_length, " tokens) and max_new_tokens ", N, " need ",
          prompt_pos, " + ", new_pos, " blocks = ",
          prompt_pos + std::min(new_pos, std::numeric_limits<int64_t>::max() - prompt_pos),
          " positions; the block decoder has max_position_embeddings ", max_pos, " (",
          max_pos * L, " tokens at L_B ", L, ")"));
  }
  // Memory: the outputs (new tokens I64 [B, N], step logits F32 [N, B, V])
  // and the planned KV caches, checked for overflow and against MemAvailable.
  int64_t bytes = 0, logits = 0, kv = 0;
  bool overflow = __builtin_mul_overflow(batch, N, &bytes) ||
                  __builtin_mul_overflow(bytes, int64_t{8}, &bytes);
  if (!overflow && options.keep_step_logits)
    overflow = __builtin_mul_overflow(batch, N, &logits) ||
               __builtin_mul_overflow(logits, V, &logits) ||
               __builtin_mul_overflow(logits, int64_t{4}, &logits) ||
               __builtin_add_overflow(bytes, logits, &bytes);
  if (!overflow && model.manifest().has_kv_plan()) {
    absl::StatusOr<PlannedKV> plan = PlanKV(model.manifest(), prompt_length, N);
    overflow = !plan.ok() || __builtin_mul_overflow(plan->bytes_per_sequence, batch, &kv) ||
               __builtin_add_overflow(bytes, kv, &bytes);
  }
  if (overflow)
    return absl::InvalidArgumentError(absl::StrCat(
        "generate: max_new_tokens ", N, " for ", batch, " sequences of ", prompt_length,
        " prompt tokens overflows a 64-bit byte count"));
  absl::StatusOr<int64_t> available = AvailableMemoryBytes();
  if (available.ok() && bytes > *available)
    return absl::ResourceExhaustedError(absl::StrFormat(
        "generate: max_new_tokens %d for %d sequences needs %.2f GiB (new tokens, step logits "
        "and the planned KV caches), more than the %.2f GiB of available memory",
        N, batch, bytes / 1073741824.0, *available / 1073741824.0));
  return absl::OkStatus();
}

} // namespace bt::rt
