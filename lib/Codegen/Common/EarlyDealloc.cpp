//===- EarlyDealloc.cpp - free each buffer right after its last use -------===//
//
// bt-early-dealloc (Passes.td): the ownership-based buffer deallocation of
// upstream MLIR places a straight-line function's `memref.dealloc`s at the
// end of the block, so every intermediate of a forward pass stays allocated
// until the function returns: the peak memory is the sum of all activations
// (block_main_b4_300's prefill at batch 256 asked for more than an H100's
// 80 GB; docs/gpu-runs/2026-11-27-h100). This pass moves each dealloc of a
// block-local allocation to just after the last op of the block that uses
// the buffer or any view of it.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace bt {
#define GEN_PASS_DEF_BTEARLYDEALLOC
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

/// The last op of `block` that uses `root` or a value derived from it
/// (results of any op that takes an alias and yields memrefs: views, casts,
/// calls), ignoring `self` (the dealloc being moved); null when none uses
/// it. Fails (std::nullopt) when an alias may escape what SSA shows: a
/// terminator passes it on (return, yield), or it leaves `block`'s ops
/// through an op that is not in the block (a use outside `block`).
std::optional<Operation *> lastUse(Value root, Block *block,
                                   Operation *self) {
  SmallVector<Value> work{root};
  DenseSet<Value> seen{root};
  Operation *last = nullptr;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (user == self)
        continue;
      if (user->hasTrait<OpTrait::IsTerminator>() &&
          user->getBlock() == block)
        return std::nullopt; // returned or yielded out of the block
      Operation *anchor = block->findAncestorOpInBlock(*user);
      if (!anchor)
        return std::nullopt;
      if (anchor != user && user->hasTrait<OpTrait::IsTerminator>() &&
          !isa<func::ReturnOp>(user)) {
        // Yielded inside a region: the region's op may return an alias.
        for (Value r : anchor->getResults())
          if (isa<BaseMemRefType>(r.getType()) && seen.insert(r).second)
            work.push_back(r);
      }
      if (!last || last->isBeforeInBlock(anchor))
        last = anchor;
      for (Value r : user->getResults())
        if (isa<BaseMemRefType>(r.getType()) && seen.insert(r).second)
          work.push_back(r);
      if (isa<memref::ExtractAlignedPointerAsIndexOp>(user))
        return std::nullopt; // a raw pointer: uses not tracked
    }
  }
  return last;
}

struct EarlyDeallocPass
    : public bt::impl::BTEarlyDeallocBase<EarlyDeallocPass> {
  void runOnOperation() override {
    SmallVector<memref::DeallocOp> deallocs;
    getOperation()->walk([&](memref::DeallocOp d) { deallocs.push_back(d); });
    for (memref::DeallocOp d : deallocs) {
      auto alloc = d.getMemref().getDefiningOp<memref::AllocOp>();
      if (!alloc || alloc->getBlock() != d->getBlock())
        continue;
      Block *block = d->getBlock();
      std::optional<Operation *> last = lastUse(alloc, block, d);
      if (!last)
        continue;
      Operation *after = *last ? *last : alloc.getOperation();
      if (after->isBeforeInBlock(d))
        d->moveAfter(after);
    }
  }
};

} // namespace
