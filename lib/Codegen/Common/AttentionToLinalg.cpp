//===- AttentionToLinalg.cpp - attention ops → linalg on tensors ----------===//
//
// Patterns of bt-lower-to-linalg for bt.attention, bt.local_attention and
// bt.fused_local_attention: one scf.for over the heads, each head's scores,
// softmax and · v as linalg ops on strided views (LayerEmitter::attendHead).
// The same head loop lowers bt.kv_attend (KVCachesToTensors.cpp) through
// codegen::emitAttention.
//
//===----------------------------------------------------------------------===//

#include "LayerEmitter.h"

#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace bt;
using namespace bt::codegen;

Value bt::codegen::emitAttention(OpBuilder &b, Location loc, Value q, Value k,
                                 Value v, Value keyMask, double scale,
                                 bool headMajorKV) {
  return LayerEmitter(b, loc).attention(q, k, v, keyMask, scale, headMajorKV);
}

//===----------------------------------------------------------------------===//
// Emitters
//===----------------------------------------------------------------------===//

Value LayerEmitter::attendHead(Value qh, Value kh, Value vh,
                 function_ref<Value()> maskRowFn,
                 function_ref<Value()> outSliceFn, OpFoldResult seq,
                 double scale, const HeadScratch &scratch,
                 OpFoldResult kseqIn, Value causalOffset) {
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

Value LayerEmitter::attendRows(const AttentionOperands &in, Value h,
                               ArrayRef<Value> bIdx, Value acc,
                               OpFoldResult r0, OpFoldResult rows,
                               OpFoldResult keys, Value offset) {
  RankedTensorType qt = tensorTypeOf(in.q);
  unsigned n = qt.getRank(), nb = n - 3;
  Type elt = qt.getElementType();
  OpFoldResult hd = sizes(in.q)[nb + 2];
  int64_t hdStatic = qt.getDimSize(nb + 2);
  auto headType =
      RankedTensorType::get({staticShapeOf(rows)[0], hdStatic}, elt);
  auto kHeadType =
      RankedTensorType::get({staticShapeOf(keys)[0], hdStatic}, elt);
  // Slices [b.., rows, h, :] of q and the output.
  SmallVector<OpFoldResult> offsets, sliceSizes, strides(n, b.getIndexAttr(1));
  for (unsigned i = 0; i < nb; ++i) {
    offsets.push_back(bIdx[i]);
    sliceSizes.push_back(b.getIndexAttr(1));
  }
  offsets.append({r0, h, b.getIndexAttr(0)});
  sliceSizes.append({rows, b.getIndexAttr(1), hd});
  auto head = [&](Value t) -> Value {
    return b.create<tensor::ExtractSliceOp>(loc, headType, t, offsets,
                                            sliceSizes, strides);
  };
  // Keys / values [b.., 0:keys, h, :], or [b.., h, 0:keys, :] when
  // head-major.
  auto kvHead = [&](Value t) -> Value {
    SmallVector<OpFoldResult> kOff(offsets.begin(), offsets.begin() + nb);
    SmallVector<OpFoldResult> kSizes(sliceSizes.begin(),
                                     sliceSizes.begin() + nb);
    if (in.headMajorKV) {
      kOff.append({h, b.getIndexAttr(0), b.getIndexAttr(0)});
      kSizes.append({b.getIndexAttr(1), keys, hd});
    } else {
      kOff.append({b.getIndexAttr(0), h, b.getIndexAttr(0)});
      kSizes.append({keys, b.getIndexAttr(1), hd});
    }
    return b.create<tensor::ExtractSliceOp>(loc, kHeadType, t, kOff, kSizes,
                                            strides);
  };
  Value qh = head(in.q), kh = kvHead(in.k), vh = kvHead(in.v);
  auto maskRow = [&]() { return maskSlice(in.mask, bIdx, keys); };
  Value o = attendHead(
      qh, kh, vh,
      in.mask ? function_ref<Value()>(maskRow) : function_ref<Value()>(),
      [&] { return head(acc); }, rows, in.scale, /*scratch=*/{}, keys, offset);
  return b.create<tensor::InsertSliceOp>(loc, o, acc, offsets, sliceSizes,
                                         strides);
}

Value LayerEmitter::maskSlice(Value mask, ArrayRef<Value> bIdx,
                              OpFoldResult keys) {
  SmallVector<OpFoldResult> offsets(bIdx.begin(), bIdx.end());
  SmallVector<OpFoldResult> sizes(bIdx.size(), b.getIndexAttr(1));
  offsets.push_back(b.getIndexAttr(0));
  sizes.push_back(keys);
  SmallVector<OpFoldResult> strides(bIdx.size() + 1, b.getIndexAttr(1));
  auto type = RankedTensorType::get(staticShapeOf(keys),
                                    tensorTypeOf(mask).getElementType());
  return b.create<tensor::ExtractSliceOp>(loc, type, mask, offsets, sizes,
                                          strides);
}

Value LayerEmitter::firstValidKey(Value maskRow, Value keys) {
  Type mElt = tensorTypeOf(maskRow).getElementType();
  Value none = b.create<tensor::EmptyOp>(loc, ArrayRef<int64_t>{},
                                         b.getIndexType());
  none = b.create<linalg::FillOp>(loc, keys, none).getResult(0);
  AffineMap in = AffineMap::getMultiDimIdentityMap(1, ctx);
  AffineMap out = AffineMap::get(1, 0, {}, ctx);
  Value first = generic(
      none.getType(), maskRow, none, {in, out}, iterators(0, 1),
      [&](OpBuilder &gb, Location gl, ValueRange a) {
        Value zeroM =
            gb.create<arith::ConstantOp>(gl, gb.getIntegerAttr(mElt, 0));
        Value valid =
            gb.create<arith::CmpIOp>(gl, arith::CmpIPredicate::ne, a[0], zeroM);
        Value t = gb.create<linalg::IndexOp>(gl, 0);
        Value cand = gb.create<arith::SelectOp>(gl, valid, t, a[1]);
        gb.create<linalg::YieldOp>(
            gl, gb.create<arith::MinUIOp>(gl, a[1], cand).getResult());
      })[0];
  return b.create<tensor::ExtractOp>(loc, first, ValueRange{});
}

Value LayerEmitter::attention(Value q, Value k, Value v, Value mask, double scale,
                bool headMajorKV) {
  RankedTensorType qt = tensorTypeOf(q);
  unsigned nb = qt.getRank() - 3;
  SmallVector<OpFoldResult> qs = sizes(q); // [batch.., S, H, hd]
  OpFoldResult seq = qs[nb];
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
  Value init = empty(qs, qt.getElementType());
  int64_t sStatic = qt.getDimSize(nb);
  // Keys: Sk = S unless the keys come from a cache.
  OpFoldResult kseq = seq;
  Value causalOffset; // Sk - S, null when Sk = S
  if (headMajorKV) {
    kseq = sizes(k)[nb + 1];
    causalOffset = b.create<arith::SubIOp>(
        loc, getValueOrCreateConstantIndexOp(b, loc, kseq),
        getValueOrCreateConstantIndexOp(b, loc, seq));
  }
  // More than kAttentionRowChunk query rows (a prefill, a training or eval
  // forward; possibly, when S is dynamic) go in chunks of that many: chunk
  // [r0, r0 + rc) sees keys [0, r0 + rc + Sk - S) only, so the scores, the
  // softmax and probs · v skip the keys the causal mask hides from every row
  // of the chunk (about half of them for S = Sk >> the chunk). Each row's
  // result is the same: a hidden key's probability is exactly 0 (a chunk
  // with a row that has no valid causal key keeps every key: firstValidKey).
  bool chunked = ShapedType::isDynamic(sStatic) || sStatic > kAttentionRowChunk;
  Value seqV = getValueOrCreateConstantIndexOp(b, loc, seq);
  Value kseqV = getValueOrCreateConstantIndexOp(b, loc, kseq);
  Value chunkV = b.create<arith::ConstantIndexOp>(loc, kAttentionRowChunk);
  AttentionOperands operands{q, k, v, mask, scale, headMajorKV};

  auto loop = b.create<scf::ForOp>(
      loc, zero, g, one, ValueRange{init},
      [&](OpBuilder &lb, Location l, Value iv, ValueRange iterArgs) {
        LayerEmitter e(lb, l);
        Value h;
        SmallVector<Value> bIdx;
        delinearizeHeadIndex(lb, l, iv, headsV, batchSizes, h, bIdx);
        if (!chunked) {
          lb.create<scf::YieldOp>(
              l, e.attendRows(operands, h, bIdx, iterArgs[0],
                              lb.getIndexAttr(0), seq, kseq, causalOffset));
          return;
        }
        // A row before the first valid key has no valid causal key; HF then
        // spreads it uniformly over every key whose score is exactly MIN,
        // the valid non-causal ones included, so a chunk holding such a row
        // keeps all Sk keys (exactly HF's result for it).
        Value firstValid =
            mask ? e.firstValidKey(e.maskSlice(mask, bIdx, kseq), kseqV)
                 : Value();
        auto chunks = lb.create<scf::ForOp>(
            l, zero, seqV, chunkV, ValueRange{iterArgs[0]},
            [&](OpBuilder &cb, Location cl, Value r0, ValueRange chunkArgs) {
              // rows = min(chunk, S - r0); keys = r0 + rows + Sk - S.
              MLIRContext *c = cb.getContext();
              AffineMap rowsMap = AffineMap::get(
                  1, 1,
                  {getAffineConstantExpr(kAttentionRowChunk, c),
                   getAffineSymbolExpr(0, c) - getAffineDimExpr(0, c)},
                  c);
              Value rows = cb.create<affine::AffineMinOp>(
                  cl, rowsMap, ValueRange{r0, seqV});
              Value end = cb.create<arith::AddIOp>(cl, r0, rows);
              Value offset = r0;
              if (causalOffset) {
                end = cb.create<arith::AddIOp>(cl, end, causalOffset);
                offset = cb.create<arith::AddIOp>(cl, r0, causalOffset);
              }
              // Row r0 sees keys [0, offset]: none valid -> all Sk keys.
              if (firstValid) {
                Value blind = cb.create<arith::CmpIOp>(
                    cl, arith::CmpIPredicate::ult, offset, firstValid);
                end = cb.create<arith::SelectOp>(cl, blind, kseqV, end);
              }
              LayerEmitter ce(cb, cl);
              cb.create<scf::YieldOp>(
                  cl, ce.attendRows(operands, h, bIdx, chunkArgs[0], r0, rows,
                                    end, offset));
            });
        lb.create<scf::YieldOp>(l, chunks.getResult(0));
      });
  // Each head reads its own slices and writes its own output slice; the
  // per-head buffers are created in the body (kIndependentIterationsAttrName).
  loop->setAttr(bt::kIndependentIterationsAttrName, b.getUnitAttr());
  return loop.getResult(0);
}

Value LayerEmitter::fusedLocalAttention(FusedLocalAttentionOp op, Value qkv,
                                        Value mask, Value cosT, Value sinT,
                                        Block *allocaBlock) {
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
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(allocaBlock);
    return b.create<memref::AllocaOp>(loc, MemRefType::get(shape, t),
                                      b.getI64IntegerAttr(64));
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
        LayerEmitter e(lb, l);
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

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

namespace {

/// bt.attention and bt.local_attention (the same numerics; local attention
/// has [B, N_blk] batch dims).
template <typename OpT>
struct AttentionLowering : LayerOpLowering<OpT> {
  using LayerOpLowering<OpT>::LayerOpLowering;
  using OpAdaptor = typename LayerOpLowering<OpT>::OpAdaptor;
  FailureOr<SmallVector<Value>> emit(LayerEmitter &e, OpT op,
                                     OpAdaptor adaptor) const override {
    return SmallVector<Value>{e.attention(
        adaptor.getQ(), adaptor.getK(), adaptor.getV(), adaptor.getKeyMask(),
        op.getScale().convertToDouble())};
  }
};

/// One kernel per block and head with stack buffers (LayerEmitter::
/// fusedLocalAttention) when the state allows it and S and hd are static;
/// the unfused chain bt.split_qkv → bt.rotary → bt.local_attention
/// otherwise.
struct FusedLocalAttentionLowering : LayerOpLowering<FusedLocalAttentionOp> {
  FusedLocalAttentionLowering(MLIRContext *ctx, LayerToLinalgState &state)
      : LayerOpLowering(ctx), state(state) {}
  FailureOr<SmallVector<Value>> emit(LayerEmitter &e, FusedLocalAttentionOp op,
                                     OpAdaptor adaptor) const override {
    auto [c, s] = state.getRotaryTables().get(
        e.b, adaptor.getPositions(), op.getRotaryDims(),
        op.getBase().convertToDouble());
    RankedTensorType qkvType = tensorTypeOf(adaptor.getQkv());
    auto fn = op->getParentOfType<FunctionOpInterface>();
    if (state.useFusedKernel() && fn && !qkvType.isDynamicDim(2) &&
        !qkvType.isDynamicDim(3))
      return SmallVector<Value>{
          e.fusedLocalAttention(op, adaptor.getQkv(), adaptor.getKeyMask(), c,
                                s, &fn.getFunctionBody().front())};
    auto [q, k, v] =
        e.splitQKV(adaptor.getQkv(), op.getHeads(), op.getHeadDim());
    Value qr = e.rotary(q, c, s, op.getRotaryDims());
    Value kr = e.rotary(k, c, s, op.getRotaryDims());
    return SmallVector<Value>{e.attention(qr, kr, v, adaptor.getKeyMask(),
                                          op.getScale().convertToDouble())};
  }
  LayerToLinalgState &state;
};

} // namespace

void bt::codegen::populateAttentionToLinalgPatterns(
    RewritePatternSet &patterns, LayerToLinalgState &state) {
  patterns.add<AttentionLowering<AttentionOp>,
               AttentionLowering<LocalAttentionOp>>(patterns.getContext());
  patterns.add<FusedLocalAttentionLowering>(patterns.getContext(), state);
}
