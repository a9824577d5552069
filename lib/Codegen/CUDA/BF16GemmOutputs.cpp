//===- BF16GemmOutputs.cpp - bf16 GEMM products for elementwise readers ---===//
//
// bt-bf16-gemm-outputs (CUDA/Passes.td): a bf16 GEMM (bf16 inputs, f32
// accumulation) into a zero fill whose product only elementwise kernels read
// is rounded to bf16 once, and those kernels read the bf16 product and
// extend it; bt-gemm-to-blas then has cuBLAS write the bf16 product itself
// (cublasGemmEx with a CUDA_R_16BF C). Half the bytes written by the GEMM
// and read by its readers (issue 13 item 2, docs/codegen-cuda.md "bf16").
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/BF16.h"
#include "bt/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace bt {
#define GEN_PASS_DEF_BTBF16GEMMOUTPUTS
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;
using bt::codegen::extendBF16;
using bt::codegen::roundTensorToBF16;

namespace {

/// Whether `init` is a `linalg.fill` of +0.0 or -0.0 (the init of a
/// bt.linear whose bias an elementwise consumer adds, or of a GEMM without
/// bias).
bool isZeroFill(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  if (!fill)
    return false;
  auto cst = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
  auto value = cst ? dyn_cast<FloatAttr>(cst.getValue()) : FloatAttr();
  return value && value.getValue().isZero();
}

/// Whether `op` is a bf16 GEMM (bt-bf16-gemms: bf16 [M, K] and weight, f32
/// [M, N] result) on tensors into a zero fill.
bool isBF16GemmIntoZero(Operation *op) {
  if (!isa<linalg::MatmulTransposeBOp, linalg::MatmulOp>(op))
    return false;
  auto gemm = cast<linalg::LinalgOp>(op);
  if (!gemm.hasPureTensorSemantics())
    return false;
  auto elementOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  };
  return elementOf(op->getOperand(0)).isBF16() &&
         elementOf(op->getOperand(1)).isBF16() &&
         elementOf(op->getResult(0)).isF32() && isZeroFill(op->getOperand(2));
}

/// The readers of `v`: through reshapes (tensor.reshape too: an expansion of
/// two dynamic dims) and slices (`views`, in order from
/// `v` outwards) to inputs of `linalg.generic` ops (`inputs`); `tensor.dim`
/// reads no element. Returns false if any other op uses a value of the tree
/// (a named op, a dedicated kernel, a return, an init).
bool collectReaders(Value v, SmallVectorImpl<Operation *> &views,
                    SmallVectorImpl<OpOperand *> &inputs) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<tensor::DimOp>(user))
      continue;
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::ReshapeOp,
            tensor::ExtractSliceOp>(user) &&
        use.getOperandNumber() == 0) {
      views.push_back(user);
      if (!collectReaders(user->getResult(0), views, inputs))
        return false;
      continue;
    }
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!generic || !generic.hasPureTensorSemantics() ||
        !generic.isDpsInput(&use))
      return false;
    inputs.push_back(&use);
  }
  return true;
}

/// `x`'s ranked tensor type with bf16 elements.
RankedTensorType withBF16(Value x) {
  auto t = cast<RankedTensorType>(x.getType());
  return RankedTensorType::get(t.getShape(),
                               Builder(x.getContext()).getBF16Type(),
                               t.getEncoding());
}

/// Rounds `gemm`'s product to bf16 right after it (a generic marked
/// `bt.bf16_gemm_output`, which bt-gemm-to-blas folds into the cuBLAS call),
/// retypes `views` to bf16 and makes each reader in `inputs` read bf16: its
/// block argument becomes bf16 and is extended exactly (extendBF16) at the
/// top of the body, so the body computes on the same f32 values as before.
void narrow(Operation *gemm, ArrayRef<Operation *> views,
            ArrayRef<OpOperand *> inputs) {
  Value product = gemm->getResult(0);
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : product.getUses())
    uses.push_back(&use);
  OpBuilder b(gemm->getContext());
  b.setInsertionPointAfter(gemm);
  Value rounded = roundTensorToBF16(b, gemm->getLoc(), product);
  rounded.getDefiningOp()->setAttr("bt.bf16_gemm_output", b.getUnitAttr());
  for (OpOperand *use : uses)
    use->set(rounded);
  for (Operation *view : views)
    view->getResult(0).setType(withBF16(view->getResult(0)));
  for (OpOperand *input : inputs) {
    auto generic = cast<linalg::GenericOp>(input->getOwner());
    BlockArgument arg = generic.getMatchingBlockArgument(input);
    SmallVector<OpOperand *> reads;
    for (OpOperand &use : arg.getUses())
      reads.push_back(&use);
    arg.setType(b.getBF16Type());
    OpBuilder body = OpBuilder::atBlockBegin(generic.getBody());
    Value wide = extendBF16(body, generic.getLoc(), arg);
    for (OpOperand *read : reads)
      read->set(wide);
  }
}

struct BF16GemmOutputsPass
    : public bt::impl::BTBF16GemmOutputsBase<BF16GemmOutputsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> gemms;
    getOperation().walk([&](Operation *op) {
      if (isBF16GemmIntoZero(op))
        gemms.push_back(op);
    });
    for (Operation *gemm : gemms) {
      SmallVector<Operation *> views;
      SmallVector<OpOperand *> inputs;
      if (!collectReaders(gemm->getResult(0), views, inputs) || inputs.empty())
        continue;
      narrow(gemm, views, inputs);
    }
  }
};

} // namespace
