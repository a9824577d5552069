//===- FuseLocalAttention.cpp - bt-fuse-local-attention --------------------===//
//
// bt.split_qkv → bt.rotary (q and k) → bt.local_attention becomes one
// bt.fused_local_attention (docs/design.md §4, "Local attention fusion"). The
// exact pattern is documented in Passes.td; anything else is left alone.
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace bt {
#define GEN_PASS_DEF_BTFUSELOCALATTENTION
#include "bt/Transforms/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

/// Fuses the chain ending in `attn` if it has exactly the documented form.
LogicalResult fuse(LocalAttentionOp attn, RewriterBase &rewriter) {
  auto qRot = attn.getQ().getDefiningOp<RotaryOp>();
  auto kRot = attn.getK().getDefiningOp<RotaryOp>();
  if (!qRot || !kRot || qRot == kRot)
    return failure();
  auto split = qRot.getInput().getDefiningOp<SplitQKVOp>();
  if (!split)
    return failure();
  // q, k, v of the same split, each in its own role.
  if (qRot.getInput() != split.getQ() || kRot.getInput() != split.getK() ||
      attn.getV() != split.getV())
    return failure();
  // The same rotation for q and k.
  if (qRot.getPositions() != kRot.getPositions() ||
      qRot.getRotaryDims() != kRot.getRotaryDims() ||
      qRot.getBase() != kRot.getBase())
    return failure();
  // Nothing else reads the intermediates (they would be computed anyway).
  if (!split.getQ().hasOneUse() || !split.getK().hasOneUse() ||
      !split.getV().hasOneUse() || !qRot.getResult().hasOneUse() ||
      !kRot.getResult().hasOneUse())
    return failure();
  // The fused op's layout: qkv [B, N_blk, S, H*3*hd] -> [B, N_blk, S, H, hd].
  auto qkvType = llvm::cast<RankedTensorType>(split.getQkv().getType());
  if (qkvType.getRank() != 4 || attn.getType() != split.getQ().getType())
    return failure();

  rewriter.setInsertionPoint(attn);
  rewriter.replaceOpWithNewOp<FusedLocalAttentionOp>(
      attn, attn.getType(), split.getQkv(), qRot.getPositions(),
      attn.getKeyMask(), split.getHeadsAttr(), split.getHeadDimAttr(),
      qRot.getRotaryDimsAttr(), qRot.getBaseAttr(), attn.getScaleAttr());
  rewriter.eraseOp(qRot);
  rewriter.eraseOp(kRot);
  rewriter.eraseOp(split);
  return success();
}

struct FuseLocalAttentionPass
    : public bt::impl::BTFuseLocalAttentionBase<FuseLocalAttentionPass> {
  using BTFuseLocalAttentionBase::BTFuseLocalAttentionBase;

  void runOnOperation() override {
    SmallVector<LocalAttentionOp> candidates;
    getOperation()->walk([&](LocalAttentionOp op) { candidates.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (LocalAttentionOp attn : candidates)
      if (succeeded(fuse(attn, rewriter)))
        ++numFused;
  }
};

} // namespace
