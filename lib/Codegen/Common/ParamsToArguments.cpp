//===- ParamsToArguments.cpp - bt.param references → function arguments ---===//
//
// bt-params-to-arguments: every function that reads parameters (directly or
// through calls) gets one leading argument per parameter, in module
// declaration order; the order is recorded in `bt.params` (docs/abi.md).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/Passes.h"
#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"

namespace bt {
#define GEN_PASS_DEF_BTPARAMSTOARGUMENTS
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

/// Fails (with a located error) when an op other than bt.param_ref refers
/// to one of `params` by symbol. One walk over every symbol reference in the
/// module's symbol scope (nested symbol tables such as gpu.module are
/// separate scopes); a per-parameter SymbolTable::getSymbolUses would walk
/// the module once per parameter.
LogicalResult checkOnlyParamRefsUse(ModuleOp module, ArrayRef<ParamOp> params,
                                    const DenseMap<StringAttr, unsigned> &index) {
  WalkResult scan = module.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op != module.getOperation() && op->hasTrait<OpTrait::SymbolTable>())
      return WalkResult::skip();
    if (isa<ParamRefOp>(op))
      return WalkResult::advance();
    WalkResult found = op->getAttrDictionary().walk([&](SymbolRefAttr ref) {
      auto it = index.find(ref.getRootReference());
      if (it == index.end())
        return WalkResult::advance();
      ParamOp p = params[it->second];
      InFlightDiagnostic diag =
          op->emitOpError()
          << "uses parameter " << p.getSymNameAttr()
          << " by symbol; only bt.param_ref can be turned into an argument "
             "(run bt-decompose first)";
      diag.attachNote(p.getLoc()) << "parameter declared here";
      return WalkResult::interrupt();
    });
    return found.wasInterrupted() ? WalkResult::interrupt()
                                  : WalkResult::advance();
  });
  return failure(scan.wasInterrupted());
}

struct ParamsToArgumentsPass
    : public bt::impl::BTParamsToArgumentsBase<ParamsToArgumentsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();

    // Parameters in declaration order.
    SmallVector<ParamOp> params;
    DenseMap<StringAttr, unsigned> index;
    for (ParamOp p : module.getOps<ParamOp>()) {
      index[p.getSymNameAttr()] = params.size();
      params.push_back(p);
    }
    if (params.empty())
      return;

    // Only bt.param_ref may refer to a parameter from here on.
    if (failed(checkOnlyParamRefsUse(module, params, index)))
      return signalPassFailure();

    // Direct needs of every function.
    SymbolTable symbols(module);
    llvm::MapVector<func::FuncOp, llvm::BitVector> needs;
    for (func::FuncOp f : module.getOps<func::FuncOp>()) {
      llvm::BitVector bits(params.size());
      f.walk([&](ParamRefOp ref) {
        bits.set(index.lookup(ref.getNameAttr().getAttr()));
      });
      needs[f] = bits;
    }

    // Propagate through func.call to a fixpoint.
    bool failedCalls = false;
    bool changed = true;
    while (changed && !failedCalls) {
      changed = false;
      for (auto &[f, bits] : needs) {
        f.walk([&](Operation *op) {
          auto call = dyn_cast<CallOpInterface>(op);
          if (!call)
            return;
          auto sym = call.getCallableForCallee().dyn_cast<SymbolRefAttr>();
          if (!sym)
            return;
          auto callee = symbols.lookup<func::FuncOp>(sym.getLeafReference());
          if (!callee || !needs.count(callee))
            return;
          const llvm::BitVector &calleeBits = needs[callee];
          if (calleeBits.none())
            return;
          if (!isa<func::CallOp>(op)) {
            op->emitOpError() << "calls " << sym
                              << ", which reads parameters; only func.call "
                                 "can pass them on";
            failedCalls = true;
            return;
          }
          llvm::BitVector merged = bits;
          merged |= calleeBits;
          if (merged != bits) {
            bits = merged;
            changed = true;
          }
        });
      }
    }
    if (failedCalls)
      return signalPassFailure();

    // Add the leading arguments and replace the references.
    DenseMap<func::FuncOp, SmallVector<unsigned>> order;
    for (auto &[f, bits] : needs) {
      if (bits.none())
        continue;
      if (f.isExternal()) {
        f.emitOpError("is a declaration but needs parameters");
        return signalPassFailure();
      }
      SmallVector<unsigned> ids(bits.set_bits_begin(), bits.set_bits_end());
      SmallVector<unsigned> positions(ids.size(), 0);
      SmallVector<Type> types;
      SmallVector<DictionaryAttr> attrs;
      SmallVector<Location> locs;
      SmallVector<Attribute> names;
      for (unsigned id : ids) {
        ParamOp p = params[id];
        types.push_back(p.getType());
        NamedAttribute name(StringAttr::get(ctx, bt::BTDialect::getParamAttrName()),
                            StringAttr::get(ctx, p.getSymName()));
        attrs.push_back(DictionaryAttr::get(ctx, {name}));
        locs.push_back(p.getLoc());
        names.push_back(StringAttr::get(ctx, p.getSymName()));
      }
      f.insertArguments(positions, types, attrs, locs);
      f->setAttr(bt::BTDialect::ParamsAttrHelper::getNameStr(), ArrayAttr::get(ctx, names));
      DenseMap<unsigned, Value> argOf;
      for (auto [i, id] : llvm::enumerate(ids))
        argOf[id] = f.getArgument(i);
      SmallVector<ParamRefOp> refs;
      f.walk([&](ParamRefOp ref) { refs.push_back(ref); });
      for (ParamRefOp ref : refs) {
        ref.getResult().replaceAllUsesWith(
            argOf.lookup(index.lookup(ref.getNameAttr().getAttr())));
        ref.erase();
      }
      order[f] = ids;
    }

    // Pass the parameters on at call sites.
    for (auto &[f, bits] : needs) {
      DenseMap<unsigned, Value> argOf;
      if (auto it = order.find(f); it != order.end())
        for (auto [i, id] : llvm::enumerate(it->second))
          argOf[id] = f.getArgument(i);
      f.walk([&](func::CallOp call) {
        auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
        if (!callee)
          return;
        auto it = order.find(callee);
        if (it == order.end())
          return;
        SmallVector<Value> extra;
        for (unsigned id : it->second)
          extra.push_back(argOf.lookup(id));
        call->insertOperands(0, extra);
      });
    }

    for (ParamOp p : params)
      p.erase();
  }
};

} // namespace
