//===- EmuBackwardTest.cpp - backward/optimizer kernels: emulator vs CPU --===//
//
// Issue 12's kernel tests of the training ops (docs/cuda-emulator.md,
// "Tests and CI time"), in the style of EmuKernelTest.cpp's LayerOps: a
// one-op module compiled for both targets (EmuCompare.h), called on the
// same random inputs; the emulator's results within 1e-5 (absolute +
// relative) of the CPU target's and finite, no report of the emulator, and
// schedule seeds 1, 2, 3 bit-identical to the in-order run.
//
// Every backward and optimizer op that bt-cuda-pipeline lowers:
//   - bt.layer_norm_grad (bt-lower-backward → linalg → kernels): C = 37,
//     C = 1, 70 rows of C = 33; batch 1 and 2;
//   - bt.embedding_grad (the CUDA target's own kernel, GPUEmbeddingGrad.cpp):
//     repeated ids, never-seen rows (exact zeros), i64 and i32 ids, E = 70
//     (more columns than a warp, not a multiple of 32);
//   - bt.attention_grad (bt-lower-backward: an scf.for over the heads with
//     the GEMM transposes on cuBLAS and the softmax backward in kernels):
//     rank 4 with an i64 key mask and fully masked rows (keyFlags), dynamic
//     S ∈ {1, 33} with head_dim 33 and an i1 mask, rank 5 (local) with and
//     without a mask;
//   - bt.cross_entropy_grad: ignored rows, every row ignored, V = 37, i32
//     labels with an ignore_index;
//   - the rules that bt-generate-gradients builds from linalg and bt ops
//     (bt.linear's dx = dy·W as linalg.matmul and dW = dyᵀ·x as
//     linalg.matmul_transpose_a, db as a row sum, with and without bias and
//     with a Conv1d weight; bt.gelu's backward generic; bt.split_qkv,
//     bt.rotary at negated positions, bt.prefix_projection,
//     bt.fused_local_attention's unfused chain, bt.embedding_lookup's
//     scatter-add): the `grad` entry point of two small training graphs
//     (VJPRules), compared with the CPU target's;
//   - bt.global_norm, bt.clip_coefficient, bt.lr_schedule, bt.adamw, with
//     their scalar arithmetic in 0-d kernels (bt-scalars-to-kernels): step 1
//     (bias correction 1 − β^1, the schedule's initial ratio) with the
//     clip active (norm > max_norm), a warmup step with the clip inactive
//     (coefficient 1), a cosine step and a step past the total, and
//     `initial_ratio = 0.0`.
//
//===----------------------------------------------------------------------===//

#include "EmuCompare.h"

#include "bt/Transforms/Passes.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

using namespace bt;
using namespace bt::test;

namespace {

TEST(BackwardOps, LayerNormGrad) {
  std::string error;
  auto both = compileBoth(R"mlir(module {
    func.func @lng(%x: tensor<?x3x37xf32>, %w: tensor<37xf32>, %dy: tensor<?x3x37xf32>)
        -> (tensor<?x3x37xf32>, tensor<37xf32>, tensor<37xf32>) {
      %dx, %dw, %db = bt.layer_norm_grad %x, %w, %dy eps 1.0e-05 : tensor<?x3x37xf32>, tensor<37xf32>
      return %dx, %dw, %db : tensor<?x3x37xf32>, tensor<37xf32>, tensor<37xf32>
    }
    func.func @lng_c1(%x: tensor<5x1xf32>, %w: tensor<1xf32>, %dy: tensor<5x1xf32>)
        -> (tensor<5x1xf32>, tensor<1xf32>, tensor<1xf32>) {
      %dx, %dw, %db = bt.layer_norm_grad %x, %w, %dy eps 1.0e-05 : tensor<5x1xf32>, tensor<1xf32>
      return %dx, %dw, %db : tensor<5x1xf32>, tensor<1xf32>, tensor<1xf32>
    }
    func.func @lng_rows(%x: tensor<?x33xf32>, %w: tensor<33xf32>, %dy: tensor<?x33xf32>)
        -> (tensor<?x33xf32>, tensor<33xf32>, tensor<33xf32>) {
      %dx, %dw, %db = bt.layer_norm_grad %x, %w, %dy eps 1.0e-05 : tensor<?x33xf32>, tensor<33xf32>
      return %dx, %dw, %db : tensor<?x33xf32>, tensor<33xf32>, tensor<33xf32>
    }
  })mlir",
                          error);
  ASSERT_TRUE(both) << error;
  std::mt19937 rng(101);
  for (int64_t batch : {1, 2}) {
    Array x = Array::random({batch, 3, 37}, rng, -3, 5);
    Array w = Array::random({37}, rng), dy = Array::random({batch, 3, 37}, rng);
    expectSame(*both, "lng", {&x, &w, &dy}, {{3}, {1}, {1}},
               "batch " + std::to_string(batch));
  }
  {
    Array x = Array::random({5, 1}, rng), w = Array::random({1}, rng),
          dy = Array::random({5, 1}, rng);
    expectSame(*both, "lng_c1", {&x, &w, &dy}, {{2}, {1}, {1}}, "");
  }
  {
    Array x = Array::random({70, 33}, rng, -2, 2), w = Array::random({33}, rng),
          dy = Array::random({70, 33}, rng);
    expectSame(*both, "lng_rows", {&x, &w, &dy}, {{2}, {1}, {1}}, "");
  }
}

TEST(BackwardOps, EmbeddingGrad) {
  std::string error;
  auto both = compileBoth(R"mlir(module {
    func.func @eg(%ids: tensor<?x3xi64>, %dy: tensor<?x3x70xf32>) -> tensor<10x70xf32> {
      %t = bt.embedding_grad %ids, %dy : tensor<?x3xi64>, tensor<?x3x70xf32> -> tensor<10x70xf32>
      return %t : tensor<10x70xf32>
    }
    func.func @eg32(%ids: tensor<4xi32>, %dy: tensor<4x6xf32>) -> tensor<10x6xf32> {
      %t = bt.embedding_grad %ids, %dy : tensor<4xi32>, tensor<4x6xf32> -> tensor<10x6xf32>
      return %t : tensor<10x6xf32>
    }
    func.func @eg1(%ids: tensor<1x1xi64>, %dy: tensor<1x1x1xf32>) -> tensor<3x1xf32> {
      %t = bt.embedding_grad %ids, %dy : tensor<1x1xi64>, tensor<1x1x1xf32> -> tensor<3x1xf32>
      return %t : tensor<3x1xf32>
    }
  })mlir",
                          error);
  ASSERT_TRUE(both) << error;
  std::mt19937 rng(102);
  // 3 three times, 0 twice; 2 and 4..8 never (exact zero rows).
  Array ids = Array::i64({2, 3}, {0, 9, 3, 3, 1, 0});
  Array dy = Array::random({2, 3, 70}, rng);
  expectSame(*both, "eg", {&ids, &dy}, {{2}}, "repeated ids");
  Array ids1 = randomIds({1, 3}, 10, false, rng);
  Array dy1 = Array::random({1, 3, 70}, rng);
  expectSame(*both, "eg", {&ids1, &dy1}, {{2}}, "batch 1");
  Array ids32 = Array::i32v({4}, {7, 2, 2, 5});
  Array dy32 = Array::random({4, 6}, rng);
  expectSame(*both, "eg32", {&ids32, &dy32}, {{2}}, "i32 ids");
  Array one = Array::i64({1, 1}, {2});
  Array dyOne = Array::random({1, 1, 1}, rng);
  expectSame(*both, "eg1", {&one, &dyOne}, {{2}}, "size-1 dims");
}

TEST(BackwardOps, AttentionGrad) {
  std::string error;
  auto both = compileBoth(R"mlir(module {
    func.func @ag(%q: tensor<?x7x2x8xf32>, %k: tensor<?x7x2x8xf32>, %v: tensor<?x7x2x8xf32>,
                  %do: tensor<?x7x2x8xf32>, %m: tensor<?x7xi64>)
        -> (tensor<?x7x2x8xf32>, tensor<?x7x2x8xf32>, tensor<?x7x2x8xf32>) {
      %dq, %dk, %dv = bt.attention_grad %q, %k, %v, %do key_mask %m scale 0.35355339059327373 : tensor<?x7x2x8xf32>, tensor<?x7xi64>
      return %dq, %dk, %dv : tensor<?x7x2x8xf32>, tensor<?x7x2x8xf32>, tensor<?x7x2x8xf32>
    }
    func.func @ag_odd(%q: tensor<3x?x1x33xf32>, %k: tensor<3x?x1x33xf32>, %v: tensor<3x?x1x33xf32>,
                      %do: tensor<3x?x1x33xf32>, %m: tensor<3x?xi1>)
        -> (tensor<3x?x1x33xf32>, tensor<3x?x1x33xf32>, tensor<3x?x1x33xf32>) {
      %dq, %dk, %dv = bt.attention_grad %q, %k, %v, %do key_mask %m scale 0.17407765595569785 : tensor<3x?x1x33xf32>, tensor<3x?xi1>
      return %dq, %dk, %dv : tensor<3x?x1x33xf32>, tensor<3x?x1x33xf32>, tensor<3x?x1x33xf32>
    }
    func.func @local(%q: tensor<?x?x5x2x8xf32>, %k: tensor<?x?x5x2x8xf32>, %v: tensor<?x?x5x2x8xf32>,
                     %do: tensor<?x?x5x2x8xf32>)
        -> (tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>) {
      %dq, %dk, %dv = bt.attention_grad %q, %k, %v, %do scale 0.35355339059327373 : tensor<?x?x5x2x8xf32>
      return %dq, %dk, %dv : tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>
    }
    func.func @local_mask(%q: tensor<?x?x5x2x8xf32>, %k: tensor<?x?x5x2x8xf32>, %v: tensor<?x?x5x2x8xf32>,
                          %do: tensor<?x?x5x2x8xf32>, %m: tensor<?x?x5xi1>)
        -> (tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>) {
      %dq, %dk, %dv = bt.attention_grad %q, %k, %v, %do key_mask %m scale 0.35355339059327373 : tensor<?x?x5x2x8xf32>, tensor<?x?x5xi1>
      return %dq, %dk, %dv : tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>
    }
  })mlir",
                          error);
  ASSERT_TRUE(both) << error;
  std::mt19937 rng(103);
  auto R = [&](std::vector<int64_t> shape) { return Array::random(shape, rng); };
  const std::vector<ResultSpec> rank4 = {{4}, {4}, {4}}, rank5 = {{5}, {5}, {5}};
  {
    // Sequence 0: random flags with its first three keys masked (its
    // first query rows see no valid key), 1: none valid, 2: all valid.
    Array q = R({3, 7, 2, 8}), k = R({3, 7, 2, 8}), v = R({3, 7, 2, 8}),
          d = R({3, 7, 2, 8});
    Array m = Array::i64({3, 7}, keyFlags(3, 7, rng));
    expectSame(*both, "ag", {&q, &k, &v, &d, &m}, rank4, "masked rows");
  }
  for (int64_t s : {1, 33}) {
    Array q = R({3, s, 1, 33}), k = R({3, s, 1, 33}), v = R({3, s, 1, 33}),
          d = R({3, s, 1, 33});
    Array m = Array::i1v({3, s}, keyFlags(3, s, rng));
    expectSame(*both, "ag_odd", {&q, &k, &v, &d, &m}, rank4,
               "S=" + std::to_string(s) + " head_dim=33");
  }
  {
    Array q = R({2, 3, 5, 2, 8}), k = R({2, 3, 5, 2, 8}), v = R({2, 3, 5, 2, 8}),
          d = R({2, 3, 5, 2, 8});
    expectSame(*both, "local", {&q, &k, &v, &d}, rank5, "no mask");
    Array m = Array::i1v({2, 3, 5}, keyFlags(6, 5, rng));
    expectSame(*both, "local_mask", {&q, &k, &v, &d, &m}, rank5, "key mask");
  }
}

TEST(BackwardOps, CrossEntropyGrad) {
  std::string error;
  auto both = compileBoth(R"mlir(module {
    func.func @ceg(%x: tensor<?x3x37xf32>, %l: tensor<?x3xi64>, %g: tensor<f32>) -> tensor<?x3x37xf32> {
      %d = bt.cross_entropy_grad %x, %l, %g : tensor<?x3x37xf32>, tensor<?x3xi64>, tensor<f32>
      return %d : tensor<?x3x37xf32>
    }
    func.func @ceg32(%x: tensor<3x11xf32>, %l: tensor<3xi32>, %g: tensor<f32>) -> tensor<3x11xf32> {
      %d = bt.cross_entropy_grad %x, %l, %g {ignore_index = 7 : i64} : tensor<3x11xf32>, tensor<3xi32>, tensor<f32>
      return %d : tensor<3x11xf32>
    }
  })mlir",
                          error);
  ASSERT_TRUE(both) << error;
  std::mt19937 rng(104);
  Array x = Array::random({2, 3, 37}, rng, -4, 4);
  Array g = Array::f32({}, {0.75f});
  Array labels = Array::i64({2, 3}, {3, -100, 0, 36, 36, -100});
  expectSame(*both, "ceg", {&x, &labels, &g}, {{3}}, "ignored rows");
  Array none = Array::i64({2, 3}, {-100, -100, -100, -100, -100, -100});
  expectSame(*both, "ceg", {&x, &none, &g}, {{3}}, "every row ignored");
  Array x1 = Array::random({1, 3, 37}, rng, -4, 4);
  Array l1 = randomIds({1, 3}, 37, false, rng);
  expectSame(*both, "ceg", {&x1, &l1, &g}, {{3}}, "batch 1");
  Array x3 = Array::random({3, 11}, rng, -4, 4);
  Array l3 = Array::i32v({3}, {7, 2, 10});
  expectSame(*both, "ceg32", {&x3, &l3, &g}, {{2}}, "i32 labels");
}

// ---------------------------------------------------------------------------
// The vector-Jacobian rules built from linalg and bt ops: `grad` of small
// training graphs (bt-generate-gradients), on both targets.
// ---------------------------------------------------------------------------

/// `source` with the `grad` entry point of its `eval_loss`, printed.
std::string withGradients(const std::string &source, std::string &error) {
  std::unique_ptr<mlir::MLIRContext> ctx = makeCUDAContext();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, ctx.get());
  if (!module) {
    error = "cannot parse the training graph";
    return "";
  }
  mlir::PassManager pm(ctx.get());
  pm.addPass(createBTGenerateGradients());
  if (mlir::failed(pm.run(*module))) {
    error = "bt-generate-gradients failed";
    return "";
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return text;
}

/// `source`'s training graph with its `grad` compiled for both targets,
/// and the kernels' `bt.params` order.
struct GradGraph {
  std::unique_ptr<BothTargets> both;
  std::vector<std::string> order;
};

GradGraph compileGradients(const std::string &source, std::string &error) {
  GradGraph g;
  std::string text = withGradients(source, error);
  if (text.empty())
    return g;
  g.both = compileBoth(text, error);
  if (g.both)
    g.order = g.both->cpu->params("grad");
  if (g.both && g.order != g.both->gpu->params("grad")) {
    error = "the targets order the parameters differently";
    g.both.reset();
  }
  return g;
}

/// Calls `grad` on both targets: random parameters of `shapes` (in the
/// kernels' order), then `inputs`; compares the loss and one gradient per
/// parameter.
void expectSameGradients(
    GradGraph &g, const std::map<std::string, std::vector<int64_t>> &shapes,
    const std::vector<const Array *> &inputs, std::mt19937 &rng,
    const std::string &what) {
  ASSERT_EQ(g.order.size(), shapes.size());
  std::vector<Array> params;
  std::vector<ResultSpec> results = {{0}};
  for (const std::string &p : g.order) {
    params.push_back(Array::random(shapes.at(p), rng, -0.6f, 0.6f));
    results.push_back({static_cast<unsigned>(shapes.at(p).size())});
  }
  std::vector<const Array *> args;
  for (const Array &p : params)
    args.push_back(&p);
  args.insert(args.end(), inputs.begin(), inputs.end());
  expectSame(*g.both, "grad", args, results, what);
}

TEST(BackwardOps, VJPRulesLinearGelu) {
  // linear with bias → gelu → Conv1d-weight linear without bias →
  // cross_entropy: dx = dy·W (matmul), dW = dyᵀ·x (matmul_transpose_a),
  // db (row sum), gelu's backward, cross_entropy_grad. M = B·5 rows.
  const std::string source = R"mlir(module {
    bt.param @"up.w" : tensor<29x37xf32>
    bt.param @"up.b" : tensor<29xf32>
    bt.param @"head" : tensor<11x29x1xf32>
    func.func @eval_loss(%x: tensor<?x5x37xf32> {bt.name = "x"},
                         %labels: tensor<?x5xi64> {bt.name = "labels"})
        -> (tensor<f32> {bt.name = "loss"}) {
      %uw = bt.param_ref @"up.w" : tensor<29x37xf32>
      %ub = bt.param_ref @"up.b" : tensor<29xf32>
      %u = bt.linear %x, %uw, %ub : tensor<?x5x37xf32>, tensor<29x37xf32>, tensor<29xf32> -> tensor<?x5x29xf32>
      %g = bt.gelu %u : tensor<?x5x29xf32>
      %hw = bt.param_ref @"head" : tensor<11x29x1xf32>
      %logits = bt.linear %g, %hw : tensor<?x5x29xf32>, tensor<11x29x1xf32> -> tensor<?x5x11xf32>
      %loss = bt.cross_entropy %logits, %labels : tensor<?x5x11xf32>, tensor<?x5xi64> -> tensor<f32>
      return %loss : tensor<f32>
    }
  })mlir";
  std::string error;
  GradGraph g = compileGradients(source, error);
  ASSERT_TRUE(g.both) << error;
  std::mt19937 rng(105);
  for (int64_t batch : {1, 3}) {
    Array x = Array::random({batch, 5, 37}, rng, -2, 2);
    Array labels = randomIds({batch, 5}, 11, false, rng);
    labels.i[1] = -100;
    expectSameGradients(
        g, {{"up.w", {29, 37}}, {"up.b", {29}}, {"head", {11, 29, 1}}},
        {&x, &labels}, rng, "batch " + std::to_string(batch));
  }
}

TEST(BackwardOps, VJPRulesAttentionPath) {
  // embedding_lookup → layer_norm → linear → split_qkv → rotary →
  // attention (key mask, a fully masked sequence) → prefix_projection →
  // linear → fused_local_attention → linear → cross_entropy.
  const std::string source = R"mlir(module {
    bt.param @"emb" : tensor<11x8xf32>
    bt.param @"ln.w" : tensor<8xf32>
    bt.param @"ln.b" : tensor<8xf32>
    bt.param @"qkv.w" : tensor<24x8xf32>
    bt.param @"qkv.b" : tensor<24xf32>
    bt.param @"pre.w" : tensor<16x8x1xf32>
    bt.param @"pre.b" : tensor<16xf32>
    bt.param @"qkv2.w" : tensor<24x8xf32>
    bt.param @"head" : tensor<11x8xf32>
    func.func @eval_loss(%ids: tensor<?x3xi64> {bt.name = "input_ids"},
                         %mask: tensor<?x3xi64> {bt.name = "block_attention_mask"},
                         %labels: tensor<?x3x2xi64> {bt.name = "labels"})
        -> (tensor<f32> {bt.name = "loss"}) {
      %emb = bt.param_ref @"emb" : tensor<11x8xf32>
      %e = bt.embedding_lookup %ids, %emb : tensor<?x3xi64>, tensor<11x8xf32> -> tensor<?x3x8xf32>
      %lw = bt.param_ref @"ln.w" : tensor<8xf32>
      %lb = bt.param_ref @"ln.b" : tensor<8xf32>
      %h = bt.layer_norm %e, %lw, %lb eps 1.0e-05 : tensor<?x3x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<?x3x8xf32>
      %qw = bt.param_ref @"qkv.w" : tensor<24x8xf32>
      %qb = bt.param_ref @"qkv.b" : tensor<24xf32>
      %qkv = bt.linear %h, %qw, %qb : tensor<?x3x8xf32>, tensor<24x8xf32>, tensor<24xf32> -> tensor<?x3x24xf32>
      %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 4 : tensor<?x3x24xf32> -> tensor<?x3x2x4xf32>, tensor<?x3x2x4xf32>, tensor<?x3x2x4xf32>
      %pos = arith.constant dense<[0, 1, 2]> : tensor<3xi64>
      %qr = bt.rotary %q, %pos rotary_dims 2 base 10000.0 : tensor<?x3x2x4xf32>, tensor<3xi64> -> tensor<?x3x2x4xf32>
      %kr = bt.rotary %k, %pos rotary_dims 2 base 10000.0 : tensor<?x3x2x4xf32>, tensor<3xi64> -> tensor<?x3x2x4xf32>
      %a = bt.attention %qr, %kr, %v key_mask %mask scale 0.5 : tensor<?x3x2x4xf32>, tensor<?x3xi64> -> tensor<?x3x2x4xf32>
      %a2 = tensor.collapse_shape %a [[0], [1], [2, 3]] : tensor<?x3x2x4xf32> into tensor<?x3x8xf32>
      %prw = bt.param_ref @"pre.w" : tensor<16x8x1xf32>
      %prb = bt.param_ref @"pre.b" : tensor<16xf32>
      %pre = bt.prefix_projection %a2, %prw, %prb prefix_length 2 : tensor<?x3x8xf32>, tensor<16x8x1xf32>, tensor<16xf32> -> tensor<?x3x2x8xf32>
      %qw2 = bt.param_ref @"qkv2.w" : tensor<24x8xf32>
      %qkv2 = bt.linear %pre, %qw2 : tensor<?x3x2x8xf32>, tensor<24x8xf32> -> tensor<?x3x2x24xf32>
      %pos2 = arith.constant dense<[3, 4]> : tensor<2xi64>
      %fa = bt.fused_local_attention %qkv2, %pos2 heads 2 head_dim 4 rotary_dims 2 base 10000.0 scale 0.5 : tensor<?x3x2x24xf32>, tensor<2xi64> -> tensor<?x3x2x2x4xf32>
      %t = tensor.collapse_shape %fa [[0], [1], [2], [3, 4]] : tensor<?x3x2x2x4xf32> into tensor<?x3x2x8xf32>
      %hw = bt.param_ref @"head" : tensor<11x8xf32>
      %logits = bt.linear %t, %hw : tensor<?x3x2x8xf32>, tensor<11x8xf32> -> tensor<?x3x2x11xf32>
      %loss = bt.cross_entropy %logits, %labels : tensor<?x3x2x11xf32>, tensor<?x3x2xi64> -> tensor<f32>
      return %loss : tensor<f32>
    }
  })mlir";
  std::string error;
  GradGraph g = compileGradients(source, error);
  ASSERT_TRUE(g.both) << error;
  std::mt19937 rng(106);
  // Row 0: first block masked; row 1: all valid; row 2: none valid.
  Array ids = randomIds({3, 3}, 11, false, rng);
  Array mask = Array::i64({3, 3}, {0, 1, 1, 1, 1, 1, 0, 0, 0});
  Array labels = randomIds({3, 3, 2}, 11, false, rng);
  labels.i[0] = labels.i[5] = -100;
  expectSameGradients(g,
                      {{"emb", {11, 8}},
                       {"ln.w", {8}},
                       {"ln.b", {8}},
                       {"qkv.w", {24, 8}},
                       {"qkv.b", {24}},
                       {"pre.w", {16, 8, 1}},
                       {"pre.b", {16}},
                       {"qkv2.w", {24, 8}},
                       {"head", {11, 8}}},
                      {&ids, &mask, &labels}, rng, "");
}

// ---------------------------------------------------------------------------
// The optimizer ops of train_step and their scalar kernels.
// ---------------------------------------------------------------------------

TEST(OptimizerOps, ClipScheduleAdamW) {
  std::string error;
  auto both = compileBoth(R"mlir(module {
    func.func @step(%p0: tensor<37xf32>, %g0: tensor<37xf32>, %m0: tensor<37xf32>, %v0: tensor<37xf32>,
                    %p1: tensor<5x33xf32>, %g1: tensor<5x33xf32>, %m1: tensor<5x33xf32>, %v1: tensor<5x33xf32>,
                    %t: tensor<i64>, %peak: tensor<f32>, %warm: tensor<i64>, %total: tensor<i64>)
        -> (tensor<f32>, tensor<f32>, tensor<f32>,
            tensor<37xf32>, tensor<37xf32>, tensor<37xf32>,
            tensor<5x33xf32>, tensor<5x33xf32>, tensor<5x33xf32>) {
      %n = bt.global_norm %g0, %g1 : tensor<37xf32>, tensor<5x33xf32>
      %c = bt.clip_coefficient %n max_norm 1.000000e+00
      %lr = bt.lr_schedule %t, %peak, %warm, %total
      %a0, %b0, %c0 = bt.adamw %p0, %g0, %m0, %v0 lr %lr step %t clip %c beta1 9.000000e-01 beta2 9.500000e-01 eps 1.000000e-08 weight_decay 1.000000e-01 : tensor<37xf32>, tensor<37xf32>
      %a1, %b1, %c1 = bt.adamw %p1, %g1, %m1, %v1 lr %lr step %t clip %c beta1 9.000000e-01 beta2 9.990000e-01 eps 1.000000e-06 weight_decay 0.000000e+00 : tensor<5x33xf32>, tensor<5x33xf32>
      return %n, %c, %lr, %a0, %b0, %c0, %a1, %b1, %c1
          : tensor<f32>, tensor<f32>, tensor<f32>, tensor<37xf32>, tensor<37xf32>, tensor<37xf32>,
            tensor<5x33xf32>, tensor<5x33xf32>, tensor<5x33xf32>
    }
    func.func @schedule0(%t: tensor<i64>, %peak: tensor<f32>, %warm: tensor<i64>, %total: tensor<i64>) -> tensor<f32> {
      %lr = bt.lr_schedule %t, %peak, %warm, %total {initial_ratio = 0.0 : f64, cos_min_ratio = 0.2 : f64, warmup_min_ratio = 0.05 : f64}
      return %lr : tensor<f32>
    }
    func.func @norm1(%g: tensor<1xf32>) -> (tensor<f32>, tensor<f32>) {
      %n = bt.global_norm %g : tensor<1xf32>
      %c = bt.clip_coefficient %n max_norm 5.000000e-01 {eps = 0.0 : f64}
      return %n, %c : tensor<f32>, tensor<f32>
    }
  })mlir",
                          error);
  ASSERT_TRUE(both) << error;
  std::mt19937 rng(107);
  const std::vector<ResultSpec> stepResults = {{0}, {0}, {0}, {1}, {1}, {1},
                                               {2}, {2}, {2}};
  Array peak = Array::f32({}, {3e-3f});
  Array warm = Array::i64({}, {10}), total = Array::i64({}, {20});
  // (step, gradient scale, fresh moments): step 1 with m = v = 0 and the
  // clip active (‖g‖ ≈ 8 > 1); a warmup step with the clip inactive
  // (‖g‖ ≈ 0.08); a cosine step; a step past the total.
  struct Case {
    int64_t step;
    float gradScale;
    bool fresh;
  };
  for (Case c : {Case{1, 1.0f, true}, Case{5, 0.01f, false},
                 Case{15, 0.5f, false}, Case{40, 0.01f, false}}) {
    Array p0 = Array::random({37}, rng), p1 = Array::random({5, 33}, rng);
    Array g0 = Array::random({37}, rng, -c.gradScale, c.gradScale);
    Array g1 = Array::random({5, 33}, rng, -c.gradScale, c.gradScale);
    Array m0 = Array::random({37}, rng, -0.1f, 0.1f),
          m1 = Array::random({5, 33}, rng, -0.1f, 0.1f);
    Array v0 = Array::random({37}, rng, 0.0f, 0.01f),
          v1 = Array::random({5, 33}, rng, 0.0f, 0.01f);
    if (c.fresh)
      for (Array *a : {&m0, &m1, &v0, &v1})
        std::fill(a->f.begin(), a->f.end(), 0.0f);
    Array t = Array::i64({}, {c.step});
    expectSame(*both, "step",
               {&p0, &g0, &m0, &v0, &p1, &g1, &m1, &v1, &t, &peak, &warm, &total},
               stepResults, "step " + std::to_string(c.step));
    expectSame(*both, "schedule0", {&t, &peak, &warm, &total}, {{0}},
               "step " + std::to_string(c.step));
  }
  for (float g : {0.25f, -3.0f}) {
    Array a = Array::f32({1}, {g});
    expectSame(*both, "norm1", {&a}, {{0}, {0}}, "g = " + std::to_string(g));
  }
}

} // namespace
