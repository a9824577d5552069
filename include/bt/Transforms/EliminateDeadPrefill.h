//===- EliminateDeadPrefill.h - narrowing of unused token-decoder work -*- C++ -*-===//
//
// The rewriting of bt-eliminate-dead-prefill (include/bt/Transforms/Passes.td)
// on one function, for passes that build a function and want it narrowed
// before a later step: bt-generate-train-step narrows the decomposed forward
// before the reverse sweep, so the positions the token decoder discards (its
// first P-1 outputs after the last attention) are neither computed nor
// differentiated.
//
//===----------------------------------------------------------------------===//

#ifndef BT_TRANSFORMS_ELIMINATEDEADPREFILL_H
#define BT_TRANSFORMS_ELIMINATEDEADPREFILL_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>

namespace bt {

/// What eliminateDeadPrefill did to one function.
struct DeadPrefillStats {
  /// Ops recomputed on a narrower range.
  int64_t rewritten = 0;
  /// Token-decoder blocks removed (B · N_blk, static shapes only).
  int64_t removedBlocks = 0;
  /// Narrowings of token decoders with dynamic shapes.
  int64_t dynamicRewrites = 0;
  /// Dead KV-cache chains erased, by scope.
  int64_t localCaches = 0, globalCaches = 0;
};

/// Narrows the block-local ops of `fn` (a FunctionOpInterface with a body)
/// to the ranges their users read, erases the ops and KV-cache chains that
/// become dead, and merges the duplicate slices (CSE). Every op whose
/// results are unused is erased: the function's terminator must already use
/// everything that is live. Fails, after an error on `fn`, when the greedy
/// rewriting does not converge.
mlir::FailureOr<DeadPrefillStats> eliminateDeadPrefill(mlir::Operation *fn);

} // namespace bt

#endif // BT_TRANSFORMS_ELIMINATEDEADPREFILL_H
