//===- model.cc - a loaded artifact, ready to run -------------------------===//

#include "bt/runtime/model.h"

#include <malloc.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/status_macros.h"

namespace bt::rt {
namespace {

std::string SpecShape(const proto::TensorSpec &s) {
  return ShapeToString(std::vector<int64_t>(s.shape().begin(), s.shape().end()));
}

} // namespace

namespace {

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

absl::StatusOr<std::unique_ptr<Model>> Model::Open(const std::string &path,
                                                   const CudaOptions &cuda) {
  TuneMallocForKernels();
  std::unique_ptr<Model> m(new Model());
  BT_ASSIGN_OR_RETURN(m->artifact_, Artifact::Open(path));
  const proto::Manifest &man = m->artifact_->manifest();
  if (man.target() != "cpu" && man.target() != "cuda")
    return absl::UnimplementedError(absl::StrCat(
        path, ": artifact target '", man.target(),
        "' is not supported by this runtime (it runs 'cpu' and 'cuda' "
        "artifacts)"));
  const bool on_gpu = man.target() == "cuda";
  if (man.entry_points_size() > 0) {
    if (man.kernels().size() == 0)
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": the artifact has entry points but no kernels section"));
    if (on_gpu && man.ptx().size() == 0)
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": the cuda artifact has entry points but no ptx section"));
  }
  if (on_gpu) {
    // The GPU first: without one, say so before anything else.
    absl::StatusOr<std::unique_ptr<CudaBackend>> gpu = CudaBackend::Open(cuda);
    if (!gpu.ok()) {
      // "no CUDA GPU found: ..." in every case (no driver, no device).
      std::string why(gpu.status().message());
      constexpr absl::string_view kNoDriver = "no CUDA driver found: ";
      if (absl::StartsWith(why, kNoDriver))
        why = absl::StrCat("the CUDA driver cannot be loaded: ",
                           why.substr(kNoDriver.size()));
      if (!absl::StartsWith(why, "no CUDA GPU found"))
        why = absl::StrCat("no CUDA GPU found: ", why);
      return absl::UnavailableError(absl::StrCat(
          path, ": this artifact runs on a CUDA GPU (target cuda",
          man.gpu_chip().empty() ? "" : ", ", man.gpu_chip(), "); ", why));
    }
    m->gpu_ = std::move(*gpu);
    m->gpu_mu_ = std::make_unique<std::mutex>();
    // The emulated device runs the kernels compiled for the host.
    const bool emulated = m->gpu_->emulated();
    if (emulated && man.entry_points_size() > 0 && man.cuda_emu().size() == 0)
      return absl::FailedPreconditionError(absl::StrCat(
          path, ": --device cuda-emu: the artifact has no cuda_emu section "
                "(the kernels for the CUDA emulator); compile it again with "
                "this bt-run"));
    if (man.ptx().size() > 0) {
      absl::Status s = m->gpu_->LoadModule(
          emulated ? m->artifact_->cuda_emu() : m->artifact_->ptx());
      if (!s.ok())
        return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
    }
    m->gpu_->MakeCurrent();
  }
  if (man.entry_points_size() > 0) {
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
      if (on_gpu) {
        absl::StatusOr<DeviceTensor> d = UploadTensor(*m->gpu_, t);
        if (!d.ok())
          return absl::Status(
              d.status().code(),
              absl::StrCat(path, ": uploading weight '", p,
                           "' to the GPU: ", d.status().message()));
        m->device_weights_.emplace(p, std::move(*d));
      }
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
  if (len_spec != nullptr && !len_spec->inout() &&
      len_spec->dtype() == proto::I64 && len_spec->shape_size() == 0) {
    const int64_t len = *inputs.at("cache_length").data_as<int64_t>();
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
  std::vector<const Tensor *> params, args;
  for (const std::string &p : ep->params()) {
    const Tensor &w = weights_.at(p);
    auto it = overrides ? overrides->find(p) : TensorMap::const_iterator();
    if (overrides == nullptr || it == overrides->end()) {
      params.push_back(&w);
      continue;
    }
    if (it->second.dtype() != w.dtype() || it->second.shape() != w.shape())
      return absl::InvalidArgumentError(absl::StrCat(
          "entry point '", entry, "': parameter '", p, "' replaced by ",
          it->second.DebugString(), ", expected ", w.DebugString()));
    params.push_back(&it->second);
  }
  for (const proto::TensorSpec &s : ep->inputs())
    args.push_back(FindArg(s, inputs, inouts));
  std::vector<Tensor> outs;
  if (gpu_ == nullptr) {
    BT_ASSIGN_OR_RETURN(outs,
                        CallEntryPoint(entries_.at(entry), *ep, params, args));
  } else {
    // The weights live on the device; a replaced one is uploaded for this
    // call. The host arguments are copied in and out by the call; in-out
    // buffers are writable tensors of `inouts`.
    std::vector<DeviceTensor> replaced;
    replaced.reserve(params.size());
    struct FreeReplaced {
      CudaBackend &gpu;
      std::vector<DeviceTensor> &ts;
      ~FreeReplaced() {
        for (const DeviceTensor &t : ts)
          (void)gpu.pool().Free(t.address);
      }
    } free_replaced{*gpu_, replaced};
    std::vector<const DeviceTensor *> dparams;
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string &p = ep->params(static_cast<int>(i));
      if (params[i] == &weights_.at(p)) {
        dparams.push_back(&device_weights_.at(p));
        continue;
      }
      BT_ASSIGN_OR_RETURN(DeviceTensor d, UploadTensor(*gpu_, *params[i]));
      replaced.push_back(std::move(d));
      dparams.push_back(&replaced.back());
    }
    std::vector<Tensor *> dargs;
    for (const Tensor *t : args)
      dargs.push_back(const_cast<Tensor *>(t)); // written back only if inout
    std::lock_guard<std::mutex> lock(*gpu_mu_);
    BT_ASSIGN_OR_RETURN(outs, CallDeviceEntryPoint(*gpu_, entries_.at(entry),
                                                   *ep, dparams, dargs));
  }
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

} // namespace bt::rt
