// bt/runtime/kv_plan.h - the KV-cache memory plan of an artifact.
//
// The compiler's `bt-plan-kv-memory` (docs/generation.md, "KV-cache memory
// plan") computes the KV-cache bytes per sequence from the lifetimes of the
// generation functions' !bt.kv_cache values; `bt-run compile` stores the
// result in the manifest as per-sequence coefficients (bt.proto
// KVMemoryPlan). The runtime evaluates them for given lengths and a memory
// budget, so `bench --batch max` and the memory-per-sample column use the
// same plan as `bt-run plan`, without LLVM/MLIR (docs/design.md §3: the runtime
// sizes batches from the plan, it does not bisect to an out-of-memory error).

#ifndef BT_RUNTIME_KV_PLAN_H
#define BT_RUNTIME_KV_PLAN_H

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bt/proto/bt.pb.h"

namespace bt::rt {

/// The plan for one sequence length, all sizes in bytes.
struct PlannedKV {
  int64_t prompt_tokens = 0, gen_tokens = 0;
  /// Global-cache entries per sequence: ceil(prompt / L_B) + ceil(gen / L_B)
  /// (vanilla: prompt + gen).
  int64_t entries = 0;
  /// entries * KVMemoryPlan.global_bytes_per_entry.
  int64_t global_bytes = 0;
  /// KVMemoryPlan.local_bytes_per_sequence (token-decoder scratch).
  int64_t local_bytes = 0;
  /// global_bytes + local_bytes: the plan's memory per sample.
  int64_t bytes_per_sequence = 0;
  /// KVMemoryPlan.weight_bytes.
  int64_t weight_bytes = 0;
};

/// Evaluates the manifest's plan for `prompt_tokens` + `gen_tokens` per
/// sequence. Errors: FailedPrecondition if the manifest has no plan (an
/// artifact compiled before plans were stored: compile it again);
/// InvalidArgument for negative lengths or a plan with block_length < 1.
absl::StatusOr<PlannedKV> PlanKV(const proto::Manifest &manifest,
                                 int64_t prompt_tokens, int64_t gen_tokens);

/// The largest batch whose KV caches fit next to the weights in
/// `memory_bytes`: floor((memory_bytes - weight_bytes) / bytes_per_sequence)
/// (0 if the weights alone do not fit). Caches and weights only, as
/// bt-plan-kv-memory. Errors: InvalidArgument for memory_bytes <= 0 or a
/// plan with no bytes per sequence.
absl::StatusOr<int64_t> PlannedMaxBatch(const PlannedKV &plan,
                                        int64_t memory_bytes);

/// Parses a byte size as `bt-run plan --memory` does: "80GiB", "80G" and
/// "80 GiB" are binary (80 * 2^30), "80GB" decimal (80 * 10^9), a plain
/// number is bytes; units K, M, G, T (also KiB/KB, ...), fractions allowed
/// ("1.5TiB"). Errors: InvalidArgument naming `text`.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

/// MemAvailable of /proc/meminfo in bytes. Errors: Unavailable if it
/// cannot be read.
absl::StatusOr<int64_t> AvailableMemoryBytes();

} // namespace bt::rt

#endif // BT_RUNTIME_KV_PLAN_H
