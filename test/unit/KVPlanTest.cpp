//===- KVPlanTest.cpp - bt-plan-kv-memory against the closed form ---------===//
//
// The KV-cache memory plan (include/bt/Transforms/KVPlan.h) of imported
// models against the closed-form formulas (paper §2.3-2.4, docs/design.md §3):
//   global per sequence = C · layers_B · 2 · H_B · hd_B · sizeof,
//                         C = ceil(prompt / L_B) + ceil(gen / L_B)
//   local per sequence  = 2 · layers_T · H_T · (P + L_B - 1) · hd_T · sizeof
//                         (the token decoder's inputs: t_{L_B-1} never is one)
//   weights             = the parameter count of the architecture · sizeof
//   max batch           = floor((memory − weights) / (global + local))
// for the official fixture configs and the paper's block_main_b4_85; the
// plan from KV-cache lifetimes; the pass attribute; byte-size parsing.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "bt/Import/Import.h"
#include "bt/Transforms/KVPlan.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

using namespace bt;
using namespace mlir;

namespace {

StackSpec stack(int64_t hidden, int64_t layers, int64_t heads,
                int64_t rotaryDims) {
  StackSpec s;
  s.hidden = hidden;
  s.layers = layers;
  s.heads = heads;
  s.headDim = hidden / heads;
  s.intermediate = 4 * hidden;
  s.rotaryDims = rotaryDims;
  return s;
}

ModelSpec blockSpec(const std::string &name, int64_t vocab, int64_t lb,
                    int64_t p, StackSpec block, StackSpec token) {
  ModelSpec m;
  m.kind = ModelSpec::Kind::BlockTransformer;
  m.name = name;
  m.vocab = vocab;
  m.blockLength = lb;
  m.embedderWidth = block.hidden / lb;
  m.block = block;
  m.token = token;
  m.prefixLength = p;
  return m;
}

/// fixtures/official/block_tiny: L_B 4, P 2, D = T = 64, 2 + 2 layers, 2
/// heads of 32, vocab 512.
ModelSpec blockTiny() {
  return blockSpec("block_tiny", 512, 4, 2, stack(64, 2, 2, 8),
                   stack(64, 2, 2, 8));
}
/// fixtures/official/block_tiny_b8: L_B 8, P 1, D = T = 96, 2 + 3 layers, 3
/// heads of 32, vocab 384.
ModelSpec blockTinyB8() {
  return blockSpec("block_tiny_b8", 384, 8, 1, stack(96, 2, 3, 8),
                   stack(96, 3, 3, 8));
}
/// The paper's block_main_b4_85 (conf/trainer/block_main_b4_85.yaml): L_B 4,
/// P 2, D = T = 768, 6 + 6 layers, 12 heads of 64, vocab 50304.
ModelSpec blockMain85() {
  return blockSpec("block_main_b4_85", 50304, 4, 2, stack(768, 6, 12, 16),
                   stack(768, 6, 12, 16));
}

/// Parameters of one GPT-NeoX stack (12·D² + 13·D per layer with I = 4D,
/// plus the final LayerNorm).
int64_t stackParams(const StackSpec &s) {
  int64_t d = s.hidden, i = s.intermediate;
  int64_t layer = 4 * d            // two LayerNorms
                  + 3 * d * d + 3 * d // QKV
                  + d * d + d         // dense
                  + i * d + i         // h -> 4h
                  + d * i + d;        // 4h -> h
  return s.layers * layer + 2 * d;
}

/// The parameters the model reads (the block decoder's unused embed_in is
/// not among them).
int64_t blockParams(const ModelSpec &m) {
  int64_t t = m.token.hidden, d = m.block.hidden;
  return m.vocab * m.embedderWidth          // embedder
         + stackParams(m.block)             // block decoder
         + m.vocab * t                      // token embed_in
         + stackParams(m.token)             // token decoder
         + m.prefixLength * t * d + m.prefixLength * t // expansion layer
         + m.vocab * t;                     // embed_out
}

struct Expected {
  int64_t global, local, weights, maxBatch;
};

Expected closedForm(const ModelSpec &m, int64_t prompt, int64_t gen,
                    int64_t memory, int64_t elt) {
  int64_t lb = m.blockLength;
  int64_t c = (prompt + lb - 1) / lb + (gen + lb - 1) / lb;
  Expected e;
  e.global = c * m.block.layers * 2 * m.block.heads * m.block.headDim * elt;
  e.local = 2 * m.token.layers * m.token.heads * (m.prefixLength + lb - 1) *
            m.token.headDim * elt;
  e.weights = blockParams(m) * elt;
  e.maxBatch = (memory - e.weights) / (e.global + e.local);
  return e;
}

class KVPlanTest : public ::testing::Test {
protected:
  KVPlanTest() { ctx.loadDialect<BTDialect, func::FuncDialect>(); }
  MLIRContext ctx;
};

constexpr int64_t kGiB = int64_t(1) << 30;

void checkAgainstClosedForm(MLIRContext &ctx, const ModelSpec &spec,
                            int64_t prompt, int64_t gen, int64_t memory,
                            int64_t eltOverride) {
  SCOPED_TRACE(spec.name);
  OwningOpRef<ModuleOp> module = importModel(&ctx, spec);
  ASSERT_TRUE(module);
  KVPlanRequest request;
  request.promptTokens = prompt;
  request.genTokens = gen;
  request.memoryBytes = memory;
  request.eltBytes = eltOverride;
  FailureOr<KVPlan> plan = computeKVPlan(*module, request);
  ASSERT_TRUE(succeeded(plan));
  int64_t elt = eltOverride ? eltOverride : 4;
  Expected e = closedForm(spec, prompt, gen, memory, elt);
  EXPECT_EQ(plan->source, "model ops");
  EXPECT_FALSE(plan->vanilla);
  EXPECT_EQ(plan->blockLength, spec.blockLength);
  EXPECT_EQ(plan->prefixLength, spec.prefixLength);
  EXPECT_EQ(plan->eltBytes, elt);
  EXPECT_EQ(plan->global.bytesPerEntryPerLayer(),
            2 * spec.block.heads * spec.block.headDim * elt);
  EXPECT_EQ(plan->globalBytesPerSequence, e.global);
  EXPECT_EQ(plan->localCapacity, spec.prefixLength + spec.blockLength - 1);
  EXPECT_EQ(plan->localBytesPerSequence, e.local);
  EXPECT_EQ(plan->bytesPerSequence, e.global + e.local);
  EXPECT_EQ(plan->weightParams, blockParams(spec));
  EXPECT_EQ(plan->weightBytes, e.weights);
  EXPECT_EQ(plan->maxBatch, e.maxBatch);
  // A vanilla model of the same size: every token in every layer.
  EXPECT_EQ(plan->vanillaBytesPerSequence,
            (prompt + gen) * (spec.block.layers + spec.token.layers) * 2 *
                spec.block.heads * spec.block.headDim * elt);
}

TEST_F(KVPlanTest, FixtureConfigsMatchClosedForm) {
  for (const ModelSpec &spec : {blockTiny(), blockTinyB8()}) {
    checkAgainstClosedForm(ctx, spec, 2048, 128, 80 * kGiB, 0);
    // Prompt and generation not multiples of L_B: blocks are rounded up.
    checkAgainstClosedForm(ctx, spec, 10, 12, kGiB, 0);
  }
}

TEST_F(KVPlanTest, BlockMain85At80GiB) {
  ModelSpec spec = blockMain85();
  checkAgainstClosedForm(ctx, spec, 2048, 128, 80 * kGiB, 0);
  checkAgainstClosedForm(ctx, spec, 2048, 128, 80 * kGiB, 2); // bf16

  // The numbers, spelled out (f32): C = 512 + 32 = 544 blocks,
  // 2 · 12 · 64 · 4 B = 6 KiB per block and layer, × 6 layers × 544.
  OwningOpRef<ModuleOp> module = importModel(&ctx, spec);
  ASSERT_TRUE(module);
  KVPlanRequest request{2048, 128, 80 * kGiB, 0, 0};
  FailureOr<KVPlan> plan = computeKVPlan(*module, request);
  ASSERT_TRUE(succeeded(plan));
  EXPECT_EQ(plan->globalBlocks, 544);
  EXPECT_EQ(plan->globalBytesPerSequence, 544 * 6 * 6144);           // 19.125 MiB
  EXPECT_EQ(plan->localBytesPerSequence, 2 * 6 * 12 * 5 * 64 * 4);   // 180 KiB
  EXPECT_EQ(plan->weightParams, 173164032);
  // floor((80 GiB - 173164032 · 4 B) / (20054016 + 184320 B)) = 4210.
  EXPECT_EQ(plan->maxBatch, 4210);
  // Paper §2.3: the block decoder's cache holds one entry per block: L_B
  // times fewer per layer than a vanilla layer's (2176 tokens / 544 blocks).
  EXPECT_EQ(plan->vanillaTokens, 4 * plan->globalBlocks);
  EXPECT_EQ(plan->vanillaBytesPerSequence, 2176 * 12 * 6144);        // 153 MiB
  EXPECT_EQ(plan->vanillaMaxBatch, 531);

  std::string text;
  llvm::raw_string_ostream os(text);
  printKVPlan(os, *plan, spec.name);
  EXPECT_NE(text.find("C = 544"), std::string::npos) << text;
  EXPECT_NE(text.find("19.12 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("180.00 KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("4210"), std::string::npos) << text;
  EXPECT_NE(text.find("4.00x smaller"), std::string::npos) << text;
}

TEST_F(KVPlanTest, VanillaModel) {
  ModelSpec spec;
  spec.kind = ModelSpec::Kind::Vanilla;
  spec.name = "vanilla_tiny";
  spec.vocab = 512;
  spec.blockLength = 1;
  spec.embedderWidth = 64;
  spec.block = stack(64, 2, 2, 8);
  OwningOpRef<ModuleOp> module = importModel(&ctx, spec);
  ASSERT_TRUE(module);
  KVPlanRequest request{100, 28, kGiB, 0, 0};
  FailureOr<KVPlan> plan = computeKVPlan(*module, request);
  ASSERT_TRUE(succeeded(plan));
  EXPECT_TRUE(plan->vanilla);
  EXPECT_EQ(plan->globalBlocks, 128);
  EXPECT_EQ(plan->globalBytesPerSequence, 128 * 2 * 2 * 2 * 32 * 4);
  EXPECT_EQ(plan->localBytesPerSequence, 0);
}

// With generation functions, the geometry comes from the caches' lifetimes:
// the local scratch is the peak of the local caches live at the same time.
TEST_F(KVPlanTest, FromLifetimes) {
  test::DiagnosticCapture diags(ctx);
  ctx.loadDialect<scf::SCFDialect, arith::ArithDialect>();
  const char *source = R"mlir(
    !g = !bt.kv_cache<global, batch = ?, layers = 3, heads = 4, capacity = 64, head_dim = 16, bf16>
    !l = !bt.kv_cache<local, batch = ?, layers = 2, heads = 2, capacity = 6, head_dim = 8, bf16>
    module {
      bt.param @"embedder.embeddings.weight" : tensor<10x4xbf16>
      func.func @prefill(%ids: tensor<?x3x4xi64>, %g: !g) -> !g {
        %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<?x3x4xi64> -> tensor<?x3x16xbf16>
        return %g : !g
      }
      func.func @decode_tokens(%b: index, %n: index) {
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        scf.for %i = %c0 to %n step %c1 {
          %a = bt.kv_alloc batch %b : !l
          %c = bt.kv_alloc batch %b : !l
          bt.kv_release %a : !l
          bt.kv_release %c : !l
        }
        %d = bt.kv_alloc batch %b : !l
        bt.kv_release %d : !l
        return
      }
    })mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &ctx);
  ASSERT_TRUE(module) << diags.dump();
  KVPlanRequest request{120, 8, 0, 0, 0};
  FailureOr<KVPlan> plan = computeKVPlan(*module, request);
  ASSERT_TRUE(succeeded(plan)) << diags.dump();
  EXPECT_EQ(plan->source, "kv-cache lifetimes");
  EXPECT_EQ(plan->eltBytes, 2);
  EXPECT_EQ(plan->globalBlocks, 30 + 2);
  EXPECT_EQ(plan->global.bytesPerEntry(), 3 * 2 * 4 * 16 * 2);
  EXPECT_EQ(plan->globalBytesPerSequence, 32 * 3 * 2 * 4 * 16 * 2);
  EXPECT_EQ(plan->localCapacity, 6);
  // Without a token decoder, P = C - L_B + 1 (C = P + L_B - 1, prefix).
  EXPECT_EQ(plan->prefixLength, 3);
  // Two local caches live at once in the loop.
  EXPECT_EQ(plan->localBytesPerSequence, 2 * (2 * 2 * 2 * 6 * 8 * 2));
  EXPECT_EQ(plan->maxBatch, -1); // no budget

  // The same in f32: sizes double.
  request.eltBytes = 4;
  FailureOr<KVPlan> f32 = computeKVPlan(*module, request);
  ASSERT_TRUE(succeeded(f32));
  EXPECT_EQ(f32->globalBytesPerSequence, 2 * plan->globalBytesPerSequence);
  EXPECT_EQ(f32->localBytesPerSequence, 2 * plan->localBytesPerSequence);
  EXPECT_EQ(f32->weightBytes, 2 * plan->weightBytes);
}

TEST_F(KVPlanTest, PassAttachesPlan) {
  OwningOpRef<ModuleOp> module = importModel(&ctx, blockTiny());
  ASSERT_TRUE(module);
  PassManager pm(&ctx);
  BTPlanKVMemoryOptions options;
  options.promptTokens = 2048;
  options.genTokens = 128;
  options.memory = "1GiB";
  pm.addPass(createBTPlanKVMemory(options));
  ASSERT_TRUE(succeeded(pm.run(*module)));
  auto attr = (*module)->getAttrOfType<DictionaryAttr>("bt.kv_plan");
  ASSERT_TRUE(attr);
  Expected e = closedForm(blockTiny(), 2048, 128, kGiB, 4);
  auto get = [&](StringRef name) {
    auto v = attr.getAs<IntegerAttr>(name);
    return v ? v.getInt() : -12345;
  };
  EXPECT_EQ(get("global_bytes_per_sequence"), e.global);
  EXPECT_EQ(get("local_bytes_per_sequence"), e.local);
  EXPECT_EQ(get("weight_bytes"), e.weights);
  EXPECT_EQ(get("max_batch"), e.maxBatch);
  EXPECT_EQ(get("memory_bytes"), kGiB);
  EXPECT_EQ(get("global_blocks"), 544);
}

TEST(KVPlanParse, ByteSizes) {
  int64_t b = 0;
  EXPECT_TRUE(parseByteSize("80GiB", b));
  EXPECT_EQ(b, 80 * kGiB);
  EXPECT_TRUE(parseByteSize("80G", b));
  EXPECT_EQ(b, 80 * kGiB);
  EXPECT_TRUE(parseByteSize("80 GB", b));
  EXPECT_EQ(b, int64_t(80) * 1000 * 1000 * 1000);
  EXPECT_TRUE(parseByteSize("1.5KiB", b));
  EXPECT_EQ(b, 1536);
  EXPECT_TRUE(parseByteSize("4096", b));
  EXPECT_EQ(b, 4096);
  EXPECT_FALSE(parseByteSize("80 apples", b));
  EXPECT_FALSE(parseByteSize("GiB", b));
  EXPECT_FALSE(parseByteSize("", b));
  EXPECT_EQ(formatBytes(6144), "6.00 KiB");
  EXPECT_EQ(formatBytes(512), "512 B");
}

} // namespace
