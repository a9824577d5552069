//===- PipelineStages.cpp - stages shared by the bt pipelines -------------===//
//
// The pass sequences bt-cpu-pipeline and bt-cuda-pipeline share
// (PipelineStages.h).
//
//===----------------------------------------------------------------------===//

#include "PipelineStages.h"

#include "bt/Codegen/Passes.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void bt::codegen::addLayerToLinalgStage(
    OpPassManager &pm, const LayerToLinalgStageOptions &options) {
  // The token decoder's attention chain → one fused op (one kernel).
  if (options.fuseLocalAttention)
    pm.addPass(createBTFuseLocalAttention());
  // KV caches → destination-passing tensors; layer-level bt → linalg on
  // tensors; weights become leading arguments.
  BTLowerKVCachesOptions caches;
  caches.gpuAttention = options.gpuAttention;
  pm.addPass(createBTLowerKVCaches(caches));
  if (options.lowerBackward)
    pm.addPass(createBTLowerBackward());
  BTLowerToLinalgOptions lowering;
  lowering.gpuAttention = options.gpuAttention;
  pm.addPass(createBTLowerToLinalg(lowering));
  pm.addPass(createBTParamsToArguments());
  pm.addPass(createBTMarkEntryPoints());
  // Elementwise arith/math on tensors (e.g. residual adds) → linalg.
  pm.addPass(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.fuseElementwise) {
    pm.addPass(createBTFuseElementwise());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
}

void bt::codegen::addBufferizationStage(OpPassManager &pm,
                                        bool reshapesToViews) {
  // Function boundaries use identity layouts, results are fresh allocations
  // owned by the caller.
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizationOptions bufferization;
  bufferization.bufferizeFunctionBoundaries = true;
  bufferization.setFunctionBoundaryTypeConversion(
      bufferization::LayoutMapOption::IdentityLayoutMap);
  pm.addPass(bufferization::createOneShotBufferizePass(bufferization));
  if (reshapesToViews)
    pm.addPass(createBTReshapesToViews());
  // In-out arguments (KV caches) were updated in place: drop their results.
  pm.addPass(createBTDropInOutResults());
  // CSE makes the subviews of a tensor.insert_slice's in-place copy
  // identical, and canonicalization then removes these self-copies.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm, dealloc);
}

void bt::codegen::addGemmToBlasStage(OpPassManager &pm, bool enabled,
                                     int64_t minMNK, StringRef callee) {
  if (!enabled)
    return;
  BTGemmToBlasOptions blas;
  blas.minMNK = minMNK;
  blas.callee = callee.str();
  pm.addPass(createBTGemmToBlas(blas));
}

void bt::codegen::addLoopsToLLVMStage(
    OpPassManager &pm, function_ref<void(OpPassManager &)> addTargetLowerings) {
  pm.addPass(createLoopInvariantCodeMotionPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  addTargetLowerings(pm);
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createUBToLLVMConversionPass());
}

void bt::codegen::addEntryWrappersStage(OpPassManager &pm, bool entryWrappers,
                                        bool internalize) {
  if (entryWrappers) {
    BTEmitEntryWrappersOptions wrappers;
    wrappers.internalize = internalize;
    pm.addPass(createBTEmitEntryWrappers(wrappers));
  }
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

LogicalResult
bt::codegen::runPipeline(ModuleOp module,
                         function_ref<void(DialectRegistry &)> registerDialects,
                         function_ref<void(OpPassManager &)> buildPipeline) {
  MLIRContext *ctx = module->getContext();
  DialectRegistry registry;
  registerDialects(registry);
  ctx->appendDialectRegistry(registry);

  PassManager pm(ctx, module->getName().getStringRef());
  // Fails only when the tool did not register the PassManager CL options;
  // then there is nothing to apply.
  (void)applyPassManagerCLOptions(pm);
  applyDefaultTimingPassManagerCLOptions(pm);
  buildPipeline(pm);
  return pm.run(module);
}
