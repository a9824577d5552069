//===- GPUSinkDeviceScalars.cpp - device scalars read in their kernels ----===//
//
// bt-gpu-sink-device-scalars: the host code's loads of a rank-0 argument in
// device memory (a KV cache's `cache_length` under bt-lower-kv-caches
// `device-cache-length`), and the index arithmetic and views computed from
// them, are cloned into the kernels that use them, so that the host code
// no longer reads device memory (which bt-gpu-host-accesses would turn into
// a synchronous copy, and which a CUDA graph could not replay). See the
// pass description in include/bt/Codegen/CUDA/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CUDA/Passes.h"
#include "bt/Codegen/HostScalars.h"

#include "GPUUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace bt {
#define GEN_PASS_DEF_BTGPUSINKDEVICESCALARS
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;
using bt::codegen::insideKernel;

namespace {

/// The op of `fn`'s entry block that holds `op` (or `op` itself).
Operation *topLevel(func::FuncOp fn, Operation *op) {
  Block *entry = &fn.getBody().front();
  while (op && op->getBlock() != entry)
    op = op->getParentOp();
  return op;
}

/// The device scalars of one function: the host loads of its rank-0 device
/// arguments and the side-effect-free ops computed from them, and for each
/// such argument the top-level ops (of the entry block) that may write it:
/// those holding a use other than a load, in host code or in a kernel.
struct DeviceScalars {
  /// In program order.
  llvm::SetVector<Operation *> ops;
  /// Argument → the top-level ops that may write it.
  llvm::DenseMap<Value, SmallVector<Operation *>> writers;

  explicit DeviceScalars(func::FuncOp fn) {
    for (BlockArgument arg : fn.getArguments()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type || type.getRank() != 0 ||
          bt::isHostScalarArg(fn, arg.getArgNumber()))
        continue;
      SmallVector<Operation *> &argWriters = writers[arg];
      for (Operation *user : arg.getUsers()) {
        // A load only reads (in a kernel too); any other use (a store, a
        // view, a copy, a call) may write the argument.
        if (isa<memref::LoadOp>(user)) {
          if (!insideKernel(user))
            ops.insert(user);
          continue;
        }
        argWriters.push_back(topLevel(fn, user));
      }
    }
    // The forward closure over host ops without memory effects or regions
    // (index arithmetic, casts, views), in program order.
    fn.walk([&](Operation *op) {
      if (ops.contains(op) || insideKernel(op) || op->getNumRegions() != 0 ||
          op->getNumResults() == 0 || !isMemoryEffectFree(op))
        return;
      if (llvm::any_of(op->getOperands(), [&](Value v) {
            Operation *def = v.getDefiningOp();
            return def && ops.contains(def);
          }))
        ops.insert(op);
    });
  }

  /// The loads `op` depends on (within ops).
  void loadsOf(Operation *op, llvm::SetVector<Operation *> &loads) const {
    if (isa<memref::LoadOp>(op)) {
      loads.insert(op);
      return;
    }
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && ops.contains(def))
        loadsOf(def, loads);
  }

  /// Whether `op`'s value may be recomputed in `launch`: no write of a
  /// loaded argument from the load up to and including the launch.
  bool sinkable(func::FuncOp fn, Operation *op, gpu::LaunchOp launch) const {
    llvm::SetVector<Operation *> loads;
    loadsOf(op, loads);
    Operation *at = topLevel(fn, launch);
    for (Operation *load : loads) {
      Operation *from = topLevel(fn, load);
      for (Operation *w :
           writers.lookup(cast<memref::LoadOp>(load).getMemRef()))
        if (w == at || w == from ||
            (from->isBeforeInBlock(w) && w->isBeforeInBlock(at)))
          return false;
    }
    return true;
  }

  /// Clones `op` and the ops it depends on (within ops) at `b`'s insertion
  /// point (the start of a launch body), once each (`map`).
  void cloneInto(OpBuilder &b, Operation *op, IRMapping &map) const {
    if (map.contains(op->getResult(0)))
      return;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && ops.contains(def))
        cloneInto(b, def, map);
    b.clone(*op, map);
  }
};

struct GPUSinkDeviceScalarsPass
    : public bt::impl::BTGPUSinkDeviceScalarsBase<GPUSinkDeviceScalarsPass> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      DeviceScalars scalars(fn);
      if (scalars.ops.empty())
        continue;
      fn.walk([&](gpu::LaunchOp launch) { sink(fn, scalars, launch); });
      // The host copies left without users (bt-gpu-host-accesses would
      // copy their loads to the host).
      for (Operation *op : llvm::reverse(scalars.ops))
        if (op->use_empty())
          op->erase();
    }
  }

  static void sink(func::FuncOp fn, const DeviceScalars &scalars,
                   gpu::LaunchOp launch) {
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(launch.getBody(), captured);
    Block &body = launch.getBody().front();
    OpBuilder b = OpBuilder::atBlockBegin(&body);
    IRMapping map;
    for (Value v : captured) {
      Operation *def = v.getDefiningOp();
      if (!def || !scalars.ops.contains(def) ||
          !scalars.sinkable(fn, def, launch))
        continue;
      scalars.cloneInto(b, def, map);
      replaceAllUsesInRegionWith(v, map.lookup(v), launch.getBody());
    }
  }
};

} // namespace
