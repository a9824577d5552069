//===- model.cc - a loaded artifact, ready to run -------------------------===//

#include "bt/runtime/exec/model.h"

#include <malloc.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/base/status_macros.h"

namespace bt::rt {
namespace {

std::string SpecShape(const proto::TensorSpec &s) {
  return ShapeToString(std::vector<int64_t>(s.shape().begin(), s.shape().end()));
}

} // namespace

namespace {

/// Weight `w` as entry point `ep` takes parameter `i`: as stored, or rounded
/// to bf16 where the manifest's `param_dtypes` says BF16 (a CUDA artifact
/// of `--dtype bf16`; bt-bf16-gemms). Errors: InvalidArgument for another
/// dtype or a weight that is not floating point.
/// The dtype entry point `ep` takes parameter `i` in, for a weight stored
/// as `stored` (EntryPoint.param_dtypes; empty: as stored).
proto::DType ParamDType(const proto::EntryPoint &ep, int i,
                        proto::DType stored) {
  return i < ep.param_dtypes_size() ? ep.param_dtypes(i) : stored;
}

absl::StatusOr<Tensor> AsParamDType(const Tensor &w, const proto::EntryPoint &ep,
                                    int i) {
  if (ParamDType(ep, i, w.dtype()) == w.dtype())
    return Tensor::Borrow(w.dtype(), w.shape(), const_cast<void *>(w.data()));
  if (ep.param_dtypes(i) == proto::BF16)
    return ConvertToBf16(w, ep.params(i));
  return absl::InvalidArgumentError(absl::StrCat(
      "entry point '", ep.name(), "': parameter '", ep.params(i), "' is ",
      DTypeName(w.dtype()), ", the kernels take ",
      DTypeName(ep.param_dtypes(i)), " (expected the same or BF16)"));
}

/// Kernels malloc their temporaries and outputs (docs/abi.md) and free them
/// before returning; with glibc's defaults every large buffer is a fresh
/// mmap (page faults on each call, ~1.6x slower forwards measured on a
/// 2-layer D=1024 stack) and a trimmed heap. Keep large blocks in the heap:
///  - M_MMAP_MAX 0: never mmap. (glibc refuses an M_MMAP_THRESHOLD above
///    HEAP_MAX_SIZE / 2 = 32 MiB, so a threshold cannot keep e.g. the
///    817 MiB logits of a batch-8 forward of block_main_b4_5 off mmap.)
///  - M_TRIM_THRESHOLD -1 (glibc stores it as size_t: SIZE_MAX): never give
///    the top of the heap back, so the next call finds its pages mapped (a
///    1 GiB threshold was below the 2 GiB that batch-8 forward frees at its
///    end: ~470k page faults per call, ~40% of its time in the kernel).
/// Memory stays at the peak of the largest call, as with a caching allocator.
void TuneMallocForKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, -1);
  });
}

} // namespace

absl::StatusOr<std::unique_ptr<Model>>
Model::Open(const std::string &path, const DeviceOptions &options) {
  BT_ASSIGN_OR_RETURN(std::shared_ptr<const Artifact> artifact,
                      Artifact::Open(path));
  return Open(std::move(artifact), options);
}

absl::StatusOr<std::unique_ptr<Model>>
Model::Open(std::shared_ptr<const Artifact> artifact,
            const DeviceOptions &options) {
  TuneMallocForKernels();
  std::unique_ptr<Model> m(new Model());
  m->artifact_ = std::move(artifact);
  const Artifact &a = *m->artifact_;
  BT_ASSIGN_OR_RETURN(m->device_, OpenDeviceFor(a, options));
  if (a.manifest().entry_points_size() > 0) {
    BT_ASSIGN_OR_RETURN(m->kernels_, m->device_->LoadCode(a));
  }
  for (const proto::EntryPoint &ep : a.manifest().entry_points()) {
    BT_ASSIGN_OR_RETURN(KernelEntryFn fn, m->kernels_->Resolve(ep.symbol()));
    m->entries_[ep.name()] = fn;
    for (int i = 0; i < ep.params_size(); ++i) {
      const std::string &p = ep.params(i);
      if (auto it = m->resident_.find(p); it != m->resident_.end()) {
        // One device copy per weight: every entry point takes it alike.
        const proto::DType want =
            ParamDType(ep, i, m->weights_.at(p).dtype());
        if (it->second.dtype != want)
          return absl::InvalidArgumentError(absl::StrCat(
              a.path(), ": entry point '", ep.name(), "' takes parameter '",
              p, "' as ", DTypeName(want), ", another entry point as ",
              DTypeName(it->second.dtype),
              " (one device copy per weight; a compiler bug)"));
        continue;
      }
      BT_ASSIGN_OR_RETURN(Tensor t, a.GetWeight(p));
      BT_ASSIGN_OR_RETURN(Tensor passed, AsParamDType(t, ep, i));
      absl::StatusOr<DeviceTensor> d = m->device_->Upload(passed);
      if (!d.ok())
        return absl::Status(
            d.status().code(),
            absl::StrCat(a.path(), ": uploading weight '", p, "' to device ",
                         m->device_->name(), ": ", d.status().message()));
      m->resident_.emplace(p, std::move(*d));
      m->weights_.emplace(p, std::move(t));
    }
  }
  return m;
}

Model::~Model() {
  if (device_ == nullptr)
    return;
  for (const auto &[name, t] : resident_)
    device_->Release(t);
}

std::vector<std::string> Model::EntryPointNames() const {
  std::vector<std::string> names;
  for (const proto::EntryPoint &ep : manifest().entry_points())
    names.push_back(ep.name());
  return names;
}

namespace {

// Symbolic dims (TensorSpec.dim_names): every name must have one size across
// `specs`/`tensors`. `sizes` carries the sizes seen so far (inputs, then
// outputs) and `seen` where each was first seen.
absl::Status CheckDimNames(const std::string &what, const char *kind,
                           const proto::TensorSpec &s, const Tensor &t,
                           std::map<std::string, std::pair<int64_t, std::string>> &sizes) {
  for (int i = 0; i < s.dim_names_size() && i < t.rank(); ++i) {
    const std::string &n = s.dim_names(i);
    if (n.empty())
      continue;
    const std::string here = absl::StrCat(kind, " '", s.name(), "' dim ", i);
    auto [it, inserted] = sizes.emplace(n, std::make_pair(t.dim(i), here));
    if (!inserted && it->second.first != t.dim(i))
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", here, " (", n, " = ", t.dim(i), ") disagrees with ",
          it->second.second, " (", n, " = ", it->second.first, ")"));
  }
  return absl::OkStatus();
}

// Value ranges of the token tensors of docs/abi.md's entry points, which the
// kernels use as indices: ids in [0, V), labels in [0, V) or -100 (ignored),
// masks 0/1.
absl::Status CheckTokenValues(const std::string &what, const std::string &name,
                              const Tensor &t, int64_t vocab) {
  if (t.dtype() != proto::I64)
    return absl::OkStatus();
  const bool ids = name == "input_ids", labels = name == "labels";
  const bool mask = name == "attention_mask" || name == "block_attention_mask";
  if (!ids && !labels && !mask)
    return absl::OkStatus();
  if ((ids || labels) && vocab <= 0)
    return absl::OkStatus();
  const int64_t *p = t.data_as<int64_t>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const int64_t v = p[i];
    bool ok = mask ? (v == 0 || v == 1)
                   : ((v >= 0 && v < vocab) || (labels && v == -100));
    if (!ok)
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": input '", name, "' has value ", v, " at flat index ", i,
          ", expected ",
          mask ? "0 or 1"
               : absl::StrCat("a token id in [0, ", vocab, ")",
                              labels ? " or -100" : "")));
  }
  return absl::OkStatus();
}

} // namespace

namespace {

// The argument of spec `s` in `inputs` or `inouts`, or nullptr.
const Tensor *FindArg(const proto::TensorSpec &s, const TensorMap &inputs,
                      const TensorMap *inouts) {
  const TensorMap *m = s.inout() ? inouts : &inputs;
  if (m == nullptr)
    return nullptr;
  auto it = m->find(s.name());
  return it == m->end() ? nullptr : &it->second;
}

const char *ArgKind(const proto::TensorSpec &s) {
  return s.inout() ? "in-out" : "input";
}

} // namespace

absl::Status Model::CheckInputs(const proto::EntryPoint &ep,
                                const TensorMap &inputs,
                                const TensorMap *inouts) const {
  const std::string what = absl::StrCat("entry point '", ep.name(), "'");
  std::vector<std::string> expected;
  for (const proto::TensorSpec &s : ep.inputs())
    expected.push_back(s.name());
  auto find_spec = [&](const std::string &name) -> const proto::TensorSpec * {
    for (const proto::TensorSpec &s : ep.inputs())
      if (s.name() == name)
        return &s;
    return nullptr;
  };
  for (bool inout : {false, true}) {
    const TensorMap *m = inout ? inouts : &inputs;
    if (m == nullptr)
      continue;
    for (const auto &[name, _] : *m) {
      const proto::TensorSpec *s = find_spec(name);
      if (s == nullptr)
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": unexpected ", inout ? "in-out argument" : "input", " '",
            name, "' (it takes ",
            expected.empty() ? "no inputs" : absl::StrJoin(expected, ", "),
            ")"));
      if (s->inout() != inout)
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": '", name, "' is ",
            s->inout() ? "an in-out argument (a writable buffer the kernel "
                         "updates in place); pass it as one"
                       : "a read-only input, not an in-out argument"));
    }
  }
  for (const proto::TensorSpec &s : ep.inputs()) {
    const Tensor *t = FindArg(s, inputs, inouts);
    const std::string arg = absl::StrCat(ArgKind(s), " '", s.name(), "'");
    if (t == nullptr)
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": missing ", s.inout() ? "in-out argument" : "input", " '",
          s.name(), "' (", DTypeName(s.dtype()), SpecShape(s),
          s.inout() ? "; a writable buffer owned by the caller" : "", ")"));
    if (t->dtype() != s.dtype())
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", arg, " has dtype ", DTypeName(t->dtype()),
                       ", expected ", DTypeName(s.dtype())));
    if (t->rank() != s.shape_size())
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", arg, " has shape ", ShapeToString(t->shape()),
          " of rank ", t->rank(), ", expected rank ", s.shape_size(), " ",
          SpecShape(s)));
    for (int i = 0; i < s.shape_size(); ++i)
      if (s.shape(i) >= 0 && t->dim(i) != s.shape(i))
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": ", arg, " has shape ", ShapeToString(t->shape()),
            ", expected ", SpecShape(s), " (dim ", i, " must be ", s.shape(i),
            ")"));
    if (t->nbytes() > 0 && t->data() == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", arg, " has no data"));
  }
  std::map<std::string, std::pair<int64_t, std::string>> sizes;
  for (const proto::TensorSpec &s : ep.inputs())
    BT_RETURN_IF_ERROR(CheckDimNames(what, ArgKind(s), s,
                                     *FindArg(s, inputs, inouts), sizes));
  for (const proto::TensorSpec &s : ep.inputs())
    if (!s.inout())
      BT_RETURN_IF_ERROR(CheckTokenValues(what, s.name(), inputs.at(s.name()),
                                          config().vocab_size()));

  // In-out buffers are written: they must not overlap another argument.
  for (const proto::TensorSpec &s : ep.inputs()) {
    if (!s.inout())
      continue;
    const Tensor &io = inouts->at(s.name());
    const char *b = static_cast<const char *>(io.data());
    for (const proto::TensorSpec &o : ep.inputs()) {
      if (&o == &s)
        continue;
      const Tensor &t = *FindArg(o, inputs, inouts);
      const char *c = static_cast<const char *>(t.data());
      if (io.nbytes() > 0 && t.nbytes() > 0 && b < c + t.nbytes() &&
          c < b + io.nbytes())
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": in-out argument '", s.name(), "' overlaps ", ArgKind(o),
            " '", o.name(), "' (in-out buffers must not alias other arguments)"));
    }
  }

  // Cache bounds: the call writes entries [cache_length, cache_length + S).
  const proto::TensorSpec *len_spec = find_spec("cache_length");
  // An in-out cache_length (the CUDA target's device length) is checked
  // here too: its compiled code does not check the capacity.
  if (len_spec != nullptr && len_spec->dtype() == proto::I64 &&
      len_spec->shape_size() == 0) {
    const int64_t len =
        *FindArg(*len_spec, inputs, inouts)->data_as<int64_t>();
    int64_t appended = 0;
    auto ids = inputs.find("input_ids");
    if (ids != inputs.end() && ids->second.rank() >= 2)
      appended = ids->second.dim(1);
    if (len < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": cache_length is ", len, ", expected >= 0"));
    for (const proto::TensorSpec &s : ep.inputs()) {
      if (!s.inout())
        continue;
      const Tensor &t = inouts->at(s.name());
      int cap_dim = -1;
      for (int i = 0; i < s.dim_names_size(); ++i)
        if (s.dim_names(i) == "C")
          cap_dim = i;
      if (s.dim_names_size() == 0) {
        if (s.name() == "kv_valid" && t.rank() >= 2)
          cap_dim = 1;
        else if (s.name() == "kv_cache" && t.rank() >= 2)
          cap_dim = static_cast<int>(t.rank()) - 2;
      }
      if (cap_dim < 0)
        continue;
      if (len + appended > t.dim(cap_dim))
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": cache_length ", len, " + ", appended,
            " new entries exceed in-out '", s.name(), "' capacity C = ",
            t.dim(cap_dim)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> Model::Run(const std::string &entry,
                                     const TensorMap &inputs,
                                     TensorMap *inouts,
                                     const TensorMap *overrides) const {
  const proto::EntryPoint *ep = FindEntryPoint(entry);
  if (ep == nullptr)
    return absl::NotFoundError(absl::StrCat(
        artifact_->path(), ": no entry point '", entry, "' (available: ",
        absl::StrJoin(EntryPointNames(), ", "), ")"));
  BT_RETURN_IF_ERROR(CheckInputs(*ep, inputs, inouts));
  // The params on the device: the resident weights, or a replacement made
  // resident for this call (on the CPU a view: no copy).
  std::vector<DeviceTensor> replaced;
  replaced.reserve(ep->params_size());
  struct ReleaseReplaced {
    Device &device;
    std::vector<DeviceTensor> &ts;
    ~ReleaseReplaced() {
      for (const DeviceTensor &t : ts)
        device.Release(t);
    }
  } release_replaced{*device_, replaced};
  std::vector<const DeviceTensor *> params;
  for (int i = 0; i < ep->params_size(); ++i) {
    const std::string &p = ep->params(i);
    auto it = overrides ? overrides->find(p) : TensorMap::const_iterator();
    if (overrides == nullptr || it == overrides->end()) {
      params.push_back(&resident_.at(p));
      continue;
    }
    const Tensor &w = weights_.at(p);
    if (it->second.dtype() != w.dtype() || it->second.shape() != w.shape())
      return absl::InvalidArgumentError(absl::StrCat(
          "entry point '", entry, "': parameter '", p, "' replaced by ",
          it->second.DebugString(), ", expected ", w.DebugString()));
    BT_ASSIGN_OR_RETURN(Tensor passed, AsParamDType(it->second, *ep, i));
    BT_ASSIGN_OR_RETURN(DeviceTensor d, device_->Upload(passed));
    replaced.push_back(std::move(d));
    params.push_back(&replaced.back());
  }
  std::vector<Tensor *> args;
  for (const proto::TensorSpec &s : ep->inputs()) // written only if in-out
    args.push_back(const_cast<Tensor *>(FindArg(s, inputs, inouts)));
  BT_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                      device_->Call(entries_.at(entry), *ep, params, args));
  // Outputs must agree with the symbolic dims of the arguments (a kernel bug
  // otherwise).
  const std::string what = absl::StrCat("entry point '", entry, "'");
  std::map<std::string, std::pair<int64_t, std::string>> sizes;
  for (const proto::TensorSpec &s : ep->inputs())
    BT_RETURN_IF_ERROR(CheckDimNames(what, ArgKind(s), s,
                                     *FindArg(s, inputs, inouts), sizes));
  for (int i = 0; i < ep->outputs_size(); ++i)
    BT_RETURN_IF_ERROR(CheckDimNames(what, "output", ep->outputs(i), outs[i], sizes));
  TensorMap result;
  for (int i = 0; i < ep->outputs_size(); ++i)
    result.emplace(ep->outputs(i).name(), std::move(outs[i]));
  return result;
}

absl::StatusOr<const proto::EntryPoint *>
Model::Entry(const std::string &entry) const {
  const proto::EntryPoint *ep = FindEntryPoint(entry);
  if (ep == nullptr)
    return absl::NotFoundError(absl::StrCat(
        artifact_->path(), ": no entry point '", entry, "' (available: ",
        absl::StrJoin(EntryPointNames(), ", "), ")"));
  return ep;
}

std::vector<const DeviceTensor *>
Model::ResidentParams(const proto::EntryPoint &ep) const {
  std::vector<const DeviceTensor *> params;
  for (const std::string &p : ep.params())
    params.push_back(&resident_.at(p));
  return params;
}

absl::StatusOr<std::vector<DeviceArg>> Model::ResidentArgs(
    const proto::EntryPoint &ep, const TensorMap &inputs,
    const std::map<std::string, const DeviceTensor *> &resident) const {
  std::vector<DeviceArg> args;
  for (const proto::TensorSpec &s : ep.inputs()) {
    auto h = inputs.find(s.name());
    auto d = resident.find(s.name());
    const bool on_host = h != inputs.end(), on_device = d != resident.end();
    if (on_host == on_device)
      return absl::InvalidArgumentError(absl::StrCat(
          "entry point '", ep.name(), "': input '", s.name(), "' is ",
          on_host ? "both a host and a resident argument" : "missing"));
    DeviceArg a;
    if (on_host)
      a.host = const_cast<Tensor *>(&h->second); // written only if in-out
    else
      a.device = d->second;
    args.push_back(a);
  }
  return args;
}

absl::StatusOr<std::map<std::string, DeviceTensor>>
Model::RunResident(const std::string &entry, const TensorMap &inputs,
                   const std::map<std::string, const DeviceTensor *> &resident) const {
  BT_ASSIGN_OR_RETURN(const proto::EntryPoint *ep, Entry(entry));
  const std::vector<const DeviceTensor *> params = ResidentParams(*ep);
  BT_ASSIGN_OR_RETURN(std::vector<DeviceArg> args,
                      ResidentArgs(*ep, inputs, resident));
  BT_ASSIGN_OR_RETURN(std::vector<DeviceTensor> outs,
                      device_->CallResident(entries_.at(entry), *ep, params, args));
  std::map<std::string, DeviceTensor> result;
  for (int i = 0; i < ep->outputs_size(); ++i)
    result.emplace(ep->outputs(i).name(), std::move(outs[i]));
  return result;
}

absl::StatusOr<std::unique_ptr<Model::RecordedEntry>>
Model::RecordResident(const std::string &entry, const TensorMap &inputs,
                      const std::map<std::string, const DeviceTensor *> &resident) const {
  BT_ASSIGN_OR_RETURN(const proto::EntryPoint *ep, Entry(entry));
  const std::vector<const DeviceTensor *> params = ResidentParams(*ep);
  BT_ASSIGN_OR_RETURN(std::vector<DeviceArg> args,
                      ResidentArgs(*ep, inputs, resident));
  auto rec = std::unique_ptr<RecordedEntry>(new RecordedEntry());
  rec->model_ = this;
  rec->ep_ = ep;
  BT_ASSIGN_OR_RETURN(rec->call_, device_->RecordResident(entries_.at(entry),
                                                          *ep, params, args));
  return rec;
}

absl::Status Model::RecordedEntry::Replay(
    const TensorMap &inputs,
    const std::map<std::string, const DeviceTensor *> &resident) {
  BT_ASSIGN_OR_RETURN(std::vector<DeviceArg> args,
                      model_->ResidentArgs(*ep_, inputs, resident));
  return call_->Replay(args);
}

std::map<std::string, DeviceTensor> Model::RecordedEntry::outputs() const {
  std::map<std::string, DeviceTensor> result;
  for (int i = 0; i < ep_->outputs_size(); ++i)
    result.emplace(ep_->outputs(i).name(), call_->outputs()[i]);
  return result;
}

} // namespace bt::rt
