//===- OmpStaticPartition.cpp - worksharing loops without the runtime's scheduler ===//
//
// bt-omp-static-partition (Passes.td): each thread of an `omp.parallel`
// whose body is one worksharing loop computes its own contiguous share of
// the iterations and runs it as an `scf.for`, instead of asking libomp's
// `__kmpc_for_static_init` for it.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace bt {
#define GEN_PASS_DEF_BTOMPSTATICPARTITION
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kThreadNum = "omp_get_thread_num";
constexpr llvm::StringLiteral kNumThreads = "omp_get_num_threads";

/// The loop nest of `wsloop` when the rewrite keeps its meaning: a plain
/// static worksharing loop (no reduction, linear, ordered, order, simd or
/// chunked / non-static schedule clause), the last op of an
/// `omp.parallel`'s region (its implicit barrier is then the region's end),
/// over index bounds with an exclusive upper bound and a one-block body.
omp::LoopNestOp partitionable(omp::WsloopOp wsloop) {
  if (!wsloop.getReductionVars().empty() || !wsloop.getLinearVars().empty() ||
      wsloop.getScheduleChunkVar() || wsloop.getOrderedVal() ||
      wsloop.getOrderVal() || wsloop.getSimdModifier() ||
      wsloop.getScheduleModifier())
    return nullptr;
  if (std::optional<omp::ClauseScheduleKind> kind = wsloop.getScheduleVal())
    if (*kind != omp::ClauseScheduleKind::Static)
      return nullptr;
  auto parallel = dyn_cast<omp::ParallelOp>(wsloop->getParentOp());
  if (!parallel || !parallel.getReductionVars().empty())
    return nullptr;
  Operation *next = wsloop->getNextNode();
  if (!next || !isa<omp::TerminatorOp>(next))
    return nullptr;
  auto nest = dyn_cast_or_null<omp::LoopNestOp>(wsloop.getWrappedLoop());
  if (!nest || nest.getInclusive() || !nest.getRegion().hasOneBlock())
    return nullptr;
  for (Value v : nest.getLowerBound())
    if (!v.getType().isIndex())
      return nullptr;
  if (!isa<omp::YieldOp>(nest.getRegion().front().getTerminator()))
    return nullptr;
  return nest;
}

/// `func.func private @name() -> i32` in `module` (declared once).
func::FuncOp declareI32Query(ModuleOp module, StringRef name) {
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return f;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto f = b.create<func::FuncOp>(
      module.getLoc(), name,
      b.getFunctionType({}, {b.getI32Type()}));
  f.setPrivate();
  return f;
}

/// Replaces `wsloop` (around `nest`) by this thread's share of the
/// iterations: the collapsed iteration space [0, N) (N = Π ceil((ub - lb) /
/// step), row-major) is cut into ceil(N / T) iterations per thread, thread
/// t taking [t ceil(N / T), min((t + 1) ceil(N / T), N)), each iteration
/// delinearized back to the nest's induction variables.
void partition(IRRewriter &rewriter, omp::WsloopOp wsloop,
               omp::LoopNestOp nest, func::FuncOp threadNum,
               func::FuncOp numThreads) {
  Location loc = wsloop.getLoc();
  rewriter.setInsertionPoint(wsloop);
  auto toIndex = [&](Value i32) -> Value {
    return rewriter.create<arith::IndexCastOp>(loc, rewriter.getIndexType(),
                                               i32);
  };
  Value tid = toIndex(rewriter.create<func::CallOp>(loc, threadNum).getResult(0));
  Value nt = toIndex(rewriter.create<func::CallOp>(loc, numThreads).getResult(0));
  Value zero = rewriter.create<arith::ConstantIndexOp>(loc, 0);
  Value one = rewriter.create<arith::ConstantIndexOp>(loc, 1);
  // ceil(a / b) for a >= 0, b > 0 as (a + b - 1) / b (arith.ceildivui
  // would need arith-expand before the LLVM conversion).
  auto ceilDiv = [&](Value a, Value b) -> Value {
    Value bm1 = rewriter.create<arith::SubIOp>(loc, b, one);
    Value sum = rewriter.create<arith::AddIOp>(loc, a, bm1);
    return rewriter.create<arith::DivUIOp>(loc, sum, b);
  };
  SmallVector<Value> trips;
  Value total = one;
  for (auto [lb, ub, step] :
       llvm::zip(nest.getLowerBound(), nest.getUpperBound(), nest.getStep())) {
    Value span = rewriter.create<arith::SubIOp>(loc, ub, lb);
    span = rewriter.create<arith::MaxSIOp>(loc, span, zero);
    Value n = ceilDiv(span, step);
    trips.push_back(n);
    total = rewriter.create<arith::MulIOp>(loc, total, n);
  }
  Value chunk = ceilDiv(total, nt);
  Value begin = rewriter.create<arith::MulIOp>(loc, tid, chunk);
  begin = rewriter.create<arith::MinUIOp>(loc, begin, total);
  Value end = rewriter.create<arith::AddIOp>(loc, begin, chunk);
  end = rewriter.create<arith::MinUIOp>(loc, end, total);
  auto loop = rewriter.create<scf::ForOp>(loc, begin, end, one);
  rewriter.setInsertionPointToStart(loop.getBody());
  // Row-major delinearization: the last dim varies fastest.
  SmallVector<Value> ivs(trips.size());
  Value rest = loop.getInductionVar();
  for (size_t k = trips.size(); k-- > 0;) {
    Value idx = rest;
    if (k > 0) {
      idx = rewriter.create<arith::RemUIOp>(loc, rest, trips[k]);
      rest = rewriter.create<arith::DivUIOp>(loc, rest, trips[k]);
    }
    Value scaled = rewriter.create<arith::MulIOp>(loc, idx, nest.getStep()[k]);
    ivs[k] =
        rewriter.create<arith::AddIOp>(loc, nest.getLowerBound()[k], scaled);
  }
  Block &body = nest.getRegion().front();
  rewriter.eraseOp(body.getTerminator());
  rewriter.inlineBlockBefore(&body, loop.getBody()->getTerminator(), ivs);
  rewriter.eraseOp(wsloop);
}

struct OmpStaticPartitionPass
    : public bt::impl::BTOmpStaticPartitionBase<OmpStaticPartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<omp::WsloopOp, omp::LoopNestOp>> loops;
    module.walk([&](omp::WsloopOp wsloop) {
      if (omp::LoopNestOp nest = partitionable(wsloop))
        loops.emplace_back(wsloop, nest);
    });
    if (loops.empty())
      return;
    func::FuncOp threadNum = declareI32Query(module, kThreadNum);
    func::FuncOp numThreads = declareI32Query(module, kNumThreads);
    IRRewriter rewriter(&getContext());
    for (auto [wsloop, nest] : loops)
      partition(rewriter, wsloop, nest, threadNum, numThreads);
  }
};

} // namespace
