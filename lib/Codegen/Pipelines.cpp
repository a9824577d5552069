//===- Pipelines.cpp - bt-cpu-pipeline ------------------------------------===//
//
// Layer-level bt IR → LLVM dialect with the kernel ABI of docs/abi.md.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CPUCodegen.h"
#include "bt/Codegen/Passes.h"
#include "bt/Codegen/Pipelines.h"
#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Linalg/Transforms/SubsetInsertionOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/AllocationOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/Transforms/SubsetInsertionOpInterfaceImpl.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/Timing.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void bt::buildCPUPipeline(OpPassManager &pm, const CPUPipelineOptions &options) {
  // The token decoder's attention chain → one fused op (one kernel).
  if (options.fuseLocalAttention)
    pm.addPass(createBTFuseLocalAttention());
  // KV caches → destination-passing tensors; layer-level bt → linalg on
  // tensors; weights become leading arguments.
  pm.addPass(createBTLowerKVCaches());
  pm.addPass(createBTLowerBackward());
  pm.addPass(createBTLowerToLinalg());
  pm.addPass(createBTParamsToArguments());
  pm.addPass(createBTMarkEntryPoints());
  // Elementwise arith/math on tensors (e.g. residual adds) → linalg.
  pm.addPass(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.fuse) {
    pm.addPass(createBTFuseElementwise());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }

  // Tensors → buffers. Function boundaries use identity layouts, results are
  // fresh allocations owned by the caller.
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizationOptions bufferization;
  bufferization.bufferizeFunctionBoundaries = true;
  bufferization.setFunctionBoundaryTypeConversion(
      bufferization::LayoutMapOption::IdentityLayoutMap);
  pm.addPass(bufferization::createOneShotBufferizePass(bufferization));
  // In-out arguments (KV caches) were updated in place: drop their results.
  pm.addPass(createBTDropInOutResults());
  // CSE makes the subviews of a tensor.insert_slice's in-place copy
  // identical, and canonicalization then removes these self-copies.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm, dealloc);
  pm.addPass(createBufferizationToMemRefPass());

  // GEMMs → OpenBLAS; the rest → loops.
  if (options.blas) {
    BTGemmToBlasOptions blas;
    blas.minMNK = options.blasMinMNK;
    pm.addPass(createBTGemmToBlas(blas));
  }
  pm.addPass(createBTStridedCopiesToLinalg());
  pm.addPass(createConvertLinalgToLoopsPass());
  pm.addPass(createLoopInvariantCodeMotionPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());

  // → LLVM dialect.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass()); // erf (no LLVM intrinsic)
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createUBToLLVMConversionPass());
  if (options.entryWrappers) {
    BTEmitEntryWrappersOptions wrappers;
    wrappers.internalize = options.internalize;
    pm.addPass(createBTEmitEntryWrappers(wrappers));
  }
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void bt::registerCPUPipeline() {
  PassPipelineRegistration<CPUPipelineOptions>(
      "bt-cpu-pipeline",
      "Lower layer-level bt IR to the LLVM dialect with the CPU kernel ABI "
      "(bt_entry_<name>, docs/abi.md)",
      buildCPUPipeline);
}

void bt::registerCPUCodegenDialects(DialectRegistry &registry) {
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
  registerBTCodegenInterfaceModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

LogicalResult bt::runCPUPipeline(ModuleOp module,
                                 const CPUPipelineOptions &options) {
  MLIRContext *ctx = module->getContext();
  DialectRegistry registry;
  registerCPUCodegenDialects(registry);
  ctx->appendDialectRegistry(registry);

  PassManager pm(ctx, module->getName().getStringRef());
  // Fails only when the tool did not register the PassManager CL options;
  // then there is nothing to apply.
  (void)applyPassManagerCLOptions(pm);
  applyDefaultTimingPassManagerCLOptions(pm);
  buildCPUPipeline(pm, options);
  return pm.run(module);
}
