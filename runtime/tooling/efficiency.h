//===- efficiency.h - the emulated device's efficiency report ---*- C++ -*-===//
//
// The efficiency report of `bench --device cuda-emu` (issue 13 item 6;
// docs/bench.md "Efficiency on the emulated device"): per generated token
// (generation settings, the decoding phase) or per processed token (forward),
// the host's launches (kernels, cuBLAS GEMMs, CUDA graphs, device copies), the device-memory bytes read and
// written and the GEMM FLOPs the emulator counted on the last timed call,
// the analytic minimum bytes of the work model (WorkOf, roofline.h), and the
// time an H100 would need at its roofline plus a per-launch overhead — a
// model, not a measurement.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_TOOLING_EFFICIENCY_H
#define BT_RUNTIME_TOOLING_EFFICIENCY_H

#include <cstdint>
#include <string>
#include <vector>

#include "bt/runtime/device/device.h"
#include "bt/runtime/tooling/bench.h"

namespace bt::rt {

/// One line of the report, per token of `r` (generation: per generated
/// token, the decoding phase's traffic / (batch * gen_tokens); forward and train: per
/// token of the eval / train_step call).
struct TokenEfficiency {
  double tokens = 0;             // the divisor
  double launches = 0;           // host launches: kernels, GEMMs, graphs, copies
  double bytes_read = 0, bytes_written = 0;
  double gemm_flops = 0;         // counted by the emulator (GEMMs only)
  double min_bytes = 0;          // WorkOf's bytes (weights once per step...)
  double roofline_s = 0;         // max(bytes / bandwidth, flops / peak)
  double launch_s = 0;           // launches * H100Model::kLaunchSeconds
};

/// The per-token figures of `r`; all zero when `r.traffic` holds no
/// emulator counts (global bytes) or the setting made no tokens.
/// `matrix_bytes` as WorkOf's (MatrixWeightBytes of the artifact).
TokenEfficiency EfficiencyOf(const proto::ModelConfig &config,
                             int64_t kv_bytes_per_entry, const BenchResult &r,
                             double matrix_bytes = 4);

/// The per-token figures of `target` (a generation setting, typically the
/// planned max batch, not run) derived from `counted` (a counted run of the
/// same setting name, possibly shorter: --emu-lengths) — a model, not a
/// count: bytes = WorkOf's minimum per generated token of `target` + the
/// counted run's excess over its own minimum per generated token (the
/// activations between the kernels, per row, so the same at any batch; the
/// context-dependent reads are the KV cache's, which the minimum holds);
/// launches = the counted launches per decode step shared by target.batch
/// rows; GEMM FLOPs per token as counted (per row). `bytes_read` holds the
/// derived total and `bytes_written` 0 (the excess is not split). All zero
/// when `counted` has no emulator counts or either makes no tokens.
TokenEfficiency DerivedEfficiencyOf(const proto::ModelConfig &config,
                                    int64_t kv_bytes_per_entry,
                                    const BenchResult &counted,
                                    const BenchSetting &target,
                                    double matrix_bytes = 4);

/// The report section: a header naming the model's constants, then one
/// line per bt result with emulator counts; empty when none has any. Then,
/// for each of `derived` (BenchOptions::derived), a line derived
/// (DerivedEfficiencyOf) from the counted result of its setting with the
/// largest batch.
std::string FormatEfficiency(const proto::ModelConfig &config,
                             int64_t kv_bytes_per_entry,
                             const std::vector<BenchResult> &bt,
                             double matrix_bytes = 4,
                             const std::vector<BenchSetting> &derived = {});

} // namespace bt::rt

#endif // BT_RUNTIME_TOOLING_EFFICIENCY_H
