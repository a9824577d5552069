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

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace bt::rt {

/// One check: `tensor` of the actual file against `reference` (default: the
/// same name) of the reference file.
struct TensorCheck {
  enum class Kind {
    kAbs,   // max |actual - ref| <= tolerance
    kRel,   // max |actual - ref| / max |ref| <= tolerance (|Δ|/|ref| for scalars)
    kEqual  // identical values (token ids)
  };
  std::string tensor;
  std::string reference; // empty: same as `tensor`
  Kind kind = Kind::kAbs;
  const std::string &reference_name() const {
    return reference.empty() ? tensor : reference;
  }
  double tolerance = 0.0;
};

/// Parses `NAME:atol=X`, `NAME:rtol=X` or `NAME:equal` (e.g. "logits:atol=1e-4",
/// "loss:rtol=1e-5", "new_tokens:equal"), where NAME may be `NAME=REFNAME` to
/// compare tensor NAME of the actual file with REFNAME of the reference (e.g.
/// "new_tokens=trainpos.new_tokens:equal"). NAME may end in `*`, a prefix
/// pattern (e.g. "grad.*:rtol=1e-4"): CompareTensors expands it into one
/// check per tensor of the reference file whose name has that prefix.
/// Errors: InvalidArgument naming the malformed spec (a pattern with
/// `=REFNAME`, or `*` other than at the end).
absl::StatusOr<TensorCheck> ParseTensorCheck(const std::string &spec);

/// The measured error of one check.
struct TensorCheckResult {
  TensorCheck check;
  double error = 0.0;  // max |Δ| (kAbs), relative error (kRel), #differing (kEqual)
  double max_abs_diff = 0.0;
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
};

/// Runs `checks` of `actual_path` against `reference_path`, a prefix pattern
/// (`grad.*`) as one check per reference tensor with that prefix, in sorted
/// name order. Both tensors must exist with equal shapes (float dtypes are compared in f64 after
/// widening; integer dtypes exactly). Prints one line per check to `out`:
///   logits  max|Δ| 3.278e-07  (atol 1e-04)  OK
/// Returns the results; a failed tolerance is not an error status.
/// Errors: those of SafetensorsFile::Open; NotFound naming the file and
/// tensor, or a pattern that matches no reference tensor; InvalidArgument for a shape mismatch or a kEqual check on floats
/// with different dtypes.
absl::StatusOr<std::vector<TensorCheckResult>>
CompareTensors(const std::string &actual_path, const std::string &reference_path,
               const std::vector<TensorCheck> &checks, std::ostream &out,
               const CompareOptions &options = {});

} // namespace bt::rt

#endif // BT_RUNTIME_COMPARE_H
