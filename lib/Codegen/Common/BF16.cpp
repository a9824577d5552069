//===- BF16.cpp - bf16 rounding and extension as integer ops --------------===//
//
// See include/bt/Codegen/BF16.h.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/BF16.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

Value bt::codegen::roundToBF16(OpBuilder &b, Location l, Value x) {
  Type i32 = b.getI32Type(), i16 = b.getIntegerType(16);
  auto c = [&](int64_t v) -> Value {
    return b.create<arith::ConstantOp>(l, b.getI32IntegerAttr(v));
  };
  Value bits = b.create<arith::BitcastOp>(l, i32, x);
  Value high = b.create<arith::ShRUIOp>(l, bits, c(16));
  Value lsb = b.create<arith::AndIOp>(l, high, c(1));
  Value bias = b.create<arith::AddIOp>(l, lsb, c(0x7fff));
  Value rounded = b.create<arith::ShRUIOp>(
      l, b.create<arith::AddIOp>(l, bits, bias), c(16));
  Value quiet = b.create<arith::OrIOp>(l, high, c(0x40));
  Value isNan =
      b.create<arith::CmpFOp>(l, arith::CmpFPredicate::UNO, x, x);
  Value r = b.create<arith::SelectOp>(l, isNan, quiet, rounded);
  Value r16 = b.create<arith::TruncIOp>(l, i16, r);
  return b.create<arith::BitcastOp>(l, b.getBF16Type(), r16);
}

Value bt::codegen::extendBF16(OpBuilder &b, Location l, Value x) {
  Type i32 = b.getI32Type();
  Value bits = b.create<arith::BitcastOp>(l, b.getIntegerType(16), x);
  Value wide = b.create<arith::ExtUIOp>(l, i32, bits);
  Value shifted = b.create<arith::ShLIOp>(
      l, wide, b.create<arith::ConstantOp>(l, b.getI32IntegerAttr(16)));
  return b.create<arith::BitcastOp>(l, b.getF32Type(), shifted);
}

Value bt::codegen::roundTensorToBF16(OpBuilder &b, Location l, Value x) {
  auto t = cast<RankedTensorType>(x.getType());
  auto outType = RankedTensorType::get(t.getShape(), b.getBF16Type());
  SmallVector<Value> dynSizes;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (t.isDynamicDim(d))
      dynSizes.push_back(b.create<tensor::DimOp>(l, x, d));
  Value init = b.create<tensor::EmptyOp>(l, outType, dynSizes);
  SmallVector<AffineMap> maps(
      2, AffineMap::getMultiDimIdentityMap(t.getRank(), b.getContext()));
  SmallVector<utils::IteratorType> iters(t.getRank(),
                                         utils::IteratorType::parallel);
  return b
      .create<linalg::GenericOp>(
          l, TypeRange{outType}, ValueRange{x}, ValueRange{init}, maps, iters,
          [](OpBuilder &nb, Location nl, ValueRange a) {
            nb.create<linalg::YieldOp>(nl, roundToBF16(nb, nl, a[0]));
          })
      .getResult(0);
}
