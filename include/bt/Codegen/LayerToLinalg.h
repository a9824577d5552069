//===- LayerToLinalg.h - patterns of bt-lower-to-linalg --------*- C++ -*-===//
//
// The conversion patterns that lower the layer-level bt ops to linalg,
// tensor, arith, math and scf on tensors (lib/Codegen/Common), for
// bt-lower-to-linalg (the forward and optimizer ops) and bt-lower-backward
// (the backward ops), and the building blocks that a code-generation target's
// own patterns (CodegenTarget.h) reuse. Numerics follow HF GPT-NeoX in eager
// mode (fp32); the op-by-op lowering is documented with the passes in
// include/bt/Codegen/Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_LAYERTOLINALG_H
#define BT_CODEGEN_LAYERTOLINALG_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <tuple>
#include <utility>

namespace mlir {
class ConversionPatternRewriter;
class RewritePatternSet;
} // namespace mlir

namespace bt {

/// The cos/sin tables of `bt.rotary` and `bt.fused_local_attention`: one
/// pair of tensors [positions..., r/2] (f32) per distinct (positions,
/// rotary dims, base) within one run of bt-lower-to-linalg, built right after
/// the definition of the positions.
class RotaryTables {
public:
  /// The (cos, sin) tables of `positions` (any integer tensor), built with
  /// `b` on first use: inv_freq = 1/base^(2i/r) in f32 at compile time,
  /// angle = f32(pos) · inv_freq (HF GPT-NeoX).
  std::pair<mlir::Value, mlir::Value> get(mlir::OpBuilder &b,
                                          mlir::Value positions,
                                          int64_t rotaryDims, double base);

private:
  llvm::DenseMap<std::tuple<mlir::Value, int64_t, uint64_t>,
                 std::pair<mlir::Value, mlir::Value>>
      tables;
};

/// The state the patterns of one bt-lower-to-linalg run share.
class LayerToLinalgState {
public:
  /// `fusedKernel`: lower bt.fused_local_attention to the one-kernel form
  /// (false: the unfused chain; the pass option `fused-kernel`).
  explicit LayerToLinalgState(bool fusedKernel) : fusedKernel(fusedKernel) {}

  RotaryTables &getRotaryTables() { return tables; }
  bool useFusedKernel() const { return fusedKernel; }

private:
  RotaryTables tables;
  bool fusedKernel;
};

/// Adds the target-neutral patterns (benefit 1) of the forward layer-level
/// ops: bt.embedding_lookup, bt.layer_norm, bt.linear, bt.gelu,
/// bt.prefix_projection, bt.split_qkv, bt.rotary, bt.attention,
/// bt.local_attention, bt.fused_local_attention, bt.cross_entropy.
void populateBTLayerToLinalgPatterns(mlir::RewritePatternSet &patterns,
                                     LayerToLinalgState &state);

/// Adds the patterns of the optimizer ops: bt.global_norm,
/// bt.clip_coefficient, bt.lr_schedule, bt.adamw (OptimizerToLinalg.cpp).
void populateBTOptimizerToLinalgPatterns(mlir::RewritePatternSet &patterns);

/// Adds the patterns of the backward ops (bt-lower-backward):
/// bt.layer_norm_grad, bt.embedding_grad, bt.attention_grad,
/// bt.cross_entropy_grad (BackwardToLinalg.cpp). f32 only.
void populateBTBackwardToLinalgPatterns(mlir::RewritePatternSet &patterns);

namespace codegen {

/// Replaces `op` by `values` (one per result), each cast with `tensor.cast`
/// to the op's declared result type where the lowering inferred another
/// one (e.g. a dynamic dim the op declares static).
void replaceOpWithCasts(mlir::ConversionPatternRewriter &rewriter,
                        mlir::Operation *op, mlir::ValueRange values);

/// `bt.split_qkv`: `qkv` [..., H·3·hd] → views q, k, v [..., H, hd] (one
/// `tensor.expand_shape` and three rank-reducing `tensor.extract_slice`).
std::tuple<mlir::Value, mlir::Value, mlir::Value>
emitSplitQKV(mlir::OpBuilder &b, mlir::Location loc, mlir::Value qkv,
             int64_t heads, int64_t headDim);

/// `bt.rotary`: the NeoX rotate-half RoPE of `x` [..., S, H, hd] over its
/// first `rotaryDims` dims with the tables `cosT`, `sinT` ([S, r/2] or
/// [..., S, r/2], RotaryTables), one elementwise linalg.generic.
mlir::Value emitRotary(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                       mlir::Value cosT, mlir::Value sinT,
                       int64_t rotaryDims);

/// `bt.linear` of `x` [..., K] with `w` [N, K] (or a Conv1d [N, K, 1]) and
/// `bias` [N] as a matmul with a zero-filled init (BLAS beta = 0) followed
/// by the bias add as its own elementwise linalg.generic, which
/// bt-fuse-elementwise can merge into an elementwise consumer (GELU, the
/// residual adds). The target-neutral lowering instead initializes the
/// matmul's output with the broadcast bias (BLAS beta = 1). Returns
/// [..., N], x's element type.
mlir::Value emitLinearSeparateBias(mlir::OpBuilder &b, mlir::Location loc,
                                   mlir::Value x, mlir::Value w,
                                   mlir::Value bias);

/// `bt.gelu` of `x` (exact, erf-based) as one elementwise linalg.generic,
/// reading `x` as an input (never in place, so that bt-fuse-elementwise can
/// merge x's producer into it).
mlir::Value emitGelu(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);

/// Causal attention of `q` [batch..., S, H, hd] over `k`, `v`
/// ([batch..., S, H, hd], or [batch..., H, Sk, hd] with `headMajorKV`, a KV
/// cache's layout, where query s sits at position Sk − S + s) with key flags
/// `keyMask` ([batch..., Sk], any integer type, null: all valid) and the
/// numerics of `bt.attention` (HF eager masking and softmax): one `scf.for`
/// over the heads of linalg ops. Returns [batch..., S, H, hd].
mlir::Value emitAttention(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value q, mlir::Value k, mlir::Value v,
                          mlir::Value keyMask, double scale, bool headMajorKV);

} // namespace codegen
} // namespace bt

#endif // BT_CODEGEN_LAYERTOLINALG_H
