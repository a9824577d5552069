//===- LifetimesTest.cpp - bt-verify-kv-lifetimes through a PassManager ----===//
//
// Every function is built with the builders and first checked with
// mlir::verify, so that a failure is attributable to the pass.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace bt;
using namespace bt::test;

namespace {

class LifetimesTest : public BTTest {
protected:
  LifetimesTest() {
    module = ModuleOp::create(loc("m"));
    b.setInsertionPointToEnd(module->getBody());
    local = KVCacheType::get(&ctx, CacheScope::local, 2, 2, 2, 6, 32, f32());
    global = KVCacheType::get(&ctx, CacheScope::global, ShapedType::kDynamic, 2,
                              2, 512, 32, f32());
    kv = tensor({2, 1, 2, 32});
  }

  /// `func.func @name(%kv: tensor<2x1x2x32xf32>, %n: index, extra...)
  ///   -> results`; the builder is left at the start of its body.
  func::FuncOp startFunction(llvm::StringRef name,
                             llvm::ArrayRef<Type> extraArgs = {},
                             llvm::ArrayRef<Type> results = {}) {
    b.setInsertionPointToEnd(module->getBody());
    llvm::SmallVector<Type> args{kv, b.getIndexType()};
    args.append(extraArgs.begin(), extraArgs.end());
    auto fn = b.create<func::FuncOp>(loc(name), name,
                                     b.getFunctionType(args, results));
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    key = entry->getArgument(0);
    batch = entry->getArgument(1);
    return fn;
  }

  Value alloc(KVCacheType type, llvm::StringRef name = "alloc") {
    return b.create<KVAllocOp>(loc(name), type,
                               type.hasStaticBatch() ? Value() : batch);
  }
  Value append(Value cache, llvm::StringRef name = "append") {
    return b.create<KVAppendOp>(loc(name), cache, 0, key, key).getResult();
  }
  Value attend(Value cache, llvm::StringRef name = "attend") {
    return b.create<KVAttendOp>(loc(name), kv, key, cache, 0,
                                llvm::APFloat(0.125));
  }
  void release(Value cache, llvm::StringRef name = "release") {
    b.create<KVReleaseOp>(loc(name), cache);
  }
  void ret(ValueRange values = {}) {
    b.create<func::ReturnOp>(loc("return"), values);
  }

  /// Verifies the module (must succeed), then runs the pass.
  LogicalResult runPass() {
    if (failed(verify(*module))) {
      ADD_FAILURE() << "test IR does not verify:\n" << diags.dump();
      return failure();
    }
    PassManager pm(&ctx);
    pm.addPass(createBTVerifyKVLifetimes());
    return pm.run(*module);
  }

  OpBuilder b{&ctx};
  OwningOpRef<ModuleOp> module;
  KVCacheType local, global;
  Type kv;
  Value key, batch;
};

TEST_F(LifetimesTest, AllocAppendAttendReleasePasses) {
  startFunction("f");
  Value c0 = alloc(local);
  Value c1 = append(c0);
  attend(c1);
  b.create<KVLengthOp>(loc("length"), c1, 0);
  Value c2 = append(c1, "append2");
  attend(c2, "attend2");
  release(c2);
  ret();
  EXPECT_TRUE(succeeded(runPass())) << diags.dump();
  EXPECT_TRUE(diags.all().empty()) << diags.dump();
}

TEST_F(LifetimesTest, GlobalCacheWithDynamicBatchPasses) {
  startFunction("f");
  Value c = alloc(global);
  release(append(c));
  ret();
  EXPECT_TRUE(succeeded(runPass())) << diags.dump();
}

TEST_F(LifetimesTest, MissingReleaseIsALeak) {
  startFunction("f");
  Value c0 = alloc(local);
  attend(append(c0));
  ret();
  EXPECT_TRUE(failed(runPass()));
  ASSERT_TRUE(hasErrorAt(diags,
                         "KV cache is not released on this path: it is still "
                         "live at the end of the function (leak)",
                         loc("return")));
  // The value that leaks is the appended one: the note is at its definition.
  const CapturedDiagnostic *d = diags.findError("leak");
  ASSERT_EQ(d->notes.size(), 1u);
  EXPECT_EQ(d->notes[0], "KV cache defined here");
  EXPECT_EQ(d->noteLocs[0], loc("append"));
  EXPECT_EQ(diags.numErrors(), 1u) << diags.dump();
}

TEST_F(LifetimesTest, UnusedAllocIsALeakNotedAtTheAlloc) {
  startFunction("f");
  alloc(local, "the_alloc");
  ret();
  EXPECT_TRUE(failed(runPass()));
  ASSERT_TRUE(hasErrorAt(diags, "(leak)", loc("return")));
  const CapturedDiagnostic *d = diags.findError("(leak)");
  ASSERT_EQ(d->notes.size(), 1u);
  EXPECT_EQ(d->notes[0], "KV cache allocated here");
  EXPECT_EQ(d->noteLocs[0], loc("the_alloc"));
}

TEST_F(LifetimesTest, UseAfterReleaseIsRejected) {
  startFunction("f");
  Value c1 = append(alloc(local));
  release(c1, "the_release");
  attend(c1, "late_attend");
  ret();
  EXPECT_TRUE(failed(runPass()));
  ASSERT_TRUE(hasErrorAt(diags,
                         "'bt.kv_attend' uses a KV cache after it was released",
                         loc("late_attend")));
  const CapturedDiagnostic *d = diags.findError("after it was released");
  ASSERT_EQ(d->notes.size(), 1u);
  EXPECT_EQ(d->notes[0], "released here");
  EXPECT_EQ(d->noteLocs[0], loc("the_release"));
}

TEST_F(LifetimesTest, LengthAfterReleaseIsRejected) {
  startFunction("f");
  Value c = alloc(local);
  release(c);
  b.create<KVLengthOp>(loc("length"), c, 0);
  ret();
  EXPECT_TRUE(failed(runPass()));
  EXPECT_TRUE(hasErrorAt(diags,
                         "'bt.kv_length' uses a KV cache after it was released",
                         loc("length")));
}

TEST_F(LifetimesTest, DoubleReleaseIsRejected) {
  startFunction("f");
  Value c = alloc(local);
  release(c, "first");
  release(c, "second");
  ret();
  EXPECT_TRUE(failed(runPass()));
  EXPECT_TRUE(hasErrorAt(diags, "KV cache released twice", loc("second")));
}

TEST_F(LifetimesTest, UsingTheValueConsumedByAppendIsRejected) {
  startFunction("f");
  Value c0 = alloc(local);
  Value c1 = append(c0, "the_append");
  attend(c0, "stale_attend");
  release(c1);
  ret();
  EXPECT_TRUE(failed(runPass()));
  ASSERT_TRUE(hasErrorAt(diags,
                         "'bt.kv_attend' uses a KV cache after it was consumed "
                         "by 'bt.kv_append' (use the value it returned)",
                         loc("stale_attend")));
  const CapturedDiagnostic *d = diags.findError("consumed by");
  ASSERT_EQ(d->notes.size(), 1u);
  EXPECT_EQ(d->notes[0], "consumed here");
  EXPECT_EQ(d->noteLocs[0], loc("the_append"));
}

TEST_F(LifetimesTest, BlockDecoderConsumesItsCache) {
  TinyModelSpec spec;
  NeoXConfigAttr config = spec.blockConfig(&ctx);
  declareParams(b, loc("params"), getNeoXStackParams(kBlockParams, config), 0,
                f32());
  auto cacheType = KVCacheType::get(&ctx, CacheScope::global, 2, 2, 2, 16, 32,
                                    f32());
  auto build = [&](bool reuseStaleCache) {
    func::FuncOp fn = startFunction(reuseStaleCache ? "stale" : "ok",
                                    {tensor({2, 1, 64})});
    Value x = fn.getArgument(2);
    Value c0 = alloc(cacheType);
    auto bd = b.create<BlockDecoderOp>(loc("block_decoder"), x.getType(),
                                       cacheType, x, Value(), c0, kBlockParams,
                                       config);
    if (reuseStaleCache)
      b.create<KVLengthOp>(loc("stale_length"), c0, 0);
    release(bd.getResultCache());
    ret();
  };
  build(/*reuseStaleCache=*/false);
  EXPECT_TRUE(succeeded(runPass())) << diags.dump();

  build(/*reuseStaleCache=*/true);
  EXPECT_TRUE(failed(runPass()));
  EXPECT_TRUE(hasErrorAt(diags,
                         "'bt.kv_length' uses a KV cache after it was consumed "
                         "by 'bt.block_decoder'",
                         loc("stale_length")));
  EXPECT_EQ(diags.numErrors(), 1u) << diags.dump();
}

TEST_F(LifetimesTest, GlobalCacheMayBeReturnedOrReceived) {
  // Ownership moves to the caller / from the caller.
  startFunction("make", {}, {global});
  ret(append(alloc(global)));
  func::FuncOp consume = startFunction("consume", {global});
  release(append(consume.getArgument(2)));
  ret();
  EXPECT_TRUE(succeeded(runPass())) << diags.dump();
}

TEST_F(LifetimesTest, ReceivedCacheMustBeConsumed) {
  startFunction("f", {global});
  ret();
  EXPECT_TRUE(failed(runPass()));
  ASSERT_TRUE(hasErrorAt(diags, "still live at the end of the function (leak)",
                         loc("return")));
  EXPECT_EQ(diags.findError("(leak)")->notes.at(0), "KV cache received here");
}

TEST_F(LifetimesTest, LocalCacheCannotBeReturned) {
  startFunction("f", {}, {local});
  ret(append(alloc(local)));
  EXPECT_TRUE(failed(runPass()));
  EXPECT_TRUE(hasErrorAt(diags,
                         "local KV cache escapes the region it was allocated "
                         "in: it is returned from the function",
                         loc("return")));
}

TEST_F(LifetimesTest, LocalCacheCannotBeAFunctionArgument) {
  startFunction("f", {local});
  ret();
  EXPECT_TRUE(failed(runPass()));
  EXPECT_TRUE(hasError(diags, "a local KV cache cannot be a function argument"));
}

TEST_F(LifetimesTest, ReleaseInOnlyOneBranchOfAnIfLeaks) {
  func::FuncOp fn = startFunction("f", {b.getI1Type()});
  Value c = alloc(local);
  auto ifOp = b.create<scf::IfOp>(loc("if"), TypeRange(), fn.getArgument(2),
                                  /*withElseRegion=*/true);
  b.setInsertionPointToStart(ifOp.thenBlock());
  release(c, "then_release");
  ifOp.elseBlock()->getTerminator()->setLoc(loc("else_yield"));
  b.setInsertionPointAfter(ifOp);
  ret();
  EXPECT_TRUE(failed(runPass()));
  EXPECT_TRUE(hasErrorAt(diags,
                         "KV cache is still live at the end of this branch but "
                         "is consumed on another path through the 'scf.if'",
                         loc("else_yield")));
}

TEST_F(LifetimesTest, IfYieldingTheAppendedOrTheOriginalCachePasses) {
  func::FuncOp fn = startFunction("f", {b.getI1Type()});
  Value c0 = alloc(local);
  llvm::SmallVector<Type> resultTypes{local};
  auto ifOp = b.create<scf::IfOp>(loc("if"), resultTypes, fn.getArgument(2),
                                  /*withElseRegion=*/true);
  b.setInsertionPointToStart(ifOp.thenBlock());
  b.create<scf::YieldOp>(loc("y1"), append(c0));
  b.setInsertionPointToStart(ifOp.elseBlock());
  b.create<scf::YieldOp>(loc("y2"), c0);
  b.setInsertionPointAfter(ifOp);
  release(ifOp.getResult(0));
  ret();
  EXPECT_TRUE(succeeded(runPass())) << diags.dump();
}

TEST_F(LifetimesTest, LoopCarriedCachePasses) {
  startFunction("f");
  Value c0 = alloc(global);
  Value lb = b.create<arith::ConstantIndexOp>(loc("c0"), 0);
  Value ub = b.create<arith::ConstantIndexOp>(loc("c4"), 4);
  Value step = b.create<arith::ConstantIndexOp>(loc("c1"), 1);
  auto loop = b.create<scf::ForOp>(
      loc("for"), lb, ub, step, ValueRange{c0},
      [&](OpBuilder &nested, Location, Value, ValueRange iterArgs) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(),
                            nested.getInsertionPoint());
        Value next = append(iterArgs[0]);
        attend(next);
        b.create<scf::YieldOp>(loc("yield"), next);
      });
  release(loop.getResult(0));
  ret();
  EXPECT_TRUE(succeeded(runPass())) << diags.dump();
}

TEST_F(LifetimesTest, ReleasingAnOuterCacheInsideALoopIsRejected) {
  startFunction("f");
  Value c0 = alloc(global);
  Value lb = b.create<arith::ConstantIndexOp>(loc("c0"), 0);
  Value ub = b.create<arith::ConstantIndexOp>(loc("c4"), 4);
  Value step = b.create<arith::ConstantIndexOp>(loc("c1"), 1);
  b.create<scf::ForOp>(loc("for"), lb, ub, step, ValueRange{},
                       [&](OpBuilder &nested, Location, Value, ValueRange) {
                         OpBuilder::InsertionGuard guard(b);
                         b.setInsertionPoint(nested.getInsertionBlock(),
                                             nested.getInsertionPoint());
                         release(c0, "loop_release");
                         b.create<scf::YieldOp>(loc("yield"));
                       });
  ret();
  EXPECT_TRUE(failed(runPass()));
  EXPECT_TRUE(hasErrorAt(diags,
                         "KV cache defined outside the 'scf.for' loop is "
                         "consumed inside it, once per iteration",
                         loc("loop_release")));
}

TEST_F(LifetimesTest, LocalCacheAllocatedInALoopBodyCannotBeYielded) {
  startFunction("f");
  Value c0 = alloc(local, "outer_alloc");
  Value lb = b.create<arith::ConstantIndexOp>(loc("c0"), 0);
  Value ub = b.create<arith::ConstantIndexOp>(loc("c4"), 4);
  Value step = b.create<arith::ConstantIndexOp>(loc("c1"), 1);
  auto loop = b.create<scf::ForOp>(
      loc("for"), lb, ub, step, ValueRange{c0},
      [&](OpBuilder &nested, Location, Value, ValueRange iterArgs) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(),
                            nested.getInsertionPoint());
        release(iterArgs[0], "release_carried");
        Value fresh = alloc(local, "inner_alloc");
        b.create<scf::YieldOp>(loc("yield"), fresh);
      });
  release(loop.getResult(0));
  ret();
  EXPECT_TRUE(failed(runPass()));
  EXPECT_TRUE(hasErrorAt(diags,
                         "local KV cache escapes the region it was allocated in",
                         loc("yield")));
}

TEST_F(LifetimesTest, BranchReleasingOnOnlyOneEdgeLeaks) {
  // ^entry: %c = alloc; cf.cond_br %p, ^a, ^b
  // ^a: release %c; cf.br ^exit      ^b: cf.br ^exit      ^exit: return
  func::FuncOp fn = startFunction("f", {b.getI1Type()});
  Value c = alloc(local);
  Block *entry = b.getInsertionBlock();
  Block *a = b.createBlock(&fn.getBody());
  Block *bb = b.createBlock(&fn.getBody());
  Block *exit = b.createBlock(&fn.getBody());
  b.setInsertionPointToEnd(entry);
  b.create<cf::CondBranchOp>(loc("cond_br"), fn.getArgument(2), a, ValueRange{},
                             bb, ValueRange{});
  b.setInsertionPointToEnd(a);
  release(c);
  b.create<cf::BranchOp>(loc("br_a"), exit);
  b.setInsertionPointToEnd(bb);
  b.create<cf::BranchOp>(loc("br_b"), exit);
  b.setInsertionPointToEnd(exit);
  ret();
  EXPECT_TRUE(failed(runPass()));
  // Reported at the edge that still holds the cache (^b), not at ^a.
  const CapturedDiagnostic *d = diags.findError("into a successor block");
  ASSERT_TRUE(d) << diags.dump();
  EXPECT_TRUE(d->loc == loc("br_b")) << diags.dump();
  EXPECT_NE(d->message.find("leak"), std::string::npos);
}

TEST_F(LifetimesTest, ReleaseOnBothEdgesPasses) {
  func::FuncOp fn = startFunction("f", {b.getI1Type()});
  Value c = alloc(local);
  Block *entry = b.getInsertionBlock();
  Block *a = b.createBlock(&fn.getBody());
  Block *bb = b.createBlock(&fn.getBody());
  Block *exit = b.createBlock(&fn.getBody());
  b.setInsertionPointToEnd(entry);
  b.create<cf::CondBranchOp>(loc("cond_br"), fn.getArgument(2), a, ValueRange{},
                             bb, ValueRange{});
  b.setInsertionPointToEnd(a);
  release(c, "release_a");
  b.create<cf::BranchOp>(loc("br_a"), exit);
  b.setInsertionPointToEnd(bb);
  release(append(c), "release_b");
  b.create<cf::BranchOp>(loc("br_b"), exit);
  b.setInsertionPointToEnd(exit);
  ret();
  EXPECT_TRUE(succeeded(runPass())) << diags.dump();
}

TEST_F(LifetimesTest, UnstructuredLoopCarryingACachePasses) {
  // ^entry: %c0 = alloc; cf.br ^header(%c0)
  // ^header(%c): cf.cond_br %p, ^body, ^exit
  // ^body: %c1 = append %c; cf.br ^header(%c1)
  // ^exit: release %c; return
  func::FuncOp fn = startFunction("f", {b.getI1Type()});
  Value c0 = alloc(local);
  Block *entry = b.getInsertionBlock();
  Block *header = b.createBlock(&fn.getBody(), {}, {local}, {loc("arg")});
  Block *body = b.createBlock(&fn.getBody());
  Block *exit = b.createBlock(&fn.getBody());
  b.setInsertionPointToEnd(entry);
  b.create<cf::BranchOp>(loc("br_entry"), header, ValueRange{c0});
  b.setInsertionPointToEnd(header);
  b.create<cf::CondBranchOp>(loc("cond_br"), fn.getArgument(2), body,
                             ValueRange{}, exit, ValueRange{});
  b.setInsertionPointToEnd(body);
  Value c1 = append(header->getArgument(0));
  b.create<cf::BranchOp>(loc("back_edge"), header, ValueRange{c1});
  b.setInsertionPointToEnd(exit);
  release(header->getArgument(0));
  ret();
  EXPECT_TRUE(succeeded(runPass())) << diags.dump();
}

TEST_F(LifetimesTest, WhileLoopCarryingACachePasses) {
  startFunction("f");
  Value c0 = alloc(global);
  Value limit = b.create<arith::ConstantIndexOp>(loc("limit"), 8);
  Type globalTy = global;
  auto loop = b.create<scf::WhileOp>(
      loc("while"), TypeRange(globalTy), ValueRange{c0},
      [&](OpBuilder &nested, Location, ValueRange args) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(),
                            nested.getInsertionPoint());
        Value len = b.create<KVLengthOp>(loc("length"), args[0], 0);
        Value more = b.create<arith::CmpIOp>(loc("cmp"), arith::CmpIPredicate::ult,
                                             len, limit);
        b.create<scf::ConditionOp>(loc("condition"), more, args);
      },
      [&](OpBuilder &nested, Location, ValueRange args) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(),
                            nested.getInsertionPoint());
        b.create<scf::YieldOp>(loc("yield"), append(args[0]));
      });
  release(loop.getResult(0));
  ret();
  EXPECT_TRUE(succeeded(runPass())) << diags.dump();
}

TEST_F(LifetimesTest, EveryFunctionIsCheckedAndOnlyTheBadOneIsReported) {
  startFunction("good");
  release(append(alloc(local)));
  ret();
  startFunction("bad");
  alloc(local, "leaked");
  b.create<func::ReturnOp>(loc("bad_return"));
  EXPECT_TRUE(failed(runPass()));
  EXPECT_EQ(diags.numErrors(), 1u) << diags.dump();
  EXPECT_TRUE(hasErrorAt(diags, "(leak)", loc("bad_return")));
}

TEST_F(LifetimesTest, OtherOpsCannotUseACache) {
  // Only KV-cache ops, control flow and calls may take a cache operand; an
  // arith.select between two caches would hide which one is consumed.
  func::FuncOp fn = startFunction("f", {b.getI1Type()});
  Value c0 = alloc(local, "a0");
  Value c1 = alloc(local, "a1");
  Value sel = b.create<arith::SelectOp>(loc("select"), fn.getArgument(2), c0, c1);
  release(sel);
  ret();
  EXPECT_TRUE(failed(runPass()));
  EXPECT_TRUE(hasErrorAt(diags,
                         "'arith.select' cannot use a !bt.kv_cache value: only "
                         "bt KV-cache ops, control flow and calls may",
                         loc("select")));
}

} // namespace
