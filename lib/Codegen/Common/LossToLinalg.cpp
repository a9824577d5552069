//===- LossToLinalg.cpp - bt.cross_entropy → linalg on tensors ------------===//
//
// Pattern of bt-lower-to-linalg for bt.cross_entropy: the mean
// cross-entropy over labels != ignore_index in PyTorch's log_softmax order.
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

#include <limits>

using namespace mlir;
using namespace bt;
using namespace bt::codegen;

Value LayerEmitter::crossEntropy(Value logits, Value labels, int64_t ignore,
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

namespace {

struct CrossEntropyLowering : LayerOpLowering<CrossEntropyOp> {
  using LayerOpLowering::LayerOpLowering;
  FailureOr<SmallVector<Value>> emit(LayerEmitter &e, CrossEntropyOp op,
                                     OpAdaptor adaptor) const override {
    return SmallVector<Value>{e.crossEntropy(adaptor.getLogits(),
                                             adaptor.getLabels(),
                                             op.getIgnoreIndex(), op.getType())};
  }
};

} // namespace

void bt::codegen::populateLossToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<CrossEntropyLowering>(patterns.getContext());
}
