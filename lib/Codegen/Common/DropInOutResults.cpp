//===- DropInOutResults.cpp - bt-drop-inout-results ------------------------===//
//
// After one-shot bufferization, removes the results that are in-out
// arguments updated in place (`bt.inout_arg = "<name>"`: the result is the
// argument whose `bt.name` is <name>, set by bt-lower-kv-caches)
// and fails where bufferization did not update the argument in place.
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/BitVector.h"

namespace bt {
#define GEN_PASS_DEF_BTDROPINOUTRESULTS
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

/// `v` without memref.cast ops in front of it.
Value stripCasts(Value v) {
  while (auto cast = v.getDefiningOp<memref::CastOp>())
    v = cast.getSource();
  return v;
}

struct DropInOutResultsPass
    : public bt::impl::BTDropInOutResultsBase<DropInOutResultsPass> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      llvm::BitVector drop(fn.getNumResults());
      for (unsigned r = 0; r < fn.getNumResults(); ++r) {
        StringAttr tied = bt::BTDialect::getResultInOutArg(fn, r);
        if (!tied)
          continue;
        int64_t argIdx = -1;
        for (unsigned a = 0; a < fn.getNumArguments(); ++a)
          if (bt::BTDialect::getArgName(fn, a) == tied &&
              fn.getArgAttr(a, bt::BTDialect::getInOutAttrName()))
            argIdx = a;
        if (argIdx < 0) {
          fn.emitOpError() << "result #" << r << " is the in-out argument "
                           << tied << ", but no argument has bt.inout and "
                           << "that bt.name";
          return signalPassFailure();
        }
        Value arg = fn.getArgument(argIdx);
        bool ok = true;
        fn.walk([&](func::ReturnOp ret) {
          if (stripCasts(ret.getOperand(r)) != arg) {
            ret.emitOpError()
                << "returns a copy of in-out argument #" << argIdx
                << " as result #" << r
                << ": the buffer was not updated in place";
            ok = false;
          }
        });
        if (!ok)
          return signalPassFailure();
        drop.set(r);
      }
      if (drop.none())
        continue;
      fn.walk([&](func::ReturnOp ret) {
        SmallVector<Value> kept;
        for (auto [i, v] : llvm::enumerate(ret.getOperands()))
          if (!drop.test(i))
            kept.push_back(v);
        OpBuilder b(ret);
        b.create<func::ReturnOp>(ret.getLoc(), kept);
        ret.erase();
      });
      fn.eraseResults(drop);
    }
  }
};

} // namespace
