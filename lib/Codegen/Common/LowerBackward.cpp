//===- LowerBackward.cpp - bt-lower-backward ------------------------------===//
//
// bt-lower-backward: the backward bt ops (the vector-Jacobian rules'
// bt.layer_norm_grad, bt.embedding_grad, bt.attention_grad,
// bt.cross_entropy_grad) → linalg / tensor / scf / arith / math on tensors,
// as a partial dialect conversion with the patterns of
// BackwardToLinalg.cpp. See the pass description in
// include/bt/Codegen/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "CodegenTargets.h"

#include "bt/Codegen/CodegenTarget.h"
#include "bt/Codegen/LayerToLinalg.h"
#include "bt/Codegen/Passes.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

namespace bt {
#define GEN_PASS_DEF_BTLOWERBACKWARD
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

bool isBackwardOp(Operation *op) {
  return isa<LayerNormGradOp, EmbeddingGradOp, CrossEntropyGradOp,
             AttentionGradOp>(op);
}

/// The lowering handles f32 tensors only, and attention_grad's head loop
/// needs a static head count; reported at the op.
LogicalResult checkLowerable(Operation *op) {
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<RankedTensorType>(v.getType());
        t && isa<FloatType>(t.getElementType()) && !t.getElementType().isF32())
      return op->emitOpError("bt-lower-backward supports f32 tensors only");
  if (auto grad = dyn_cast<AttentionGradOp>(op)) {
    auto q = cast<RankedTensorType>(grad.getQ().getType());
    if (q.isDynamicDim(q.getRank() - 2))
      return op->emitOpError(
          "the number of heads must be static for code generation");
  }
  return success();
}

struct LowerBackwardPass
    : public codegen::TargetedLoweringPass<LowerBackwardPass,
                                           bt::impl::BTLowerBackwardBase> {
  using TargetedLoweringPass::TargetedLoweringPass;

  void runOnOperation() override {
    const CodegenTarget *hooks;
    if (failed(resolveHooks(hooks)))
      return signalPassFailure();
    WalkResult checked = getOperation()->walk([](Operation *op) {
      if (isBackwardOp(op) && failed(checkLowerable(op)))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (checked.wasInterrupted())
      return signalPassFailure();

    RewritePatternSet patterns(&getContext());
    populateBTBackwardToLinalgPatterns(patterns);
    ConversionTarget conversion(getContext());
    codegen::addLinalgLevelLegalDialects(conversion);
    conversion.addIllegalOp<LayerNormGradOp, EmbeddingGradOp, CrossEntropyGradOp,
                        AttentionGradOp>();
    if (hooks) {
      hooks->populateBackwardToLinalgPatterns(patterns);
      hooks->configureConversionTarget(conversion);
    }
    if (failed(applyPartialConversion(getOperation(), conversion,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass>
bt::createBTLowerBackward(const BTLowerBackwardOptions &options,
                          const CodegenTarget *target) {
  return std::make_unique<LowerBackwardPass>(options, target);
}
