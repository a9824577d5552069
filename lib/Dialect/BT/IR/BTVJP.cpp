//===- BTVJP.cpp - vector-Jacobian rules of the bt ops ---------------------===//
//
// DifferentiableOpInterface::buildVJP of the bt ops (reverse-mode
// differentiation, include/bt/Transforms/Autodiff.h) and the helpers shared
// with the upstream ops' external models (BTVJPUtils.h).
//
// Rules, with dy the gradient of the result:
// - bt.param_ref: no operands (the engine collects its result's gradient);
// - bt.linear: dx = dy · W (linalg.matmul), dW = dyᵀ · x
//   (linalg.matmul_transpose_a, summed over all leading dims), db = Σ dy;
// - bt.prefix_projection: bt.linear's rule on dy [..., P·T];
// - bt.layer_norm: bt.layer_norm_grad;
// - bt.gelu: dx = dy · (Φ(x) + x · φ(x)) (linalg.generic, PyTorch's
//   GeluBackward for approximate='none');
// - bt.embedding_lookup: bt.embedding_grad (scatter-add);
// - bt.split_qkv: the three gradients interleaved back per head;
// - bt.rotary: the inverse rotation, bt.rotary of dy at -positions (RoPE is
//   orthogonal: R(θ)ᵀ = R(-θ));
// - bt.attention, bt.local_attention: bt.attention_grad;
// - bt.fused_local_attention: the unfused chain's rules (split, rotary,
//   bt.attention_grad, inverse rotary, interleave);
// - bt.cross_entropy: bt.cross_entropy_grad.
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Dialect/BT/IR/BTVJPUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace bt;

//===----------------------------------------------------------------------===//
// Helpers (BTVJPUtils.h)
//===----------------------------------------------------------------------===//

static RankedTensorType tensorTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

SmallVector<OpFoldResult> vjp::sizesOf(OpBuilder &b, Location loc, Value v) {
  return tensor::getMixedSizes(b, loc, v);
}

Value vjp::zeros(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                 Type elt) {
  Value empty = b.create<tensor::EmptyOp>(loc, sizes, elt);
  Value zero = b.create<arith::ConstantOp>(loc, b.getFloatAttr(elt, 0.0));
  return b.create<linalg::FillOp>(loc, zero, empty).getResult(0);
}

Value vjp::zerosLike(OpBuilder &b, Location loc, Value like) {
  Value z = zeros(b, loc, sizesOf(b, loc, like),
                  tensorTypeOf(like).getElementType());
  return castTo(b, loc, z, like.getType());
}

Value vjp::castTo(OpBuilder &b, Location loc, Value v, Type type) {
  if (v.getType() == type)
    return v;
  return b.create<tensor::CastOp>(loc, type, v);
}

Value vjp::expandLike(OpBuilder &b, Location loc, Value v,
                      ArrayRef<ReassociationIndices> re, Value like) {
  auto likeType = tensorTypeOf(like);
  auto type = RankedTensorType::get(likeType.getShape(),
                                    tensorTypeOf(v).getElementType());
  SmallVector<OpFoldResult> outSizes = sizesOf(b, loc, like);
  bool ambiguous = llvm::any_of(re, [&](const ReassociationIndices &group) {
    return llvm::count_if(group, [&](int64_t d) {
             return type.isDynamicDim(d);
           }) > 1;
  });
  if (!ambiguous)
    return b.create<tensor::ExpandShapeOp>(loc, type, v, re, outSizes);
  SmallVector<Value> dims;
  for (OpFoldResult s : outSizes)
    dims.push_back(getValueOrCreateConstantIndexOp(b, loc, s));
  Value shape = b.create<tensor::FromElementsOp>(loc, dims);
  return b.create<tensor::ReshapeOp>(loc, type, v, shape);
}

/// Groups [0 .. rank-2] and [rank-1].
static SmallVector<ReassociationIndices> leadingGroups(int64_t rank) {
  ReassociationIndices first;
  for (int64_t i = 0; i + 1 < rank; ++i)
    first.push_back(i);
  return {first, {rank - 1}};
}

Value vjp::toMatrix(OpBuilder &b, Location loc, Value v) {
  auto t = tensorTypeOf(v);
  int64_t r = t.getRank();
  if (r == 2)
    return v;
  if (r == 1) {
    auto type = RankedTensorType::get({1, t.getDimSize(0)}, t.getElementType());
    return b.create<tensor::ExpandShapeOp>(
        loc, type, v, ArrayRef<ReassociationIndices>{{0, 1}},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), sizesOf(b, loc, v)[0]});
  }
  return b.create<tensor::CollapseShapeOp>(loc, v, leadingGroups(r));
}

Value vjp::fromMatrix(OpBuilder &b, Location loc, Value m, Value like,
                      RankedTensorType type) {
  int64_t r = type.getRank();
  if (r == 2)
    return castTo(b, loc, m, type);
  if (r == 1)
    return castTo(b, loc,
                  b.create<tensor::CollapseShapeOp>(
                      loc, m, ArrayRef<ReassociationIndices>{{0, 1}}),
                  type);
  // [..., C'] with the leading sizes of `like`.
  SmallVector<OpFoldResult> outSizes = sizesOf(b, loc, like);
  outSizes.back() = sizesOf(b, loc, m)[1];
  SmallVector<ReassociationIndices> re = leadingGroups(r);
  bool ambiguous = llvm::count_if(re[0], [&](int64_t d) {
                     return type.isDynamicDim(d);
                   }) > 1;
  if (!ambiguous)
    return b.create<tensor::ExpandShapeOp>(loc, type, m, re, outSizes);
  SmallVector<Value> dims;
  for (OpFoldResult s : outSizes)
    dims.push_back(getValueOrCreateConstantIndexOp(b, loc, s));
  Value shape = b.create<tensor::FromElementsOp>(loc, dims);
  return b.create<tensor::ReshapeOp>(loc, type, m, shape);
}

Value vjp::sumRows(OpBuilder &b, Location loc, Value m) {
  auto t = tensorTypeOf(m);
  Type elt = t.getElementType();
  MLIRContext *ctx = b.getContext();
  OpFoldResult n = sizesOf(b, loc, m)[1];
  Value init = zeros(b, loc, {n}, elt);
  AffineExpr d0, d1;
  bindDims(ctx, d0, d1);
  // Iteration space [M, N]: rows reduced (outer loop), columns parallel
  // (inner, contiguous).
  SmallVector<AffineMap> maps = {AffineMap::get(2, 0, {d0, d1}, ctx),
                                 AffineMap::get(2, 0, {d1}, ctx)};
  return b
      .create<linalg::GenericOp>(
          loc, TypeRange{init.getType()}, ValueRange{m}, ValueRange{init},
          maps,
          ArrayRef<utils::IteratorType>{utils::IteratorType::reduction,
                                        utils::IteratorType::parallel},
          [&](OpBuilder &nb, Location l, ValueRange a) {
            nb.create<linalg::YieldOp>(
                l, nb.create<arith::AddFOp>(l, a[1], a[0]).getResult());
          })
      .getResult(0);
}

void vjp::linearVJP(OpBuilder &b, Location loc, Value x, Value w,
                    bool withBias, Value dy, Value &dx, Value &dw,
                    Value &dbias) {
  RankedTensorType xt = tensorTypeOf(x), wt = tensorTypeOf(w);
  Type elt = xt.getElementType();
  Value w2 = w;
  if (wt.getRank() == 3)
    w2 = b.create<tensor::CollapseShapeOp>(
        loc, w, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
  Value x2 = toMatrix(b, loc, x), dy2 = toMatrix(b, loc, dy);
  OpFoldResult m = sizesOf(b, loc, dy2)[0];
  SmallVector<OpFoldResult> ws = sizesOf(b, loc, w2);
  OpFoldResult n = ws[0], k = ws[1];

  // dx [M, K] = dy [M, N] · W [N, K].
  Value dxInit = zeros(b, loc, {m, k}, elt);
  Value dx2 = b.create<linalg::MatmulOp>(loc, TypeRange{dxInit.getType()},
                                         ValueRange{dy2, w2},
                                         ValueRange{dxInit})
                  .getResult(0);
  dx = fromMatrix(b, loc, dx2, x, xt);

  // dW [N, K] = dyᵀ [N, M] · x [M, K].
  Value dwInit = zeros(b, loc, {n, k}, elt);
  Value dw2 = b.create<linalg::MatmulTransposeAOp>(
                   loc, TypeRange{dwInit.getType()}, ValueRange{dy2, x2},
                   ValueRange{dwInit})
                  .getResult(0);
  if (wt.getRank() == 3)
    dw2 = b.create<tensor::ExpandShapeOp>(
        loc, RankedTensorType::get(wt.getShape(), elt), dw2,
        ArrayRef<ReassociationIndices>{{0}, {1, 2}},
        ArrayRef<OpFoldResult>{n, k, b.getIndexAttr(1)});
  dw = castTo(b, loc, dw2, wt);
  dbias = withBias ? sumRows(b, loc, dy2) : Value();
}

Value vjp::negatePositions(OpBuilder &b, Location loc, Value positions) {
  auto t = tensorTypeOf(positions);
  unsigned r = t.getRank();
  Value init = b.create<tensor::EmptyOp>(loc, sizesOf(b, loc, positions),
                                         t.getElementType());
  AffineMap id = AffineMap::getMultiDimIdentityMap(r, b.getContext());
  SmallVector<utils::IteratorType> iters(r, utils::IteratorType::parallel);
  return b
      .create<linalg::GenericOp>(
          loc, TypeRange{t}, ValueRange{positions}, ValueRange{init},
          ArrayRef<AffineMap>{id, id}, iters,
          [&](OpBuilder &nb, Location l, ValueRange a) {
            Value zero = nb.create<arith::ConstantOp>(
                l, nb.getIntegerAttr(a[0].getType(), 0));
            nb.create<linalg::YieldOp>(
                l, nb.create<arith::SubIOp>(l, zero, a[0]).getResult());
          })
      .getResult(0);
}

Value vjp::assembleQKV(OpBuilder &b, Location loc, Value dq, Value dk,
                       Value dv, Value like, int64_t heads, int64_t headDim) {
  RankedTensorType likeType = tensorTypeOf(like);
  Type elt = likeType.getElementType();
  int64_t r = likeType.getRank();
  SmallVector<OpFoldResult> sizes = sizesOf(b, loc, like);
  sizes.pop_back();
  SmallVector<OpFoldResult> full = sizes;
  full.append({b.getIndexAttr(heads), b.getIndexAttr(3),
               b.getIndexAttr(headDim)});
  Value acc = (dq && dk && dv)
                  ? b.create<tensor::EmptyOp>(loc, full, elt).getResult()
                  : zeros(b, loc, full, elt);
  SmallVector<OpFoldResult> strides(r + 2, b.getIndexAttr(1));
  Value grads[3] = {dq, dk, dv};
  for (int64_t which = 0; which < 3; ++which) {
    if (!grads[which])
      continue;
    SmallVector<OpFoldResult> offsets(r + 2, b.getIndexAttr(0));
    offsets[r] = b.getIndexAttr(which);
    SmallVector<OpFoldResult> sz = full;
    sz[r] = b.getIndexAttr(1);
    acc = b.create<tensor::InsertSliceOp>(loc, grads[which], acc, offsets, sz,
                                          strides);
  }
  SmallVector<ReassociationIndices> re;
  for (int64_t i = 0; i + 1 < r; ++i)
    re.push_back({i});
  re.push_back({r - 1, r, r + 1});
  Value collapsed = b.create<tensor::CollapseShapeOp>(loc, acc, re);
  return castTo(b, loc, collapsed, likeType);
}

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

/// operandGrads = one null per operand, then the caller fills some.
static void resetGrads(Operation *op, SmallVectorImpl<Value> &grads) {
  grads.assign(op->getNumOperands(), Value());
}

LogicalResult ParamRefOp::buildVJP(OpBuilder &, ArrayRef<Value>,
                                   SmallVectorImpl<Value> &operandGrads) {
  // No operands: the engine reads the gradient of the result and sums it
  // into the parameter's gradient.
  operandGrads.clear();
  return success();
}

LogicalResult LinearOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  resetGrads(*this, operandGrads);
  Value dx, dw, db;
  vjp::linearVJP(b, getLoc(), getInput(), getWeight(),
                 static_cast<bool>(getBias()), resultGrads[0], dx, dw, db);
  operandGrads[0] = dx;
  operandGrads[1] = dw;
  if (getBias())
    operandGrads[2] = db;
  return success();
}

LogicalResult
PrefixProjectionOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  resetGrads(*this, operandGrads);
  Location loc = getLoc();
  // dy [..., P, T] → [..., P·T], the projection's output layout.
  Value dy = resultGrads[0];
  int64_t r = tensorTypeOf(dy).getRank();
  SmallVector<ReassociationIndices> re;
  for (int64_t i = 0; i + 2 < r; ++i)
    re.push_back({i});
  re.push_back({r - 2, r - 1});
  Value flat = b.create<tensor::CollapseShapeOp>(loc, dy, re);
  Value dx, dw, db;
  vjp::linearVJP(b, loc, getContextEmbedding(), getWeight(), true, flat, dx,
                 dw, db);
  operandGrads[0] = dx;
  operandGrads[1] = dw;
  operandGrads[2] = db;
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  resetGrads(*this, operandGrads);
  auto grad = b.create<LayerNormGradOp>(
      getLoc(), getInput().getType(), getWeight().getType(),
      getWeight().getType(), getInput(), getWeight(), resultGrads[0],
      getEpsAttr());
  operandGrads[0] = grad.getInputGrad();
  operandGrads[1] = grad.getWeightGrad();
  operandGrads[2] = vjp::castTo(b, getLoc(), grad.getBiasGrad(),
                                getBias().getType());
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  resetGrads(*this, operandGrads);
  Location loc = getLoc();
  Value x = getInput();
  RankedTensorType t = tensorTypeOf(x);
  Type elt = t.getElementType();
  Type ct = elt.getIntOrFloatBitWidth() < 32 ? b.getF32Type() : elt;
  unsigned r = t.getRank();
  AffineMap id = AffineMap::getMultiDimIdentityMap(r, b.getContext());
  SmallVector<utils::IteratorType> iters(r, utils::IteratorType::parallel);
  Value init = b.create<tensor::EmptyOp>(loc, vjp::sizesOf(b, loc, x), elt);
  // PyTorch GeluBackward (approximate='none'):
  //   cdf = 0.5 · (1 + erf(x · M_SQRT1_2)), pdf = exp(-0.5 · x²) · M_2_SQRTPI · M_SQRT1_2 · 0.5,
  //   dx = dy · (cdf + x · pdf).
  double beta = M_2_SQRTPI * M_SQRT1_2 * 0.5;
  Value dx =
      b.create<linalg::GenericOp>(
           loc, TypeRange{t}, ValueRange{x, resultGrads[0]}, ValueRange{init},
           ArrayRef<AffineMap>{id, id, id}, iters,
           [&](OpBuilder &nb, Location l, ValueRange a) {
             auto c = [&](double v) -> Value {
               return nb.create<arith::ConstantOp>(l, nb.getFloatAttr(ct, v));
             };
             auto ext = [&](Value v) -> Value {
               return v.getType() == ct ? v
                                        : nb.create<arith::ExtFOp>(l, ct, v);
             };
             Value xv = ext(a[0]), dy = ext(a[1]);
             Value e = nb.create<math::ErfOp>(
                 l, nb.create<arith::MulFOp>(
                        l, xv, c(static_cast<float>(M_SQRT1_2))));
             Value cdf = nb.create<arith::MulFOp>(
                 l, c(0.5), nb.create<arith::AddFOp>(l, c(1.0), e));
             Value x2 = nb.create<arith::MulFOp>(l, xv, xv);
             Value pdf = nb.create<arith::MulFOp>(
                 l,
                 nb.create<math::ExpOp>(
                     l, nb.create<arith::MulFOp>(l, c(-0.5), x2)),
                 c(static_cast<float>(beta)));
             Value d = nb.create<arith::AddFOp>(
                 l, cdf, nb.create<arith::MulFOp>(l, xv, pdf));
             Value y = nb.create<arith::MulFOp>(l, dy, d);
             if (y.getType() != elt)
               y = nb.create<arith::TruncFOp>(l, elt, y);
             nb.create<linalg::YieldOp>(l, y);
           })
          .getResult(0);
  operandGrads[0] = dx;
  return success();
}

LogicalResult
EmbeddingLookupOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  resetGrads(*this, operandGrads);
  RankedTensorType table = tensorTypeOf(getTable());
  if (table.isDynamicDim(0))
    return emitOpError() << "cannot be differentiated: the table's row count "
                            "must be static";
  operandGrads[1] = b.create<EmbeddingGradOp>(getLoc(), table, getIds(),
                                              resultGrads[0]);
  return success();
}

LogicalResult SplitQKVOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  resetGrads(*this, operandGrads);
  operandGrads[0] =
      vjp::assembleQKV(b, getLoc(), resultGrads[0], resultGrads[1],
                       resultGrads[2], getQkv(), getHeads(), getHeadDim());
  return success();
}

LogicalResult RotaryOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  resetGrads(*this, operandGrads);
  Location loc = getLoc();
  Value neg = vjp::negatePositions(b, loc, getPositions());
  operandGrads[0] = b.create<RotaryOp>(loc, getInput().getType(),
                                       resultGrads[0], neg, getRotaryDimsAttr(),
                                       getBaseAttr());
  return success();
}

/// q, k, v gradients of an attention (rank 4 or 5) through bt.attention_grad.
static LogicalResult attentionVJP(OpBuilder &b, Location loc, Value q, Value k,
                                  Value v, Value mask, FloatAttr scale,
                                  Value dout, SmallVectorImpl<Value> &grads) {
  auto g = b.create<AttentionGradOp>(loc, q.getType(), q.getType(),
                                     q.getType(), q, k, v, dout, mask, scale);
  grads.assign({g.getQGrad(), g.getKGrad(), g.getVGrad()});
  return success();
}

LogicalResult AttentionOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  SmallVector<Value> g;
  if (failed(attentionVJP(b, getLoc(), getQ(), getK(), getV(), getKeyMask(),
                          getScaleAttr(), resultGrads[0], g)))
    return failure();
  resetGrads(*this, operandGrads);
  for (int i = 0; i < 3; ++i)
    operandGrads[i] = g[i];
  return success();
}

LogicalResult
LocalAttentionOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                           SmallVectorImpl<Value> &operandGrads) {
  SmallVector<Value> g;
  if (failed(attentionVJP(b, getLoc(), getQ(), getK(), getV(), getKeyMask(),
                          getScaleAttr(), resultGrads[0], g)))
    return failure();
  resetGrads(*this, operandGrads);
  for (int i = 0; i < 3; ++i)
    operandGrads[i] = g[i];
  return success();
}

LogicalResult
FusedLocalAttentionOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  resetGrads(*this, operandGrads);
  Location loc = getLoc();
  // Recompute the unfused chain's q, k, v (the rotated q and k).
  auto split = b.create<SplitQKVOp>(loc, getQkv(), getHeads(), getHeadDim());
  Type headType = split.getQ().getType();
  Value qr = b.create<RotaryOp>(loc, headType, split.getQ(), getPositions(),
                                getRotaryDimsAttr(), getBaseAttr());
  Value kr = b.create<RotaryOp>(loc, headType, split.getK(), getPositions(),
                                getRotaryDimsAttr(), getBaseAttr());
  Value dout = vjp::castTo(b, loc, resultGrads[0], headType);
  SmallVector<Value> g;
  if (failed(attentionVJP(b, loc, qr, kr, split.getV(), getKeyMask(),
                          getScaleAttr(), dout, g)))
    return failure();
  Value neg = vjp::negatePositions(b, loc, getPositions());
  Value dq = b.create<RotaryOp>(loc, headType, g[0], neg, getRotaryDimsAttr(),
                                getBaseAttr());
  Value dk = b.create<RotaryOp>(loc, headType, g[1], neg, getRotaryDimsAttr(),
                                getBaseAttr());
  operandGrads[0] = vjp::assembleQKV(b, loc, dq, dk, g[2], getQkv(),
                                     getHeads(), getHeadDim());
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  resetGrads(*this, operandGrads);
  operandGrads[0] = b.create<CrossEntropyGradOp>(
      getLoc(), getLogits().getType(), getLogits(), getLabels(),
      resultGrads[0], getIgnoreIndexAttr());
  return success();
}
