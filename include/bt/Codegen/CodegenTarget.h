//===- CodegenTarget.h - target hooks of the target-neutral lowerings ------===//
//
// The target-neutral lowerings (`bt-lower-to-linalg`, `bt-lower-kv-caches`,
// lib/Codegen/Common) know no target. A target changes how an op is lowered
// by contributing its own conversion patterns with a higher benefit than the
// target-neutral ones (benefit 1), as Triton's `TargetInfoBase` /
// `populate…Patterns(…, PatternBenefit)` do: its pattern matches the shapes
// it handles and fails on the others, which then take the target-neutral
// lowering. The CPU target uses the target-neutral lowering as is; the CUDA
// target (lib/Codegen/CUDA/CUDATarget.cpp) lowers the attention ops to its
// attention kernels.
//
// In C++ the pipelines pass their target to the passes directly
// (createBTLowerToLinalg(options, target)); the textual pass option
// `target=<name>` (bt-opt, lit tests) looks the target up by name among the
// registered ones (registerCodegenTarget).
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_CODEGENTARGET_H
#define BT_CODEGEN_CODEGENTARGET_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"

#include <functional>
#include <memory>

namespace mlir {
class ConversionTarget;
class DialectRegistry;
class RewritePatternSet;
} // namespace mlir

namespace bt {

class KVCacheLowering;
class LayerToLinalgState;

/// What a code-generation target adds to the target-neutral lowerings.
class CodegenTarget {
public:
  virtual ~CodegenTarget();

  /// The name the `target` option of the lowering passes uses ("cuda").
  virtual llvm::StringRef getName() const = 0;

  /// Adds the dialects this target's patterns create (loaded before the
  /// lowering passes run; nothing for a target that adds no patterns).
  virtual void getDependentDialects(mlir::DialectRegistry &registry) const {}

  /// Marks those dialects legal in the lowering passes' conversion target.
  virtual void
  configureConversionTarget(mlir::ConversionTarget &target) const {}

  /// Adds this target's patterns for the layer-level ops of
  /// bt-lower-to-linalg (bt.attention, bt.local_attention,
  /// bt.fused_local_attention, ...) to `patterns`, next to the
  /// target-neutral ones of populateBTLayerToLinalgPatterns.
  virtual void
  populateLayerToLinalgPatterns(mlir::RewritePatternSet &patterns,
                                LayerToLinalgState &state) const {}

  /// Adds this target's patterns for the backward ops of bt-lower-backward
  /// (bt.embedding_grad, ...) to `patterns`, next to the target-neutral
  /// ones of populateBTBackwardToLinalgPatterns.
  virtual void
  populateBackwardToLinalgPatterns(mlir::RewritePatternSet &patterns) const {}

  /// Adds this target's patterns for the KV-cache ops of
  /// bt-lower-kv-caches (bt.kv_attend) to `patterns`, next to the
  /// target-neutral ones of populateBTKVCacheToTensorPatterns.
  virtual void
  populateKVCacheToTensorPatterns(mlir::RewritePatternSet &patterns,
                                  KVCacheLowering &lowering) const {}

  /// Whether this target's patterns lower a bt.kv_attend whose cache element
  /// type differs from its queries' (a bf16 cache of f32 activations,
  /// `!bt.kv_cache`) with `query` of this type [B, S, H, hd]. The
  /// target-neutral head loop computes in one type and cannot;
  /// bt-lower-kv-caches reports such an op, located, before it converts.
  virtual bool
  attendsMixedPrecisionCache(mlir::RankedTensorType query) const {
    return false;
  }
};

/// Makes the target that `factory` builds available to the `target=<name>`
/// option of the lowering passes under its getName(). Registering a name
/// twice keeps the first.
void registerCodegenTarget(
    std::function<std::unique_ptr<CodegenTarget>()> factory);

/// The registered target named `name`, or null. Targets live as long as the
/// process.
const CodegenTarget *lookupCodegenTarget(llvm::StringRef name);

} // namespace bt

#endif // BT_CODEGEN_CODEGENTARGET_H
