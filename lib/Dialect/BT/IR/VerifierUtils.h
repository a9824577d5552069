//===- VerifierUtils.h - shape checks shared by the bt op verifiers -*- C++ -*-===//
//
// Internal to lib/Dialect/BT/IR: the shape helpers of the forward
// (BTOps.cpp) and backward (BTBackwardOps.cpp) op verifiers, so that both
// word their diagnostics the same way ("<what> must have shape [2, ?], got
// [2, 3, 4]").
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_DIALECT_BT_IR_VERIFIERUTILS_H
#define BT_LIB_DIALECT_BT_IR_VERIFIERUTILS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace bt::verifier {

/// Formats a shape as `[2, 6, ?]` (`?` for a dynamic dimension).
inline std::string shapeStr(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os, [&](int64_t d) {
    if (mlir::ShapedType::isDynamic(d))
      os << "?";
    else
      os << d;
  });
  os << "]";
  return os.str();
}

/// Formats one dimension: `?` when dynamic.
inline std::string dimStr(int64_t d) {
  return mlir::ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}

/// True when two dimensions can be equal (either is dynamic, or they match).
inline bool dimsCompatible(int64_t a, int64_t b) {
  return mlir::ShapedType::isDynamic(a) || mlir::ShapedType::isDynamic(b) ||
         a == b;
}

/// True when the shapes have the same rank and compatible dimensions.
inline bool shapesCompatible(llvm::ArrayRef<int64_t> a,
                             llvm::ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (auto [x, y] : llvm::zip(a, b))
    if (!dimsCompatible(x, y))
      return false;
  return true;
}

/// The ranked tensor type of `v` (the ODS constraints guarantee it).
inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}

/// Checks that `v` has the expected shape (dynamic dims match anything);
/// otherwise emits "<what> must have shape <expected>, got <actual>" on `op`.
inline mlir::LogicalResult checkShape(mlir::Operation *op, llvm::StringRef what,
                                      mlir::Value v,
                                      llvm::ArrayRef<int64_t> expected) {
  llvm::ArrayRef<int64_t> actual = tensorType(v).getShape();
  if (shapesCompatible(actual, expected))
    return mlir::success();
  return op->emitOpError() << what << " must have shape " << shapeStr(expected)
                           << ", got " << shapeStr(actual);
}

} // namespace bt::verifier

#endif // BT_LIB_DIALECT_BT_IR_VERIFIERUTILS_H
