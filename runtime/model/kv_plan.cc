// bt/runtime/kv_plan.cc - evaluating the manifest's KV-cache memory plan.

#include "bt/runtime/model/kv_plan.h"

#include "bt/runtime/base/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace bt::rt {
namespace {

/// ceil(a / b) for a >= 0, b > 0 (no a + b - 1: it overflows near INT64_MAX).
int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

} // namespace

absl::StatusOr<PlannedKV> PlanKV(const proto::Manifest &manifest,
                                 int64_t prompt_tokens, int64_t gen_tokens) {
  if (!manifest.has_kv_plan())
    return absl::FailedPreconditionError(
        "the artifact has no KV-cache memory plan (compiled by a bt-run "
        "from before plans were stored in the manifest); compile it again");
  const proto::KVMemoryPlan &p = manifest.kv_plan();
  if (p.block_length() < 1 || p.global_bytes_per_entry() < 0 ||
      p.local_bytes_per_sequence() < 0 || p.weight_bytes() < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the artifact's KV-cache memory plan is malformed: ",
        p.ShortDebugString()));
  if (prompt_tokens < 0 || gen_tokens < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "KV-cache plan: negative lengths ", prompt_tokens, " + ", gen_tokens));
  PlannedKV r;
  r.prompt_tokens = prompt_tokens;
  r.gen_tokens = gen_tokens;
  r.local_bytes = p.local_bytes_per_sequence();
  r.weight_bytes = p.weight_bytes();
  // Checked: lengths near 2^63 must not wrap into negative byte counts.
  if (__builtin_add_overflow(CeilDiv(prompt_tokens, p.block_length()),
                             CeilDiv(gen_tokens, p.block_length()), &r.entries) ||
      __builtin_mul_overflow(r.entries, p.global_bytes_per_entry(), &r.global_bytes) ||
      __builtin_add_overflow(r.global_bytes, r.local_bytes, &r.bytes_per_sequence))
    return absl::InvalidArgumentError(absl::StrCat(
        "KV-cache plan: ", prompt_tokens, " + ", gen_tokens,
        " tokens per sequence overflow a 64-bit byte count"));
  return r;
}

absl::StatusOr<int64_t> PlannedMaxBatch(const PlannedKV &plan,
                                        int64_t memory_bytes) {
  if (memory_bytes <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("KV-cache plan: memory budget ", memory_bytes,
                     " bytes must be positive"));
  if (plan.bytes_per_sequence <= 0)
    return absl::InvalidArgumentError(
        "KV-cache plan: no KV-cache bytes per sequence (nothing to plan)");
  const int64_t available = memory_bytes - plan.weight_bytes;
  return available <= 0 ? 0 : available / plan.bytes_per_sequence;
}

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  std::optional<int64_t> bytes =
      ParseByteSizeText(std::string_view(text.data(), text.size()));
  if (!bytes)
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "': expected a size such as 80GiB (binary), 80GB "
        "(decimal) or 1073741824 (bytes)"));
  return *bytes;
}

absl::StatusOr<int64_t> AvailableMemoryBytes() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("MemAvailable:", 0) != 0)
      continue;
    const int64_t kb = std::strtoll(line.c_str() + 13, nullptr, 10);
    if (kb > 0)
      return kb * 1024;
  }
  return absl::UnavailableError(
      "cannot read MemAvailable from /proc/meminfo; give --memory");
}

} // namespace bt::rt
