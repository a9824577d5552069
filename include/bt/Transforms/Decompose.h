//===- Decompose.h - model-level → layer-level bt ops -----------*- C++ -*-===//
//
// The rewriting of bt-decompose as a function, for passes that decompose a
// function they build (bt-generate-train-step).
//
//===----------------------------------------------------------------------===//

#ifndef BT_TRANSFORMS_DECOMPOSE_H
#define BT_TRANSFORMS_DECOMPOSE_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

namespace bt {

/// Rewrites every model-level op nested in `root` (bt.embedder,
/// bt.block_decoder, bt.token_decoder, bt.token_decoder_step, bt.lm_head)
/// into layer-level ops exactly as bt-decompose does (its pass description
/// in Passes.td). Parameters are looked up in the nearest symbol table of
/// each op. Emits located errors and returns failure if an op cannot be
/// decomposed.
mlir::LogicalResult decomposeModelOps(mlir::Operation *root);

} // namespace bt

#endif // BT_TRANSFORMS_DECOMPOSE_H
