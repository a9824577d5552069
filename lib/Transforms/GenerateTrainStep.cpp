//===- GenerateTrainStep.cpp - bt-generate-train-step ----------------------===//
//
// Builds the training entry points from the model-level forward with loss
// (`eval_loss`): `train_step` (forward, reverse sweep, optimizer) and
// `apply_gradients` (the optimizer on given gradients). Parameters and
// AdamW moments are in-out arguments updated in place. The contract is the
// pass description in include/bt/Transforms/Passes.td and docs/training.md.
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Transforms/Autodiff.h"
#include "bt/Transforms/Decompose.h"
#include "bt/Transforms/EliminateDeadPrefill.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace bt {
#define GEN_PASS_DEF_BTGENERATETRAINSTEP
#include "bt/Transforms/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

constexpr StringLiteral kForward = "eval_loss";
constexpr StringLiteral kTrainStep = "train_step";
constexpr StringLiteral kApplyGradients = "apply_gradients";

/// The gradient of `loss` with respect to every parameter `fn` (at layer
/// level) reads with `bt.param_ref`, by official name. The backward code is
/// inserted before `fn`'s terminator.
FailureOr<llvm::StringMap<Value>> computeGradients(func::FuncOp fn,
                                                   Value loss) {
  FailureOr<SmallVector<ParamGradient>> grads = buildParamGradients(fn, loss);
  if (failed(grads))
    return failure();
  llvm::StringMap<Value> out;
  for (ParamGradient &g : *grads)
    out[g.name] = g.grad;
  return out;
}

/// Hyper-parameters of the step (the pass options).
struct StepOptions {
  double beta1, beta2, eps, weightDecay, maxGradNorm;
  double cosMinRatio, warmupMinRatio, initialRatio;
};

class Builder {
public:
  Builder(ModuleOp module, func::FuncOp forward, unsigned lossIndex,
          const StepOptions &opts)
      : module(module), forward(forward), lossIndex(lossIndex), opts(opts),
        b(module.getContext()) {}

  /// The parameters the loss reads, in declaration order.
  LogicalResult collectParams();
  LogicalResult buildApplyGradients();
  LogicalResult buildTrainStep();

private:
  /// An argument or result of an entry point.
  struct Named {
    Type type;
    std::string name;
    DictionaryAttr attrs = {}; // copied (the batch and loss of eval_loss)
    bool inout = false;
  };

  RankedTensorType scalar(Type t) { return RankedTensorType::get({}, t); }
  Location loc(StringRef name) { return NameLoc::get(b.getStringAttr(name)); }

  /// `(step, peak_lr, warmup_steps, total_steps)`.
  SmallVector<Named> scheduleArgs() {
    Type i64 = b.getI64Type(), f32 = b.getF32Type();
    return {{scalar(i64), "step"},
            {scalar(f32), "peak_lr"},
            {scalar(i64), "warmup_steps"},
            {scalar(i64), "total_steps"}};
  }
  /// `param.*`, `adam_m.*`, `adam_v.*` (in-out).
  SmallVector<Named> stateArgs() {
    SmallVector<Named> out;
    for (StringRef prefix : {"param.", "adam_m.", "adam_v."})
      for (ParamOp p : params)
        out.push_back({RankedTensorType::get(p.getTensorType().getShape(),
                                             b.getF32Type()),
                       (prefix + p.getSymName()).str(), {}, /*inout=*/true});
    return out;
  }

  func::FuncOp beginFunc(StringRef name, ArrayRef<Named> args,
                         ArrayRef<Named> results);

  /// The optimizer step on `grads` (one per parameter). `state` holds the
  /// param, m and v arguments (3 · #params); returns grad_norm, lr and the
  /// updated param, m, v values (in `state` order).
  SmallVector<Value> buildStep(ArrayRef<Value> grads, ValueRange schedule,
                               ValueRange state);

  ModuleOp module;
  func::FuncOp forward;
  unsigned lossIndex;
  StepOptions opts;
  OpBuilder b;
  SmallVector<ParamOp> params;
};

func::FuncOp Builder::beginFunc(StringRef name, ArrayRef<Named> args,
                                ArrayRef<Named> results) {
  SmallVector<Type> argTypes, resultTypes;
  for (const Named &a : args)
    argTypes.push_back(a.type);
  for (const Named &r : results)
    resultTypes.push_back(r.type);
  b.setInsertionPointToEnd(module.getBody());
  auto fn = b.create<func::FuncOp>(loc(name), name,
                                   b.getFunctionType(argTypes, resultTypes));
  auto setAttrs = [&](const Named &n, auto setAttr) {
    if (n.attrs)
      for (NamedAttribute a : n.attrs)
        setAttr(a.getName(), a.getValue());
    setAttr(b.getStringAttr(bt::BTDialect::getNameAttrName()), b.getStringAttr(n.name));
  };
  for (auto [i, a] : llvm::enumerate(args)) {
    setAttrs(a, [&](StringAttr k, Attribute v) { fn.setArgAttr(i, k, v); });
    if (a.inout)
      fn.setArgAttr(i, bt::BTDialect::getInOutAttrName(), b.getUnitAttr());
  }
  for (auto [i, r] : llvm::enumerate(results)) {
    setAttrs(r, [&](StringAttr k, Attribute v) { fn.setResultAttr(i, k, v); });
    if (r.inout)
      fn.setResultAttr(i, bt::BTDialect::getInOutArgAttrName(), b.getStringAttr(r.name));
  }
  b.setInsertionPointToStart(fn.addEntryBlock());
  return fn;
}

LogicalResult Builder::collectParams() {
  // Decompose a copy of the forward and read the parameters it references.
  auto probe = cast<func::FuncOp>(forward->clone());
  probe.setName("__bt_train_step_probe");
  probe.setPrivate();
  module.push_back(probe);
  LogicalResult decomposed = decomposeModelOps(probe);
  llvm::StringSet<> used;
  probe.walk([&](ParamRefOp ref) { used.insert(ref.getName()); });
  probe.erase();
  if (failed(decomposed))
    return failure();
  for (ParamOp p : module.getOps<ParamOp>())
    if (used.contains(p.getSymName()))
      params.push_back(p);
  if (params.empty())
    return forward.emitError()
           << "bt-generate-train-step: the loss reads no parameter";
  return success();
}

SmallVector<Value> Builder::buildStep(ArrayRef<Value> grads,
                                      ValueRange schedule, ValueRange state) {
  Type f32 = scalar(b.getF32Type());
  Location l = loc("optimizer");
  Value norm = b.create<GlobalNormOp>(loc("optimizer.grad_norm"), f32, grads);
  Value clip = b.create<ClipCoefficientOp>(
      loc("optimizer.clip_grad_norm"), f32, norm,
      b.getF64FloatAttr(opts.maxGradNorm), b.getF64FloatAttr(1e-6));
  Value step = schedule[0];
  Value lr = b.create<LRScheduleOp>(
      loc("optimizer.lr_schedule"), f32, step, schedule[1], schedule[2],
      schedule[3], b.getF64FloatAttr(opts.cosMinRatio),
      b.getF64FloatAttr(opts.warmupMinRatio),
      b.getF64FloatAttr(opts.initialRatio));
  size_t n = params.size();
  SmallVector<Value> out = {norm, lr};
  SmallVector<Value> newP, newM, newV;
  for (size_t i = 0; i < n; ++i) {
    Value p = state[i], m = state[n + i], v = state[2 * n + i];
    auto step1 = b.create<AdamWOp>(
        NameLoc::get(b.getStringAttr(params[i].getSymName()), l),
        TypeRange{p.getType(), p.getType(), p.getType()}, p, grads[i], m, v,
        lr, step, clip, b.getF64FloatAttr(opts.beta1),
        b.getF64FloatAttr(opts.beta2), b.getF64FloatAttr(opts.eps),
        b.getF64FloatAttr(opts.weightDecay));
    newP.push_back(step1.getNewParam());
    newM.push_back(step1.getNewExpAvg());
    newV.push_back(step1.getNewExpAvgSq());
  }
  llvm::append_range(out, newP);
  llvm::append_range(out, newM);
  llvm::append_range(out, newV);
  return out;
}

/// apply_gradients(grad.*, step, peak_lr, warmup_steps, total_steps,
///                 param.*, adam_m.*, adam_v.*) -> (grad_norm, lr, state...)
LogicalResult Builder::buildApplyGradients() {
  SmallVector<Named> args;
  for (ParamOp p : params)
    args.push_back({RankedTensorType::get(p.getTensorType().getShape(),
                                          b.getF32Type()),
                    ("grad." + p.getSymName()).str()});
  llvm::append_range(args, scheduleArgs());
  SmallVector<Named> state = stateArgs();
  llvm::append_range(args, state);
  Type f32 = scalar(b.getF32Type());
  SmallVector<Named> results = {{f32, "grad_norm"}, {f32, "lr"}};
  llvm::append_range(results, state);
  func::FuncOp fn = beginFunc(kApplyGradients, args, results);
  size_t n = params.size();
  SmallVector<Value> grads(fn.getArguments().take_front(n));
  SmallVector<Value> out = buildStep(grads, fn.getArguments().slice(n, 4),
                                     fn.getArguments().drop_front(n + 4));
  b.create<func::ReturnOp>(loc("return"), out);
  return success();
}

/// train_step(batch..., step, peak_lr, warmup_steps, total_steps,
///            param.*, adam_m.*, adam_v.*) -> (loss, grad_norm, lr, state...)
LogicalResult Builder::buildTrainStep() {
  SmallVector<Named> args;
  unsigned numBatch = forward.getNumArguments();
  for (unsigned i = 0; i < numBatch; ++i) {
    DictionaryAttr attrs = forward.getArgAttrDict(i);
    auto name = attrs ? attrs.getAs<StringAttr>(bt::BTDialect::getNameAttrName()) : StringAttr();
    args.push_back({forward.getArgumentTypes()[i],
                    name ? name.str() : ("arg" + Twine(i)).str(), attrs});
  }
  llvm::append_range(args, scheduleArgs());
  SmallVector<Named> state = stateArgs();
  llvm::append_range(args, state);
  Type f32 = scalar(b.getF32Type());
  SmallVector<Named> results = {
      {forward.getResultTypes()[lossIndex], "loss",
       forward.getResultAttrDict(lossIndex)},
      {f32, "grad_norm"},
      {f32, "lr"}};
  llvm::append_range(results, state);
  func::FuncOp fn = beginFunc(kTrainStep, args, results);

  // The forward, at model level, on the batch arguments.
  IRMapping map;
  for (unsigned i = 0; i < numBatch; ++i)
    map.map(forward.getArgument(i), fn.getArgument(i));
  Operation *forwardReturn = forward.getBody().front().getTerminator();
  for (Operation &op : forward.getBody().front().without_terminator())
    b.clone(op, map);
  Value loss = map.lookup(forwardReturn->getOperand(lossIndex));
  // A placeholder terminator while the body is built; it returns the loss so
  // that the narrowing below keeps the forward alive.
  auto placeholder = b.create<func::ReturnOp>(loc("return"), ValueRange{loss});
  if (failed(decomposeModelOps(fn)))
    return failure();
  // Narrow the layer-level forward to what the loss reads
  // (bt-eliminate-dead-prefill's rewriting): the token decoder's last layer
  // computes its LayerNorm, MLP, attention output projection and final
  // LayerNorm only on the L_B positions P-1 .. P+L_B-2 that predict tokens,
  // not on the P-1 discarded prefix positions, so the reverse sweep does not
  // differentiate them either. The values it keeps are computed by the same
  // row-wise arithmetic as before.
  if (failed(eliminateDeadPrefill(fn)))
    return failure();
  loss = placeholder.getOperand(0);

  SmallVector<StringRef> names;
  for (ParamOp p : params)
    names.push_back(p.getSymName());
  FailureOr<llvm::StringMap<Value>> grads = computeGradients(fn, loss);
  if (failed(grads))
    return failure();

  // The weights are the in-out arguments from here on.
  size_t n = params.size();
  llvm::StringMap<Value> paramArg;
  for (size_t i = 0; i < n; ++i)
    paramArg[params[i].getSymName()] = fn.getArgument(numBatch + 4 + i);
  SmallVector<ParamRefOp> refs;
  fn.walk([&](ParamRefOp ref) { refs.push_back(ref); });
  for (ParamRefOp ref : refs) {
    Value arg = paramArg.lookup(ref.getName());
    if (!arg)
      return ref.emitOpError()
             << "bt-generate-train-step: the backward reads parameter @\""
             << ref.getName() << "\", which the forward does not";
    ref.getResult().replaceAllUsesWith(arg);
    ref.erase();
  }

  SmallVector<Value> gradValues;
  for (StringRef name : names) {
    Value g = grads->lookup(name);
    if (!g)
      return fn.emitError() << "bt-generate-train-step: no gradient for "
                               "parameter @\""
                            << name << "\"";
    gradValues.push_back(g);
  }
  b.setInsertionPoint(placeholder);
  SmallVector<Value> out = {loss};
  llvm::append_range(out, buildStep(gradValues, fn.getArguments().slice(numBatch, 4),
                                    fn.getArguments().drop_front(numBatch + 4)));
  b.create<func::ReturnOp>(loc("return"), out);
  placeholder.erase();
  return success();
}

struct GenerateTrainStepPass
    : public bt::impl::BTGenerateTrainStepBase<GenerateTrainStepPass> {
  using BTGenerateTrainStepBase::BTGenerateTrainStepBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    BTGenerateTrainStepBase::getDependentDialects(registry);
    registerAutodiffDialects(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(kForward);
    if (!forward || forward.isExternal()) {
      module.emitError() << "bt-generate-train-step: no function '" << kForward
                         << "' (the model-level forward with loss)";
      return signalPassFailure();
    }
    std::optional<unsigned> lossIndex;
    for (unsigned i = 0; i < forward.getNumResults(); ++i)
      if (auto n = forward.getResultAttrOfType<StringAttr>(i, bt::BTDialect::getNameAttrName());
          n && n.getValue() == "loss")
        lossIndex = i;
    if (!lossIndex) {
      forward.emitError() << "bt-generate-train-step: '" << kForward
                          << "' has no result named 'loss' (bt.name)";
      return signalPassFailure();
    }
    for (StringRef name : {kTrainStep, kApplyGradients}) {
      bool wanted = name == kTrainStep ? trainStep : applyGradients;
      if (Operation *existing = module.lookupSymbol(name); existing && wanted) {
        existing->emitError() << "bt-generate-train-step: the entry point '"
                              << name << "' is already defined";
        return signalPassFailure();
      }
    }
    StepOptions opts{beta1,       beta2,          eps,
                     weightDecay, maxGradNorm,    cosMinRatio,
                     warmupMinRatio, initialLRRatio};
    Builder builder(module, forward, *lossIndex, opts);
    if (failed(builder.collectParams()) ||
        (applyGradients && failed(builder.buildApplyGradients())) ||
        (trainStep && failed(builder.buildTrainStep())))
      return signalPassFailure();
  }
};

} // namespace
