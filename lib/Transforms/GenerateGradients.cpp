//===- GenerateGradients.cpp - bt-generate-gradients -----------------------===//
//
// Derives the `grad` entry point from `eval_loss`: same arguments, returns
// `loss` and `grad.<param>` for every parameter (bt/Transforms/Autodiff.h).
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Transforms/Autodiff.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace bt {
#define GEN_PASS_DEF_BTGENERATEGRADIENTS
#include "bt/Transforms/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

struct GenerateGradientsPass
    : public bt::impl::BTGenerateGradientsBase<GenerateGradientsPass> {
  using BTGenerateGradientsBase::BTGenerateGradientsBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    BTGenerateGradientsBase::getDependentDialects(registry);
    registerAutodiffDialects(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto src = module.lookupSymbol<func::FuncOp>(from);
    if (!src || src.isExternal()) {
      module.emitError() << "bt-generate-gradients: no function '" << from
                         << "' with a body (the forward with a loss)";
      return signalPassFailure();
    }
    if (module.lookupSymbol(name)) {
      module.lookupSymbol(name)->emitError()
          << "bt-generate-gradients: '" << name << "' is already defined";
      return signalPassFailure();
    }
    int lossIndex = -1;
    for (unsigned i = 0; i < src.getNumResults(); ++i)
      if (auto n = src.getResultAttrOfType<StringAttr>(i, bt::BTDialect::getNameAttrName());
          n && n.getValue() == "loss")
        lossIndex = static_cast<int>(i);
    if (lossIndex < 0) {
      src.emitError() << "bt-generate-gradients: '" << from
                      << "' has no result named 'loss' (bt.name)";
      return signalPassFailure();
    }

    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(src);
    auto fn = cast<func::FuncOp>(b.clone(*src));
    fn.setSymName(name);
    Block &body = fn.getBody().front();
    auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
    if (!ret) {
      fn.emitError() << "bt-generate-gradients: expected a func.return";
      fn.erase();
      return signalPassFailure();
    }
    Value loss = ret.getOperand(lossIndex);
    FailureOr<SmallVector<ParamGradient>> grads =
        buildParamGradients(fn, loss);
    if (failed(grads)) {
      fn.erase();
      return signalPassFailure();
    }

    // return loss, grad.<p>...
    SmallVector<Value> results{loss};
    SmallVector<Type> resultTypes{loss.getType()};
    SmallVector<DictionaryAttr> resultAttrs{src.getResultAttrDict(lossIndex)};
    for (ParamGradient &g : *grads) {
      results.push_back(g.grad);
      resultTypes.push_back(g.grad.getType());
      SmallVector<Attribute> dims(
          cast<RankedTensorType>(g.grad.getType()).getRank(),
          b.getStringAttr(""));
      resultAttrs.push_back(b.getDictionaryAttr(
          {b.getNamedAttr(bt::BTDialect::getNameAttrName(), b.getStringAttr("grad." + g.name)),
           b.getNamedAttr(bt::BTDialect::getDimsAttrName(), b.getArrayAttr(dims))}));
    }
    b.setInsertionPoint(ret);
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    fn.setFunctionType(
        b.getFunctionType(fn.getArgumentTypes(), resultTypes));
    fn.setAllResultAttrs(resultAttrs);

    // Remove what only fed the other results of the forward.
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (isOpTriviallyDead(op))
        op->erase();
  }
};

} // namespace
