//===- ConstantGlobals.cpp - bt-constant-globals ---------------------------===//
//
// Creates the memref.global of every tensor constant in walk order before
// One-Shot Bufferize, so that their names and order are reproducible (see
// the pass description in include/bt/Codegen/Passes.td).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/Transforms/BufferUtils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

namespace bt {
#define GEN_PASS_DEF_BTCONSTANTGLOBALS
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

struct ConstantGlobalsPass
    : public bt::impl::BTConstantGlobalsBase<ConstantGlobalsPass> {
  using BTConstantGlobalsBase::BTConstantGlobalsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<arith::ConstantOp> constants;
    // Only the module's own functions: getGlobalFor puts the global into the
    // constant's closest module.
    for (Operation &op : module.getBody()->getOperations()) {
      if (isa<ModuleOp>(op) || op.hasTrait<OpTrait::SymbolTable>())
        continue;
      op.walk([&](arith::ConstantOp c) {
        if (isa<RankedTensorType>(c.getType()))
          constants.push_back(c);
      });
    }
    for (arith::ConstantOp c : constants)
      if (failed(bufferization::getGlobalFor(c, alignment))) {
        c.emitOpError("has no memref.global (bt-constant-globals)");
        return signalPassFailure();
      }
  }
};

} // namespace
