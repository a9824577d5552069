//===- ParallelWorkThreshold.cpp - serialize small OpenMP loops -----------===//
//
// bt-parallel-work-threshold: an `if` clause on each omp.parallel worksharing
// loop of convert-scf-to-openmp, so that loops with little work run on the
// calling thread instead of forking the pool (Passes.td).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Affine/Transforms/Transforms.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"
#include "llvm/ADT/DenseMap.h"

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

/// The trip count of a loop from `lower` to `upper` by `step` (> 0, as
/// scf.for and omp.loop_nest require), computed in front of the loop: 0 when
/// empty, else ceil((upper - lower) / step). Plain arith ops (no
/// arith.ceildivsi, which the CPU pipeline does not expand).
Value tripCount(OpBuilder &b, Location loc, Value lower, Value upper,
                Value step) {
  Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
  Value one = b.create<arith::ConstantIndexOp>(loc, 1);
  Value span = b.create<arith::SubIOp>(loc, upper, lower);
  span = b.create<arith::MaxSIOp>(loc, span, zero);
  Value last = b.create<arith::SubIOp>(loc, step, one);
  span = b.create<arith::AddIOp>(loc, span, last);
  return b.create<arith::DivUIOp>(loc, span, step);
}

/// The estimated work of one iteration of a parallel loop's body: the largest,
/// over the chains of scf.for nested in `region`, of the product of their
/// trip counts. A trip count is the loop's constant one; else one computed at
/// run time in front of `parallel`: from the loop's bounds and step when they
/// are defined there, or, for an upper bound defined inside (a chunk of rows,
/// the keys a chunk of attention rows sees: LayerEmitter::attention), from
/// the largest value that bound can take, as ValueBoundsOpInterface derives
/// it from values defined in front (the lower bound and the step constant or
/// defined in front); else 1. `staticWork` is the largest product of
/// constant trip counts (1 without loops, saturating at INT64_MAX); the
/// returned value, null when no chain has a run-time trip count, is the
/// largest product over all chains (index, computed in front of `parallel`).
Value innerWork(OpBuilder &b, Operation *parallel, Region &region,
                int64_t &staticWork) {
  Operation *top = region.getParentOp();
  Region &outside = parallel->getRegion(0);
  Location loc = parallel->getLoc();
  auto defined = [&](Value v) {
    return v.getType().isIndex() && !outside.isAncestor(v.getParentRegion());
  };
  // `v` usable in front of `parallel`: itself, or its constant; else null.
  auto inFront = [&](Value v) -> Value {
    if (defined(v))
      return v;
    if (std::optional<int64_t> c = getConstantIntValue(v))
      return b.create<arith::ConstantIndexOp>(loc, *c);
    return Value();
  };
  // Run-time trip counts (upper bounds of them) in front of `parallel`, per
  // loop; null where none can be computed there.
  DenseMap<Operation *, Value> runTimeTrips;
  auto tripsInFront = [&](scf::ForOp f) -> Value {
    auto [it, inserted] = runTimeTrips.try_emplace(f, Value());
    if (!inserted)
      return it->second;
    Value lower = inFront(f.getLowerBound()), step = inFront(f.getStep());
    if (!lower || !step)
      return Value();
    Value upper = f.getUpperBound();
    if (!defined(upper)) {
      FailureOr<OpFoldResult> bound = affine::reifyIndexValueBound(
          b, loc, presburger::BoundType::UB, upper,
          [&](Value v, std::optional<int64_t>, ValueBoundsConstraintSet &) {
            return !outside.isAncestor(v.getParentRegion());
          },
          /*closedUB=*/true);
      if (failed(bound))
        return Value();
      upper = getValueOrCreateConstantIndexOp(b, loc, *bound);
    }
    return runTimeTrips[f] = tripCount(b, loc, lower, upper, step);
  };
  // Per set of run-time loops of a chain, the largest constant factor.
  SmallVector<std::pair<SmallVector<scf::ForOp>, int64_t>> dynamicChains;
  staticWork = 1;
  region.walk([&](scf::ForOp loop) {
    int64_t product = 1;
    SmallVector<scf::ForOp> dynamic;
    for (Operation *op = loop; op != nullptr && op != top;
         op = op->getParentOp()) {
      auto f = dyn_cast<scf::ForOp>(op);
      if (!f)
        continue;
      int64_t t = 1;
      if (std::optional<int64_t> c = constantTrips(
              f.getLowerBound(), f.getUpperBound(), f.getStep()))
        t = std::max<int64_t>(1, *c);
      else if (tripsInFront(f))
        dynamic.push_back(f);
      product = product > INT64_MAX / t ? INT64_MAX : product * t;
    }
    if (dynamic.empty()) {
      staticWork = std::max(staticWork, product);
      return;
    }
    for (auto &[loops, factor] : dynamicChains)
      if (loops == dynamic) {
        factor = std::max(factor, product);
        return;
      }
    dynamicChains.push_back({std::move(dynamic), product});
  });
  if (dynamicChains.empty())
    return Value();
  Value work = b.create<arith::ConstantIndexOp>(loc, staticWork);
  for (auto &[loops, factor] : dynamicChains) {
    Value chain = b.create<arith::ConstantIndexOp>(loc, factor);
    for (scf::ForOp f : loops)
      chain = b.create<arith::MulIOp>(loc, chain, runTimeTrips.lookup(f));
    work = b.create<arith::MaxSIOp>(loc, work, chain);
  }
  return work;
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

      OpBuilder b(parallel);
      Location loc = parallel.getLoc();
      int64_t inner = 1;
      Value dynamicInner = innerWork(b, parallel, nest.getRegion(), inner);
      // Iterations of the parallel dims needed: ceil(min-work / inner).
      const int64_t needed = (minWork + inner - 1) / inner;

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
      if (allStatic && !dynamicInner) {
        if (staticTrips >= needed)
          continue; // always large enough: no clause
        Value no = b.create<arith::ConstantIntOp>(loc, 0, 1);
        parallel.getIfExprMutable().assign(no);
        continue;
      }
      // Dynamic: trips = prod ceildiv(ub - lb, step), compared with `needed`,
      // or trips * inner work with minWork when the inner work is dynamic.
      Value trips;
      for (unsigned d = 0; d < nest.getNumLoops(); ++d) {
        Value lb = nest.getLowerBound()[d], ub = nest.getUpperBound()[d],
              step = nest.getStep()[d];
        Value t = tripCount(b, loc, lb, ub, step);
        trips = trips ? b.create<arith::MulIOp>(loc, trips, t).getResult() : t;
      }
      Value big;
      if (dynamicInner) {
        Value work = b.create<arith::MulIOp>(loc, trips, dynamicInner);
        Value bound = b.create<arith::ConstantIndexOp>(loc, minWork);
        big = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, work,
                                      bound);
      } else {
        Value bound = b.create<arith::ConstantIndexOp>(loc, needed);
        big = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, trips,
                                      bound);
      }
      parallel.getIfExprMutable().assign(big);
    }
  }
};

} // namespace
