//===- GPULMHeadSampling.cpp - the LM head and the sampler in one call ----===//
//
// bt-gpu-lm-head-sampling (CUDA/Passes.td): in a `--dtype bf16` decode
// entry, the LM head's cuBLAS call `bt_gpu_gemm_bf16_out` (logits BF16
// [B', V] = x · wᵀ, beta = 0) followed by the sampler call
// `bt_rt_sample_bf16` of the same logits becomes one call of the runtime,
// `bt_gpu_lm_head_sample_bf16(sampler, x, w, logits, tokens, pv, pi)`, that
// decides per step whether the logits need to be stored at all: a greedy
// step whose logits nobody keeps runs the LM head with an argmax epilogue
// (bt_lm_head_argmax_bf16, GPUKernelText.h) into the per-tile maxima pv /
// pi allocated here, any other step the GEMM and the sampler as before
// (runtime/device/cuda/cuda.h). The logits' write and read are the largest
// per-row traffic of a batched greedy decode step that nobody needs
// (docs/codegen-cuda.md, "Efficiency of the decode step").
//
//===----------------------------------------------------------------------===//

#include "GPUKernelText.h"
#include "bt/Codegen/CBLAS.h"
#include "bt/Codegen/CUDA/Passes.h"
#include "bt/Dialect/BT/IR/BTDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace bt {
#define GEN_PASS_DEF_BTGPULMHEADSAMPLING
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

constexpr StringLiteral kGemm = "bt_gpu_gemm_bf16_out";
constexpr StringLiteral kSampler = "bt_rt_sample_bf16";
constexpr StringLiteral kFused = "bt_gpu_lm_head_sample_bf16";
constexpr int64_t kDyn = ShapedType::kDynamic;
using bt::cblas::kNoTrans;
using bt::cblas::kRowMajor;
using bt::cblas::kTrans;

/// The memref whose first element `ptr` addresses, as bt-gemm-to-blas
/// writes the address: inttoptr(index_cast(aligned(m) + offset(m) · 2)) for
/// bf16.
Value memrefOfPointer(Value ptr) {
  auto toPtr = ptr.getDefiningOp<LLVM::IntToPtrOp>();
  auto cast = toPtr ? toPtr.getArg().getDefiningOp<arith::IndexCastOp>()
                    : arith::IndexCastOp();
  auto add =
      cast ? cast.getIn().getDefiningOp<arith::AddIOp>() : arith::AddIOp();
  if (!add)
    return nullptr;
  auto aligned =
      add.getLhs().getDefiningOp<memref::ExtractAlignedPointerAsIndexOp>();
  auto mul = add.getRhs().getDefiningOp<arith::MulIOp>();
  auto md = mul ? mul.getLhs().getDefiningOp<memref::ExtractStridedMetadataOp>()
                : memref::ExtractStridedMetadataOp();
  if (!aligned || !md || md.getOffset() != mul.getLhs() ||
      md.getSource() != aligned.getSource() ||
      !isConstantIntValue(mul.getRhs(), 2))
    return nullptr;
  return aligned.getSource();
}

/// `v` without the memref.cast ops around it.
Value stripCasts(Value v) {
  while (auto cast = v.getDefiningOp<memref::CastOp>())
    v = cast.getSource();
  return v;
}

/// The allocation (or argument) under the views of `v`.
Value rootOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      break;
    v = view.getViewSource();
  }
  return v;
}

bool isConstantFloat(Value v, double expected) {
  APFloat value(0.0);
  return matchPattern(v, m_ConstantFloat(&value)) &&
         value.convertToDouble() == expected;
}

/// The LM head of a sampler call: the bt_gpu_gemm_bf16_out call before it
/// in its block that writes its logits as x · wᵀ (row-major, A not
/// transposed, B transposed, alpha 1, beta 0), with nothing in between that
/// could read or write x, w or the logits, so that the GEMM may move to the
/// sampler's place (frees of x and w move after it).
struct LMHead {
  func::CallOp gemm;
  Value x, w, logits;
  /// Frees of x or w between the two calls.
  SmallVector<memref::DeallocOp> laterFrees;
};

std::optional<LMHead> matchLMHead(func::CallOp sample) {
  Value logits = stripCasts(sample.getOperand(1));
  for (Operation *op = sample->getPrevNode(); op; op = op->getPrevNode()) {
    auto call = dyn_cast<func::CallOp>(op);
    if (call && call.getCallee() == kGemm && call.getNumOperands() == 14) {
      ValueRange a = call.getOperands();
      Value x = memrefOfPointer(a[7]), w = memrefOfPointer(a[9]),
            c = memrefOfPointer(a[12]);
      if (!x || !w || !c || stripCasts(c) != logits ||
          !isConstantIntValue(a[0], kRowMajor) ||
          !isConstantIntValue(a[1], kNoTrans) ||
          !isConstantIntValue(a[2], kTrans) || !isConstantFloat(a[6], 1.0) ||
          !isConstantFloat(a[11], 0.0))
        return std::nullopt;
      // Everything between the GEMM and the sampler must leave x, w and
      // the logits alone: pure ops, fresh allocations (the tokens' buffer),
      // frees of other buffers, and frees of x or w, which move after the
      // fused call.
      LMHead head{call, x, w, c, {}};
      Value inputs[] = {rootOf(x), rootOf(w)};
      for (Operation *mid = call->getNextNode(); mid != sample;
           mid = mid->getNextNode()) {
        if (isMemoryEffectFree(mid) || isa<memref::AllocOp>(mid))
          continue;
        auto dealloc = dyn_cast<memref::DeallocOp>(mid);
        if (!dealloc)
          return std::nullopt;
        Value root = rootOf(dealloc.getMemref());
        if (root == rootOf(c))
          return std::nullopt;
        if (llvm::is_contained(inputs, root))
          head.laterFrees.push_back(dealloc);
      }
      return head;
    }
    if (!isMemoryEffectFree(op) && !isa<memref::DeallocOp, memref::AllocOp>(op))
      return std::nullopt; // another call or kernel in between
  }
  return std::nullopt;
}

MemRefType stridedType(Type element, int64_t rank) {
  SmallVector<int64_t> dyn(rank, kDyn);
  return MemRefType::get(
      dyn, element, StridedLayoutAttr::get(element.getContext(), kDyn, dyn));
}

/// The declaration of the fused call, created on first use:
/// (i64, x, w, logits, tokens, pv, pi), every memref strided.
func::FuncOp getOrCreateFused(ModuleOp module) {
  if (auto fn = module.lookupSymbol<func::FuncOp>(kFused))
    return fn;
  MLIRContext *ctx = module.getContext();
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Type bf16 = b.getBF16Type();
  auto type = FunctionType::get(
      ctx,
      {b.getI64Type(), stridedType(bf16, 2), stridedType(bf16, 2),
       stridedType(bf16, 2), stridedType(b.getI64Type(), 1),
       stridedType(b.getF32Type(), 2), stridedType(b.getI32Type(), 2)},
      {});
  auto fn = b.create<func::FuncOp>(module.getLoc(), kFused, type);
  fn.setPrivate();
  fn->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), UnitAttr::get(ctx));
  // Resolved against the runtime when the kernel library is loaded, like
  // the sampler (bt-emit-entry-wrappers).
  fn->setAttr(bt::BTDialect::WeakImportAttrHelper::getNameStr(),
              UnitAttr::get(ctx));
  return fn;
}

struct GPULMHeadSamplingPass
    : public bt::impl::BTGPULMHeadSamplingBase<GPULMHeadSamplingPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<func::CallOp, LMHead>> fusions;
    module.walk([&](func::CallOp call) {
      if (call.getCallee() != kSampler || call.getNumOperands() != 3)
        return;
      if (std::optional<LMHead> head = matchLMHead(call))
        fusions.push_back({call, *head});
    });
    if (fusions.empty())
      return;
    func::FuncOp fused = getOrCreateFused(module);
    for (auto &[sample, head] : fusions) {
      OpBuilder b(sample);
      Location loc = sample.getLoc();
      auto castTo = [&](Value v, Type t) -> Value {
        return v.getType() == t ? v : b.create<memref::CastOp>(loc, t, v);
      };
      // The per-tile maxima and their ids [M, ceil(N / tile)], scratch of
      // this call (device memory after bt-gpu-device-allocs).
      Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
      Value m = b.create<memref::DimOp>(loc, head.x, zero);
      Value n = b.create<memref::DimOp>(loc, head.w, zero);
      Value tile =
          b.create<arith::ConstantIndexOp>(loc, bt::codegen::kLMHeadTile);
      Value tiles = b.create<arith::CeilDivUIOp>(loc, n, tile);
      Value pv = b.create<memref::AllocOp>(
          loc, MemRefType::get({kDyn, kDyn}, b.getF32Type()),
          ValueRange{m, tiles});
      Value pi = b.create<memref::AllocOp>(
          loc, MemRefType::get({kDyn, kDyn}, b.getI32Type()),
          ValueRange{m, tiles});
      FunctionType t = fused.getFunctionType();
      SmallVector<Value> args = {sample.getOperand(0),
                                 castTo(head.x, t.getInput(1)),
                                 castTo(head.w, t.getInput(2)),
                                 castTo(head.logits, t.getInput(3)),
                                 castTo(sample.getOperand(2), t.getInput(4)),
                                 castTo(pv, t.getInput(5)),
                                 castTo(pi, t.getInput(6))};
      b.create<func::CallOp>(loc, fused, args);
      b.create<memref::DeallocOp>(loc, pv);
      b.create<memref::DeallocOp>(loc, pi);
      for (memref::DeallocOp free : head.laterFrees)
        free->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
      // The two calls, and the address arithmetic and casts only they used.
      SmallVector<Operation *> worklist;
      for (Operation *call : {head.gemm.getOperation(), sample.getOperation()})
        for (Value operand : call->getOperands())
          if (Operation *def = operand.getDefiningOp())
            worklist.push_back(def);
      head.gemm.erase();
      sample.erase();
      llvm::SmallPtrSet<Operation *, 16> erased;
      while (!worklist.empty()) {
        Operation *op = worklist.pop_back_val();
        if (erased.contains(op) || !isOpTriviallyDead(op))
          continue;
        erased.insert(op);
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp())
            worklist.push_back(def);
        op->erase();
      }
    }
  }
};

} // namespace
