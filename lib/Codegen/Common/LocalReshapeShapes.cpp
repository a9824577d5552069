//===- LocalReshapeShapes.cpp - bt-local-reshape-shapes -------------------===//
//
// Before bufferization, gives every tensor.reshape its own
// tensor.from_elements shape, built right before it: LLVM 19's
// BufferizableOpInterface of tensor.reshape aliases the shape operand with
// the result, so a shared shape, or one defined before the op that writes
// the reshape's source, makes One-Shot Analysis copy the source's buffer
// (Passes.td has the whole story and an example).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace bt {
#define GEN_PASS_DEF_BTLOCALRESHAPESHAPES
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

struct LocalReshapeShapesPass
    : public bt::impl::BTLocalReshapeShapesBase<LocalReshapeShapesPass> {
  void runOnOperation() override {
    llvm::SetVector<Operation *> shapes;
    getOperation()->walk([&](tensor::ReshapeOp reshape) {
      auto shape = reshape.getShape().getDefiningOp<tensor::FromElementsOp>();
      if (!shape)
        return;
      OpBuilder b(reshape);
      Operation *local = b.clone(*shape);
      reshape.getShapeMutable().assign(local->getResult(0));
      shapes.insert(shape);
    });
    for (Operation *shape : shapes)
      if (shape->use_empty())
        shape->erase();
  }
};

} // namespace
