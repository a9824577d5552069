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
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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

/// Splits the flat loop index `iv` = ((b_0 · B_1 + b_1) · ... ) · H + h of a
/// loop over the heads of the batch dims `batchSizes` = [B_0, ..., B_{nb-1}]
/// into the head `h` and the batch indices `bIdx` [b_0, ..., b_{nb-1}].
/// Used by the per-head attention loops (forward and backward).
inline void delinearizeHeadIndex(mlir::OpBuilder &b, mlir::Location loc,
                                 mlir::Value iv, mlir::Value heads,
                                 llvm::ArrayRef<mlir::Value> batchSizes,
                                 mlir::Value &h,
                                 llvm::SmallVectorImpl<mlir::Value> &bIdx) {
  h = b.create<mlir::arith::RemUIOp>(loc, iv, heads);
  mlir::Value rest = b.create<mlir::arith::DivUIOp>(loc, iv, heads);
  size_t nb = batchSizes.size();
  bIdx.assign(nb, mlir::Value());
  for (int i = static_cast<int>(nb) - 1; i >= 0; --i) {
    if (i == 0) {
      bIdx[i] = rest;
    } else {
      bIdx[i] = b.create<mlir::arith::RemUIOp>(loc, rest, batchSizes[i]);
      rest = b.create<mlir::arith::DivUIOp>(loc, rest, batchSizes[i]);
    }
  }
}

/// Builders of the tensor-level IR at one insertion point, shared by the
/// op emitters of bt-lower-to-linalg and bt-lower-backward (each derives its
/// `Emitter` from this). Element types are whatever the caller passes; the
/// float constants are materialised in that type.
class LinalgEmitter {
public:
  LinalgEmitter(mlir::OpBuilder &b, mlir::Location loc)
      : b(b), loc(loc), ctx(b.getContext()) {}

  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::MLIRContext *ctx;

  /// Mixed static/dynamic sizes of the ranked tensor `t`.
  llvm::SmallVector<mlir::OpFoldResult> sizes(mlir::Value t) {
    return mlir::tensor::getMixedSizes(b, loc, t);
  }
  /// `tensor.empty` of `sizes` x `elt`.
  mlir::Value empty(llvm::ArrayRef<mlir::OpFoldResult> sizes, mlir::Type elt) {
    return b.create<mlir::tensor::EmptyOp>(loc, sizes, elt);
  }
  /// `arith.constant` `v` of float type `t`.
  mlir::Value floatConst(mlir::Type t, double v) {
    return b.create<mlir::arith::ConstantOp>(loc, b.getFloatAttr(t, v));
  }
  /// A new tensor of `sizes` x `elt` filled with `v` (linalg.fill).
  mlir::Value filled(llvm::ArrayRef<mlir::OpFoldResult> sizes, mlir::Type elt,
                     mlir::Value v) {
    return b.create<mlir::linalg::FillOp>(loc, v, empty(sizes, elt))
        .getResult(0);
  }
  /// A new tensor of `sizes` x float type `elt` filled with the constant `v`.
  mlir::Value filledF(llvm::ArrayRef<mlir::OpFoldResult> sizes, mlir::Type elt,
                      double v) {
    return filled(sizes, elt, floatConst(elt, v));
  }
  /// As filledF, on a `bufferization.alloc_tensor` instead of a
  /// `tensor.empty`: an allocation, so CSE never merges two of them (two
  /// identical zero fills merged into one tensor that two GEMMs write would
  /// bufferize as a fill plus a copy per GEMM, where each GEMM's own fill
  /// becomes BLAS beta = 0 in bt-gemm-to-blas).
  mlir::Value freshFilledF(llvm::ArrayRef<mlir::OpFoldResult> sizes,
                           mlir::Type elt, double v) {
    return b.create<mlir::linalg::FillOp>(loc, floatConst(elt, v),
                                          freshEmpty(sizes, elt))
        .getResult(0);
  }
  /// A `bufferization.alloc_tensor` of `sizes` x `elt`: a tensor.empty that
  /// CSE never merges with another (an init that an op writes in place).
  mlir::Value freshEmpty(llvm::ArrayRef<mlir::OpFoldResult> sizes,
                         mlir::Type elt) {
    llvm::SmallVector<int64_t> shape;
    llvm::SmallVector<mlir::Value> dynamic;
    for (mlir::OpFoldResult s : sizes) {
      if (std::optional<int64_t> c = mlir::getConstantIntValue(s)) {
        shape.push_back(*c);
      } else {
        shape.push_back(mlir::ShapedType::kDynamic);
        dynamic.push_back(mlir::cast<mlir::Value>(s));
      }
    }
    return b.create<mlir::bufferization::AllocTensorOp>(
        loc, mlir::RankedTensorType::get(shape, elt), dynamic);
  }
  /// The float tensor `t` overwritten with the constant `v` (linalg.fill).
  mlir::Value fill(mlir::Value t, double v) {
    return b
        .create<mlir::linalg::FillOp>(
            loc, floatConst(tensorTypeOf(t).getElementType(), v), t)
        .getResult(0);
  }
  /// Size `s` (`tensor.dim` or constant) as a value of float type `t`.
  mlir::Value sizeAsFloat(mlir::OpFoldResult s, mlir::Type t) {
    mlir::Value idx = mlir::getValueOrCreateConstantIndexOp(b, loc, s);
    mlir::Value i64 =
        b.create<mlir::arith::IndexCastOp>(loc, b.getI64Type(), idx);
    return b.create<mlir::arith::SIToFPOp>(loc, t, i64);
  }
  /// `linalg.generic` with the given operands, indexing maps, iterators and
  /// body; returns its results.
  mlir::ValueRange
  generic(mlir::TypeRange resultTypes, mlir::ValueRange ins,
          mlir::ValueRange outs, llvm::ArrayRef<mlir::AffineMap> maps,
          llvm::ArrayRef<mlir::utils::IteratorType> iters,
          llvm::function_ref<void(mlir::OpBuilder &, mlir::Location,
                                  mlir::ValueRange)>
              body) {
    return b
        .create<mlir::linalg::GenericOp>(loc, resultTypes, ins, outs, maps,
                                         iters, body)
        .getResults();
  }

  // Scalar helpers usable inside region bodies.
  /// `v` extended to the float type `ct` (no-op when already `ct`).
  static mlir::Value ext(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                         mlir::Type ct) {
    if (v.getType() == ct)
      return v;
    return b.create<mlir::arith::ExtFOp>(loc, ct, v);
  }
  /// `v` truncated to the float type `elt` (no-op when already `elt`).
  static mlir::Value trunc(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value v, mlir::Type elt) {
    if (v.getType() == elt)
      return v;
    return b.create<mlir::arith::TruncFOp>(loc, elt, v);
  }
  /// Integer / i1 mask or id value to float (0/1 masks become 0.0/1.0).
  static mlir::Value intToFloat(mlir::OpBuilder &b, mlir::Location loc,
                                mlir::Value v, mlir::Type ft) {
    if (v.getType().isInteger(1))
      return b.create<mlir::arith::UIToFPOp>(loc, ft, v);
    return b.create<mlir::arith::SIToFPOp>(loc, ft, v);
  }
};

} // namespace bt::codegen

#endif // BT_LIB_CODEGEN_LINALGUTILS_H
