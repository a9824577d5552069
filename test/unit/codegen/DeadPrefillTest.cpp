//===- DeadPrefillTest.cpp - bt-eliminate-dead-prefill keeps the numbers ---===//
//
// A naive prefill of the official block_tiny fixture model (the token decoder
// over every prompt block, the logits of some blocks used) compiled three
// ways: as is (bt-decompose), narrowed at layer level (bt-decompose then
// bt-eliminate-dead-prefill) and narrowed at model level
// (bt-eliminate-dead-prefill then bt-decompose). All three run the real
// weights and inputs of the fixture through the generated CPU code and must
// give the same logits: the pass only removes work whose results are unused.
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"

#include "bt/Codegen/CPU/CPUCodegen.h"
#include "bt/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

using namespace bt;
using namespace bt::test;

namespace {

std::string fixtureDir() { return std::string(BT_FIXTURES_DIR) + "/block_tiny"; }

const Array *find(const std::vector<std::pair<std::string, Array>> &v,
                  const std::string &name) {
  for (const auto &[k, a] : v)
    if (k == name)
      return &a;
  return nullptr;
}

std::string tensorType(const std::vector<int64_t> &shape, const char *elt) {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + elt + ">";
}

/// Model-level naive prefill of block_tiny (L_B 4, P 2, D = T = 64, 2 + 2
/// layers, V 512) over `B x N` blocks: the context of every block decodes
/// that block's ids with the token decoder; @last returns the logits of the
/// last block, @two_blocks those of blocks 1 and N-2 of sequence 1.
std::string prefillModule(const std::vector<std::pair<std::string, Array>> &weights,
                          int64_t b, int64_t n) {
  std::ostringstream m;
  m << "#neox = #bt.neox<hidden = 64, layers = 2, heads = 2, head_dim = 32, "
       "intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = "
       "1.0e-05>\nmodule {\n";
  for (const auto &[name, w] : weights)
    m << "  bt.param @\"" << name << "\" : " << tensorType(w.shape, "f32")
      << "\n";
  std::string ids = tensorType({b, n, 4}, "i64"), bm = tensorType({b, n}, "i64");
  std::string ctx = tensorType({b, n, 64}, "f32");
  std::string hid = tensorType({b, n, 4, 64}, "f32");
  std::string logits = tensorType({b, n, 4, 512}, "f32");
  auto body = [&](const std::string &name, const std::string &results,
                  const std::string &tail) {
    m << "  func.func @" << name << "(%ids: " << ids << ", %mask: " << ids
      << ", %bmask: " << bm << ") -> " << results << " {\n"
      << "    %e = bt.embedder %ids table @\"embedder.embeddings.weight\" : "
      << ids << " -> " << ctx << "\n"
      << "    %c = bt.block_decoder %e mask %bmask config #neox params "
         "\"block_decoder.gpt_neox\" : "
      << ctx << ", " << bm << " -> " << ctx << "\n"
      << "    %h = bt.token_decoder %c, %ids mask %mask params \"token_decoder\" "
         "config #neox strategy prefix prefix_length 2 : "
      << ctx << ", " << ids << ", " << ids << " -> " << hid << "\n"
      << "    %l = bt.lm_head %h weight @\"token_decoder.embed_out.weight\" : "
      << hid << " -> " << logits << "\n"
      << tail << "  }\n";
  };
  std::string last = tensorType({b, 1, 4, 512}, "f32");
  body("last", last,
       "    %s = tensor.extract_slice %l[0, " + std::to_string(n - 1) +
           ", 0, 0] [" + std::to_string(b) + ", 1, 4, 512] [1, 1, 1, 1] : " +
           logits + " to " + last + "\n    return %s : " + last + "\n");
  std::string one = tensorType({4, 512}, "f32");
  body("two_blocks", "(" + one + ", " + one + ")",
       "    %s0 = tensor.extract_slice %l[1, 1, 0, 0] [1, 1, 4, 512] [1, 1, 1, 1] : " +
           logits + " to " + one + "\n    %s1 = tensor.extract_slice %l[1, " +
           std::to_string(n - 2) + ", 0, 0] [1, 1, 4, 512] [1, 1, 1, 1] : " +
           logits + " to " + one + "\n    return %s0, %s1 : " + one + ", " +
           one + "\n");
  m << "}\n";
  return m.str();
}

/// Runs `passes` (bt-decompose, bt-eliminate-dead-prefill in the given
/// order) on `source` and prints the result.
std::string transform(const std::string &source,
                      const std::vector<std::string> &passes,
                      std::string &error) {
  mlir::DialectRegistry registry;
  registerCPUCodegenDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, &ctx);
  if (!module) {
    error = "parse error";
    return "";
  }
  mlir::PassManager pm(&ctx);
  for (const std::string &p : passes)
    pm.addPass(p == "decompose" ? createBTDecompose()
                                : createBTEliminateDeadPrefill());
  if (mlir::failed(pm.run(*module))) {
    error = "pass failure";
    return "";
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  module->print(os);
  return out;
}

TEST(DeadPrefill, NarrowedPrefillMatchesNaive) {
  std::vector<std::pair<std::string, Array>> weights, inputs;
  std::string error;
  if (!std::ifstream(fixtureDir() + "/model.safetensors"))
    GTEST_SKIP() << "fixture not found: " << fixtureDir();
  ASSERT_TRUE(loadSafetensors(fixtureDir() + "/model.safetensors", weights, error)) << error;
  ASSERT_TRUE(loadSafetensors(fixtureDir() + "/inputs.safetensors", inputs, error)) << error;
  const Array *ids = find(inputs, "input_ids");
  const Array *mask = find(inputs, "attention_mask");
  const Array *bmask = find(inputs, "block_attention_mask");
  ASSERT_TRUE(ids && mask && bmask);
  ASSERT_EQ(ids->shape, (std::vector<int64_t>{2, 6, 4}));

  std::string source = prefillModule(weights, 2, 6);
  std::vector<std::vector<std::string>> variants = {
      {"decompose"}, {"decompose", "eliminate"}, {"eliminate", "decompose"}};
  std::vector<std::vector<std::vector<float>>> results;
  for (const auto &passes : variants) {
    SCOPED_TRACE(passes.front() + (passes.size() > 1 ? "+" + passes[1] : ""));
    std::string layer = transform(source, passes, error);
    ASSERT_FALSE(layer.empty()) << error;
    auto k = Kernels::compile(layer, CPUPipelineOptions(), error);
    ASSERT_TRUE(k) << error;
    std::vector<std::vector<float>> outs;
    for (const char *fn : {"last", "two_blocks"}) {
      std::vector<const Array *> args;
      for (const std::string &name : k->params(fn)) {
        const Array *w = find(weights, name);
        ASSERT_TRUE(w) << "no weight " << name;
        args.push_back(w);
      }
      args.push_back(ids);
      args.push_back(mask);
      args.push_back(bmask);
      bool two = std::string(fn) == "two_blocks";
      auto res = k->call(fn, args,
                         two ? std::vector<ResultSpec>{{2}, {2}}
                             : std::vector<ResultSpec>{{4}});
      for (const Result &r : res)
        outs.push_back(r.value.f);
    }
    results.push_back(outs);
  }
  ASSERT_EQ(results.size(), 3u);
  for (size_t v = 1; v < results.size(); ++v)
    for (size_t o = 0; o < results[0].size(); ++o) {
      ASSERT_EQ(results[v][o].size(), results[0][o].size());
      double maxDiff = 0;
      for (size_t i = 0; i < results[0][o].size(); ++i)
        maxDiff = std::max(maxDiff, std::fabs(static_cast<double>(results[v][o][i]) -
                                              results[0][o][i]));
      EXPECT_LE(maxDiff, 1e-5) << "variant " << v << ", output " << o;
      RecordProperty("max_abs_diff_" + std::to_string(v) + "_" + std::to_string(o),
                     std::to_string(maxDiff));
    }
}

} // namespace
