//===- LowerToLinalg.cpp - bt layer-level ops → linalg on tensors ---------===//
//
// bt-lower-to-linalg: rewrites the layer-level bt ops into linalg / tensor /
// arith / math on tensors. Numerics follow HF GPT-NeoX in eager mode (fp32),
// see the pass description in include/bt/Codegen/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "Attention.h"
#include "GPUAttention.h"
#include "LinalgUtils.h"
#include "Optimizer.h"
#include "bt/Codegen/Passes.h"
#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseMap.h"

#include <cmath>
#include <limits>
#include <tuple>

namespace bt {
#define GEN_PASS_DEF_BTLOWERTOLINALG
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

using utils::IteratorType;
using namespace bt::codegen;

/// finfo(float32).min, the HF mask value.
constexpr double kF32Min = -3.4028234663852886e38;

/// f16 / bf16 are computed in f32; f32 stays f32.
Type computeTypeFor(Type elt) {
  if (elt.getIntOrFloatBitWidth() < 32)
    return Float32Type::get(elt.getContext());
  return elt;
}

SmallVector<ReassociationIndices> collapseLeading(unsigned rank,
                                                  unsigned numLeading) {
  // Groups dims [0, numLeading] into one, the rest stay.
  SmallVector<ReassociationIndices> re;
  ReassociationIndices first;
  for (unsigned i = 0; i <= numLeading; ++i)
    first.push_back(i);
  re.push_back(first);
  for (unsigned i = numLeading + 1; i < rank; ++i)
    re.push_back({static_cast<int64_t>(i)});
  return re;
}

/// Emits the tensor IR of the layer-level ops at one insertion point.
class Emitter : public LinalgEmitter {
public:
  using LinalgEmitter::LinalgEmitter;

  Value collapse(Value v, ArrayRef<ReassociationIndices> re) {
    return b.create<tensor::CollapseShapeOp>(loc, v, re);
  }
  /// Expands `v` to `outSizes`. MLIR 19 can neither bufferize nor fold
  /// `tensor.dim` of a `tensor.expand_shape` whose reassociation group has
  /// more than one dynamic dim (e.g. [B*N*S, K] -> [B, N, S, K]), so such
  /// expansions become a `tensor.reshape` (a `memref.reshape` view after
  /// bufferization).
  Value expand(Value v, ArrayRef<ReassociationIndices> re,
               ArrayRef<OpFoldResult> outSizes) {
    SmallVector<int64_t> shape = staticShapeOf(outSizes);
    auto type =
        RankedTensorType::get(shape, tensorTypeOf(v).getElementType());
    bool ambiguous = llvm::any_of(re, [&](const ReassociationIndices &group) {
      return llvm::count_if(group, [&](int64_t d) {
               return ShapedType::isDynamic(shape[d]);
             }) > 1;
    });
    if (!ambiguous)
      return b.create<tensor::ExpandShapeOp>(loc, type, v, re, outSizes);
    SmallVector<Value> dims;
    for (OpFoldResult s : outSizes)
      dims.push_back(getValueOrCreateConstantIndexOp(b, loc, s));
    Value shapeT = b.create<tensor::FromElementsOp>(loc, dims);
    return b.create<tensor::ReshapeOp>(loc, type, v, shapeT);
  }
  //===--------------------------------------------------------------------===//
  // Ops
  //===--------------------------------------------------------------------===//

  /// y = x · Wᵀ + b over the last dim; W is [N, K] or [N, K, 1].
  Value linear(Value x, Value w, Value bias) {
    RankedTensorType xt = tensorTypeOf(x);
    int64_t r = xt.getRank();
    Type elt = xt.getElementType();
    if (tensorTypeOf(w).getRank() == 3)
      w = collapse(w, {{0}, {1, 2}});
    SmallVector<OpFoldResult> xs = sizes(x);
    Value x2 = x;
    if (r == 1)
      x2 = expand(x, {{0, 1}}, {b.getIndexAttr(1), xs[0]});
    else if (r > 2)
      x2 = collapse(x, collapseLeading(r, r - 2));
    OpFoldResult m = sizes(x2)[0];
    OpFoldResult n = sizes(w)[0];
    Value init;
    if (bias) {
      init = b.create<linalg::BroadcastOp>(loc, bias, empty({m, n}, elt),
                                           ArrayRef<int64_t>{0})
                 .getResult()[0];
    } else {
      init = filledF({m, n}, elt, 0.0);
    }
    Value y2 = b.create<linalg::MatmulTransposeBOp>(
                    loc, TypeRange{init.getType()}, ValueRange{x2, w},
                    ValueRange{init})
                   .getResult(0);
    if (r == 1)
      return collapse(y2, {{0, 1}});
    if (r == 2)
      return y2;
    SmallVector<OpFoldResult> outSizes(xs.begin(), xs.end() - 1);
    outSizes.push_back(n);
    return expand(y2, collapseLeading(r, r - 2), outSizes);
  }

  Value layerNorm(Value x, Value w, Value bias, double eps) {
    RankedTensorType xt = tensorTypeOf(x);
    unsigned r = xt.getRank();
    Type elt = xt.getElementType();
    Type ct = computeTypeFor(elt);
    SmallVector<OpFoldResult> xs = sizes(x);
    SmallVector<OpFoldResult> rows(xs.begin(), xs.end() - 1);
    Value c = sizeAsFloat(xs.back(), ct);
    Value epsV = floatConst(ct, eps);
    AffineMap id = AffineMap::getMultiDimIdentityMap(r, ctx);
    AffineMap rowMap = dropLastDims(ctx, r, 1);
    AffineMap lastMap = selectDims(ctx, r, {r - 1});
    AffineMap rowId = AffineMap::getMultiDimIdentityMap(r - 1, ctx);
    auto rowType = RankedTensorType::get(staticShapeOf(rows), ct);

    Value sum =
        generic(rowType, x, filledF(rows, ct, 0.0), {id, rowMap},
                iterators(r - 1, 1), [&](OpBuilder &nb, Location l, ValueRange a) {
                  Value v = ext(nb, l, a[0], ct);
                  nb.create<linalg::YieldOp>(
                      l, nb.create<arith::AddFOp>(l, a[1], v, reassoc(nb)).getResult());
                })[0];
    Value m2 =
        generic(rowType, ValueRange{x, sum}, filledF(rows, ct, 0.0),
                {id, rowMap, rowMap}, iterators(r - 1, 1),
                [&](OpBuilder &nb, Location l, ValueRange a) {
                  Value mean = nb.create<arith::DivFOp>(l, a[1], c);
                  Value d = nb.create<arith::SubFOp>(l, ext(nb, l, a[0], ct), mean);
                  Value sq = nb.create<arith::MulFOp>(l, d, d);
                  nb.create<linalg::YieldOp>(
                      l, nb.create<arith::AddFOp>(l, a[2], sq, reassoc(nb)).getResult());
                })[0];
    // Per-row rstd = 1/sqrt(var + eps) and shift = -rstd * mean.
    ValueRange stats = generic(
        TypeRange{rowType, rowType}, ValueRange{sum, m2},
        ValueRange{empty(rows, ct), empty(rows, ct)},
        {rowId, rowId, rowId, rowId}, iterators(r - 1, 0),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value mean = nb.create<arith::DivFOp>(l, a[0], c);
          Value var = nb.create<arith::DivFOp>(l, a[1], c);
          Value sq = nb.create<math::SqrtOp>(
              l, nb.create<arith::AddFOp>(l, var, epsV));
          Value one = nb.create<arith::ConstantOp>(l, nb.getFloatAttr(ct, 1.0));
          Value rstd = nb.create<arith::DivFOp>(l, one, sq);
          Value shift = nb.create<arith::NegFOp>(
              l, nb.create<arith::MulFOp>(l, rstd, mean));
          nb.create<linalg::YieldOp>(l, ValueRange{rstd, shift});
        });
    Value rstd = stats[0], shift = stats[1];
    return generic(xt, ValueRange{x, rstd, shift, w, bias}, empty(xs, elt),
                   {id, rowMap, rowMap, lastMap, lastMap, id},
                   iterators(r, 0),
                   [&](OpBuilder &nb, Location l, ValueRange a) {
                     Value v = nb.create<arith::MulFOp>(l, ext(nb, l, a[0], ct), a[1]);
                     v = nb.create<arith::AddFOp>(l, v, a[2]);
                     v = nb.create<arith::MulFOp>(l, v, ext(nb, l, a[3], ct));
                     v = nb.create<arith::AddFOp>(l, v, ext(nb, l, a[4], ct));
                     nb.create<linalg::YieldOp>(l, trunc(nb, l, v, a[5].getType()));
                   })[0];
  }

  /// x · 0.5 · (1 + erf(x · 1/√2)) in PyTorch's evaluation order. When
  /// `inPlace` (x is a temporary only the GELU reads, e.g. the MLP's first
  /// projection) the result overwrites x instead of a new buffer.
  Value gelu(Value x, bool inPlace) {
    RankedTensorType xt = tensorTypeOf(x);
    unsigned r = xt.getRank();
    Type elt = xt.getElementType();
    Type ct = computeTypeFor(elt);
    AffineMap id = AffineMap::getMultiDimIdentityMap(r, ctx);
    if (inPlace)
      return generic(xt, ValueRange{}, x, {id}, iterators(r, 0),
                     [&](OpBuilder &nb, Location l, ValueRange a) {
                       nb.create<linalg::YieldOp>(
                           l, geluScalar(nb, l, a[0], ct, elt));
                     })[0];
    return generic(xt, x, empty(sizes(x), elt), {id, id}, iterators(r, 0),
                   [&](OpBuilder &nb, Location l, ValueRange a) {
                     nb.create<linalg::YieldOp>(
                         l, geluScalar(nb, l, a[0], ct, elt));
                   })[0];
  }

  static Value geluScalar(OpBuilder &nb, Location l, Value in, Type ct,
                          Type elt) {
    Value v = ext(nb, l, in, ct);
    Value half = nb.create<arith::ConstantOp>(l, nb.getFloatAttr(ct, 0.5));
    Value one = nb.create<arith::ConstantOp>(l, nb.getFloatAttr(ct, 1.0));
    Value alpha = nb.create<arith::ConstantOp>(
        l, nb.getFloatAttr(ct, static_cast<double>(static_cast<float>(M_SQRT1_2))));
    Value e =
        nb.create<math::ErfOp>(l, nb.create<arith::MulFOp>(l, v, alpha));
    Value y = nb.create<arith::MulFOp>(l, nb.create<arith::MulFOp>(l, v, half),
                                       nb.create<arith::AddFOp>(l, one, e));
    return trunc(nb, l, y, elt);
  }

  /// result[..., e] = table[ids[...], e]; ids outside [0, V) abort.
  Value embeddingLookup(Value ids, Value table, Type resultType) {
    unsigned r = tensorTypeOf(ids).getRank();
    Type elt = tensorTypeOf(table).getElementType();
    SmallVector<OpFoldResult> outSizes = sizes(ids);
    SmallVector<OpFoldResult> ts = sizes(table);
    outSizes.push_back(ts[1]);
    Value v = getValueOrCreateConstantIndexOp(b, loc, ts[0]);
    AffineMap idsMap = dropLastDims(ctx, r + 1, 1);
    AffineMap id = AffineMap::getMultiDimIdentityMap(r + 1, ctx);
    Value out = generic(resultType, ids, empty(outSizes, elt), {idsMap, id},
                        iterators(r + 1, 0),
                        [&](OpBuilder &nb, Location l, ValueRange a) {
                          Value row = nb.create<arith::IndexCastOp>(
                              l, nb.getIndexType(), a[0]);
                          Value zero = nb.create<arith::ConstantIndexOp>(l, 0);
                          Value ge = nb.create<arith::CmpIOp>(
                              l, arith::CmpIPredicate::sge, row, zero);
                          Value lt = nb.create<arith::CmpIOp>(
                              l, arith::CmpIPredicate::slt, row, v);
                          nb.create<cf::AssertOp>(
                              l, nb.create<arith::AndIOp>(l, ge, lt),
                              "bt.embedding_lookup: token id out of range [0, V)");
                          Value col = nb.create<linalg::IndexOp>(l, r);
                          Value e = nb.create<tensor::ExtractOp>(
                              l, table, ValueRange{row, col});
                          nb.create<linalg::YieldOp>(l, e);
                        })[0];
    return out;
  }

  /// context [..., D] → [..., P, T].
  Value prefixProjection(Value ctxEmb, Value w, Value bias, int64_t p,
                         RankedTensorType resultType) {
    Value y = linear(ctxEmb, w, bias);
    unsigned r = tensorTypeOf(y).getRank();
    SmallVector<OpFoldResult> outSizes = sizes(y);
    outSizes.pop_back();
    int64_t t = resultType.getShape().back();
    outSizes.push_back(b.getIndexAttr(p));
    outSizes.push_back(b.getIndexAttr(t));
    SmallVector<ReassociationIndices> re;
    for (unsigned i = 0; i + 1 < r; ++i)
      re.push_back({static_cast<int64_t>(i)});
    re.push_back({static_cast<int64_t>(r - 1), static_cast<int64_t>(r)});
    return expand(y, re, outSizes);
  }

  /// qkv [..., H*3*hd] → q, k, v views [..., H, hd].
  std::tuple<Value, Value, Value> splitQKV(Value qkv, int64_t h, int64_t hd) {
    unsigned r = tensorTypeOf(qkv).getRank();
    SmallVector<OpFoldResult> s = sizes(qkv);
    s.pop_back();
    SmallVector<OpFoldResult> expSizes = s;
    expSizes.append({b.getIndexAttr(h), b.getIndexAttr(3), b.getIndexAttr(hd)});
    SmallVector<ReassociationIndices> re;
    for (unsigned i = 0; i + 1 < r; ++i)
      re.push_back({static_cast<int64_t>(i)});
    re.push_back({static_cast<int64_t>(r - 1), static_cast<int64_t>(r),
                  static_cast<int64_t>(r + 1)});
    Value e = expand(qkv, re, expSizes);
    auto resultType = RankedTensorType::get(
        staticShapeOf([&] {
          SmallVector<OpFoldResult> rs = s;
          rs.append({b.getIndexAttr(h), b.getIndexAttr(hd)});
          return rs;
        }()),
        tensorTypeOf(qkv).getElementType());
    auto slice = [&](int64_t which) -> Value {
      SmallVector<OpFoldResult> offsets(r + 2, b.getIndexAttr(0));
      offsets[r] = b.getIndexAttr(which);
      SmallVector<OpFoldResult> sz = expSizes;
      sz[r] = b.getIndexAttr(1);
      SmallVector<OpFoldResult> strides(r + 2, b.getIndexAttr(1));
      return b.create<tensor::ExtractSliceOp>(loc, resultType, e, offsets, sz,
                                              strides);
    };
    return {slice(0), slice(1), slice(2)};
  }

  /// cos / sin tables [positions..., r/2] (f32) for `positions`.
  std::pair<Value, Value> rotaryTable(Value positions, int64_t rotaryDims,
                                      double base) {
    int64_t half = rotaryDims / 2;
    // inv_freq[i] = 1 / base^(float(2i) / float(r)), all in f32 like HF.
    SmallVector<float> inv;
    for (int64_t i = 0; i < half; ++i) {
      float expo = static_cast<float>(2 * i) / static_cast<float>(rotaryDims);
      float p = std::pow(static_cast<float>(base), expo);
      inv.push_back(1.0f / p);
    }
    Type f32 = b.getF32Type();
    auto invType = RankedTensorType::get({half}, f32);
    Value invFreq = b.create<arith::ConstantOp>(
        loc, DenseElementsAttr::get(invType, ArrayRef<float>(inv)));
    unsigned pr = tensorTypeOf(positions).getRank();
    SmallVector<OpFoldResult> ts = sizes(positions);
    ts.push_back(b.getIndexAttr(half));
    auto tableType = RankedTensorType::get(staticShapeOf(ts), f32);
    AffineMap id = AffineMap::getMultiDimIdentityMap(pr + 1, ctx);
    ValueRange res = generic(
        TypeRange{tableType, tableType}, ValueRange{positions, invFreq},
        ValueRange{empty(ts, f32), empty(ts, f32)},
        {dropLastDims(ctx, pr + 1, 1), selectDims(ctx, pr + 1, {pr}), id, id},
        iterators(pr + 1, 0), [&](OpBuilder &nb, Location l, ValueRange a) {
          Value pos = nb.create<arith::SIToFPOp>(l, f32, a[0]);
          Value angle = nb.create<arith::MulFOp>(l, pos, a[1]);
          Value c = nb.create<math::CosOp>(l, angle);
          Value s = nb.create<math::SinOp>(l, angle);
          nb.create<linalg::YieldOp>(l, ValueRange{c, s});
        });
    return {res[0], res[1]};
  }

  /// Applies the NeoX rotate-half RoPE to x [..., S, H, hd] with tables
  /// [S, r/2] or [..., S, r/2], in one elementwise pass: element j < r reads
  /// its partner x[(j + r/2) mod r] and the table at j mod r/2;
  /// y = x·cos − partner·sin for j < r/2, x·cos + partner·sin for j < r
  /// (HF: x·cos + rotate_half(x)·sin), y = x beyond r.
  Value rotary(Value x, Value cosT, Value sinT, int64_t rotaryDims) {
    RankedTensorType xt = tensorTypeOf(x);
    unsigned n = xt.getRank();
    Type elt = xt.getElementType();
    Type ct = computeTypeFor(elt);
    int64_t half = rotaryDims / 2;
    SmallVector<AffineExpr> dims;
    for (unsigned i = 0; i < n; ++i)
      dims.push_back(getAffineDimExpr(i, ctx));
    AffineExpr j = dims[n - 1];
    SmallVector<AffineExpr> partner(dims.begin(), dims.end());
    partner[n - 1] = (j + half) % rotaryDims;
    AffineMap partnerMap = AffineMap::get(n, 0, partner, ctx);
    SmallVector<AffineExpr> table;
    if (tensorTypeOf(cosT).getRank() == 2) {
      table.push_back(dims[n - 3]);
    } else {
      for (unsigned i = 0; i + 2 < n; ++i)
        table.push_back(dims[i]);
    }
    table.push_back(j % half);
    AffineMap tableMap = AffineMap::get(n, 0, table, ctx);
    AffineMap id = AffineMap::getMultiDimIdentityMap(n, ctx);
    return generic(
        xt, ValueRange{x, x, cosT, sinT}, empty(sizes(x), elt),
        {id, partnerMap, tableMap, tableMap, id}, iterators(n, 0),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          nb.create<linalg::YieldOp>(
              l, rotaryPayload(nb, l, a[0], a[1], a[2], a[3], n - 1, half,
                               rotaryDims, ct, elt));
        })[0];
  }

  /// The rotary of one element x (index j on dim `jDim` of the iteration
  /// space) with its partner x[(j + r/2) mod r] and the table entries.
  static Value rotaryPayload(OpBuilder &nb, Location l, Value x, Value partner,
                             Value cosV, Value sinV, unsigned jDim,
                             int64_t half, int64_t rotaryDims, Type ct,
                             Type elt) {
    Value xv = ext(nb, l, x, ct), xp = ext(nb, l, partner, ct);
    Value c = ext(nb, l, cosV, ct), sn = ext(nb, l, sinV, ct);
    Value xc = nb.create<arith::MulFOp>(l, xv, c);
    Value ps = nb.create<arith::MulFOp>(l, xp, sn);
    Value first = nb.create<arith::SubFOp>(l, xc, ps);
    Value second = nb.create<arith::AddFOp>(l, xc, ps);
    Value jv = nb.create<linalg::IndexOp>(l, jDim);
    Value halfV = nb.create<arith::ConstantIndexOp>(l, half);
    Value rV = nb.create<arith::ConstantIndexOp>(l, rotaryDims);
    Value isFirst =
        nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, jv, halfV);
    Value isRot = nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, jv, rV);
    Value rot = nb.create<arith::SelectOp>(l, isFirst, first, second);
    Value y = nb.create<arith::SelectOp>(l, isRot, rot, xv);
    return trunc(nb, l, y, elt);
  }

  /// One head's rows x [S, hd] (a strided view) rotated into the buffer
  /// `buf` [S, hd] with tables [S, r/2]: x is first copied into the buffer,
  /// then rotated in place (each element reads its own copy and its
  /// partner in the view), so that the buffer stays the destination of
  /// both (an unread `outs` would be replaced by a fresh tensor by
  /// elementwise fusion).
  Value rotaryRowsInto(Value x, Value cosT, Value sinT, int64_t rotaryDims,
                       Value buf) {
    RankedTensorType xt = tensorTypeOf(x);
    Type elt = xt.getElementType();
    Type ct = computeTypeFor(elt);
    int64_t half = rotaryDims / 2;
    AffineExpr s = getAffineDimExpr(0, ctx), j = getAffineDimExpr(1, ctx);
    AffineMap partnerMap =
        AffineMap::get(2, 0, {s, (j + half) % rotaryDims}, ctx);
    AffineMap tableMap = AffineMap::get(2, 0, {s, j % half}, ctx);
    AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
    Value copied = b.create<linalg::CopyOp>(loc, x, buf).getResult(0);
    return generic(xt, ValueRange{x, cosT, sinT}, copied,
                   {partnerMap, tableMap, tableMap, id}, iterators(2, 0),
                   [&](OpBuilder &nb, Location l, ValueRange a) {
                     nb.create<linalg::YieldOp>(
                         l, rotaryPayload(nb, l, a[3], a[0], a[1], a[2], 1,
                                          half, rotaryDims, ct, elt));
                   })[0];
  }

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
                   OpFoldResult kseqIn = {}, Value causalOffset = {}) {
    Type elt = tensorTypeOf(qh).getElementType();
    Type ct = computeTypeFor(elt);
    int64_t sStatic = tensorTypeOf(qh).getDimSize(0);
    int64_t skStatic = tensorTypeOf(kh).getDimSize(0);
    OpFoldResult kseq = kseqIn ? kseqIn : seq;
    auto rowVecType = RankedTensorType::get({sStatic}, ct);
    bool hasMask = static_cast<bool>(maskRowFn);
    Value scoresInit = scratch.scores ? fill(scratch.scores, 0.0)
                                      : filledF({seq, kseq}, elt, 0.0);
    Value scores = b.create<linalg::MatmulTransposeBOp>(
                        loc, TypeRange{scoresInit.getType()}, ValueRange{qh, kh},
                        ValueRange{scoresInit})
                       .getResult(0);
    Value maskRow = hasMask ? maskRowFn() : Value();
    MLIRContext *c = ctx;
    AffineMap id2 = AffineMap::getMultiDimIdentityMap(2, c);
    AffineMap rowMap = selectDims(c, 2, {0});
    AffineMap colMap = selectDims(c, 2, {1});
    AffineMap id1 = AffineMap::getMultiDimIdentityMap(1, c);
    SmallVector<OpFoldResult> rows{seq};
    // v = where(t <= s, score·scale, MIN) + (1 - mask[t])·MIN, in f32.
    auto masked = [&](OpBuilder &bb, Location ll, Value score,
                      Value maskV) -> Value {
      Value sc = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, scale));
      Value minV = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, kF32Min));
      Value x = bb.create<arith::MulFOp>(ll, ext(bb, ll, score, ct), sc);
      Value si = bb.create<linalg::IndexOp>(ll, 0);
      Value ti = bb.create<linalg::IndexOp>(ll, 1);
      if (causalOffset)
        si = bb.create<arith::AddIOp>(ll, si, causalOffset);
      Value causal = bb.create<arith::CmpIOp>(ll, arith::CmpIPredicate::ule, ti, si);
      x = bb.create<arith::SelectOp>(ll, causal, x, minV);
      if (maskV) {
        Value onef = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, 1.0));
        Value m = intToFloat(bb, ll, maskV, ct);
        Value add = bb.create<arith::MulFOp>(
            ll, bb.create<arith::SubFOp>(ll, onef, m), minV);
        x = bb.create<arith::AddFOp>(ll, x, add);
      }
      return x;
    };
    // Row max.
    SmallVector<Value> ins{scores};
    SmallVector<AffineMap> maps{id2};
    if (hasMask) {
      ins.push_back(maskRow);
      maps.push_back(colMap);
    }
    maps.push_back(rowMap);
    double negInf = -std::numeric_limits<double>::infinity();
    Value rowMaxInit = scratch.rowMax ? fill(scratch.rowMax, negInf)
                                      : filledF(rows, ct, negInf);
    Value rowMax =
        generic(rowVecType, ins, rowMaxInit, maps, iterators(1, 1),
                [&](OpBuilder &bb, Location ll, ValueRange a) {
                  Value x = masked(bb, ll, a[0], hasMask ? a[1] : Value());
                  bb.create<linalg::YieldOp>(
                      ll, bb.create<arith::MaximumFOp>(ll, a.back(), x).getResult());
                })[0];
    // e = exp(v - max), in place of the scores when they are f32.
    // Like Sleef's expf (PyTorch's vectorized softmax), d < -104 gives
    // exactly 0; clamping the argument keeps libm off its underflow path.
    bool inPlace = elt == ct;
    SmallVector<Value> eIns;
    SmallVector<AffineMap> eMaps;
    if (!inPlace) {
      eIns.push_back(scores);
      eMaps.push_back(id2);
    }
    if (hasMask) {
      eIns.push_back(maskRow);
      eMaps.push_back(colMap);
    }
    eIns.push_back(rowMax);
    eMaps.push_back(rowMap);
    eMaps.push_back(id2);
    Value eInit = inPlace ? scores : empty({seq, kseq}, ct);
    auto fullType = RankedTensorType::get({sStatic, skStatic}, ct);
    Value ex = generic(
        fullType, eIns, eInit, eMaps, iterators(2, 0),
        [&](OpBuilder &bb, Location ll, ValueRange a) {
          Value score = inPlace ? a.back() : a[0];
          Value maskV = hasMask ? a[inPlace ? 0 : 1] : Value();
          Value mx = a[a.size() - 2];
          Value x = masked(bb, ll, score, maskV);
          Value d = bb.create<arith::SubFOp>(ll, x, mx);
          Value lo = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, -104.0));
          Value zf = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, 0.0));
          Value under = bb.create<arith::CmpFOp>(ll, arith::CmpFPredicate::OLT, d, lo);
          Value arg = bb.create<arith::SelectOp>(ll, under, zf, d);
          Value ev = bb.create<math::ExpOp>(ll, arg);
          bb.create<linalg::YieldOp>(
              ll, bb.create<arith::SelectOp>(ll, under, zf, ev).getResult());
        })[0];
    // Row sum, reciprocal, normalize (in place).
    Value rowSumInit =
        scratch.rowSum ? fill(scratch.rowSum, 0.0) : filledF(rows, ct, 0.0);
    Value rowSum = generic(
        rowVecType, ex, rowSumInit, {id2, rowMap}, iterators(1, 1),
        [&](OpBuilder &bb, Location ll, ValueRange a) {
          bb.create<linalg::YieldOp>(
              ll, bb.create<arith::AddFOp>(ll, a[1], a[0], reassoc(bb)).getResult());
        })[0];
    // The reciprocal, in place of the sums with scratch buffers.
    auto reciprocal = [&](OpBuilder &bb, Location ll, ValueRange a) {
      Value onef = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, 1.0));
      bb.create<linalg::YieldOp>(
          ll, bb.create<arith::DivFOp>(ll, onef, a[0]).getResult());
    };
    Value rowInv =
        scratch.rowSum
            ? generic(rowVecType, ValueRange{}, rowSum, {id1}, iterators(1, 0),
                      reciprocal)[0]
            : generic(rowVecType, rowSum, empty(rows, ct), {id1, id1},
                      iterators(1, 0), reciprocal)[0];
    auto probType = RankedTensorType::get({sStatic, skStatic}, elt);
    Value probs;
    if (inPlace) {
      probs = generic(probType, rowInv, ex, {rowMap, id2}, iterators(2, 0),
                      [&](OpBuilder &bb, Location ll, ValueRange a) {
                        bb.create<linalg::YieldOp>(
                            ll, bb.create<arith::MulFOp>(ll, a[1], a[0]).getResult());
                      })[0];
    } else {
      probs = generic(probType, ValueRange{ex, rowInv}, empty({seq, kseq}, elt),
                      {id2, rowMap, id2}, iterators(2, 0),
                      [&](OpBuilder &bb, Location ll, ValueRange a) {
                        Value p = bb.create<arith::MulFOp>(ll, a[0], a[1]);
                        bb.create<linalg::YieldOp>(ll, trunc(bb, ll, p, elt));
                      })[0];
    }
    // out[b.., :, h, :] = probs · v_h, written into the output slice.
    Value zeroElt = b.create<arith::ConstantOp>(loc, b.getFloatAttr(elt, 0.0));
    Value outInit =
        b.create<linalg::FillOp>(loc, zeroElt, outSliceFn()).getResult(0);
    return b.create<linalg::MatmulOp>(loc, TypeRange{outInit.getType()},
                                      ValueRange{probs, vh}, ValueRange{outInit})
        .getResult(0);
  }

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
                  bool headMajorKV = false) {
    RankedTensorType qt = tensorTypeOf(q);
    unsigned n = qt.getRank();
    unsigned nb = n - 3;
    Type elt = qt.getElementType();
    SmallVector<OpFoldResult> qs = sizes(q); // [batch.., S, H, hd]
    OpFoldResult seq = qs[nb], hd = qs[nb + 2];
    int64_t heads = qt.getDimSize(nb + 1);
    // G = prod(batch) * H.
    Value g = b.create<arith::ConstantIndexOp>(loc, heads);
    SmallVector<Value> batchSizes;
    for (unsigned i = 0; i < nb; ++i) {
      batchSizes.push_back(getValueOrCreateConstantIndexOp(b, loc, qs[i]));
      g = b.create<arith::MulIOp>(loc, g, batchSizes.back());
    }
    Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
    Value one = b.create<arith::ConstantIndexOp>(loc, 1);
    Value headsV = b.create<arith::ConstantIndexOp>(loc, heads);
    Value init = empty(qs, elt);
    bool hasMask = static_cast<bool>(mask);
    int64_t sStatic = qt.getDimSize(nb);
    auto headType = RankedTensorType::get({sStatic, qt.getDimSize(nb + 2)}, elt);
    // Keys: Sk = S unless the keys come from a cache.
    OpFoldResult kseq = seq;
    int64_t skStatic = sStatic;
    Value causalOffset; // Sk - S, null when Sk = S
    if (headMajorKV) {
      RankedTensorType kt = tensorTypeOf(k);
      kseq = sizes(k)[nb + 1];
      skStatic = kt.getDimSize(nb + 1);
      causalOffset = b.create<arith::SubIOp>(
          loc, getValueOrCreateConstantIndexOp(b, loc, kseq),
          getValueOrCreateConstantIndexOp(b, loc, seq));
    }
    auto kHeadType = RankedTensorType::get({skStatic, qt.getDimSize(nb + 2)}, elt);

    auto loop = b.create<scf::ForOp>(
        loc, zero, g, one, ValueRange{init},
        [&](OpBuilder &lb, Location l, Value iv, ValueRange iterArgs) {
          Emitter e(lb, l);
          Value h;
          SmallVector<Value> bIdx;
          delinearizeHeadIndex(lb, l, iv, headsV, batchSizes, h, bIdx);
          // Slices [b.., :, h, :] of q, k, v and the output.
          SmallVector<OpFoldResult> offsets, sliceSizes, strides(n, lb.getIndexAttr(1));
          for (unsigned i = 0; i < nb; ++i) {
            offsets.push_back(bIdx[i]);
            sliceSizes.push_back(lb.getIndexAttr(1));
          }
          offsets.append({lb.getIndexAttr(0), h, lb.getIndexAttr(0)});
          sliceSizes.append({seq, lb.getIndexAttr(1), hd});
          auto head = [&](Value t) -> Value {
            return lb.create<tensor::ExtractSliceOp>(l, headType, t, offsets,
                                                     sliceSizes, strides);
          };
          // Slices [b.., h, :, :] of head-major keys / values.
          auto kvHead = [&](Value t) -> Value {
            if (!headMajorKV)
              return head(t);
            SmallVector<OpFoldResult> kOff(offsets.begin(), offsets.begin() + nb);
            SmallVector<OpFoldResult> kSizes(sliceSizes.begin(),
                                             sliceSizes.begin() + nb);
            kOff.append({h, lb.getIndexAttr(0), lb.getIndexAttr(0)});
            kSizes.append({lb.getIndexAttr(1), kseq, hd});
            return lb.create<tensor::ExtractSliceOp>(l, kHeadType, t, kOff,
                                                     kSizes, strides);
          };
          Value qh = head(q), kh = kvHead(k), vh = kvHead(v);
          auto maskRow = [&]() -> Value {
            SmallVector<OpFoldResult> mOff(offsets.begin(), offsets.begin() + nb);
            SmallVector<OpFoldResult> mSizes(sliceSizes.begin(), sliceSizes.begin() + nb);
            mOff.push_back(lb.getIndexAttr(0));
            mSizes.push_back(kseq);
            SmallVector<OpFoldResult> mStrides(nb + 1, lb.getIndexAttr(1));
            auto mt = RankedTensorType::get({skStatic},
                                            tensorTypeOf(mask).getElementType());
            return lb.create<tensor::ExtractSliceOp>(l, mt, mask, mOff, mSizes,
                                                     mStrides);
          };
          Value acc = iterArgs[0];
          Value o = e.attendHead(
              qh, kh, vh,
              hasMask ? function_ref<Value()>(maskRow) : function_ref<Value()>(),
              [&] { return head(acc); }, seq, scale, /*scratch=*/{}, kseq,
              causalOffset);
          Value updated = lb.create<tensor::InsertSliceOp>(l, o, acc, offsets,
                                                           sliceSizes, strides);
          lb.create<scf::YieldOp>(l, updated);
        });
    return loop.getResult(0);
  }

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
  Value fusedLocalAttention(FusedLocalAttentionOp op, Value cosT, Value sinT,
                            Block *allocaBlock) {
    Value qkv = op.getQkv();
    Value mask = op.getKeyMask();
    RankedTensorType qt = tensorTypeOf(qkv);
    Type elt = qt.getElementType();
    Type ct = computeTypeFor(elt);
    int64_t heads = op.getHeads(), hd = op.getHeadDim();
    int64_t s = qt.getDimSize(2);
    int64_t r = op.getRotaryDims();
    double scale = op.getScale().convertToDouble();
    SmallVector<OpFoldResult> qs = sizes(qkv);
    OpFoldResult seq = b.getIndexAttr(s);
    // [B, N, S, H, 3, hd] view of the projection.
    Value qkv6 = expand(qkv, {{0}, {1}, {2}, {3, 4, 5}},
                        {qs[0], qs[1], qs[2], b.getIndexAttr(heads),
                         b.getIndexAttr(3), b.getIndexAttr(hd)});
    Value init = empty({qs[0], qs[1], qs[2], b.getIndexAttr(heads),
                        b.getIndexAttr(hd)},
                       elt);

    // Stack buffers, allocated once at the entry of the function.
    auto stackBuffer = [&](ArrayRef<int64_t> shape, Type t) -> Value {
      OpBuilder ab(ctx);
      ab.setInsertionPointToStart(allocaBlock);
      return ab.create<memref::AllocaOp>(loc, MemRefType::get(shape, t),
                                         ab.getI64IntegerAttr(64));
    };
    Value qBuf = stackBuffer({s, hd}, elt), kBuf = stackBuffer({s, hd}, elt);
    Value scoresBuf = stackBuffer({s, s}, elt);
    Value maxBuf = stackBuffer({s}, ct), sumBuf = stackBuffer({s}, ct);

    Value g = b.create<arith::ConstantIndexOp>(loc, heads);
    Value bSize = getValueOrCreateConstantIndexOp(b, loc, qs[0]);
    Value nSize = getValueOrCreateConstantIndexOp(b, loc, qs[1]);
    g = b.create<arith::MulIOp>(loc, g, bSize);
    g = b.create<arith::MulIOp>(loc, g, nSize);
    Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
    Value one = b.create<arith::ConstantIndexOp>(loc, 1);
    Value headsV = b.create<arith::ConstantIndexOp>(loc, heads);
    auto rowsType = RankedTensorType::get({s, hd}, elt);
    int64_t half = r / 2;
    auto tableRowsType = RankedTensorType::get({s, half}, b.getF32Type());

    auto loop = b.create<scf::ForOp>(
        loc, zero, g, one, ValueRange{init},
        [&](OpBuilder &lb, Location l, Value iv, ValueRange iterArgs) {
          Emitter e(lb, l);
          OpFoldResult i0 = lb.getIndexAttr(0), i1 = lb.getIndexAttr(1);
          // iv = (b * N + n) * H + h.
          Value h = lb.create<arith::RemUIOp>(l, iv, headsV);
          Value rest = lb.create<arith::DivUIOp>(l, iv, headsV);
          Value n = lb.create<arith::RemUIOp>(l, rest, nSize);
          Value bi = lb.create<arith::DivUIOp>(l, rest, nSize);
          auto toTensor = [&](Value buf) -> Value {
            auto mt = cast<MemRefType>(buf.getType());
            return lb.create<bufferization::ToTensorOp>(
                l, RankedTensorType::get(mt.getShape(), mt.getElementType()),
                buf, /*restrict=*/true, /*writable=*/true);
          };
          // Rows [b, n, :, h, which, :] of the projection (views).
          auto rows = [&](int64_t which) -> Value {
            SmallVector<OpFoldResult> offsets{bi, n, i0, h,
                                              lb.getIndexAttr(which), i0};
            SmallVector<OpFoldResult> sz{i1, i1, seq, i1, i1,
                                         lb.getIndexAttr(hd)};
            SmallVector<OpFoldResult> strides(6, i1);
            return lb.create<tensor::ExtractSliceOp>(l, rowsType, qkv6, offsets,
                                                     sz, strides);
          };
          // cos/sin rows of the block: [S, r/2].
          auto tableRows = [&](Value t) -> Value {
            if (tensorTypeOf(t).getRank() == 2)
              return t;
            SmallVector<OpFoldResult> offsets{bi, n, i0, i0};
            SmallVector<OpFoldResult> sz{i1, i1, seq, lb.getIndexAttr(half)};
            SmallVector<OpFoldResult> strides(4, i1);
            return lb.create<tensor::ExtractSliceOp>(l, tableRowsType, t,
                                                     offsets, sz, strides);
          };
          Value c = tableRows(cosT), sn = tableRows(sinT);
          Value qh = e.rotaryRowsInto(rows(0), c, sn, r, toTensor(qBuf));
          Value kh = e.rotaryRowsInto(rows(1), c, sn, r, toTensor(kBuf));
          Value vh = rows(2);
          auto maskRow = [&]() -> Value {
            auto mt = RankedTensorType::get(
                {s}, tensorTypeOf(mask).getElementType());
            SmallVector<OpFoldResult> offsets{bi, n, i0}, sz{i1, i1, seq},
                strides(3, i1);
            return lb.create<tensor::ExtractSliceOp>(l, mt, mask, offsets, sz,
                                                     strides);
          };
          // Output rows [b, n, :, h, :].
          Value acc = iterArgs[0];
          SmallVector<OpFoldResult> offsets{bi, n, i0, h, i0};
          SmallVector<OpFoldResult> sz{i1, i1, seq, i1, lb.getIndexAttr(hd)};
          SmallVector<OpFoldResult> strides(5, i1);
          auto outSlice = [&]() -> Value {
            return lb.create<tensor::ExtractSliceOp>(l, rowsType, acc, offsets,
                                                     sz, strides);
          };
          HeadScratch scratch{toTensor(scoresBuf), toTensor(maxBuf),
                              toTensor(sumBuf)};
          Value o = e.attendHead(
              qh, kh, vh,
              mask ? function_ref<Value()>(maskRow) : function_ref<Value()>(),
              outSlice, seq, scale, scratch);
          Value updated = lb.create<tensor::InsertSliceOp>(l, o, acc, offsets,
                                                           sz, strides);
          lb.create<scf::YieldOp>(l, updated);
        });
    return loop.getResult(0);
  }

  /// Mean cross-entropy over labels != ignore (NaN if none).
  Value crossEntropy(Value logits, Value labels, int64_t ignore,
                     Type resultType) {
    RankedTensorType lt = tensorTypeOf(logits);
    unsigned r = lt.getRank();
    Type elt = lt.getElementType();
    Type ct = computeTypeFor(elt);
    Type f64 = b.getF64Type();
    Type labelType = tensorTypeOf(labels).getElementType();
    SmallVector<OpFoldResult> ls = sizes(logits);
    SmallVector<OpFoldResult> rows(ls.begin(), ls.end() - 1);
    Value vocab = getValueOrCreateConstantIndexOp(b, loc, ls.back());
    AffineMap id = AffineMap::getMultiDimIdentityMap(r, ctx);
    AffineMap rowMap = dropLastDims(ctx, r, 1);
    auto rowType = RankedTensorType::get(staticShapeOf(rows), ct);
    Value rowMax = generic(
        rowType, logits, filledF(rows, ct, -std::numeric_limits<double>::infinity()),
        {id, rowMap}, iterators(r - 1, 1),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          nb.create<linalg::YieldOp>(
              l, nb.create<arith::MaximumFOp>(l, a[1], ext(nb, l, a[0], ct))
                     .getResult());
        })[0];
    Value sumExp = generic(
        rowType, ValueRange{logits, rowMax}, filledF(rows, ct, 0.0),
        {id, rowMap, rowMap}, iterators(r - 1, 1),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value d = nb.create<arith::SubFOp>(l, ext(nb, l, a[0], ct), a[1]);
          nb.create<linalg::YieldOp>(
              l, nb.create<arith::AddFOp>(l, a[2], nb.create<math::ExpOp>(l, d),
                                           reassoc(nb))
                     .getResult());
        })[0];
    // Total over rows: (sum of losses in f64, count in i64).
    unsigned rr = r - 1;
    AffineMap rowsId = AffineMap::getMultiDimIdentityMap(rr, ctx);
    AffineMap toScalar = AffineMap::get(rr, 0, {}, ctx);
    auto f64Scalar = RankedTensorType::get({}, f64);
    auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
    Value zero64 = b.create<arith::ConstantOp>(loc, b.getFloatAttr(f64, 0.0));
    Value zeroI = b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(0));
    Value sumInit = b.create<linalg::FillOp>(loc, zero64, empty({}, f64)).getResult(0);
    Value cntInit = b.create<linalg::FillOp>(loc, zeroI, empty({}, b.getI64Type())).getResult(0);
    ValueRange totals = generic(
        TypeRange{f64Scalar, i64Scalar}, ValueRange{labels, rowMax, sumExp},
        ValueRange{sumInit, cntInit}, {rowsId, rowsId, rowsId, toScalar, toScalar},
        iterators(0, rr), [&](OpBuilder &nb, Location l, ValueRange a) {
          Value label = a[0];
          Value ign = nb.create<arith::ConstantOp>(
              l, nb.getIntegerAttr(labelType, ignore));
          Value valid = nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, label, ign);
          Value zeroL = nb.create<arith::ConstantOp>(l, nb.getIntegerAttr(labelType, 0));
          Value safe = nb.create<arith::SelectOp>(l, valid, label, zeroL);
          Value idx = nb.create<arith::IndexCastOp>(l, nb.getIndexType(), safe);
          Value zeroIdx = nb.create<arith::ConstantIndexOp>(l, 0);
          Value inRange = nb.create<arith::AndIOp>(
              l, nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::sge, idx, zeroIdx),
              nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, idx, vocab));
          nb.create<cf::AssertOp>(l, inRange,
                                  "bt.cross_entropy: label out of range [0, V)");
          SmallVector<Value> indices;
          for (unsigned i = 0; i < rr; ++i)
            indices.push_back(nb.create<linalg::IndexOp>(l, i));
          indices.push_back(idx);
          Value x = ext(nb, l, nb.create<tensor::ExtractOp>(l, logits, indices), ct);
          // -log_softmax[label] = -((x - max) - log(sum))
          Value lsm = nb.create<arith::SubFOp>(
              l, nb.create<arith::SubFOp>(l, x, a[1]),
              nb.create<math::LogOp>(l, a[2]));
          Value loss = nb.create<arith::ExtFOp>(
              l, f64, nb.create<arith::NegFOp>(l, lsm).getResult());
          Value z = nb.create<arith::ConstantOp>(l, nb.getFloatAttr(f64, 0.0));
          Value add = nb.create<arith::SelectOp>(l, valid, loss, z);
          Value one = nb.create<arith::ConstantOp>(l, nb.getI64IntegerAttr(1));
          Value zi = nb.create<arith::ConstantOp>(l, nb.getI64IntegerAttr(0));
          Value inc = nb.create<arith::SelectOp>(l, valid, one, zi);
          nb.create<linalg::YieldOp>(
              l, ValueRange{nb.create<arith::AddFOp>(l, a[3], add),
                            nb.create<arith::AddIOp>(l, a[4], inc)});
        });
    Type f32 = b.getF32Type();
    AffineMap scalar = AffineMap::get(0, 0, {}, ctx);
    return generic(resultType, ValueRange{totals[0], totals[1]}, empty({}, f32),
                   {scalar, scalar, scalar}, {},
                   [&](OpBuilder &nb, Location l, ValueRange a) {
                     Value s = nb.create<arith::TruncFOp>(l, f32, a[0]);
                     Value c = nb.create<arith::SIToFPOp>(l, f32, a[1]);
                     nb.create<linalg::YieldOp>(
                         l, nb.create<arith::DivFOp>(l, s, c).getResult());
                   })[0];
  }
};

/// Key of a cos/sin table: positions value, rotary dims, bits of the base.
using TableKey = std::tuple<Value, int64_t, uint64_t>;

struct LowerToLinalgPass
    : public bt::impl::BTLowerToLinalgBase<LowerToLinalgPass> {
  using BTLowerToLinalgBase::BTLowerToLinalgBase;

  /// One cos/sin table per distinct (positions, rotary_dims, base), built
  /// right after the definition of the positions.
  llvm::DenseMap<TableKey, std::pair<Value, Value>> tables;

  std::pair<Value, Value> getTable(Value positions, int64_t rotaryDims,
                                   double base) {
    TableKey key{positions, rotaryDims, llvm::bit_cast<uint64_t>(base)};
    auto it = tables.find(key);
    if (it != tables.end())
      return it->second;
    OpBuilder b(positions.getContext());
    b.setInsertionPointAfterValue(positions);
    Emitter e(b, positions.getLoc());
    auto table = e.rotaryTable(positions, rotaryDims, base);
    tables[key] = table;
    return table;
  }

  /// bt.attention / bt.local_attention: the GPU kernels with
  /// gpu-attention (when they support the shape), else the head loop.
  Value attention(Emitter &e, Value q, Value k, Value v, Value mask,
                  double scale) {
    if (gpuAttention && gpuAttentionSupports(tensorTypeOf(q)))
      return emitGPUAttention(e.b, e.loc, q, k, v, mask, scale,
                              /*headMajorKV=*/false);
    return e.attention(q, k, v, mask, scale);
  }

  LogicalResult lower(Operation *op) {
    OpBuilder b(op);
    Emitter e(b, op->getLoc());
    Value result;
    SmallVector<Value> results;
    if (auto o = dyn_cast<LayerNormOp>(op)) {
      result = e.layerNorm(o.getInput(), o.getWeight(), o.getBias(),
                           o.getEps().convertToDouble());
    } else if (auto o = dyn_cast<LinearOp>(op)) {
      result = e.linear(o.getInput(), o.getWeight(), o.getBias());
    } else if (auto o = dyn_cast<GeluOp>(op)) {
      Value in = o.getInput();
      result = e.gelu(in, in.getDefiningOp() && in.hasOneUse());
    } else if (auto o = dyn_cast<EmbeddingLookupOp>(op)) {
      result = e.embeddingLookup(o.getIds(), o.getTable(), o.getType());
    } else if (auto o = dyn_cast<PrefixProjectionOp>(op)) {
      result = e.prefixProjection(o.getContextEmbedding(), o.getWeight(),
                                  o.getBias(), o.getPrefixLength(),
                                  tensorTypeOf(o.getResult()));
    } else if (auto o = dyn_cast<SplitQKVOp>(op)) {
      auto [q, k, v] = e.splitQKV(o.getQkv(), o.getHeads(), o.getHeadDim());
      results = {q, k, v};
    } else if (auto o = dyn_cast<RotaryOp>(op)) {
      if (ShapedType::isDynamic(tensorTypeOf(o.getInput()).getShape().back()))
        return op->emitOpError("head_dim must be static for code generation");
      auto [c, s] = getTable(o.getPositions(), o.getRotaryDims(),
                             o.getBase().convertToDouble());
      result = e.rotary(o.getInput(), c, s, o.getRotaryDims());
    } else if (auto o = dyn_cast<AttentionOp>(op)) {
      result = attention(e, o.getQ(), o.getK(), o.getV(), o.getKeyMask(),
                         o.getScale().convertToDouble());
    } else if (auto o = dyn_cast<LocalAttentionOp>(op)) {
      result = attention(e, o.getQ(), o.getK(), o.getV(), o.getKeyMask(),
                         o.getScale().convertToDouble());
    } else if (auto o = dyn_cast<FusedLocalAttentionOp>(op)) {
      auto [c, s] = getTable(o.getPositions(), o.getRotaryDims(),
                             o.getBase().convertToDouble());
      RankedTensorType qkvType = tensorTypeOf(o.getQkv());
      auto fn = op->getParentOfType<FunctionOpInterface>();
      if (gpuAttention &&
          gpuFusedLocalAttentionSupports(qkvType, o.getHeadDim())) {
        result = emitGPUFusedLocalAttention(
            b, op->getLoc(), o.getQkv(), c, s, o.getKeyMask(), o.getHeads(),
            o.getHeadDim(), o.getRotaryDims(), o.getScale().convertToDouble());
      } else if (fusedKernel && !gpuAttention && fn &&
                 !qkvType.isDynamicDim(2) && !qkvType.isDynamicDim(3)) {
        result = e.fusedLocalAttention(o, c, s, &fn.getFunctionBody().front());
      } else {
        // The unfused chain (fused-kernel=false, or S or hd dynamic).
        auto [q, k, v] = e.splitQKV(o.getQkv(), o.getHeads(), o.getHeadDim());
        Value qr = e.rotary(q, c, s, o.getRotaryDims());
        Value kr = e.rotary(k, c, s, o.getRotaryDims());
        result = attention(e, qr, kr, v, o.getKeyMask(),
                           o.getScale().convertToDouble());
      }
    } else if (auto o = dyn_cast<CrossEntropyOp>(op)) {
      result = e.crossEntropy(o.getLogits(), o.getLabels(), o.getIgnoreIndex(),
                              o.getType());
    } else if (isOptimizerOp(op)) {
      FailureOr<SmallVector<Value>> lowered = lowerOptimizerOp(b, op);
      if (failed(lowered))
        return failure();
      results = *lowered;
    } else {
      return op->emitOpError()
             << "is not a layer-level op that bt-lower-to-linalg can lower; "
                "run bt-decompose first";
    }
    if (result)
      results.push_back(result);
    // Keep the op's declared result types (e.g. static dims the lowering
    // could not infer) with a tensor.cast where they differ.
    for (auto [res, val] : llvm::zip(op->getResults(), results)) {
      Value v = val;
      if (v.getType() != res.getType())
        v = b.create<tensor::CastOp>(op->getLoc(), res.getType(), v);
      res.replaceAllUsesWith(v);
    }
    op->erase();
    return success();
  }

  void runOnOperation() override {
    tables.clear();
    SmallVector<Operation *> work;
    getOperation()->walk([&](Operation *op) {
      // bt.sample is bufferized into a call of the runtime's sampler.
      if (!isa<BTDialect>(op->getDialect()) ||
          isa<ParamOp, ParamRefOp, SampleOp>(op))
        return;
      work.push_back(op);
    });
    for (Operation *op : work)
      if (failed(lower(op)))
        return signalPassFailure();
    tables.clear();

    RewritePatternSet patterns(&getContext());
    tensor::populateDecomposeTensorConcatPatterns(patterns);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace

Value bt::emitCachedAttention(OpBuilder &b, Location loc, Value q, Value k,
                              Value v, Value keyMask, double scale) {
  Emitter e(b, loc);
  return e.attention(q, k, v, keyMask, scale, /*headMajorKV=*/true);
}
