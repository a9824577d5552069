//===- ParallelOuterLoops.cpp - one parallel loop per loop nest -----------===//
//
// bt-parallel-outer-loops: shapes the scf.parallel nests of
// convert-linalg-to-parallel-loops for a CPU thread pool (convert-scf-to-openmp).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace bt {
#define GEN_PASS_DEF_BTPARALLELOUTERLOOPS
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

/// Rewrites `loop` (no reductions) so that its dims [0, numParallel) stay one
/// scf.parallel and the dims [numParallel, n) become a nest of scf.for inside
/// it, in order; numParallel = 0 leaves only the scf.for nest. The body is
/// moved, not cloned.
void sequentializeInnerDims(IRRewriter &rewriter, scf::ParallelOp loop,
                            unsigned numParallel) {
  Location loc = loop.getLoc();
  ValueRange lbs = loop.getLowerBound(), ubs = loop.getUpperBound(),
             steps = loop.getStep();
  rewriter.setInsertionPoint(loop);
  SmallVector<Value> ivs;
  if (numParallel > 0) {
    auto outer = rewriter.create<scf::ParallelOp>(
        loc, lbs.take_front(numParallel), ubs.take_front(numParallel),
        steps.take_front(numParallel));
    llvm::append_range(ivs, outer.getInductionVars());
    rewriter.setInsertionPoint(outer.getBody()->getTerminator());
  }
  scf::LoopNest nest =
      scf::buildLoopNest(rewriter, loc, lbs.drop_front(numParallel),
                         ubs.drop_front(numParallel),
                         steps.drop_front(numParallel));
  for (scf::ForOp f : nest.loops)
    ivs.push_back(f.getInductionVar());
  Block *body = loop.getBody();
  rewriter.eraseOp(body->getTerminator());
  Block *dest = nest.loops.back().getBody();
  rewriter.inlineBlockBefore(body, dest->getTerminator(), ivs);
  rewriter.eraseOp(loop);
}

/// Replaces `loop` (an scf.for without iter_args) by a 1-dim scf.parallel
/// over the same range; the body is moved, not cloned.
void forToParallel(IRRewriter &rewriter, scf::ForOp loop) {
  rewriter.setInsertionPoint(loop);
  auto parallel = rewriter.create<scf::ParallelOp>(
      loop.getLoc(), ValueRange{loop.getLowerBound()},
      ValueRange{loop.getUpperBound()}, ValueRange{loop.getStep()});
  Block *body = loop.getBody();
  rewriter.eraseOp(body->getTerminator());
  rewriter.inlineBlockBefore(body, parallel.getBody()->getTerminator(),
                             parallel.getInductionVars());
  rewriter.eraseOp(loop);
}

struct ParallelOuterLoopsPass
    : public bt::impl::BTParallelOuterLoopsBase<ParallelOuterLoopsPass> {
  using BTParallelOuterLoopsBase::BTParallelOuterLoopsBase;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // Loops the lowering marked independent, once bufferized, outside any
    // parallel loop (pre-order: an outer one is converted first).
    SmallVector<scf::ForOp> independent;
    getOperation()->walk<WalkOrder::PreOrder>([&](scf::ForOp loop) {
      if (loop->hasAttr(bt::kIndependentIterationsAttrName) &&
          loop.getInitArgs().empty())
        independent.push_back(loop);
    });
    for (scf::ForOp loop : independent)
      if (!loop->getParentOfType<scf::ParallelOp>())
        forToParallel(rewriter, loop);

    SmallVector<scf::ParallelOp> loops;
    getOperation()->walk<WalkOrder::PreOrder>(
        [&](scf::ParallelOp loop) { loops.push_back(loop); });
    // Pre-order: an outer loop is rewritten before the loops it contains, so
    // an inner loop sees its (new) parallel ancestor.
    for (scf::ParallelOp loop : loops) {
      if (!loop.getInitVals().empty())
        continue; // a reduction: left to convert-scf-to-openmp as it is
      unsigned n = loop.getNumLoops();
      if (loop->getParentOfType<scf::ParallelOp>())
        sequentializeInnerDims(rewriter, loop, 0);
      else if (n > 1)
        sequentializeInnerDims(rewriter, loop, n - 1);
    }
  }
};

} // namespace
