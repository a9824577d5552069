//===- ParallelWorkThreshold.cpp - serialize small OpenMP loops -----------===//
//
// bt-parallel-work-threshold: an `if` clause on each omp.parallel worksharing
// loop of convert-scf-to-openmp, so that loops with little work run on the
// calling thread instead of forking the pool (Passes.td).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

#include <optional>

namespace bt {
#define GEN_PASS_DEF_BTPARALLELWORKTHRESHOLD
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

/// The trip count of a loop with constant bounds and a positive constant
/// step (0 when empty, saturating at INT64_MAX); nullopt otherwise.
std::optional<int64_t> constantTrips(Value lower, Value upper, Value step) {
  APInt lb, ub, st;
  if (!matchPattern(lower, m_ConstantInt(&lb)) ||
      !matchPattern(upper, m_ConstantInt(&ub)) ||
      !matchPattern(step, m_ConstantInt(&st)) || st.getSExtValue() <= 0)
    return std::nullopt;
  const int64_t s = st.getSExtValue(),
                span = std::max<int64_t>(0, ub.getSExtValue() - lb.getSExtValue());
  return span / s + (span % s != 0);
}

/// The constant trip count of `loop`, or 1 when a bound or the step is not a
/// constant or the loop is empty.
int64_t constantTripCount(scf::ForOp loop) {
  return std::max<int64_t>(
      1, constantTrips(loop.getLowerBound(), loop.getUpperBound(),
                       loop.getStep())
             .value_or(1));
}

/// The largest product of constant trip counts along a chain of scf.for
/// nested in `region` (1 without loops), saturating at INT64_MAX.
int64_t innerWork(Region &region) {
  Operation *top = region.getParentOp();
  int64_t best = 1;
  region.walk([&](scf::ForOp loop) {
    int64_t product = 1;
    for (Operation *op = loop; op != nullptr && op != top;
         op = op->getParentOp()) {
      auto f = dyn_cast<scf::ForOp>(op);
      if (!f)
        continue;
      const int64_t t = constantTripCount(f);
      product = product > INT64_MAX / t ? INT64_MAX : product * t;
    }
    best = std::max(best, product);
  });
  return best;
}

struct ParallelWorkThresholdPass
    : public bt::impl::BTParallelWorkThresholdBase<ParallelWorkThresholdPass> {
  using BTParallelWorkThresholdBase::BTParallelWorkThresholdBase;

  void runOnOperation() override {
    SmallVector<omp::ParallelOp> regions;
    getOperation()->walk([&](omp::ParallelOp p) { regions.push_back(p); });
    for (omp::ParallelOp parallel : regions) {
      if (parallel.getIfExpr())
        continue; // the user's own clause
      // The region convert-scf-to-openmp makes: omp.parallel { omp.wsloop {
      // omp.loop_nest } } (possibly after allocas and before a terminator).
      omp::LoopNestOp nest;
      parallel.getRegion().walk([&](omp::LoopNestOp n) {
        nest = n;
        return WalkResult::interrupt();
      });
      if (!nest)
        continue;
      // Bounds defined in front of the region (to compute the condition
      // there), of type index (as convert-scf-to-openmp makes them).
      bool usable = true;
      for (Value v : nest->getOperands())
        usable &= v.getType().isIndex() &&
                  !parallel.getRegion().isAncestor(v.getParentRegion());
      if (!usable)
        continue;

      const int64_t inner = std::max<int64_t>(1, innerWork(nest.getRegion()));
      // Iterations of the parallel dims needed: ceil(min-work / inner).
      const int64_t needed = (minWork + inner - 1) / inner;

      OpBuilder b(parallel);
      Location loc = parallel.getLoc();
      // Static bounds: decide now.
      int64_t staticTrips = 1;
      bool allStatic = true;
      for (unsigned d = 0; d < nest.getNumLoops(); ++d) {
        std::optional<int64_t> t = constantTrips(
            nest.getLowerBound()[d], nest.getUpperBound()[d], nest.getStep()[d]);
        if (!t)
          allStatic = false;
        else
          staticTrips = *t != 0 && staticTrips > INT64_MAX / *t
                            ? INT64_MAX
                            : staticTrips * *t;
      }
      if (allStatic) {
        if (staticTrips >= needed)
          continue; // always large enough: no clause
        Value no = b.create<arith::ConstantIntOp>(loc, 0, 1);
        parallel.getIfExprMutable().assign(no);
        continue;
      }
      // Dynamic: trips = prod ceildiv(ub - lb, step), compared with `needed`.
      Value trips;
      for (unsigned d = 0; d < nest.getNumLoops(); ++d) {
        Value lb = nest.getLowerBound()[d], ub = nest.getUpperBound()[d],
              step = nest.getStep()[d];
        Value span = b.create<arith::SubIOp>(loc, ub, lb);
        Value t = b.create<arith::CeilDivSIOp>(loc, span, step);
        trips = trips ? b.create<arith::MulIOp>(loc, trips, t).getResult() : t;
      }
      Value bound = b.create<arith::ConstantIndexOp>(loc, needed);
      Value big = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge,
                                          trips, bound);
      parallel.getIfExprMutable().assign(big);
    }
  }
};

} // namespace
