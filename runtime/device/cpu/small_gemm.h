//===- small_gemm.h - the GEMM entry of compiled CPU kernels ----*- C++ -*-===//
//
// bt_cpu_sgemm: what the GEMMs of artifacts compiled by bt-run call
// (bt-cpu-pipeline sgemm-function=bt_cpu_sgemm; docs/abi.md), with
// cblas_sgemm's signature and semantics: C = alpha * op(A) * op(B) + beta * C,
// op(A) [M, K], op(B) [K, N], C [M, N], f32, leading dimensions in elements.
//
// Small-M products against a weight in PyTorch's Linear layout (row-major,
// transB: B is [N, K], each output column a dot product with one contiguous
// weight row) — every decode step's GEMMs (M = batch rows <= 8) — stream each
// weight row once at memory bandwidth, computing all M dot products from the
// one read, without OpenBLAS' per-call packing of B (29 % of decode time at
// batch 8 for the 50304 x 256 LM head, issue 15). Large ones split N over
// OpenBLAS' thread count. Everything else goes to cblas_sgemm unchanged, and
// so does every product when the environment has BT_CPU_SGEMM=cblas (for
// A/B measurements).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DEVICE_CPU_SMALL_GEMM_H
#define BT_RUNTIME_DEVICE_CPU_SMALL_GEMM_H

extern "C" {

/// cblas_sgemm's arguments (order 101 row-major / 102 column-major, trans
/// 111 no / 112 yes), as the compiled kernels pass them.
void bt_cpu_sgemm(int order, int trans_a, int trans_b, int m, int n, int k,
                  float alpha, const float *a, int lda, const float *b,
                  int ldb, float beta, float *c, int ldc);
}

namespace bt::rt {

/// The largest M bt_cpu_sgemm computes itself (larger ones: cblas_sgemm).
inline constexpr int kSmallGemmMaxM = 8;

} // namespace bt::rt

#endif // BT_RUNTIME_DEVICE_CPU_SMALL_GEMM_H
