//===- Attention.h - shared attention emitter (lib/Codegen internal) --------===//
//
// The HF-eager causal attention of bt-lower-to-linalg (LowerToLinalg.cpp),
// for keys/values read from a KV cache (bt-lower-kv-caches).
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_CODEGEN_ATTENTION_H
#define BT_LIB_CODEGEN_ATTENTION_H

#include "mlir/IR/Builders.h"

namespace bt {

/// Causal attention of `q` [B, S, H, hd] over `k`, `v` [B, H, Sk, hd]
/// (head-major, e.g. a slice of a KV cache's storage) with key flags
/// `keyMask` [B, Sk] (1 = attend, 0 = padding; any integer type): query s
/// sits at position Sk - S + s and attends keys t ≤ Sk - S + s, with the
/// numerics of `bt.attention` (HF eager masking and softmax). Returns
/// [B, S, H, hd] on tensors (an scf.for over the B·H heads of linalg ops).
mlir::Value emitCachedAttention(mlir::OpBuilder &b, mlir::Location loc,
                                mlir::Value q, mlir::Value k, mlir::Value v,
                                mlir::Value keyMask, double scale);

} // namespace bt

#endif // BT_LIB_CODEGEN_ATTENTION_H
