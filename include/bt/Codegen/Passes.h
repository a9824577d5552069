//===- Passes.h - bt code generation passes ---------------------*- C++ -*-===//
//
// The target-neutral passes of code generation (Passes.td,
// lib/Codegen/Common). The CUDA target's own passes are in CUDA/Passes.h.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_PASSES_H
#define BT_CODEGEN_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace bt {

class CodegenTarget;

/// Unit attribute on an `scf.for` whose iterations are independent: each
/// writes its own disjoint slice of the loop's results and reads nothing
/// another iteration writes, so they may run in any order or at once. Set by
/// bt-lower-to-linalg on attention's loop over the B·H heads
/// (AttentionToLinalg.cpp) and by bt-lower-backward on attention_grad's
/// (BackwardToLinalg.cpp); bt-parallel-outer-loops turns such a loop, once
/// bufferized (no `iter_args` left), into an `scf.parallel` (Passes.td).
inline constexpr llvm::StringLiteral kIndependentIterationsAttrName =
    "bt.independent_iterations";

#define GEN_PASS_DECL
#include "bt/Codegen/Passes.h.inc"

/// bt-lower-kv-caches with the patterns of `target` (CodegenTarget.h; null:
/// target-neutral) instead of the one `options.target` names.
std::unique_ptr<mlir::Pass>
createBTLowerKVCaches(const BTLowerKVCachesOptions &options,
                      const CodegenTarget *target);

/// bt-lower-backward with the patterns of `target` (CodegenTarget.h; null:
/// target-neutral) instead of the one `options.target` names.
std::unique_ptr<mlir::Pass>
createBTLowerBackward(const BTLowerBackwardOptions &options,
                      const CodegenTarget *target);

/// bt-lower-to-linalg with the patterns of `target` (CodegenTarget.h; null:
/// target-neutral) instead of the one `options.target` names.
std::unique_ptr<mlir::Pass>
createBTLowerToLinalg(const BTLowerToLinalgOptions &options,
                      const CodegenTarget *target);

#define GEN_PASS_REGISTRATION
#include "bt/Codegen/Passes.h.inc"

} // namespace bt

#endif // BT_CODEGEN_PASSES_H
