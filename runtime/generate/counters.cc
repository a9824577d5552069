//===- counters.cc - the generation counters as text ----------------------===//
//
// FormatCounters (generate.h): what `bt-run generate` and `bt-launcher
// generate` print and store in the output's metadata (docs/generation.md,
// "Counters"; docs/codegen-cuda.md for the device traffic and the H100
// model).
//
//===----------------------------------------------------------------------===//

#include <algorithm>

#include "absl/strings/str_format.h"
#include "bt/runtime/generate/generate.h"

namespace bt::rt {

namespace {
/// "<entry> as a CUDA graph: R recording(s), N of the calls replayed, K
/// nodes per replay", when `g` has recordings.
void AppendGraphLine(std::string &s, const char *entry, const GraphReplays &g) {
  if (g.recordings > 0)
    absl::StrAppendFormat(&s,
                          "%s as a CUDA graph: %d recording(s), %d of the "
                          "calls replayed, %d nodes per replay\n",
                          entry, g.recordings, g.replays, g.nodes);
}
} // namespace

std::string FormatCounters(const GenerateCounters &c) {
  std::string s = absl::StrFormat(
      "prefill: %d call(s), %d blocks (rows x blocks), %.3f s\n", c.prefill_calls,
      c.blocks_prefilled, c.prefill_seconds);
  if (c.decode_tokens_calls > 0 || c.decode_block_calls > 0)
    absl::StrAppendFormat(
        &s,
        "decode_tokens: %d call(s), %d token-decoder steps, %d rows\n"
        "decode_block: %d call(s), %d rows\n",
        c.decode_tokens_calls, c.token_decoder_steps, c.token_decoder_rows,
        c.decode_block_calls, c.decode_block_rows);
  AppendGraphLine(s, "decode_tokens", c.decode_tokens_graph);
  AppendGraphLine(s, "decode_block", c.decode_block_graph);
  if (c.decode_step_calls > 0 || c.tokens_sampled > 0)
    absl::StrAppendFormat(&s, "decode_step: %d call(s), %d rows; %d tokens sampled\n",
                          c.decode_step_calls, c.decode_step_rows,
                          c.tokens_sampled);
  AppendGraphLine(s, "decode_step", c.decode_step_graph);
  absl::StrAppendFormat(
      &s,
      "decode loop: %.3f s; %d finished row(s) compacted\n"
      "kv cache: capacity %d entries, length %d, %d -> %d bytes\n",
      c.decode_seconds, c.rows_compacted, c.cache_capacity, c.cache_length,
      c.cache_bytes_initial, c.cache_bytes_final);
  const DeviceTraffic &t = c.decode_traffic;
  if (t.bytes() > 0 || t.kernel_launches > 0) {
    const double steps = static_cast<double>(std::max<int64_t>(c.decode_token_steps, 1));
    absl::StrAppendFormat(
        &s,
        "device traffic in the decode loop (%s state): host->device %d bytes in %d "
        "copies, device->host %d bytes in %d copies (%d bytes of these for host "
        "sampling: logits down, tokens up); %d kernel launches, %d GEMMs, %d "
        "graph launches (%d nodes), %d device copies\n"
        "per decode step (%d steps): %.1f bytes host<->device, %.1f without the "
        "host sampler's; %.1f kernel launches, %.2f graph launches; %d device "
        "allocations and %d frees by the driver\n",
        c.resident_state ? "resident" : "host", t.to_device_bytes, t.to_device_copies,
        t.to_host_bytes, t.to_host_copies, t.sampler_bytes, t.kernel_launches,
        t.gemm_calls, t.graph_launches, t.graph_nodes, t.device_copies,
        c.decode_token_steps,
        t.bytes() / steps, (t.bytes() - t.sampler_bytes) / steps,
        t.kernel_launches / steps, t.graph_launches / steps, t.driver_allocations,
        t.driver_frees);
  }
  if (t.global_bytes_read + t.global_bytes_written > 0) {
    // Counted by the emulator; the H100 time is a roofline model (H100Model in
    // device/device.h), not a measurement.
    const double steps = static_cast<double>(std::max<int64_t>(c.decode_token_steps, 1));
    const double bytes = static_cast<double>(t.global_bytes_read + t.global_bytes_written);
    const double flops = static_cast<double>(t.gemm_flops);
    const double roofline =
        std::max(bytes / H100Model::kBandwidth, flops / H100Model::kPeakFlops);
    // A graph launch costs the host about one kernel launch.
    const double launch =
        H100Model::kLaunchSeconds * static_cast<double>(t.host_launches());
    absl::StrAppendFormat(
        &s,
        "device memory per decode step (counted by the emulator, distinct 32-byte "
        "sectors per launch): %.0f bytes read, %.0f written, %.0f accessed by "
        "threads; %.0f GEMM FLOPs\n"
        "modelled H100 time per decode step (a model, not a measurement): roofline "
        "%.3f us at 3.35 TB/s and 989 TFLOP/s; launch overhead %.3f us at 2 us per "
        "kernel, GEMM, graph launch or device copy (%.0f%% of both)\n",
        t.global_bytes_read / steps, t.global_bytes_written / steps,
        t.global_access_bytes / steps, flops / steps, 1e6 * roofline / steps,
        1e6 * launch / steps, 100.0 * launch / std::max(roofline + launch, 1e-30));
  }
  return s;
}

} // namespace bt::rt
