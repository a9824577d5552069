//===- KVCacheTest.cpp - !bt.kv_cache and the KV-cache op verifiers --------===//

#include "TestUtils.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;
using namespace bt;
using namespace bt::test;

namespace {

class KVCacheTest : public BTTest {
protected:
  KVCacheType cache(CacheScope scope, int64_t batch, int64_t layers,
                    int64_t heads, int64_t capacity, int64_t headDim,
                    Type elt = {}) {
    return KVCacheType::getChecked([&] { return emitError(loc("type")); },
                                   &ctx, scope, batch, layers, heads, capacity,
                                   headDim, elt ? elt : f32());
  }
};

TEST_F(KVCacheTest, BytesPerSequenceMatchesTheClosedForm) {
  struct Case {
    int64_t layers, heads, capacity, headDim;
  };
  // Small shapes, the tiny fixtures' and paper-sized ones (block_main_b4_1.2b
  // block decoder: 24 layers, 16 heads of 128, 2048 / 4 = 512 blocks).
  const Case cases[] = {{1, 1, 1, 1}, {2, 2, 6, 32},     {2, 2, 512, 32},
                        {24, 16, 512, 128}, {36, 32, 8192, 128}};
  struct Elt {
    Type type;
    int64_t bytes;
  };
  const Elt elts[] = {{Float32Type::get(&ctx), 4},
                      {BFloat16Type::get(&ctx), 2},
                      {Float16Type::get(&ctx), 2}};
  for (const Case &c : cases) {
    for (const Elt &e : elts) {
      for (CacheScope scope : {CacheScope::global, CacheScope::local}) {
        for (int64_t batch : {int64_t(1), int64_t(8), ShapedType::kDynamic}) {
          KVCacheType t = cache(scope, batch, c.layers, c.heads, c.capacity,
                                c.headDim, e.type);
          ASSERT_TRUE(t) << diags.dump();
          // Per sequence: independent of batch and scope.
          EXPECT_EQ(t.getBytesPerSequence(),
                    2 * c.layers * c.heads * c.capacity * c.headDim * e.bytes)
              << print(t);
        }
      }
    }
  }
  // One concrete number: 2 layers · 2 heads · 512 entries · 32 dims · K+V · f32.
  EXPECT_EQ(cache(CacheScope::global, ShapedType::kDynamic, 2, 2, 512, 32)
                .getBytesPerSequence(),
            524288);
}

TEST_F(KVCacheTest, DynamicCapacity) {
  // The global cache of generation: capacity chosen by the runtime.
  KVCacheType g = cache(CacheScope::global, ShapedType::kDynamic, 2, 2,
                        ShapedType::kDynamic, 32);
  ASSERT_TRUE(g) << diags.dump();
  EXPECT_FALSE(g.hasStaticCapacity());
  EXPECT_EQ(g.getBytesPerEntry(), 2 * 2 * 2 * 32 * 4);
  EXPECT_EQ(g.getBytesPerSequence(), ShapedType::kDynamic);
  EXPECT_EQ(print(g), "!bt.kv_cache<global, batch = ?, layers = 2, heads = 2, "
                      "capacity = ?, head_dim = 32, f32>");
  KVCacheType s = cache(CacheScope::global, 1, 2, 2, 512, 32);
  EXPECT_TRUE(s.hasStaticCapacity());
  EXPECT_EQ(s.getBytesPerSequence(), 512 * s.getBytesPerEntry());
  // A local cache (one block) has a static capacity.
  EXPECT_FALSE(cache(CacheScope::local, 2, 2, 2, ShapedType::kDynamic, 32));
  EXPECT_NE(diags.dump().find("a local cache must have a static capacity"),
            std::string::npos);
}

TEST_F(KVCacheTest, Accessors) {
  KVCacheType g = cache(CacheScope::global, ShapedType::kDynamic, 2, 4, 512, 32);
  ASSERT_TRUE(g);
  EXPECT_TRUE(g.isGlobal());
  EXPECT_FALSE(g.isLocal());
  EXPECT_FALSE(g.hasStaticBatch());
  KVCacheType l = cache(CacheScope::local, 3, 1, 2, 6, 16,
                        BFloat16Type::get(&ctx));
  ASSERT_TRUE(l);
  EXPECT_TRUE(l.isLocal());
  EXPECT_FALSE(l.isGlobal());
  EXPECT_TRUE(l.hasStaticBatch());
  EXPECT_EQ(l.getBatch(), 3);
  EXPECT_EQ(l.getLayers(), 1);
  EXPECT_EQ(l.getHeads(), 2);
  EXPECT_EQ(l.getCapacity(), 6);
  EXPECT_EQ(l.getHeadDim(), 16);
  EXPECT_TRUE(l.getElementType().isBF16());
}

TEST_F(KVCacheTest, InvalidParametersAreRejected) {
  struct Case {
    int64_t batch, layers, heads, capacity, headDim;
    const char *message;
  };
  const Case cases[] = {
      {0, 2, 2, 6, 32, "!bt.kv_cache: batch must be >= 1 or '?', got 0"},
      {-4, 2, 2, 6, 32, "!bt.kv_cache: batch must be >= 1 or '?', got -4"},
      {2, 0, 2, 6, 32, "!bt.kv_cache: layers must be >= 1, got 0"},
      {2, 2, 0, 6, 32, "!bt.kv_cache: heads must be >= 1, got 0"},
      {2, 2, 2, 0, 32, "!bt.kv_cache: capacity must be >= 1, got 0"},
      {2, 2, 2, 6, -1, "!bt.kv_cache: head_dim must be >= 1, got -1"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.message);
    diags.clear();
    EXPECT_FALSE(cache(CacheScope::local, c.batch, c.layers, c.heads,
                       c.capacity, c.headDim));
    EXPECT_TRUE(hasErrorAt(diags, c.message, loc("type")));
  }
}

TEST_F(KVCacheTest, ElementTypeMustBeAFloatActivationType) {
  EXPECT_FALSE(cache(CacheScope::global, 1, 1, 1, 1, 1, i64()));
  EXPECT_TRUE(hasError(
      diags, "!bt.kv_cache: element type must be f32, bf16 or f16, got 'i64'"));
  diags.clear();
  EXPECT_FALSE(cache(CacheScope::global, 1, 1, 1, 1, 1, Float64Type::get(&ctx)));
  EXPECT_TRUE(hasError(diags, "element type must be f32, bf16 or f16"));
}

TEST_F(KVCacheTest, PrintsTheDocumentedSyntax) {
  EXPECT_EQ(print(cache(CacheScope::global, ShapedType::kDynamic, 2, 2, 512, 32)),
            "!bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = "
            "512, head_dim = 32, f32>");
  EXPECT_EQ(print(cache(CacheScope::local, 2, 1, 4, 6, 16,
                        BFloat16Type::get(&ctx))),
            "!bt.kv_cache<local, batch = 2, layers = 1, heads = 4, capacity = 6, "
            "head_dim = 16, bf16>");
}

TEST_F(KVCacheTest, PrintParseRoundTrip) {
  const KVCacheType types[] = {
      cache(CacheScope::global, ShapedType::kDynamic, 2, 2, 512, 32),
      cache(CacheScope::global, 8, 24, 16, 512, 128, BFloat16Type::get(&ctx)),
      cache(CacheScope::local, 2, 1, 2, 6, 16, Float16Type::get(&ctx)),
      cache(CacheScope::local, ShapedType::kDynamic, 3, 1, 1, 1),
  };
  for (KVCacheType t : types) {
    ASSERT_TRUE(t) << diags.dump();
    std::string text = print(t);
    SCOPED_TRACE(text);
    Type parsed = parseType(text, &ctx);
    ASSERT_TRUE(parsed) << diags.dump();
    EXPECT_EQ(parsed, t);
    EXPECT_EQ(print(parsed), text);
  }
}

TEST_F(KVCacheTest, ParserRejectsAnUnknownScope) {
  EXPECT_FALSE(parseType("!bt.kv_cache<shared, batch = 1, layers = 1, heads = "
                         "1, capacity = 1, head_dim = 1, f32>",
                         &ctx));
  EXPECT_TRUE(
      hasError(diags, "expected cache scope 'global' or 'local', got 'shared'"));
}

TEST_F(KVCacheTest, ParserReportsInvalidValues) {
  EXPECT_FALSE(parseType("!bt.kv_cache<local, batch = 2, layers = 2, heads = 2, "
                         "capacity = 0, head_dim = 32, f32>",
                         &ctx));
  EXPECT_TRUE(hasError(diags, "!bt.kv_cache: capacity must be >= 1, got 0"));
  diags.clear();
  EXPECT_FALSE(parseType("!bt.kv_cache<local, batch = 2, layers = 2, heads = 2, "
                         "capacity = 6, head_dim = 32, i32>",
                         &ctx));
  EXPECT_TRUE(hasError(diags, "element type must be f32, bf16 or f16"));
}

// --- KV-cache op verifiers -------------------------------------------------

class KVCacheOpTest : public KVCacheTest {
protected:
  /// A function `@f(%n: index, %k: key type)` in a fresh module, with the
  /// builder inside its body.
  void startFunction(Type keyType,
                     llvm::function_ref<void()> declare = {}) {
    module = ModuleOp::create(loc("m"));
    b.setInsertionPointToEnd(module->getBody());
    if (declare)
      declare();
    auto fn = b.create<func::FuncOp>(
        loc("f"), "f", b.getFunctionType({b.getIndexType(), keyType}, {}));
    Block *entry = fn.addEntryBlock();
    n = entry->getArgument(0);
    key = entry->getArgument(1);
    b.setInsertionPointToStart(entry);
  }
  LogicalResult finishAndVerify() {
    b.create<func::ReturnOp>(loc("return"));
    return verify(*module);
  }

  OpBuilder b{&ctx};
  OwningOpRef<ModuleOp> module;
  Value n, key;
};

TEST_F(KVCacheOpTest, AllocWithDynamicBatchNeedsABatchOperand) {
  KVCacheType dyn = cache(CacheScope::global, ShapedType::kDynamic, 2, 2, 8, 32);
  startFunction(tensor({2, 1, 2, 32}));
  auto withBatch = b.create<KVAllocOp>(loc("ok"), dyn, n);
  b.create<KVReleaseOp>(loc("rel"), withBatch.getCache());
  b.create<KVAllocOp>(loc("alloc"), dyn, Value());
  EXPECT_TRUE(failed(finishAndVerify()));
  EXPECT_TRUE(hasErrorAt(
      diags, "a cache type with dynamic batch '?' requires a batch operand",
      loc("alloc")));
}

TEST_F(KVCacheOpTest, AllocWithStaticBatchTakesNoBatchOperand) {
  startFunction(tensor({2, 1, 2, 32}));
  b.create<KVAllocOp>(loc("alloc"), cache(CacheScope::local, 2, 2, 2, 8, 32), n);
  EXPECT_TRUE(failed(finishAndVerify()));
  EXPECT_TRUE(hasErrorAt(
      diags, "batch operand given for a cache type with static batch 2",
      loc("alloc")));
}

TEST_F(KVCacheOpTest, AppendChecksLayerAndKeyShape) {
  KVCacheType t = cache(CacheScope::local, 2, 2, 2, 8, 32);
  {
    startFunction(tensor({2, 3, 2, 32}));
    auto c = b.create<KVAllocOp>(loc("alloc"), t, Value());
    b.create<KVAppendOp>(loc("append"), c.getCache(), 1, key, key);
    EXPECT_TRUE(succeeded(finishAndVerify())) << diags.dump();
  }
  {
    diags.clear();
    startFunction(tensor({2, 3, 2, 32}));
    auto c = b.create<KVAllocOp>(loc("alloc"), t, Value());
    b.create<KVAppendOp>(loc("append"), c.getCache(), 2, key, key);
    EXPECT_TRUE(failed(finishAndVerify()));
    EXPECT_TRUE(hasErrorAt(diags,
                           "layer 2 is out of range for a cache of 2 layers",
                           loc("append")));
  }
  {
    diags.clear();
    startFunction(tensor({2, 3, 4, 32}));
    auto c = b.create<KVAllocOp>(loc("alloc"), t, Value());
    b.create<KVAppendOp>(loc("append"), c.getCache(), 0, key, key);
    EXPECT_TRUE(failed(finishAndVerify()));
    EXPECT_TRUE(hasErrorAt(diags,
                           "key [2, 3, 4, 32] does not match the cache [B, S, "
                           "H, hd] = [2, S, 2, 32]",
                           loc("append")));
  }
  {
    diags.clear();
    startFunction(tensor({2, 9, 2, 32}));
    auto c = b.create<KVAllocOp>(loc("alloc"), t, Value());
    b.create<KVAppendOp>(loc("append"), c.getCache(), 0, key, key);
    EXPECT_TRUE(failed(finishAndVerify()));
    EXPECT_TRUE(hasErrorAt(
        diags, "key has 9 positions, more than the cache capacity (8)",
        loc("append")));
  }
}

TEST_F(KVCacheOpTest, AttendChecksScaleAndElementType) {
  KVCacheType t = cache(CacheScope::global, 2, 1, 2, 8, 32);
  startFunction(tensor({2, 1, 2, 32}));
  auto c = b.create<KVAllocOp>(loc("alloc"), t, Value());
  b.create<KVAttendOp>(loc("attend"), key.getType(), key, c.getCache(), 0,
                       llvm::APFloat(0.0));
  EXPECT_TRUE(failed(finishAndVerify()));
  EXPECT_TRUE(hasErrorAt(diags, "scale must be > 0, got 0", loc("attend")));

  diags.clear();
  startFunction(tensor({2, 1, 2, 32}, BFloat16Type::get(&ctx)));
  c = b.create<KVAllocOp>(loc("alloc"), t, Value());
  b.create<KVAttendOp>(loc("attend"), key.getType(), key, c.getCache(), 0,
                       llvm::APFloat(0.125));
  EXPECT_TRUE(failed(finishAndVerify()));
  EXPECT_TRUE(hasErrorAt(
      diags, "query element type 'bf16' does not fit the cache's 'f32' (expected 'f32')",
      loc("attend")));
}

TEST_F(KVCacheOpTest, BlockDecoderCacheMustBeGlobalAndMatchTheConfig) {
  TinyModelSpec spec;
  NeoXConfigAttr config = spec.blockConfig(&ctx); // 2 layers, 2 heads of 32
  auto build = [&](KVCacheType cacheType) {
    startFunction(tensor({2, 1, 64}), [&] {
      declareParams(b, loc("params"), getNeoXStackParams(kBlockParams, config),
                    /*vocab=*/0, f32());
    });
    auto c = b.create<KVAllocOp>(loc("alloc"), cacheType, Value());
    auto bd = b.create<BlockDecoderOp>(loc("block_decoder"), key.getType(),
                                       cacheType, key, Value(), c.getCache(),
                                       kBlockParams, config);
    b.create<KVReleaseOp>(loc("release"), bd.getResultCache());
  };

  build(cache(CacheScope::global, 2, 2, 2, 16, 32));
  EXPECT_TRUE(succeeded(finishAndVerify())) << diags.dump();

  diags.clear();
  build(cache(CacheScope::local, 2, 2, 2, 16, 32));
  EXPECT_TRUE(failed(finishAndVerify()));
  EXPECT_TRUE(hasErrorAt(
      diags, "the block decoder's cache must have 'global' scope, got 'local'",
      loc("block_decoder")));

  diags.clear();
  build(cache(CacheScope::global, 2, 3, 2, 16, 32));
  EXPECT_TRUE(failed(finishAndVerify()));
  EXPECT_TRUE(hasErrorAt(diags,
                         "cache (layers = 3, heads = 2, head_dim = 32) does not "
                         "match the config (layers = 2, heads = 2, head_dim = 32)",
                         loc("block_decoder")));

  diags.clear();
  build(cache(CacheScope::global, 4, 2, 2, 16, 32));
  EXPECT_TRUE(failed(finishAndVerify()));
  EXPECT_TRUE(hasErrorAt(diags,
                         "cache batch (4) does not match the input batch B (2)",
                         loc("block_decoder")));
}

} // namespace
