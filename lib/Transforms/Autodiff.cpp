//===- Autodiff.cpp - reverse-mode differentiation (bt/Transforms/Autodiff.h) ===//
//
// The engine: activity analysis, then one backward sweep over the active ops
// of the function's block in reverse order, calling each op's
// DifferentiableOpInterface::buildVJP and summing the gradients of values
// with several uses. Parameters (bt.param_ref) collect the gradients of their
// results by name.
//
//===----------------------------------------------------------------------===//

#include "bt/Transforms/Autodiff.h"

#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Dialect/BT/IR/BTVJPUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace bt;

namespace {

/// Values that carry gradients: floating-point tensors and scalars.
bool isDifferentiableType(Type t) {
  if (auto shaped = dyn_cast<RankedTensorType>(t))
    return isa<FloatType>(shaped.getElementType());
  return isa<FloatType>(t);
}

/// The values an op reads: its operands and the values defined above its
/// regions that the regions use.
SmallVector<Value> inputsOf(Operation *op, SetVector<Value> *captured = nullptr) {
  SmallVector<Value> in(op->getOperands());
  if (op->getNumRegions() > 0) {
    SetVector<Value> above;
    for (Region &r : op->getRegions())
      getUsedValuesDefinedAbove(r, above);
    in.append(above.begin(), above.end());
    if (captured)
      *captured = above;
  }
  return in;
}

/// Hint for the error on model-level ops.
bool isModelLevel(Operation *op) {
  return isa<EmbedderOp, BlockDecoderOp, TokenDecoderOp, TokenDecoderStepOp,
             LMHeadOp>(op);
}

/// Whether `op` (other than bt.param_ref) reads parameters without a
/// bt.param_ref operand: a model-level op (by symbol, `table @"..."`, or by
/// name prefix, `params "block_decoder.gpt_neox"`) or an op naming a
/// `bt.param` in a symbol-reference attribute.
bool readsParamBySymbol(Operation *op) {
  if (isModelLevel(op))
    return true;
  for (NamedAttribute attr : op->getAttrs()) {
    auto ref = dyn_cast<SymbolRefAttr>(attr.getValue());
    if (ref && isa_and_nonnull<ParamOp>(
                   SymbolTable::lookupNearestSymbolFrom(op, ref)))
      return true;
  }
  return false;
}

class Sweep {
public:
  Sweep(FunctionOpInterface fn, Value loss) : fn(fn), loss(loss) {}

  FailureOr<SmallVector<ParamGradient>> run(const AutodiffOptions &options);

private:
  LogicalResult analyze();
  LogicalResult accumulate(OpBuilder &b, Value v, Value g, Operation *op,
                           unsigned operand);

  FunctionOpInterface fn;
  Value loss;
  Block *block = nullptr;
  DenseSet<Value> varied, useful;
  SmallVector<Operation *> active; // program order
  DenseMap<Value, Value> grads;
  // Parameter name → summed gradient, in first-seen order of the sweep.
  llvm::MapVector<StringAttr, Value> paramGrads;
  // Referenced parameters (in program order of their first bt.param_ref).
  llvm::MapVector<StringAttr, RankedTensorType> referenced;
};

LogicalResult Sweep::analyze() {
  // Forward: values that depend on a parameter.
  for (Operation &op : *block) {
    if (auto ref = dyn_cast<ParamRefOp>(op)) {
      varied.insert(ref.getResult());
      referenced.insert({ref.getNameAttr().getAttr(),
                         cast<RankedTensorType>(ref.getType())});
      continue;
    }
    bool anyVaried = llvm::any_of(inputsOf(&op), [&](Value v) {
      return varied.contains(v) && isDifferentiableType(v.getType());
    });
    // Model-level ops read parameters by symbol or name prefix; they depend
    // on a parameter without a bt.param_ref operand.
    anyVaried |= readsParamBySymbol(&op);
    if (!anyVaried)
      continue;
    for (Value r : op.getResults())
      if (isDifferentiableType(r.getType()))
        varied.insert(r);
  }
  // Backward: values the loss depends on.
  useful.insert(loss);
  for (Operation &op : llvm::reverse(*block)) {
    bool anyUseful = llvm::any_of(op.getResults(), [&](Value r) {
      return useful.contains(r);
    });
    if (!anyUseful)
      continue;
    for (Value v : inputsOf(&op))
      if (isDifferentiableType(v.getType()))
        useful.insert(v);
  }
  // Active: on a path from a parameter to the loss.
  bool ok = true;
  for (Operation &op : *block) {
    bool resultActive = llvm::any_of(op.getResults(), [&](Value r) {
      return varied.contains(r) && useful.contains(r);
    });
    if (!resultActive)
      continue;
    active.push_back(&op);
    if (isa<ParamRefOp>(op))
      continue;
    if (!isa<DifferentiableOpInterface>(op)) {
      InFlightDiagnostic d = op.emitError()
                             << "op '" << op.getName()
                             << "' has no vector-Jacobian rule";
      if (isModelLevel(&op))
        d << " (a model-level op: run bt-decompose first)";
      d.attachNote(loss.getLoc())
          << "it lies on a path from a parameter to this loss";
      ok = false;
      continue;
    }
    SetVector<Value> captured;
    inputsOf(&op, &captured);
    for (Value v : captured)
      if (varied.contains(v) && isDifferentiableType(v.getType())) {
        op.emitError() << "op '" << op.getName()
                       << "' reads a differentiated value inside its region; "
                          "only its operands can be differentiated";
        ok = false;
        break;
      }
  }
  return success(ok);
}

LogicalResult Sweep::accumulate(OpBuilder &b, Value v, Value g, Operation *op,
                                unsigned operand) {
  if (g.getType() != v.getType()) {
    auto gt = dyn_cast<RankedTensorType>(g.getType());
    auto vt = dyn_cast<RankedTensorType>(v.getType());
    if (!gt || !vt || !tensor::CastOp::areCastCompatible(gt, vt))
      return op->emitError()
             << "internal error: the vector-Jacobian rule of '"
             << op->getName() << "' gives a gradient of type " << g.getType()
             << " for operand #" << operand << " of type " << v.getType();
    g = b.create<tensor::CastOp>(op->getLoc(), vt, g);
  }
  auto it = grads.find(v);
  if (it == grads.end()) {
    grads[v] = g;
    return success();
  }
  it->second = b.create<arith::AddFOp>(op->getLoc(), it->second, g);
  return success();
}

FailureOr<SmallVector<ParamGradient>>
Sweep::run(const AutodiffOptions &options) {
  Region &body = fn.getFunctionBody();
  if (body.empty() || !llvm::hasSingleElement(body))
    return fn.emitError()
           << "cannot be differentiated: the body must be one block";
  block = &body.front();
  if (!isDifferentiableType(loss.getType()) ||
      (isa<RankedTensorType>(loss.getType()) &&
       cast<RankedTensorType>(loss.getType()).getRank() != 0))
    return fn.emitError() << "cannot be differentiated: the loss must be a "
                             "floating-point scalar (tensor<f32> or f32), got "
                          << loss.getType();
  if (loss.getParentBlock() != block)
    return fn.emitError()
           << "cannot be differentiated: the loss is not a value of the body";
  if (failed(analyze()))
    return failure();

  OpBuilder b(fn.getContext());
  Operation *terminator = block->empty() ? nullptr : &block->back();
  if (terminator && terminator->hasTrait<OpTrait::IsTerminator>())
    b.setInsertionPoint(terminator);
  else
    b.setInsertionPointToEnd(block);
  Operation *lastForward = b.getInsertionPoint() == block->begin()
                               ? nullptr
                               : &*std::prev(b.getInsertionPoint());

  Location lossLoc = loss.getLoc();
  Value seed = options.seed;
  if (!seed) {
    Type lt = loss.getType();
    if (auto t = dyn_cast<RankedTensorType>(lt))
      seed = b.create<arith::ConstantOp>(
          lossLoc, DenseElementsAttr::get(
                       t, b.getFloatAttr(t.getElementType(), 1.0)));
    else
      seed = b.create<arith::ConstantOp>(lossLoc, b.getFloatAttr(lt, 1.0));
  } else if (seed.getType() != loss.getType()) {
    return fn.emitError() << "the autodiff seed has type " << seed.getType()
                          << ", the loss " << loss.getType();
  }
  grads[loss] = seed;

  for (Operation *op : llvm::reverse(active)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      Value g = grads.lookup(r);
      resultGrads.push_back(g);
      any |= static_cast<bool>(g);
    }
    if (!any)
      continue;
    if (auto ref = dyn_cast<ParamRefOp>(op)) {
      StringAttr name = ref.getNameAttr().getAttr();
      Value g = resultGrads[0];
      auto it = paramGrads.find(name);
      if (it == paramGrads.end())
        paramGrads.insert({name, g});
      else
        it->second = b.create<arith::AddFOp>(op->getLoc(), it->second, g);
      continue;
    }
    SmallVector<Value> operandGrads;
    if (failed(cast<DifferentiableOpInterface>(op).buildVJP(b, resultGrads,
                                                            operandGrads)))
      return failure();
    if (operandGrads.size() != op->getNumOperands())
      return op->emitError() << "internal error: the vector-Jacobian rule of '"
                             << op->getName() << "' gives "
                             << operandGrads.size() << " gradients for "
                             << op->getNumOperands() << " operands";
    for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
      if (!varied.contains(operand) || !isDifferentiableType(operand.getType()))
        continue;
      Value g = operandGrads[i];
      if (!g)
        return op->emitError()
               << "op '" << op->getName()
               << "': its vector-Jacobian rule gives no gradient for operand #"
               << i << ", which depends on a parameter";
      if (failed(accumulate(b, operand, g, op, i)))
        return failure();
    }
  }

  // The parameters in declaration order when the module declares them.
  SmallVector<StringAttr> order;
  if (auto module = fn->getParentOfType<ModuleOp>()) {
    for (auto decl : module.getOps<ParamOp>()) {
      StringAttr name = decl.getSymNameAttr();
      if (referenced.count(name))
        order.push_back(name);
    }
  }
  if (order.size() != referenced.size()) {
    order.clear();
    for (auto &[name, type] : referenced)
      order.push_back(name);
  }
  SmallVector<ParamGradient> result;
  for (StringAttr name : order) {
    RankedTensorType type = referenced.lookup(name);
    Value g = paramGrads.lookup(name);
    if (!g)
      g = b.create<arith::ConstantOp>(
          fn.getLoc(),
          DenseElementsAttr::get(type,
                                 b.getFloatAttr(type.getElementType(), 0.0)));
    result.push_back({name.str(), g});
  }

  // Erase backward ops nobody reads (e.g. the input gradient of the first
  // layer when its input has none), keeping the returned gradients.
  DenseSet<Value> keep;
  for (ParamGradient &g : result)
    keep.insert(g.grad);
  Block::iterator begin =
      lastForward ? std::next(Block::iterator(lastForward)) : block->begin();
  SmallVector<Operation *> created;
  for (Block::iterator it = begin; it != b.getInsertionPoint(); ++it)
    created.push_back(&*it);
  for (Operation *op : llvm::reverse(created)) {
    bool kept = llvm::any_of(op->getResults(),
                             [&](Value r) { return keep.contains(r); });
    if (!kept && isOpTriviallyDead(op))
      op->erase();
  }
  return result;
}

} // namespace

FailureOr<SmallVector<ParamGradient>>
bt::buildParamGradients(FunctionOpInterface fn, Value loss,
                        const AutodiffOptions &options) {
  Sweep sweep(fn, loss);
  return sweep.run(options);
}

void bt::registerAutodiffDialects(DialectRegistry &registry) {
  registry.insert<BTDialect, arith::ArithDialect, linalg::LinalgDialect,
                  math::MathDialect, tensor::TensorDialect>();
  registerAutodiffInterfaces(registry);
}
