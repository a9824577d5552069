//===- GPUAttention.h - dedicated GPU attention kernels (internal) ---------===//
//
// The attention of the CUDA target as dedicated kernels built from gpu /
// scf / arith / math / memref ops (docs/codegen-cuda.md, "Attention
// kernels"). The emitters run at tensor level (bt-lower-to-linalg and
// bt-lower-kv-caches with `gpu-attention`): the operands are read through
// `bufferization.to_memref ... read_only`, the result is a `memref.alloc`
// written by `gpu.launch` kernels and returned as
// `bufferization.to_tensor ... restrict writable`, so one-shot bufferization
// connects them to the rest of the program.
//
// Numerics: HF eager attention in f32 (bt.attention): scores
// `q·k·scale`, causal keys only, key-mask `(1 − m)·MIN` added,
// `MIN = finfo(f32).min`; softmax as an online softmax over tiles of 32
// keys (FlashAttention order: results equal HF's up to rounding). A query
// row without a valid causal key is, like HF, the mean of v over the keys
// whose score is exactly MIN (its masked causal keys and its valid
// non-causal keys).
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_CODEGEN_GPUATTENTION_H
#define BT_LIB_CODEGEN_GPUATTENTION_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace bt {

/// Largest head dim of the GPU attention kernels (their shared-memory tiles
/// are [32, hd + 1] f32 for keys and values).
constexpr int64_t kGPUAttentionMaxHeadDim = 128;

/// Whether the GPU attention kernels handle `q` [batch..., S, H, hd]: f32,
/// static H and hd ≤ kGPUAttentionMaxHeadDim.
bool gpuAttentionSupports(mlir::RankedTensorType q);

/// A number of keys that lives in device memory: the element of `length`
/// (a 0-d i64 tensor) plus `added` (a host index, usually a constant). The
/// KV cache's length under bt-lower-kv-caches `device-cache-length`.
struct GPUKeyCount {
  mlir::Value length;
  mlir::OpFoldResult added;
};

/// Causal attention of `q` [batch..., S, H, hd] over `k`, `v`
/// ([batch..., Sk, H, hd], or [batch..., H, Sk, hd] with `headMajorKV`, the
/// layout of a KV cache) with key flags `keyMask` [batch..., Sk] (null: all
/// valid); query s sits at position Sk − S + s. Prefill-like shapes (S
/// dynamic or > 4) use one kernel: a block per (4 query rows, head), a warp
/// per query row, keys and values staged in shared-memory tiles of 32 keys
/// that the block's warps share, a lane per key for the scores and per
/// head-dim slice for the output (online softmax in registers). Decode-like
/// shapes (static S ≤ 4) use split-K (FlashDecoding) when the keys exceed
/// one chunk of 128 and the grid is narrow (batch·H < 8192 blocks, two
/// waves of an H100): blocks
/// per (head, chunk of 128 keys) write partial (max, sum, acc) rows to a
/// workspace and a second kernel combines them; otherwise one block per
/// head attends all keys. Returns [batch..., S, H, hd].
///
/// With `deviceKeys`, `k` and `v` are views of Sk ≥ the key count keys (a
/// KV cache's capacity): the grids and the split-K choice follow Sk, known
/// to the host, and the kernels load the count and attend only the keys
/// below it (query s at count − S + s; a split past the count reads no key
/// and leaves the neutral partial), so no host code reads the count and the
/// bytes read are those of the counted keys.
mlir::Value emitGPUAttention(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value q, mlir::Value k, mlir::Value v,
                             mlir::Value keyMask, double scale,
                             bool headMajorKV,
                             const GPUKeyCount *deviceKeys = nullptr);

/// Whether the fused local-attention kernel handles a `qkv`
/// [B, N, S, H·3·hd] projection: f32, static S and hd, the three [S, hd + 1]
/// shared-memory arrays within 48 KiB.
bool gpuFusedLocalAttentionSupports(mlir::RankedTensorType qkv,
                                    int64_t headDim);

/// bt.fused_local_attention as one kernel: one block per (block, head) of
/// `qkv` [B, N, S, H·3·hd]; q and k rotated (NeoX rotate-half over the first
/// `rotaryDims` dims with the tables `cosT`, `sinT` [S, r/2] or
/// [B, N, S, r/2]) and v are loaded into shared memory, each warp attends
/// its query rows causally over the block's S keys with key mask `keyMask`
/// [B, N, S] (or null). Returns [B, N, S, H, hd].
mlir::Value emitGPUFusedLocalAttention(mlir::OpBuilder &b, mlir::Location loc,
                                       mlir::Value qkv, mlir::Value cosT,
                                       mlir::Value sinT, mlir::Value keyMask,
                                       int64_t heads, int64_t headDim,
                                       int64_t rotaryDims, double scale);

} // namespace bt

#endif // BT_LIB_CODEGEN_GPUATTENTION_H
