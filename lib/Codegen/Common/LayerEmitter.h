//===- LayerEmitter.h - tensor IR of the layer-level ops --------*- C++ -*-===//
//
// The emitters of bt-lower-to-linalg's patterns (lib/Codegen/Common,
// internal): LayerEmitter builds the linalg / tensor / arith / math IR of one
// layer-level op at an insertion point. Its methods are defined next to the
// patterns that use them, one file per family of ops:
//
//   DenseToLinalg.cpp      bt.linear, bt.prefix_projection, bt.layer_norm,
//                          bt.gelu, bt.embedding_lookup
//   RotaryToLinalg.cpp     bt.split_qkv, bt.rotary (and their cos/sin tables)
//   AttentionToLinalg.cpp  bt.attention, bt.local_attention,
//                          bt.fused_local_attention
//   LossToLinalg.cpp       bt.cross_entropy
//
// Numerics follow HF GPT-NeoX in eager mode (fp32); see the description of
// bt-lower-to-linalg in include/bt/Codegen/Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_CODEGEN_COMMON_LAYEREMITTER_H
#define BT_LIB_CODEGEN_COMMON_LAYEREMITTER_H

#include "LinalgUtils.h"
#include "bt/Codegen/LayerToLinalg.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"

#include <tuple>

namespace bt::codegen {

using mlir::ArrayRef;
using mlir::Block;
using mlir::function_ref;
using mlir::Location;
using mlir::OpBuilder;
using mlir::OpFoldResult;
using mlir::RankedTensorType;
using mlir::ReassociationIndices;
using mlir::Type;
using mlir::Value;

/// finfo(float32).min, the HF mask value.
constexpr double kF32Min = -3.4028234663852886e38;
/// Query rows per chunk of LayerEmitter::attention: with more rows than this,
/// each chunk of rows attends only to the keys the causal mask lets its last
/// row see. 64: at S = Sk = 512 the chunks compute 56 % of the S x Sk
/// scores (the triangle is 50 %) in products of 64 rows.
constexpr int64_t kAttentionRowChunk = 64;

/// The type computations in `elt` are done in: f16 / bf16 are computed in
/// f32; f32 stays f32.
mlir::Type computeTypeFor(mlir::Type elt);

/// The reassociation of a rank-`rank` tensor that groups dims
/// [0, numLeading] into one; the other dims stay.
llvm::SmallVector<mlir::ReassociationIndices>
collapseLeading(unsigned rank, unsigned numLeading);

/// Emits the tensor IR of the layer-level ops at one insertion point.
class LayerEmitter : public LinalgEmitter {
public:
  using LinalgEmitter::LinalgEmitter;

  Value collapse(Value v, ArrayRef<ReassociationIndices> re);

  /// Expands `v` to `outSizes`. MLIR 19 can neither bufferize nor fold
  /// `tensor.dim` of a `tensor.expand_shape` whose reassociation group has
  /// more than one dynamic dim (e.g. [B*N*S, K] -> [B, N, S, K]), so such
  /// expansions become a `tensor.reshape` (a `memref.reshape` view after
  /// bufferization).
  Value expand(Value v, ArrayRef<ReassociationIndices> re,
               ArrayRef<OpFoldResult> outSizes);

  /// y = x · Wᵀ + b over the last dim; W is [N, K] or [N, K, 1].
  Value linear(Value x, Value w, Value bias);
  /// `y` [..., N] + `bias` [N] broadcast over the leading dims: one
  /// elementwise generic with a fresh output.
  Value addBias(Value y, Value bias);

  Value layerNorm(Value x, Value w, Value bias, double eps);

  /// x · 0.5 · (1 + erf(x · 1/√2)) in PyTorch's evaluation order. When
  /// `inPlace` (x is a temporary only the GELU reads, e.g. the MLP's first
  /// projection) the result overwrites x instead of a new buffer.
  Value gelu(Value x, bool inPlace);

  static Value geluScalar(OpBuilder &nb, Location l, Value in, Type ct,
                          Type elt);

  /// result[..., e] = table[ids[...], e]; ids outside [0, V) abort.
  Value embeddingLookup(Value ids, Value table, Type resultType);

  /// context [..., D] → [..., P, T].
  Value prefixProjection(Value ctxEmb, Value w, Value bias, int64_t p,
                         RankedTensorType resultType);

  /// qkv [..., H*3*hd] → q, k, v views [..., H, hd].
  std::tuple<Value, Value, Value> splitQKV(Value qkv, int64_t h, int64_t hd);

  /// cos / sin tables [positions..., r/2] (f32) for `positions`.
  std::pair<Value, Value> rotaryTable(Value positions, int64_t rotaryDims,
                                      double base);

  /// Applies the NeoX rotate-half RoPE to x [..., S, H, hd] with tables
  /// [S, r/2] or [..., S, r/2], in one elementwise pass: element j < r reads
  /// its partner x[(j + r/2) mod r] and the table at j mod r/2;
  /// y = x·cos − partner·sin for j < r/2, x·cos + partner·sin for j < r
  /// (HF: x·cos + rotate_half(x)·sin), y = x beyond r.
  Value rotary(Value x, Value cosT, Value sinT, int64_t rotaryDims);

  /// The rotary of one element x (index j on dim `jDim` of the iteration
  /// space) with its partner x[(j + r/2) mod r] and the table entries.
  static Value rotaryPayload(OpBuilder &nb, Location l, Value x, Value partner,
                             Value cosV, Value sinV, unsigned jDim,
                             int64_t half, int64_t rotaryDims, Type ct,
                             Type elt);

  /// One head's rows x [S, hd] (a strided view) rotated into the buffer
  /// `buf` [S, hd] with tables [S, r/2]: x is first copied into the buffer,
  /// then rotated in place (each element reads its own copy and its
  /// partner in the view), so that the buffer stays the destination of
  /// both (an unread `outs` would be replaced by a fresh tensor by
  /// elementwise fusion).
  Value rotaryRowsInto(Value x, Value cosT, Value sinT, int64_t rotaryDims,
                       Value buf);

  /// Scratch tensors of one head's attention (null: fresh tensors): the
  /// [S, S] scores (element type) and the [S] row max and sum (compute
  /// type; the reciprocal of the sums overwrites them).
  struct HeadScratch {
    Value scores, rowMax, rowSum;
  };

  /// One head of causal attention, HF eager semantics: qh [S, hd], kh, vh
  /// [Sk, hd] (kh, vh may be strided views; Sk = S unless the keys come from
  /// a KV cache, then `kseq` = Sk and query s sits at position
  /// `causalOffset` + s = Sk - S + s), `maskRow()` the key mask [Sk] (null
  /// function: no mask). Scores by `linalg.matmul_transpose_b`, the softmax
  /// in place of the scores, and probs · v by `linalg.matmul` into
  /// `outSlice()` [S, hd], which is returned. (The mask and output slices are
  /// built where the attention needs them.)
  Value attendHead(Value qh, Value kh, Value vh,
                   function_ref<Value()> maskRowFn,
                   function_ref<Value()> outSliceFn, OpFoldResult seq,
                   double scale, const HeadScratch &scratch = {},
                   OpFoldResult kseqIn = {}, Value causalOffset = {});

  /// Causal attention over [batch..., S, H, hd] (batch = [B] or [B, N_blk]),
  /// HF eager semantics; `mask` [batch..., S] or null.
  ///
  /// One scf.for over the G = batch·H heads; each iteration works on the
  /// strided [S, hd] slices of q, k, v (row stride H·hd, unit inner stride,
  /// so BLAS reads them in place), keeps one [S, S] score buffer that the
  /// softmax updates in place (scores → exp → probabilities) and writes its
  /// [S, hd] result into the output slice. Peak scratch is one head's scores
  /// instead of [G, S, S] tensors.
  ///
  /// With `headMajorKV` (a KV cache, bt-lower-kv-caches), k and v are
  /// [batch..., H, Sk, hd] with Sk ≥ S keys, `mask` is [batch..., Sk], and
  /// query s sits at position Sk - S + s: it attends keys t ≤ Sk - S + s
  /// (HF with past keys/values).
  Value attention(Value q, Value k, Value v, Value mask, double scale,
                  bool headMajorKV = false);

  /// The operands of one attention op, as `attention` takes them.
  struct AttentionOperands {
    Value q, k, v, mask; // mask: null when none
    double scale;
    bool headMajorKV;
  };

  /// Query rows [r0, r0 + rows) of head `h` of batch entry `bIdx` (q
  /// [batch..., S, H, hd]) against keys [0, keys) of k, v ([batch..., Sk,
  /// H, hd], or [batch..., H, Sk, hd] when head-major) and of the key mask
  /// [batch..., Sk] (`attendHead`, HF eager semantics: query row s of the
  /// chunk sits at key position `offset` + s, `offset` null: s), written
  /// into those rows of `acc` [batch..., S, H, hd], which is returned.
  /// Element type: q's (f32, or bf16 / f16 computed in f32).
  Value attendRows(const AttentionOperands &in, Value h, ArrayRef<Value> bIdx,
                   Value acc, OpFoldResult r0, OpFoldResult rows,
                   OpFoldResult keys, Value offset);

  /// The slice [bIdx..., 0:keys] of a key mask [batch..., Sk], as [keys].
  Value maskSlice(Value mask, ArrayRef<Value> bIdx, OpFoldResult keys);

  /// The index of the first non-zero element of the key-mask row `maskRow`
  /// [keys] (any integer type), or `keys` when every key is masked: one
  /// linalg reduction, the result extracted as an index.
  Value firstValidKey(Value maskRow, Value keys);

  /// bt.fused_local_attention as one kernel: one scf.for over the
  /// B·N_blk·H heads of the blocks; an iteration reads the head's S ≤ P + L_B
  /// rows of q, k and v directly from the fused QKV projection (strided
  /// views of `qkv` [B, N_blk, S, H·3·hd], no split copies), rotates q and k
  /// into [S, hd] stack buffers, and runs the head's attention
  /// (attendHead) with its scores and row statistics in stack buffers too;
  /// only the [S, hd] result is written to memory. The stack buffers are
  /// `memref.alloca`s at the entry of the enclosing function (static
  /// shapes: S and hd must be static), seen as tensors through
  /// `bufferization.to_tensor restrict writable` in each iteration. The
  /// arithmetic is exactly the unfused chain's (same rotary payload and
  /// table, same attendHead), so the results are identical.
  Value fusedLocalAttention(FusedLocalAttentionOp op, Value qkv, Value mask,
                            Value cosT, Value sinT, Block *allocaBlock);

  /// Mean cross-entropy over labels != ignore (NaN if none).
  Value crossEntropy(Value logits, Value labels, int64_t ignore,
                     Type resultType);
};

/// The pattern of a layer-level op whose lowering `emit` builds with a
/// LayerEmitter at the op; the op is replaced by the values it returns, cast
/// to the op's declared result types where they differ (replaceOpWithCasts).
template <typename OpT>
class LayerOpLowering : public mlir::OpConversionPattern<OpT> {
public:
  using mlir::OpConversionPattern<OpT>::OpConversionPattern;
  using OpAdaptor = typename mlir::OpConversionPattern<OpT>::OpAdaptor;

  /// The values that replace the results of `op` (in result order).
  virtual mlir::FailureOr<llvm::SmallVector<Value>>
  emit(LayerEmitter &e, OpT op, OpAdaptor adaptor) const = 0;

  mlir::LogicalResult
  matchAndRewrite(OpT op, OpAdaptor adaptor,
                  mlir::ConversionPatternRewriter &rewriter) const final {
    LayerEmitter e(rewriter, op.getLoc());
    mlir::FailureOr<llvm::SmallVector<Value>> values = emit(e, op, adaptor);
    if (mlir::failed(values))
      return mlir::failure();
    replaceOpWithCasts(rewriter, op, *values);
    return mlir::success();
  }
};

// The pattern families of bt-lower-to-linalg (benefit 1), each in its file.
void populateDenseToLinalgPatterns(mlir::RewritePatternSet &patterns);
void populateRotaryToLinalgPatterns(mlir::RewritePatternSet &patterns,
                                    LayerToLinalgState &state);
void populateAttentionToLinalgPatterns(mlir::RewritePatternSet &patterns,
                                       LayerToLinalgState &state);
void populateLossToLinalgPatterns(mlir::RewritePatternSet &patterns);

} // namespace bt::codegen

#endif // BT_LIB_CODEGEN_COMMON_LAYEREMITTER_H
