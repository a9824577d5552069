//===- EliminateFreshInits.cpp - bt-eliminate-fresh-inits -----------------===//
//
// Before bufferization: the lowerings' fresh inits (`bufferization.
// alloc_tensor` with only dynamic sizes, LinalgUtils.h freshEmpty) become
// `tensor.empty` again, and upstream's empty-tensor elimination then lets
// an op whose result is later inserted into a larger tensor write into the
// destination's slice directly (Passes.td has the details).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/Transforms.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "llvm/ADT/SmallVector.h"

namespace bt {
#define GEN_PASS_DEF_BTELIMINATEFRESHINITS
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

/// Whether `alloc` is a fresh init: no copy source, size hint or memory
/// space, so a tensor.empty of the same type and sizes means the same.
bool isFreshInit(bufferization::AllocTensorOp alloc) {
  return !alloc.getCopy() && !alloc.getSizeHint() &&
         !alloc.getMemorySpace().has_value();
}

/// Whether `use` is an init (destination) of a destination-style op, which
/// writes into it.
bool isInitUse(OpOperand &use) {
  auto dps = dyn_cast<DestinationStyleOpInterface>(use.getOwner());
  return dps && dps.isDpsInit(&use);
}

struct EliminateFreshInitsPass
    : public bt::impl::BTEliminateFreshInitsBase<EliminateFreshInitsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    IRRewriter rewriter(&getContext());
    llvm::SmallVector<bufferization::AllocTensorOp> fresh;
    module.walk([&](bufferization::AllocTensorOp alloc) {
      if (isFreshInit(alloc))
        fresh.push_back(alloc);
    });
    for (bufferization::AllocTensorOp alloc : fresh) {
      rewriter.setInsertionPoint(alloc);
      rewriter.replaceOpWithNewOp<tensor::EmptyOp>(
          alloc, alloc.getType(), alloc.getDynamicSizes());
    }
    // One fill per op that writes into it: CSE merged equal `linalg.fill`s
    // of `tensor.empty` (e.g. the zero inits of several reductions or GEMMs
    // of one shape), and each op that takes such a fill as its init writes
    // into it, so bufferization copied the filled buffer for all of them
    // but one (and for all of them when another op reads the fill). Each
    // init use gets its own fill; the original keeps the reads, or one init
    // use when nothing reads it.
    llvm::SmallVector<linalg::FillOp> sharedFills;
    module.walk([&](linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics() &&
          fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>() &&
          llvm::any_of(fill->getResult(0).getUses(), isInitUse) &&
          !fill->getResult(0).hasOneUse())
        sharedFills.push_back(fill);
    });
    for (linalg::FillOp fill : sharedFills) {
      llvm::SmallVector<OpOperand *> inits;
      bool read = false;
      for (OpOperand &use : fill->getResult(0).getUses()) {
        if (isInitUse(use))
          inits.push_back(&use);
        else
          read = true;
      }
      auto empty = fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>();
      for (OpOperand *use : llvm::drop_begin(inits, read ? 0 : 1)) {
        rewriter.setInsertionPoint(fill);
        Operation *emptyClone = rewriter.clone(*empty.getOperation());
        IRMapping map;
        map.map(empty.getResult(), emptyClone->getResult(0));
        Operation *clone = rewriter.clone(*fill.getOperation(), map);
        rewriter.modifyOpInPlace(use->getOwner(),
                                 [&] { use->set(clone->getResult(0)); });
      }
    }
    // One tensor.empty per use: CSE merged equal ones (e.g. the inits of the
    // rotated key and of the value's transpose, both appended to the KV
    // cache), and upstream replaces a tensor.empty with one insertion's
    // slice for all its users, which would make the other op write into
    // that slice (and bufferization then copy).
    llvm::SmallVector<tensor::EmptyOp> shared;
    module.walk([&](tensor::EmptyOp empty) {
      if (!empty->hasOneUse() && !empty->use_empty())
        shared.push_back(empty);
    });
    for (tensor::EmptyOp empty : shared) {
      llvm::SmallVector<OpOperand *> uses;
      for (OpOperand &use : empty->getUses())
        uses.push_back(&use);
      for (OpOperand *use : llvm::drop_begin(uses)) {
        rewriter.setInsertionPoint(empty);
        Operation *clone = rewriter.clone(*empty.getOperation());
        rewriter.modifyOpInPlace(use->getOwner(),
                                 [&] { use->set(clone->getResult(0)); });
      }
    }
    if (failed(bufferization::eliminateEmptyTensors(rewriter, module)))
      signalPassFailure();
  }
};

} // namespace
