//===- model.cc - a loaded artifact, ready to run -------------------------===//

#include "bt/runtime/model.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/status_macros.h"

namespace bt::rt {
namespace {

std::string SpecShape(const proto::TensorSpec &s) {
  return ShapeToString(std::vector<int64_t>(s.shape().begin(), s.shape().end()));
}

} // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Open(const std::string &path) {
  std::unique_ptr<Model> m(new Model());
  BT_ASSIGN_OR_RETURN(m->artifact_, Artifact::Open(path));
  const proto::Manifest &man = m->artifact_->manifest();
  if (man.target() != "cpu")
    return absl::UnimplementedError(absl::StrCat(
        path, ": artifact target '", man.target(),
        "' is not supported by this runtime (it runs 'cpu' artifacts)"));
  if (man.entry_points_size() > 0) {
    if (man.kernels().size() == 0)
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": the artifact has entry points but no kernels section"));
    BT_ASSIGN_OR_RETURN(m->kernels_,
                        KernelLibrary::Load(m->artifact_->kernels(), path));
  }
  for (const proto::EntryPoint &ep : man.entry_points()) {
    BT_ASSIGN_OR_RETURN(KernelEntryFn fn, m->kernels_->Resolve(ep.symbol()));
    m->entries_[ep.name()] = fn;
    for (const std::string &p : ep.params()) {
      if (m->weights_.count(p))
        continue;
      BT_ASSIGN_OR_RETURN(Tensor t, m->artifact_->GetWeight(p));
      m->weights_.emplace(p, std::move(t));
    }
  }
  return m;
}

std::vector<std::string> Model::EntryPointNames() const {
  std::vector<std::string> names;
  for (const proto::EntryPoint &ep : manifest().entry_points())
    names.push_back(ep.name());
  return names;
}

absl::Status Model::CheckInputs(const proto::EntryPoint &ep,
                                const TensorMap &inputs) const {
  const std::string what = absl::StrCat("entry point '", ep.name(), "'");
  std::vector<std::string> expected;
  for (const proto::TensorSpec &s : ep.inputs())
    expected.push_back(s.name());
  for (const auto &[name, _] : inputs) {
    bool known = false;
    for (const proto::TensorSpec &s : ep.inputs())
      known |= s.name() == name;
    if (!known)
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": unexpected input '", name, "' (it takes ",
          expected.empty() ? "no inputs" : absl::StrJoin(expected, ", "), ")"));
  }
  for (const proto::TensorSpec &s : ep.inputs()) {
    auto it = inputs.find(s.name());
    if (it == inputs.end())
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": missing input '", s.name(), "' (",
                       DTypeName(s.dtype()), SpecShape(s), ")"));
    const Tensor &t = it->second;
    if (t.dtype() != s.dtype())
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": input '", s.name(), "' has dtype ",
                       DTypeName(t.dtype()), ", expected ",
                       DTypeName(s.dtype())));
    if (t.rank() != s.shape_size())
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": input '", s.name(), "' has shape ",
          ShapeToString(t.shape()), " of rank ", t.rank(), ", expected rank ",
          s.shape_size(), " ", SpecShape(s)));
    for (int i = 0; i < s.shape_size(); ++i)
      if (s.shape(i) >= 0 && t.dim(i) != s.shape(i))
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": input '", s.name(), "' has shape ",
            ShapeToString(t.shape()), ", expected ", SpecShape(s), " (dim ", i,
            " must be ", s.shape(i), ")"));
    if (t.nbytes() > 0 && t.data() == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": input '", s.name(), "' has no data"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> Model::Run(const std::string &entry,
                                     const TensorMap &inputs) const {
  const proto::EntryPoint *ep = FindEntryPoint(entry);
  if (ep == nullptr)
    return absl::NotFoundError(absl::StrCat(
        artifact_->path(), ": no entry point '", entry, "' (available: ",
        absl::StrJoin(EntryPointNames(), ", "), ")"));
  BT_RETURN_IF_ERROR(CheckInputs(*ep, inputs));
  std::vector<const Tensor *> params, args;
  for (const std::string &p : ep->params())
    params.push_back(&weights_.at(p));
  for (const proto::TensorSpec &s : ep->inputs())
    args.push_back(&inputs.at(s.name()));
  BT_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                      CallEntryPoint(entries_.at(entry), *ep, params, args));
  TensorMap result;
  for (int i = 0; i < ep->outputs_size(); ++i)
    result.emplace(ep->outputs(i).name(), std::move(outs[i]));
  return result;
}

} // namespace bt::rt
