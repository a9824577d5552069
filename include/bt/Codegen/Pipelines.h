//===- Pipelines.h - bt code generation pipelines ---------------*- C++ -*-===//
//
// `bt-cpu-pipeline`: layer-level bt IR → LLVM dialect with the kernel ABI of
// docs/abi.md. The C++ entry points that run it and turn its result into a
// shared object are in CPUCodegen.h.
// `bt-cuda-pipeline`: the same layer-level IR → host code calling the
// runtime's GPU ABI + PTX kernels (CUDACodegen.h, docs/codegen-cuda.md).
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_PIPELINES_H
#define BT_CODEGEN_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace bt {

/// Options of `bt-cpu-pipeline`.
struct CPUPipelineOptions : public mlir::PassPipelineOptions<CPUPipelineOptions> {
  Option<bool> blas{*this, "blas",
                    llvm::cl::desc("Turn f32 GEMMs into cblas_sgemm calls "
                                   "(bt-gemm-to-blas); loops otherwise"),
                    llvm::cl::init(true)};
  Option<int64_t> blasMinMNK{
      *this, "blas-min-mnk",
      llvm::cl::desc("Static GEMMs with M*N*K below this stay loops"),
      llvm::cl::init(4096)};
  Option<bool> fuseLocalAttention{
      *this, "fuse-local-attention",
      llvm::cl::desc("Fuse split_qkv -> rotary -> local_attention into "
                     "bt.fused_local_attention (bt-fuse-local-attention), "
                     "lowered to one kernel per block and head"),
      llvm::cl::init(true)};
  Option<bool> fuse{*this, "fuse-elementwise",
                    llvm::cl::desc("Run bt-fuse-elementwise"),
                    llvm::cl::init(true)};
  Option<bool> entryWrappers{
      *this, "entry-wrappers",
      llvm::cl::desc("Emit bt_entry_<name> and bt_kernel_abi_version "
                     "(bt-emit-entry-wrappers)"),
      llvm::cl::init(true)};
  Option<bool> internalize{
      *this, "internalize",
      llvm::cl::desc("Give every function but the ABI entry points internal "
                     "linkage (off to call functions by name, e.g. from "
                     "mlir-cpu-runner)"),
      llvm::cl::init(true)};
};

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

/// Registers `bt-cuda-pipeline` with the global pass registry (for bt-opt).
void registerCUDAPipeline();

/// Registers what the CUDA pipeline needs on top of
/// registerCPUCodegenDialects: the GPU and NVVM dialects, the NVVM target
/// attribute model and the GPU/NVVM → LLVM IR translations
/// (gpu-module-to-binary).
void registerCUDACodegenDialects(mlir::DialectRegistry &registry);

/// Registers the external interface models the CUDA pipeline needs on
/// upstream ops: memory effects (read + write) of gpu.barrier, which the
/// buffer deallocation pipeline meets inside the attention kernels. Part of
/// registerCUDACodegenDialects; bt-opt calls it next to its own
/// registrations.
void registerCUDACodegenInterfaceModels(mlir::DialectRegistry &registry);

/// Appends the passes of `bt-cpu-pipeline` to `pm` (which runs on a
/// builtin.module). The pass list is documented in docs/codegen.md.
void buildCPUPipeline(mlir::OpPassManager &pm, const CPUPipelineOptions &options);

/// Registers `bt-cpu-pipeline` with the global pass registry (for bt-opt).
void registerCPUPipeline();

/// Registers the dialects and the external interface models (bufferization,
/// deallocation, subset insertion, LLVM IR translation) that the CPU pipeline
/// and compileToSharedObject need.
void registerCPUCodegenDialects(mlir::DialectRegistry &registry);

/// Registers the external interface models of bt ops that code generation
/// needs: the bufferization of `bt.sample` into a call of the runtime's
/// sampler. Part of registerCPUCodegenDialects; tools that register all
/// upstream dialects and extensions themselves (bt-opt) call this one.
void registerBTCodegenInterfaceModels(mlir::DialectRegistry &registry);

} // namespace bt

#endif // BT_CODEGEN_PIPELINES_H
