//===- BTVJPUtils.h - helpers of the vector-Jacobian rules -------*- C++ -*-===//
//
// Small tensor-building helpers shared by the buildVJP rules of the bt ops
// (lib/Dialect/BT/IR/BTVJP.cpp) and the external models of the upstream ops
// (lib/Transforms/AutodiffInterfaces.cpp). Dynamic dims are supported
// everywhere: sizes come from `tensor.dim` of the values involved.
//
//===----------------------------------------------------------------------===//

#ifndef BT_DIALECT_BT_IR_BTVJPUTILS_H
#define BT_DIALECT_BT_IR_BTVJPUTILS_H

#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace bt::vjp {

/// The sizes of a ranked tensor value (constants for static dims).
llvm::SmallVector<mlir::OpFoldResult> sizesOf(mlir::OpBuilder &b,
                                              mlir::Location loc,
                                              mlir::Value v);

/// A zero tensor of `sizes` and element type `elt` (tensor.empty +
/// linalg.fill, so that bufferization can write it in place).
mlir::Value zeros(mlir::OpBuilder &b, mlir::Location loc,
                  llvm::ArrayRef<mlir::OpFoldResult> sizes, mlir::Type elt);
/// A zero tensor of the shape and type of `like`.
mlir::Value zerosLike(mlir::OpBuilder &b, mlir::Location loc, mlir::Value like);

/// `v` cast to `type` (tensor.cast) when the types differ.
mlir::Value castTo(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                   mlir::Type type);

/// Expands `v` with reassociation `re` into the shape of `like` (whose type
/// the result has). A group with more than one dynamic dim becomes a
/// `tensor.reshape` (MLIR 19 cannot bufferize such a tensor.expand_shape;
/// docs/codegen.md).
mlir::Value expandLike(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                       llvm::ArrayRef<mlir::ReassociationIndices> re,
                       mlir::Value like);

/// `v` [..., C] as a matrix [M, C] (M = product of the leading dims; a rank-1
/// `v` becomes [1, C]).
mlir::Value toMatrix(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v);
/// The inverse of toMatrix for a value shaped like `like` (last dim may
/// differ: the matrix [M, C'] becomes [..., C']), of type `type`.
mlir::Value fromMatrix(mlir::OpBuilder &b, mlir::Location loc, mlir::Value m,
                       mlir::Value like, mlir::RankedTensorType type);

/// Σ over the rows of a matrix [M, N] → [N].
mlir::Value sumRows(mlir::OpBuilder &b, mlir::Location loc, mlir::Value m);

/// Gradients of `y = x · Wᵀ (+ bias)` (bt.linear, W [N, K] or Conv1d
/// [N, K, 1]) given `dy` [..., N]: `dx = dy · W` (linalg.matmul),
/// `dW = dyᵀ · x` summed over all leading dims (linalg.matmul_transpose_a),
/// `dbias = Σ dy` (when `withBias`). Results have the types of x and W.
void linearVJP(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
               mlir::Value w, bool withBias, mlir::Value dy, mlir::Value &dx,
               mlir::Value &dw, mlir::Value &dbias);

/// `-positions` (elementwise, integer), for the inverse rotation of RoPE.
mlir::Value negatePositions(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value positions);

/// The inverse of bt.split_qkv: q, k, v gradients [..., H, hd] (null =
/// zero) interleaved per head into [..., H·3·hd] of type `qkvType`, with the
/// leading sizes of `like` (the qkv value).
mlir::Value assembleQKV(mlir::OpBuilder &b, mlir::Location loc, mlir::Value dq,
                        mlir::Value dk, mlir::Value dv, mlir::Value like,
                        int64_t heads, int64_t headDim);

} // namespace bt::vjp

#endif // BT_DIALECT_BT_IR_BTVJPUTILS_H
