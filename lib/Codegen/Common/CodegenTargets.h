//===- CodegenTargets.h - the lowering passes' target hooks -----*- C++ -*-===//
//
// How the target-neutral lowering passes find their code-generation target
// (lib/Codegen/Common, internal): the one their C++ factory received, else
// the registered one their `target` option names (CodegenTarget.cpp), and
// the pass base that does it for them (TargetedLoweringPass).
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_CODEGEN_COMMON_CODEGENTARGETS_H
#define BT_LIB_CODEGEN_COMMON_CODEGENTARGETS_H

#include "bt/Codegen/CodegenTarget.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

namespace mlir {
class ConversionTarget;
} // namespace mlir

namespace bt::codegen {

/// Makes the dialects the lowerings to linalg emit legal in `target`:
/// arith, bufferization, cf, linalg, math, memref, scf, tensor.
void addLinalgLevelLegalDialects(mlir::ConversionTarget &target);

/// `explicitTarget` if not null, else the registered target named `name`
/// (null for an empty or unknown name).
const CodegenTarget *resolveCodegenTarget(const CodegenTarget *explicitTarget,
                                          llvm::StringRef name);

/// The same into `result`; an unknown name is an error located at `root`.
mlir::LogicalResult resolveCodegenTarget(const CodegenTarget *explicitTarget,
                                         llvm::StringRef name,
                                         mlir::Operation *root,
                                         const CodegenTarget *&result);

/// The part every target-neutral lowering pass with a `target` option
/// shares (bt-lower-to-linalg, bt-lower-backward, bt-lower-kv-caches): the
/// CodegenTarget of its C++ factory (the pipelines), or else the registered
/// one its `target` option names; the target's dialects added to the pass's
/// dependent dialects. `GenBase` is the pass's ODS base
/// (bt::impl::BT<Pass>Base), `Derived` the pass.
template <typename Derived, template <typename> class GenBase>
class TargetedLoweringPass : public GenBase<Derived> {
public:
  using Base = GenBase<Derived>;
  using Base::Base;
  TargetedLoweringPass() = default;
  template <typename Options>
  TargetedLoweringPass(const Options &options, const CodegenTarget *target)
      : Base(options), codegenTarget(target) {}

  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    if (const CodegenTarget *t =
            resolveCodegenTarget(codegenTarget, this->target))
      t->getDependentDialects(registry);
  }

protected:
  /// The target's hooks (null: none, the target-neutral lowering only); an
  /// unknown `target` name is an error located at the pass's operation.
  mlir::LogicalResult resolveHooks(const CodegenTarget *&hooks) {
    return resolveCodegenTarget(codegenTarget, this->target,
                                this->getOperation(), hooks);
  }

private:
  const CodegenTarget *codegenTarget = nullptr;
};

} // namespace bt::codegen

#endif // BT_LIB_CODEGEN_COMMON_CODEGENTARGETS_H
