//===- bt-opt.cpp - mlir-opt for the bt dialect ----------------------------===//
//
// Runs any bt or upstream pass / pipeline on .mlir files, like mlir-opt:
//   bt-opt input.mlir --bt-verify-kv-lifetimes
// Registers all upstream dialects, passes and extensions, the GPU → LLVM IR
// translations (needed by gpu-module-to-binary), and the bt dialect, passes,
// the CUDA code-generation target (`target=cuda` of the lowering passes) and
// the pipelines (bt-cpu-pipeline, bt-cuda-pipeline, bt-compile-pipeline).
// The driver (OptDriver.h) refuses IR nested deeper than kMaxIRNesting with a
// located error, runs on a thread with a large stack and writes -o
// atomically.
//
//===----------------------------------------------------------------------===//

#include "OptDriver.h"

#include "bt/Codegen/CPU/CPUCodegen.h"
#include "bt/Codegen/CUDA/CUDACodegen.h"
#include "bt/Codegen/CUDA/Passes.h"
#include "bt/Codegen/Dialects.h"
#include "bt/Codegen/Passes.h"
#include "bt/Compiler/Compiler.h"
#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Transforms/Autodiff.h"
#include "bt/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  registry.insert<bt::BTDialect>();
  bt::registerBTCodegenInterfaceModels(registry);
  bt::registerCUDACodegenInterfaceModels(registry);
  bt::registerAutodiffInterfaces(registry);

  mlir::registerAllPasses();
  bt::registerBTTransformsPasses();
  bt::registerBTCodegenPasses();
  bt::registerBTCUDACodegenPasses();
  bt::registerCPUPipeline();
  bt::registerCUDAPipeline();
  bt::registerCUDACodegenTarget();
  bt::compiler::registerCompilePipeline();

  return bt::btOptMain(argc, argv, registry);
}
