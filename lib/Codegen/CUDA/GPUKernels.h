//===- GPUKernels.h - dedicated GPU kernels of the backward ops (internal) -===//
//
// Backward ops that the CUDA target lowers to kernels of its own
// (gpu / scf / arith / memref ops at tensor level, as GPUAttention.h:
// operands through `bufferization.to_memref ... read_only`, the result a
// `memref.alloc` returned by `bufferization.to_tensor restrict writable`).
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_CODEGEN_GPUKERNELS_H
#define BT_LIB_CODEGEN_GPUKERNELS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace bt {

/// bt.embedding_grad (ODS in BTOps.td; PyTorch `embedding_backward`):
/// `ids` [...] (integer) and `dy` [..., E] → the table gradient of
/// `tableType` [V, E], zero except Σ_{i: ids[i] = v} dy[i, :] in row v.
/// One kernel, a thread per column e (blocks of 256): it zeroes column e,
/// then adds dy[i, e] for the ids in row-major order (the target-neutral
/// lowering's order: the same f32 sums). An id outside [0, V) fails a
/// `cf.assert` in the kernel (bt-linalg-to-gpu: printf
/// "bt kernel: bt.embedding_grad: token id out of range [0, V)" + trap).
mlir::Value emitGPUEmbeddingGrad(mlir::OpBuilder &b, mlir::Location loc,
                                 mlir::Value ids, mlir::Value dy,
                                 mlir::RankedTensorType tableType);

} // namespace bt

#endif // BT_LIB_CODEGEN_GPUKERNELS_H
