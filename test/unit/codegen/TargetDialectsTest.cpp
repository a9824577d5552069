//===- TargetDialectsTest.cpp - which dialects each target loads ----------===//
//
// The CPU pipeline never loads the GPU dialects (issue 11; lib/Codegen/README
// .md): the target-neutral passes neither include a GPU header nor declare
// the gpu dialect as a dependency, and only the CUDA target's hooks
// (CodegenTarget.h) bring it in. Both tests compile examples/block_tiny.mlir
// (bt-generate-entry-points, bt-decompose, then a target's pipeline) in a
// context where the dialects of both targets are registered, as in bt-run's
// compile (registered is not loaded), and then look at what was loaded. The
// CUDA front half is the control: the same check sees its gpu dialect.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CPU/CPUCodegen.h"
#include "bt/Codegen/CUDA/CUDACodegen.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

namespace {

/// Registers both targets' dialects in `ctx` and parses
/// examples/block_tiny.mlir without its @generate skeleton (not an entry
/// point); loads only what parsing needs.
mlir::OwningOpRef<mlir::ModuleOp> parseExample(mlir::MLIRContext &ctx) {
  mlir::DialectRegistry registry;
  bt::registerCPUCodegenDialects(registry);
  bt::registerCUDACodegenDialects(registry);
  ctx.appendDialectRegistry(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(BT_EXAMPLES_DIR "/block_tiny.mlir",
                                            &ctx);
  if (module)
    if (auto gen = module->lookupSymbol<mlir::func::FuncOp>("generate"))
      gen.erase();
  return module;
}

/// bt-generate-entry-points and bt-decompose, then `addPipeline`'s passes.
bool compile(mlir::MLIRContext &ctx, mlir::ModuleOp module,
             llvm::function_ref<void(mlir::OpPassManager &)> addPipeline) {
  mlir::PassManager pm(&ctx);
  pm.addPass(bt::createBTGenerateEntryPoints());
  pm.addPass(bt::createBTDecompose());
  addPipeline(pm);
  return mlir::succeeded(pm.run(module));
}

TEST(TargetDialects, CPUPipelineNeverLoadsGPUDialects) {
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module = parseExample(ctx);
  ASSERT_TRUE(module);
  ASSERT_TRUE(compile(ctx, *module, [](mlir::OpPassManager &pm) {
    bt::buildCPUPipeline(pm, bt::CPUPipelineOptions());
  }));
  // The pipeline ran to the LLVM dialect ...
  EXPECT_NE(ctx.getLoadedDialect("llvm"), nullptr);
  // ... and loaded neither GPU dialect.
  EXPECT_EQ(ctx.getLoadedDialect("gpu"), nullptr);
  EXPECT_EQ(ctx.getLoadedDialect("nvvm"), nullptr);
}

TEST(TargetDialects, CUDALoweringLoadsGPUDialect) {
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module = parseExample(ctx);
  ASSERT_TRUE(module);
  EXPECT_EQ(ctx.getLoadedDialect("gpu"), nullptr);
  ASSERT_TRUE(compile(ctx, *module, [](mlir::OpPassManager &pm) {
    bt::buildCUDALayerToLinalgPipeline(pm, bt::CUDAPipelineOptions());
  }));
  EXPECT_NE(ctx.getLoadedDialect("gpu"), nullptr);
}

} // namespace
