//===- BF16Gemms.cpp - GEMM weights in bf16, f32 accumulation -------------===//
//
// bt-bf16-gemms (CUDA/Passes.td): parameters used only as the weight of
// f32 GEMMs become bf16 arguments, and the other input of those GEMMs is
// rounded to bf16 by an elementwise generic; the GEMMs keep f32 results
// (bf16 inputs, f32 accumulation: cublasGemmEx with CUBLAS_COMPUTE_32F).
// The first step of `--dtype bf16` (issue 13 item 2, docs/codegen-cuda.md).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/BF16.h"
#include "bt/Codegen/CUDA/BF16Readers.h"
#include "bt/Codegen/CUDA/Passes.h"
#include "bt/Dialect/BT/IR/BTDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/MapVector.h"

namespace bt {
#define GEN_PASS_DEF_BTBF16GEMMS
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;
using bt::codegen::roundTensorToBF16;
using bt::codegen::roundToBF16;

namespace {

/// Whether `use` is the weight (second input) of an f32 matmul whose first
/// input is a plain f32 activation.
bool isF32GemmWeightUse(OpOperand &use) {
  Operation *op = use.getOwner();
  if (!isa<linalg::MatmulTransposeBOp, linalg::MatmulOp>(op))
    return false;
  auto gemm = cast<linalg::LinalgOp>(op);
  if (!gemm.hasPureTensorSemantics() || use.getOperandNumber() != 1)
    return false;
  for (OpOperand &o : op->getOpOperands()) {
    auto t = dyn_cast<RankedTensorType>(o.get().getType());
    if (!t || !t.getElementType().isF32())
      return false;
  }
  // The same tensor as both inputs (x · xᵀ) is no weight use.
  return op->getOperand(0) != use.get();
}

/// Whether `generic` is a rounding made by roundTensorToBF16.
bool isRounding(linalg::GenericOp generic) {
  return generic.getNumDpsInputs() == 1 && generic.getNumDpsInits() == 1 &&
         generic.getResultTypes().size() == 1 &&
         cast<RankedTensorType>(generic.getResultTypes()[0])
             .getElementType()
             .isBF16() &&
         cast<RankedTensorType>(generic.getDpsInputs()[0].getType())
             .getElementType()
             .isF32();
}

/// Moves `round` (a rounding generic) into the kernel that produces its
/// input, where that is one of the dedicated kernels (LayerNorm, attention:
/// `bufferization.to_tensor` of a `memref.alloc` that gpu.launch bodies only
/// store into), reached through reshapes with no other use: the buffer
/// becomes bf16 and each store rounds its value first (roundToBF16: the same
/// bits), so the rounding costs no launch and the kernel writes half the
/// bytes. Otherwise (e.g. an elementwise generic, which bt-fuse-elementwise
/// merges) leaves it. Returns whether it moved.
bool sinkIntoKernel(linalg::GenericOp round) {
  // `v` feeds only `user` (and tensor.dim ops, e.g. roundTensorToBF16's
  // sizes, which do not read the elements).
  auto feedsOnly = [](Value v, Operation *user) {
    return llvm::all_of(v.getUsers(), [&](Operation *u) {
      return u == user || isa<tensor::DimOp>(u);
    });
  };
  SmallVector<Operation *> reshapes; // from the rounding up
  Operation *user = round;
  Value v = round.getDpsInputs()[0];
  while (feedsOnly(v, user) &&
         isa_and_present<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
             v.getDefiningOp())) {
    user = v.getDefiningOp();
    reshapes.push_back(user);
    v = user->getOperand(0);
  }
  auto toTensor = v.getDefiningOp<bufferization::ToTensorOp>();
  if (!toTensor || !feedsOnly(v, user))
    return false;
  auto alloc = toTensor.getMemref().getDefiningOp<memref::AllocOp>();
  if (!alloc)
    return false;
  SmallVector<memref::StoreOp> stores;
  for (Operation *user : alloc->getUsers()) {
    if (user == toTensor)
      continue;
    auto store = dyn_cast<memref::StoreOp>(user);
    if (!store || store.getMemRef() != alloc.getResult() ||
        !store->getParentOfType<gpu::LaunchOp>())
      return false;
    stores.push_back(store);
  }
  if (stores.empty())
    return false;
  Type bf16 = Builder(round.getContext()).getBF16Type();
  MemRefType f32Type = alloc.getType();
  alloc.getResult().setType(MemRefType::get(
      f32Type.getShape(), bf16, f32Type.getLayout(), f32Type.getMemorySpace()));
  for (memref::StoreOp store : stores) {
    OpBuilder b(store);
    store.getValueMutable().assign(
        roundToBF16(b, store.getLoc(), store.getValue()));
  }
  auto retype = [&](Value x) {
    auto t = cast<RankedTensorType>(x.getType());
    x.setType(RankedTensorType::get(t.getShape(), bf16, t.getEncoding()));
  };
  retype(toTensor.getResult());
  for (auto it = reshapes.rbegin(); it != reshapes.rend(); ++it)
    retype((*it)->getResult(0));
  round.getResult(0).replaceAllUsesWith(round.getDpsInputs()[0]);
  round.erase();
  return true;
}

/// `gemm` (a matmul whose weight input is now the bf16 `weight`) rebuilt
/// with its activation rounded to bf16; f32 init and result as before.
void rebuild(Operation *gemm, Value weight) {
  OpBuilder b(gemm);
  Location l = gemm->getLoc();
  // An activation collapsed to [M, K] (the token decoder's [B, 1, T], the
  // MLP's [B, S, 4T]) is rounded before the collapse, in its producer's
  // shape, so that bt-fuse-elementwise can merge the rounding into an
  // elementwise producer (the bias + GELU): elementwise fusion does not
  // look through reshapes.
  Value act;
  if (auto collapse =
          gemm->getOperand(0).getDefiningOp<tensor::CollapseShapeOp>()) {
    Value rounded = roundTensorToBF16(b, l, collapse.getSrc());
    auto collapsedType = RankedTensorType::get(
        collapse.getResultType().getShape(), b.getBF16Type());
    act = b.create<tensor::CollapseShapeOp>(
        l, collapsedType, rounded, collapse.getReassociationIndices());
  } else {
    act = roundTensorToBF16(b, l, gemm->getOperand(0));
  }
  Value init = gemm->getOperand(2);
  Operation *next;
  if (isa<linalg::MatmulTransposeBOp>(gemm))
    next = b.create<linalg::MatmulTransposeBOp>(
        l, gemm->getResultTypes(), ValueRange{act, weight}, ValueRange{init});
  else
    next = b.create<linalg::MatmulOp>(l, gemm->getResultTypes(),
                                      ValueRange{act, weight},
                                      ValueRange{init});
  Operation *oldAct = gemm->getOperand(0).getDefiningOp();
  gemm->replaceAllUsesWith(next);
  gemm->erase();
  // The f32 collapse the GEMM read, if nothing else does (it would count as
  // another reader of a kernel's output in sinkIntoKernel).
  if (isa_and_present<tensor::CollapseShapeOp>(oldAct) && oldAct->use_empty())
    oldAct->erase();
}

struct BF16GemmsPass : public bt::impl::BTBF16GemmsBase<BF16GemmsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The parameters that only f32 GEMMs read as their weight.
    for (SmallVector<BlockArgument> &args :
         bt::codegen::parametersUsedOnlyBy(module, 2, isF32GemmWeightUse)) {
      for (BlockArgument arg : args) {
        auto t = cast<RankedTensorType>(arg.getType());
        arg.setType(RankedTensorType::get(t.getShape(),
                                          Builder(arg.getContext())
                                              .getBF16Type()));
        // A named linalg op's region follows its operand types at creation:
        // each GEMM is built anew on the bf16 operands.
        SmallVector<Operation *> gemms;
        for (Operation *user : arg.getUsers())
          gemms.push_back(user);
        for (Operation *gemm : gemms)
          rebuild(gemm, arg);
      }
    }
    // Roundings of a dedicated kernel's output move into that kernel.
    SmallVector<linalg::GenericOp> roundings;
    module.walk([&](linalg::GenericOp g) {
      if (isRounding(g))
        roundings.push_back(g);
    });
    for (linalg::GenericOp g : roundings)
      (void)sinkIntoKernel(g);
    // The functions' types follow their arguments.
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      fn.setFunctionType(FunctionType::get(
          fn.getContext(), fn.getBody().getArgumentTypes(),
          fn.getFunctionType().getResults()));
    }
  }
};

} // namespace
