//===- BackwardToLinalg.cpp - backward bt ops → linalg on tensors ---------===//
//
// Patterns of bt-lower-backward (populateBTBackwardToLinalgPatterns,
// include/bt/Codegen/LayerToLinalg.h): bt.layer_norm_grad, bt.embedding_grad,
// bt.attention_grad and bt.cross_entropy_grad (the backward ops of the
// vector-Jacobian rules, BTOps.td "Backward") into linalg / tensor / scf /
// arith / math on tensors. The recomputed forward quantities (LayerNorm
// statistics, attention probabilities, log-sum-exp) use the numerics of
// bt-lower-to-linalg. See the pass description of bt-lower-backward in
// include/bt/Codegen/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "LinalgUtils.h"
#include "bt/Codegen/LayerToLinalg.h"
#include "bt/Codegen/Passes.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace bt;

namespace {

using utils::IteratorType;

/// finfo(float32).min, the HF mask value (as in bt-lower-to-linalg).
constexpr double kF32Min = -3.4028234663852886e38;

using namespace bt::codegen;

class Emitter : public LinalgEmitter {
public:
  using LinalgEmitter::LinalgEmitter;

  /// `v` with all dims collapsed into one ([1] for a 0-d tensor).
  Value flatten(Value v) {
    int64_t r = tensorTypeOf(v).getRank();
    if (r == 1)
      return v;
    if (r == 0)
      return b.create<tensor::ExpandShapeOp>(
          loc, RankedTensorType::get({1}, tensorTypeOf(v).getElementType()), v,
          ArrayRef<ReassociationIndices>{}, ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
    ReassociationIndices all;
    for (int64_t i = 0; i < r; ++i)
      all.push_back(i);
    return b.create<tensor::CollapseShapeOp>(
        loc, v, ArrayRef<ReassociationIndices>{all});
  }
  /// [..., E] → [M, E] ([1, E] for rank 1).
  Value toMatrix(Value v) {
    int64_t r = tensorTypeOf(v).getRank();
    if (r == 2)
      return v;
    if (r == 1)
      return b.create<tensor::ExpandShapeOp>(
          loc,
          RankedTensorType::get({1, tensorTypeOf(v).getDimSize(0)},
                                tensorTypeOf(v).getElementType()),
          v, ArrayRef<ReassociationIndices>{{0, 1}},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), sizes(v)[0]});
    ReassociationIndices lead;
    for (int64_t i = 0; i + 1 < r; ++i)
      lead.push_back(i);
    return b.create<tensor::CollapseShapeOp>(
        loc, v, ArrayRef<ReassociationIndices>{lead, {r - 1}});
  }

  //===--------------------------------------------------------------------===//
  // bt.layer_norm_grad
  //===--------------------------------------------------------------------===//

  SmallVector<Value> layerNormGrad(LayerNormGradOp op,
                                   LayerNormGradOp::Adaptor operands) {
    Value x = operands.getInput(), w = operands.getWeight(), dy = operands.getResultGrad();
    RankedTensorType xt = tensorTypeOf(x);
    unsigned r = xt.getRank();
    Type ct = xt.getElementType();
    double eps = op.getEps().convertToDouble();
    SmallVector<OpFoldResult> xs = sizes(x);
    SmallVector<OpFoldResult> rows(xs.begin(), xs.end() - 1);
    Value c = sizeAsFloat(xs.back(), ct);
    AffineMap id = AffineMap::getMultiDimIdentityMap(r, ctx);
    AffineMap rowMap = dropLastDims(ctx, r, 1);
    AffineMap lastMap = selectDims(ctx, r, {r - 1});
    AffineMap rowId = AffineMap::getMultiDimIdentityMap(r - 1, ctx);
    auto rowType = RankedTensorType::get(staticShapeOf(rows), ct);
    auto zerosRows = [&] { return filledF(rows, ct, 0.0); };

    // Statistics as in the forward: mean, then the biased variance.
    Value sum = generic(rowType, x, zerosRows(), {id, rowMap},
                        iterators(r - 1, 1),
                        [&](OpBuilder &nb, Location l, ValueRange a) {
                          nb.create<linalg::YieldOp>(
                              l, nb.create<arith::AddFOp>(l, a[1], a[0],
                                                          reassoc(nb))
                                     .getResult());
                        })[0];
    Value m2 = generic(rowType, ValueRange{x, sum}, zerosRows(),
                       {id, rowMap, rowMap}, iterators(r - 1, 1),
                       [&](OpBuilder &nb, Location l, ValueRange a) {
                         Value mean = nb.create<arith::DivFOp>(l, a[1], c);
                         Value d = nb.create<arith::SubFOp>(l, a[0], mean);
                         Value sq = nb.create<arith::MulFOp>(l, d, d);
                         nb.create<linalg::YieldOp>(
                             l, nb.create<arith::AddFOp>(l, a[2], sq,
                                                         reassoc(nb))
                                    .getResult());
                       })[0];
    Value epsV = floatConst(ct, eps);
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
          nb.create<linalg::YieldOp>(
              l, ValueRange{mean, nb.create<arith::DivFOp>(l, one, sq)});
        });
    Value mean = stats[0], rstd = stats[1];

    // Per row: Σ g and Σ g·x̂ with g = dy·w, x̂ = (x − mean)·rstd.
    ValueRange sums = generic(
        TypeRange{rowType, rowType}, ValueRange{x, dy, w, mean, rstd},
        ValueRange{zerosRows(), zerosRows()},
        {id, id, lastMap, rowMap, rowMap, rowMap, rowMap}, iterators(r - 1, 1),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value xhat = nb.create<arith::MulFOp>(
              l, nb.create<arith::SubFOp>(l, a[0], a[3]), a[4]);
          Value g = nb.create<arith::MulFOp>(l, a[1], a[2]);
          Value gx = nb.create<arith::MulFOp>(l, g, xhat);
          nb.create<linalg::YieldOp>(
              l, ValueRange{nb.create<arith::AddFOp>(l, a[5], g, reassoc(nb)),
                            nb.create<arith::AddFOp>(l, a[6], gx,
                                                     reassoc(nb))});
        });
    Value dx = generic(
        xt, ValueRange{x, dy, w, mean, rstd, sums[0], sums[1]},
        empty(xs, ct),
        {id, id, lastMap, rowMap, rowMap, rowMap, rowMap, id}, iterators(r, 0),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value xhat = nb.create<arith::MulFOp>(
              l, nb.create<arith::SubFOp>(l, a[0], a[3]), a[4]);
          Value g = nb.create<arith::MulFOp>(l, a[1], a[2]);
          Value m1 = nb.create<arith::DivFOp>(l, a[5], c);
          Value m2v = nb.create<arith::DivFOp>(l, a[6], c);
          Value t = nb.create<arith::SubFOp>(
              l, nb.create<arith::SubFOp>(l, g, m1),
              nb.create<arith::MulFOp>(l, xhat, m2v));
          nb.create<linalg::YieldOp>(
              l, nb.create<arith::MulFOp>(l, a[4], t).getResult());
        })[0];

    // dweight = Σ_rows dy·x̂, dbias = Σ_rows dy: rows reduced, C parallel.
    RankedTensorType wt = tensorTypeOf(w);
    SmallVector<OpFoldResult> cs{xs.back()};
    SmallVector<IteratorType> iters(r - 1, IteratorType::reduction);
    iters.push_back(IteratorType::parallel);
    ValueRange dwb = generic(
        TypeRange{wt, wt}, ValueRange{x, dy, mean, rstd},
        ValueRange{filledF(cs, ct, 0.0), filledF(cs, ct, 0.0)},
        {id, id, rowMap, rowMap, lastMap, lastMap}, iters,
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value xhat = nb.create<arith::MulFOp>(
              l, nb.create<arith::SubFOp>(l, a[0], a[2]), a[3]);
          Value dw = nb.create<arith::MulFOp>(l, a[1], xhat);
          nb.create<linalg::YieldOp>(
              l, ValueRange{nb.create<arith::AddFOp>(l, a[4], dw, reassoc(nb)),
                            nb.create<arith::AddFOp>(l, a[5], a[1],
                                                     reassoc(nb))});
        });
    return {dx, dwb[0], dwb[1]};
  }

  //===--------------------------------------------------------------------===//
  // bt.embedding_grad
  //===--------------------------------------------------------------------===//

  Value embeddingGrad(EmbeddingGradOp op, EmbeddingGradOp::Adaptor operands) {
    RankedTensorType tableType = tensorTypeOf(op.getTableGrad());
    Type elt = tableType.getElementType();
    Value ids = flatten(operands.getIds());
    Value dy = toMatrix(operands.getResultGrad());
    if (tensorTypeOf(operands.getIds()).getRank() == 0)
      dy = b.create<tensor::ExpandShapeOp>(
          loc,
          RankedTensorType::get({1, tensorTypeOf(operands.getResultGrad()).getDimSize(0)},
                                elt),
          operands.getResultGrad(), ArrayRef<ReassociationIndices>{{0, 1}},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1),
                                 sizes(operands.getResultGrad())[0]});
    int64_t vocab = tableType.getDimSize(0);
    OpFoldResult e = sizes(dy)[1];
    Value init = filledF({b.getIndexAttr(vocab), e}, elt, 0.0);
    Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
    Value one = b.create<arith::ConstantIndexOp>(loc, 1);
    Value m = b.create<tensor::DimOp>(loc, ids, 0);
    Value vV = b.create<arith::ConstantIndexOp>(loc, vocab);
    auto rowType = RankedTensorType::get(
        {1, tensorTypeOf(dy).getDimSize(1)}, elt);
    auto loop = b.create<scf::ForOp>(
        loc, zero, m, one, ValueRange{init},
        [&](OpBuilder &lb, Location l, Value i, ValueRange iter) {
          Value idV = lb.create<tensor::ExtractOp>(l, ids, ValueRange{i});
          Value row = lb.create<arith::IndexCastOp>(l, lb.getIndexType(), idV);
          Value ok = lb.create<arith::AndIOp>(
              l,
              lb.create<arith::CmpIOp>(l, arith::CmpIPredicate::sge, row, zero),
              lb.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, row, vV));
          lb.create<cf::AssertOp>(
              l, ok, "bt.embedding_grad: token id out of range [0, V)");
          OpFoldResult i0 = lb.getIndexAttr(0), i1 = lb.getIndexAttr(1);
          SmallVector<OpFoldResult> strides{i1, i1}, sz{i1, e};
          SmallVector<OpFoldResult> tableOff{row, i0}, dyOff{i, i0};
          Value acc = iter[0];
          Value dst = lb.create<tensor::ExtractSliceOp>(l, rowType, acc,
                                                        tableOff, sz, strides);
          Value src = lb.create<tensor::ExtractSliceOp>(l, rowType, dy, dyOff,
                                                        sz, strides);
          AffineMap id2 = AffineMap::getMultiDimIdentityMap(2, ctx);
          Value sum =
              lb.create<linalg::GenericOp>(
                    l, TypeRange{rowType}, ValueRange{src}, ValueRange{dst},
                    ArrayRef<AffineMap>{id2, id2}, iterators(2, 0),
                    [&](OpBuilder &nb, Location nl, ValueRange a) {
                      nb.create<linalg::YieldOp>(
                          nl, nb.create<arith::AddFOp>(nl, a[1], a[0])
                                  .getResult());
                    })
                  .getResult(0);
          Value updated = lb.create<tensor::InsertSliceOp>(l, sum, acc,
                                                           tableOff, sz,
                                                           strides);
          lb.create<scf::YieldOp>(l, updated);
        });
    return loop.getResult(0);
  }

  //===--------------------------------------------------------------------===//
  // bt.cross_entropy_grad
  //===--------------------------------------------------------------------===//

  Value crossEntropyGrad(CrossEntropyGradOp op,
                         CrossEntropyGradOp::Adaptor operands) {
    Value logits = operands.getLogits(), labels = operands.getLabels();
    RankedTensorType lt = tensorTypeOf(logits);
    unsigned r = lt.getRank();
    Type ct = lt.getElementType();
    Type labelType = tensorTypeOf(labels).getElementType();
    int64_t ignore = op.getIgnoreIndex();
    SmallVector<OpFoldResult> ls = sizes(logits);
    SmallVector<OpFoldResult> rows(ls.begin(), ls.end() - 1);
    Value vocab = getValueOrCreateConstantIndexOp(b, loc, ls.back());
    AffineMap id = AffineMap::getMultiDimIdentityMap(r, ctx);
    AffineMap rowMap = dropLastDims(ctx, r, 1);
    auto rowType = RankedTensorType::get(staticShapeOf(rows), ct);
    Value rowMax = generic(
        rowType, logits,
        filledF(rows, ct, -std::numeric_limits<double>::infinity()),
        {id, rowMap}, iterators(r - 1, 1),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          nb.create<linalg::YieldOp>(
              l, nb.create<arith::MaximumFOp>(l, a[1], a[0]).getResult());
        })[0];
    Value sumExp = generic(
        rowType, ValueRange{logits, rowMax}, filledF(rows, ct, 0.0),
        {id, rowMap, rowMap}, iterators(r - 1, 1),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value d = nb.create<arith::SubFOp>(l, a[0], a[1]);
          nb.create<linalg::YieldOp>(
              l, nb.create<arith::AddFOp>(l, a[2], nb.create<math::ExpOp>(l, d),
                                          reassoc(nb))
                     .getResult());
        })[0];
    unsigned rr = r - 1;
    AffineMap rowsId = AffineMap::getMultiDimIdentityMap(rr, ctx);
    Value logSum = generic(rowType, sumExp, empty(rows, ct), {rowsId, rowsId},
                           iterators(rr, 0),
                           [&](OpBuilder &nb, Location l, ValueRange a) {
                             nb.create<linalg::YieldOp>(
                                 l, nb.create<math::LogOp>(l, a[0]).getResult());
                           })[0];
    // n = #labels ≠ ignore_index (labels checked against [0, V)).
    AffineMap toScalar = AffineMap::get(rr, 0, {}, ctx);
    Type i64 = b.getI64Type();
    auto i64Scalar = RankedTensorType::get({}, i64);
    Value cntInit =
        b.create<linalg::FillOp>(
             loc,
             b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(0))
                 .getResult(),
             empty({}, i64))
            .getResult(0);
    auto isValid = [&](OpBuilder &nb, Location l, Value label) -> Value {
      Value ign =
          nb.create<arith::ConstantOp>(l, nb.getIntegerAttr(labelType, ignore));
      return nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, label, ign);
    };
    Value count = generic(
        i64Scalar, labels, cntInit, {rowsId, toScalar}, iterators(0, rr),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value valid = isValid(nb, l, a[0]);
          Value zeroL =
              nb.create<arith::ConstantOp>(l, nb.getIntegerAttr(labelType, 0));
          Value safe = nb.create<arith::SelectOp>(l, valid, a[0], zeroL);
          Value idx = nb.create<arith::IndexCastOp>(l, nb.getIndexType(), safe);
          Value zeroIdx = nb.create<arith::ConstantIndexOp>(l, 0);
          Value inRange = nb.create<arith::AndIOp>(
              l,
              nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::sge, idx,
                                       zeroIdx),
              nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, idx,
                                       vocab));
          nb.create<cf::AssertOp>(
              l, inRange, "bt.cross_entropy_grad: label out of range [0, V)");
          Value one = nb.create<arith::ConstantOp>(l, nb.getI64IntegerAttr(1));
          Value zi = nb.create<arith::ConstantOp>(l, nb.getI64IntegerAttr(0));
          Value inc = nb.create<arith::SelectOp>(l, valid, one, zi);
          nb.create<linalg::YieldOp>(
              l, nb.create<arith::AddIOp>(l, a[1], inc).getResult());
        })[0];
    AffineMap scalar = AffineMap::get(0, 0, {}, ctx);
    auto ctScalar = RankedTensorType::get({}, ct);
    Value scale = generic(ctScalar, ValueRange{operands.getLossGrad(), count},
                          empty({}, ct), {scalar, scalar, scalar}, {},
                          [&](OpBuilder &nb, Location l, ValueRange a) {
                            Value n = nb.create<arith::SIToFPOp>(l, ct, a[1]);
                            nb.create<linalg::YieldOp>(
                                l, nb.create<arith::DivFOp>(l, a[0], n)
                                       .getResult());
                          })[0];
    AffineMap allToScalar = AffineMap::get(r, 0, {}, ctx);
    return generic(
        lt, ValueRange{logits, rowMax, logSum, labels, scale}, empty(ls, ct),
        {id, rowMap, rowMap, rowMap, allToScalar, id}, iterators(r, 0),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          // PyTorch: exp(log_softmax) − onehot, times loss_grad / n.
          Value lsm = nb.create<arith::SubFOp>(
              l, nb.create<arith::SubFOp>(l, a[0], a[1]), a[2]);
          Value p = nb.create<math::ExpOp>(l, lsm);
          Value valid = isValid(nb, l, a[3]);
          Value col = nb.create<linalg::IndexOp>(l, r - 1);
          Value colL = nb.create<arith::IndexCastOp>(l, labelType, col);
          Value hit =
              nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, colL, a[3]);
          Value one = nb.create<arith::ConstantOp>(l, nb.getFloatAttr(ct, 1.0));
          Value zero = nb.create<arith::ConstantOp>(l, nb.getFloatAttr(ct, 0.0));
          Value target = nb.create<arith::SelectOp>(l, hit, one, zero);
          Value g = nb.create<arith::MulFOp>(
              l, nb.create<arith::SubFOp>(l, p, target), a[4]);
          nb.create<linalg::YieldOp>(
              l, nb.create<arith::SelectOp>(l, valid, g, zero).getResult());
        })[0];
  }

  //===--------------------------------------------------------------------===//
  // bt.attention_grad
  //===--------------------------------------------------------------------===//

  /// The forward's masked, scaled score of element (s, t) (linalg.index 0, 1
  /// of a [S, S] iteration space): where(t ≤ s, score·scale, MIN) +
  /// (1 − mask[t])·MIN.
  static Value masked(OpBuilder &bb, Location ll, Value score, Value maskV,
                      Type ct, double scale) {
    Value sc = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, scale));
    Value minV = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, kF32Min));
    Value x = bb.create<arith::MulFOp>(ll, score, sc);
    Value causal = isCausal(bb, ll);
    x = bb.create<arith::SelectOp>(ll, causal, x, minV);
    if (maskV) {
      Value onef = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, 1.0));
      Value m = intToFloat(bb, ll, maskV, ct);
      Value add = bb.create<arith::MulFOp>(
          ll, bb.create<arith::SubFOp>(ll, onef, m), minV);
      x = bb.create<arith::AddFOp>(ll, x, add);
    }
    return x;
  }
  static Value isCausal(OpBuilder &bb, Location ll) {
    Value si = bb.create<linalg::IndexOp>(ll, 0);
    Value ti = bb.create<linalg::IndexOp>(ll, 1);
    return bb.create<arith::CmpIOp>(ll, arith::CmpIPredicate::ule, ti, si);
  }

  /// One head: probabilities P [S, S] recomputed from qh, kh (and the key
  /// mask row), then dv, dq, dk written into the given output slices.
  std::tuple<Value, Value, Value> headGrad(Value qh, Value kh, Value vh,
                                           Value doh, Value maskRow,
                                           OpFoldResult seq, double scale,
                                           Value dqOut, Value dkOut,
                                           Value dvOut) {
    Type ct = tensorTypeOf(qh).getElementType();
    int64_t sStatic = tensorTypeOf(qh).getDimSize(0);
    auto squareType = RankedTensorType::get({sStatic, sStatic}, ct);
    auto rowVecType = RankedTensorType::get({sStatic}, ct);
    AffineMap id2 = AffineMap::getMultiDimIdentityMap(2, ctx);
    AffineMap rowMap = selectDims(ctx, 2, {0});
    AffineMap colMap = selectDims(ctx, 2, {1});
    SmallVector<OpFoldResult> rows{seq}, square{seq, seq};
    bool hasMask = static_cast<bool>(maskRow);

    Value scores =
        b.create<linalg::MatmulTransposeBOp>(
             loc, TypeRange{squareType}, ValueRange{qh, kh},
             ValueRange{filledF(square, ct, 0.0)})
            .getResult(0);
    SmallVector<Value> ins{scores};
    SmallVector<AffineMap> maps{id2};
    if (hasMask) {
      ins.push_back(maskRow);
      maps.push_back(colMap);
    }
    maps.push_back(rowMap);
    Value rowMax = generic(
        rowVecType, ins,
        filledF(rows, ct, -std::numeric_limits<double>::infinity()), maps,
        iterators(1, 1), [&](OpBuilder &bb, Location ll, ValueRange a) {
          Value x = masked(bb, ll, a[0], hasMask ? a[1] : Value(), ct, scale);
          bb.create<linalg::YieldOp>(
              ll, bb.create<arith::MaximumFOp>(ll, a.back(), x).getResult());
        })[0];
    // exp(x − max) in place of the scores (0 below −104, as the forward).
    SmallVector<Value> eIns;
    SmallVector<AffineMap> eMaps;
    if (hasMask) {
      eIns.push_back(maskRow);
      eMaps.push_back(colMap);
    }
    eIns.push_back(rowMax);
    eMaps.push_back(rowMap);
    eMaps.push_back(id2);
    Value ex = generic(
        squareType, eIns, scores, eMaps, iterators(2, 0),
        [&](OpBuilder &bb, Location ll, ValueRange a) {
          Value maskV = hasMask ? a[0] : Value();
          Value x = masked(bb, ll, a.back(), maskV, ct, scale);
          Value d = bb.create<arith::SubFOp>(ll, x, a[a.size() - 2]);
          Value lo = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, -104.0));
          Value zf = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, 0.0));
          Value under =
              bb.create<arith::CmpFOp>(ll, arith::CmpFPredicate::OLT, d, lo);
          Value arg = bb.create<arith::SelectOp>(ll, under, zf, d);
          Value ev = bb.create<math::ExpOp>(ll, arg);
          bb.create<linalg::YieldOp>(
              ll, bb.create<arith::SelectOp>(ll, under, zf, ev).getResult());
        })[0];
    Value rowSum = generic(rowVecType, ex, filledF(rows, ct, 0.0), {id2, rowMap},
                           iterators(1, 1),
                           [&](OpBuilder &bb, Location ll, ValueRange a) {
                             bb.create<linalg::YieldOp>(
                                 ll, bb.create<arith::AddFOp>(ll, a[1], a[0],
                                                              reassoc(bb))
                                         .getResult());
                           })[0];
    AffineMap id1 = AffineMap::getMultiDimIdentityMap(1, ctx);
    Value rowInv = generic(rowVecType, rowSum, empty(rows, ct), {id1, id1},
                           iterators(1, 0),
                           [&](OpBuilder &bb, Location ll, ValueRange a) {
                             Value one = bb.create<arith::ConstantOp>(
                                 ll, bb.getFloatAttr(ct, 1.0));
                             bb.create<linalg::YieldOp>(
                                 ll, bb.create<arith::DivFOp>(ll, one, a[0])
                                         .getResult());
                           })[0];
    Value probs = generic(squareType, rowInv, ex, {rowMap, id2},
                          iterators(2, 0),
                          [&](OpBuilder &bb, Location ll, ValueRange a) {
                            bb.create<linalg::YieldOp>(
                                ll, bb.create<arith::MulFOp>(ll, a[1], a[0])
                                        .getResult());
                          })[0];

    // dV = Pᵀ · dO.
    Value dv = b.create<linalg::MatmulTransposeAOp>(
                    loc, TypeRange{dvOut.getType()}, ValueRange{probs, doh},
                    ValueRange{fill(dvOut, 0.0)})
                   .getResult(0);
    // dP = dO · Vᵀ.
    Value dp = b.create<linalg::MatmulTransposeBOp>(
                    loc, TypeRange{squareType}, ValueRange{doh, vh},
                    ValueRange{filledF(square, ct, 0.0)})
                   .getResult(0);
    // rowDot = Σ_t dP · P.
    Value rowDot = generic(rowVecType, ValueRange{dp, probs},
                           filledF(rows, ct, 0.0), {id2, id2, rowMap},
                           iterators(1, 1),
                           [&](OpBuilder &bb, Location ll, ValueRange a) {
                             Value m = bb.create<arith::MulFOp>(ll, a[0], a[1]);
                             bb.create<linalg::YieldOp>(
                                 ll, bb.create<arith::AddFOp>(ll, a[2], m,
                                                              reassoc(bb))
                                         .getResult());
                           })[0];
    // dS = where(t ≤ s, P · (dP − rowDot), 0) · scale, in place of dP.
    Value ds = generic(
        squareType, ValueRange{probs, rowDot}, dp, {id2, rowMap, id2},
        iterators(2, 0), [&](OpBuilder &bb, Location ll, ValueRange a) {
          Value d = bb.create<arith::SubFOp>(ll, a[2], a[1]);
          Value g = bb.create<arith::MulFOp>(ll, a[0], d);
          Value sc = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, scale));
          g = bb.create<arith::MulFOp>(ll, g, sc);
          Value zf = bb.create<arith::ConstantOp>(ll, bb.getFloatAttr(ct, 0.0));
          bb.create<linalg::YieldOp>(
              ll, bb.create<arith::SelectOp>(ll, isCausal(bb, ll), g, zf)
                      .getResult());
        })[0];
    // dQ = dS · K, dK = dSᵀ · Q.
    Value dq = b.create<linalg::MatmulOp>(loc, TypeRange{dqOut.getType()},
                                          ValueRange{ds, kh},
                                          ValueRange{fill(dqOut, 0.0)})
                   .getResult(0);
    Value dk = b.create<linalg::MatmulTransposeAOp>(
                    loc, TypeRange{dkOut.getType()}, ValueRange{ds, qh},
                    ValueRange{fill(dkOut, 0.0)})
                   .getResult(0);
    return {dq, dk, dv};
  }

  SmallVector<Value> attentionGrad(AttentionGradOp op,
                                   AttentionGradOp::Adaptor operands) {
    Value q = operands.getQ(), k = operands.getK(), v = operands.getV(), dout = operands.getResultGrad();
    Value mask = operands.getKeyMask();
    double scale = op.getScale().convertToDouble();
    RankedTensorType qt = tensorTypeOf(q);
    unsigned n = qt.getRank();
    unsigned nb = n - 3;
    Type elt = qt.getElementType();
    SmallVector<OpFoldResult> qs = sizes(q);
    OpFoldResult seq = qs[nb], hd = qs[nb + 2];
    int64_t heads = qt.getDimSize(nb + 1);
    Value g = b.create<arith::ConstantIndexOp>(loc, heads);
    SmallVector<Value> batchSizes;
    for (unsigned i = 0; i < nb; ++i) {
      batchSizes.push_back(getValueOrCreateConstantIndexOp(b, loc, qs[i]));
      g = b.create<arith::MulIOp>(loc, g, batchSizes.back());
    }
    Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
    Value one = b.create<arith::ConstantIndexOp>(loc, 1);
    Value headsV = b.create<arith::ConstantIndexOp>(loc, heads);
    auto headType =
        RankedTensorType::get({qt.getDimSize(nb), qt.getDimSize(nb + 2)}, elt);
    SmallVector<Value> inits{empty(qs, elt), empty(qs, elt), empty(qs, elt)};
    auto loop = b.create<scf::ForOp>(
        loc, zero, g, one, inits,
        [&](OpBuilder &lb, Location l, Value iv, ValueRange iter) {
          Emitter e(lb, l);
          Value h;
          SmallVector<Value> bIdx;
          delinearizeHeadIndex(lb, l, iv, headsV, batchSizes, h, bIdx);
          SmallVector<OpFoldResult> offsets, sliceSizes,
              strides(n, lb.getIndexAttr(1));
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
          Value maskRow;
          if (mask) {
            SmallVector<OpFoldResult> mOff(offsets.begin(),
                                           offsets.begin() + nb);
            SmallVector<OpFoldResult> mSizes(sliceSizes.begin(),
                                             sliceSizes.begin() + nb);
            mOff.push_back(lb.getIndexAttr(0));
            mSizes.push_back(seq);
            SmallVector<OpFoldResult> mStrides(nb + 1, lb.getIndexAttr(1));
            auto mt = RankedTensorType::get(
                {qt.getDimSize(nb)}, tensorTypeOf(mask).getElementType());
            maskRow = lb.create<tensor::ExtractSliceOp>(l, mt, mask, mOff,
                                                        mSizes, mStrides);
          }
          auto [dq, dk, dv] =
              e.headGrad(head(q), head(k), head(v), head(dout), maskRow, seq,
                         scale, head(iter[0]), head(iter[1]), head(iter[2]));
          SmallVector<Value> headGrads{dq, dk, dv}, updated;
          for (auto [res, acc] : llvm::zip(headGrads, iter))
            updated.push_back(lb.create<tensor::InsertSliceOp>(
                l, res, acc, offsets, sliceSizes, strides));
          lb.create<scf::YieldOp>(l, updated);
        });
    // Each head reads its own slices and writes its own slices of dq, dk
    // and dv (kIndependentIterationsAttrName).
    loop->setAttr(kIndependentIterationsAttrName, b.getUnitAttr());
    return SmallVector<Value>(loop.getResults());
  }
};

/// A backward op OpT whose lowering is the Emitter method `emit`; its
/// results are replaced by the values it returns.
template <typename OpT, auto emit>
struct BackwardLowering : OpConversionPattern<OpT> {
  using OpConversionPattern<OpT>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpT op, typename OpT::Adaptor operands,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc());
    SmallVector<Value> values;
    if constexpr (std::is_same_v<decltype((e.*emit)(op, operands)), Value>)
      values.push_back((e.*emit)(op, operands));
    else
      values = (e.*emit)(op, operands);
    codegen::replaceOpWithCasts(rewriter, op, values);
    return success();
  }
};

} // namespace

void bt::populateBTBackwardToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<BackwardLowering<LayerNormGradOp, &Emitter::layerNormGrad>,
               BackwardLowering<EmbeddingGradOp, &Emitter::embeddingGrad>,
               BackwardLowering<CrossEntropyGradOp, &Emitter::crossEntropyGrad>,
               BackwardLowering<AttentionGradOp, &Emitter::attentionGrad>>(
      patterns.getContext());
}
