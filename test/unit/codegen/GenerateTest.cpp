//===- GenerateTest.cpp - generation entry points against the fixtures ----===//
//
// Imports the official fixtures (test/fixtures/official), derives the
// generation entry points (bt-generate-entry-points), lowers them
// (bt-decompose, bt-cpu-pipeline), loads the kernel library and runs greedy
// generation through the kernel ABI exactly as the runtime does
// (docs/generation.md): prefill → decode_tokens → decode_block →
// decode_tokens ... with the KV cache as in-out buffers owned here, and the
// sampler callback `_mlir_ciface_bt_rt_sample` defined in this binary
// (argmax, lowest id on ties). The generated tokens and step logits are
// compared with the fixtures' generate.safetensors:
//
// - block models, training positions: `trainpos.*`;
// - block models, the official generate's token-decoder positions
//   `[0]*P, 1, 2, ...`: `official.*`;
// - vanilla GPT-NeoX with HF positions cumsum(mask) - 1 (pads at 1):
//   `official.*`.
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"

#include "bt/Codegen/CPU/CPUCodegen.h"
#include "bt/Import/Import.h"
#include "bt/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

using namespace bt;
using namespace bt::test;

//===----------------------------------------------------------------------===//
// The sampler callback (docs/generation.md, "Sampling"), resolved by the
// kernel library against this executable.
//===----------------------------------------------------------------------===//

namespace {

template <typename T, int N>
struct MemRef {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[N];
  int64_t strides[N];
};

/// The test sampler's state, passed to decode_tokens as the opaque handle.
struct GreedySampler {
  int64_t calls = 0;
  int64_t rowsSeen = 0;
};

} // namespace

extern "C" __attribute__((visibility("default"))) void
_mlir_ciface_bt_rt_sample(int64_t sampler, MemRef<float, 2> *logits,
                          MemRef<int64_t, 1> *tokens) {
  auto *state = reinterpret_cast<GreedySampler *>(sampler);
  ++state->calls;
  int64_t rows = logits->sizes[0], vocab = logits->sizes[1];
  state->rowsSeen += rows;
  for (int64_t b = 0; b < rows; ++b) {
    const float *row =
        logits->aligned + logits->offset + b * logits->strides[0];
    int64_t best = 0;
    for (int64_t v = 1; v < vocab; ++v)
      if (row[v * logits->strides[1]] > row[best * logits->strides[1]])
        best = v; // strict: the lowest id wins ties (torch.argmax)
    tokens->aligned[tokens->offset + b * tokens->strides[0]] = best;
  }
}

namespace {

std::string fixtureDir(const std::string &name) {
  return std::string(BT_FIXTURES_DIR) + "/" + name;
}

using Tensors = std::vector<std::pair<std::string, Array>>;

const Array *find(const Tensors &v, const std::string &name) {
  for (const auto &[k, a] : v)
    if (k == name)
      return &a;
  return nullptr;
}

/// A stack of the fixture's config.json (HF field names).
StackSpec stackSpec(const llvm::json::Object &o) {
  StackSpec s;
  s.hidden = *o.getInteger("hidden_size");
  s.layers = *o.getInteger("num_hidden_layers");
  s.heads = *o.getInteger("num_attention_heads");
  s.headDim = o.getInteger("head_dim") ? *o.getInteger("head_dim")
                                       : s.hidden / s.heads;
  s.intermediate = *o.getInteger("intermediate_size");
  if (auto r = o.getInteger("rotary_ndims"))
    s.rotaryDims = *r;
  else
    s.rotaryDims = static_cast<int64_t>(s.headDim * *o.getNumber("rotary_pct"));
  if (auto b = o.getNumber("rotary_emb_base"))
    s.rotaryBase = *b;
  if (auto e = o.getNumber("layer_norm_eps"))
    s.eps = *e;
  return s;
}

/// The ModelSpec of a fixture's resolved config.json.
bool readSpec(const std::string &dir, ModelSpec &spec, std::string &error) {
  auto buf = llvm::MemoryBuffer::getFile(dir + "/config.json");
  if (!buf) {
    error = "cannot read " + dir + "/config.json";
    return false;
  }
  llvm::Expected<llvm::json::Value> json = llvm::json::parse((*buf)->getBuffer());
  if (!json) {
    error = llvm::toString(json.takeError());
    return false;
  }
  const llvm::json::Object &c = *json->getAsObject();
  spec.name = c.getString("case")->str();
  if (*c.getString("model_type") == "block_transformer") {
    spec.kind = ModelSpec::Kind::BlockTransformer;
    spec.vocab = *c.getInteger("vocab_size");
    spec.blockLength = *c.getInteger("block_length");
    spec.embedderWidth = *c.getObject("embedder")->getInteger("hidden_size");
    spec.block = stackSpec(*c.getObject("block_decoder"));
    const llvm::json::Object &td = *c.getObject("token_decoder");
    spec.token = stackSpec(td);
    spec.strategy = *td.getString("decoding_strategy") == "summation"
                        ? ModelSpec::Strategy::Summation
                        : ModelSpec::Strategy::Prefix;
    // Summation: no prefix (prefix_length 0); the expansion slots
    // (expansion_ratio, default L_B) are added to the token embeddings.
    spec.prefixLength = spec.strategy == ModelSpec::Strategy::Summation
                            ? td.getInteger("expansion_ratio").value_or(spec.blockLength)
                            : *td.getInteger("prefix_length");
    spec.projectionLayer =
        c.getObject("embedder")->getString("projection_method").value_or("concat") ==
        "projection_layer";
    spec.padTokenId = *c.getInteger("pad_token_id");
    spec.eosTokenId = *c.getInteger("eos_token_id");
    spec.bosTokenId = *c.getInteger("token_decoder_bos_placeholder_id");
  } else {
    spec.kind = ModelSpec::Kind::Vanilla;
    const llvm::json::Object &hf = *c.getObject("hf_config");
    spec.vocab = *hf.getInteger("vocab_size");
    spec.blockLength = 1;
    spec.block = stackSpec(hf);
    spec.embedderWidth = spec.block.hidden;
  }
  return true;
}

/// A compiled model: its spec, weights and kernels (with the generation
/// entry points).
struct Compiled {
  ModelSpec spec;
  Tensors weights;
  std::unique_ptr<Kernels> kernels;

  /// Calls `entry` with its weights (bt.params order) and `inputs`.
  std::vector<Result> call(const std::string &entry,
                           const std::vector<const Array *> &inputs,
                           const std::vector<ResultSpec> &results) const {
    std::vector<const Array *> args;
    for (const std::string &name : kernels->params(entry)) {
      const Array *w = find(weights, name);
      EXPECT_TRUE(w) << "no weight " << name;
      if (!w)
        return {};
      args.push_back(w);
    }
    args.insert(args.end(), inputs.begin(), inputs.end());
    return kernels->call(entry, args, results);
  }
};

/// import → bt-generate-entry-points → bt-decompose → bt-cpu-pipeline.
std::unique_ptr<Compiled> compileFixture(const std::string &name,
                                         std::string &error) {
  auto c = std::make_unique<Compiled>();
  std::string dir = fixtureDir(name);
  if (!readSpec(dir, c->spec, error) ||
      !loadSafetensors(dir + "/model.safetensors", c->weights, error))
    return nullptr;
  mlir::DialectRegistry registry;
  registerCPUCodegenDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module = importModel(&ctx, c->spec);
  if (!module) {
    error = "import failed";
    return nullptr;
  }
  mlir::PassManager pm(&ctx);
  pm.addPass(createBTGenerateEntryPoints());
  pm.addPass(createBTVerifyKVLifetimes());
  pm.addPass(createBTDecompose());
  pm.addPass(createBTVerifyKVLifetimes());
  if (mlir::failed(pm.run(*module))) {
    error = "bt-generate-entry-points / bt-decompose failed";
    return nullptr;
  }
  CPUPipelineOptions options;
  c->kernels = Kernels::compileModule(*module, options, error);
  if (!c->kernels)
    return nullptr;
  return c;
}

/// Compiled fixtures, shared by the tests (compiling takes a few seconds).
Compiled *getCompiled(const std::string &name) {
  static std::map<std::string, std::unique_ptr<Compiled>> cache;
  auto it = cache.find(name);
  if (it != cache.end())
    return it->second.get();
  std::string error;
  std::unique_ptr<Compiled> c = compileFixture(name, error);
  EXPECT_TRUE(c) << error;
  Compiled *raw = c.get();
  cache[name] = std::move(c);
  return raw;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

double maxAbsDiff(const std::vector<float> &a, const std::vector<float> &b) {
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return a.size() == b.size() ? m : INFINITY;
}

/// The runtime's buffers of a global cache: storage [B, Ly, 2, H, C, hd],
/// flags [B, C], fill length.
struct GlobalCache {
  Array kv, valid, length;
  GlobalCache(int64_t b, const StackSpec &s, int64_t capacity) {
    kv = Array::f32({b, s.layers, 2, s.heads, capacity, s.headDim},
                    std::vector<float>(b * s.layers * 2 * s.heads * capacity *
                                       s.headDim));
    valid = Array::i64({b, capacity}, std::vector<int64_t>(b * capacity));
    length = Array::i64({}, {0});
  }
};

struct Generated {
  std::vector<int64_t> tokens; // [B, steps]
  std::vector<float> logits;   // [steps, B, V]
};

/// Block Transformer greedy generation of `steps` tokens (the loop of
/// docs/generation.md), with token-decoder positions `positions`.
Generated generateBlock(const Compiled &c, const Array &promptIds,
                        const Array &promptMask, int64_t steps,
                        const std::vector<int64_t> &positions,
                        GreedySampler &sampler) {
  const ModelSpec &s = c.spec;
  int64_t b = promptIds.shape[0], t = promptIds.shape[1];
  int64_t lb = s.blockLength, v = s.vocab;
  // Left-pad to a block boundary (official preprocess_inputs_for_generation).
  int64_t pad = (lb - t % lb) % lb, n = (t + pad) / lb;
  std::vector<int64_t> ids(b * n * lb, s.padTokenId), blockMask(b * n, 0);
  for (int64_t r = 0; r < b; ++r)
    for (int64_t i = 0; i < t; ++i) {
      ids[r * n * lb + pad + i] = promptIds.i[r * t + i];
      if (promptMask.i[r * t + i])
        blockMask[r * n + (pad + i) / lb] = 1;
    }
  int64_t newBlocks = (steps + lb - 1) / lb;
  GlobalCache cache(b, s.block, n + newBlocks);
  Array inputIds = Array::i64({b, n, lb}, ids);
  Array mask = Array::i64({b, n}, blockMask);
  std::vector<Result> r = c.call(
      "prefill", {&inputIds, &mask, &cache.kv, &cache.valid, &cache.length},
      {{2}});
  EXPECT_EQ(r.size(), 1u);
  if (r.empty())
    return {};
  Array context = r[0].value;
  cache.length.i[0] = n;

  Array pos = Array::i64({static_cast<int64_t>(positions.size())}, positions);
  Array handle = Array::i64({}, {reinterpret_cast<int64_t>(&sampler)});
  Generated g;
  std::vector<std::vector<int64_t>> rows(b);
  std::vector<std::vector<float>> stepLogits;
  while (static_cast<int64_t>(stepLogits.size()) < steps) {
    std::vector<Result> out = c.call("decode_tokens", {&context, &pos, &handle},
                                     {{2, DType::I64}, {3}});
    EXPECT_EQ(out.size(), 2u);
    if (out.size() != 2)
      return {};
    const Array &tokens = out[0].value, &logits = out[1].value;
    EXPECT_EQ(tokens.shape, (std::vector<int64_t>{b, lb}));
    EXPECT_EQ(logits.shape, (std::vector<int64_t>{b, lb, v}));
    for (int64_t k = 0; k < lb && static_cast<int64_t>(stepLogits.size()) < steps;
         ++k) {
      std::vector<float> step(b * v);
      for (int64_t r2 = 0; r2 < b; ++r2) {
        rows[r2].push_back(tokens.i[r2 * lb + k]);
        std::copy_n(logits.f.begin() + (r2 * lb + k) * v, v,
                    step.begin() + r2 * v);
      }
      stepLogits.push_back(std::move(step));
    }
    if (static_cast<int64_t>(stepLogits.size()) >= steps)
      break;
    Array next = Array::i64({b, 1, lb}, tokens.i);
    std::vector<Result> ctx = c.call(
        "decode_block", {&next, &cache.kv, &cache.valid, &cache.length}, {{2}});
    EXPECT_EQ(ctx.size(), 1u);
    if (ctx.empty())
      return {};
    context = ctx[0].value;
    cache.length.i[0] += 1;
  }
  for (auto &row : rows)
    g.tokens.insert(g.tokens.end(), row.begin(), row.end());
  for (auto &step : stepLogits)
    g.logits.insert(g.logits.end(), step.begin(), step.end());
  return g;
}

class BlockGenerate : public ::testing::TestWithParam<std::string> {};

TEST_P(BlockGenerate, MatchesFixture) {
  std::string dir = fixtureDir(GetParam());
  if (!std::ifstream(dir + "/generate.safetensors"))
    GTEST_SKIP() << "fixture not found: " << dir;
  Compiled *c = getCompiled(GetParam());
  ASSERT_TRUE(c);
  Tensors g;
  std::string error;
  ASSERT_TRUE(loadSafetensors(dir + "/generate.safetensors", g, error)) << error;
  const Array *ids = find(g, "prompt.input_ids");
  const Array *mask = find(g, "prompt.attention_mask");
  ASSERT_TRUE(ids && mask);
  int64_t p = c->spec.prefixLength, lb = c->spec.blockLength;

  struct Mode {
    const char *name;
    std::vector<int64_t> positions;
  };
  std::vector<int64_t> train, official(p, 0);
  for (int64_t i = 0; i < p + lb - 1; ++i)
    train.push_back(i);
  for (int64_t k = 1; k < lb; ++k)
    official.push_back(k);
  for (const Mode &mode : {Mode{"trainpos", train}, Mode{"official", official}}) {
    SCOPED_TRACE(mode.name);
    const Array *tokens = find(g, std::string(mode.name) + ".new_tokens");
    const Array *logits = find(g, std::string(mode.name) + ".step_logits");
    ASSERT_TRUE(tokens && logits);
    int64_t steps = tokens->shape[1];
    GreedySampler sampler;
    Generated out = generateBlock(*c, *ids, *mask, steps, mode.positions,
                                  sampler);
    EXPECT_EQ(out.tokens, tokens->i);
    double diff = maxAbsDiff(out.logits, logits->f);
    EXPECT_LE(diff, 1e-4) << "max |step_logits - fixture|";
    RecordProperty(std::string(mode.name) + "_max_abs_step_logit_diff",
                   fmt(diff));
    // One sampler call per token-decoder step, for all rows at once.
    EXPECT_EQ(sampler.calls, ((steps + lb - 1) / lb) * lb);
    EXPECT_EQ(sampler.rowsSeen, sampler.calls * ids->shape[0]);
  }
}

INSTANTIATE_TEST_SUITE_P(Codegen, BlockGenerate,
                         ::testing::Values("block_tiny", "block_tiny_b8"));

/// Vanilla GPT-NeoX: HF greedy generation with positions cumsum(mask) - 1
/// (pads at 1). Token 0 is the argmax of prefill's logits (taken here);
/// each decode_step computes its position from the cache length and the
/// row's left padding, and samples its token through the callback.
TEST(VanillaGenerate, MatchesFixture) {
  std::string dir = fixtureDir("vanilla_tiny");
  if (!std::ifstream(dir + "/generate.safetensors"))
    GTEST_SKIP() << "fixture not found: " << dir;
  Compiled *c = getCompiled("vanilla_tiny");
  ASSERT_TRUE(c);
  Tensors g;
  std::string error;
  ASSERT_TRUE(loadSafetensors(dir + "/generate.safetensors", g, error)) << error;
  const Array *ids = find(g, "prompt.input_ids");
  const Array *mask = find(g, "prompt.attention_mask");
  const Array *tokens = find(g, "official.new_tokens");
  const Array *logits = find(g, "official.step_logits");
  ASSERT_TRUE(ids && mask && tokens && logits);
  int64_t b = ids->shape[0], t = ids->shape[1], v = c->spec.vocab;
  int64_t steps = tokens->shape[1];

  std::vector<int64_t> pos(b * t), padding(b);
  for (int64_t r = 0; r < b; ++r) {
    int64_t sum = 0;
    for (int64_t i = 0; i < t; ++i) {
      sum += mask->i[r * t + i];
      pos[r * t + i] = mask->i[r * t + i] ? sum - 1 : 1;
    }
    padding[r] = t - sum;
  }
  GlobalCache cache(b, c->spec.block, t + steps);
  Array positions = Array::i64({b, t}, pos);
  std::vector<Result> r =
      c->call("prefill", {ids, mask, &positions, &cache.kv, &cache.valid,
                          &cache.length},
              {{2}});
  ASSERT_EQ(r.size(), 1u);
  cache.length.i[0] = t;
  std::vector<int64_t> generated(b * steps);
  std::vector<float> stepLogits;
  Array step = r[0].value;
  std::vector<int64_t> next(b);
  for (int64_t row = 0; row < b; ++row) {
    const float *l = step.f.data() + row * v;
    next[row] = std::max_element(l, l + v) - l;
  }
  Array leftPadding = Array::i64({b, 1}, padding);
  GreedySampler sampler;
  Array handle = Array::i64({}, {reinterpret_cast<int64_t>(&sampler)});
  for (int64_t k = 0; k < steps; ++k) {
    ASSERT_EQ(step.shape, (std::vector<int64_t>{b, v}));
    stepLogits.insert(stepLogits.end(), step.f.begin(), step.f.end());
    for (int64_t row = 0; row < b; ++row)
      generated[row * steps + k] = next[row];
    if (k + 1 == steps)
      break;
    Array nextIds = Array::i64({b, 1}, next);
    std::vector<Result> o = c->call(
        "decode_step",
        {&nextIds, &leftPadding, &handle, &cache.kv, &cache.valid,
         &cache.length},
        {{2, DType::I64}, {2}});
    ASSERT_EQ(o.size(), 2u);
    cache.length.i[0] += 1;
    ASSERT_EQ(o[0].value.shape, (std::vector<int64_t>{b, 1}));
    next = o[0].value.i;
    step = o[1].value;
  }
  // One sampler call per decode_step, for all rows at once.
  EXPECT_EQ(sampler.calls, steps - 1);
  EXPECT_EQ(sampler.rowsSeen, (steps - 1) * b);
  EXPECT_EQ(generated, tokens->i);
  double diff = maxAbsDiff(stepLogits, logits->f);
  EXPECT_LE(diff, 1e-4) << "max |step_logits - fixture|";
  RecordProperty("max_abs_step_logit_diff", fmt(diff));
}

} // namespace
