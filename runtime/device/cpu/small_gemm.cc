//===- small_gemm.cc - the GEMM entry of compiled CPU kernels -------------===//

#include "bt/runtime/device/cpu/small_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cblas.h"

extern "C" int openblas_get_num_threads(void);

namespace bt::rt {
namespace {

// Weights of at least this many elements (4 MiB) split their rows over the
// BLAS threads: a thread start (~30 us) is then below 2 % of the read.
constexpr long kParallelElements = long{1} << 20;

// C[i, j] = alpha * dot(A[i, :], B[j, :]) + beta * C[i, j] for rows j in
// [j0, j1), all i < M (M <= kSmallGemmMaxM), K contiguous in A and B.
template <int M>
[[gnu::target("avx2,fma")]] void RowsAvx2(int k, float alpha, const float *a,
                                          int lda, const float *b, int ldb,
                                          float beta, float *c, int ldc,
                                          int j0, int j1) {
  for (int j = j0; j < j1; ++j) {
    const float *bj = b + static_cast<long>(j) * ldb;
    __m256 acc[M];
    for (int i = 0; i < M; ++i)
      acc[i] = _mm256_setzero_ps();
    int p = 0;
    for (; p + 8 <= k; p += 8) {
      const __m256 w = _mm256_loadu_ps(bj + p);
      for (int i = 0; i < M; ++i)
        acc[i] = _mm256_fmadd_ps(
            _mm256_loadu_ps(a + static_cast<long>(i) * lda + p), w, acc[i]);
    }
    for (int i = 0; i < M; ++i) {
      __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[i]),
                            _mm256_extractf128_ps(acc[i], 1));
      s = _mm_add_ps(s, _mm_movehl_ps(s, s));
      s = _mm_add_ss(s, _mm_movehdup_ps(s));
      float sum = _mm_cvtss_f32(s);
      for (int q = p; q < k; ++q)
        sum += a[static_cast<long>(i) * lda + q] * bj[q];
      float &out = c[static_cast<long>(i) * ldc + j];
      out = beta == 0.0f ? alpha * sum : alpha * sum + beta * out;
    }
  }
}

// The same without AVX2 (any x86-64; the compiler vectorizes the dot).
void RowsGeneric(int m, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc,
                 int j0, int j1) {
  for (int j = j0; j < j1; ++j) {
    const float *bj = b + static_cast<long>(j) * ldb;
    for (int i = 0; i < m; ++i) {
      const float *ai = a + static_cast<long>(i) * lda;
      float sum = 0;
      for (int q = 0; q < k; ++q)
        sum += ai[q] * bj[q];
      float &out = c[static_cast<long>(i) * ldc + j];
      out = beta == 0.0f ? alpha * sum : alpha * sum + beta * out;
    }
  }
}

using RowsFn = void (*)(int, float, const float *, int, const float *, int,
                        float, float *, int, int, int);

RowsFn Avx2Rows(int m) {
  static constexpr RowsFn kFns[kSmallGemmMaxM] = {
      RowsAvx2<1>, RowsAvx2<2>, RowsAvx2<3>, RowsAvx2<4>,
      RowsAvx2<5>, RowsAvx2<6>, RowsAvx2<7>, RowsAvx2<8>};
  return kFns[m - 1];
}

bool HasAvx2Fma() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

void Rows(int m, int k, float alpha, const float *a, int lda, const float *b,
          int ldb, float beta, float *c, int ldc, int j0, int j1) {
  if (HasAvx2Fma())
    Avx2Rows(m)(k, alpha, a, lda, b, ldb, beta, c, ldc, j0, j1);
  else
    RowsGeneric(m, k, alpha, a, lda, b, ldb, beta, c, ldc, j0, j1);
}

} // namespace
} // namespace bt::rt

extern "C" void bt_cpu_sgemm(int order, int trans_a, int trans_b, int m, int n,
                             int k, float alpha, const float *a, int lda,
                             const float *b, int ldb, float beta, float *c,
                             int ldc) {
  using namespace bt::rt;
  // BT_CPU_SGEMM=cblas sends every product to cblas_sgemm (the code before
  // the small-M path), for A/B measurements with `bench`.
  static const bool small_path = [] {
    const char *v = std::getenv("BT_CPU_SGEMM");
    return v == nullptr || std::string(v) != "cblas";
  }();
  const bool small = small_path && order == CblasRowMajor && trans_a == CblasNoTrans &&
                     trans_b == CblasTrans && m >= 1 &&
                     m <= kSmallGemmMaxM && n >= 1 && k >= 1;
  if (!small) {
    cblas_sgemm(static_cast<CBLAS_ORDER>(order),
                static_cast<CBLAS_TRANSPOSE>(trans_a),
                static_cast<CBLAS_TRANSPOSE>(trans_b), m, n, k, alpha, a, lda,
                b, ldb, beta, c, ldc);
    return;
  }
  const long elements = static_cast<long>(n) * k;
  const int threads =
      elements >= kParallelElements
          ? std::clamp(openblas_get_num_threads(), 1, std::max(1, n / 64))
          : 1;
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t)
    workers.emplace_back(Rows, m, k, alpha, a, lda, b, ldb, beta, c, ldc,
                         static_cast<int>(static_cast<long>(n) * t / threads),
                         static_cast<int>(static_cast<long>(n) * (t + 1) /
                                          threads));
  Rows(m, k, alpha, a, lda, b, ldb, beta, c, ldc, 0, n / threads);
  for (std::thread &w : workers)
    w.join();
}
