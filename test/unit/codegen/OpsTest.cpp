//===- OpsTest.cpp - numerics of the generated CPU code per layer-level op ===//
//
// Each test builds a small layer-level module, compiles it with the real
// bt-cpu-pipeline + compileToSharedObject, calls it through the kernel ABI
// and compares with a naive C++ reference (double precision, except where the
// reference must reproduce f32 behaviour of HF on purpose: the attention mask
// value and the RoPE angle). Every test runs twice: GEMMs through OpenBLAS
// (bt-gemm-to-blas with no size threshold) and GEMMs as loops (no BLAS).
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"

#include <gtest/gtest.h>

#include <cblas.h>
#include <cmath>
#include <limits>

using namespace bt;
using namespace bt::test;

namespace {

constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-5;
constexpr float kMin = -std::numeric_limits<float>::max();

struct Mode {
  const char *name;
  bool blas;
};

class OpsTest : public ::testing::TestWithParam<Mode> {
protected:
  std::unique_ptr<Kernels> compile(const std::string &src) {
    CPUPipelineOptions options;
    options.blas = GetParam().blas;
    options.blasMinMNK = 0;
    std::string error;
    std::unique_ptr<Kernels> k = Kernels::compile(src, options, error);
    EXPECT_TRUE(k) << error;
    return k;
  }
  std::mt19937 rng{1234};
};

// ---------------------------------------------------------------------------
// References
// ---------------------------------------------------------------------------

std::vector<double> refLayerNorm(const Array &x, const Array &w, const Array &b,
                                 double eps) {
  int64_t c = x.shape.back(), rows = x.numel() / c;
  std::vector<double> y(x.numel());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < c; ++j)
      mean += x.f[r * c + j];
    mean /= c;
    for (int64_t j = 0; j < c; ++j)
      var += (x.f[r * c + j] - mean) * (x.f[r * c + j] - mean);
    var /= c;
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < c; ++j)
      y[r * c + j] = (x.f[r * c + j] - mean) * rstd * w.f[j] + b.f[j];
  }
  return y;
}

/// x [M, K] · W[N, K]ᵀ + b.
std::vector<double> refLinear(const Array &x, const Array &w, const Array *b) {
  int64_t k = x.shape.back(), m = x.numel() / k, n = w.shape[0];
  std::vector<double> y(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = b ? b->f[j] : 0.0;
      for (int64_t l = 0; l < k; ++l)
        acc += static_cast<double>(x.f[i * k + l]) * w.f[j * k + l];
      y[i * n + j] = acc;
    }
  return y;
}

double refGelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

/// HF GPTNeoXRotaryEmbedding: inv_freq and the angle in f32.
float invFreq(int64_t i, int64_t r, double base) {
  float expo = static_cast<float>(2 * i) / static_cast<float>(r);
  return 1.0f / std::pow(static_cast<float>(base), expo);
}

/// x [lead..., S, H, hd], positions [S] (posPerRow = false) or [lead..., S].
std::vector<double> refRotary(const Array &x, const Array &pos, int64_t r,
                              double base) {
  size_t n = x.shape.size();
  int64_t hd = x.shape[n - 1], h = x.shape[n - 2], s = x.shape[n - 3];
  int64_t lead = x.numel() / (hd * h * s);
  bool perRow = pos.shape.size() > 1;
  std::vector<double> y(x.f.begin(), x.f.end());
  for (int64_t l = 0; l < lead; ++l)
    for (int64_t si = 0; si < s; ++si) {
      int64_t p = perRow ? pos.i[l * s + si] : pos.i[si];
      for (int64_t hi = 0; hi < h; ++hi) {
        int64_t base0 = ((l * s + si) * h + hi) * hd;
        for (int64_t i = 0; i < r / 2; ++i) {
          float angle = static_cast<float>(p) * invFreq(i, r, base);
          double c = std::cos(static_cast<double>(angle));
          double sn = std::sin(static_cast<double>(angle));
          double x1 = x.f[base0 + i], x2 = x.f[base0 + i + r / 2];
          y[base0 + i] = x1 * c - x2 * sn;
          y[base0 + i + r / 2] = x2 * c + x1 * sn;
        }
      }
    }
  return y;
}

/// q, k, v [G..., S, H, hd] (G = product of the leading dims), mask
/// [G..., S] or null. The masked score is formed in f32 like HF eager
/// (where(causal, s·scale, MIN) + (1 - m)·MIN), the rest in double.
std::vector<double> refAttention(const Array &q, const Array &k, const Array &v,
                                 const Array *mask, double scale) {
  size_t n = q.shape.size();
  int64_t hd = q.shape[n - 1], h = q.shape[n - 2], s = q.shape[n - 3];
  int64_t g = q.numel() / (hd * h * s);
  std::vector<double> out(q.numel());
  auto at = [&](int64_t gi, int64_t si, int64_t hi, int64_t d) {
    return ((gi * s + si) * h + hi) * hd + d;
  };
  std::vector<double> p(s);
  for (int64_t gi = 0; gi < g; ++gi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t si = 0; si < s; ++si) {
        std::vector<float> vals(s);
        for (int64_t t = 0; t < s; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d)
            dot += static_cast<double>(q.f[at(gi, si, hi, d)]) * k.f[at(gi, t, hi, d)];
          float val = t <= si ? static_cast<float>(dot) * static_cast<float>(scale)
                              : kMin;
          if (mask) {
            float m = static_cast<float>(mask->i[gi * s + t]);
            val = val + (1.0f - m) * kMin;
          }
          vals[t] = val;
        }
        float mx = -std::numeric_limits<float>::infinity();
        for (float x : vals)
          mx = std::max(mx, x);
        double sum = 0;
        for (int64_t t = 0; t < s; ++t) {
          p[t] = std::exp(static_cast<double>(vals[t]) - mx);
          sum += p[t];
        }
        for (int64_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (int64_t t = 0; t < s; ++t)
            acc += p[t] / sum * v.f[at(gi, t, hi, d)];
          out[at(gi, si, hi, d)] = acc;
        }
      }
  return out;
}

double refCrossEntropy(const Array &logits, const Array &labels, int64_t ignore) {
  int64_t vsz = logits.shape.back(), rows = logits.numel() / vsz;
  double total = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = labels.i[r];
    if (label == ignore)
      continue;
    double mx = -INFINITY;
    for (int64_t j = 0; j < vsz; ++j)
      mx = std::max(mx, static_cast<double>(logits.f[r * vsz + j]));
    double sum = 0;
    for (int64_t j = 0; j < vsz; ++j)
      sum += std::exp(logits.f[r * vsz + j] - mx);
    total += std::log(sum) + mx - logits.f[r * vsz + label];
    ++count;
  }
  return total / count; // NaN when count == 0
}

#define EXPECT_CLOSE(actual, expected)                                          \
  do {                                                                          \
    std::string msg__ = compareClose((actual), (expected), kRtol, kAtol);       \
    EXPECT_TRUE(msg__.empty()) << msg__;                                        \
  } while (0)

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

TEST_P(OpsTest, LayerNormDynamicBatch) {
  auto k = compile(R"mlir(
    func.func @ln(%x: tensor<?x3x40xf32>, %w: tensor<40xf32>, %b: tensor<40xf32>) -> tensor<?x3x40xf32> {
      %y = bt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<?x3x40xf32>, tensor<40xf32>, tensor<40xf32> -> tensor<?x3x40xf32>
      return %y : tensor<?x3x40xf32>
    })mlir");
  ASSERT_TRUE(k);
  for (int64_t batch : {1, 2, 5}) {
    Array x = Array::random({batch, 3, 40}, rng, -3, 5);
    Array w = Array::random({40}, rng), b = Array::random({40}, rng);
    auto res = k->call("ln", {&x, &w, &b}, {{3}});
    ASSERT_EQ(res.size(), 1u);
    EXPECT_EQ(res[0].value.shape, x.shape);
    EXPECT_CLOSE(res[0].value.f, refLayerNorm(x, w, b, 1e-5));
  }
}

TEST_P(OpsTest, LinearBiasAndConv1dWeight) {
  auto k = compile(R"mlir(
    func.func @lin(%x: tensor<?x5x37xf32>, %w: tensor<29x37xf32>, %b: tensor<29xf32>) -> tensor<?x5x29xf32> {
      %y = bt.linear %x, %w, %b : tensor<?x5x37xf32>, tensor<29x37xf32>, tensor<29xf32> -> tensor<?x5x29xf32>
      return %y : tensor<?x5x29xf32>
    }
    func.func @conv(%x: tensor<2x?x37xf32>, %w: tensor<29x37x1xf32>) -> tensor<2x?x29xf32> {
      %y = bt.linear %x, %w : tensor<2x?x37xf32>, tensor<29x37x1xf32> -> tensor<2x?x29xf32>
      return %y : tensor<2x?x29xf32>
    }
    func.func @vec(%x: tensor<37xf32>, %w: tensor<29x37xf32>, %b: tensor<29xf32>) -> tensor<29xf32> {
      %y = bt.linear %x, %w, %b : tensor<37xf32>, tensor<29x37xf32>, tensor<29xf32> -> tensor<29xf32>
      return %y : tensor<29xf32>
    })mlir");
  ASSERT_TRUE(k);
  Array w = Array::random({29, 37}, rng), b = Array::random({29}, rng);
  Array x = Array::random({3, 5, 37}, rng);
  auto r1 = k->call("lin", {&x, &w, &b}, {{3}});
  EXPECT_EQ(r1[0].value.shape, (std::vector<int64_t>{3, 5, 29}));
  EXPECT_CLOSE(r1[0].value.f, refLinear(x, w, &b));

  Array w3 = w;
  w3.shape = {29, 37, 1};
  Array x2 = Array::random({2, 4, 37}, rng);
  auto r2 = k->call("conv", {&x2, &w3}, {{3}});
  EXPECT_EQ(r2[0].value.shape, (std::vector<int64_t>{2, 4, 29}));
  EXPECT_CLOSE(r2[0].value.f, refLinear(x2, w, nullptr));

  Array x3 = Array::random({37}, rng);
  auto r3 = k->call("vec", {&x3, &w, &b}, {{1}});
  EXPECT_CLOSE(r3[0].value.f, refLinear(x3, w, &b));
}

TEST_P(OpsTest, GeluExactErf) {
  auto k = compile(R"mlir(
    func.func @gelu(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
      %y = bt.gelu %x : tensor<?x64xf32>
      return %y : tensor<?x64xf32>
    })mlir");
  ASSERT_TRUE(k);
  Array x = Array::random({3, 64}, rng, -6, 6);
  x.f[0] = 0;
  x.f[1] = -10;
  x.f[2] = 10;
  auto res = k->call("gelu", {&x}, {{2}});
  std::vector<double> ref;
  for (float v : x.f)
    ref.push_back(refGelu(v));
  EXPECT_CLOSE(res[0].value.f, ref);
}

TEST_P(OpsTest, EmbeddingLookup) {
  auto k = compile(R"mlir(
    func.func @emb(%ids: tensor<?x3xi64>, %t: tensor<10x6xf32>) -> tensor<?x3x6xf32> {
      %y = bt.embedding_lookup %ids, %t : tensor<?x3xi64>, tensor<10x6xf32> -> tensor<?x3x6xf32>
      return %y : tensor<?x3x6xf32>
    }
    func.func @emb32(%ids: tensor<4xi32>, %t: tensor<10x6xf32>) -> tensor<4x6xf32> {
      %y = bt.embedding_lookup %ids, %t : tensor<4xi32>, tensor<10x6xf32> -> tensor<4x6xf32>
      return %y : tensor<4x6xf32>
    })mlir");
  ASSERT_TRUE(k);
  Array table = Array::random({10, 6}, rng);
  Array ids = Array::i64({2, 3}, {0, 9, 3, 3, 1, 0});
  auto res = k->call("emb", {&ids, &table}, {{3}});
  std::vector<double> ref;
  for (int64_t id : ids.i)
    for (int j = 0; j < 6; ++j)
      ref.push_back(table.f[id * 6 + j]);
  EXPECT_EQ(res[0].value.shape, (std::vector<int64_t>{2, 3, 6}));
  EXPECT_CLOSE(res[0].value.f, ref);

  Array ids32 = Array::i32v({4}, {7, 2, 2, 5});
  auto r2 = k->call("emb32", {&ids32, &table}, {{2}});
  ref.clear();
  for (int64_t id : ids32.i)
    for (int j = 0; j < 6; ++j)
      ref.push_back(table.f[id * 6 + j]);
  EXPECT_CLOSE(r2[0].value.f, ref);
}

TEST_P(OpsTest, PrefixProjection) {
  auto k = compile(R"mlir(
    func.func @pp(%c: tensor<?x3x8xf32>, %w: tensor<10x8x1xf32>, %b: tensor<10xf32>) -> tensor<?x3x2x5xf32> {
      %y = bt.prefix_projection %c, %w, %b prefix_length 2 : tensor<?x3x8xf32>, tensor<10x8x1xf32>, tensor<10xf32> -> tensor<?x3x2x5xf32>
      return %y : tensor<?x3x2x5xf32>
    })mlir");
  ASSERT_TRUE(k);
  Array c = Array::random({2, 3, 8}, rng);
  Array w = Array::random({10, 8, 1}, rng), b = Array::random({10}, rng);
  auto res = k->call("pp", {&c, &w, &b}, {{4}});
  EXPECT_EQ(res[0].value.shape, (std::vector<int64_t>{2, 3, 2, 5}));
  Array w2 = w;
  w2.shape = {10, 8};
  EXPECT_CLOSE(res[0].value.f, refLinear(c, w2, &b));
}

TEST_P(OpsTest, SplitQKVPerHeadInterleaved) {
  auto k = compile(R"mlir(
    func.func @split(%x: tensor<?x4x24xf32>) -> (tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>) {
      %q, %k, %v = bt.split_qkv %x heads 2 head_dim 4 : tensor<?x4x24xf32> -> tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>
      return %q, %k, %v : tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>
    })mlir");
  ASSERT_TRUE(k);
  Array x = Array::random({3, 4, 24}, rng);
  auto res = k->call("split", {&x}, {{4}, {4}, {4}});
  ASSERT_EQ(res.size(), 3u);
  for (int which = 0; which < 3; ++which) {
    std::vector<double> ref;
    for (int64_t row = 0; row < 12; ++row)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t d = 0; d < 4; ++d)
          ref.push_back(x.f[row * 24 + (h * 3 + which) * 4 + d]);
    EXPECT_CLOSE(res[which].value.f, ref);
    // Results are dense (identity layout) and owned by the caller.
    EXPECT_EQ(res[which].offset, 0);
    EXPECT_EQ(res[which].strides, (std::vector<int64_t>{32, 8, 4, 1}));
  }
}

TEST_P(OpsTest, RotaryPartialWithPositions) {
  auto k = compile(R"mlir(
    func.func @rope(%x: tensor<?x5x3x16xf32>, %p: tensor<5xi64>) -> tensor<?x5x3x16xf32> {
      %y = bt.rotary %x, %p rotary_dims 8 base 10000.0 : tensor<?x5x3x16xf32>, tensor<5xi64> -> tensor<?x5x3x16xf32>
      return %y : tensor<?x5x3x16xf32>
    }
    func.func @rope_rows(%x: tensor<?x5x3x16xf32>, %p: tensor<?x5xi64>) -> tensor<?x5x3x16xf32> {
      %y = bt.rotary %x, %p rotary_dims 16 base 500.0 : tensor<?x5x3x16xf32>, tensor<?x5xi64> -> tensor<?x5x3x16xf32>
      return %y : tensor<?x5x3x16xf32>
    })mlir");
  ASSERT_TRUE(k);
  Array x = Array::random({2, 5, 3, 16}, rng);
  Array copy = x;
  // The official-generate position quirk [0, 0, 1, 2, 3] and a large one.
  Array p = Array::i64({5}, {0, 0, 1, 2, 1000});
  auto res = k->call("rope", {&x, &p}, {{4}});
  EXPECT_CLOSE(res[0].value.f, refRotary(x, p, 8, 10000.0));
  EXPECT_EQ(x.f, copy.f) << "the input was modified";

  Array p2 = Array::i64({2, 5}, {0, 1, 2, 3, 4, 7, 7, 8, 9, 2047});
  auto r2 = k->call("rope_rows", {&x, &p2}, {{4}});
  EXPECT_CLOSE(r2[0].value.f, refRotary(x, p2, 16, 500.0));
}

TEST_P(OpsTest, AttentionCausalKeyMaskAndFullyMaskedRows) {
  auto k = compile(R"mlir(
    func.func @attn(%q: tensor<?x7x2x8xf32>, %k: tensor<?x7x2x8xf32>, %v: tensor<?x7x2x8xf32>, %m: tensor<?x7xi64>) -> tensor<?x7x2x8xf32> {
      %o = bt.attention %q, %k, %v key_mask %m scale 0.35355339059327373 : tensor<?x7x2x8xf32>, tensor<?x7xi64> -> tensor<?x7x2x8xf32>
      return %o : tensor<?x7x2x8xf32>
    }
    func.func @attn_nomask(%q: tensor<2x?x2x8xf32>, %k: tensor<2x?x2x8xf32>, %v: tensor<2x?x2x8xf32>) -> tensor<2x?x2x8xf32> {
      %o = bt.attention %q, %k, %v scale 0.35355339059327373 : tensor<2x?x2x8xf32> -> tensor<2x?x2x8xf32>
      return %o : tensor<2x?x2x8xf32>
    })mlir");
  ASSERT_TRUE(k);
  Array q = Array::random({2, 7, 2, 8}, rng, -2, 2);
  Array kk = Array::random({2, 7, 2, 8}, rng, -2, 2);
  Array v = Array::random({2, 7, 2, 8}, rng);
  // Row 0: a padded key in the middle; row 1: left padding, so queries 0..2
  // see no valid causal key (uniform over their causal keys, like HF).
  Array m = Array::i64({2, 7}, {1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1});
  auto res = k->call("attn", {&q, &kk, &v, &m}, {{4}});
  std::vector<double> ref = refAttention(q, kk, v, &m, 0.35355339059327373);
  EXPECT_CLOSE(res[0].value.f, ref);
  // HF eager on a query row without any valid causal key: the causal masked
  // keys get s·scale + MIN = MIN and the non-causal valid keys get MIN + 0 =
  // MIN, the non-causal masked ones MIN + MIN = -inf, so the row is uniform
  // over {t <= s} ∪ {t > s, mask[t] = 1}. Row 1 has mask [0,0,0,1,1,1,1]:
  // queries 0..2 average keys 0..s and 3..6.
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < 8; ++d) {
        double mean = 0;
        int64_t count = 0;
        for (int64_t t = 0; t < 7; ++t)
          if (t <= s || t >= 3) {
            mean += v.f[((7 + t) * 2 + h) * 8 + d];
            ++count;
          }
        mean /= count;
        EXPECT_NEAR(res[0].value.f[((7 + s) * 2 + h) * 8 + d], mean, 1e-5);
      }

  Array q2 = Array::random({2, 5, 2, 8}, rng), k2 = Array::random({2, 5, 2, 8}, rng),
        v2 = Array::random({2, 5, 2, 8}, rng);
  auto r2 = k->call("attn_nomask", {&q2, &k2, &v2}, {{4}});
  EXPECT_CLOSE(r2[0].value.f, refAttention(q2, k2, v2, nullptr, 0.35355339059327373));
}

// More query rows than one chunk (kAttentionRowChunk = 64): S = 150 runs as
// chunks of 64, 64 and 22 rows, each against the keys its last row sees.
// Row 0 of the batch has padded keys in several chunks; row 1 is left-padded
// over 70 keys, so the first chunk and the first rows of the second have no
// valid causal key (such a chunk keeps all 150 keys, as HF spreads those rows
// over the valid non-causal keys too), the rest of the second chunk has.
TEST_P(OpsTest, AttentionRowChunks) {
  auto k = compile(R"mlir(
    func.func @attn(%q: tensor<?x?x2x8xf32>, %k: tensor<?x?x2x8xf32>, %v: tensor<?x?x2x8xf32>, %m: tensor<?x?xi64>) -> tensor<?x?x2x8xf32> {
      %o = bt.attention %q, %k, %v key_mask %m scale 0.35355339059327373 : tensor<?x?x2x8xf32>, tensor<?x?xi64> -> tensor<?x?x2x8xf32>
      return %o : tensor<?x?x2x8xf32>
    }
    func.func @attn_nomask(%q: tensor<2x?x2x8xf32>, %k: tensor<2x?x2x8xf32>, %v: tensor<2x?x2x8xf32>) -> tensor<2x?x2x8xf32> {
      %o = bt.attention %q, %k, %v scale 0.35355339059327373 : tensor<2x?x2x8xf32> -> tensor<2x?x2x8xf32>
      return %o : tensor<2x?x2x8xf32>
    })mlir");
  ASSERT_TRUE(k);
  constexpr int64_t kS = 150;
  Array q = Array::random({2, kS, 2, 8}, rng, -2, 2);
  Array kk = Array::random({2, kS, 2, 8}, rng, -2, 2);
  Array v = Array::random({2, kS, 2, 8}, rng);
  std::vector<int64_t> mask(2 * kS, 1);
  for (int64_t t : {5, 63, 64, 100, 149})
    mask[t] = 0;
  for (int64_t t = 0; t < 70; ++t)
    mask[kS + t] = 0;
  Array m = Array::i64({2, kS}, mask);
  auto res = k->call("attn", {&q, &kk, &v, &m}, {{4}});
  EXPECT_CLOSE(res[0].value.f,
               refAttention(q, kk, v, &m, 0.35355339059327373));
  // Query 64 of row 1 (second chunk, no valid causal key): the mean of keys
  // 0..64 and 70..149.
  for (int64_t d = 0; d < 8; ++d) {
    double mean = 0;
    int64_t count = 0;
    for (int64_t t = 0; t < kS; ++t)
      if (t <= 64 || t >= 70) {
        mean += v.f[((kS + t) * 2 + 1) * 8 + d];
        ++count;
      }
    EXPECT_NEAR(res[0].value.f[((kS + 64) * 2 + 1) * 8 + d], mean / count,
                1e-5);
  }
  auto r2 = k->call("attn_nomask", {&q, &kk, &v}, {{4}});
  EXPECT_CLOSE(r2[0].value.f,
               refAttention(q, kk, v, nullptr, 0.35355339059327373));
}

TEST_P(OpsTest, LocalAttention) {
  auto k = compile(R"mlir(
    func.func @local(%q: tensor<?x?x5x2x8xf32>, %k: tensor<?x?x5x2x8xf32>, %v: tensor<?x?x5x2x8xf32>, %m: tensor<?x?x5xi1>) -> tensor<?x?x5x2x8xf32> {
      %o = bt.local_attention %q, %k, %v key_mask %m scale 0.35355339059327373 : tensor<?x?x5x2x8xf32>, tensor<?x?x5xi1> -> tensor<?x?x5x2x8xf32>
      return %o : tensor<?x?x5x2x8xf32>
    })mlir");
  ASSERT_TRUE(k);
  Array q = Array::random({2, 3, 5, 2, 8}, rng), kk = Array::random({2, 3, 5, 2, 8}, rng),
        v = Array::random({2, 3, 5, 2, 8}, rng);
  std::vector<int64_t> mv(30, 1);
  mv[4] = 0;             // last key of block (0, 0)
  mv[5] = mv[6] = 0;     // leading keys of block (0, 1)
  for (int i = 25; i < 30; ++i)
    mv[i] = 0;           // block (1, 2) fully padded
  Array m = Array::i1v({2, 3, 5}, mv);
  auto res = k->call("local", {&q, &kk, &v, &m}, {{5}});
  EXPECT_CLOSE(res[0].value.f, refAttention(q, kk, v, &m, 0.35355339059327373));
}

TEST_P(OpsTest, FusedLocalAttentionMatchesChain) {
  auto k = compile(R"mlir(
    func.func @fused(%qkv: tensor<?x2x6x48xf32>, %p: tensor<6xi64>, %m: tensor<?x2x6xi64>) -> tensor<?x2x6x2x8xf32> {
      %o = bt.fused_local_attention %qkv, %p key_mask %m heads 2 head_dim 8 rotary_dims 4 base 10000.0 scale 0.35355339059327373 : tensor<?x2x6x48xf32>, tensor<6xi64>, tensor<?x2x6xi64> -> tensor<?x2x6x2x8xf32>
      return %o : tensor<?x2x6x2x8xf32>
    }
    func.func @chain(%qkv: tensor<?x2x6x48xf32>, %p: tensor<6xi64>, %m: tensor<?x2x6xi64>) -> tensor<?x2x6x2x8xf32> {
      %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : tensor<?x2x6x48xf32> -> tensor<?x2x6x2x8xf32>, tensor<?x2x6x2x8xf32>, tensor<?x2x6x2x8xf32>
      %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : tensor<?x2x6x2x8xf32>, tensor<6xi64> -> tensor<?x2x6x2x8xf32>
      %kr = bt.rotary %k, %p rotary_dims 4 base 10000.0 : tensor<?x2x6x2x8xf32>, tensor<6xi64> -> tensor<?x2x6x2x8xf32>
      %o = bt.local_attention %qr, %kr, %v key_mask %m scale 0.35355339059327373 : tensor<?x2x6x2x8xf32>, tensor<?x2x6xi64> -> tensor<?x2x6x2x8xf32>
      return %o : tensor<?x2x6x2x8xf32>
    })mlir");
  ASSERT_TRUE(k);
  Array qkv = Array::random({3, 2, 6, 48}, rng);
  Array p = Array::i64({6}, {0, 0, 1, 2, 3, 4});
  std::vector<int64_t> mv(36, 1);
  mv[0] = mv[1] = 0;
  Array m = Array::i64({3, 2, 6}, mv);
  auto fused = k->call("fused", {&qkv, &p, &m}, {{5}});
  auto chain = k->call("chain", {&qkv, &p, &m}, {{5}});
  ASSERT_EQ(fused[0].value.f.size(), chain[0].value.f.size());
  EXPECT_EQ(fused[0].value.f, chain[0].value.f) << "fused and unfused differ";
  // Reference: split, rotate, attend.
  Array q = Array::f32({3, 2, 6, 2, 8}, std::vector<float>(3 * 2 * 6 * 16));
  Array kk = q, v = q;
  for (int64_t row = 0; row < 36; ++row)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < 8; ++d) {
        q.f[(row * 2 + h) * 8 + d] = qkv.f[row * 48 + (h * 3 + 0) * 8 + d];
        kk.f[(row * 2 + h) * 8 + d] = qkv.f[row * 48 + (h * 3 + 1) * 8 + d];
        v.f[(row * 2 + h) * 8 + d] = qkv.f[row * 48 + (h * 3 + 2) * 8 + d];
      }
  auto rq = refRotary(q, p, 4, 10000.0), rk = refRotary(kk, p, 4, 10000.0);
  Array qr = q, kr = kk;
  for (size_t i = 0; i < rq.size(); ++i) {
    qr.f[i] = static_cast<float>(rq[i]);
    kr.f[i] = static_cast<float>(rk[i]);
  }
  EXPECT_CLOSE(fused[0].value.f, refAttention(qr, kr, v, &m, 0.35355339059327373));
}

// The single-kernel lowering of bt.fused_local_attention against the chain
// with per-block positions [B, N_blk, S], an i1 key mask with a fully masked
// block, dynamic B and N_blk, 3 heads and S = 15 (P + L_B - 1 for P = L_B = 8:
// S·S·hd = 7200 ≥ blas-min-mnk, so the score GEMMs go to BLAS in blas mode).
TEST_P(OpsTest, FusedLocalAttentionPerBlockPositions) {
  auto k = compile(R"mlir(
    func.func @fused(%qkv: tensor<?x?x15x288xf32>, %p: tensor<?x?x15xi64>, %m: tensor<?x?x15xi1>) -> tensor<?x?x15x3x32xf32> {
      %o = bt.fused_local_attention %qkv, %p key_mask %m heads 3 head_dim 32 rotary_dims 8 base 10000.0 scale 0.17677669529663687 : tensor<?x?x15x288xf32>, tensor<?x?x15xi64>, tensor<?x?x15xi1> -> tensor<?x?x15x3x32xf32>
      return %o : tensor<?x?x15x3x32xf32>
    }
    func.func @chain(%qkv: tensor<?x?x15x288xf32>, %p: tensor<?x?x15xi64>, %m: tensor<?x?x15xi1>) -> tensor<?x?x15x3x32xf32> {
      %q, %k, %v = bt.split_qkv %qkv heads 3 head_dim 32 : tensor<?x?x15x288xf32> -> tensor<?x?x15x3x32xf32>, tensor<?x?x15x3x32xf32>, tensor<?x?x15x3x32xf32>
      %qr = bt.rotary %q, %p rotary_dims 8 base 10000.0 : tensor<?x?x15x3x32xf32>, tensor<?x?x15xi64> -> tensor<?x?x15x3x32xf32>
      %kr = bt.rotary %k, %p rotary_dims 8 base 10000.0 : tensor<?x?x15x3x32xf32>, tensor<?x?x15xi64> -> tensor<?x?x15x3x32xf32>
      %o = bt.local_attention %qr, %kr, %v key_mask %m scale 0.17677669529663687 : tensor<?x?x15x3x32xf32>, tensor<?x?x15xi1> -> tensor<?x?x15x3x32xf32>
      return %o : tensor<?x?x15x3x32xf32>
    })mlir");
  ASSERT_TRUE(k);
  Array qkv = Array::random({2, 3, 15, 288}, rng);
  std::vector<int64_t> pv(90), mv(90, 1);
  for (int64_t i = 0; i < 90; ++i)
    pv[i] = (i % 15) + 7 * (i / 15); // a different offset per block
  mv[3] = mv[4] = 0;
  for (int i = 75; i < 90; ++i)
    mv[i] = 0; // block (1, 2) fully padded
  Array p = Array::i64({2, 3, 15}, pv);
  Array m = Array::i1v({2, 3, 15}, mv);
  auto fused = k->call("fused", {&qkv, &p, &m}, {{5}});
  auto chain = k->call("chain", {&qkv, &p, &m}, {{5}});
  ASSERT_EQ(fused[0].value.f.size(), chain[0].value.f.size());
  EXPECT_EQ(fused[0].value.f, chain[0].value.f) << "fused and unfused differ";
}

TEST_P(OpsTest, CrossEntropyIgnoredLabelsAndNaN) {
  auto k = compile(R"mlir(
    func.func @ce(%l: tensor<?x4x11xf32>, %y: tensor<?x4xi64>) -> tensor<f32> {
      %loss = bt.cross_entropy %l, %y : tensor<?x4x11xf32>, tensor<?x4xi64> -> tensor<f32>
      return %loss : tensor<f32>
    }
    func.func @ce32(%l: tensor<3x11xf32>, %y: tensor<3xi32>) -> tensor<f32> {
      %loss = bt.cross_entropy %l, %y {ignore_index = 7 : i64} : tensor<3x11xf32>, tensor<3xi32> -> tensor<f32>
      return %loss : tensor<f32>
    })mlir");
  ASSERT_TRUE(k);
  Array l = Array::random({2, 4, 11}, rng, -4, 4);
  Array y = Array::i64({2, 4}, {3, -100, 10, 0, -100, 5, 5, 1});
  auto res = k->call("ce", {&l, &y}, {{0}});
  ASSERT_EQ(res[0].value.f.size(), 1u);
  EXPECT_NEAR(res[0].value.f[0], refCrossEntropy(l, y, -100), 1e-5);

  Array none = Array::i64({2, 4}, std::vector<int64_t>(8, -100));
  auto r2 = k->call("ce", {&l, &none}, {{0}});
  EXPECT_TRUE(std::isnan(r2[0].value.f[0])) << r2[0].value.f[0];

  Array l3 = Array::random({3, 11}, rng);
  Array y3 = Array::i32v({3}, {7, 2, 10});
  auto r3 = k->call("ce32", {&l3, &y3}, {{0}});
  EXPECT_NEAR(r3[0].value.f[0], refCrossEntropy(l3, y3, 7), 1e-5);
}

/// A small block of a NeoX layer with dynamic B and N_blk: LayerNorm →
/// QKV projection → split → rotary → local attention → output projection.
TEST_P(OpsTest, DynamicShapeLayerChain) {
  auto k = compile(R"mlir(
    func.func @block(%x: tensor<?x?x6x16xf32>, %p: tensor<6xi64>,
                     %lw: tensor<16xf32>, %lb: tensor<16xf32>,
                     %wqkv: tensor<48x16xf32>, %bqkv: tensor<48xf32>,
                     %wo: tensor<16x16xf32>, %bo: tensor<16xf32>) -> tensor<?x?x6x16xf32> {
      %n = bt.layer_norm %x, %lw, %lb eps 1.0e-05 : tensor<?x?x6x16xf32>, tensor<16xf32>, tensor<16xf32> -> tensor<?x?x6x16xf32>
      %qkv = bt.linear %n, %wqkv, %bqkv : tensor<?x?x6x16xf32>, tensor<48x16xf32>, tensor<48xf32> -> tensor<?x?x6x48xf32>
      %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : tensor<?x?x6x48xf32> -> tensor<?x?x6x2x8xf32>, tensor<?x?x6x2x8xf32>, tensor<?x?x6x2x8xf32>
      %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : tensor<?x?x6x2x8xf32>, tensor<6xi64> -> tensor<?x?x6x2x8xf32>
      %kr = bt.rotary %k, %p rotary_dims 4 base 10000.0 : tensor<?x?x6x2x8xf32>, tensor<6xi64> -> tensor<?x?x6x2x8xf32>
      %a = bt.local_attention %qr, %kr, %v scale 0.35355339059327373 : tensor<?x?x6x2x8xf32> -> tensor<?x?x6x2x8xf32>
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %d0 = tensor.dim %a, %c0 : tensor<?x?x6x2x8xf32>
      %d1 = tensor.dim %a, %c1 : tensor<?x?x6x2x8xf32>
      %f = tensor.collapse_shape %a [[0], [1], [2], [3, 4]] : tensor<?x?x6x2x8xf32> into tensor<?x?x6x16xf32>
      %o = bt.linear %f, %wo, %bo : tensor<?x?x6x16xf32>, tensor<16x16xf32>, tensor<16xf32> -> tensor<?x?x6x16xf32>
      %r = arith.addf %x, %o : tensor<?x?x6x16xf32>
      return %r : tensor<?x?x6x16xf32>
    })mlir");
  ASSERT_TRUE(k);
  Array p = Array::i64({6}, {0, 1, 2, 3, 4, 5});
  Array lw = Array::random({16}, rng), lb = Array::random({16}, rng);
  Array wqkv = Array::random({48, 16}, rng), bqkv = Array::random({48}, rng);
  Array wo = Array::random({16, 16}, rng), bo = Array::random({16}, rng);
  for (auto [b, n] : {std::pair<int64_t, int64_t>{1, 1}, {2, 3}, {3, 2}}) {
    Array x = Array::random({b, n, 6, 16}, rng);
    auto res = k->call("block", {&x, &p, &lw, &lb, &wqkv, &bqkv, &wo, &bo}, {{4}});
    EXPECT_EQ(res[0].value.shape, x.shape);
    // Reference chain.
    auto toArray = [](std::vector<int64_t> shape, const std::vector<double> &v) {
      return Array::f32(std::move(shape), std::vector<float>(v.begin(), v.end()));
    };
    Array n1 = toArray(x.shape, refLayerNorm(x, lw, lb, 1e-5));
    Array qkv = toArray({b, n, 6, 48}, refLinear(n1, wqkv, &bqkv));
    Array q = Array::f32({b, n, 6, 2, 8}, std::vector<float>(b * n * 6 * 16));
    Array kk = q, v = q;
    for (int64_t row = 0; row < b * n * 6; ++row)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t d = 0; d < 8; ++d) {
          q.f[(row * 2 + h) * 8 + d] = qkv.f[row * 48 + (h * 3 + 0) * 8 + d];
          kk.f[(row * 2 + h) * 8 + d] = qkv.f[row * 48 + (h * 3 + 1) * 8 + d];
          v.f[(row * 2 + h) * 8 + d] = qkv.f[row * 48 + (h * 3 + 2) * 8 + d];
        }
    Array qr = toArray(q.shape, refRotary(q, p, 4, 10000.0));
    Array kr = toArray(kk.shape, refRotary(kk, p, 4, 10000.0));
    Array a = toArray({b, n, 6, 16}, refAttention(qr, kr, v, nullptr, 0.35355339059327373));
    std::vector<double> o = refLinear(a, wo, &bo);
    for (size_t i = 0; i < o.size(); ++i)
      o[i] += x.f[i];
    EXPECT_CLOSE(res[0].value.f, o);
  }
}

INSTANTIATE_TEST_SUITE_P(Codegen, OpsTest,
                         ::testing::Values(Mode{"blas", true}, Mode{"loops", false}),
                         [](const ::testing::TestParamInfo<Mode> &info) {
                           return std::string(info.param.name);
                         });

} // namespace

// Referencing cblas_sgemm keeps OpenBLAS a DT_NEEDED of this binary even with
// --as-needed, so the kernels' undefined cblas_sgemm resolves in the process.
[[gnu::used]] void *btTestKeepBlas = reinterpret_cast<void *>(&cblas_sgemm);
