//===- small_gemm_test.cc -------------------------------------------------===//
//
// bt_cpu_sgemm (device/cpu/small_gemm.h) against a plain double-precision
// triple loop: the small-M path (every M up to kSmallGemmMaxM, up to
// kPackedGemmMaxM against a packed weight, K not a
// multiple of the vector width, padded leading dimensions, alpha and beta, a
// weight large enough to be split over threads) and the shapes it hands to
// cblas_sgemm.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/device/cpu/small_gemm.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include <cblas.h>

extern "C" void openblas_set_num_threads(int num_threads);

namespace bt::rt {
namespace {

// Whether bt_cpu_sgemm packs constant weights here: AVX2 + FMA, unless the
// ctest run SmallGemmTest.isa_generic lowers the kernels (BT_CPU_ISA).
bool PackingKernels() {
  const char *isa = std::getenv("BT_CPU_ISA");
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         (isa == nullptr || std::string(isa) != "generic");
}

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

struct Case {
  int m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
  // B registered as a constant weight (RegisterConstantWeights) for the
  // call: the small path then runs on its packed panels.
  bool constant_b = false;
};

// Runs one case with leading dimensions padded by 3 and checks every element
// of C (padding included: it must stay untouched).
void Check(const Case &c) {
  SCOPED_TRACE(testing::Message() << "M=" << c.m << " N=" << c.n << " K="
                                  << c.k << " transA=" << c.trans_a
                                  << " transB=" << c.trans_b);
  std::mt19937 rng(c.m * 131 + c.n * 7 + c.k);
  std::uniform_real_distribution<float> u(-1, 1);
  // Stored shapes: A [M, K] or [K, M]; B [K, N] or [N, K]; C [M, N].
  const int a_rows = c.trans_a ? c.k : c.m, a_cols = c.trans_a ? c.m : c.k;
  const int b_rows = c.trans_b ? c.n : c.k, b_cols = c.trans_b ? c.k : c.n;
  const int lda = a_cols + 3, ldb = b_cols + 3, ldc = c.n + 3;
  std::vector<float> a(static_cast<size_t>(a_rows) * lda),
      b(static_cast<size_t>(b_rows) * ldb), out(static_cast<size_t>(c.m) * ldc);
  for (float &x : a) x = u(rng);
  for (float &x : b) x = u(rng);
  for (float &x : out) x = u(rng);
  const std::vector<float> before = out;
  if (c.constant_b)
    RegisterConstantWeights(b.data(), b.size() * sizeof(float));
  bt_cpu_sgemm(kRowMajor, c.trans_a ? kTrans : kNoTrans,
               c.trans_b ? kTrans : kNoTrans, c.m, c.n, c.k, c.alpha, a.data(),
               lda, b.data(), ldb, c.beta, out.data(), ldc);
  if (c.constant_b) {
    const bool small = c.m <= kPackedGemmMaxM && !c.trans_a && c.trans_b;
    const bool avx2 = PackingKernels();
    // Panels of 32 columns, K rows each.
    const size_t panels = (c.n + kPackedPanel - 1) / kPackedPanel;
    EXPECT_EQ(PackedWeightBytes(),
              small && avx2 ? panels * c.k * kPackedPanel * sizeof(float) : 0);
    ReleaseConstantWeights();
    EXPECT_EQ(PackedWeightBytes(), 0u);
  }
  for (int i = 0; i < c.m; ++i) {
    for (int j = 0; j < ldc; ++j) {
      const float got = out[static_cast<size_t>(i) * ldc + j];
      if (j >= c.n) {
        ASSERT_EQ(got, before[static_cast<size_t>(i) * ldc + j]);
        continue;
      }
      double sum = 0, mag = 0;
      for (int p = 0; p < c.k; ++p) {
        const double x = c.trans_a ? a[static_cast<size_t>(p) * lda + i]
                                   : a[static_cast<size_t>(i) * lda + p];
        const double y = c.trans_b ? b[static_cast<size_t>(j) * ldb + p]
                                   : b[static_cast<size_t>(p) * ldb + j];
        sum += x * y;
        mag += std::fabs(x * y);
      }
      const double want = c.alpha * sum +
                          (c.beta == 0 ? 0.0
                                       : c.beta * static_cast<double>(
                                                      before[static_cast<size_t>(i) * ldc + j]));
      ASSERT_NEAR(got, want, 1e-5 * (mag + 1)) << "at (" << i << ", " << j << ")";
    }
  }
}

TEST(SmallGemmTest, SmallMTransposedWeight) {
  for (int m = 1; m <= kSmallGemmMaxM; ++m)
    for (int k : {1, 7, 8, 37, 256})
      Check({m, 29, k, false, true, 1.0f, 0.0f});
}

TEST(SmallGemmTest, AlphaBeta) {
  Check({3, 17, 40, false, true, 0.5f, 1.0f});
  Check({8, 5, 9, false, true, -2.0f, 0.25f});
}

TEST(SmallGemmTest, LargeWeightSplitOverThreads) {
  openblas_set_num_threads(2);
  Check({1, 4099, 300, false, true, 1.0f, 0.0f}); // 1.2 M elements
  Check({8, 2050, 520, false, true, 1.0f, 0.5f});
  Check({13, 2050, 520, false, true, 1.0f, 0.5f}); // cblas_sgemm
}

// Unpacked products of kSmallGemmMaxM < M <= kPackedGemmMaxM rows (training's
// 9..16-row products) are cblas_sgemm's, bit for bit: their summation order
// is what the train-step checks were calibrated on.
TEST(SmallGemmTest, UnpackedRowsAboveTheSmallPathAreCblas) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  const int n = 300, k = 257;
  std::vector<float> a(kPackedGemmMaxM * k), b(n * k);
  for (float &x : a) x = u(rng);
  for (float &x : b) x = u(rng);
  for (int m = kSmallGemmMaxM + 1; m <= kPackedGemmMaxM; ++m) {
    std::vector<float> got(m * n), want(m * n);
    bt_cpu_sgemm(kRowMajor, kNoTrans, kTrans, m, n, k, 1.0f, a.data(), k,
                 b.data(), k, 0.0f, got.data(), n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f,
                a.data(), k, b.data(), k, 0.0f, want.data(), n);
    ASSERT_EQ(got, want) << "M=" << m;
  }
}

TEST(SmallGemmTest, ConstantWeightPackedPanels) {
  // Every M, N around the 32-column panels (tails of 1..31 columns, one
  // partial panel only), K not a multiple of the vector width.
  for (int m = 1; m <= kPackedGemmMaxM; ++m)
    for (int n : {1, 31, 32, 33, 95})
      for (int k : {1, 13, 256})
        Check({m, n, k, false, true, 1.0f, 0.0f, /*constant_b=*/true});
  Check({5, 70, 40, false, true, 0.5f, 1.0f, true});   // alpha, beta
  Check({8, 33, 9, false, true, -2.0f, 0.25f, true});
  openblas_set_num_threads(2);
  Check({1, 4099, 300, false, true, 1.0f, 0.0f, true}); // split over threads
  Check({8, 2050, 520, false, true, 1.0f, 0.5f, true});
  Check({16, 2050, 520, false, true, 1.0f, 0.5f, true}); // two row chunks
  Check({11, 1030, 260, false, true, -1.0f, 0.0f, true});
  Check({17, 40, 21, false, true, 1.0f, 0.0f, true}); // cblas: never packed
}

// Tiny products outside the small-M path (M x N x K <= kTinyGemmWork):
// plain loops, every transposition, alpha / beta,
// leading dimensions padded; the padding of C stays untouched.
TEST(SmallGemmTest, TinyProductsEveryTransposition) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Check({1, 32, 5, ta, tb, 1.0f, 0.0f});   // decode attention: P x V
      Check({1, 35, 32, ta, tb, 0.125f, 0.0f}); // q x K^T
      Check({32, 32, 32, ta, tb, 1.0f, 0.0f}); // at the bound
      Check({9, 7, 3, ta, tb, -2.0f, 0.25f});
      Check({16, 8, 1, ta, tb, 0.5f, 1.0f});
    }
  Check({33, 32, 32, false, false, 1.0f, 0.0f}); // above: cblas_sgemm
}

// A weight is packed once per span; one outside every registered range
// (a KV cache, an activation) never is; after ReleaseConstantWeights a
// changed weight is read again, not the stale panels.
TEST(SmallGemmTest, PackedOnlyInsideConstantRanges) {
  if (!PackingKernels())
    GTEST_SKIP() << "no packing without AVX2 and FMA (or BT_CPU_ISA=generic)";
  const int n = 40, k = 16;
  std::vector<float> w(n * k, 1.0f), other(n * k, 1.0f), x(k, 1.0f), y(n);
  auto gemm = [&](const std::vector<float> &b) {
    bt_cpu_sgemm(kRowMajor, kNoTrans, kTrans, 1, n, k, 1.0f, x.data(), k,
                 b.data(), k, 0.0f, y.data(), n);
  };
  RegisterConstantWeights(w.data(), w.size() * sizeof(float));
  gemm(other);
  EXPECT_EQ(PackedWeightBytes(), 0u);
  gemm(w);
  const size_t once = PackedWeightBytes();
  EXPECT_EQ(once, 2u * k * kPackedPanel * sizeof(float));
  gemm(w);
  EXPECT_EQ(PackedWeightBytes(), once);
  EXPECT_EQ(y[0], 16.0f);
  // A range that ends inside the weight does not cover it.
  ReleaseConstantWeights();
  RegisterConstantWeights(w.data(), w.size() * sizeof(float) - 4);
  gemm(w);
  EXPECT_EQ(PackedWeightBytes(), 0u);
  ReleaseConstantWeights();
  std::fill(w.begin(), w.end(), 2.0f);
  gemm(w);
  EXPECT_EQ(y[n - 1], 32.0f);
}

// One thread releases and re-registers the ranges while another multiplies
// with the weight: every product stays exact (a product in flight keeps its
// panels; under ASan a freed panel read would be reported).
TEST(SmallGemmTest, ReleaseWhileAnotherThreadMultiplies) {
  const int n = 300, k = 64;
  std::vector<float> w(n * k, 0.5f), x(k, 1.0f), y(n);
  std::atomic<bool> done{false};
  std::thread releaser([&] {
    while (!done.load()) {
      RegisterConstantWeights(w.data(), w.size() * sizeof(float));
      ReleaseConstantWeights();
    }
  });
  for (int it = 0; it < 2000; ++it) {
    RegisterConstantWeights(w.data(), w.size() * sizeof(float));
    bt_cpu_sgemm(kRowMajor, kNoTrans, kTrans, 1, n, k, 1.0f, x.data(), k,
                 w.data(), k, 0.0f, y.data(), n);
    ASSERT_EQ(y[0], 32.0f);
    ASSERT_EQ(y[n - 1], 32.0f);
  }
  done = true;
  releaser.join();
  ReleaseConstantWeights();
}

TEST(SmallGemmTest, OtherShapesGoToBlas) {
  Check({9, 13, 21, false, true, 1.0f, 0.0f});  // M above the small path
  Check({4, 13, 21, false, false, 1.0f, 0.0f}); // B not transposed
  Check({4, 13, 21, true, true, 1.0f, 0.5f});   // A transposed
  Check({33, 64, 48, true, false, 1.0f, 0.0f});
}

} // namespace
} // namespace bt::rt
