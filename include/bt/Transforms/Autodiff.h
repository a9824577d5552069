//===- Autodiff.h - reverse-mode differentiation of training graphs -*- C++ -*-===//
//
// Reverse-mode automatic differentiation of a layer-level bt function (the
// output of bt-decompose) with respect to its parameters (`bt.param_ref`).
// The per-op rules are vector-Jacobian products declared through
// `bt::DifferentiableOpInterface` (include/bt/Dialect/BT/IR/BTInterfaces.td):
// the bt ops implement it in ODS, the upstream tensor / arith ops that the
// importer and bt-decompose emit through external models registered by
// registerAutodiffInterfaces.
//
// Typical use (bt-generate-gradients, bt-generate-train-step):
//
//   // In the pass: getDependentDialects(registry) {
//   //   bt::registerAutodiffDialects(registry); }
//   Value loss = ...;  // tensor<f32>, computed in `fn`'s body
//   FailureOr<SmallVector<bt::ParamGradient>> grads =
//       bt::buildParamGradients(fn, loss);
//   if (failed(grads)) return signalPassFailure();  // diagnostics emitted
//   for (bt::ParamGradient &g : *grads)
//     ... g.name (official name), g.grad (same type as the bt.param) ...
//
//===----------------------------------------------------------------------===//

#ifndef BT_TRANSFORMS_AUTODIFF_H
#define BT_TRANSFORMS_AUTODIFF_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Value.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace bt {

/// The gradient of the loss with respect to one parameter.
struct ParamGradient {
  /// Official parameter name: the symbol of the `bt.param` (e.g.
  /// "token_decoder.embed_out.weight"); the fixtures store this gradient as
  /// `grad.<name>`.
  std::string name;
  /// d loss / d parameter, of exactly the parameter's (static) type. Summed
  /// over every `bt.param_ref` of the parameter in the function; an
  /// `arith.constant` zero when no path leads from the parameter to the loss.
  mlir::Value grad;
};

struct AutodiffOptions {
  /// The gradient of the loss to start the sweep from, a value of the loss's
  /// type available before the function's terminator (e.g. a loss scale).
  /// Null: 1.0.
  mlir::Value seed;
};

/// Builds the backward sweep of `loss` in `fn` and returns the gradient of
/// every parameter that `fn` references with `bt.param_ref`, in the module's
/// `bt.param` declaration order (the official state_dict order; first-use
/// order when `fn` is not inside a module with the declarations).
///
/// - `fn` has a body of one block (layer-level IR, after bt-decompose);
///   `loss` is a value of that block (or an argument) of type `tensor<f32>`
///   (or `f32`).
/// - The backward code is inserted right before the block's terminator; the
///   forward is left unchanged, and the terminator is not modified (use the
///   returned values, e.g. in a new `func.return`). Backward ops that turn
///   out unused are erased; the returned gradients themselves have no users
///   yet.
/// - Only ops on a path from a parameter to `loss` are differentiated
///   (activity analysis over floating-point tensor and scalar values). Each
///   must implement `bt::DifferentiableOpInterface`; otherwise, or if a rule
///   fails, or if a differentiated value is used inside the region of an op
///   on such a path, diagnostics located at the op are emitted ("op 'x' has
///   no vector-Jacobian rule") and failure is returned — never a silent zero.
///   On failure the function may hold partially built backward ops.
/// - Gradients of values with several uses are summed (`arith.addf`), in
///   reverse program order of the uses.
///
/// The context must have the dialects of registerAutodiffDialects loaded (a
/// pass declares them in getDependentDialects).
mlir::FailureOr<llvm::SmallVector<ParamGradient>>
buildParamGradients(mlir::FunctionOpInterface fn, mlir::Value loss,
                    const AutodiffOptions &options = {});

/// Registers the `bt::DifferentiableOpInterface` external models of the
/// upstream ops: tensor.extract_slice, insert_slice, concat, collapse_shape,
/// expand_shape, reshape, cast; arith.addf, subf, mulf, divf, negf, select
/// (tensors and scalars); and, as non-differentiable, tensor.empty, tensor.dim,
/// tensor.generate, tensor.splat / from_elements of integers, arith.constant
/// and integer / index arithmetic.
void registerAutodiffInterfaces(mlir::DialectRegistry &registry);

/// registerAutodiffInterfaces plus the dialects the rules create ops of (bt,
/// arith, linalg, math, tensor). For a pass's getDependentDialects.
void registerAutodiffDialects(mlir::DialectRegistry &registry);

} // namespace bt

#endif // BT_TRANSFORMS_AUTODIFF_H
