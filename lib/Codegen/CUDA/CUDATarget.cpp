//===- CUDATarget.cpp - the CUDA target's hooks of the lowerings ----------===//
//
// The CUDA target's patterns for the target-neutral lowering passes
// (include/bt/Codegen/CodegenTarget.h): the attention ops become the
// dedicated kernels of GPUAttention.h (docs/codegen-cuda.md, "Attention
// kernels") where those handle the shapes; benefit 2, so they take
// precedence over the head loop of bt-lower-to-linalg and
// bt-lower-kv-caches (benefit 1), which lowers the other shapes;
// bt.layer_norm of bt-lower-to-linalg and bt.embedding_grad of
// bt-lower-backward become the kernels of GPUKernels.h.
//
//===----------------------------------------------------------------------===//

#include "GPUAttention.h"
#include "GPUKernels.h"

#include "bt/Codegen/CUDA/CUDACodegen.h"
#include "bt/Codegen/CodegenTarget.h"
#include "bt/Codegen/KVCachesToTensors.h"
#include "bt/Codegen/LayerToLinalg.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace bt;

namespace {

constexpr unsigned kCUDABenefit = 2;

/// bt.attention / bt.local_attention → the tiled online-softmax kernel, or
/// split-K for static S ≤ 4 (emitGPUAttention).
template <typename OpT>
struct GPUAttentionLowering : OpConversionPattern<OpT> {
  GPUAttentionLowering(MLIRContext *ctx)
      : OpConversionPattern<OpT>(ctx, kCUDABenefit) {}
  LogicalResult
  matchAndRewrite(OpT op, typename OpT::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!gpuAttentionSupports(cast<RankedTensorType>(op.getQ().getType())))
      return rewriter.notifyMatchFailure(op, "shape left to the head loop");
    Value out = emitGPUAttention(rewriter, op.getLoc(), adaptor.getQ(),
                                 adaptor.getK(), adaptor.getV(),
                                 adaptor.getKeyMask(),
                                 op.getScale().convertToDouble(),
                                 /*headMajorKV=*/false);
    codegen::replaceOpWithCasts(rewriter, op, out);
    return success();
  }
};

/// bt.fused_local_attention → one kernel per (block, head) where it fits
/// (emitGPUFusedLocalAttention); else the unfused chain with the attention
/// above (never the CPU's stack-buffer kernel: host code has no alloca).
struct GPUFusedLocalAttentionLowering
    : OpConversionPattern<FusedLocalAttentionOp> {
  GPUFusedLocalAttentionLowering(MLIRContext *ctx, LayerToLinalgState &state)
      : OpConversionPattern(ctx, kCUDABenefit), state(state) {}
  LogicalResult
  matchAndRewrite(FusedLocalAttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto [c, s] = state.getRotaryTables().get(
        rewriter, adaptor.getPositions(), op.getRotaryDims(),
        op.getBase().convertToDouble());
    double scale = op.getScale().convertToDouble();
    Value out;
    if (gpuFusedLocalAttentionSupports(
            cast<RankedTensorType>(adaptor.getQkv().getType()),
            op.getHeadDim())) {
      out = emitGPUFusedLocalAttention(
          rewriter, loc, adaptor.getQkv(), c, s, adaptor.getKeyMask(),
          op.getHeads(), op.getHeadDim(), op.getRotaryDims(), scale);
    } else {
      auto [q, k, v] = codegen::emitSplitQKV(rewriter, loc, adaptor.getQkv(),
                                             op.getHeads(), op.getHeadDim());
      Value qr = codegen::emitRotary(rewriter, loc, q, c, s, op.getRotaryDims());
      Value kr = codegen::emitRotary(rewriter, loc, k, c, s, op.getRotaryDims());
      out = gpuAttentionSupports(cast<RankedTensorType>(qr.getType()))
                ? emitGPUAttention(rewriter, loc, qr, kr, v,
                                   adaptor.getKeyMask(), scale,
                                   /*headMajorKV=*/false)
                : codegen::emitAttention(rewriter, loc, qr, kr, v,
                                         adaptor.getKeyMask(), scale,
                                         /*headMajorKV=*/false);
    }
    codegen::replaceOpWithCasts(rewriter, op, out);
    return success();
  }
  LayerToLinalgState &state;
};

/// bt.kv_attend → the attention kernels over the cache's views (head-major
/// keys and values, causal offset len − S). A cache whose length is on the
/// device (KVCacheLowering::Cache::base) is viewed whole, and the kernels
/// read the length (GPUKeyCount).
struct GPUKVAttendLowering : OpConversionPattern<KVAttendOp> {
  GPUKVAttendLowering(MLIRContext *ctx, KVCacheLowering &lowering)
      : OpConversionPattern(ctx, kCUDABenefit), lowering(lowering) {}
  LogicalResult
  matchAndRewrite(KVAttendOp attend, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!gpuAttentionSupports(
            cast<RankedTensorType>(attend.getQuery().getType())))
      return rewriter.notifyMatchFailure(attend, "shape left to the head loop");
    const KVCacheLowering::Cache &c = lowering.lookup(attend.getCache());
    GPUKeyCount count{c.base, c.base ? c.len[attend.getLayer()]
                                     : OpFoldResult()};
    KVCacheLowering::AttendOperands in = lowering.emitAttendOperands(
        rewriter, attend, /*wholeCapacity=*/static_cast<bool>(c.base));
    Value out = emitGPUAttention(rewriter, attend.getLoc(), adaptor.getQuery(),
                                 in.keys, in.values, in.flags,
                                 attend.getScale().convertToDouble(),
                                 /*headMajorKV=*/true,
                                 c.base ? &count : nullptr);
    codegen::replaceOpWithCasts(rewriter, attend, out);
    return success();
  }
  KVCacheLowering &lowering;
};

/// bt.embedding_grad → one kernel, a thread per table column
/// (emitGPUEmbeddingGrad), instead of a host loop over the ids.
struct GPUEmbeddingGradLowering : OpConversionPattern<EmbeddingGradOp> {
  GPUEmbeddingGradLowering(MLIRContext *ctx)
      : OpConversionPattern(ctx, kCUDABenefit) {}
  LogicalResult
  matchAndRewrite(EmbeddingGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto table = cast<RankedTensorType>(op.getTableGrad().getType());
    if (table.isDynamicDim(0))
      return rewriter.notifyMatchFailure(op, "dynamic vocabulary");
    Value out = emitGPUEmbeddingGrad(rewriter, op.getLoc(), adaptor.getIds(),
                                     adaptor.getResultGrad(), table);
    codegen::replaceOpWithCasts(rewriter, op, out);
    return success();
  }
};

/// The later of exactly two bt.layer_norm of `op`'s input in `op`'s block
/// when `op` is the earlier (GPT-NeoX's input and post-attention LayerNorms
/// of a parallel-residual layer) and its weight and bias (as converted so
/// far) dominate `op`; else null.
LayerNormOp laterLayerNormOfSameInput(LayerNormOp op,
                                      ConversionPatternRewriter &rewriter) {
  SmallVector<LayerNormOp, 2> norms;
  for (Operation *user : op.getInput().getUsers()) {
    auto ln = dyn_cast<LayerNormOp>(user);
    if (ln && ln.getInput() == op.getInput() &&
        ln->getBlock() == op->getBlock() && !llvm::is_contained(norms, ln))
      norms.push_back(ln);
  }
  if (norms.size() != 2)
    return nullptr;
  LayerNormOp other = norms[0] == op ? norms[1] : norms[0];
  if (!op->isBeforeInBlock(other))
    return nullptr;
  DominanceInfo dominance;
  for (Value v : {other.getWeight(), other.getBias()}) {
    Value converted = rewriter.getRemappedValue(v);
    if (!converted || !dominance.properlyDominates(converted, op))
      return nullptr;
  }
  return other;
}

/// bt.layer_norm → one kernel, a block per row (emitGPULayerNorm), instead
/// of the target-neutral statistics + normalization ops (five or six
/// kernels after bt-linalg-to-gpu). Two LayerNorms of one input (see
/// laterLayerNormOfSameInput) become one kernel (emitGPULayerNormPair) at
/// the first: the input is read once, the statistics computed once.
struct GPULayerNormLowering : OpConversionPattern<LayerNormOp> {
  GPULayerNormLowering(MLIRContext *ctx)
      : OpConversionPattern(ctx, kCUDABenefit) {}
  LogicalResult
  matchAndRewrite(LayerNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!gpuLayerNormSupports(cast<RankedTensorType>(op.getInput().getType())))
      return rewriter.notifyMatchFailure(op, "not f32: the linalg lowering");
    if (LayerNormOp other = laterLayerNormOfSameInput(op, rewriter)) {
      auto [y0, y1] = emitGPULayerNormPair(
          rewriter, op.getLoc(), adaptor.getInput(), adaptor.getWeight(),
          adaptor.getBias(), op.getEps().convertToDouble(),
          rewriter.getRemappedValue(other.getWeight()),
          rewriter.getRemappedValue(other.getBias()),
          other.getEps().convertToDouble());
      codegen::replaceOpWithCasts(rewriter, op, y0);
      codegen::replaceOpWithCasts(rewriter, other, y1);
      return success();
    }
    Value out = emitGPULayerNorm(rewriter, op.getLoc(), adaptor.getInput(),
                                 adaptor.getWeight(), adaptor.getBias(),
                                 op.getEps().convertToDouble());
    codegen::replaceOpWithCasts(rewriter, op, out);
    return success();
  }
};

/// Whether `v` is the result of a bt.linear with a bias whose only user is
/// lowered to an elementwise linalg.generic that reads it as an input (the
/// MLP's GELU, the residual adds) — GPULinearLowering then emits the bias
/// add on its own for bt-fuse-elementwise to merge into that user.
bool isBiasLinearFeedingElementwise(Value v) {
  auto linear = v.getDefiningOp<LinearOp>();
  if (!linear || !linear.getBias() || !v.hasOneUse())
    return false;
  Operation *user = *v.getUsers().begin();
  return isa<GeluOp, arith::AddFOp>(user) &&
         isa<RankedTensorType>(user->getResult(0).getType());
}

/// bt.linear with a bias feeding an elementwise op → a matmul with a zero
/// init (cuBLAS beta = 0) and the bias add as its own elementwise generic
/// (emitLinearSeparateBias), which bt-fuse-elementwise merges into the GELU
/// or the residual adds: one kernel for bias + GELU, one for both
/// projections' biases + the residual, instead of a broadcast kernel per
/// bias (the target-neutral lowering's beta = 1 init) plus the adds.
struct GPULinearLowering : OpConversionPattern<LinearOp> {
  GPULinearLowering(MLIRContext *ctx)
      : OpConversionPattern(ctx, kCUDABenefit) {}
  LogicalResult
  matchAndRewrite(LinearOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isBiasLinearFeedingElementwise(op.getResult()))
      return rewriter.notifyMatchFailure(op, "bias as the GEMM's init");
    Value out = codegen::emitLinearSeparateBias(
        rewriter, op.getLoc(), adaptor.getInput(), adaptor.getWeight(),
        adaptor.getBias());
    codegen::replaceOpWithCasts(rewriter, op, out);
    return success();
  }
};

/// bt.gelu of such a linear → the GELU reading its input (not in place), so
/// that the bias add fuses into it.
struct GPUGeluLowering : OpConversionPattern<GeluOp> {
  GPUGeluLowering(MLIRContext *ctx) : OpConversionPattern(ctx, kCUDABenefit) {}
  LogicalResult
  matchAndRewrite(GeluOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isBiasLinearFeedingElementwise(op.getInput()))
      return rewriter.notifyMatchFailure(op, "in place");
    Value out = codegen::emitGelu(rewriter, op.getLoc(), adaptor.getInput());
    codegen::replaceOpWithCasts(rewriter, op, out);
    return success();
  }
};

class CUDATarget : public CodegenTarget {
public:
  StringRef getName() const override { return "cuda"; }

  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<bufferization::BufferizationDialect, gpu::GPUDialect,
                    memref::MemRefDialect>();
  }

  void configureConversionTarget(ConversionTarget &target) const override {
    target.addLegalDialect<bufferization::BufferizationDialect,
                           gpu::GPUDialect, memref::MemRefDialect>();
  }

  void populateLayerToLinalgPatterns(RewritePatternSet &patterns,
                                     LayerToLinalgState &state) const override {
    patterns.add<GPUAttentionLowering<AttentionOp>,
                 GPUAttentionLowering<LocalAttentionOp>>(
        patterns.getContext());
    patterns.add<GPUFusedLocalAttentionLowering>(patterns.getContext(), state);
    patterns.add<GPULayerNormLowering, GPULinearLowering, GPUGeluLowering>(
        patterns.getContext());
  }

  void
  populateBackwardToLinalgPatterns(RewritePatternSet &patterns) const override {
    patterns.add<GPUEmbeddingGradLowering>(patterns.getContext());
  }

  void
  populateKVCacheToTensorPatterns(RewritePatternSet &patterns,
                                  KVCacheLowering &lowering) const override {
    patterns.add<GPUKVAttendLowering>(patterns.getContext(), lowering);
  }

  /// The attention kernels extend what they load (GPUKernelBuilder::loadF).
  bool attendsMixedPrecisionCache(RankedTensorType query) const override {
    return gpuAttentionSupports(query);
  }
};

} // namespace

const CodegenTarget &bt::getCUDACodegenTarget() {
  static const CUDATarget target;
  return target;
}

void bt::registerCUDACodegenTarget() {
  registerCodegenTarget([] { return std::make_unique<CUDATarget>(); });
}
