//===- MathApproximation.cpp - polynomial erf / tanh ----------------------===//
//
// bt-math-approximation: math.erf and math.tanh → MLIR's polynomial
// approximations (arith/math ops LLVM's loop vectorizer takes), instead of
// scalar libm calls.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace bt {
#define GEN_PASS_DEF_BTMATHAPPROXIMATION
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

struct MathApproximationPass
    : public bt::impl::BTMathApproximationBase<MathApproximationPass> {
  using BTMathApproximationBase::BTMathApproximationBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populatePolynomialApproximateErfPattern(patterns);
    populatePolynomialApproximateTanhPattern(patterns);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
