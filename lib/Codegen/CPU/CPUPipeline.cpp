//===- CPUPipeline.cpp - bt-cpu-pipeline ----------------------------------===//
//
// Layer-level bt IR → LLVM dialect with the kernel ABI of docs/abi.md.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CPU/CPUCodegen.h"
#include "bt/Codegen/Dialects.h"
#include "bt/Codegen/Passes.h"
#include "bt/Codegen/PipelineStages.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"

using namespace mlir;

void bt::buildCPULayerToLinalgPipeline(OpPassManager &pm,
                                       const CPUPipelineOptions &options) {
  codegen::LayerToLinalgStageOptions front;
  front.fuseLocalAttention = options.fuseLocalAttention;
  front.fuseElementwise = options.fuse;
  front.lowerBackward = true;
  codegen::addLayerToLinalgStage(pm, front);
}

void bt::buildCPULinalgToLLVMPipeline(OpPassManager &pm,
                                      const CPUPipelineOptions &options) {
  codegen::addBufferizationStage(pm);
  pm.addPass(createBufferizationToMemRefPass());

  // GEMMs → OpenBLAS; the rest → loops.
  codegen::addGemmToBlasStage(pm, options.blas, options.blasMinMNK,
                              options.sgemmFunction);
  pm.addPass(createBTStridedCopiesToLinalg());
  if (options.parallel) {
    // One OpenMP parallel loop per kernel (docs/codegen.md, "Threads").
    pm.addPass(createConvertLinalgToParallelLoopsPass());
    pm.addPass(createBTParallelOuterLoops());
    pm.addPass(createConvertSCFToOpenMPPass());
    pm.addPass(createBTParallelWorkThreshold());
    pm.addPass(createBTOmpStaticPartition());
    // Inlines the memref.alloca_scope convert-scf-to-openmp wraps each body
    // in (none allocates), which convert-scf-to-cf could not lower.
    pm.addPass(createCanonicalizerPass());
  } else {
    pm.addPass(createConvertLinalgToLoopsPass());
  }

  // → LLVM dialect.
  codegen::addLoopsToLLVMStage(pm, [&](OpPassManager &host) {
    if (options.approximateMath) {
      // The entry points that compute gradients (bt-generate-gradients,
      // bt-generate-train-step) keep libm's erf / tanh.
      static const std::string kGradientEntryPoints[] = {"grad", "train_step"};
      BTMathApproximationOptions approximation;
      approximation.exclude = kGradientEntryPoints;
      host.addPass(createBTMathApproximation(approximation));
    }
    host.addPass(createConvertMathToLLVMPass());
    host.addPass(createConvertMathToLibmPass()); // erf (no LLVM intrinsic)
    if (options.parallel)
      host.addPass(createConvertOpenMPToLLVMPass());
  });
  codegen::addEntryWrappersStage(pm, options.entryWrappers,
                                 options.internalize);
}

void bt::buildCPUPipeline(OpPassManager &pm, const CPUPipelineOptions &options) {
  buildCPULayerToLinalgPipeline(pm, options);
  buildCPULinalgToLLVMPipeline(pm, options);
}

void bt::registerCPUPipeline() {
  PassPipelineRegistration<CPUPipelineOptions>(
      "bt-cpu-pipeline",
      "Lower layer-level bt IR to the LLVM dialect with the CPU kernel ABI "
      "(bt_entry_<name>, docs/abi.md)",
      buildCPUPipeline);
}

void bt::registerCPUCodegenDialects(DialectRegistry &registry) {
  registerCodegenDialects(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerOpenMPDialectTranslation(registry);
}

LogicalResult bt::runCPUPipeline(ModuleOp module,
                                 const CPUPipelineOptions &options) {
  return codegen::runPipeline(
      module, registerCPUCodegenDialects,
      [&](OpPassManager &pm) { buildCPUPipeline(pm, options); });
}
