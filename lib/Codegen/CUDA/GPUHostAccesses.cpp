//===- GPUHostAccesses.cpp - host accesses to device memory ---------------===//
//
// bt-gpu-host-accesses: after the deallocation ops are lowered, host code
// still touches memory in three ways: it frees buffers, it reads a few
// scalars that steer it (the `cache_length` of a KV cache, which sizes the
// views of the cache), and the lowered deallocation code keeps small
// pointer arrays in host memory. This pass sorts the accesses by where the
// buffer comes from: a `memref.alloc` / `memref.alloca` (only created by the
// deallocation lowering by now, bt-gpu-device-allocs having turned every
// data buffer into a gpu.alloc) is host memory, and so is an entry point's
// scalar argument passed by value (`bt.host_scalar`, HostScalars.h:
// `cache_length`, `sampler`); anything else (the other function arguments,
// gpu.alloc, views of them) is device memory.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CUDA/Passes.h"
#include "bt/Codegen/HostScalars.h"

#include "GPUUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace bt {
#define GEN_PASS_DEF_BTGPUHOSTACCESSES
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;
using bt::codegen::insideKernel;

namespace {

constexpr StringLiteral kMemcpyDtoH = "bt_gpu_memcpy_dtoh";

/// Whether `v` is host memory: a view of a memref.alloc / memref.alloca or
/// of a `bt.host_scalar` argument.
bool isHostMemory(Value v) {
  while (true) {
    if (auto view = v.getDefiningOp<ViewLikeOpInterface>()) {
      v = view.getViewSource();
      continue;
    }
    if (auto md = v.getDefiningOp<memref::ExtractStridedMetadataOp>()) {
      v = md.getSource();
      continue;
    }
    break;
  }
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto fn = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    return fn && arg.getOwner()->isEntryBlock() &&
           bt::isHostScalarArg(fn, arg.getArgNumber());
  }
  return v.getDefiningOp<memref::AllocOp>() ||
         v.getDefiningOp<memref::AllocaOp>();
}

int64_t byteWidth(Type t) {
  if (t.isIndex())
    return 8;
  if (t.isIntOrFloat())
    return (t.getIntOrFloatBitWidth() + 7) / 8;
  return 0;
}

struct GPUHostAccessesPass
    : public bt::impl::BTGPUHostAccessesBase<GPUHostAccessesPass> {
  func::FuncOp getOrDeclareCopy(ModuleOp module) {
    if (auto f = module.lookupSymbol<func::FuncOp>(kMemcpyDtoH))
      return f;
    MLIRContext *ctx = module.getContext();
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    // void bt_gpu_memcpy_dtoh(void *dst_host, const void *src_device,
    //                         int64_t bytes)
    auto f = b.create<func::FuncOp>(
        module.getLoc(), kMemcpyDtoH,
        b.getFunctionType({ptr, ptr, b.getI64Type()}, {}));
    f.setPrivate();
    return f;
  }

  /// `memref.load` of device memory → a host temporary (alloca at the
  /// function entry) filled by bt_gpu_memcpy_dtoh, then loaded.
  LogicalResult rewriteLoad(memref::LoadOp load, func::FuncOp copy) {
    Type elt = load.getType();
    int64_t bytes = byteWidth(elt);
    if (!bytes)
      return load.emitOpError("reads a ") << elt << " from device memory in "
                                                    "host code";
    auto fn = load->getParentOfType<FunctionOpInterface>();
    OpBuilder eb = OpBuilder::atBlockBegin(&fn.getFunctionBody().front());
    Location loc = load.getLoc();
    Value tmp = eb.create<memref::AllocaOp>(loc, MemRefType::get({}, elt));

    OpBuilder b(load);
    Type i64 = b.getI64Type();
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    auto md = b.create<memref::ExtractStridedMetadataOp>(loc, load.getMemRef());
    Value linear = md.getOffset();
    for (auto [idx, stride] : llvm::zip(load.getIndices(), md.getStrides()))
      linear = b.create<arith::AddIOp>(
          loc, linear, b.create<arith::MulIOp>(loc, idx, stride));
    Value width = b.create<arith::ConstantIndexOp>(loc, bytes);
    Value base = b.create<memref::ExtractAlignedPointerAsIndexOp>(
        loc, load.getMemRef());
    Value src = b.create<arith::AddIOp>(
        loc, base, b.create<arith::MulIOp>(loc, linear, width));
    Value dst = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, tmp);
    auto toPtr = [&](Value idx) -> Value {
      Value asInt = b.create<arith::IndexCastOp>(loc, i64, idx);
      return b.create<LLVM::IntToPtrOp>(loc, ptr, asInt);
    };
    Value n = b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(bytes));
    b.create<func::CallOp>(loc, copy, ValueRange{toPtr(dst), toPtr(src), n});
    Value v = b.create<memref::LoadOp>(loc, tmp);
    load.replaceAllUsesWith(v);
    load.erase();
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> work;
    WalkResult result = module.walk([&](Operation *op) {
      if (insideKernel(op) || !op->getParentOfType<FunctionOpInterface>())
        return WalkResult::advance();
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        if (!isHostMemory(load.getMemRef()))
          work.push_back(op);
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        if (!isHostMemory(dealloc.getMemref()))
          work.push_back(op);
      } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
        if (!isHostMemory(store.getMemRef())) {
          store.emitOpError("stores to device memory in host code (the CUDA "
                            "target computes every buffer in kernels)");
          return WalkResult::interrupt();
        }
      } else if (isa<memref::CopyOp>(op)) {
        op->emitOpError("in host code of the CUDA target (copies are "
                        "kernels: run bt-strided-copies-to-linalg"
                        "{contiguous} and bt-linalg-to-gpu first)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    func::FuncOp copy;
    for (Operation *op : work) {
      if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        OpBuilder b(op);
        b.create<gpu::DeallocOp>(op->getLoc(), /*asyncToken=*/Type(),
                                 ValueRange{}, dealloc.getMemref());
        op->erase();
        continue;
      }
      if (!copy)
        copy = getOrDeclareCopy(module);
      if (failed(rewriteLoad(cast<memref::LoadOp>(op), copy)))
        return signalPassFailure();
    }
  }
};

} // namespace
