//===- FuseElementwise.cpp - elementwise fusion where it pays -------------===//
//
// bt-fuse-elementwise: linalg elementwise producer/consumer fusion on tensors,
// restricted to single-use producers read without broadcast, so that no work
// is duplicated.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace bt {
#define GEN_PASS_DEF_BTFUSEELEMENTWISE
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

/// Fuse only single-use producers that the consumer reads element for
/// element (a permutation map): a broadcast read would recompute the
/// producer for every broadcast element.
bool shouldFuse(OpOperand *fused) {
  Operation *producer = fused->get().getDefiningOp();
  if (!producer || !producer->hasOneUse())
    return false;
  auto consumer = dyn_cast<linalg::LinalgOp>(fused->getOwner());
  if (!consumer)
    return false;
  return consumer.getMatchingIndexingMap(fused).isPermutation();
}

struct FuseElementwisePass
    : public bt::impl::BTFuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, shouldFuse);
    // A fusion can leave the fused producer with a dead result that still
    // counts as a use of its operand (e.g. a bias add whose consumer was
    // fused into the residual add): erasing it exposes the next single-use
    // producer within the same run.
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, &getContext());
    // `tensor.dim` of a producer's result (the size of the consumer's
    // tensor.empty, as convert-elementwise-to-linalg builds it) is a second
    // use that blocks its fusion: resolved to the dims of the producer's
    // operands.
    memref::populateResolveRankedShapedTypeResultDimsPatterns(patterns);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
