//===- OptimizerOps.cpp - verifiers of the optimizer ops ------------------===//
//
// bt.global_norm, bt.clip_coefficient, bt.lr_schedule, bt.adamw
// (include/bt/Dialect/BT/IR/BTOptimizerOps.td).
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace bt;

LogicalResult GlobalNormOp::verify() {
  if (getTensors().empty())
    return emitOpError("needs at least one tensor");
  return success();
}

LogicalResult ClipCoefficientOp::verify() {
  double maxNorm = getMaxNorm().convertToDouble();
  if (!(maxNorm > 0))
    return emitOpError() << "max_norm must be > 0, got " << maxNorm;
  double eps = getEps().convertToDouble();
  if (!(eps >= 0))
    return emitOpError() << "eps must be >= 0, got " << eps;
  return success();
}

LogicalResult LRScheduleOp::verify() {
  auto check = [&](StringRef name, APFloat v) -> LogicalResult {
    double d = v.convertToDouble();
    if (d >= 0 && d <= 1)
      return success();
    return emitOpError() << name << " must be in [0, 1], got " << d;
  };
  return success(succeeded(check("cos_min_ratio", getCosMinRatio())) &&
                 succeeded(check("warmup_min_ratio", getWarmupMinRatio())) &&
                 succeeded(check("initial_ratio", getInitialRatio())));
}

LogicalResult AdamWOp::verify() {
  auto param = llvm::cast<RankedTensorType>(getParam().getType());
  auto grad = llvm::cast<RankedTensorType>(getGrad().getType());
  if (param.getShape() != grad.getShape()) {
    InFlightDiagnostic d = emitOpError("grad must have the shape of param: ");
    llvm::interleave(grad.getShape(), d, "x");
    d << " vs ";
    llvm::interleave(param.getShape(), d, "x");
    return d;
  }
  for (auto [name, v] : {std::pair<StringRef, APFloat>{"beta1", getBeta1()},
                         {"beta2", getBeta2()}}) {
    double b = v.convertToDouble();
    if (!(b >= 0 && b < 1))
      return emitOpError() << name << " must be in [0, 1), got " << b;
  }
  for (auto [name, v] : {std::pair<StringRef, APFloat>{"eps", getEps()},
                         {"weight_decay", getWeightDecay()}}) {
    double x = v.convertToDouble();
    if (!(x >= 0))
      return emitOpError() << name << " must be >= 0, got " << x;
  }
  return success();
}
