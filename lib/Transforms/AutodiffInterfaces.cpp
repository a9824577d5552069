//===- AutodiffInterfaces.cpp - VJP rules of upstream ops ------------------===//
//
// External models of bt::DifferentiableOpInterface for the upstream ops the
// importer and bt-decompose emit (bt/Transforms/Autodiff.h,
// registerAutodiffInterfaces). With dy the gradient of the result:
//
// - tensor.extract_slice: d source = dy inserted into zeros of the source's
//   shape at the slice (tensor.insert_slice, same offsets/sizes/strides);
// - tensor.insert_slice: d source = the slice of dy, d dest = dy with the
//   slice zeroed;
// - tensor.concat: d input_i = the slice of dy at input i's offset;
// - tensor.collapse_shape / expand_shape / reshape / cast: dy reshaped back
//   to the source's shape and type;
// - arith.addf: (dy, dy); subf: (dy, -dy); mulf: (dy·b, dy·a);
//   divf: (dy / b, -(dy / b) · (a / b)); negf: -dy (tensors or scalars);
// - arith.select: (none, select(c, dy, 0), select(c, 0, dy));
// - non-differentiable (integer / index / shape results, or no float
//   operand): tensor.empty, tensor.dim, tensor.generate, arith.constant,
//   integer arithmetic and casts; tensor.splat / from_elements of integers
//   (of floats: an error, not a silent zero).
//
// linalg.generic has no model: a training graph that differentiates through
// one gets "op 'linalg.generic' has no vector-Jacobian rule".
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Dialect/BT/IR/BTVJPUtils.h"
#include "bt/Transforms/Autodiff.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace bt;

namespace {

RankedTensorType tensorTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

struct ExtractSliceVJP
    : public DifferentiableOpInterface::ExternalModel<ExtractSliceVJP,
                                                      tensor::ExtractSliceOp> {
  LogicalResult buildVJP(Operation *o, OpBuilder &b,
                         ArrayRef<Value> resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto op = cast<tensor::ExtractSliceOp>(o);
    Location loc = op.getLoc();
    operandGrads.assign(op->getNumOperands(), Value());
    Value zero = vjp::zerosLike(b, loc, op.getSource());
    operandGrads[0] = b.create<tensor::InsertSliceOp>(
        loc, resultGrads[0], zero, op.getMixedOffsets(), op.getMixedSizes(),
        op.getMixedStrides());
    return success();
  }
};

struct InsertSliceVJP
    : public DifferentiableOpInterface::ExternalModel<InsertSliceVJP,
                                                      tensor::InsertSliceOp> {
  LogicalResult buildVJP(Operation *o, OpBuilder &b,
                         ArrayRef<Value> resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto op = cast<tensor::InsertSliceOp>(o);
    Location loc = op.getLoc();
    Value dy = resultGrads[0];
    operandGrads.assign(op->getNumOperands(), Value());
    operandGrads[0] = b.create<tensor::ExtractSliceOp>(
        loc, op.getSourceType(), dy, op.getMixedOffsets(), op.getMixedSizes(),
        op.getMixedStrides());
    Value zero = vjp::zerosLike(b, loc, op.getSource());
    operandGrads[1] = b.create<tensor::InsertSliceOp>(
        loc, zero, dy, op.getMixedOffsets(), op.getMixedSizes(),
        op.getMixedStrides());
    return success();
  }
};

struct ConcatVJP
    : public DifferentiableOpInterface::ExternalModel<ConcatVJP,
                                                      tensor::ConcatOp> {
  LogicalResult buildVJP(Operation *o, OpBuilder &b,
                         ArrayRef<Value> resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto op = cast<tensor::ConcatOp>(o);
    Location loc = op.getLoc();
    int64_t dim = op.getDim();
    operandGrads.clear();
    OpFoldResult offset = b.getIndexAttr(0);
    for (Value in : op.getInputs()) {
      SmallVector<OpFoldResult> sizes = vjp::sizesOf(b, loc, in);
      int64_t rank = sizes.size();
      SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
      SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
      offsets[dim] = offset;
      operandGrads.push_back(b.create<tensor::ExtractSliceOp>(
          loc, tensorTypeOf(in), resultGrads[0], offsets, sizes, strides));
      // offset += size of this input along dim.
      std::optional<int64_t> a = getConstantIntValue(offset),
                             s = getConstantIntValue(sizes[dim]);
      if (a && s) {
        offset = b.getIndexAttr(*a + *s);
      } else {
        offset = b.create<arith::AddIOp>(
                      loc, getValueOrCreateConstantIndexOp(b, loc, offset),
                      getValueOrCreateConstantIndexOp(b, loc, sizes[dim]))
                     .getResult();
      }
    }
    return success();
  }
};

struct CollapseShapeVJP
    : public DifferentiableOpInterface::ExternalModel<CollapseShapeVJP,
                                                      tensor::CollapseShapeOp> {
  LogicalResult buildVJP(Operation *o, OpBuilder &b,
                         ArrayRef<Value> resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto op = cast<tensor::CollapseShapeOp>(o);
    operandGrads.assign(1, vjp::expandLike(b, op.getLoc(), resultGrads[0],
                                           op.getReassociationIndices(),
                                           op.getSrc()));
    return success();
  }
};

struct ExpandShapeVJP
    : public DifferentiableOpInterface::ExternalModel<ExpandShapeVJP,
                                                      tensor::ExpandShapeOp> {
  LogicalResult buildVJP(Operation *o, OpBuilder &b,
                         ArrayRef<Value> resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto op = cast<tensor::ExpandShapeOp>(o);
    Location loc = op.getLoc();
    operandGrads.assign(op->getNumOperands(), Value());
    Value collapsed = b.create<tensor::CollapseShapeOp>(
        loc, resultGrads[0], op.getReassociationIndices());
    operandGrads[0] = vjp::castTo(b, loc, collapsed, op.getSrc().getType());
    return success();
  }
};

struct ReshapeVJP
    : public DifferentiableOpInterface::ExternalModel<ReshapeVJP,
                                                      tensor::ReshapeOp> {
  LogicalResult buildVJP(Operation *o, OpBuilder &b,
                         ArrayRef<Value> resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto op = cast<tensor::ReshapeOp>(o);
    Location loc = op.getLoc();
    auto srcType = dyn_cast<RankedTensorType>(op.getSource().getType());
    if (!srcType)
      return op.emitOpError()
             << "cannot be differentiated: the source is unranked";
    operandGrads.assign(op->getNumOperands(), Value());
    SmallVector<Value> dims;
    for (OpFoldResult s : vjp::sizesOf(b, loc, op.getSource()))
      dims.push_back(getValueOrCreateConstantIndexOp(b, loc, s));
    Value shape = b.create<tensor::FromElementsOp>(loc, dims);
    operandGrads[0] =
        b.create<tensor::ReshapeOp>(loc, srcType, resultGrads[0], shape);
    return success();
  }
};

struct CastVJP
    : public DifferentiableOpInterface::ExternalModel<CastVJP, tensor::CastOp> {
  LogicalResult buildVJP(Operation *o, OpBuilder &b,
                         ArrayRef<Value> resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto op = cast<tensor::CastOp>(o);
    operandGrads.assign(1, vjp::castTo(b, op.getLoc(), resultGrads[0],
                                       op.getSource().getType()));
    return success();
  }
};

/// arith.addf / subf / mulf / divf / negf.
template <typename OpTy>
struct ArithVJP
    : public DifferentiableOpInterface::ExternalModel<ArithVJP<OpTy>, OpTy> {
  LogicalResult buildVJP(Operation *op, OpBuilder &b,
                         ArrayRef<Value> resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    Location loc = op->getLoc();
    Value dy = resultGrads[0];
    operandGrads.clear();
    if constexpr (std::is_same_v<OpTy, arith::AddFOp>) {
      operandGrads.assign({dy, dy});
    } else if constexpr (std::is_same_v<OpTy, arith::SubFOp>) {
      operandGrads.assign({dy, b.create<arith::NegFOp>(loc, dy).getResult()});
    } else if constexpr (std::is_same_v<OpTy, arith::MulFOp>) {
      Value lhs = op->getOperand(0), rhs = op->getOperand(1);
      operandGrads.assign({b.create<arith::MulFOp>(loc, dy, rhs).getResult(),
                           b.create<arith::MulFOp>(loc, dy, lhs).getResult()});
    } else if constexpr (std::is_same_v<OpTy, arith::DivFOp>) {
      Value lhs = op->getOperand(0), rhs = op->getOperand(1);
      Value da = b.create<arith::DivFOp>(loc, dy, rhs);
      Value ratio = b.create<arith::DivFOp>(loc, lhs, rhs);
      Value db = b.create<arith::NegFOp>(
          loc, b.create<arith::MulFOp>(loc, da, ratio).getResult());
      operandGrads.assign({da, db});
    } else {
      static_assert(std::is_same_v<OpTy, arith::NegFOp>);
      operandGrads.assign({b.create<arith::NegFOp>(loc, dy).getResult()});
    }
    return success();
  }
};

/// arith.select (scalar or elementwise condition): the gradient goes to the
/// chosen operand, zero to the other; none to the condition.
struct SelectVJP
    : public DifferentiableOpInterface::ExternalModel<SelectVJP,
                                                      arith::SelectOp> {
  LogicalResult buildVJP(Operation *o, OpBuilder &b,
                         ArrayRef<Value> resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto op = cast<arith::SelectOp>(o);
    Location loc = op.getLoc();
    Value dy = resultGrads[0];
    Value zero;
    if (isa<RankedTensorType>(dy.getType()))
      zero = vjp::zerosLike(b, loc, dy);
    else if (isa<FloatType>(dy.getType()))
      zero = b.create<arith::ConstantOp>(loc, b.getFloatAttr(dy.getType(), 0.0));
    else
      return op.emitOpError() << "has no vector-Jacobian rule for type "
                              << dy.getType();
    Value cond = op.getCondition();
    operandGrads.assign(
        {Value(), b.create<arith::SelectOp>(loc, cond, dy, zero).getResult(),
         b.create<arith::SelectOp>(loc, cond, zero, dy).getResult()});
    return success();
  }
};

/// Ops whose results carry no gradient to their operands (integer, index or
/// shape computations, constants, allocations).
template <typename OpTy>
struct NonDifferentiable
    : public DifferentiableOpInterface::ExternalModel<NonDifferentiable<OpTy>,
                                                      OpTy> {
  LogicalResult buildVJP(Operation *op, OpBuilder &, ArrayRef<Value>,
                         SmallVectorImpl<Value> &operandGrads) const {
    operandGrads.assign(op->getNumOperands(), Value());
    return success();
  }
};

/// tensor.splat / tensor.from_elements: integer elements carry no gradient;
/// float elements are not supported (an error rather than a silent zero).
template <typename OpTy>
struct ElementsVJP
    : public DifferentiableOpInterface::ExternalModel<ElementsVJP<OpTy>, OpTy> {
  LogicalResult buildVJP(Operation *op, OpBuilder &, ArrayRef<Value>,
                         SmallVectorImpl<Value> &operandGrads) const {
    for (Value v : op->getOperands())
      if (isa<FloatType>(v.getType()))
        return op->emitOpError() << "has no vector-Jacobian rule for float "
                                    "elements";
    operandGrads.assign(op->getNumOperands(), Value());
    return success();
  }
};

template <typename... OpTys>
void attachNonDifferentiable(MLIRContext *ctx) {
  (OpTys::template attachInterface<NonDifferentiable<OpTys>>(*ctx), ...);
}

} // namespace

void bt::registerAutodiffInterfaces(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, tensor::TensorDialect *) {
    tensor::ExtractSliceOp::attachInterface<ExtractSliceVJP>(*ctx);
    tensor::InsertSliceOp::attachInterface<InsertSliceVJP>(*ctx);
    tensor::ConcatOp::attachInterface<ConcatVJP>(*ctx);
    tensor::CollapseShapeOp::attachInterface<CollapseShapeVJP>(*ctx);
    tensor::ExpandShapeOp::attachInterface<ExpandShapeVJP>(*ctx);
    tensor::ReshapeOp::attachInterface<ReshapeVJP>(*ctx);
    tensor::CastOp::attachInterface<CastVJP>(*ctx);
    attachNonDifferentiable<tensor::EmptyOp, tensor::DimOp,
                            tensor::GenerateOp>(ctx);
    tensor::SplatOp::attachInterface<ElementsVJP<tensor::SplatOp>>(*ctx);
    tensor::FromElementsOp::attachInterface<
        ElementsVJP<tensor::FromElementsOp>>(*ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    arith::AddFOp::attachInterface<ArithVJP<arith::AddFOp>>(*ctx);
    arith::SubFOp::attachInterface<ArithVJP<arith::SubFOp>>(*ctx);
    arith::MulFOp::attachInterface<ArithVJP<arith::MulFOp>>(*ctx);
    arith::DivFOp::attachInterface<ArithVJP<arith::DivFOp>>(*ctx);
    arith::NegFOp::attachInterface<ArithVJP<arith::NegFOp>>(*ctx);
    arith::SelectOp::attachInterface<SelectVJP>(*ctx);
    attachNonDifferentiable<
        arith::ConstantOp, arith::AddIOp, arith::SubIOp, arith::MulIOp,
        arith::DivSIOp, arith::DivUIOp, arith::RemSIOp, arith::RemUIOp,
        arith::CmpIOp, arith::IndexCastOp, arith::IndexCastUIOp,
        arith::ExtSIOp, arith::ExtUIOp, arith::TruncIOp, arith::MaxSIOp,
        arith::MinSIOp, arith::AndIOp, arith::OrIOp, arith::XOrIOp>(ctx);
  });
}
