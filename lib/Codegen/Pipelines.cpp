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

#include "PipelineStages.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
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
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void bt::buildCPUPipeline(OpPassManager &pm, const CPUPipelineOptions &options) {
  codegen::LayerToLinalgStageOptions front;
  front.fuseLocalAttention = options.fuseLocalAttention;
  front.fuseElementwise = options.fuse;
  front.lowerBackward = true;
  codegen::addLayerToLinalgStage(pm, front);
  codegen::addBufferizationStage(pm, /*reshapesToViews=*/false);
  pm.addPass(createBufferizationToMemRefPass());

  // GEMMs → OpenBLAS; the rest → loops.
  codegen::addGemmToBlasStage(pm, options.blas, options.blasMinMNK,
                              "cblas_sgemm");
  pm.addPass(createBTStridedCopiesToLinalg());
  pm.addPass(createConvertLinalgToLoopsPass());

  // → LLVM dialect.
  codegen::addLoopsToLLVMStage(pm, [](OpPassManager &host) {
    host.addPass(createConvertMathToLLVMPass());
    host.addPass(createConvertMathToLibmPass()); // erf (no LLVM intrinsic)
  });
  codegen::addEntryWrappersStage(pm, options.entryWrappers,
                                 options.internalize);
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
  return codegen::runPipeline(
      module, registerCPUCodegenDialects,
      [&](OpPassManager &pm) { buildCPUPipeline(pm, options); });
}
