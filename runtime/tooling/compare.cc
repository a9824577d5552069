//===- compare.cc - compare tensors against a reference --------------------===//

#include "bt/runtime/tooling/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bt/runtime/base/safetensors.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/base/tensor.h"

namespace bt::rt {
namespace {

/// Widens any numeric tensor to doubles.
absl::StatusOr<std::vector<double>> ToDoubles(const Tensor &t,
                                              const std::string &what) {
  const int64_t n = t.num_elements();
  std::vector<double> v(static_cast<size_t>(n));
  switch (t.dtype()) {
  case DType::I64:
    for (int64_t i = 0; i < n; ++i)
      v[i] = static_cast<double>(t.data_as<int64_t>()[i]);
    return v;
  case DType::I32:
    for (int64_t i = 0; i < n; ++i)
      v[i] = t.data_as<int32_t>()[i];
    return v;
  case DType::F64:
    std::copy(t.data_as<double>(), t.data_as<double>() + n, v.begin());
    return v;
  default: {
    BT_ASSIGN_OR_RETURN(Tensor f, ConvertToF32(t, what));
    for (int64_t i = 0; i < n; ++i)
      v[i] = f.data_as<float>()[i];
    return v;
  }
  }
}

bool IsInteger(DType d) { return d == DType::I64 || d == DType::I32; }

} // namespace

std::string ElementMask::TensorFor(const std::string &name) const {
  std::string out = tensor;
  for (size_t at = out.find("{}"); at != std::string::npos;
       at = out.find("{}", at + name.size()))
    out.replace(at, 2, name);
  return out;
}

std::string ElementMask::ToString() const {
  return absl::StrCat("|", tensor, "|",
                      factor == 1.0 ? "" : absl::StrFormat("*%g", factor),
                      greater ? ">" : "<=", absl::StrFormat("%g", threshold));
}

namespace {

/// Parses `|MASK|*F>T` / `|MASK|>T` / `... <= T`.
bool ParseElementMask(absl::string_view text, ElementMask &mask) {
  if (!absl::ConsumePrefix(&text, "|"))
    return false;
  size_t bar = text.find('|');
  if (bar == absl::string_view::npos || bar == 0)
    return false;
  mask.tensor = std::string(text.substr(0, bar));
  text.remove_prefix(bar + 1);
  size_t cmp = text.find_first_of("<>");
  if (cmp == absl::string_view::npos)
    return false;
  absl::string_view factor = text.substr(0, cmp);
  absl::string_view rest = text.substr(cmp);
  mask.factor = 1.0;
  if (!factor.empty() && (!absl::ConsumePrefix(&factor, "*") ||
                          !absl::SimpleAtod(factor, &mask.factor)))
    return false;
  if (absl::ConsumePrefix(&rest, "<="))
    mask.greater = false;
  else if (absl::ConsumePrefix(&rest, ">"))
    mask.greater = true;
  else
    return false;
  return absl::SimpleAtod(rest, &mask.threshold) && std::isfinite(mask.threshold) &&
         std::isfinite(mask.factor);
}

} // namespace

absl::StatusOr<TensorCheck> ParseTensorCheck(const std::string &spec) {
  size_t colon = spec.rfind(':');
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad check '", spec,
        "': expected NAME:atol=X, NAME:rtol=X or NAME:equal (NAME may be "
        "NAME=REFNAME, or a pattern * / PREFIX*)"));
  };
  if (colon == std::string::npos || colon == 0)
    return bad();
  TensorCheck check;
  check.tensor = spec.substr(0, colon);
  if (size_t eq = check.tensor.find('='); eq != std::string::npos) {
    check.reference = check.tensor.substr(eq + 1);
    check.tensor = check.tensor.substr(0, eq);
    if (check.tensor.empty() || check.reference.empty())
      return bad();
  }
  // A prefix pattern: `*` only at the end, not renamed.
  if (size_t star = check.tensor.find('*'); star != std::string::npos) {
    if (star + 1 != check.tensor.size() ||
        check.reference.find('*') != std::string::npos)
      return absl::InvalidArgumentError(absl::StrCat(
          "bad check '", spec, "': '*' may only end NAME (a prefix pattern)"));
    if (!check.reference.empty())
      return absl::InvalidArgumentError(absl::StrCat(
          "bad check '", spec, "': a prefix pattern cannot be renamed (=REFNAME)"));
  } else if (check.reference.find('*') != std::string::npos) {
    return bad();
  }
  std::string rule = spec.substr(colon + 1);
  if (rule == "equal") {
    check.kind = TensorCheck::Kind::kEqual;
    return check;
  }
  if (size_t comma = rule.find(','); comma != std::string::npos) {
    absl::string_view where = absl::string_view(rule).substr(comma + 1);
    ElementMask mask;
    if (!absl::ConsumePrefix(&where, "where=") || !ParseElementMask(where, mask))
      return absl::InvalidArgumentError(absl::StrCat(
          "bad check '", spec,
          "': expected NAME:atol=X,where=|MASK|*F>T (or |MASK|>T, <=)"));
    check.where = mask;
    rule = rule.substr(0, comma);
  }
  size_t eq = rule.find('=');
  if (eq == std::string::npos)
    return bad();
  std::string key = rule.substr(0, eq);
  if (key == "atol")
    check.kind = TensorCheck::Kind::kAbs;
  else if (key == "rtol")
    check.kind = TensorCheck::Kind::kRel;
  else
    return bad();
  if (!absl::SimpleAtod(rule.substr(eq + 1), &check.tolerance) ||
      !(check.tolerance >= 0))
    return bad();
  return check;
}

absl::StatusOr<std::vector<TensorCheckResult>>
CompareTensors(const std::string &actual_path, const std::string &reference_path,
               const std::vector<TensorCheck> &requested, std::ostream &out,
               const CompareOptions &options) {
  BT_ASSIGN_OR_RETURN(SafetensorsFile actual, SafetensorsFile::Open(actual_path));
  BT_ASSIGN_OR_RETURN(SafetensorsFile reference,
                      SafetensorsFile::Open(reference_path));
  std::optional<SafetensorsFile> mask_file;
  if (!options.mask_path.empty()) {
    BT_ASSIGN_OR_RETURN(SafetensorsFile m,
                        SafetensorsFile::Open(options.mask_path));
    mask_file.emplace(std::move(m));
  }
  const SafetensorsFile &masks = mask_file ? *mask_file : reference;
  // Patterns → one check per matching reference tensor.
  std::vector<TensorCheck> checks;
  for (const TensorCheck &check : requested) {
    if (!check.is_pattern()) {
      checks.push_back(check);
      continue;
    }
    const std::string prefix = check.tensor.substr(0, check.tensor.size() - 1);
    size_t before = checks.size();
    for (const std::string &name : reference.names())
      if (name.compare(0, prefix.size(), prefix) == 0) {
        TensorCheck c = check;
        c.tensor = name;
        checks.push_back(c);
      }
    if (checks.size() == before)
      return absl::NotFoundError(absl::StrCat(reference.path(),
                                              ": no tensor matches '",
                                              check.tensor, "'"));
  }
  auto get = [&](const SafetensorsFile &f,
                 const std::string &name) -> absl::StatusOr<Tensor> {
    if (!f.contains(name))
      return absl::NotFoundError(
          absl::StrCat(f.path(), ": no tensor '", name, "'"));
    return f.Get(name);
  };
  std::vector<TensorCheckResult> results;
  for (const TensorCheck &check : checks) {
    const std::string &ref_name = check.reference_name();
    BT_ASSIGN_OR_RETURN(Tensor r, get(reference, ref_name));
    const bool absent = options.absent_as_zero && !actual.contains(check.tensor);
    Tensor a;
    if (absent) {
      BT_ASSIGN_OR_RETURN(a, Tensor::Allocate(r.dtype(), r.shape()));
    } else {
      BT_ASSIGN_OR_RETURN(a, get(actual, check.tensor));
    }
    if (a.shape() != r.shape())
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", check.tensor, "' has shape ", ShapeToString(a.shape()),
          " in ", actual.path(), " but ",
          ref_name == check.tensor ? "" : absl::StrCat("'", ref_name, "' has "),
          ShapeToString(r.shape()), " in ", reference.path()));
    if (check.kind == TensorCheck::Kind::kEqual &&
        IsInteger(a.dtype()) != IsInteger(r.dtype()))
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", check.tensor, "': an exact check needs the same kind of "
          "dtype, got ", DTypeName(a.dtype()), " and ", DTypeName(r.dtype())));
    BT_ASSIGN_OR_RETURN(std::vector<double> av, ToDoubles(a, check.tensor));
    BT_ASSIGN_OR_RETURN(std::vector<double> rv, ToDoubles(r, check.tensor));
    std::vector<char> selected(av.size(), 1);
    std::string mask_name;
    if (check.where && check.kind != TensorCheck::Kind::kEqual) {
      mask_name = check.where->TensorFor(ref_name);
      BT_ASSIGN_OR_RETURN(Tensor m, get(masks, mask_name));
      if (m.shape() != r.shape())
        return absl::InvalidArgumentError(absl::StrCat(
            "mask '", mask_name, "' has shape ", ShapeToString(m.shape()),
            " in ", masks.path(), ", but the checked tensor '", check.tensor,
            "' has ", ShapeToString(r.shape())));
      BT_ASSIGN_OR_RETURN(std::vector<double> mv, ToDoubles(m, mask_name));
      for (size_t i = 0; i < mv.size(); ++i) {
        const double x = std::fabs(mv[i]) * check.where->factor;
        selected[i] = check.where->greater ? x > check.where->threshold
                                           : x <= check.where->threshold;
      }
    }
    TensorCheckResult res;
    res.check = check;
    res.elements = static_cast<int64_t>(av.size());
    double maxRef = 0.0;
    int64_t differing = 0;
    bool nan = false;
    for (size_t i = 0; i < av.size(); ++i) {
      if (!selected[i])
        continue;
      ++res.selected;
      double d = std::fabs(av[i] - rv[i]);
      if (std::isnan(d) && !(std::isnan(av[i]) && std::isnan(rv[i])))
        nan = true;
      if (av[i] != rv[i] && !(std::isnan(av[i]) && std::isnan(rv[i])))
        ++differing;
      if (!std::isnan(d))
        res.max_abs_diff = std::max(res.max_abs_diff, d);
      maxRef = std::max(maxRef, std::fabs(rv[i]));
    }
    std::string what;
    switch (check.kind) {
    case TensorCheck::Kind::kAbs:
      res.error = res.max_abs_diff;
      res.passed = !nan && res.error <= check.tolerance;
      what = absl::StrFormat("max|Δ| %.3e", res.error);
      break;
    case TensorCheck::Kind::kRel:
      res.error = maxRef > 0 ? res.max_abs_diff / maxRef
                             : (res.max_abs_diff > 0 ? INFINITY : 0.0);
      res.passed = !nan && res.error <= check.tolerance;
      what = absl::StrFormat("rel %.3e", res.error);
      break;
    case TensorCheck::Kind::kEqual:
      res.error = static_cast<double>(differing);
      res.passed = differing == 0;
      what = absl::StrFormat("%d of %d values differ", differing,
                             static_cast<int64_t>(av.size()));
      break;
    }
    if (check.where && check.kind != TensorCheck::Kind::kEqual) {
      ElementMask shown = *check.where;
      shown.tensor = mask_name;
      what += absl::StrFormat(" on %d of %d where %s", res.selected,
                              res.elements, shown.ToString());
    }
    if (check.kind == TensorCheck::Kind::kAbs)
      what += absl::StrFormat("  (atol %.0e)", check.tolerance);
    else if (check.kind == TensorCheck::Kind::kRel)
      what += absl::StrFormat("  (rtol %.0e; max|Δ| %.3e)", check.tolerance,
                              res.max_abs_diff);
    if (nan)
      what += "  (NaN where the reference has none)";
    if (absent)
      what = "absent = 0, " + what;
    const std::string label =
        ref_name == check.tensor ? check.tensor
                                 : absl::StrCat(check.tensor, " = ", ref_name);
    out << absl::StrFormat("%-24s %s  %s\n", label, what,
                           res.passed ? "OK" : "FAIL");
    results.push_back(res);
  }
  return results;
}

} // namespace bt::rt
