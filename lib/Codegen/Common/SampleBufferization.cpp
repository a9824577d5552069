//===- SampleBufferization.cpp - bufferization of bt.sample ---------------===//
//
// One-shot bufferization turns `bt.sample %logits, %sampler` into a call of
// the runtime's sampler (docs/generation.md, "Sampling"):
//
//   %tokens = memref.alloc(%B) : memref<?xi64>
//   func.call @bt_rt_sample(%sampler, %logits, %tokens)
//   func.func private @bt_rt_sample(i64, memref<?x?xf32>, memref<?xi64>)
//       attributes {llvm.emit_c_interface}
//
// so the kernel library calls the undefined external
// `_mlir_ciface_bt_rt_sample(int64_t, StridedMemRefType<float,2> *,
// StridedMemRefType<int64_t,1> *)`, resolved against the process like
// cblas_sgemm. The declaration carries `bt.weak_import`: the symbol is weak
// (the library also loads in a process without a sampler, and the call
// aborts with a message there; bt-emit-entry-wrappers). The logits passed
// are dense row-major (copied if their buffer is strided).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Dialects.h"
#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;


namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;
constexpr StringLiteral kSamplerName = "bt_rt_sample";

/// The declaration of the runtime's sampler, created on first use.
func::FuncOp getOrCreateSampler(Operation *from) {
  auto module = from->getParentOfType<ModuleOp>();
  if (auto fn = module.lookupSymbol<func::FuncOp>(kSamplerName))
    return fn;
  MLIRContext *ctx = module.getContext();
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto type = FunctionType::get(
      ctx,
      {IntegerType::get(ctx, 64),
       MemRefType::get({kDyn, kDyn}, Float32Type::get(ctx)),
       MemRefType::get({kDyn}, IntegerType::get(ctx, 64))},
      {});
  auto fn = b.create<func::FuncOp>(module.getLoc(), kSamplerName, type);
  fn.setPrivate();
  fn->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), UnitAttr::get(ctx));
  // A weak undefined symbol in the kernel library (bt-emit-entry-wrappers).
  fn->setAttr(bt::BTDialect::WeakImportAttrHelper::getNameStr(), UnitAttr::get(ctx));
  return fn;
}

struct SampleOpModel
    : public BufferizableOpInterface::ExternalModel<SampleOpModel,
                                                    bt::SampleOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }
  AliasingValueList getAliasingValues(Operation *, OpOperand &,
                                      const AnalysisState &) const {
    return {};
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options) const {
    auto sample = cast<bt::SampleOp>(op);
    Location loc = op->getLoc();
    FailureOr<Value> logits = getBuffer(rewriter, sample.getLogits(), options);
    if (failed(logits))
      return failure();
    auto logitsType = cast<MemRefType>(logits->getType());
    Type f32 = rewriter.getF32Type(), i64 = rewriter.getI64Type();
    auto denseLogits = MemRefType::get({kDyn, kDyn}, f32);
    Value batch = rewriter.create<memref::DimOp>(loc, *logits, 0);
    Value dense = *logits;
    if (!logitsType.getLayout().isIdentity()) {
      SmallVector<Value> dyn;
      for (int64_t d = 0; d < 2; ++d)
        if (logitsType.isDynamicDim(d))
          dyn.push_back(rewriter.create<memref::DimOp>(loc, *logits, d));
      FailureOr<Value> copy = options.createAlloc(
          rewriter, loc, MemRefType::get(logitsType.getShape(), f32), dyn);
      if (failed(copy) ||
          failed(options.createMemCpy(rewriter, loc, *logits, *copy)))
        return failure();
      dense = *copy;
    }
    if (dense.getType() != denseLogits)
      dense = rewriter.create<memref::CastOp>(loc, denseLogits, dense);
    auto tokensType = cast<RankedTensorType>(sample.getType());
    SmallVector<Value> dyn;
    if (tokensType.isDynamicDim(0))
      dyn.push_back(batch);
    FailureOr<Value> tokens = options.createAlloc(
        rewriter, loc, MemRefType::get(tokensType.getShape(), i64), dyn);
    if (failed(tokens))
      return failure();
    Value tokensArg = *tokens;
    auto denseTokens = MemRefType::get({kDyn}, i64);
    if (tokensArg.getType() != denseTokens)
      tokensArg = rewriter.create<memref::CastOp>(loc, denseTokens, tokensArg);
    func::FuncOp sampler = getOrCreateSampler(op);
    rewriter.create<func::CallOp>(
        loc, sampler, ValueRange{sample.getSampler(), dense, tokensArg});
    replaceOpWithBufferizedValues(rewriter, op, *tokens);
    return success();
  }
};

} // namespace

void bt::registerBTCodegenInterfaceModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, BTDialect *) {
    SampleOp::attachInterface<SampleOpModel>(*ctx);
  });
}
