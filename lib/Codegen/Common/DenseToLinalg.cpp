//===- DenseToLinalg.cpp - dense layer ops → linalg on tensors ------------===//
//
// Patterns of bt-lower-to-linalg for bt.linear, bt.prefix_projection,
// bt.layer_norm, bt.gelu and bt.embedding_lookup (LayerEmitter.h), and the
// reshape helpers the other families share.
//
//===----------------------------------------------------------------------===//

#include "LayerEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

using namespace mlir;
using namespace bt;
using namespace bt::codegen;

Type bt::codegen::computeTypeFor(Type elt) {
  if (elt.getIntOrFloatBitWidth() < 32)
    return Float32Type::get(elt.getContext());
  return elt;
}

SmallVector<ReassociationIndices>
bt::codegen::collapseLeading(unsigned rank, unsigned numLeading) {
  SmallVector<ReassociationIndices> re;
  ReassociationIndices first;
  for (unsigned i = 0; i <= numLeading; ++i)
    first.push_back(i);
  re.push_back(first);
  for (unsigned i = numLeading + 1; i < rank; ++i)
    re.push_back({static_cast<int64_t>(i)});
  return re;
}

void bt::codegen::replaceOpWithCasts(ConversionPatternRewriter &rewriter,
                                     Operation *op, ValueRange values) {
  SmallVector<Value> replacements;
  for (auto [result, value] : llvm::zip(op->getResults(), values)) {
    Value v = value;
    if (v.getType() != result.getType())
      v = rewriter.create<tensor::CastOp>(op->getLoc(), result.getType(), v);
    replacements.push_back(v);
  }
  rewriter.replaceOp(op, replacements);
}

//===----------------------------------------------------------------------===//
// Emitters
//===----------------------------------------------------------------------===//

Value LayerEmitter::collapse(Value v, ArrayRef<ReassociationIndices> re) {
  return b.create<tensor::CollapseShapeOp>(loc, v, re);
}

Value LayerEmitter::expand(Value v, ArrayRef<ReassociationIndices> re,
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

Value LayerEmitter::linear(Value x, Value w, Value bias) {
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
    init = freshFilledF({m, n}, elt, 0.0);
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

Value LayerEmitter::addBias(Value y, Value bias) {
  RankedTensorType yt = tensorTypeOf(y);
  unsigned r = yt.getRank();
  Type elt = yt.getElementType();
  Type ct = computeTypeFor(elt);
  AffineMap id = AffineMap::getMultiDimIdentityMap(r, ctx);
  AffineMap lastMap = selectDims(ctx, r, {r - 1});
  return generic(yt, ValueRange{y, bias}, empty(sizes(y), elt),
                 {id, lastMap, id}, iterators(r, 0),
                 [&](OpBuilder &nb, Location l, ValueRange a) {
                   Value v = nb.create<arith::AddFOp>(l, ext(nb, l, a[0], ct),
                                                      ext(nb, l, a[1], ct));
                   nb.create<linalg::YieldOp>(l, trunc(nb, l, v, a[2].getType()));
                 })[0];
}

Value bt::codegen::emitLinearSeparateBias(OpBuilder &b, Location loc, Value x,
                                          Value w, Value bias) {
  LayerEmitter e(b, loc);
  Value y = e.linear(x, w, Value());
  return bias ? e.addBias(y, bias) : y;
}

Value bt::codegen::emitGelu(OpBuilder &b, Location loc, Value x) {
  return LayerEmitter(b, loc).gelu(x, /*inPlace=*/false);
}

Value LayerEmitter::layerNorm(Value x, Value w, Value bias, double eps) {
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

Value LayerEmitter::gelu(Value x, bool inPlace) {
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

Value LayerEmitter::geluScalar(OpBuilder &nb, Location l, Value in, Type ct,
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

Value LayerEmitter::embeddingLookup(Value ids, Value table, Type resultType) {
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

Value LayerEmitter::prefixProjection(Value ctxEmb, Value w, Value bias, int64_t p,
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

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

namespace {

struct LinearLowering : LayerOpLowering<LinearOp> {
  using LayerOpLowering::LayerOpLowering;
  FailureOr<SmallVector<Value>> emit(LayerEmitter &e, LinearOp op,
                                     OpAdaptor adaptor) const override {
    return SmallVector<Value>{
        e.linear(adaptor.getInput(), adaptor.getWeight(), adaptor.getBias())};
  }
};

struct PrefixProjectionLowering : LayerOpLowering<PrefixProjectionOp> {
  using LayerOpLowering::LayerOpLowering;
  FailureOr<SmallVector<Value>> emit(LayerEmitter &e, PrefixProjectionOp op,
                                     OpAdaptor adaptor) const override {
    return SmallVector<Value>{e.prefixProjection(
        adaptor.getContextEmbedding(), adaptor.getWeight(), adaptor.getBias(),
        op.getPrefixLength(), tensorTypeOf(op.getResult()))};
  }
};

struct LayerNormLowering : LayerOpLowering<LayerNormOp> {
  using LayerOpLowering::LayerOpLowering;
  FailureOr<SmallVector<Value>> emit(LayerEmitter &e, LayerNormOp op,
                                     OpAdaptor adaptor) const override {
    return SmallVector<Value>{e.layerNorm(adaptor.getInput(),
                                          adaptor.getWeight(),
                                          adaptor.getBias(),
                                          op.getEps().convertToDouble())};
  }
};

/// In place when the input is a temporary only the GELU reads (e.g. the
/// MLP's first projection).
struct GeluLowering : LayerOpLowering<GeluOp> {
  using LayerOpLowering::LayerOpLowering;
  FailureOr<SmallVector<Value>> emit(LayerEmitter &e, GeluOp op,
                                     OpAdaptor adaptor) const override {
    Value in = op.getInput();
    return SmallVector<Value>{
        e.gelu(adaptor.getInput(), in.getDefiningOp() && in.hasOneUse())};
  }
};

struct EmbeddingLookupLowering : LayerOpLowering<EmbeddingLookupOp> {
  using LayerOpLowering::LayerOpLowering;
  FailureOr<SmallVector<Value>> emit(LayerEmitter &e, EmbeddingLookupOp op,
                                     OpAdaptor adaptor) const override {
    return SmallVector<Value>{e.embeddingLookup(
        adaptor.getIds(), adaptor.getTable(), op.getType())};
  }
};

} // namespace

void bt::codegen::populateDenseToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<LinearLowering, PrefixProjectionLowering, LayerNormLowering,
               GeluLowering, EmbeddingLookupLowering>(patterns.getContext());
}
