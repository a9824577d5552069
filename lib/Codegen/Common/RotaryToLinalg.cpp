//===- RotaryToLinalg.cpp - bt.split_qkv, bt.rotary → linalg --------------===//
//
// Patterns of bt-lower-to-linalg for bt.split_qkv (views of the fused QKV
// projection) and bt.rotary (NeoX rotate-half RoPE), and the cos/sin tables
// they share with bt.fused_local_attention (RotaryTables).
//
//===----------------------------------------------------------------------===//

#include "LayerEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/bit.h"

#include <cmath>

using namespace mlir;
using namespace bt;
using namespace bt::codegen;

std::pair<Value, Value> RotaryTables::get(OpBuilder &b, Value positions,
                                          int64_t rotaryDims, double base) {
  std::tuple<Value, int64_t, uint64_t> key{positions, rotaryDims,
                                           llvm::bit_cast<uint64_t>(base)};
  auto it = tables.find(key);
  if (it != tables.end())
    return it->second;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(positions);
  LayerEmitter e(b, positions.getLoc());
  std::pair<Value, Value> table = e.rotaryTable(positions, rotaryDims, base);
  tables[key] = table;
  return table;
}

std::tuple<Value, Value, Value>
bt::codegen::emitSplitQKV(OpBuilder &b, Location loc, Value qkv, int64_t heads,
                          int64_t headDim) {
  return LayerEmitter(b, loc).splitQKV(qkv, heads, headDim);
}

Value bt::codegen::emitRotary(OpBuilder &b, Location loc, Value x, Value cosT,
                              Value sinT, int64_t rotaryDims) {
  return LayerEmitter(b, loc).rotary(x, cosT, sinT, rotaryDims);
}

//===----------------------------------------------------------------------===//
// Emitters
//===----------------------------------------------------------------------===//

std::tuple<Value, Value, Value> LayerEmitter::splitQKV(Value qkv, int64_t h, int64_t hd) {
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

std::pair<Value, Value> LayerEmitter::rotaryTable(Value positions, int64_t rotaryDims,
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

Value LayerEmitter::rotary(Value x, Value cosT, Value sinT, int64_t rotaryDims) {
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

Value LayerEmitter::rotaryPayload(OpBuilder &nb, Location l, Value x, Value partner,
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

Value LayerEmitter::rotaryRowsInto(Value x, Value cosT, Value sinT, int64_t rotaryDims,
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

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

namespace {

struct SplitQKVLowering : LayerOpLowering<SplitQKVOp> {
  using LayerOpLowering::LayerOpLowering;
  FailureOr<SmallVector<Value>> emit(LayerEmitter &e, SplitQKVOp op,
                                     OpAdaptor adaptor) const override {
    auto [q, k, v] =
        e.splitQKV(adaptor.getQkv(), op.getHeads(), op.getHeadDim());
    return SmallVector<Value>{q, k, v};
  }
};

/// Needs a static head dim (checked by bt-lower-to-linalg before the
/// conversion).
struct RotaryLowering : LayerOpLowering<RotaryOp> {
  RotaryLowering(MLIRContext *ctx, LayerToLinalgState &state)
      : LayerOpLowering(ctx), state(state) {}
  FailureOr<SmallVector<Value>> emit(LayerEmitter &e, RotaryOp op,
                                     OpAdaptor adaptor) const override {
    auto [c, s] = state.getRotaryTables().get(
        e.b, adaptor.getPositions(), op.getRotaryDims(),
        op.getBase().convertToDouble());
    return SmallVector<Value>{
        e.rotary(adaptor.getInput(), c, s, op.getRotaryDims())};
  }
  LayerToLinalgState &state;
};

} // namespace

void bt::codegen::populateRotaryToLinalgPatterns(RewritePatternSet &patterns,
                                                 LayerToLinalgState &state) {
  patterns.add<SplitQKVLowering>(patterns.getContext());
  patterns.add<RotaryLowering>(patterns.getContext(), state);
}
