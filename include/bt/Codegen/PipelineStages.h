//===- PipelineStages.h - stages shared by the bt pipelines -----*- C++ -*-===//
//
// The pass sequences that bt-cpu-pipeline (lib/Codegen/CPU/CPUPipeline.cpp)
// and bt-cuda-pipeline (lib/Codegen/CUDA/CUDAPipeline.cpp) have in common,
// so both lower the layer-level IR, bufferize and reach the LLVM dialect the
// same way (lib/Codegen/Common/PipelineStages.cpp). Each function appends
// passes to a pass manager on a builtin.module; the pass lists are
// documented in docs/codegen.md and docs/codegen-cuda.md. For the target
// pipelines, not for tools.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_PIPELINESTAGES_H
#define BT_CODEGEN_PIPELINESTAGES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <functional>

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace bt {
class CodegenTarget;
} // namespace bt

namespace bt::codegen {

/// What the front half of a pipeline does differently per target.
struct LayerToLinalgStageOptions {
  /// Run bt-fuse-local-attention first.
  bool fuseLocalAttention = true;
  /// Run bt-fuse-elementwise (+ canonicalize, cse) last.
  bool fuseElementwise = true;
  /// The target whose patterns bt-lower-kv-caches and bt-lower-to-linalg
  /// add (CodegenTarget.h); null: the target-neutral lowering.
  const CodegenTarget *target = nullptr;
  /// Run bt-lower-backward (the CPU pipeline lowers the training ops).
  bool lowerBackward = false;
  /// bt-lower-kv-caches `device-cache-length` (the CUDA target's
  /// `device-cache-length`).
  bool deviceCacheLength = false;
  /// The target's passes on linalg on tensors once the weights are
  /// arguments, before the elementwise fusion (may be null; the CUDA
  /// target's bt-bf16-gemms under `dtype=bf16`).
  std::function<void(mlir::OpPassManager &)> addBeforeFusion;
};

/// Layer-level bt IR → linalg on tensors: [bt-fuse-local-attention],
/// bt-lower-kv-caches, [bt-lower-backward], bt-lower-to-linalg,
/// bt-params-to-arguments (weights become leading arguments),
/// bt-mark-entry-points, convert-elementwise-to-linalg, canonicalize, cse,
/// [the target's `addBeforeFusion`], [bt-fuse-elementwise, canonicalize,
/// cse].
void addLayerToLinalgStage(mlir::OpPassManager &pm,
                           const LayerToLinalgStageOptions &options);

/// Tensors → buffers: bt-local-reshape-shapes (each tensor.reshape with a
/// shape of its own: LLVM 19's reshape aliases it), empty-tensor
/// elimination, one-shot bufferization with
/// identity layouts at function boundaries (results are fresh allocations
/// owned by the caller), the target's passes on the bufferized IR
/// (`addAfterBufferize`, may be null; bt-reshapes-to-views for CUDA),
/// bt-drop-in-out-results (the in-place updated KV caches), canonicalize,
/// cse, canonicalize (removes the self-copies of in-place
/// tensor.insert_slice), the buffer deallocation pipeline.
void addBufferizationStage(
    mlir::OpPassManager &pm,
    llvm::function_ref<void(mlir::OpPassManager &)> addAfterBufferize =
        nullptr);

/// With `enabled`: bt-gemm-to-blas (f32 GEMMs with M*N*K >= `minMNK` become
/// calls of `callee`, a cblas_sgemm-compatible function; bf16-input GEMMs
/// calls of `bf16Callee`, those whose product is rounded to bf16 calls
/// of `bf16OutCallee`, and those of them whose bias is a bf16 vector calls
/// of `bf16BiasOutCallee`, when given).
void addGemmToBlasStage(mlir::OpPassManager &pm, bool enabled, int64_t minMNK,
                        llvm::StringRef callee,
                        llvm::StringRef bf16Callee = "",
                        llvm::StringRef bf16OutCallee = "",
                        llvm::StringRef bf16BiasOutCallee = "");

/// Host loops → LLVM dialect: loop-invariant code motion, lower-affine,
/// scf-to-cf, expand-strided-metadata, lower-affine, then the target's own
/// op lowerings (`addTargetLowerings`: math → LLVM/libm on the CPU, arith
/// expansion for CUDA), then memref/arith/index/cf/func/ub → LLVM.
void addLoopsToLLVMStage(
    mlir::OpPassManager &pm,
    llvm::function_ref<void(mlir::OpPassManager &)> addTargetLowerings);

/// The kernel ABI and clean-up: [bt-emit-entry-wrappers with
/// `internalize`], reconcile-unrealized-casts, canonicalize, cse.
void addEntryWrappersStage(mlir::OpPassManager &pm, bool entryWrappers,
                           bool internalize);

/// Appends `registerDialects`' dialects and interface models to the context
/// of `module`, builds a pass manager on it with the command-line pass
/// manager and timing options applied (when the tool registered them),
/// fills it with `buildPipeline` and runs it on `module`. Fails when a pass
/// fails (its diagnostics are emitted on the module's context).
mlir::LogicalResult
runPipeline(mlir::ModuleOp module,
            llvm::function_ref<void(mlir::DialectRegistry &)> registerDialects,
            llvm::function_ref<void(mlir::OpPassManager &)> buildPipeline);

} // namespace bt::codegen

#endif // BT_CODEGEN_PIPELINESTAGES_H
