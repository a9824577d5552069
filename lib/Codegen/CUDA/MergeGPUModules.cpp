//===- MergeGPUModules.cpp - all kernels into one gpu.module --------------===//
//
// bt-merge-gpu-modules: gpu-kernel-outlining puts every kernel into a
// gpu.module of its own. The CUDA artifact carries one PTX module that the
// runtime loads once (docs/abi.md), so this pass moves every symbol of every
// gpu.module into one module and retargets the gpu.launch_func ops.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace bt {
#define GEN_PASS_DEF_BTMERGEGPUMODULES
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

struct MergeGPUModulesPass
    : public bt::impl::BTMergeGPUModulesBase<MergeGPUModulesPass> {
  using BTMergeGPUModulesBase::BTMergeGPUModulesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    std::string name = moduleName;
    SmallVector<gpu::GPUModuleOp> sources;
    for (auto m : module.getOps<gpu::GPUModuleOp>())
      sources.push_back(m);
    if (sources.empty())
      return;
    if (sources.size() == 1 && sources[0].getName() == name)
      return;
    if (Operation *clash = module.lookupSymbol(name)) {
      if (!llvm::is_contained(sources, clash)) {
        clash->emitOpError() << "uses the name '" << name
                             << "' of the merged gpu.module";
        return signalPassFailure();
      }
    }
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto merged = b.create<gpu::GPUModuleOp>(module.getLoc(), "bt_merged_tmp");
    if (ArrayAttr targets = sources[0].getTargetsAttr())
      merged.setTargetsAttr(targets);
    SymbolTable mergedSymbols(merged);
    // Old kernel reference → new one.
    DenseMap<Attribute, SymbolRefAttr> remap;
    for (gpu::GPUModuleOp src : sources) {
      if (src.getTargetsAttr() != merged.getTargetsAttr()) {
        src.emitOpError("has other targets than the first gpu.module; "
                        "bt-merge-gpu-modules merges modules of one target");
        return signalPassFailure();
      }
      SmallVector<Operation *> ops;
      for (Operation &op : src.getBody()->without_terminator()) {
        if (!isa<SymbolOpInterface>(op)) {
          op.emitOpError("is not a symbol; cannot merge it into one gpu.module");
          return signalPassFailure();
        }
        ops.push_back(&op);
      }
      for (Operation *op : ops) {
        auto sym = cast<SymbolOpInterface>(op);
        StringAttr oldName = sym.getNameAttr();
        StringAttr newName = oldName;
        if (Operation *existing = mergedSymbols.lookup(oldName)) {
          // The same definition copied into several modules by the outliner
          // (e.g. a constant memref.global): keep one.
          if (!isa<FunctionOpInterface>(op) &&
              OperationEquivalence::isEquivalentTo(
                  op, existing, OperationEquivalence::Flags::IgnoreLocations)) {
            op->erase();
            continue;
          }
          // A clash: rename the symbol and its uses in its module first.
          unsigned suffix = 0;
          do {
            newName = StringAttr::get(
                ctx, oldName.getValue() + "_" + Twine(suffix++));
          } while (mergedSymbols.lookup(newName) ||
                   SymbolTable::lookupSymbolIn(src, newName));
          if (failed(SymbolTable::replaceAllSymbolUses(op, newName, src)))
            return signalPassFailure();
          SymbolTable::setSymbolName(op, newName);
        }
        op->moveBefore(merged.getBody()->getTerminator());
        mergedSymbols.insert(op);
        if (isa<FunctionOpInterface>(op))
          remap[SymbolRefAttr::get(src.getNameAttr(),
                                   {FlatSymbolRefAttr::get(oldName)})] =
              SymbolRefAttr::get(StringAttr::get(ctx, name),
                                 {FlatSymbolRefAttr::get(newName)});
      }
    }
    for (gpu::GPUModuleOp src : sources)
      src.erase();
    SymbolTable::setSymbolName(merged, name);
    WalkResult result = module.walk([&](gpu::LaunchFuncOp launch) {
      auto it = remap.find(launch.getKernel());
      if (it == remap.end()) {
        launch.emitOpError("launches a kernel that is not in any gpu.module");
        return WalkResult::interrupt();
      }
      launch.setKernelAttr(it->second);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
