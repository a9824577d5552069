//===- GPUUtils.h - helpers shared by the CUDA lowerings ---------*- C++ -*-===//
//
// Small queries shared by the passes of bt-cuda-pipeline that tell host code
// from kernel code (bt-gpu-device-allocs, bt-gpu-host-accesses,
// bt-linalg-to-gpu). Internal to lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_CODEGEN_GPUUTILS_H
#define BT_LIB_CODEGEN_GPUUTILS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Operation.h"

namespace bt::codegen {

/// Whether `op` is kernel code: inside a gpu.launch body or a gpu.module
/// (which also holds every gpu.func).
inline bool insideKernel(mlir::Operation *op) {
  return op->getParentOfType<mlir::gpu::LaunchOp>() ||
         op->getParentOfType<mlir::gpu::GPUModuleOp>();
}

} // namespace bt::codegen

#endif // BT_LIB_CODEGEN_GPUUTILS_H
