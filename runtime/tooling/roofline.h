//===- roofline.h - the machine's bounds in the bench report ----*- C++ -*-===//
//
// The roofline of `bench` (issue 15 item 5; docs/bench.md "Roofline"): the
// machine's memory bandwidth (a STREAM-like triad) and fp32 GEMM peak
// (OpenBLAS sgemm on a large square), measured in the same run as the
// settings, and a work model of every setting (FLOPs and bytes of one call,
// from the model configuration), so that the report can print the fraction
// of the bound that applies each measured call achieved.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_TOOLING_ROOFLINE_H
#define BT_RUNTIME_TOOLING_ROOFLINE_H

#include <cstdint>
#include <string>
#include <vector>

#include "bt/runtime/tooling/bench.h"

namespace bt::rt {

/// The measured bounds of this machine at a thread count.
struct MachineBounds {
  int threads = 1;
  /// STREAM triad a[i] = b[i] + s * c[i] over three float arrays of
  /// `triad_bytes_per_array` bytes each, split over `threads` threads; the
  /// best of several repetitions, counting 12 bytes per element (STREAM's
  /// convention: two reads, one write; no write-allocate). Bytes per second.
  double bandwidth = 0;
  int64_t triad_bytes_per_array = 0;
  /// cblas_sgemm C = A * B, row-major, n x n x n (`gemm_n`), with OpenBLAS
  /// at its current thread count; the best of several repetitions,
  /// 2 n^3 FLOPs per call. FLOPs per second.
  double gemm_peak = 0;
  int64_t gemm_n = 0;
};

/// Measures MachineBounds with `threads` triad threads; the caller sets
/// OpenBLAS' thread count first (Device::SetThreads). Takes about a second.
MachineBounds MeasureMachineBounds(int threads);

/// The work of one call of a setting (docs/bench.md "Roofline" defines each
/// term). FLOPs count multiply-adds as 2 and cover the matrix products
/// (weights and attention); bytes count fp32 weights and KV-cache entries read
/// from memory, every read of a weight matrix counted again (caches ignored:
/// a model whose weights fit in cache can exceed 100 %).
struct SettingWork {
  /// forward: the whole `eval` call; train: the whole `train_step` (3x the
  /// forward's FLOPs, 10x its weight bytes). Generation: the prefill (prompt through
  /// the embedder and the block decoder).
  double flops = 0;
  double bytes = 0;
  /// Generation: the decoding phase (every decode_tokens / decode_block or
  /// decode_step after the prefill); 0 for a forward.
  double decode_flops = 0;
  double decode_bytes = 0;
  /// Generation: decode steps (generated tokens per row) of the call.
  int64_t decode_steps = 0;
};

/// The work model of `setting` on a model with `config`; `kv_bytes_per_entry`
/// is the KV-cache plan's global bytes per entry (KVMemoryPlan
/// .global_bytes_per_entry; 0 when the artifact has no plan: KV reads are
/// then not counted). `matrix_bytes`: bytes per element of the weight
/// matrices (the GEMM weights: attention and MLP projections, the LM head;
/// MatrixWeightBytes); vectors and the expansion layer count 4.
SettingWork WorkOf(const proto::ModelConfig &config,
                   const BenchSetting &setting, int64_t kv_bytes_per_entry,
                   double matrix_bytes = 4);

/// Bytes per element of the weight matrices as an artifact's kernels take
/// them: 2 when an entry point takes a parameter in BF16
/// (EntryPoint.param_dtypes: a `--target cuda --dtype bf16` artifact, whose
/// GEMM weights are bf16; docs/codegen-cuda.md "bf16"), else 4.
double MatrixWeightBytes(const proto::Manifest &manifest);

/// The roofline section of the report: the machine line, then one line per
/// bt result: the work of the call, the bound that applies (time =
/// max(FLOPs / peak, bytes / bandwidth)) and the fraction of it achieved
/// (bound time / measured time), for a forward over the whole call, for a
/// generation separately for the prefill and the decoding phase.
std::string FormatRoofline(const MachineBounds &machine,
                           const proto::ModelConfig &config,
                           int64_t kv_bytes_per_entry,
                           const std::vector<BenchResult> &bt);

} // namespace bt::rt

#endif // BT_RUNTIME_TOOLING_ROOFLINE_H
