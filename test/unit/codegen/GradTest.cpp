//===- GradTest.cpp - numerics of reverse-mode differentiation -------------===//
//
// Two kinds of tests of the backward sweep (bt-generate-gradients,
// include/bt/Transforms/Autodiff.h), compiled with the real bt-cpu-pipeline
// and called through the kernel ABI:
//
// - the backward ops (bt.layer_norm_grad, bt.embedding_grad,
//   bt.attention_grad, bt.cross_entropy_grad, lowered by bt-lower-backward)
//   against naive double-precision C++ references written from the
//   formulas (PyTorch's backward of the same forward);
// - every vector-Jacobian rule at once, on a small training graph with the
//   ops bt-decompose emits, against central finite differences of the
//   compiled forward (`eval_loss`): for each parameter p and a random
//   direction v, (L(p + h·v) − L(p − h·v)) / 2h ≈ <grad.p, v>.
//
// Each test runs with GEMMs through OpenBLAS and as loops.
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"

#include "bt/Codegen/CPU/CPUCodegen.h"
#include "bt/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

using namespace bt;
using namespace bt::test;

namespace {

constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;
constexpr float kMin = -std::numeric_limits<float>::max();

#define EXPECT_CLOSE(actual, expected)                                         \
  do {                                                                         \
    std::string msg__ = compareClose((actual), (expected), kRtol, kAtol);      \
    EXPECT_TRUE(msg__.empty()) << msg__;                                       \
  } while (0)

struct Mode {
  const char *name;
  bool blas;
};

class GradTest : public ::testing::TestWithParam<Mode> {
protected:
  /// The pipeline options of this mode (CPUPipelineOptions is not copyable).
  void setOptions(CPUPipelineOptions &o) const {
    o.blas = GetParam().blas;
    o.blasMinMNK = 0;
  }
  std::unique_ptr<Kernels> compile(const std::string &src) {
    std::string error;
    CPUPipelineOptions o;
    setOptions(o);
    std::unique_ptr<Kernels> k = Kernels::compile(src, o, error);
    EXPECT_TRUE(k) << error;
    return k;
  }
  std::mt19937 rng{4321};
};

// ---------------------------------------------------------------------------
// bt.layer_norm_grad
// ---------------------------------------------------------------------------

TEST_P(GradTest, LayerNormGrad) {
  auto k = compile(R"mlir(
    func.func @lng(%x: tensor<?x3x40xf32>, %w: tensor<40xf32>, %dy: tensor<?x3x40xf32>)
        -> (tensor<?x3x40xf32>, tensor<40xf32>, tensor<40xf32>) {
      %dx, %dw, %db = bt.layer_norm_grad %x, %w, %dy eps 1.0e-05 : tensor<?x3x40xf32>, tensor<40xf32>
      return %dx, %dw, %db : tensor<?x3x40xf32>, tensor<40xf32>, tensor<40xf32>
    })mlir");
  ASSERT_TRUE(k);
  for (int64_t batch : {1, 2}) {
    Array x = Array::random({batch, 3, 40}, rng, -3, 5);
    Array w = Array::random({40}, rng), dy = Array::random({batch, 3, 40}, rng);
    auto res = k->call("lng", {&x, &w, &dy}, {{3}, {1}, {1}});
    ASSERT_EQ(res.size(), 3u);
    // y = x̂·w + b, x̂ = (x − μ)·rstd: PyTorch native_layer_norm_backward.
    const int64_t c = 40, rows = x.numel() / c;
    std::vector<double> dx(x.numel()), dw(c, 0.0), db(c, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = &x.f[r * c], *dyr = &dy.f[r * c];
      double mean = 0, var = 0;
      for (int64_t j = 0; j < c; ++j)
        mean += xr[j];
      mean /= c;
      for (int64_t j = 0; j < c; ++j)
        var += (xr[j] - mean) * (xr[j] - mean);
      var /= c;
      double rstd = 1.0 / std::sqrt(var + 1e-5);
      // dx̂ = dy·w; dx = rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)).
      double s1 = 0, s2 = 0;
      for (int64_t j = 0; j < c; ++j) {
        double xhat = (xr[j] - mean) * rstd, g = dyr[j] * w.f[j];
        s1 += g;
        s2 += g * xhat;
        dw[j] += dyr[j] * xhat;
        db[j] += dyr[j];
      }
      for (int64_t j = 0; j < c; ++j) {
        double xhat = (xr[j] - mean) * rstd, g = dyr[j] * w.f[j];
        dx[r * c + j] = rstd * (g - s1 / c - xhat * s2 / c);
      }
    }
    EXPECT_EQ(res[0].value.shape, x.shape);
    EXPECT_CLOSE(res[0].value.f, dx);
    EXPECT_CLOSE(res[1].value.f, dw);
    EXPECT_CLOSE(res[2].value.f, db);
  }
}

// ---------------------------------------------------------------------------
// bt.embedding_grad
// ---------------------------------------------------------------------------

TEST_P(GradTest, EmbeddingGradSumsRepeatedIds) {
  auto k = compile(R"mlir(
    func.func @eg(%ids: tensor<?x3xi64>, %dy: tensor<?x3x6xf32>) -> tensor<10x6xf32> {
      %t = bt.embedding_grad %ids, %dy : tensor<?x3xi64>, tensor<?x3x6xf32> -> tensor<10x6xf32>
      return %t : tensor<10x6xf32>
    }
    func.func @eg32(%ids: tensor<4xi32>, %dy: tensor<4x6xf32>) -> tensor<10x6xf32> {
      %t = bt.embedding_grad %ids, %dy : tensor<4xi32>, tensor<4x6xf32> -> tensor<10x6xf32>
      return %t : tensor<10x6xf32>
    })mlir");
  ASSERT_TRUE(k);
  auto reference = [](const Array &ids, const Array &dy) {
    std::vector<double> t(10 * 6, 0.0);
    for (int64_t i = 0; i < ids.numel(); ++i)
      for (int j = 0; j < 6; ++j)
        t[ids.i[i] * 6 + j] += dy.f[i * 6 + j];
    return t;
  };
  // 3 occurs three times, 0 twice; 2, 4..8 never (exact zero rows).
  Array ids = Array::i64({2, 3}, {0, 9, 3, 3, 1, 0});
  Array dy = Array::random({2, 3, 6}, rng);
  auto res = k->call("eg", {&ids, &dy}, {{2}});
  EXPECT_EQ(res[0].value.shape, (std::vector<int64_t>{10, 6}));
  EXPECT_CLOSE(res[0].value.f, reference(ids, dy));
  for (int j = 0; j < 6; ++j)
    EXPECT_EQ(res[0].value.f[2 * 6 + j], 0.0f);

  Array ids32 = Array::i32v({4}, {7, 2, 2, 5});
  Array dy2 = Array::random({4, 6}, rng);
  auto r2 = k->call("eg32", {&ids32, &dy2}, {{2}});
  EXPECT_CLOSE(r2[0].value.f, reference(ids32, dy2));
}

// ---------------------------------------------------------------------------
// bt.attention_grad
// ---------------------------------------------------------------------------

/// dq, dk, dv of HF eager attention (q, k, v, dout [G..., S, H, hd], mask
/// [G..., S] or null). The probabilities come from the f32 masked scores
/// (where(causal, s·scale, MIN) + (1 − m)·MIN, as the forward), the rest in
/// double; the gradient is PyTorch autograd's: softmax backward, then the
/// `where` passes causal entries only (the additive mask is a constant).
void refAttentionGrad(const Array &q, const Array &k, const Array &v,
                      const Array &dout, const Array *mask, double scale,
                      std::vector<double> &dq, std::vector<double> &dk,
                      std::vector<double> &dv) {
  size_t n = q.shape.size();
  int64_t hd = q.shape[n - 1], h = q.shape[n - 2], s = q.shape[n - 3];
  int64_t g = q.numel() / (hd * h * s);
  dq.assign(q.numel(), 0.0);
  dk.assign(q.numel(), 0.0);
  dv.assign(q.numel(), 0.0);
  auto at = [&](int64_t gi, int64_t si, int64_t hi, int64_t d) {
    return ((gi * s + si) * h + hi) * hd + d;
  };
  for (int64_t gi = 0; gi < g; ++gi)
    for (int64_t hi = 0; hi < h; ++hi) {
      std::vector<std::vector<double>> p(s, std::vector<double>(s));
      for (int64_t si = 0; si < s; ++si) {
        std::vector<float> vals(s);
        for (int64_t t = 0; t < s; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d)
            dot += static_cast<double>(q.f[at(gi, si, hi, d)]) *
                   k.f[at(gi, t, hi, d)];
          float val = t <= si ? static_cast<float>(dot) *
                                    static_cast<float>(scale)
                              : kMin;
          if (mask)
            val = val + (1.0f - static_cast<float>(mask->i[gi * s + t])) * kMin;
          vals[t] = val;
        }
        double mx = -INFINITY, sum = 0;
        for (float x : vals)
          mx = std::max(mx, static_cast<double>(x));
        for (int64_t t = 0; t < s; ++t)
          sum += (p[si][t] = std::exp(static_cast<double>(vals[t]) - mx));
        for (int64_t t = 0; t < s; ++t)
          p[si][t] /= sum;
      }
      for (int64_t si = 0; si < s; ++si) {
        std::vector<double> dp(s);
        double rowDot = 0;
        for (int64_t t = 0; t < s; ++t) {
          double acc = 0;
          for (int64_t d = 0; d < hd; ++d) {
            acc += static_cast<double>(dout.f[at(gi, si, hi, d)]) *
                   v.f[at(gi, t, hi, d)];
            dv[at(gi, t, hi, d)] += p[si][t] * dout.f[at(gi, si, hi, d)];
          }
          dp[t] = acc;
          rowDot += acc * p[si][t];
        }
        for (int64_t t = 0; t <= si; ++t) {
          double ds = p[si][t] * (dp[t] - rowDot) * scale;
          for (int64_t d = 0; d < hd; ++d) {
            dq[at(gi, si, hi, d)] += ds * k.f[at(gi, t, hi, d)];
            dk[at(gi, t, hi, d)] += ds * q.f[at(gi, si, hi, d)];
          }
        }
      }
    }
}

TEST_P(GradTest, AttentionGradCausalKeyMaskAndFullyMaskedRows) {
  auto k = compile(R"mlir(
    func.func @ag(%q: tensor<?x7x2x8xf32>, %k: tensor<?x7x2x8xf32>, %v: tensor<?x7x2x8xf32>,
                  %do: tensor<?x7x2x8xf32>, %m: tensor<?x7xi64>)
        -> (tensor<?x7x2x8xf32>, tensor<?x7x2x8xf32>, tensor<?x7x2x8xf32>) {
      %dq, %dk, %dv = bt.attention_grad %q, %k, %v, %do key_mask %m scale 0.35355339059327373 : tensor<?x7x2x8xf32>, tensor<?x7xi64>
      return %dq, %dk, %dv : tensor<?x7x2x8xf32>, tensor<?x7x2x8xf32>, tensor<?x7x2x8xf32>
    }
    func.func @local(%q: tensor<?x?x5x2x8xf32>, %k: tensor<?x?x5x2x8xf32>, %v: tensor<?x?x5x2x8xf32>,
                     %do: tensor<?x?x5x2x8xf32>)
        -> (tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>) {
      %dq, %dk, %dv = bt.attention_grad %q, %k, %v, %do scale 0.35355339059327373 : tensor<?x?x5x2x8xf32>
      return %dq, %dk, %dv : tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>
    })mlir");
  ASSERT_TRUE(k);
  const double scale = 0.35355339059327373;
  {
    Array q = Array::random({2, 7, 2, 8}, rng), kk = Array::random({2, 7, 2, 8}, rng);
    Array v = Array::random({2, 7, 2, 8}, rng), dout = Array::random({2, 7, 2, 8}, rng);
    // Row 0: left padding (the first two keys masked: query rows 0 and 1
    // see no valid causal key), a masked key in the middle; row 1 all valid.
    Array m = Array::i64({2, 7}, {0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    auto res = k->call("ag", {&q, &kk, &v, &dout, &m}, {{4}, {4}, {4}});
    ASSERT_EQ(res.size(), 3u);
    std::vector<double> dq, dk, dv;
    refAttentionGrad(q, kk, v, dout, &m, scale, dq, dk, dv);
    EXPECT_CLOSE(res[0].value.f, dq);
    EXPECT_CLOSE(res[1].value.f, dk);
    EXPECT_CLOSE(res[2].value.f, dv);
  }
  {
    Array q = Array::random({2, 3, 5, 2, 8}, rng), kk = Array::random({2, 3, 5, 2, 8}, rng);
    Array v = Array::random({2, 3, 5, 2, 8}, rng), dout = Array::random({2, 3, 5, 2, 8}, rng);
    auto res = k->call("local", {&q, &kk, &v, &dout}, {{5}, {5}, {5}});
    std::vector<double> dq, dk, dv;
    refAttentionGrad(q, kk, v, dout, nullptr, scale, dq, dk, dv);
    EXPECT_CLOSE(res[0].value.f, dq);
    EXPECT_CLOSE(res[1].value.f, dk);
    EXPECT_CLOSE(res[2].value.f, dv);
  }
}

// ---------------------------------------------------------------------------
// bt.cross_entropy_grad
// ---------------------------------------------------------------------------

TEST_P(GradTest, CrossEntropyGradIgnoredRows) {
  auto k = compile(R"mlir(
    func.func @ceg(%x: tensor<?x3x7xf32>, %l: tensor<?x3xi64>, %g: tensor<f32>) -> tensor<?x3x7xf32> {
      %d = bt.cross_entropy_grad %x, %l, %g : tensor<?x3x7xf32>, tensor<?x3xi64>, tensor<f32>
      return %d : tensor<?x3x7xf32>
    })mlir");
  ASSERT_TRUE(k);
  Array x = Array::random({2, 3, 7}, rng, -4, 4);
  Array g = Array::f32({}, {0.75f});
  auto reference = [&](const Array &labels) {
    std::vector<double> d(x.numel(), 0.0);
    int64_t n = 0;
    for (int64_t l : labels.i)
      n += l != -100;
    for (int64_t r = 0; r < labels.numel(); ++r) {
      if (labels.i[r] == -100)
        continue;
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < 7; ++j)
        mx = std::max(mx, static_cast<double>(x.f[r * 7 + j]));
      for (int j = 0; j < 7; ++j)
        sum += std::exp(x.f[r * 7 + j] - mx);
      for (int j = 0; j < 7; ++j)
        d[r * 7 + j] = 0.75 / n *
                       (std::exp(x.f[r * 7 + j] - mx) / sum - (j == labels.i[r]));
    }
    return d;
  };
  Array labels = Array::i64({2, 3}, {3, -100, 0, 6, 6, -100});
  auto res = k->call("ceg", {&x, &labels, &g}, {{3}});
  EXPECT_CLOSE(res[0].value.f, reference(labels));
  for (int j = 0; j < 7; ++j)
    EXPECT_EQ(res[0].value.f[1 * 7 + j], 0.0f) << "ignored row";
  // Every label ignored: no row counts, the gradient is zero (PyTorch).
  Array none = Array::i64({2, 3}, {-100, -100, -100, -100, -100, -100});
  auto zero = k->call("ceg", {&x, &none, &g}, {{3}});
  EXPECT_CLOSE(zero[0].value.f, std::vector<double>(x.numel(), 0.0));
}

// ---------------------------------------------------------------------------
// All vector-Jacobian rules: finite differences of the compiled forward
// ---------------------------------------------------------------------------

/// A block-transformer-shaped training graph with the ops bt-decompose
/// emits: two embedding lookups with one shared table, tensor.collapse_shape,
/// expand_shape, extract_slice, concat and cast, layer_norm, a
/// Conv1d-weight linear and a plain one, prefix_projection, split_qkv,
/// rotary, global attention and local attention (and the fused form),
/// gelu, arith.addf / subf / mulf / divf / negf / select, and cross_entropy. Ids
/// [B, N, L] with L = 2, E = 4, width D = 8, 2 heads of 4, V = 11.
constexpr const char *kTrainingGraph = R"mlir(
  module {
    bt.param @"emb" : tensor<11x4xf32>
    bt.param @"ln.w" : tensor<8xf32>
    bt.param @"ln.b" : tensor<8xf32>
    bt.param @"qkv.w" : tensor<24x8xf32>
    bt.param @"qkv.b" : tensor<24xf32>
    bt.param @"proj.w" : tensor<8x8x1xf32>
    bt.param @"proj.b" : tensor<8xf32>
    bt.param @"pre.w" : tensor<16x8x1xf32>
    bt.param @"pre.b" : tensor<16xf32>
    bt.param @"tok" : tensor<11x8xf32>
    bt.param @"qkv2.w" : tensor<24x8xf32>
    bt.param @"qkv2.b" : tensor<24xf32>
    bt.param @"up.w" : tensor<12x8xf32>
    bt.param @"up.b" : tensor<12xf32>
    bt.param @"down.w" : tensor<8x12xf32>
    bt.param @"scale" : tensor<8xf32>
    bt.param @"head" : tensor<11x8xf32>

    func.func @eval_loss(%ids: tensor<?x3x2xi64> {bt.name = "input_ids"},
                         %mask: tensor<?x3xi64> {bt.name = "block_attention_mask"},
                         %labels: tensor<?x3x2xi64> {bt.name = "labels"})
        -> (tensor<f32> {bt.name = "loss"}) {
      %c0 = arith.constant 0 : index
      %b = tensor.dim %ids, %c0 : tensor<?x3x2xi64>
      // Embedder: [B, 3, 2] → [B, 3, 2, 4] → [B, 3, 8].
      %emb = bt.param_ref @"emb" : tensor<11x4xf32>
      %e = bt.embedding_lookup %ids, %emb : tensor<?x3x2xi64>, tensor<11x4xf32> -> tensor<?x3x2x4xf32>
      %x = tensor.collapse_shape %e [[0], [1], [2, 3]] : tensor<?x3x2x4xf32> into tensor<?x3x8xf32>
      // One global attention layer (parallel residual).
      %lw = bt.param_ref @"ln.w" : tensor<8xf32>
      %lb = bt.param_ref @"ln.b" : tensor<8xf32>
      %h = bt.layer_norm %x, %lw, %lb eps 1.0e-05 : tensor<?x3x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<?x3x8xf32>
      %qw = bt.param_ref @"qkv.w" : tensor<24x8xf32>
      %qb = bt.param_ref @"qkv.b" : tensor<24xf32>
      %qkv = bt.linear %h, %qw, %qb : tensor<?x3x8xf32>, tensor<24x8xf32>, tensor<24xf32> -> tensor<?x3x24xf32>
      %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 4 : tensor<?x3x24xf32> -> tensor<?x3x2x4xf32>, tensor<?x3x2x4xf32>, tensor<?x3x2x4xf32>
      %pos = arith.constant dense<[0, 1, 2]> : tensor<3xi64>
      %qr = bt.rotary %q, %pos rotary_dims 2 base 10000.0 : tensor<?x3x2x4xf32>, tensor<3xi64> -> tensor<?x3x2x4xf32>
      %kr = bt.rotary %k, %pos rotary_dims 2 base 10000.0 : tensor<?x3x2x4xf32>, tensor<3xi64> -> tensor<?x3x2x4xf32>
      %a = bt.attention %qr, %kr, %v key_mask %mask scale 0.5 : tensor<?x3x2x4xf32>, tensor<?x3xi64> -> tensor<?x3x2x4xf32>
      %a2 = tensor.collapse_shape %a [[0], [1], [2, 3]] : tensor<?x3x2x4xf32> into tensor<?x3x8xf32>
      %pw = bt.param_ref @"proj.w" : tensor<8x8x1xf32>
      %pb = bt.param_ref @"proj.b" : tensor<8xf32>
      %o = bt.linear %a2, %pw, %pb : tensor<?x3x8xf32>, tensor<8x8x1xf32>, tensor<8xf32> -> tensor<?x3x8xf32>
      %ctx = arith.addf %x, %o : tensor<?x3x8xf32>
      // Context of blocks 0, 1 → prefix (P = 2) for blocks 1, 2.
      %ctxs = tensor.extract_slice %ctx[0, 0, 0] [%b, 2, 8] [1, 1, 1] : tensor<?x3x8xf32> to tensor<?x2x8xf32>
      %prw = bt.param_ref @"pre.w" : tensor<16x8x1xf32>
      %prb = bt.param_ref @"pre.b" : tensor<16xf32>
      %pre = bt.prefix_projection %ctxs, %prw, %prb prefix_length 2 : tensor<?x2x8xf32>, tensor<16x8x1xf32>, tensor<16xf32> -> tensor<?x2x2x8xf32>
      // Token decoder input [P0, P1, E(t0)] of blocks 1, 2.
      %tok = bt.param_ref @"tok" : tensor<11x8xf32>
      %ids12 = tensor.extract_slice %ids[0, 1, 0] [%b, 2, 1] [1, 1, 1] : tensor<?x3x2xi64> to tensor<?x2x1xi64>
      %te = bt.embedding_lookup %ids12, %tok : tensor<?x2x1xi64>, tensor<11x8xf32> -> tensor<?x2x1x8xf32>
      %in = tensor.concat dim(2) %pre, %te : (tensor<?x2x2x8xf32>, tensor<?x2x1x8xf32>) -> tensor<?x2x3x8xf32>
      %qw2 = bt.param_ref @"qkv2.w" : tensor<24x8xf32>
      %qb2 = bt.param_ref @"qkv2.b" : tensor<24xf32>
      %qkv2 = bt.linear %in, %qw2, %qb2 : tensor<?x2x3x8xf32>, tensor<24x8xf32>, tensor<24xf32> -> tensor<?x2x3x24xf32>
      %q2, %k2, %v2 = bt.split_qkv %qkv2 heads 2 head_dim 4 : tensor<?x2x3x24xf32> -> tensor<?x2x3x2x4xf32>, tensor<?x2x3x2x4xf32>, tensor<?x2x3x2x4xf32>
      %qr2 = bt.rotary %q2, %pos rotary_dims 2 base 10000.0 : tensor<?x2x3x2x4xf32>, tensor<3xi64> -> tensor<?x2x3x2x4xf32>
      %kr2 = bt.rotary %k2, %pos rotary_dims 2 base 10000.0 : tensor<?x2x3x2x4xf32>, tensor<3xi64> -> tensor<?x2x3x2x4xf32>
      %la = bt.local_attention %qr2, %kr2, %v2 scale 0.5 : tensor<?x2x3x2x4xf32> -> tensor<?x2x3x2x4xf32>
      %fa = bt.fused_local_attention %qkv2, %pos heads 2 head_dim 4 rotary_dims 2 base 10000.0 scale 0.5 : tensor<?x2x3x24xf32>, tensor<3xi64> -> tensor<?x2x3x2x4xf32>
      %att = arith.subf %la, %fa : tensor<?x2x3x2x4xf32>
      %att2 = arith.mulf %att, %la : tensor<?x2x3x2x4xf32>
      %sum = arith.addf %att2, %fa : tensor<?x2x3x2x4xf32>
      %t = tensor.collapse_shape %sum [[0], [1], [2], [3, 4]] : tensor<?x2x3x2x4xf32> into tensor<?x2x3x8xf32>
      %uw = bt.param_ref @"up.w" : tensor<12x8xf32>
      %ub = bt.param_ref @"up.b" : tensor<12xf32>
      %u = bt.linear %t, %uw, %ub : tensor<?x2x3x8xf32>, tensor<12x8xf32>, tensor<12xf32> -> tensor<?x2x3x12xf32>
      %g = bt.gelu %u : tensor<?x2x3x12xf32>
      %dw = bt.param_ref @"down.w" : tensor<8x12xf32>
      %d = bt.linear %g, %dw : tensor<?x2x3x12xf32>, tensor<8x12xf32> -> tensor<?x2x3x8xf32>
      %sc = bt.param_ref @"scale" : tensor<8xf32>
      %scs = tensor.expand_shape %sc [[0, 1, 2, 3]] output_shape [1, 1, 1, 8] : tensor<8xf32> into tensor<1x1x1x8xf32>
      %dsl = tensor.extract_slice %d[0, 0, 1, 0] [1, 1, 1, 8] [1, 1, 1, 1] : tensor<?x2x3x8xf32> to tensor<1x1x1x8xf32>
      %dsd = tensor.cast %dsl : tensor<1x1x1x8xf32> to tensor<?x1x1x8xf32>
      %dss = tensor.cast %dsd : tensor<?x1x1x8xf32> to tensor<1x1x1x8xf32>
      %ratio = arith.divf %dss, %scs : tensor<1x1x1x8xf32>
      %neg = arith.negf %ratio : tensor<1x1x1x8xf32>
      %d2 = tensor.insert_slice %neg into %d[0, 1, 2, 0] [1, 1, 1, 8] [1, 1, 1, 1] : tensor<1x1x1x8xf32> into tensor<?x2x3x8xf32>
      %r0 = arith.addf %d2, %t : tensor<?x2x3x8xf32>
      %true = arith.constant true
      %r = arith.select %true, %r0, %t : tensor<?x2x3x8xf32>
      // Outputs at positions 1, 2 predict the block's 2 tokens.
      %rs = tensor.extract_slice %r[0, 0, 1, 0] [%b, 2, 2, 8] [1, 1, 1, 1] : tensor<?x2x3x8xf32> to tensor<?x2x2x8xf32>
      %hw = bt.param_ref @"head" : tensor<11x8xf32>
      %logits = bt.linear %rs, %hw : tensor<?x2x2x8xf32>, tensor<11x8xf32> -> tensor<?x2x2x11xf32>
      %lab = tensor.extract_slice %labels[0, 1, 0] [%b, 2, 2] [1, 1, 1] : tensor<?x3x2xi64> to tensor<?x2x2xi64>
      %loss = bt.cross_entropy %logits, %lab : tensor<?x2x2x11xf32>, tensor<?x2x2xi64> -> tensor<f32>
      return %loss : tensor<f32>
    }
  })mlir";

TEST_P(GradTest, EveryRuleMatchesFiniteDifferences) {
  mlir::DialectRegistry registry;
  registerCPUCodegenDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kTrainingGraph, &ctx);
  ASSERT_TRUE(module);
  mlir::PassManager pm(&ctx);
  pm.addPass(createBTGenerateGradients());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  std::string error;
  CPUPipelineOptions o;
  setOptions(o);
  std::unique_ptr<Kernels> k = Kernels::compileModule(*module, o, error);
  ASSERT_TRUE(k) << error;

  // The parameters in declaration order (the order of grad's results).
  const std::vector<std::pair<std::string, std::vector<int64_t>>> declared = {
      {"emb", {11, 4}},     {"ln.w", {8}},         {"ln.b", {8}},
      {"qkv.w", {24, 8}},   {"qkv.b", {24}},       {"proj.w", {8, 8, 1}},
      {"proj.b", {8}},      {"pre.w", {16, 8, 1}}, {"pre.b", {16}},
      {"tok", {11, 8}},     {"qkv2.w", {24, 8}},   {"qkv2.b", {24}},
      {"up.w", {12, 8}},    {"up.b", {12}},        {"down.w", {8, 12}},
      {"scale", {8}},       {"head", {11, 8}}};
  // The kernels' argument order of the parameters (bt.params).
  std::vector<std::string> order = k->params("eval_loss");
  ASSERT_EQ(order, k->params("grad"));
  ASSERT_EQ(order.size(), declared.size());
  std::map<std::string, Array> values;
  for (const auto &[name, shape] : declared) {
    values[name] = Array::random(shape, rng, -0.6f, 0.6f);
    // LayerNorm weights and the divisor away from 0.
    if (name == "ln.w" || name == "scale")
      for (float &x : values[name].f)
        x += x >= 0 ? 1.0f : -1.0f;
  }
  // B = 2; block 1 of row 1 masked, ignored labels. No query row without a
  // valid causal key: there the f32 forward is flat in the masked scores
  // (score + MIN == MIN) while PyTorch autograd, and so bt.attention_grad,
  // passes the softmax gradient through the additive mask (covered against
  // the formula by AttentionGradCausalKeyMaskAndFullyMaskedRows).
  Array ids = Array::i64({2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 3, 3});
  Array mask = Array::i64({2, 3}, {1, 1, 1, 1, 0, 1});
  Array labels = Array::i64({2, 3, 2}, {-100, -100, 4, 5, 6, 0, -100, -100, 9, -100, 3, 2});

  auto call = [&](const std::string &name,
                  const std::map<std::string, Array> &ps) {
    std::vector<const Array *> args;
    for (const std::string &p : order)
      args.push_back(&ps.at(p));
    args.insert(args.end(), {&ids, &mask, &labels});
    std::vector<ResultSpec> specs = {{0}};
    if (name == "grad")
      for (const auto &[p, shape] : declared)
        specs.push_back({static_cast<unsigned>(shape.size())});
    return k->call(name, args, specs);
  };
  std::vector<Result> grads = call("grad", values);
  ASSERT_EQ(grads.size(), declared.size() + 1);
  std::vector<Result> base = call("eval_loss", values);
  EXPECT_EQ(grads[0].value.f[0], base[0].value.f[0]) << "loss of grad vs eval_loss";

  // Per parameter: the directional derivative along a random ±1 direction.
  const float h = 2e-3f;
  for (size_t p = 0; p < declared.size(); ++p) {
    const std::string &name = declared[p].first;
    SCOPED_TRACE(name);
    const Array &g = grads[p + 1].value;
    ASSERT_EQ(g.shape, declared[p].second);
    std::vector<float> dir(g.numel());
    std::bernoulli_distribution coin(0.5);
    double analytic = 0, gnorm = 0;
    for (size_t i = 0; i < dir.size(); ++i) {
      dir[i] = coin(rng) ? 1.0f : -1.0f;
      analytic += static_cast<double>(g.f[i]) * dir[i];
      gnorm += std::fabs(g.f[i]);
    }
    std::map<std::string, Array> plus = values, minus = values;
    for (size_t i = 0; i < dir.size(); ++i) {
      plus[name].f[i] += h * dir[i];
      minus[name].f[i] -= h * dir[i];
    }
    double lp = call("eval_loss", plus)[0].value.f[0];
    double lm = call("eval_loss", minus)[0].value.f[0];
    double numeric = (lp - lm) / (2.0 * h);
    // f32 loss rounding (~1e-7 · |L| / h) plus O(h²) truncation, relative
    // to the L1 norm of the gradient (the scale of the directional
    // derivative over ±1 directions).
    EXPECT_NEAR(numeric, analytic, 2e-3 * gnorm + 3e-4)
        << "numeric " << numeric << " analytic " << analytic << " |g|_1 "
        << gnorm;
    EXPECT_GT(gnorm, 0.0) << "no gradient reaches this parameter";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, GradTest,
                         ::testing::Values(Mode{"blas", true},
                                           Mode{"loops", false}),
                         [](const ::testing::TestParamInfo<Mode> &info) {
                           return std::string(info.param.name);
                         });

} // namespace
