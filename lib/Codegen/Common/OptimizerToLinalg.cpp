//===- OptimizerToLinalg.cpp - optimizer ops → linalg / arith on tensors --===//
//
// Patterns of bt-lower-to-linalg for the optimizer ops
// (populateBTOptimizerToLinalgPatterns, include/bt/Codegen/LayerToLinalg.h;
// the op descriptions are in include/bt/Dialect/BT/IR/BTOptimizerOps.td):
//
// - bt.global_norm: per tensor, the sum of squares in f32 as a two-level
//   reduction (the flattened tensor viewed as [R, K], K the divisor of its
//   size closest to below sqrt(size): rows, then the row sums), its sqrt;
//   then sqrt of the sum of the squared per-tensor norms.
// - bt.clip_coefficient, bt.lr_schedule: scalar arith / math on the
//   extracted values.
// - bt.adamw: the step's scalars once, then one linalg.generic that reads the
//   gradient and writes param, m and v through its outs (destination-passing:
//   one-shot bufferization writes into the operands' buffers when they are
//   writable, e.g. the in-out arguments of train_step).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/LayerToLinalg.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace bt;
using utils::IteratorType;

namespace {

RankedTensorType tensorTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

arith::FastMathFlagsAttr reassoc(OpBuilder &b) {
  return arith::FastMathFlagsAttr::get(b.getContext(),
                                       arith::FastMathFlags::reassoc);
}

struct Scalars {
  OpBuilder &b;
  Location loc;

  Value f32(double v) {
    return b.create<arith::ConstantOp>(
        loc, b.getF32FloatAttr(static_cast<float>(v)));
  }
  Value f64(double v) {
    return b.create<arith::ConstantOp>(loc, b.getF64FloatAttr(v));
  }
  Value i64(int64_t v) {
    return b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(v));
  }
  Value extract(Value t) {
    return b.create<tensor::ExtractOp>(loc, t, ValueRange{});
  }
  Value toTensor(Value v) {
    return b.create<tensor::FromElementsOp>(
        loc, RankedTensorType::get({}, v.getType()), ValueRange{v});
  }
  Value add(Value x, Value y) { return b.create<arith::AddFOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<arith::SubFOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<arith::MulFOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<arith::DivFOp>(loc, x, y); }
  Value toF64(Value x) {
    if (x.getType().isF64())
      return x;
    if (isa<IntegerType>(x.getType()))
      return b.create<arith::SIToFPOp>(loc, b.getF64Type(), x);
    return b.create<arith::ExtFOp>(loc, b.getF64Type(), x);
  }
  Value toF32(Value x) { return b.create<arith::TruncFOp>(loc, b.getF32Type(), x); }
};

/// The divisor of n closest to sqrt(n) from below (1 for primes).
int64_t innerBlock(int64_t n) {
  int64_t k = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
  for (; k > 1; --k)
    if (n % k == 0)
      return k;
  return 1;
}

/// Σ x² of `t` in f32, as a 0-d f32 tensor.
Value sumOfSquares(OpBuilder &b, Location loc, Value t) {
  MLIRContext *ctx = b.getContext();
  RankedTensorType type = tensorTypeOf(t);
  Type f32 = b.getF32Type();
  Value zero = b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(0.0f));
  auto filled = [&](ArrayRef<int64_t> shape, ValueRange dyn) {
    Value e = b.create<tensor::EmptyOp>(loc, RankedTensorType::get(shape, f32),
                                        dyn);
    return b.create<linalg::FillOp>(loc, zero, e).getResult(0);
  };
  auto square = [&](OpBuilder &nb, Location l, Value x, Value acc) {
    if (x.getType() != f32)
      x = nb.create<arith::ExtFOp>(l, f32, x);
    Value sq = nb.create<arith::MulFOp>(l, x, x);
    return nb.create<arith::AddFOp>(l, acc, sq, reassoc(nb)).getResult();
  };
  // [R, K] view of a static tensor; otherwise one reduction over all dims.
  Value view = t;
  unsigned rank = type.getRank();
  if (type.hasStaticShape() && rank > 0) {
    int64_t n = type.getNumElements();
    int64_t k = innerBlock(n);
    if (rank > 1) {
      ReassociationIndices all;
      for (unsigned i = 0; i < rank; ++i)
        all.push_back(i);
      view = b.create<tensor::CollapseShapeOp>(
          loc, RankedTensorType::get({n}, type.getElementType()), view,
          ArrayRef<ReassociationIndices>{all});
    }
    view = b.create<tensor::ExpandShapeOp>(
        loc, RankedTensorType::get({n / k, k}, type.getElementType()), view,
        ArrayRef<ReassociationIndices>{{0, 1}});
    AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
    AffineMap row = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
    Value rows =
        b.create<linalg::GenericOp>(
             loc, TypeRange{RankedTensorType::get({n / k}, f32)}, view,
             filled({n / k}, {}), ArrayRef<AffineMap>{id, row},
             ArrayRef<IteratorType>{IteratorType::parallel,
                                    IteratorType::reduction},
             [&](OpBuilder &nb, Location l, ValueRange a) {
               nb.create<linalg::YieldOp>(l, square(nb, l, a[0], a[1]));
             })
            .getResult(0);
    AffineMap id1 = AffineMap::getMultiDimIdentityMap(1, ctx);
    AffineMap toScalar = AffineMap::get(1, 0, {}, ctx);
    return b
        .create<linalg::GenericOp>(
            loc, TypeRange{RankedTensorType::get({}, f32)}, rows,
            filled({}, {}), ArrayRef<AffineMap>{id1, toScalar},
            ArrayRef<IteratorType>{IteratorType::reduction},
            [&](OpBuilder &nb, Location l, ValueRange a) {
              nb.create<linalg::YieldOp>(
                  l, nb.create<arith::AddFOp>(l, a[1], a[0], reassoc(nb))
                         .getResult());
            })
        .getResult(0);
  }
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap toScalar = AffineMap::get(rank, 0, {}, ctx);
  return b
      .create<linalg::GenericOp>(
          loc, TypeRange{RankedTensorType::get({}, f32)}, view, filled({}, {}),
          ArrayRef<AffineMap>{id, toScalar},
          SmallVector<IteratorType>(rank, IteratorType::reduction),
          [&](OpBuilder &nb, Location l, ValueRange a) {
            nb.create<linalg::YieldOp>(l, square(nb, l, a[0], a[1]));
          })
      .getResult(0);
}

Value lowerGlobalNorm(OpBuilder &b, GlobalNormOp op,
                      GlobalNormOp::Adaptor operands) {
  Location loc = op.getLoc();
  Scalars s{b, loc};
  // total² = Σ_t (sqrt(Σ_i g_t[i]²))², in tensor order.
  Value total = s.f32(0.0);
  for (Value t : operands.getTensors()) {
    Value norm = b.create<math::SqrtOp>(loc, s.extract(sumOfSquares(b, loc, t)));
    total = s.add(total, s.mul(norm, norm));
  }
  return s.toTensor(b.create<math::SqrtOp>(loc, total));
}

Value lowerClipCoefficient(OpBuilder &b, ClipCoefficientOp op,
                           ClipCoefficientOp::Adaptor operands) {
  Scalars s{b, op.getLoc()};
  // torch: max_norm / (total_norm + eps) is Tensor.__rtruediv__, i.e.
  // reciprocal(total_norm + eps) * max_norm; then clamp(max=1.0).
  Value denom = s.add(s.extract(operands.getNorm()),
                      s.f32(op.getEps().convertToDouble()));
  Value coef = s.mul(s.div(s.f32(1.0), denom),
                     s.f32(op.getMaxNorm().convertToDouble()));
  return s.toTensor(b.create<arith::MinimumFOp>(op.getLoc(), coef, s.f32(1.0)));
}

Value lowerLRSchedule(OpBuilder &b, LRScheduleOp op,
                      LRScheduleOp::Adaptor operands) {
  Location loc = op.getLoc();
  Scalars s{b, loc};
  using P = arith::CmpIPredicate;
  Value step = s.extract(operands.getStep());
  Value i = b.create<arith::SubIOp>(loc, step, s.i64(2));
  Value w = b.create<arith::MaxSIOp>(loc, s.extract(operands.getWarmupSteps()),
                                     s.i64(2));
  Value t = s.extract(operands.getTotalSteps());
  double c = op.getCosMinRatio().convertToDouble();
  double wmin = op.getWarmupMinRatio().convertToDouble();
  // Warmup: w + (1 - w) * i / W.
  Value warm = s.add(s.f64(wmin),
                     s.mul(s.div(s.toF64(i), s.toF64(w)), s.f64(1.0 - wmin)));
  // Cosine: p = min(1, (i - W + 1) / max(1, T - W)).
  Value real = b.create<arith::AddIOp>(
      loc, b.create<arith::SubIOp>(loc, i, w), s.i64(1));
  Value span = b.create<arith::MaxSIOp>(
      loc, b.create<arith::SubIOp>(loc, t, w), s.i64(1));
  Value p = b.create<arith::MinimumFOp>(
      loc, s.div(s.toF64(real), s.toF64(span)), s.f64(1.0));
  Value cosv = b.create<math::CosOp>(loc, s.mul(s.f64(llvm::numbers::pi), p));
  Value half = s.div(s.add(s.f64(1.0), cosv), s.f64(2.0));
  Value cosine = b.create<arith::MaximumFOp>(
      loc, s.add(s.f64(c), s.mul(s.f64(1.0 - c), half)), s.f64(0.0));
  Value inWarmup = b.create<arith::CmpIOp>(loc, P::slt, i, w);
  Value ratio = b.create<arith::SelectOp>(loc, inWarmup, warm, cosine);
  Value first = b.create<arith::CmpIOp>(loc, P::slt, i, s.i64(0));
  ratio = b.create<arith::SelectOp>(
      loc, first, s.f64(op.getInitialRatio().convertToDouble()), ratio);
  Value lr = s.mul(s.toF64(s.extract(operands.getPeakLr())), ratio);
  return s.toTensor(s.toF32(lr));
}

SmallVector<Value> lowerAdamW(OpBuilder &b, AdamWOp op,
                              AdamWOp::Adaptor operands) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Scalars s{b, loc};
  double beta1 = op.getBeta1().convertToDouble();
  double beta2 = op.getBeta2().convertToDouble();
  double eps = op.getEps().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();

  // The step's scalars, as Python floats (f64) and rounded to f32 where
  // torch hands them to an f32 tensor op.
  Value lr = s.toF64(s.extract(operands.getLr()));
  Value t = s.toF64(s.extract(operands.getStep()));
  Value bc1 = s.sub(s.f64(1.0), b.create<math::PowFOp>(loc, s.f64(beta1), t));
  Value bc2 = s.sub(s.f64(1.0), b.create<math::PowFOp>(loc, s.f64(beta2), t));
  Value negStep = s.toF32(b.create<arith::NegFOp>(loc, s.div(lr, bc1)));
  Value bc2Sqrt = s.toF32(b.create<math::SqrtOp>(loc, bc2));
  Value decay = s.toF32(s.sub(s.f64(1.0), s.mul(lr, s.f64(wd))));
  Value clip = s.extract(operands.getClip());
  Value b1 = s.f32(beta1), omb1 = s.f32(1.0 - beta1);
  Value b2 = s.f32(beta2), omb2 = s.f32(1.0 - beta2);
  Value epsF = s.f32(eps);

  RankedTensorType type = tensorTypeOf(operands.getParam());
  AffineMap id = AffineMap::getMultiDimIdentityMap(type.getRank(), ctx);
  auto generic = b.create<linalg::GenericOp>(
      loc, TypeRange{type, type, type}, ValueRange{operands.getGrad()},
      ValueRange{operands.getParam(), operands.getExpAvg(), operands.getExpAvgSq()},
      SmallVector<AffineMap>(4, id),
      SmallVector<IteratorType>(type.getRank(), IteratorType::parallel),
      [&](OpBuilder &nb, Location l, ValueRange a) {
        Scalars e{nb, l};
        Value g = a[0];
        if (!g.getType().isF32())
          g = nb.create<arith::ExtFOp>(l, nb.getF32Type(), g);
        g = e.mul(g, clip);                                 // clip_grad_norm_
        Value p = e.mul(a[1], decay);                       // weight decay
        Value m = e.add(e.mul(a[2], b1), e.mul(omb1, g));   // exp_avg
        Value v = e.add(e.mul(a[3], b2), e.mul(e.mul(omb2, g), g));
        Value d = e.add(e.div(nb.create<math::SqrtOp>(l, v), bc2Sqrt), epsF);
        p = e.add(p, e.mul(negStep, e.div(m, d)));          // addcdiv_
        nb.create<linalg::YieldOp>(l, ValueRange{p, m, v});
      });
  return SmallVector<Value>(generic.getResults());
}

/// The optimizer op OpT lowered by `lower`; its results are replaced by the
/// values `lower` returns.
template <typename OpT, auto lower>
struct OptimizerLowering : OpConversionPattern<OpT> {
  using OpConversionPattern<OpT>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpT op, typename OpT::Adaptor operands,
                  ConversionPatternRewriter &rewriter) const override {
    SmallVector<Value> values;
    if constexpr (std::is_same_v<OpT, AdamWOp>)
      values = lower(rewriter, op, operands);
    else
      values.push_back(lower(rewriter, op, operands));
    codegen::replaceOpWithCasts(rewriter, op, values);
    return success();
  }
};

} // namespace

void bt::populateBTOptimizerToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<OptimizerLowering<GlobalNormOp, lowerGlobalNorm>,
               OptimizerLowering<ClipCoefficientOp, lowerClipCoefficient>,
               OptimizerLowering<LRScheduleOp, lowerLRSchedule>,
               OptimizerLowering<AdamWOp, lowerAdamW>>(patterns.getContext());
}
