//===- BF16Readers.h - readers of a tensor stored in bf16 ---------*- C++ -*-===//
//
// What bt-bf16-gemm-outputs and bt-bf16-activations share (docs/codegen-cuda.md,
// "bf16"): finding every reader of an f32 tensor on linalg on tensors, and
// making those readers read it in bf16 and extend each element exactly, so
// that they compute on the same f32 values as with the rounded f32 tensor.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_CUDA_BF16READERS_H
#define BT_CODEGEN_CUDA_BF16READERS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace bt::codegen {

/// Whether `op` is a reshape (tensor.expand_shape, tensor.collapse_shape,
/// tensor.reshape: an expansion of two dynamic dims) or a slice
/// (tensor.extract_slice), whose result holds elements of its first operand.
bool isElementView(mlir::Operation *op);

/// The readers of `v`: through reshapes (tensor.expand_shape,
/// tensor.collapse_shape, tensor.reshape) and slices (tensor.extract_slice),
/// collected into `views` in order from `v` outwards, to inputs of
/// `linalg.generic` ops on tensors and sources of `tensor.extract` (the
/// dedicated kernels' element reads), collected into `inputs`;
/// `tensor.dim` reads no element. Returns false if any other op uses a value
/// of the tree (a named op, an init, a return, a loop, an insert).
bool collectBF16Readers(mlir::Value v,
                        llvm::SmallVectorImpl<mlir::Operation *> &views,
                        llvm::SmallVectorImpl<mlir::OpOperand *> &inputs);

/// Whether a result of `op` is a result of its function, directly or through
/// reshapes and slices (eval's logits, which a masking generic writes).
bool computesFunctionResult(mlir::Operation *op);

/// `x`'s ranked tensor type with bf16 elements.
mlir::RankedTensorType withBF16(mlir::Value x);

/// Retypes `views` to bf16 and makes each reader in `inputs` (as
/// collectBF16Readers returns them, after their source became bf16) read
/// bf16: a generic's block argument becomes bf16 and is extended exactly
/// (extendBF16) at the top of the body; an extracted element is extended
/// right after the extract.
void readAsBF16(llvm::ArrayRef<mlir::Operation *> views,
                llvm::ArrayRef<mlir::OpOperand *> inputs);

} // namespace bt::codegen

#endif // BT_CODEGEN_CUDA_BF16READERS_H
