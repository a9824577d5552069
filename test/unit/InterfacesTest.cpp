//===- InterfacesTest.cpp - BlockLocalOpInterface, KVCacheUserOpInterface --===//
//
// The interfaces that bt-eliminate-dead-prefill and bt-verify-kv-lifetimes
// rely on, queried on verified IR built with the builders.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "mlir/IR/Verifier.h"

#include <map>
#include <set>

using namespace mlir;
using namespace bt;
using namespace bt::test;

namespace {

/// What an op is expected to answer: its block dims (of the results), and for
/// each operand whether it is partitioned along result dim d (then
/// getOperandBlockDim returns d) or shared by all blocks, like a weight (then
/// it returns std::nullopt).
struct BlockLocalExpectation {
  std::set<int64_t> blockDims;
  /// operand index -> true if partitioned (dim == d), false if shared.
  std::map<unsigned, bool> partitioned;
};

class InterfacesTest : public BTTest {
protected:
  InterfacesTest() {
    module = ModuleOp::create(loc("m"));
    b.setInsertionPointToEnd(module->getBody());
  }

  /// Starts `func.func @name(args...)`; returns its arguments.
  ValueRange startFunction(llvm::StringRef name, llvm::ArrayRef<Type> args) {
    b.setInsertionPointToEnd(module->getBody());
    auto fn = b.create<func::FuncOp>(loc(name), name,
                                     b.getFunctionType(args, {}));
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    b.create<func::ReturnOp>(loc("return"));
    b.setInsertionPointToStart(entry);
    return entry->getArguments();
  }

  /// Checks isBlockLocalAlong for every dim in [-1, rank] and
  /// getOperandBlockDim for every operand along every block dim.
  void expectBlockLocal(Operation *op, const BlockLocalExpectation &expected) {
    SCOPED_TRACE(op->getName().getStringRef().str());
    auto iface = dyn_cast<BlockLocalOpInterface>(op);
    ASSERT_TRUE(iface) << "does not implement BlockLocalOpInterface";
    int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
    for (int64_t d = -1; d <= rank; ++d)
      EXPECT_EQ(iface.isBlockLocalAlong(d), expected.blockDims.count(d) == 1)
          << "result dim " << d;
    ASSERT_EQ(expected.partitioned.size(), op->getNumOperands());
    for (int64_t d : expected.blockDims) {
      for (auto [idx, isPartitioned] : expected.partitioned) {
        std::optional<int64_t> dim = iface.getOperandBlockDim(idx, d);
        if (isPartitioned) {
          ASSERT_TRUE(dim.has_value()) << "operand " << idx << " dim " << d;
          EXPECT_EQ(*dim, d) << "operand " << idx;
        } else {
          EXPECT_FALSE(dim.has_value())
              << "operand " << idx << " is a weight, but got dim " << *dim;
        }
      }
    }
  }

  OpBuilder b{&ctx};
  OwningOpRef<ModuleOp> module;
};

TEST_F(InterfacesTest, TokenDecoderIsBlockLocalAlongBatchAndBlocks) {
  TinyModelSpec spec;
  spec.tokenMaskShape = llvm::SmallVector<int64_t>{2, 3, 4};
  TinyModel model = buildTinyModel(ctx, spec);
  ASSERT_TRUE(succeeded(verify(*model.module))) << diags.dump();
  // context [B, N, D], ids [B, N, L_B], mask [B, N, L_B] -> [B, N, L_B, T]:
  // not along L_B (tokens of a block attend to each other) nor T.
  expectBlockLocal(model.tokenDecoder, {{0, 1}, {{0, true}, {1, true}, {2, true}}});
}

TEST_F(InterfacesTest, ModelLevelOps) {
  TinyModel model = buildTinyModel(ctx);
  ASSERT_TRUE(succeeded(verify(*model.module))) << diags.dump();
  expectBlockLocal(model.embedder, {{0, 1}, {{0, true}}});
  // lm_head [B, N, L_B, T] -> [B, N, L_B, V]: every position independently.
  expectBlockLocal(model.lmHead, {{0, 1, 2}, {{0, true}}});
  // The block decoder attends across blocks (global causal attention) and
  // the loss reduces everything: neither is block-local.
  EXPECT_FALSE(isa<BlockLocalOpInterface>(model.blockDecoder.getOperation()));
  EXPECT_FALSE(isa<BlockLocalOpInterface>(model.loss.getOperation()));
}

TEST_F(InterfacesTest, LayerNormAndLinearWeightsAreShared) {
  ValueRange args = startFunction(
      "f", {tensor({2, 3, 5, 32}), tensor({32}), tensor({32}), tensor({96, 32}),
            tensor({96})});
  auto ln = b.create<LayerNormOp>(loc("ln"), args[0].getType(), args[0],
                                  args[1], args[2], llvm::APFloat(1e-5));
  auto linear = b.create<LinearOp>(loc("linear"), tensor({2, 3, 5, 96}),
                                   ln.getResult(), args[3], args[4]);
  ASSERT_TRUE(succeeded(verify(*module))) << diags.dump();
  // [B, N, S, C]: independent along everything but the normalized /
  // contracted last dim.
  expectBlockLocal(ln, {{0, 1, 2}, {{0, true}, {1, false}, {2, false}}});
  expectBlockLocal(linear, {{0, 1, 2}, {{0, true}, {1, false}, {2, false}}});
}

TEST_F(InterfacesTest, RotaryWithSharedPositions) {
  // input [B, N, S, H, hd], positions [S] (the same for every block).
  ValueRange args = startFunction(
      "f", {tensor({2, 3, 5, 2, 16}), RankedTensorType::get({5}, i64())});
  auto rot = b.create<RotaryOp>(loc("rotary"), args[0].getType(), args[0],
                                args[1], 4, llvm::APFloat(10000.0));
  ASSERT_TRUE(succeeded(verify(*module))) << diags.dump();
  // Not along S (positions differ along it), H or hd.
  expectBlockLocal(rot, {{0, 1}, {{0, true}, {1, false}}});
}

TEST_F(InterfacesTest, RotaryWithPerBlockPositions) {
  // positions [B, N, S]: partitioned like the input.
  ValueRange args = startFunction(
      "f", {tensor({2, 3, 5, 2, 16}), RankedTensorType::get({2, 3, 5}, i64())});
  auto rot = b.create<RotaryOp>(loc("rotary"), args[0].getType(), args[0],
                                args[1], 4, llvm::APFloat(10000.0));
  ASSERT_TRUE(succeeded(verify(*module))) << diags.dump();
  expectBlockLocal(rot, {{0, 1}, {{0, true}, {1, true}}});
}

TEST_F(InterfacesTest, PrefixProjection) {
  // context [B, N, D=64] -> [B, N, P=2, T=32]; Conv1d weight [P·T, D, 1].
  ValueRange args = startFunction(
      "f", {tensor({2, 3, 64}), tensor({64, 64, 1}), tensor({64})});
  auto proj = b.create<PrefixProjectionOp>(loc("proj"), tensor({2, 3, 2, 32}),
                                           args[0], args[1], args[2], 2);
  ASSERT_TRUE(succeeded(verify(*module))) << diags.dump();
  // Not along P (one context vector makes all P prefix vectors) nor T.
  expectBlockLocal(proj, {{0, 1}, {{0, true}, {1, false}, {2, false}}});
}

TEST_F(InterfacesTest, LocalAttentionIsBlockLocalButNotAlongPositions) {
  Type qkv = tensor({2, 3, 5, 2, 16});
  ValueRange args = startFunction(
      "f", {qkv, qkv, qkv,
            RankedTensorType::get({2, 3, 5}, IntegerType::get(&ctx, 1))});
  auto att = b.create<LocalAttentionOp>(loc("local_attention"), qkv, args[0],
                                        args[1], args[2], args[3],
                                        llvm::APFloat(0.25));
  ASSERT_TRUE(succeeded(verify(*module))) << diags.dump();
  expectBlockLocal(att,
                   {{0, 1}, {{0, true}, {1, true}, {2, true}, {3, true}}});
}

TEST_F(InterfacesTest, SplitQKVIsIndependentAlongAllLeadingDims) {
  ValueRange args = startFunction("f", {tensor({2, 3, 5, 96})});
  auto split = b.create<SplitQKVOp>(loc("split"), args[0], /*heads=*/2,
                                    /*headDim=*/16);
  ASSERT_TRUE(succeeded(verify(*module))) << diags.dump();
  EXPECT_EQ(split.getQ().getType(), tensor({2, 3, 5, 2, 16}));
  // q/k/v [B, N, S, H, hd]: a pure re-layout of each position's last dim.
  expectBlockLocal(split, {{0, 1, 2}, {{0, true}}});
}

TEST_F(InterfacesTest, GlobalAttentionIsNotBlockLocal) {
  Type qkv = tensor({2, 5, 2, 16});
  ValueRange args = startFunction("f", {qkv, qkv, qkv});
  auto att = b.create<AttentionOp>(loc("attention"), qkv, args[0], args[1],
                                   args[2], Value(), llvm::APFloat(0.25));
  ASSERT_TRUE(succeeded(verify(*module))) << diags.dump();
  EXPECT_FALSE(isa<BlockLocalOpInterface>(att.getOperation()));
}

// --- KVCacheUserOpInterface ------------------------------------------------

TEST_F(InterfacesTest, KVCacheUsersConsumeOrRead) {
  TinyModelSpec spec;
  NeoXConfigAttr config = spec.blockConfig(&ctx);
  declareParams(b, loc("params"), getNeoXStackParams(kBlockParams, config), 0,
                f32());
  auto cacheType = KVCacheType::get(&ctx, CacheScope::global, 2, 2, 2, 16, 32,
                                    f32());
  Type kv = tensor({2, 1, 2, 32});
  ValueRange args = startFunction("f", {kv, tensor({2, 1, 64})});
  auto alloc = b.create<KVAllocOp>(loc("alloc"), cacheType, Value());
  auto append = b.create<KVAppendOp>(loc("append"), alloc.getCache(), 0,
                                     args[0], args[0]);
  auto attend = b.create<KVAttendOp>(loc("attend"), kv, args[0],
                                     append.getResult(), 0,
                                     llvm::APFloat(0.125));
  auto length = b.create<KVLengthOp>(loc("length"), append.getResult(), 1);
  auto bd = b.create<BlockDecoderOp>(loc("block_decoder"), args[1].getType(),
                                     cacheType, args[1], Value(),
                                     append.getResult(), kBlockParams, config);
  auto release = b.create<KVReleaseOp>(loc("release"), bd.getResultCache());
  ASSERT_TRUE(succeeded(verify(*module))) << diags.dump();

  auto consumes = [](Operation *op, unsigned idx) -> std::optional<bool> {
    auto user = dyn_cast<KVCacheUserOpInterface>(op);
    if (!user)
      return std::nullopt;
    return user.consumesCache(op->getOpOperand(idx));
  };
  EXPECT_EQ(consumes(append, 0), std::optional<bool>(true));
  EXPECT_EQ(consumes(release, 0), std::optional<bool>(true));
  // The block decoder's cache operand is operand 1 (no mask).
  ASSERT_EQ(bd.getCache(), bd->getOperand(1));
  EXPECT_EQ(consumes(bd, 1), std::optional<bool>(true));
  EXPECT_EQ(consumes(attend, 1), std::optional<bool>(false));
  EXPECT_EQ(consumes(length, 0), std::optional<bool>(false));
  // kv_alloc only defines a cache.
  EXPECT_FALSE(isa<KVCacheUserOpInterface>(alloc.getOperation()));
}

TEST_F(InterfacesTest, BlockDecoderWithMaskAndCacheConsumesTheCacheOperand) {
  TinyModelSpec spec;
  NeoXConfigAttr config = spec.blockConfig(&ctx);
  declareParams(b, loc("params"), getNeoXStackParams(kBlockParams, config), 0,
                f32());
  auto cacheType = KVCacheType::get(&ctx, CacheScope::global,
                                    ShapedType::kDynamic, 2, 2, 16, 32, f32());
  ValueRange args = startFunction(
      "f", {tensor({2, 1, 64}), RankedTensorType::get({2, 1}, i64()),
            b.getIndexType()});
  auto alloc = b.create<KVAllocOp>(loc("alloc"), cacheType, args[2]);
  auto bd = b.create<BlockDecoderOp>(loc("block_decoder"), args[0].getType(),
                                     cacheType, args[0], args[1],
                                     alloc.getCache(), kBlockParams, config);
  b.create<KVReleaseOp>(loc("release"), bd.getResultCache());
  ASSERT_TRUE(succeeded(verify(*module))) << diags.dump();
  auto user = cast<KVCacheUserOpInterface>(bd.getOperation());
  ASSERT_EQ(bd.getCache(), bd->getOperand(2));
  EXPECT_TRUE(user.consumesCache(bd->getOpOperand(2)));
}

} // namespace
