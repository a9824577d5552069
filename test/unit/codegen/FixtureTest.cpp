//===- FixtureTest.cpp - a whole GPT-NeoX against the official fixture -----===//
//
// Writes the layer-level IR of HF GPTNeoXForCausalLM (the vanilla_tiny fixture
// of fixtures/official: 2 layers × 64, 2 heads of 32, rotary 8, vocab 512) by
// hand, compiles it with bt-cpu-pipeline + compileToSharedObject and compares
// logits and the shifted cross-entropy loss with the outputs of the official
// code (HF eager attention, fp32). Independent of bt-decompose: this checks
// the code generation of every layer-level op in a real model.
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

using namespace bt;
using namespace bt::test;

namespace {

std::string fixtureDir() { return std::string(BT_FIXTURES_DIR) + "/vanilla_tiny"; }

/// HF GPTNeoXForCausalLM.forward(input_ids, attention_mask, labels) as
/// layer-level bt IR; B and T are dynamic.
std::string vanillaModule(int64_t layers, int64_t d, int64_t heads,
                          int64_t inter, int64_t vocab, int64_t rotary) {
  int64_t hd = d / heads;
  double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::ostringstream m;
  auto param = [&](const std::string &name, const std::string &type) {
    m << "  bt.param @\"" << name << "\" : " << type << "\n";
  };
  std::string vec = "tensor<" + std::to_string(d) + "xf32>";
  param("gpt_neox.embed_in.weight", "tensor<" + std::to_string(vocab) + "x" + std::to_string(d) + "xf32>");
  for (int64_t l = 0; l < layers; ++l) {
    std::string p = "gpt_neox.layers." + std::to_string(l) + ".";
    param(p + "input_layernorm.weight", vec);
    param(p + "input_layernorm.bias", vec);
    param(p + "post_attention_layernorm.weight", vec);
    param(p + "post_attention_layernorm.bias", vec);
    param(p + "attention.query_key_value.weight", "tensor<" + std::to_string(3 * d) + "x" + std::to_string(d) + "xf32>");
    param(p + "attention.query_key_value.bias", "tensor<" + std::to_string(3 * d) + "xf32>");
    param(p + "attention.dense.weight", "tensor<" + std::to_string(d) + "x" + std::to_string(d) + "xf32>");
    param(p + "attention.dense.bias", vec);
    param(p + "mlp.dense_h_to_4h.weight", "tensor<" + std::to_string(inter) + "x" + std::to_string(d) + "xf32>");
    param(p + "mlp.dense_h_to_4h.bias", "tensor<" + std::to_string(inter) + "xf32>");
    param(p + "mlp.dense_4h_to_h.weight", "tensor<" + std::to_string(d) + "x" + std::to_string(inter) + "xf32>");
    param(p + "mlp.dense_4h_to_h.bias", vec);
  }
  param("gpt_neox.final_layer_norm.weight", vec);
  param("gpt_neox.final_layer_norm.bias", vec);
  param("embed_out.weight", "tensor<" + std::to_string(vocab) + "x" + std::to_string(d) + "xf32>");

  auto t = [&](std::initializer_list<int64_t> dims, const char *elt = "f32") {
    std::string s = "tensor<?x?";
    for (int64_t x : dims)
      s += "x" + std::to_string(x);
    return s + "x" + elt + ">";
  };
  std::string h = t({d}), qkvT = t({3 * d}), headT = t({heads, hd}),
              interT = t({inter}), logitsT = t({vocab});
  std::string ids = "tensor<?x?xi64>";
  int n = 0;
  auto v = [&] { return "%v" + std::to_string(n++); };
  auto ref = [&](const std::string &name, const std::string &type) {
    std::string r = v();
    m << "    " << r << " = bt.param_ref @\"" << name << "\" : " << type << "\n";
    return r;
  };

  m << "  func.func @eval_loss(%ids: " << ids << ", %mask: " << ids
    << ", %labels: " << ids << ") -> (" << logitsT << ", tensor<f32>) {\n";
  m << "    %c0 = arith.constant 0 : index\n    %c1 = arith.constant 1 : index\n";
  m << "    %b = tensor.dim %ids, %c0 : " << ids << "\n";
  m << "    %t = tensor.dim %ids, %c1 : " << ids << "\n";
  m << "    %pos = tensor.generate %t {\n    ^bb0(%i: index):\n"
    << "      %p = arith.index_cast %i : index to i64\n"
    << "      tensor.yield %p : i64\n    } : tensor<?xi64>\n";
  std::string emb = ref("gpt_neox.embed_in.weight", "tensor<" + std::to_string(vocab) + "x" + std::to_string(d) + "xf32>");
  std::string x = v();
  m << "    " << x << " = bt.embedding_lookup %ids, " << emb << " : " << ids
    << ", tensor<" << vocab << "x" << d << "xf32> -> " << h << "\n";
  auto ln = [&](const std::string &in, const std::string &prefix) {
    std::string w = ref(prefix + ".weight", vec), bb = ref(prefix + ".bias", vec);
    std::string r = v();
    m << "    " << r << " = bt.layer_norm " << in << ", " << w << ", " << bb
      << " eps 1.0e-05 : " << h << ", " << vec << ", " << vec << " -> " << h << "\n";
    return r;
  };
  auto linear = [&](const std::string &in, const std::string &inT,
                    const std::string &prefix, int64_t nOut, int64_t nIn,
                    const std::string &outT, bool bias = true) {
    std::string wT = "tensor<" + std::to_string(nOut) + "x" + std::to_string(nIn) + "xf32>";
    std::string bT = "tensor<" + std::to_string(nOut) + "xf32>";
    std::string w = ref(prefix + ".weight", wT);
    std::string bb = bias ? ref(prefix + ".bias", bT) : "";
    std::string r = v();
    m << "    " << r << " = bt.linear " << in << ", " << w << (bias ? ", " + bb : "")
      << " : " << inT << ", " << wT << (bias ? ", " + bT : "") << " -> " << outT << "\n";
    return r;
  };
  for (int64_t l = 0; l < layers; ++l) {
    std::string p = "gpt_neox.layers." + std::to_string(l) + ".";
    std::string ln1 = ln(x, p + "input_layernorm");
    std::string qkv = linear(ln1, h, p + "attention.query_key_value", 3 * d, d, qkvT);
    std::string q = v(), k = v(), val = v();
    m << "    " << q << ", " << k << ", " << val << " = bt.split_qkv " << qkv
      << " heads " << heads << " head_dim " << hd << " : " << qkvT << " -> "
      << headT << ", " << headT << ", " << headT << "\n";
    std::string qr = v(), kr = v();
    m << "    " << qr << " = bt.rotary " << q << ", %pos rotary_dims " << rotary
      << " base 10000.0 : " << headT << ", tensor<?xi64> -> " << headT << "\n";
    m << "    " << kr << " = bt.rotary " << k << ", %pos rotary_dims " << rotary
      << " base 10000.0 : " << headT << ", tensor<?xi64> -> " << headT << "\n";
    std::string a = v();
    char scaleStr[64];
    std::snprintf(scaleStr, sizeof(scaleStr), "%.17g", scale);
    m << "    " << a << " = bt.attention " << qr << ", " << kr << ", " << val
      << " key_mask %mask scale " << scaleStr << " : " << headT << ", " << ids
      << " -> " << headT << "\n";
    std::string af = v();
    m << "    " << af << " = tensor.collapse_shape " << a
      << " [[0], [1], [2, 3]] : " << headT << " into " << h << "\n";
    std::string attn = linear(af, h, p + "attention.dense", d, d, h);
    std::string ln2 = ln(x, p + "post_attention_layernorm");
    std::string up = linear(ln2, h, p + "mlp.dense_h_to_4h", inter, d, interT);
    std::string g = v();
    m << "    " << g << " = bt.gelu " << up << " : " << interT << "\n";
    std::string down = linear(g, interT, p + "mlp.dense_4h_to_h", d, inter, h);
    // HF: hidden = mlp_output + attn_output + hidden.
    std::string s1 = v(), s2 = v();
    m << "    " << s1 << " = arith.addf " << down << ", " << attn << " : " << h << "\n";
    m << "    " << s2 << " = arith.addf " << s1 << ", " << x << " : " << h << "\n";
    x = s2;
  }
  std::string fin = ln(x, "gpt_neox.final_layer_norm");
  std::string logits = linear(fin, h, "embed_out", vocab, d, logitsT, /*bias=*/false);
  // Shifted loss: logits[:, :-1] against labels[:, 1:].
  m << "    %t1 = arith.subi %t, %c1 : index\n";
  m << "    %sl = tensor.extract_slice " << logits << "[0, 0, 0] [%b, %t1, " << vocab
    << "] [1, 1, 1] : " << logitsT << " to " << logitsT << "\n";
  m << "    %sy = tensor.extract_slice %labels[0, 1] [%b, %t1] [1, 1] : " << ids
    << " to " << ids << "\n";
  m << "    %loss = bt.cross_entropy %sl, %sy : " << logitsT << ", " << ids
    << " -> tensor<f32>\n";
  m << "    return " << logits << ", %loss : " << logitsT << ", tensor<f32>\n  }\n";
  return "module {\n" + m.str() + "}\n";
}

const Array *find(const std::vector<std::pair<std::string, Array>> &v,
                  const std::string &name) {
  for (const auto &[k, a] : v)
    if (k == name)
      return &a;
  return nullptr;
}

class VanillaFixture : public ::testing::TestWithParam<bool> {};

TEST_P(VanillaFixture, LogitsAndLossMatchOfficial) {
  std::vector<std::pair<std::string, Array>> weights, inputs, outputs;
  std::string error;
  if (!std::ifstream(fixtureDir() + "/model.safetensors"))
    GTEST_SKIP() << "fixture not found: " << fixtureDir();
  ASSERT_TRUE(loadSafetensors(fixtureDir() + "/model.safetensors", weights, error)) << error;
  ASSERT_TRUE(loadSafetensors(fixtureDir() + "/inputs.safetensors", inputs, error)) << error;
  ASSERT_TRUE(loadSafetensors(fixtureDir() + "/outputs.safetensors", outputs, error)) << error;

  CPUPipelineOptions options;
  options.blas = GetParam();
  auto k = Kernels::compile(vanillaModule(2, 64, 2, 256, 512, 8), options, error);
  ASSERT_TRUE(k) << error;

  // Weights in bt.params order, then the inputs.
  std::vector<const Array *> args;
  std::vector<std::string> order = k->params("eval_loss");
  ASSERT_EQ(order.size(), 1u + 2 * 12 + 2 + 1); // embed_in, layers, final LN, embed_out
  for (const std::string &name : order) {
    const Array *w = find(weights, name);
    ASSERT_TRUE(w) << "no weight " << name;
    args.push_back(w);
  }
  for (const char *name : {"input_ids", "attention_mask", "labels"}) {
    const Array *a = find(inputs, name);
    ASSERT_TRUE(a) << name;
    args.push_back(a);
  }
  auto res = k->call("eval_loss", args, {{3}, {0}});
  ASSERT_EQ(res.size(), 2u);
  const Array *logits = find(outputs, "logits");
  const Array *loss = find(outputs, "loss");
  ASSERT_TRUE(logits && loss);
  EXPECT_EQ(res[0].value.shape, logits->shape);
  // The fixture README: run-to-run noise of the official code ≤ 6e-7.
  std::string msg = compareClose(
      res[0].value.f, std::vector<double>(logits->f.begin(), logits->f.end()),
      /*rtol=*/1e-5, /*atol=*/2e-6);
  EXPECT_TRUE(msg.empty()) << msg;
  double maxDiff = 0;
  for (size_t i = 0; i < logits->f.size(); ++i)
    maxDiff = std::max(maxDiff, std::fabs(static_cast<double>(res[0].value.f[i]) - logits->f[i]));
  char diffStr[32];
  std::snprintf(diffStr, sizeof(diffStr), "%.3g", maxDiff);
  RecordProperty("max_abs_logit_diff", diffStr);
  EXPECT_NEAR(res[1].value.f[0], loss->f[0], 2e-6);
}

INSTANTIATE_TEST_SUITE_P(Codegen, VanillaFixture, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return std::string(info.param ? "blas" : "loops");
                         });

} // namespace

namespace {

/// Throughput of a pythia-410m-sized layer stack (run by hand:
/// --gtest_also_run_disabled_tests --gtest_filter='*Bench*').
TEST(CodegenBench, DISABLED_NeoXLayers) {
  const int64_t layers = 2, d = 1024, heads = 16, inter = 4096, vocab = 512,
                b = 4, t = 512;
  CPUPipelineOptions options;
  std::string error;
  auto start = std::chrono::steady_clock::now();
  std::string src = vanillaModule(layers, d, heads, inter, vocab, 16);
  if (const char *dump = std::getenv("BT_BENCH_DUMP"))
    std::ofstream(dump) << src;
  auto k = Kernels::compile(src, options, error);
  ASSERT_TRUE(k) << error;
  double compileS = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::mt19937 rng(7);
  std::vector<Array> weights;
  std::vector<std::string> order = k->params("eval_loss");
  weights.reserve(order.size());
  for (const std::string &name : order) {
    std::vector<int64_t> shape;
    if (name.find("embed") != std::string::npos)
      shape = {vocab, d};
    else if (name.find("query_key_value.weight") != std::string::npos)
      shape = {3 * d, d};
    else if (name.find("query_key_value.bias") != std::string::npos)
      shape = {3 * d};
    else if (name.find("dense.weight") != std::string::npos)
      shape = {d, d};
    else if (name.find("h_to_4h.weight") != std::string::npos)
      shape = {inter, d};
    else if (name.find("h_to_4h.bias") != std::string::npos)
      shape = {inter};
    else if (name.find("4h_to_h.weight") != std::string::npos)
      shape = {d, inter};
    else
      shape = {d};
    weights.push_back(Array::random(shape, rng, -0.02f, 0.02f));
  }
  std::vector<int64_t> idv(b * t), maskv(b * t, 1);
  for (auto &x : idv)
    x = rng() % vocab;
  Array ids = Array::i64({b, t}, idv), mask = Array::i64({b, t}, maskv);
  std::vector<const Array *> args;
  for (const Array &w : weights)
    args.push_back(&w);
  args.push_back(&ids);
  args.push_back(&mask);
  args.push_back(&ids);
  k->call("eval_loss", args, {{3}, {0}}); // warm-up
  const int reps = 3;
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i)
    k->call("eval_loss", args, {{3}, {0}});
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
  double gflop = layers * (24.0 * b * t * d * d + 4.0 * b * heads * t * t * (d / heads)) / 1e9;
  std::printf("compile %.2f s; forward %.3f s for %lld tokens: %.0f tok/s, %.1f GFLOP/s\n",
              compileS, s, static_cast<long long>(b * t), b * t / s, gflop / s);
}

} // namespace

namespace {

/// The token decoder's local attention of block_main_b4_85 (12 heads of 64,
/// rotary 16, S = P + L_B - 1 = 5) over B·N_blk = 1024 blocks: the fused kernel
/// against the unfused chain (run by hand: --gtest_also_run_disabled_tests
/// --gtest_filter='*Bench*').
TEST(CodegenBench, DISABLED_FusedLocalAttention) {
  const int64_t b = 8, n = 128, s = 5, h = 12, hd = 64;
  std::string t = "tensor<" + std::to_string(b) + "x" + std::to_string(n) + "x5x12x64xf32>";
  std::string qkvT = "tensor<" + std::to_string(b) + "x" + std::to_string(n) + "x5x2304xf32>";
  std::string src =
      "func.func @attn(%qkv: " + qkvT + ", %p: tensor<5xi64>) -> " + t + " {\n"
      "  %q, %k, %v = bt.split_qkv %qkv heads 12 head_dim 64 : " + qkvT + " -> " + t + ", " + t + ", " + t + "\n"
      "  %qr = bt.rotary %q, %p rotary_dims 16 base 10000.0 : " + t + ", tensor<5xi64> -> " + t + "\n"
      "  %kr = bt.rotary %k, %p rotary_dims 16 base 10000.0 : " + t + ", tensor<5xi64> -> " + t + "\n"
      "  %o = bt.local_attention %qr, %kr, %v scale 0.125 : " + t + " -> " + t + "\n"
      "  return %o : " + t + "\n}\n";
  std::mt19937 rng(7);
  Array qkv = Array::random({b, n, s, 3 * h * hd}, rng);
  Array p = Array::i64({5}, {0, 1, 2, 3, 4});
  std::vector<float> results[2];
  for (bool fused : {false, true}) {
    CPUPipelineOptions options;
    options.fuseLocalAttention = fused;
    std::string error;
    auto k = Kernels::compile(src, options, error);
    ASSERT_TRUE(k) << error;
    results[fused] = k->call("attn", {&qkv, &p}, {{5}})[0].value.f; // warm-up
    const int reps = 20;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i)
      k->call("attn", {&qkv, &p}, {{5}});
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
    std::printf("%s: %.2f ms per call (%lld blocks x %lld heads)\n",
                fused ? "fused kernel " : "unfused chain", sec * 1e3,
                static_cast<long long>(b * n), static_cast<long long>(h));
  }
  double maxDiff = 0;
  for (size_t i = 0; i < results[0].size(); ++i)
    maxDiff = std::max(maxDiff, std::fabs(static_cast<double>(results[0][i]) - results[1][i]));
  std::printf("max|fused - unfused| = %.3g\n", maxDiff);
  EXPECT_LE(maxDiff, 1e-5);
}

} // namespace
