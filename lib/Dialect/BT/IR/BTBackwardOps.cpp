//===- BTBackwardOps.cpp - verifiers of the backward bt ops ----------------===//
//
// bt.layer_norm_grad, bt.embedding_grad, bt.attention_grad,
// bt.cross_entropy_grad (BTOps.td, "Backward").
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTOps.h"
#include "VerifierUtils.h"

using namespace mlir;
using namespace bt;
using namespace bt::verifier;

LogicalResult LayerNormGradOp::verify() {
  RankedTensorType in = tensorType(getInput());
  if (in.getRank() < 1)
    return emitOpError() << "input must have rank >= 1 [..., C]";
  if (failed(checkShape(*this, "weight", getWeight(), {in.getShape().back()})))
    return failure();
  if (tensorType(getWeight()).getElementType() != in.getElementType())
    return emitOpError() << "weight element type must be "
                         << in.getElementType();
  if (!(getEps().convertToDouble() > 0.0))
    return emitOpError() << "eps must be > 0";
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType table = tensorType(getTableGrad());
  if (table.getRank() != 2)
    return emitOpError() << "table_grad must be rank 2 [V, E], got rank "
                         << table.getRank();
  if (table.isDynamicDim(0))
    return emitOpError() << "table_grad must have a static row count V";
  SmallVector<int64_t> expected(tensorType(getIds()).getShape());
  expected.push_back(table.getDimSize(1));
  if (failed(checkShape(*this, "result_grad", getResultGrad(), expected)))
    return failure();
  if (tensorType(getResultGrad()).getElementType() != table.getElementType())
    return emitOpError() << "result_grad and table_grad element types differ";
  return success();
}

LogicalResult AttentionGradOp::verify() {
  RankedTensorType q = tensorType(getQ());
  int64_t r = q.getRank();
  if (r != 4 && r != 5)
    return emitOpError() << "q must be rank 4 [B, S, H, hd] (bt.attention) or "
                            "5 [B, N_blk, S, H, hd] (bt.local_attention), got "
                            "rank "
                         << r;
  if (getKeyMask() &&
      failed(checkShape(*this, "key_mask", getKeyMask(),
                        q.getShape().drop_back(2))))
    return failure();
  if (!(getScale().convertToDouble() > 0.0))
    return emitOpError() << "scale must be > 0, got "
                         << getScale().convertToDouble();
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  RankedTensorType logits = tensorType(getLogits());
  if (logits.getRank() < 1)
    return emitOpError() << "logits must have rank >= 1 [..., V]";
  return checkShape(*this, "labels", getLabels(), logits.getShape().drop_back());
}
