//===- CUDACodegen.h - layer-level bt IR → host code + PTX ------*- C++ -*-===//
//
// The C++ API of the CUDA back end (docs/design.md §2, docs/codegen-cuda.md,
// lib/Codegen/CUDA): `bt-cuda-pipeline` and its options.
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

#ifndef BT_CODEGEN_CUDA_CUDACODEGEN_H
#define BT_CODEGEN_CUDA_CUDACODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace bt {

class CodegenTarget;

/// The CUDA target's hooks of the target-neutral lowerings
/// (CodegenTarget.h): bt.attention, bt.local_attention,
/// bt.fused_local_attention and bt.kv_attend become the dedicated attention
/// kernels (docs/codegen-cuda.md, "Attention kernels") where they handle
/// the shapes (lib/Codegen/CUDA/CUDATarget.cpp).
const CodegenTarget &getCUDACodegenTarget();

/// Registers the CUDA target under the name `cuda` for the `target` option
/// of bt-lower-to-linalg and bt-lower-kv-caches (bt-opt).
void registerCUDACodegenTarget();

/// Options of `bt-cuda-pipeline` (docs/codegen-cuda.md).
struct CUDAPipelineOptions
    : public mlir::PassPipelineOptions<CUDAPipelineOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("NVVM target chip (nvvm-attach-target)"),
                           llvm::cl::init("sm_90")};
  Option<std::string> features{
      *this, "features",
      llvm::cl::desc("NVVM target features, e.g. +ptx80 (LLVM 19 NVPTX "
                     "supports up to PTX 8.5)"),
      llvm::cl::init("+ptx80")};
  Option<unsigned> optLevel{*this, "opt-level",
                            llvm::cl::desc("NVPTX optimization level 0-3"),
                            llvm::cl::init(3)};
  Option<std::string> cudaPath{
      *this, "cuda-path",
      llvm::cl::desc("CUDA toolkit directory: its nvvm/libdevice resolves "
                     "the math functions (__nv_expf, __nv_erff, ...); empty: "
                     "the build's (defaultCUDAPath())"),
      llvm::cl::init("")};
  Option<bool> binary{
      *this, "binary",
      llvm::cl::desc("Compile the kernels to PTX (gpu-module-to-binary "
                     "format=isa, a gpu.binary); false: keep the NVVM-dialect "
                     "gpu.module (for inspection and lit tests)"),
      llvm::cl::init(true)};
  Option<std::string> dtype{
      *this, "dtype",
      llvm::cl::desc("f32 (default): everything in f32; bf16: the weights "
                     "used only as GEMM operands in bf16 and their GEMMs with "
                     "bf16 inputs and f32 accumulation (bt-bf16-gemms, "
                     "bt_gpu_gemm_bf16); activations and KV caches stay f32 "
                     "(docs/codegen-cuda.md, \"bf16\")"),
      llvm::cl::init("f32")};
  Option<bool> blas{*this, "blas",
                    llvm::cl::desc("f32 GEMMs call bt_gpu_sgemm (cuBLAS in the "
                                   "runtime); kernels otherwise"),
                    llvm::cl::init(true)};
  Option<int64_t> blasMinMNK{
      *this, "blas-min-mnk",
      llvm::cl::desc("Static GEMMs with M*N*K below this stay kernels"),
      llvm::cl::init(0)};
  Option<bool> fuseLocalAttention{
      *this, "fuse-local-attention",
      llvm::cl::desc("Run bt-fuse-local-attention (the token decoder's "
                     "split_qkv -> rotary -> local_attention as one op)"),
      llvm::cl::init(true)};
  Option<bool> fuse{*this, "fuse-elementwise",
                    llvm::cl::desc("Run bt-fuse-elementwise"),
                    llvm::cl::init(true)};
  Option<bool> deviceCacheLength{
      *this, "device-cache-length",
      llvm::cl::desc("Keep the KV caches' lengths in device memory "
                     "(bt-lower-kv-caches device-cache-length, "
                     "bt-gpu-sink-device-scalars): no host code of an entry "
                     "point reads the length, each returns it updated in "
                     "place"),
      llvm::cl::init(true)};
  Option<int64_t> blockSize{*this, "block-size",
                            llvm::cl::desc("Threads per block of the "
                                           "bt-linalg-to-gpu kernels"),
                            llvm::cl::init(256)};
  Option<bool> entryWrappers{
      *this, "entry-wrappers",
      llvm::cl::desc("Emit bt_entry_<name> and bt_kernel_abi_version"),
      llvm::cl::init(true)};
  Option<bool> internalize{
      *this, "internalize",
      llvm::cl::desc("Internal linkage for every host function but the ABI "
                     "entry points"),
      llvm::cl::init(true)};
};

/// The CUDA toolkit directory configured at build time (CMake BT_CUDA_PATH,
/// default /usr/local/cuda), used when `cuda-path` is empty.
std::string defaultCUDAPath();

/// Appends the passes of `bt-cuda-pipeline` to `pm` (on a builtin.module):
/// layer-level bt IR → host code in the LLVM dialect calling the runtime's
/// GPU ABI (docs/abi.md) + the kernels as one gpu.binary (PTX) or, with
/// `binary=false`, one NVVM-dialect gpu.module. The pass list is in
/// docs/codegen-cuda.md.
void buildCUDAPipeline(mlir::OpPassManager &pm,
                       const CUDAPipelineOptions &options);

/// The two halves of `bt-cuda-pipeline`: layer-level bt IR → linalg on
/// tensors with the CUDA target's attention kernels, where the entry points
/// have their final signatures, and from there → host code + kernels.
void buildCUDALayerToLinalgPipeline(mlir::OpPassManager &pm,
                                    const CUDAPipelineOptions &options);
void buildCUDALinalgToLLVMPipeline(mlir::OpPassManager &pm,
                                   const CUDAPipelineOptions &options);

/// Registers `bt-cuda-pipeline` with the global pass registry (for bt-opt).
void registerCUDAPipeline();

/// Registers what the CUDA pipeline and the compilation of its host code
/// need: the dialects of the target-neutral stages (registerCodegenDialects),
/// the GPU and NVVM dialects, the NVVM target attribute model, the interface
/// models of registerCUDACodegenInterfaceModels and the builtin / LLVM / GPU /
/// NVVM → LLVM IR translations (gpu-module-to-binary).
void registerCUDACodegenDialects(mlir::DialectRegistry &registry);

/// Registers the external interface models the CUDA pipeline needs on
/// upstream ops: memory effects (read + write) of gpu.barrier, which the
/// buffer deallocation pipeline meets inside the attention kernels. Part of
/// registerCUDACodegenDialects; bt-opt calls it next to its own
/// registrations.
void registerCUDACodegenInterfaceModels(mlir::DialectRegistry &registry);

/// Fails with a diagnostic at `anchor` when the CUDA toolkit `cudaPath`
/// (empty: defaultCUDAPath()) has no `nvvm/libdevice/libdevice.10.bc`
/// (the kernels' math functions would stay unresolved).
mlir::LogicalResult verifyCUDAToolkit(mlir::Operation *anchor,
                                      llvm::StringRef cudaPath);

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
/// `options.binary`, gpu-module-to-binary (the PTX). With `cacheDir`, the
/// PTX of an identical gpu.module (same compiler build, same libdevice) is
/// taken from the compile cache (bt/Codegen/CompileCache.h) and new PTX is
/// stored there; a cache that cannot be used is a warning, not an error.
mlir::LogicalResult
finishCUDAKernels(mlir::ModuleOp module, const CUDAPipelineOptions &options,
                  mlir::OwningOpRef<mlir::ModuleOp> *emulatorKernels,
                  llvm::StringRef cacheDir = {});

/// The kernels of `module` (after bt-cuda-pipeline with binary=false: host
/// code + one NVVM gpu.module, which is left unchanged) as a host module for
/// the CUDA emulator: a copy of the gpu.module through `bt-nvvm-to-host`,
/// its body moved into a new builtin.module, ready for
/// compileToSharedObject (runtime/device/cuda_emu/bt_emu_abi.h is the ABI of
/// the result). Fails with a diagnostic when there is not exactly one
/// gpu.module or the pass fails (an op it cannot lower, named).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildEmulatorKernels(mlir::ModuleOp module);

namespace codegen {
class CompileCacheKey;
} // namespace codegen

/// Adds to `key` what the PTX depends on besides the gpu.module (whose
/// #nvvm.target names the chip, features and optimization level): the bytes
/// of the libdevice that gpu-module-to-binary links, from `options`' CUDA
/// toolkit (cudaPath; empty: defaultCUDAPath()). Errors: libdevice cannot
/// be read (named).
llvm::Error addPTXKeyFields(codegen::CompileCacheKey &key,
                            const CUDAPipelineOptions &options);

/// The PTX of the module's only `gpu.binary` (an `isa` object), which is
/// erased so that `module` is plain host code for compileToSharedObject.
/// Fails with a diagnostic when there is not exactly one gpu.binary with one
/// PTX object, or when GPU ops remain in the host code.
mlir::FailureOr<std::string> takePTX(mlir::ModuleOp module);

} // namespace bt

#endif // BT_CODEGEN_CUDA_CUDACODEGEN_H
