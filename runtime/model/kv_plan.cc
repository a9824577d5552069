// bt/runtime/kv_plan.cc - evaluating the manifest's KV-cache memory plan.

#include "bt/runtime/model/kv_plan.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
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
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "': expected a size such as 80GiB (binary), 80GB "
        "(decimal) or 1073741824 (bytes)"));
  };
  absl::string_view t = absl::StripAsciiWhitespace(text);
  size_t end = 0;
  while (end < t.size() &&
         (std::isdigit(static_cast<unsigned char>(t[end])) || t[end] == '.'))
    ++end;
  double value = 0;
  if (end == 0 || !absl::SimpleAtod(t.substr(0, end), &value) || value < 0)
    return bad();
  const std::string unit =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(t.substr(end)));
  double scale = 1;
  if (!unit.empty()) {
    static const char kPrefixes[] = "kmgtp";
    const char *p = std::strchr(kPrefixes, unit[0]);
    if (p == nullptr || unit[0] == '\0')
      return bad();
    const std::string rest = unit.substr(1);
    double base = 0;
    if (rest.empty() || rest == "ib" || rest == "i")
      base = 1024.0;
    else if (rest == "b")
      base = 1000.0;
    else
      return bad();
    scale = std::pow(base, static_cast<int>(p - kPrefixes) + 1);
  }
  const double total = value * scale;
  if (total > 9.0e18)
    return bad();
  return static_cast<int64_t>(total);
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
