//===- ExternSharedMemory.cpp - dynamic shared memory as CUDA declares it --===//
//
// bt-gpu-extern-shared-memory: convert-gpu-to-nvvm gives
// `gpu.dynamic_shared_memory` a zero-length *internal* global in address
// space 3, which NVPTX emits as `.shared .align 16 .b8 x[]` — a definition
// of zero bytes, so ptxas warns of a potential out-of-bounds access on every
// access to it. CUDA declares the dynamic shared memory as an external
// array (`extern __shared__ T x[]` → `.extern .shared .align A .b8 x[]`),
// sized by the launch; this pass makes the global that declaration.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace bt {
#define GEN_PASS_DEF_BTGPUEXTERNSHAREDMEMORY
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

struct ExternSharedMemoryPass
    : public bt::impl::BTGPUExternSharedMemoryBase<ExternSharedMemoryPass> {
  void runOnOperation() override {
    for (auto g : getOperation().getOps<LLVM::GlobalOp>()) {
      auto array = dyn_cast<LLVM::LLVMArrayType>(g.getGlobalType());
      if (g.getAddrSpace() != 3 || !array || array.getNumElements() != 0 ||
          g.getLinkage() == LLVM::Linkage::External)
        continue;
      if (g.getValueOrNull() || g.getInitializerBlock()) {
        g.emitOpError("is zero-length shared memory with an initializer");
        return signalPassFailure();
      }
      g.setLinkage(LLVM::Linkage::External);
      g.setDsoLocal(false);
    }
  }
};

} // namespace
