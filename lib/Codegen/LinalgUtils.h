//===- LinalgUtils.h - helpers shared by the tensor-level lowerings -*- C++ -*-===//
//
// Small builders shared by bt-lower-to-linalg (LowerToLinalg.cpp, the forward
// layer ops) and bt-lower-backward (LowerBackward.cpp, the backward ops), so
// both emit linalg.generic ops the same way. Internal to lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_CODEGEN_LINALGUTILS_H
#define BT_LIB_CODEGEN_LINALGUTILS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallVector.h"

namespace bt::codegen {

/// The ranked tensor type of `v`; `v` must be a ranked tensor.
inline mlir::RankedTensorType tensorTypeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}

/// Static sizes of `sizes` (ShapedType::kDynamic where not a constant).
inline llvm::SmallVector<int64_t>
staticShapeOf(llvm::ArrayRef<mlir::OpFoldResult> sizes) {
  llvm::SmallVector<int64_t> shape;
  for (mlir::OpFoldResult s : sizes) {
    std::optional<int64_t> c = mlir::getConstantIntValue(s);
    shape.push_back(c ? *c : mlir::ShapedType::kDynamic);
  }
  return shape;
}

/// Identity-like affine map over `numDims` dims selecting `dims`.
inline mlir::AffineMap selectDims(mlir::MLIRContext *ctx, unsigned numDims,
                                  llvm::ArrayRef<unsigned> dims) {
  llvm::SmallVector<mlir::AffineExpr> exprs;
  for (unsigned d : dims)
    exprs.push_back(mlir::getAffineDimExpr(d, ctx));
  return mlir::AffineMap::get(numDims, 0, exprs, ctx);
}

/// Map over `numDims` dims that drops the last `n` dims.
inline mlir::AffineMap dropLastDims(mlir::MLIRContext *ctx, unsigned numDims,
                                    unsigned n) {
  llvm::SmallVector<unsigned> dims;
  for (unsigned i = 0; i + n < numDims; ++i)
    dims.push_back(i);
  return selectDims(ctx, numDims, dims);
}

/// `parallel` parallel iterators followed by `reduction` reduction ones.
inline llvm::SmallVector<mlir::utils::IteratorType>
iterators(unsigned parallel, unsigned reduction) {
  llvm::SmallVector<mlir::utils::IteratorType> it(
      parallel, mlir::utils::IteratorType::parallel);
  it.append(reduction, mlir::utils::IteratorType::reduction);
  return it;
}

/// Fast-math flags of the additions of row reductions (LayerNorm statistics,
/// softmax and log-sum-exp sums, and their gradients): `reassoc` lets LLVM
/// vectorize them with several partial sums, as PyTorch's vectorized kernels
/// do, instead of one serial chain.
inline mlir::arith::FastMathFlagsAttr reassoc(mlir::OpBuilder &b) {
  return mlir::arith::FastMathFlagsAttr::get(
      b.getContext(), mlir::arith::FastMathFlags::reassoc);
}

} // namespace bt::codegen

#endif // BT_LIB_CODEGEN_LINALGUTILS_H
