//===- CodegenTarget.cpp - registry of code-generation targets ------------===//
//
// The targets that the `target=<name>` option of bt-lower-to-linalg,
// bt-lower-backward and bt-lower-kv-caches can name
// (include/bt/Codegen/CodegenTarget.h), and the legality those passes share.
//
//===----------------------------------------------------------------------===//

#include "CodegenTargets.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/ManagedStatic.h"
#include "llvm/Support/Mutex.h"

using namespace mlir;
using namespace bt;

CodegenTarget::~CodegenTarget() = default;

namespace {
struct Registry {
  llvm::sys::SmartMutex<true> mutex;
  llvm::StringMap<std::unique_ptr<CodegenTarget>> targets;
};
llvm::ManagedStatic<Registry> registry;
} // namespace

void bt::registerCodegenTarget(
    std::function<std::unique_ptr<CodegenTarget>()> factory) {
  std::unique_ptr<CodegenTarget> target = factory();
  llvm::sys::SmartScopedLock<true> lock(registry->mutex);
  StringRef name = target->getName();
  if (!registry->targets.count(name))
    registry->targets[name] = std::move(target);
}

const CodegenTarget *bt::lookupCodegenTarget(StringRef name) {
  llvm::sys::SmartScopedLock<true> lock(registry->mutex);
  auto it = registry->targets.find(name);
  return it == registry->targets.end() ? nullptr : it->second.get();
}

const CodegenTarget *
bt::codegen::resolveCodegenTarget(const CodegenTarget *explicitTarget,
                                  StringRef name) {
  if (explicitTarget || name.empty())
    return explicitTarget;
  return lookupCodegenTarget(name);
}

LogicalResult bt::codegen::resolveCodegenTarget(
    const CodegenTarget *explicitTarget, StringRef name, Operation *root,
    const CodegenTarget *&result) {
  result = resolveCodegenTarget(explicitTarget, name);
  if (!result && !explicitTarget && !name.empty())
    return root->emitError() << "target=" << name
                             << ": no code-generation target of that name is "
                                "registered in this tool";
  return success();
}

void bt::codegen::addLinalgLevelLegalDialects(ConversionTarget &target) {
  target.addLegalDialect<affine::AffineDialect, arith::ArithDialect,
                         bufferization::BufferizationDialect,
                         cf::ControlFlowDialect, linalg::LinalgDialect,
                         math::MathDialect, memref::MemRefDialect,
                         scf::SCFDialect, tensor::TensorDialect>();
}
