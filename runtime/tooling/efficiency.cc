//===- efficiency.cc - the emulated device's efficiency report -----------===//

#include "bt/runtime/tooling/efficiency.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "bt/runtime/tooling/roofline.h"

namespace bt::rt {

TokenEfficiency EfficiencyOf(const proto::ModelConfig &config,
                             int64_t kv_bytes_per_entry, const BenchResult &r,
                             double matrix_bytes) {
  TokenEfficiency e;
  const DeviceTraffic &t = r.traffic;
  if (t.global_bytes_read + t.global_bytes_written == 0)
    return e;
  const bool generation = IsGenerationSetting(r.setting.name);
  e.tokens = static_cast<double>(r.setting.batch) *
             (generation ? r.setting.gen_tokens : r.setting.prompt_tokens);
  if (e.tokens <= 0)
    return TokenEfficiency();
  const SettingWork w =
      WorkOf(config, r.setting, kv_bytes_per_entry, matrix_bytes);
  e.launches = static_cast<double>(t.host_launches()) / e.tokens;
  e.bytes_read = static_cast<double>(t.global_bytes_read) / e.tokens;
  e.bytes_written = static_cast<double>(t.global_bytes_written) / e.tokens;
  e.gemm_flops = static_cast<double>(t.gemm_flops) / e.tokens;
  e.min_bytes = (generation ? w.decode_bytes : w.bytes) / e.tokens;
  e.roofline_s = std::max((e.bytes_read + e.bytes_written) / H100Model::kBandwidth,
                          e.gemm_flops / H100Model::kPeakFlops);
  e.launch_s = e.launches * H100Model::kLaunchSeconds;
  return e;
}

TokenEfficiency DerivedEfficiencyOf(const proto::ModelConfig &config,
                                    int64_t kv_bytes_per_entry,
                                    const BenchResult &counted,
                                    const BenchSetting &target,
                                    double matrix_bytes) {
  const TokenEfficiency c =
      EfficiencyOf(config, kv_bytes_per_entry, counted, matrix_bytes);
  if (c.tokens <= 0 || !IsGenerationSetting(counted.setting.name) ||
      !IsGenerationSetting(target.name) || target.batch < 1 ||
      target.gen_tokens < 1)
    return TokenEfficiency();
  TokenEfficiency e;
  e.tokens = static_cast<double>(target.batch) * target.gen_tokens;
  const SettingWork w =
      WorkOf(config, target, kv_bytes_per_entry, matrix_bytes);
  e.min_bytes = w.decode_bytes / e.tokens;
  const double excess = c.bytes_read + c.bytes_written - c.min_bytes;
  e.bytes_read = e.min_bytes + excess;
  e.launches =
      c.launches * static_cast<double>(counted.setting.batch) / target.batch;
  e.gemm_flops = c.gemm_flops;
  e.roofline_s = std::max(e.bytes_read / H100Model::kBandwidth,
                          e.gemm_flops / H100Model::kPeakFlops);
  e.launch_s = e.launches * H100Model::kLaunchSeconds;
  return e;
}

std::string FormatEfficiency(const proto::ModelConfig &config,
                             int64_t kv_bytes_per_entry,
                             const std::vector<BenchResult> &bt,
                             double matrix_bytes,
                             const std::vector<BenchSetting> &derived) {
  std::string lines;
  for (const BenchResult &r : bt) {
    const TokenEfficiency e =
        EfficiencyOf(config, kv_bytes_per_entry, r, matrix_bytes);
    if (e.tokens <= 0)
      continue;
    const double bytes = e.bytes_read + e.bytes_written;
    lines += absl::StrFormat(
        "%-14s %5d %-9s %9.2f %11.3f %11.3f %11.3f %7.3f %10.4f %10.3f %10.3f "
        "%6.1f%%\n",
        r.setting.name + (r.setting.max_batch ? "*" : ""), r.setting.batch,
        IsGenerationSetting(r.setting.name)  ? "generated"
        : r.setting.name == kTrainSetting ? "train tok"
                                           : "token",
        e.launches, e.bytes_read / 1e6, e.bytes_written / 1e6,
        e.min_bytes / 1e6, e.min_bytes > 0 ? bytes / e.min_bytes : 0.0,
        e.gemm_flops / 1e9, 1e6 * e.roofline_s, 1e6 * e.launch_s,
        100 * e.launch_s / std::max(e.roofline_s + e.launch_s, 1e-30));
  }
  if (lines.empty())
    return "";
  std::string s = absl::StrFormat(
      "\nefficiency per token on the emulated device (counted by the emulator "
      "on the last timed call: launches, distinct 32-byte sectors read / "
      "written, GEMM FLOPs; generation: the decoding phase per generated "
      "token; train: a whole optimizer step per training token). Modelled H100 time, a model and not a measurement: roofline "
      "max(bytes / %.2f TB/s, FLOPs / %.0f TFLOP/s) and %.0f us per launch "
      "(docs/bench.md \"Efficiency on the emulated device\")%s\n",
      H100Model::kBandwidth / 1e12, H100Model::kPeakFlops / 1e12,
      H100Model::kLaunchSeconds * 1e6,
      matrix_bytes == 2 ? "; minimum with the weight matrices in bf16, as "
                          "this artifact's kernels take them"
                        : "");
  s += absl::StrFormat(
      "%-14s %5s %-9s %9s %11s %11s %11s %7s %10s %10s %10s %7s\n", "setting",
      "batch", "per", "launches", "MB read", "MB written", "MB minimum",
      "x min", "GFLOP", "H100 us", "launch us", "launch");
  s += lines;
  std::string derived_lines;
  for (const BenchSetting &d : derived) {
    const BenchResult *from = nullptr;
    for (const BenchResult &r : bt)
      if (r.setting.name == d.name &&
          EfficiencyOf(config, kv_bytes_per_entry, r, matrix_bytes).tokens >
              0 &&
          (from == nullptr || r.setting.batch > from->setting.batch))
        from = &r;
    if (from == nullptr)
      continue;
    const TokenEfficiency e =
        DerivedEfficiencyOf(config, kv_bytes_per_entry, *from, d, matrix_bytes);
    if (e.tokens <= 0)
      continue;
    derived_lines += absl::StrFormat(
        "%-14s %5d %5d/%-5d %5d %5d/%-5d %9.2f %11.3f %11.3f %7.3f %10.3f "
        "%10.3f %6.1f%%\n",
        d.name + (d.max_batch ? "*" : ""), d.batch, d.prompt_tokens,
        d.gen_tokens, from->setting.batch, from->setting.prompt_tokens,
        from->setting.gen_tokens, e.launches, e.min_bytes / 1e6,
        e.bytes_read / 1e6, e.min_bytes > 0 ? e.bytes_read / e.min_bytes : 0.0,
        1e6 * e.roofline_s, 1e6 * e.launch_s,
        100 * e.launch_s / std::max(e.roofline_s + e.launch_s, 1e-30));
  }
  if (!derived_lines.empty()) {
    s += "derived per generated token, not run (the emulator cannot run "
         "these batches): MB = the analytic minimum at that batch and length "
         "+ the excess over the minimum counted at the 'from' batch and "
         "length (per row: the activations between the kernels; the reads "
         "that grow with the context are the KV cache's, in the minimum); "
         "launches = the counted ones per decode step over the batch; a "
         "model, not a count (docs/bench.md \"Efficiency on the emulated "
         "device\")\n";
    s += absl::StrFormat("%-14s %5s %11s %5s %11s %9s %11s %11s %7s %10s "
                         "%10s %7s\n",
                         "setting", "batch", "prompt/gen", "from", "from p/g",
                         "launches", "MB minimum", "MB derived", "x min",
                         "H100 us", "launch us", "launch");
    s += derived_lines;
  }
  if (kv_bytes_per_entry == 0)
    s += "(the artifact has no KV-cache plan: the minimum leaves out KV-cache "
         "reads)\n";
  return s;
}

} // namespace bt::rt
