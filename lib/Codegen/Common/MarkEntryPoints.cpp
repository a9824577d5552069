//===- MarkEntryPoints.cpp - prepare public functions for the kernel ABI --===//
//
// bt-mark-entry-points: public functions get llvm.emit_c_interface (the
// wrapper bt-emit-entry-wrappers calls) and read-only tensor arguments
// (bufferization.writable = false), so generated code never writes into the
// caller's weights or inputs; in-out arguments (bt.inout) are writable.
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace bt {
#define GEN_PASS_DEF_BTMARKENTRYPOINTS
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

struct MarkEntryPointsPass
    : public bt::impl::BTMarkEntryPointsBase<MarkEntryPointsPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    for (func::FuncOp f : getOperation().getOps<func::FuncOp>()) {
      if (!f.isPublic() || f.isExternal())
        continue;
      f->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                 UnitAttr::get(ctx));
      // In-out arguments (bt.inout, the KV caches of generation) are
      // updated in place; every other argument is read-only.
      for (unsigned i = 0, e = f.getNumArguments(); i < e; ++i)
        if (isa<TensorType>(f.getArgument(i).getType()))
          f.setArgAttr(
              i, bufferization::BufferizationDialect::kWritableAttrName,
              BoolAttr::get(ctx, static_cast<bool>(f.getArgAttr(
                                     i, bt::BTDialect::getInOutAttrName()))));
    }
  }
};

} // namespace
