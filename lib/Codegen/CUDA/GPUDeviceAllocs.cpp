//===- GPUDeviceAllocs.cpp - host allocations → device allocations --------===//
//
// bt-gpu-device-allocs: in the CUDA pipeline every buffer of the bufferized
// program is device memory. Before the deallocation ops are lowered, every
// allocation is a data buffer, so each becomes a gpu.alloc (bt_gpu_alloc
// in the runtime, docs/abi.md).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CUDA/Passes.h"

#include "GPUUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace bt {
#define GEN_PASS_DEF_BTGPUDEVICEALLOCS
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;
using bt::codegen::insideKernel;

namespace {

/// `gpu.alloc` of `type` (identity layout) with the dynamic sizes of `like`
/// or the given ones.
Value deviceAlloc(OpBuilder &b, Location loc, MemRefType type,
                  ValueRange dynamicSizes) {
  return b
      .create<gpu::AllocOp>(loc, type, /*asyncToken=*/Type(),
                            /*asyncDependencies=*/ValueRange{}, dynamicSizes,
                            /*symbolOperands=*/ValueRange{},
                            /*hostShared=*/false)
      .getMemref();
}

/// A device buffer of `type` holding a copy of `src`'s shape: a row-major
/// allocation (cast to `type` when its layout is dynamic), or, for a static
/// strided layout, a 1-D allocation covering offset + extent viewed with
/// that layout.
FailureOr<Value> allocLike(OpBuilder &b, Location loc, Value src,
                           MemRefType type) {
  SmallVector<Value> sizes;
  for (int64_t i = 0; i < type.getRank(); ++i)
    sizes.push_back(b.createOrFold<memref::DimOp>(loc, src, i));
  auto dense = MemRefType::get(type.getShape(), type.getElementType());
  SmallVector<Value> dyn;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      dyn.push_back(sizes[i]);
  if (type.getLayout().isIdentity())
    return deviceAlloc(b, loc, dense, dyn);
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(getStridesAndOffset(type, strides, offset)))
    return failure();
  bool dynamicLayout = ShapedType::isDynamic(offset) ||
                       llvm::any_of(strides, ShapedType::isDynamic);
  if (dynamicLayout) {
    if (!memref::CastOp::areCastCompatible(dense, type))
      return failure();
    Value d = deviceAlloc(b, loc, dense, dyn);
    return b.create<memref::CastOp>(loc, type, d).getResult();
  }
  // 1 + offset + Σ (size_i − 1) · stride_i elements.
  Value one = b.create<arith::ConstantIndexOp>(loc, 1);
  Value extent = b.create<arith::ConstantIndexOp>(loc, offset + 1);
  for (int64_t i = 0; i < type.getRank(); ++i) {
    Value st = b.create<arith::ConstantIndexOp>(loc, strides[i]);
    Value last = b.create<arith::SubIOp>(loc, sizes[i], one);
    extent = b.create<arith::AddIOp>(loc, extent,
                                     b.create<arith::MulIOp>(loc, last, st));
  }
  auto flat = MemRefType::get({ShapedType::kDynamic}, type.getElementType());
  Value d = deviceAlloc(b, loc, flat, extent);
  SmallVector<OpFoldResult> mixedSizes, mixedStrides;
  for (int64_t i = 0; i < type.getRank(); ++i) {
    mixedSizes.push_back(sizes[i]);
    mixedStrides.push_back(b.getIndexAttr(strides[i]));
  }
  return b
      .create<memref::ReinterpretCastOp>(loc, type, d, b.getIndexAttr(offset),
                                         mixedSizes, mixedStrides)
      .getResult();
}

struct GPUDeviceAllocsPass
    : public bt::impl::BTGPUDeviceAllocsBase<GPUDeviceAllocsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> work;
    WalkResult result = getOperation()->walk([&](Operation *op) {
      if (insideKernel(op))
        return WalkResult::advance();
      if (isa<memref::AllocOp, memref::DeallocOp, bufferization::CloneOp>(op)) {
        work.push_back(op);
      } else if (isa<memref::ReallocOp, memref::AllocaOp>(op)) {
        op->emitOpError("in host code of the CUDA target: buffers must be "
                        "device allocations (memref.alloc)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();

    for (Operation *op : work) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        MemRefType type = alloc.getType();
        if (!type.getLayout().isIdentity() || type.getMemorySpace()) {
          alloc.emitOpError("has a layout or memory space; device buffers "
                            "are plain row-major memrefs");
          return signalPassFailure();
        }
        Value d = deviceAlloc(b, loc, type, alloc.getDynamicSizes());
        alloc.replaceAllUsesWith(d);
        alloc.erase();
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        b.create<gpu::DeallocOp>(loc, /*asyncToken=*/Type(), ValueRange{},
                                 dealloc.getMemref());
        dealloc.erase();
      } else if (auto clone = dyn_cast<bufferization::CloneOp>(op)) {
        // A fresh device buffer and a copy (a kernel after
        // bt-strided-copies-to-linalg and bt-linalg-to-gpu).
        auto type = cast<MemRefType>(clone.getType());
        FailureOr<Value> buffer = allocLike(b, loc, clone.getInput(), type);
        if (failed(buffer)) {
          clone.emitOpError("clones a memref whose layout has no device "
                            "allocation form");
          return signalPassFailure();
        }
        b.create<memref::CopyOp>(loc, clone.getInput(), *buffer);
        Value result = *buffer;
        clone.replaceAllUsesWith(result);
        clone.erase();
      }
    }
  }
};

} // namespace
