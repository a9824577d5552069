//===- BF16Readers.h - readers of a tensor stored in bf16 ---------*- C++ -*-===//
//
// What the bf16 passes (bt-bf16-gemms, bt-bf16-gemm-outputs,
// bt-bf16-activations) share (docs/codegen-cuda.md, "bf16"): finding every
// reader of an f32 tensor on linalg on tensors, and making those readers
// read it in bf16 and extend each element exactly, so that they compute on
// the same f32 values as with the rounded f32 tensor; finding the
// parameters that only certain ops read, in every function.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_CUDA_BF16READERS_H
#define BT_CODEGEN_CUDA_BF16READERS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
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

/// The parameters (`bt.param` arguments, by name across the functions of
/// `module`) whose every argument is an f32 ranked tensor of rank `rank`
/// and whose every use, in every function, passes `isUse` (at least one use
/// in all): for each, its arguments, in the order the functions and their
/// arguments come. bt-bf16-gemms retypes the GEMM weights so, and
/// bt-bf16-gemm-outputs the biases of its bias inits.
llvm::SmallVector<llvm::SmallVector<mlir::BlockArgument>>
parametersUsedOnlyBy(mlir::ModuleOp module, int64_t rank,
                     llvm::function_ref<bool(mlir::OpOperand &)> isUse);

} // namespace bt::codegen

#endif // BT_CODEGEN_CUDA_BF16READERS_H
