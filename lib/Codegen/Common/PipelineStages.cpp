//===- PipelineStages.cpp - stages shared by the bt pipelines -------------===//
//
// The pass sequences bt-cpu-pipeline and bt-cuda-pipeline share
// (bt/Codegen/PipelineStages.h) and the dialects they need
// (bt/Codegen/Dialects.h).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/PipelineStages.h"
#include "bt/Codegen/Dialects.h"
#include "bt/Codegen/CodegenTarget.h"
#include "bt/Codegen/Passes.h"
#include "bt/Transforms/Passes.h"

#include "bt/Dialect/BT/IR/BTDialect.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Affine/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Linalg/Transforms/SubsetInsertionOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/Transforms/AllocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/Transforms/SubsetInsertionOpInterfaceImpl.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
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
  // The target's name too, so that the textual pipeline names it.
  BTLowerKVCachesOptions caches;
  if (options.target)
    caches.target = options.target->getName().str();
  caches.deviceCacheLength = options.deviceCacheLength;
  pm.addPass(createBTLowerKVCaches(caches, options.target));
  if (options.lowerBackward) {
    BTLowerBackwardOptions backward;
    backward.target = caches.target;
    pm.addPass(createBTLowerBackward(backward, options.target));
  }
  BTLowerToLinalgOptions lowering;
  lowering.target = caches.target;
  pm.addPass(createBTLowerToLinalg(lowering, options.target));
  pm.addPass(createBTParamsToArguments());
  pm.addPass(createBTMarkEntryPoints());
  // Elementwise arith/math on tensors (e.g. residual adds) → linalg.
  pm.addPass(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.addBeforeFusion)
    options.addBeforeFusion(pm);
  if (options.fuseElementwise) {
    pm.addPass(createBTFuseElementwise());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
}

void bt::codegen::addBufferizationStage(
    OpPassManager &pm, function_ref<void(OpPassManager &)> addAfterBufferize) {
  // Function boundaries use identity layouts, results are fresh allocations
  // owned by the caller.
  // Each tensor.reshape with a shape of its own, built right before it
  // (LLVM 19's tensor.reshape aliases its shape with its result).
  pm.addPass(createBTLocalReshapeShapes());
  // Results inserted into a larger tensor are computed in its slice
  // (bt-eliminate-fresh-inits: upstream's empty-tensor elimination, also
  // for the lowerings' alloc_tensor inits; one zero fill per init).
  pm.addPass(createBTEliminateFreshInits());
  bufferization::OneShotBufferizationOptions bufferization;
  // The constants' globals in a reproducible order (One-Shot Bufferize's
  // own order is not).
  BTConstantGlobalsOptions globals;
  globals.alignment = bufferization.bufferAlignment;
  pm.addPass(createBTConstantGlobals(globals));
  bufferization.bufferizeFunctionBoundaries = true;
  bufferization.setFunctionBoundaryTypeConversion(
      bufferization::LayoutMapOption::IdentityLayoutMap);
  pm.addPass(bufferization::createOneShotBufferizePass(bufferization));
  if (addAfterBufferize)
    addAfterBufferize(pm);
  // In-out arguments (KV caches) were updated in place: drop their results.
  pm.addPass(createBTDropInOutResults());
  // CSE makes the subviews of a tensor.insert_slice's in-place copy
  // identical, and canonicalization then removes these self-copies.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm, dealloc);
  // Free each intermediate after its last use, not at the function's end.
  pm.addPass(createBTEarlyDealloc());
}

void bt::codegen::addGemmToBlasStage(OpPassManager &pm, bool enabled,
                                     int64_t minMNK, StringRef callee,
                                     StringRef bf16Callee,
                                     StringRef bf16OutCallee,
                                     StringRef bf16BiasOutCallee) {
  if (!enabled)
    return;
  BTGemmToBlasOptions blas;
  blas.minMNK = minMNK;
  blas.callee = callee.str();
  blas.bf16Callee = bf16Callee.str();
  blas.bf16OutCallee = bf16OutCallee.str();
  blas.bf16BiasOutCallee = bf16BiasOutCallee.str();
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

void bt::registerCodegenDialects(DialectRegistry &registry) {
  registry.insert<BTDialect, affine::AffineDialect, arith::ArithDialect,
                  bufferization::BufferizationDialect, cf::ControlFlowDialect,
                  func::FuncDialect, index::IndexDialect, LLVM::LLVMDialect,
                  linalg::LinalgDialect, math::MathDialect,
                  memref::MemRefDialect, scf::SCFDialect,
                  tensor::TensorDialect, ub::UBDialect>();
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  arith::registerBufferDeallocationOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(
      registry);
  cf::registerBufferizableOpInterfaceExternalModels(registry);
  cf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerSubsetOpInterfaceExternalModels(registry);
  memref::registerAllocationOpInterfaceExternalModels(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerSubsetOpInterfaceExternalModels(registry);
  // The bounds bt-parallel-work-threshold derives for inner trip counts.
  affine::registerValueBoundsOpInterfaceExternalModels(registry);
  arith::registerValueBoundsOpInterfaceExternalModels(registry);
  memref::registerValueBoundsOpInterfaceExternalModels(registry);
  scf::registerValueBoundsOpInterfaceExternalModels(registry);
  tensor::registerValueBoundsOpInterfaceExternalModels(registry);
  registerBTCodegenInterfaceModels(registry);
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
