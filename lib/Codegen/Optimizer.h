//===- Optimizer.h - lowering of the optimizer ops (lib/Codegen internal) ===//
//
// bt-lower-to-linalg's lowering of bt.global_norm, bt.clip_coefficient,
// bt.lr_schedule and bt.adamw (LowerOptimizer.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_CODEGEN_OPTIMIZER_H
#define BT_LIB_CODEGEN_OPTIMIZER_H

#include "mlir/IR/Builders.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"

namespace bt {

/// True for the ops lowerOptimizerOp handles.
bool isOptimizerOp(mlir::Operation *op);

/// Emits the linalg / tensor / arith / math form of optimizer op `op` at
/// `b`'s insertion point and returns the values that replace its results
/// (in result order). The op itself is left for the caller to erase.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerOptimizerOp(mlir::OpBuilder &b, mlir::Operation *op);

} // namespace bt

#endif // BT_LIB_CODEGEN_OPTIMIZER_H
