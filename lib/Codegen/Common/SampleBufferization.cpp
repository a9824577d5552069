//===- SampleBufferization.cpp - bufferization of bt.sample ---------------===//
//
// One-shot bufferization turns `bt.sample %logits, %sampler` into a call of
// the runtime's sampler (docs/generation.md, "Sampling"):
//
//   %tokens = memref.alloc(%B) : memref<?xi64>
//   func.call @bt_rt_sample(%sampler, %logits, %tokens)
//   func.func private @bt_rt_sample(
//       i64, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?xi64>)
//       attributes {llvm.emit_c_interface}
//
// so the kernel library calls the undefined external
// `_mlir_ciface_bt_rt_sample(int64_t, StridedMemRefType<float,2> *,
// StridedMemRefType<int64_t,1> *)`, resolved against the process like
// cblas_sgemm. The declaration carries `bt.weak_import`: the symbol is weak
// (the library also loads in a process without a sampler, and the call
// aborts with a message there; bt-emit-entry-wrappers). The logits are
// passed as they lie, with their offset and strides (both samplers read
// any strides: runtime/generate/sampler.cc, and the device's
// bt_sample_greedy / bt_sample_kernel of GPUSamplerKernels.cpp), so logits
// that an LM head wrote straight into a slice of a larger buffer (e.g.
// decode_tokens' step_logits [B, L_B, V], once bufferization eliminated the
// head's init) are read there, not copied first. bf16 logits (the CUDA
// target's --dtype bf16) call `bt_rt_sample_bf16` alike, with a
// memref<?x?xbf16, strided<[?, ?], offset: ?>>.
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
// The sampler of bf16 logits (the CUDA target's --dtype bf16 decode entries).
constexpr StringLiteral kBF16SamplerName = "bt_rt_sample_bf16";

/// The logits operand of the runtime's sampler: `element` (f32 or bf16)
/// [B, V], any offset and strides (memref<?x?xT, strided<[?, ?], offset: ?>>).
MemRefType stridedLogitsType(Type element) {
  MLIRContext *ctx = element.getContext();
  return MemRefType::get(
      {kDyn, kDyn}, element,
      StridedLayoutAttr::get(ctx, kDyn, ArrayRef<int64_t>{kDyn, kDyn}));
}

/// The declaration of the runtime's sampler of `element` logits, created on
/// first use.
func::FuncOp getOrCreateSampler(Operation *from, Type element) {
  auto module = from->getParentOfType<ModuleOp>();
  StringRef name = element.isBF16() ? kBF16SamplerName : kSamplerName;
  if (auto fn = module.lookupSymbol<func::FuncOp>(name))
    return fn;
  MLIRContext *ctx = module.getContext();
  // At the module's end, the f32 sampler before the bf16 one whichever is
  // created first (one-shot bufferization visits functions that do not call
  // each other in no fixed order): the output does not depend on it.
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  if (auto bf16 = module.lookupSymbol<func::FuncOp>(kBF16SamplerName);
      bf16 && !element.isBF16())
    b.setInsertionPoint(bf16);
  auto type = FunctionType::get(
      ctx,
      {IntegerType::get(ctx, 64), stridedLogitsType(element),
       MemRefType::get({kDyn}, IntegerType::get(ctx, 64))},
      {});
  auto fn = b.create<func::FuncOp>(module.getLoc(), name, type);
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
    Type i64 = rewriter.getI64Type();
    Value batch = rewriter.create<memref::DimOp>(loc, *logits, 0);
    Type element = cast<MemRefType>(logits->getType()).getElementType();
    MemRefType strided = stridedLogitsType(element);
    Value anyLayout = *logits;
    if (anyLayout.getType() != strided)
      anyLayout = rewriter.create<memref::CastOp>(loc, strided, anyLayout);
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
    func::FuncOp sampler = getOrCreateSampler(op, element);
    rewriter.create<func::CallOp>(
        loc, sampler, ValueRange{sample.getSampler(), anyLayout, tokensArg});
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
