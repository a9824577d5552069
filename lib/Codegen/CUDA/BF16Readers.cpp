//===- BF16Readers.cpp - readers of a tensor stored in bf16 ---------------===//
//
// include/bt/Codegen/CUDA/BF16Readers.h: shared by bt-bf16-gemm-outputs and
// bt-bf16-activations (docs/codegen-cuda.md, "bf16").
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CUDA/BF16Readers.h"
#include "bt/Codegen/BF16.h"
#include "bt/Dialect/BT/IR/BTDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;

bool bt::codegen::isElementView(Operation *op) {
  return isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::ReshapeOp,
             tensor::ExtractSliceOp>(op);
}

bool bt::codegen::collectBF16Readers(Value v,
                                     SmallVectorImpl<Operation *> &views,
                                     SmallVectorImpl<OpOperand *> &inputs) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<tensor::DimOp>(user))
      continue;
    // An element read, e.g. by a dedicated kernel (the attention kernels
    // read q, k and v of the QKV product so, the LayerNorm kernels their
    // input).
    if (isa<tensor::ExtractOp>(user) && use.getOperandNumber() == 0) {
      inputs.push_back(&use);
      continue;
    }
    if (isElementView(user) && use.getOperandNumber() == 0) {
      views.push_back(user);
      if (!collectBF16Readers(user->getResult(0), views, inputs))
        return false;
      continue;
    }
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!generic || !generic.hasPureTensorSemantics() ||
        !generic.isDpsInput(&use))
      return false;
    inputs.push_back(&use);
  }
  return true;
}

bool bt::codegen::computesFunctionResult(Operation *op) {
  SmallVector<Value> work(op->getResults().begin(), op->getResults().end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<func::ReturnOp>(user))
        return true;
      if (isElementView(user))
        work.push_back(user->getResult(0));
    }
  }
  return false;
}

RankedTensorType bt::codegen::withBF16(Value x) {
  auto t = cast<RankedTensorType>(x.getType());
  return RankedTensorType::get(t.getShape(),
                               Builder(x.getContext()).getBF16Type(),
                               t.getEncoding());
}

void bt::codegen::readAsBF16(ArrayRef<Operation *> views,
                             ArrayRef<OpOperand *> inputs) {
  for (Operation *view : views)
    view->getResult(0).setType(withBF16(view->getResult(0)));
  for (OpOperand *input : inputs) {
    OpBuilder b(input->getOwner()->getContext());
    if (auto extract = dyn_cast<tensor::ExtractOp>(input->getOwner())) {
      SmallVector<OpOperand *> reads;
      for (OpOperand &use : extract.getResult().getUses())
        reads.push_back(&use);
      extract.getResult().setType(b.getBF16Type());
      b.setInsertionPointAfter(extract);
      Value wide = extendBF16(b, extract.getLoc(), extract.getResult());
      for (OpOperand *read : reads)
        read->set(wide);
      continue;
    }
    auto generic = cast<linalg::GenericOp>(input->getOwner());
    BlockArgument arg = generic.getMatchingBlockArgument(input);
    SmallVector<OpOperand *> reads;
    for (OpOperand &use : arg.getUses())
      reads.push_back(&use);
    arg.setType(b.getBF16Type());
    OpBuilder body = OpBuilder::atBlockBegin(generic.getBody());
    Value wide = extendBF16(body, generic.getLoc(), arg);
    for (OpOperand *read : reads)
      read->set(wide);
  }
}

SmallVector<SmallVector<BlockArgument>> bt::codegen::parametersUsedOnlyBy(
    ModuleOp module, int64_t rank, function_ref<bool(OpOperand &)> isUse) {
  struct Uses {
    SmallVector<BlockArgument> args;
    bool eligible = true;
    bool used = false;
  };
  llvm::MapVector<StringAttr, Uses> params;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      StringAttr name = bt::BTDialect::getArgParam(fn, i);
      if (!name)
        continue;
      Uses &u = params[name];
      BlockArgument arg = fn.getArgument(i);
      u.args.push_back(arg);
      auto t = dyn_cast<RankedTensorType>(arg.getType());
      if (!t || t.getRank() != rank || !t.getElementType().isF32())
        u.eligible = false;
      for (OpOperand &use : arg.getUses()) {
        u.eligible &= isUse(use);
        u.used = true;
      }
    }
  }
  SmallVector<SmallVector<BlockArgument>> result;
  for (auto &entry : params)
    if (entry.second.eligible && entry.second.used)
      result.push_back(std::move(entry.second.args));
  return result;
}
