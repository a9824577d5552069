//===- GPUKernels.h - dedicated GPU kernels (internal) ---------------------===//
//
// Layer and backward ops that the CUDA target lowers to kernels of its own
// (gpu / scf / arith / memref ops at tensor level, as GPUAttention.h:
// operands through `bufferization.to_memref ... read_only`, the result a
// `memref.alloc` returned by `bufferization.to_tensor restrict writable`).
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_CODEGEN_GPUKERNELS_H
#define BT_LIB_CODEGEN_GPUKERNELS_H

#include <utility>

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

/// Whether emitGPULayerNorm handles `x`: f32, rank >= 1.
bool gpuLayerNormSupports(mlir::RankedTensorType x);

/// bt.layer_norm (ODS in BTOps.td; PyTorch `nn.LayerNorm`, GPT-NeoX's
/// input / post-attention / final LayerNorms) of `x` [..., C] f32 with
/// `weight`, `bias` [C] and `eps`: y = (x − mean)·rstd·weight + bias over
/// the last dim, biased variance, rstd = 1/sqrt(var + eps). One kernel, a
/// block of 256 threads per row: per-thread strided partial sums of x, a
/// fixed shared-memory tree for the mean, the same for Σ(x − mean)², then
/// each thread normalizes its columns (LayerEmitter::layerNorm's formulas;
/// only the order of the sums differs). Returns [..., C] f32.
mlir::Value emitGPULayerNorm(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value x, mlir::Value weight,
                             mlir::Value bias, double eps);

/// Two bt.layer_norm of the same `x` [..., C] f32 (GPT-NeoX's input and
/// post-attention LayerNorms of a parallel-residual layer both read the
/// residual stream) as one kernel of emitGPULayerNorm's shape: the mean and
/// variance once, then per column one load of x and both outputs,
/// y_j = (x − mean)·rstd_j·weight_j + bias_j with rstd_j =
/// 1/sqrt(var + eps_j). Each result is bit-identical to emitGPULayerNorm's
/// for its (weight, bias, eps); x is read once instead of twice. Returns
/// the two [..., C] f32 results.
std::pair<mlir::Value, mlir::Value>
emitGPULayerNormPair(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                     mlir::Value weight0, mlir::Value bias0, double eps0,
                     mlir::Value weight1, mlir::Value bias1, double eps1);

} // namespace bt

#endif // BT_LIB_CODEGEN_GPUKERNELS_H
