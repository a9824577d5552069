//===- LowerToLinalg.cpp - bt-lower-to-linalg -----------------------------===//
//
// bt-lower-to-linalg: the layer-level bt ops → linalg / tensor / arith /
// math / scf on tensors, as a partial dialect conversion with the patterns
// of include/bt/Codegen/LayerToLinalg.h (one file per family of ops) and
// those of the code-generation target, if any (CodegenTarget.h). See the
// pass description in include/bt/Codegen/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "CodegenTargets.h"
#include "LayerEmitter.h"

#include "bt/Codegen/CodegenTarget.h"
#include "bt/Codegen/LayerToLinalg.h"
#include "bt/Codegen/Passes.h"
#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace bt {
#define GEN_PASS_DEF_BTLOWERTOLINALG
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

void bt::populateBTLayerToLinalgPatterns(RewritePatternSet &patterns,
                                         LayerToLinalgState &state) {
  codegen::populateDenseToLinalgPatterns(patterns);
  codegen::populateRotaryToLinalgPatterns(patterns, state);
  codegen::populateAttentionToLinalgPatterns(patterns, state);
  codegen::populateLossToLinalgPatterns(patterns);
}

namespace {

/// The ops bt-lower-to-linalg leaves alone: bt.param / bt.param_ref
/// (bt-params-to-arguments replaces them) and bt.sample (bufferized into a
/// call of the runtime's sampler).
bool isKeptOp(Operation *op) { return isa<ParamOp, ParamRefOp, SampleOp>(op); }

struct LowerToLinalgPass
    : public codegen::TargetedLoweringPass<LowerToLinalgPass,
                                           bt::impl::BTLowerToLinalgBase> {
  using TargetedLoweringPass::TargetedLoweringPass;

  /// Reports, with the op's location, every bt op that no pattern lowers
  /// (e.g. a model-level op: bt-decompose has not run) and every op whose
  /// shape the lowering cannot handle.
  LogicalResult checkLowerable(const FrozenRewritePatternSet &patterns) {
    const auto &byOp = patterns.getOpSpecificNativePatterns();
    WalkResult result = getOperation()->walk([&](Operation *op) {
      if (!isa<BTDialect>(op->getDialect()) || isKeptOp(op))
        return WalkResult::advance();
      if (!byOp.count(op->getName())) {
        op->emitOpError()
            << "is not a layer-level op that bt-lower-to-linalg can lower; "
               "run bt-decompose first";
        return WalkResult::interrupt();
      }
      auto rotary = dyn_cast<RotaryOp>(op);
      if (rotary && ShapedType::isDynamic(
                        cast<RankedTensorType>(rotary.getInput().getType())
                            .getShape()
                            .back())) {
        op->emitOpError("head_dim must be static for code generation");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    const CodegenTarget *hooks;
    if (failed(resolveHooks(hooks)))
      return signalPassFailure();

    LayerToLinalgState state(fusedKernel);
    RewritePatternSet patterns(ctx);
    populateBTLayerToLinalgPatterns(patterns, state);
    populateBTOptimizerToLinalgPatterns(patterns);
    ConversionTarget conversion(*ctx);
    codegen::addLinalgLevelLegalDialects(conversion);
    conversion.addIllegalDialect<BTDialect>();
    conversion.addLegalOp<ParamOp, ParamRefOp, SampleOp>();
    if (hooks) {
      hooks->populateLayerToLinalgPatterns(patterns, state);
      hooks->configureConversionTarget(conversion);
    }
    FrozenRewritePatternSet frozen(std::move(patterns));
    if (failed(checkLowerable(frozen)) ||
        failed(applyPartialConversion(getOperation(), conversion, frozen)))
      return signalPassFailure();

    // tensor.concat → tensor.insert_slice, which one-shot bufferization
    // handles.
    RewritePatternSet concat(ctx);
    tensor::populateDecomposeTensorConcatPatterns(concat);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(concat))))
      return signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass>
bt::createBTLowerToLinalg(const BTLowerToLinalgOptions &options,
                          const CodegenTarget *target) {
  return std::make_unique<LowerToLinalgPass>(options, target);
}
