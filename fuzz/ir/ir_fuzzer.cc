//===- ir_fuzzer.cc - libFuzzer target: bt-opt's parse + verify + passes -===//
//
// What `bt-opt FILE --PASS` does with a user's .mlir text, on arbitrary
// bytes: the bracket-nesting limit (OptDriver.h, checkIRNesting), MLIR's
// parser with the bt dialect (its custom assembly, attributes and types) and
// the dialects bt IR uses (func, arith, tensor, scf, cf), the verifier (every
// bt op verifier), and on what verifies, the bt passes of lib/Transforms
// that take IR as a user writes it, each on its own copy of the module:
// bt-verify-kv-lifetimes, bt-eliminate-dead-prefill, bt-fuse-local-attention,
// bt-plan-kv-memory, bt-decompose, bt-generate-entry-points,
// bt-generate-gradients and bt-generate-train-step. Diagnostics are
// swallowed (an error is a result, not a finding); the work runs on
// runOnLargeStack's thread as in bt-opt.
//
// Instrumented: the bt dialect, the bt passes and the driver (compiled in
// this build with ASan + UBSan + coverage); MLIR and LLVM are the system's
// uninstrumented libraries (libMLIR.so of llvm-19), so libFuzzer's coverage
// sees only bt's code and ASan sees MLIR's heap only through malloc/free;
// LLVM's inline allocator code does not poison (top-level CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#include "OptDriver.h" // tools/bt-opt

#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Transforms/Autodiff.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>
#include <string>

// LLVM's allocator header calls these (renamed from __asan_poison_memory_region
// and __asan_unpoison_memory_region by the top-level CMakeLists.txt): no-ops,
// as in the uninstrumented libMLIR that shares the allocators.
extern "C" void bt_llvm_asan_poison_noop(void const volatile *, size_t) {}
extern "C" void bt_llvm_asan_unpoison_noop(void const volatile *, size_t) {}

namespace {

mlir::MLIRContext &Context() {
  static mlir::MLIRContext *ctx = [] {
    mlir::DialectRegistry registry;
    registry.insert<bt::BTDialect, mlir::func::FuncDialect,
                    mlir::arith::ArithDialect, mlir::tensor::TensorDialect,
                    mlir::scf::SCFDialect, mlir::cf::ControlFlowDialect>();
    bt::registerAutodiffInterfaces(registry);
    auto *c = new mlir::MLIRContext(registry,
                                    mlir::MLIRContext::Threading::DISABLED);
    c->loadAllAvailableDialects();
    c->allowUnregisteredDialects(false);
    // Errors are results here; nothing is printed.
    c->getDiagEngine().registerHandler([](mlir::Diagnostic &) {
      return mlir::success();
    });
    return c;
  }();
  return *ctx;
}

/// Each pass on its own clone of `module`.
void RunPasses(mlir::ModuleOp module) {
  const std::function<void(mlir::OpPassManager &)> pipelines[] = {
      [](mlir::OpPassManager &pm) { pm.addPass(bt::createBTVerifyKVLifetimes()); },
      [](mlir::OpPassManager &pm) { pm.addPass(bt::createBTEliminateDeadPrefill()); },
      [](mlir::OpPassManager &pm) { pm.addPass(bt::createBTFuseLocalAttention()); },
      [](mlir::OpPassManager &pm) { pm.addPass(bt::createBTPlanKVMemory()); },
      [](mlir::OpPassManager &pm) { pm.addPass(bt::createBTDecompose()); },
      [](mlir::OpPassManager &pm) { pm.addPass(bt::createBTGenerateEntryPoints()); },
      [](mlir::OpPassManager &pm) { pm.addPass(bt::createBTGenerateGradients()); },
      [](mlir::OpPassManager &pm) { pm.addPass(bt::createBTGenerateTrainStep()); },
  };
  for (const auto &add : pipelines) {
    mlir::OwningOpRef<mlir::ModuleOp> copy(module.clone());
    mlir::PassManager pm(&Context());
    add(pm);
    (void)pm.run(*copy);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // NUL-terminated, as bt-opt's input (a MemoryBuffer of the file) is: MLIR's
  // lexer may look at the byte after the end.
  const std::string text(reinterpret_cast<const char *>(data), size);
  std::string ignored;
  llvm::raw_string_ostream errs(ignored);
  if (mlir::failed(bt::checkIRNesting(text, "fuzz.mlir", errs)))
    return 0;
  bt::runOnLargeStack([&] {
    mlir::ParserConfig config(&Context());
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(text, config, "fuzz.mlir");
    if (!module || mlir::failed(mlir::verify(*module)))
      return;
    RunPasses(*module);
  });
  return 0;
}
