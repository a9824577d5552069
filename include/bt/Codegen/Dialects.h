//===- Dialects.h - what the target-neutral codegen stages need -*- C++ -*-===//
//
// The dialect registrations shared by the CPU and CUDA back ends
// (lib/Codegen/Common). Each target adds its own on top:
// registerCPUCodegenDialects (CPU/CPUCodegen.h) and
// registerCUDACodegenDialects (CUDA/CUDACodegen.h).
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_DIALECTS_H
#define BT_CODEGEN_DIALECTS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace bt {

/// Registers the dialects and the external interface models (bufferization,
/// deallocation, subset insertion) that the target-neutral stages of the
/// pipelines need: layer-level bt IR → linalg on tensors → buffers → loops →
/// LLVM dialect (lib/Codegen/Common/PipelineStages.h). No GPU dialect.
void registerCodegenDialects(mlir::DialectRegistry &registry);

/// Registers the external interface models of bt ops that code generation
/// needs: the bufferization of `bt.sample` into a call of the runtime's
/// sampler. Part of registerCodegenDialects; tools that register all
/// upstream dialects and extensions themselves (bt-opt) call this one.
void registerBTCodegenInterfaceModels(mlir::DialectRegistry &registry);

} // namespace bt

#endif // BT_CODEGEN_DIALECTS_H
