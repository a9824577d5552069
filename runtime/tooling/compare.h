//===- compare.h - compare tensors against a reference ----------*- C++ -*-===//
//
// `compare` (bt-run and standalone executables): checks named tensors of an
// output file against a reference file (e.g. the official fixtures'
// outputs.safetensors) with per-tensor tolerances, and prints the measured
// errors. Used by the fixture tests and on machines without Python.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_COMPARE_H
#define BT_RUNTIME_COMPARE_H

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace bt::rt {

/// Selects the elements a check looks at: element i of the checked tensor
/// is selected when `|mask[i]| · factor > threshold` (or `<=` with
/// `greater` false), where `mask` is a tensor of the mask file (see
/// CompareTensors) with the checked tensor's shape. `{}` in the mask name
/// stands for the checked tensor's reference name, so one check can cover
/// many tensors (e.g. `grad.{}` for the gradient of every parameter).
struct ElementMask {
  std::string tensor;     // mask tensor name, may contain "{}"
  double factor = 1.0;
  double threshold = 0.0;
  bool greater = true;    // > threshold (true) or <= threshold (false)
  /// The mask tensor's name for checked tensor `name`.
  std::string TensorFor(const std::string &name) const;
  /// "|grad.{}|*0.26>1e-06".
  std::string ToString() const;
};

/// One check: `tensor` of the actual file against `reference` (default: the
/// same name) of the reference file.
struct TensorCheck {
  enum class Kind {
    kAbs,   // max |actual - ref| <= tolerance
    kRel,   // max |actual - ref| / max |ref| <= tolerance (|Δ|/|ref| for scalars)
    kEqual  // identical values (token ids)
  };
  /// A tensor name, or a pattern ending in `*` (`*` alone: every tensor of
  /// the reference file; `param.*`: those starting with `param.`), which
  /// CompareTensors expands into one check per matching reference tensor
  /// (with the same name in the actual file).
  std::string tensor;
  std::string reference; // empty: same as `tensor`
  Kind kind = Kind::kAbs;
  const std::string &reference_name() const {
    return reference.empty() ? tensor : reference;
  }
  bool is_pattern() const {
    return !tensor.empty() && tensor.back() == '*';
  }
  double tolerance = 0.0;
  /// If set (kAbs / kRel only), only the selected elements are compared;
  /// kRel is then relative to max |ref| over them. No selected element
  /// passes with error 0.
  std::optional<ElementMask> where;
};

/// Parses `NAME:atol=X`, `NAME:rtol=X` or `NAME:equal` (e.g. "logits:atol=1e-4",
/// "loss:rtol=1e-5", "new_tokens:equal"), where NAME may be `NAME=REFNAME` to
/// compare tensor NAME of the actual file with REFNAME of the reference (e.g.
/// "new_tokens=trainpos.new_tokens:equal") or a prefix pattern `*` /
/// `PREFIX*` (e.g. "grad.*:rtol=1e-4"; no REFNAME then): CompareTensors
/// expands it into one check per tensor of the reference file whose name
/// has that prefix. atol/rtol take an optional element selection
/// `,where=|MASK|*F>T` (also `|MASK|>T`, `<=` instead of `>`; F and T
/// numbers), e.g. "*:atol=1e-6,where=|grad.{}|*0.263>1e-6".
/// Errors: InvalidArgument naming the malformed spec (a pattern with
/// `=REFNAME`, or `*` other than at the end; a malformed selection).
absl::StatusOr<TensorCheck> ParseTensorCheck(const std::string &spec);

/// The measured error of one check.
struct TensorCheckResult {
  TensorCheck check;  // concrete (patterns expanded)
  double error = 0.0;  // max |Δ| (kAbs), relative error (kRel), #differing (kEqual)
  double max_abs_diff = 0.0;
  int64_t selected = 0;  // elements compared
  int64_t elements = 0;  // elements of the tensor
  bool passed = false;
};

/// Options of CompareTensors.
struct CompareOptions {
  /// A tensor absent from the actual file is compared as zeros of the
  /// reference's shape (printed as "absent = 0"): e.g. the gradient of a
  /// checkpoint tensor that the compiled model never reads, which the
  /// official fixtures store as zeros (`params_without_grad`). A nonzero
  /// reference still fails its tolerance.
  bool absent_as_zero = false;
  /// The file the masks of TensorCheck::where are read from; empty: the
  /// reference file.
  std::string mask_path;
};

/// Runs `checks` of `actual_path` against `reference_path`, a prefix pattern
/// (`grad.*`) as one check per reference tensor with that prefix, in sorted
/// name order. Both tensors must exist with equal shapes (float dtypes are
/// compared in f64 after widening; integer dtypes exactly). A mask
/// (TensorCheck::where, from options.mask_path or the reference file) must
/// have the checked tensor's shape. Prints one line per (expanded) check to
/// `out`:
///   logits  max|Δ| 3.278e-07  (atol 1e-04)  OK
///   param.x  max|Δ| 1.192e-07 on 98 of 128 where |grad.x|*0.26>1e-06  (atol 1e-06)  OK
/// Returns the results; a failed tolerance is not an error status.
/// Errors: those of SafetensorsFile::Open; NotFound naming the file and
/// tensor, or a pattern that matches no reference tensor; InvalidArgument
/// for a shape mismatch (tensors or mask) or a kEqual check on floats with
/// different dtypes.
absl::StatusOr<std::vector<TensorCheckResult>>
CompareTensors(const std::string &actual_path, const std::string &reference_path,
               const std::vector<TensorCheck> &checks, std::ostream &out,
               const CompareOptions &options = {});

} // namespace bt::rt

#endif // BT_RUNTIME_COMPARE_H
