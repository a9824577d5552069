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
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "llvm/ADT/StringSet.h"
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
    const FrozenRewritePatternSet frozen(std::move(patterns));
    llvm::StringSet<> excluded;
    for (const std::string &name : exclude)
      excluded.insert(name);
    if (excluded.empty()) {
      if (failed(applyPatternsAndFoldGreedily(getOperation(), frozen)))
        signalPassFailure();
      return;
    }
    // Each function but the excluded ones (the operation itself too, when
    // it is a function).
    SmallVector<FunctionOpInterface> functions;
    getOperation()->walk<WalkOrder::PreOrder>([&](Operation *op) {
      auto fn = dyn_cast<FunctionOpInterface>(op);
      if (!fn)
        return WalkResult::advance();
      if (!excluded.contains(fn.getName()))
        functions.push_back(fn);
      return WalkResult::skip();
    });
    for (FunctionOpInterface fn : functions)
      if (failed(applyPatternsAndFoldGreedily(fn, frozen)))
        return signalPassFailure();
  }
};

} // namespace
