//===- CUDACodegen.h - layer-level bt IR → host code + PTX ------*- C++ -*-===//
//
// The C++ API of the CUDA back end (DESIGN.md §2, docs/codegen-cuda.md):
//
//   bt::CUDAPipelineOptions popts;                      // bt-cuda-pipeline
//   if (failed(bt::runCUDAPipeline(module, popts))) ... // → LLVM + gpu.binary
//   mlir::FailureOr<std::string> ptx = bt::takePTX(module);  // host only left
//   llvm::Expected<std::string> so = bt::compileToSharedObject(module, {});
//
// The host shared object exports the same entry points as the CPU target
// (`bt_entry_<name>(void **argv)`, docs/abi.md) on device buffers and calls
// the runtime's GPU ABI (bt_gpu_launch, bt_gpu_alloc, bt_gpu_free,
// bt_gpu_sgemm, bt_gpu_memcpy_dtoh); the PTX module holds every kernel.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_CUDACODEGEN_H
#define BT_CODEGEN_CUDACODEGEN_H

#include "bt/Codegen/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace bt {

/// Runs `bt-cuda-pipeline` on `module` (layer-level bt IR → host code in the
/// LLVM dialect + one gpu.binary with the PTX of all kernels, or the NVVM
/// gpu.module with `binary=false`), honoring the MLIR PassManager
/// command-line options when the tool registered them. Registers the dialect
/// extensions it needs (registerCUDACodegenDialects). Fails with a
/// diagnostic when `<cuda-path>/nvvm/libdevice/libdevice.10.bc` does not
/// exist (the math functions would stay unresolved).
///
/// With `emulatorKernels`, also builds the kernels for the CUDA emulator
/// (docs/cuda-emulator.md): the pipeline runs without gpu-module-to-binary,
/// buildEmulatorKernels lowers the NVVM gpu.module for the host into
/// `*emulatorKernels`, and then the PTX is built as usual.
mlir::LogicalResult
runCUDAPipeline(mlir::ModuleOp module, const CUDAPipelineOptions &options = {},
                mlir::OwningOpRef<mlir::ModuleOp> *emulatorKernels = nullptr);

/// The last steps of runCUDAPipeline with `emulatorKernels` on a module
/// after bt-cuda-pipeline with binary=false (host code + the NVVM
/// gpu.module, which the caller may have replaced, e.g. by an edited copy
/// of `bt-run compile --emit nvvm`): the emulator's kernels
/// (buildEmulatorKernels; none when `emulatorKernels` is null), then, with
/// `options.binary`, gpu-module-to-binary (the PTX).
mlir::LogicalResult
finishCUDAKernels(mlir::ModuleOp module, const CUDAPipelineOptions &options,
                  mlir::OwningOpRef<mlir::ModuleOp> *emulatorKernels);

/// The kernels of `module` (after bt-cuda-pipeline with binary=false: host
/// code + one NVVM gpu.module, which is left unchanged) as a host module for
/// the CUDA emulator: a copy of the gpu.module through `bt-nvvm-to-host`,
/// its body moved into a new builtin.module, ready for
/// compileToSharedObject (runtime/device/cuda_emu/bt_emu_abi.h is the ABI of
/// the result). Fails with a diagnostic when there is not exactly one
/// gpu.module or the pass fails (an op it cannot lower, named).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildEmulatorKernels(mlir::ModuleOp module);

/// The PTX of the module's only `gpu.binary` (an `isa` object), which is
/// erased so that `module` is plain host code for compileToSharedObject.
/// Fails with a diagnostic when there is not exactly one gpu.binary with one
/// PTX object, or when GPU ops remain in the host code.
mlir::FailureOr<std::string> takePTX(mlir::ModuleOp module);

} // namespace bt

#endif // BT_CODEGEN_CUDACODEGEN_H
