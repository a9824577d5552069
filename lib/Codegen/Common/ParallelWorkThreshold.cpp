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

namespace bt {
#define GEN_PASS_DEF_BTPARALLELWORKTHRESHOLD
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

/// The constant trip count of `loop`, or 1 when a bound or the step is not a
/// constant (or the loop is empty or the count overflows).
int64_t constantTripCount(scf::ForOp loop) {
  APInt lb, ub, step;
  if (!matchPattern(loop.getLowerBound(), m_ConstantInt(&lb)) ||
      !matchPattern(loop.getUpperBound(), m_ConstantInt(&ub)) ||
      !matchPattern(loop.getStep(), m_ConstantInt(&step)))
    return 1;
  int64_t s = step.getSExtValue(), span = ub.getSExtValue() - lb.getSExtValue();
  if (s <= 0 || span <= 0)
    return 1;
  return (span + s - 1) / s;
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
        if (!nest)
          nest = n;
        return WalkResult::interrupt();
      });
      if (!nest)
        continue;
      auto definedOutside = [&](Value v) {
        return !parallel->isAncestor(v.getParentBlock()->getParentOp()) &&
               v.getParentRegion() != &parallel.getRegion();
      };
      bool hoistable = true;
      for (Value v : nest->getOperands())
        hoistable &= definedOutside(v);
      if (!hoistable)
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
        APInt lb, ub, step;
        if (matchPattern(nest.getLowerBound()[d], m_ConstantInt(&lb)) &&
            matchPattern(nest.getUpperBound()[d], m_ConstantInt(&ub)) &&
            matchPattern(nest.getStep()[d], m_ConstantInt(&step)) &&
            step.getSExtValue() > 0) {
          int64_t span = std::max<int64_t>(0, ub.getSExtValue() - lb.getSExtValue());
          int64_t t = (span + step.getSExtValue() - 1) / step.getSExtValue();
          staticTrips = t != 0 && staticTrips > INT64_MAX / t ? INT64_MAX
                                                              : staticTrips * t;
        } else {
          allStatic = false;
        }
      }
      if (allStatic) {
        if (staticTrips >= needed)
          continue; // always large enough: no clause
        Value no = b.create<arith::ConstantIntOp>(loc, 0, 1);
        parallel.getIfExprMutable().assign(no);
        continue;
      }
      // Dynamic: trips = prod ceildiv(ub - lb, step) (index arithmetic,
      // loop_nest's bounds are `index` here), compared with `needed`.
      Value trips;
      for (unsigned d = 0; d < nest.getNumLoops(); ++d) {
        Value lb = nest.getLowerBound()[d], ub = nest.getUpperBound()[d],
              step = nest.getStep()[d];
        if (!lb.getType().isIndex())
          return; // not what convert-scf-to-openmp makes; leave as is
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
