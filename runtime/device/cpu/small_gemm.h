//===- small_gemm.h - the GEMM entry of compiled CPU kernels ----*- C++ -*-===//
//
// bt_cpu_sgemm: what the GEMMs of artifacts compiled by bt-run call
// (bt-cpu-pipeline sgemm-function=bt_cpu_sgemm; docs/abi.md), with
// cblas_sgemm's signature and semantics: C = alpha * op(A) * op(B) + beta * C,
// op(A) [M, K], op(B) [K, N], C [M, N], f32, leading dimensions in elements.
//
// Small-M products against a weight in PyTorch's Linear layout (row-major,
// transB: B is [N, K]) — every decode step's GEMMs (M = batch rows <= 8, or
// <= 16 against a packed weight: register-blocked kernels of up to 8 rows,
// two of them for M > 8) — never go through OpenBLAS' per-call packing of B (29 % of decode time at
// batch 8 for the 50304 x 256 LM head, issue 15):
//  - B inside a range declared constant (RegisterConstantWeights: the model
//    parameters while a generation runs, CpuDevice::BeginConstantParams) is
//    packed once, at its first use, into panels of kPackedPanel output
//    columns ([ceil(N / 32), K, 32] f32, zero-padded), so that the kernel
//    streams the panel sequentially and keeps M x 32 outputs in registers
//    with no horizontal sums (as IREE's data tiling / mmt4d);
//  - any other B (activations, KV caches) is read row by row: M dot
//    products per weight row.
// Both split the columns over the process' OpenMP pool when B has at least
// 128 Ki elements. Other tiny products (M x N x K <= kTinyGemmWork,
// row-major, any transposition: the per-head attention products of a decode
// step, e.g. [1, K<=35] x [K, 32]) run as plain loops on the calling thread, without
// cblas_sgemm's per-call dispatch and packing. Everything else goes to
// cblas_sgemm unchanged (with OpenBLAS's pthreads build set to one thread
// while the caller is a thread of an OpenMP team: MatchBlasThreadsToTeam in
// cpu_device.h), and so
// does every product when the environment has BT_CPU_SGEMM=cblas (for A/B
// measurements); BT_CPU_SGEMM=rows keeps the small path but never packs.
// The kernels over packed panels prefetch (non-temporal) ahead of the
// stream for M >= 2, 8 KiB on AVX-512 and 4 KiB on AVX2;
// BT_CPU_PANEL_PREFETCH=bytes sets the distance (0: off), for A/B
// measurements. BT_CPU_ISA=avx2 or generic keeps the kernels below the
// CPU's instruction set (the AVX2 and portable paths on an AVX-512 machine:
// tests, A/B measurements).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DEVICE_CPU_SMALL_GEMM_H
#define BT_RUNTIME_DEVICE_CPU_SMALL_GEMM_H

#include <cstddef>

extern "C" {

/// cblas_sgemm's arguments (order 101 row-major / 102 column-major, trans
/// 111 no / 112 yes), as the compiled kernels pass them.
void bt_cpu_sgemm(int order, int trans_a, int trans_b, int m, int n, int k,
                  float alpha, const float *a, int lda, const float *b,
                  int ldb, float beta, float *c, int ldc);
}

namespace bt::rt {

/// The largest M bt_cpu_sgemm computes itself against any Linear-layout
/// weight (larger ones: cblas_sgemm).
inline constexpr int kSmallGemmMaxM = 8;
/// The largest M it computes itself against a packed weight (a registered
/// constant range: generation). Training's products of 9..16 rows stay with
/// cblas_sgemm, whose summation order its checks were tuned to
/// (bt-run/train-step-executable.test).
inline constexpr int kPackedGemmMaxM = 16;
/// The largest M x N x K that bt_cpu_sgemm multiplies with plain loops.
inline constexpr long kTinyGemmWork = 32 * 32 * 32;

/// Output columns per panel of a packed weight.
inline constexpr int kPackedPanel = 32;

/// Declares the f32 buffer [data, data + bytes) constant until
/// ReleaseConstantWeights: bt_cpu_sgemm may then keep packed copies of the
/// weights inside it. The caller guarantees that nothing writes the buffer
/// (through any alias) meanwhile; a write would leave products computed
/// from the stale copy. Registering a range again is a no-op. Thread-safe.
void RegisterConstantWeights(const void *data, size_t bytes);

/// Forgets every registered range and drops the packed copies (a product
/// in flight on another thread keeps the copy it uses until it returns).
/// Thread-safe.
void ReleaseConstantWeights();

/// Bytes of the packed copies held now (0 after ReleaseConstantWeights).
size_t PackedWeightBytes();

} // namespace bt::rt

#endif // BT_RUNTIME_DEVICE_CPU_SMALL_GEMM_H
