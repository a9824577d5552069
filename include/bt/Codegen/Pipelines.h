//===- Pipelines.h - bt code generation pipelines ---------------*- C++ -*-===//
//
// `bt-cpu-pipeline`: layer-level bt IR → LLVM dialect with the kernel ABI of
// docs/abi.md. The C++ entry points that run it and turn its result into a
// shared object are in CPUCodegen.h.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_PIPELINES_H
#define BT_CODEGEN_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

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
