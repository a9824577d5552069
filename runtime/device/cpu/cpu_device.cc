//===- cpu_device.cc - the CPU device --------------------------------------===//

#include "bt/runtime/device/cpu/cpu_device.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/device/cpu/small_gemm.h"
#include "bt/runtime/device/entry_call.h"
#include "cblas.h"

extern "C" {
// OpenBLAS's thread control (cblas.h of some versions lacks them).
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}

namespace bt::rt {
namespace {

// Kernel libraries leave their BLAS calls undefined and expect the loading
// process to provide them (docs/abi.md). Referencing OpenBLAS here keeps it a
// DT_NEEDED dependency of every binary that links the CPU device, even with
// --as-needed, so its symbols are in the global scope.
auto *volatile kKeepBlasLinked = &cblas_sgemm;

// The thread count of the last SetBlasThreads (0: none), applied again to
// an OpenMP runtime that a kernel library brings in later (LoadCode).
std::atomic<int> g_threads{0};

// omp_set_num_threads(threads) for the calling thread; false without an
// OpenMP runtime.
bool OmpSetNumThreads(int threads) {
  using SetFn = void (*)(int);
  auto set = reinterpret_cast<SetFn>(OmpSymbol("omp_set_num_threads"));
  if (set == nullptr)
    return false;
  set(threads);
  return true;
}

// Dense row-major descriptor words for `t`.
std::vector<int64_t> DescriptorFor(const Tensor &t) {
  return entry_call::DenseDescriptor(
      static_cast<int64_t>(
          reinterpret_cast<intptr_t>(const_cast<void *>(t.data()))),
      t.shape());
}

// CallEntryPoint with the params' descriptors `args` (ep.params() order)
// made by the caller; `what` names the entry point in errors.
absl::StatusOr<std::vector<Tensor>>
CallWithParams(KernelEntryFn fn, const proto::EntryPoint &ep,
               const std::string &what, std::vector<std::vector<int64_t>> args,
               absl::Span<const Tensor *const> inputs) {
  args.reserve(args.size() + inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    BT_RETURN_IF_ERROR(entry_call::CheckInput(what, ep.inputs(i), inputs[i]));
    args.push_back(DescriptorFor(*inputs[i]));
  }

  const std::vector<int64_t> result = entry_call::Invoke(fn, ep, args);
  const std::vector<const int64_t *> words =
      entry_call::OutputDescriptors(ep, result);

  // Take ownership of every returned buffer first, so that any error below
  // still frees them (once, even if outputs share a buffer).
  std::map<void *, std::shared_ptr<void>> owners;
  for (const int64_t *w : words) {
    void *allocated = reinterpret_cast<void *>(static_cast<intptr_t>(w[0]));
    if (allocated != nullptr && !owners.count(allocated))
      owners[allocated] =
          std::shared_ptr<void>(allocated, [](void *p) { std::free(p); });
  }

  std::vector<Tensor> outputs;
  for (int i = 0; i < ep.outputs_size(); ++i) {
    const proto::TensorSpec &o = ep.outputs(i);
    BT_ASSIGN_OR_RETURN(entry_call::OutputView v,
                        entry_call::ReadOutput(what, o, words[i]));
    void *allocated =
        reinterpret_cast<void *>(static_cast<intptr_t>(v.allocated));
    char *aligned = reinterpret_cast<char *>(static_cast<intptr_t>(v.aligned));
    char *data = aligned == nullptr
                     ? nullptr
                     : aligned + v.offset * static_cast<int64_t>(v.itemsize);
    if (v.numel == 0 || v.dense) {
      std::shared_ptr<void> owner =
          allocated ? owners[allocated] : std::shared_ptr<void>();
      if (owner == nullptr) {
        // Empty output without a buffer: give it an empty owning tensor.
        BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(o.dtype(), v.sizes));
        outputs.push_back(std::move(t));
      } else {
        outputs.push_back(
            Tensor::FromShared(o.dtype(), v.sizes, std::move(owner), data));
      }
    } else {
      BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(o.dtype(), v.sizes));
      entry_call::GatherStrided(data, static_cast<char *>(t.data()), v.itemsize,
                                v.sizes, v.strides);
      outputs.push_back(std::move(t));
    }
  }
  return outputs;
}

} // namespace

absl::StatusOr<std::vector<Tensor>>
CallEntryPoint(KernelEntryFn fn, const proto::EntryPoint &ep,
               absl::Span<const Tensor *const> params,
               absl::Span<const Tensor *const> inputs) {
  const std::string what = absl::StrCat("entry point '", ep.name(), "'");
  BT_RETURN_IF_ERROR(
      entry_call::CheckArity(what, fn, ep, params.size(), inputs.size()));
  std::vector<std::vector<int64_t>> args;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i] == nullptr || !params[i]->valid())
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": param '", ep.params(i), "' is missing"));
    args.push_back(DescriptorFor(*params[i]));
  }
  return CallWithParams(fn, ep, what, std::move(args), inputs);
}

//===----------------------------------------------------------------------===//
// CpuDevice
//===----------------------------------------------------------------------===//

std::string CpuDevice::Describe() const { return cpu_.empty() ? "cpu" : cpu_; }

absl::StatusOr<std::unique_ptr<KernelLibrary>>
CpuDevice::LoadCode(const Artifact &artifact) {
  if (kKeepBlasLinked == nullptr)
    return absl::InternalError("OpenBLAS is not linked");
  cpu_ = artifact.manifest().cpu();
  BT_ASSIGN_OR_RETURN(std::unique_ptr<KernelLibrary> lib,
                      KernelLibrary::Load(artifact.kernels(), artifact.path()));
  // A kernel library with parallel loops may have loaded libomp just now
  // (the static bt-launcher links none): give it the count --threads set,
  // which otherwise would run the kernels' loops on OMP_NUM_THREADS or
  // every core while OpenBLAS kept to the count.
  if (const int threads = g_threads.load(); threads > 0)
    OmpSetNumThreads(threads);
  return lib;
}

absl::StatusOr<DeviceTensor>
CpuDevice::Allocate(DType dtype, const std::vector<int64_t> &shape) {
  BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape));
  DeviceTensor d{reinterpret_cast<uintptr_t>(t.data()), dtype, shape};
  if (t.nbytes() == 0)
    d.address = 0;
  if (d.address != 0) {
    std::lock_guard<std::mutex> lock(mu_);
    allocations_.emplace(d.address, std::move(t));
  }
  return d;
}

absl::StatusOr<DeviceTensor> CpuDevice::Upload(const Tensor &t) {
  if (!t.valid())
    return absl::InvalidArgumentError("cpu: uploading an invalid tensor");
  return DeviceTensor{reinterpret_cast<uintptr_t>(t.data()), t.dtype(),
                      t.shape()};
}

absl::Status CpuDevice::Download(const DeviceTensor &src, Tensor &dst) {
  if (dst.dtype() != src.dtype || dst.shape() != src.shape)
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu: downloading ", DTypeName(src.dtype), ShapeToString(src.shape),
        " into ", dst.DebugString()));
  if (dst.nbytes() > 0 && reinterpret_cast<uintptr_t>(dst.data()) != src.address)
    std::memcpy(dst.data(), reinterpret_cast<const void *>(src.address),
                dst.nbytes());
  return absl::OkStatus();
}

absl::Status CpuDevice::CopyOnDevice(const DeviceTensor &src,
                                     const DeviceTensor &dst) {
  BT_ASSIGN_OR_RETURN(int64_t bytes, CheckCopy(src, dst));
  if (bytes > 0 && src.address != dst.address)
    std::memmove(reinterpret_cast<void *>(dst.address),
                 reinterpret_cast<const void *>(src.address),
                 static_cast<size_t>(bytes));
  return absl::OkStatus();
}

void CpuDevice::Release(const DeviceTensor &t) {
  std::lock_guard<std::mutex> lock(mu_);
  allocations_.erase(t.address);
}

absl::StatusOr<std::vector<Tensor>>
CpuDevice::Call(KernelEntryFn fn, const proto::EntryPoint &ep,
                absl::Span<const DeviceTensor *const> params,
                absl::Span<Tensor *const> args) {
  const std::string what = absl::StrCat("entry point '", ep.name(), "'");
  BT_RETURN_IF_ERROR(
      entry_call::CheckArity(what, fn, ep, params.size(), args.size()));
  std::vector<std::vector<int64_t>> descriptors;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i] == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": param '", ep.params(i), "' is missing"));
    descriptors.push_back(entry_call::DenseDescriptor(
        static_cast<int64_t>(params[i]->address), params[i]->shape));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (constant_spans_ > 0)
      for (const DeviceTensor *p : params) {
        absl::StatusOr<int64_t> elements = NumElements(p->shape);
        if (p->dtype == DType::F32 && elements.ok())
          RegisterConstantWeights(reinterpret_cast<const void *>(p->address),
                                  static_cast<size_t>(*elements) * sizeof(float));
      }
  }
  std::vector<const Tensor *> inputs(args.begin(), args.end());
  return CallWithParams(fn, ep, what, std::move(descriptors), inputs);
}

void CpuDevice::BeginConstantParams() {
  std::lock_guard<std::mutex> lock(mu_);
  ++constant_spans_;
}

void CpuDevice::EndConstantParams() {
  std::lock_guard<std::mutex> lock(mu_);
  if (constant_spans_ > 0 && --constant_spans_ == 0)
    ReleaseConstantWeights();
}

namespace {
// The OpenBLAS thread count MatchBlasThreadsToTeam lowered to 1 inside an
// OpenMP team (0: none), restored by its first call outside one and
// forgotten by SetBlasThreads.
std::atomic<int> g_team_lowered_blas_threads{0};
} // namespace

void MatchBlasThreadsToTeam(bool in_team) {
  static const bool threaded = openblas_get_parallel() == OPENBLAS_THREAD;
  if (!threaded)
    return;
  if (in_team) {
    if (const int t = openblas_get_num_threads(); t > 1) {
      int none = 0;
      g_team_lowered_blas_threads.compare_exchange_strong(none, t);
      openblas_set_num_threads(1);
    }
  } else if (g_team_lowered_blas_threads.load(std::memory_order_relaxed) > 0) {
    if (const int t = g_team_lowered_blas_threads.exchange(0); t > 0)
      openblas_set_num_threads(t);
  }
}

int SetBlasThreads(int threads) {
  if (threads > 0) {
    g_team_lowered_blas_threads.store(0);
    g_threads.store(threads);
    OmpSetNumThreads(threads);
    openblas_set_num_threads(threads);
  }
  return openblas_get_num_threads();
}

int CpuDevice::SetThreads(int threads) {
  const int blas = SetBlasThreads(threads);
  const int omp = OmpThreads();
  return omp > 0 ? omp : blas;
}

void *OmpSymbol(const char *name) {
  if (void *f = ::dlsym(RTLD_DEFAULT, name))
    return f;
  // The reference RTLD_NOLOAD takes is kept: callers cache what they find
  // (small_gemm.cc), so libomp must stay loaded.
  void *omp = ::dlopen("libomp.so.5", RTLD_LAZY | RTLD_NOLOAD);
  return omp != nullptr ? ::dlsym(omp, name) : nullptr;
}

int OmpThreads() {
  using GetFn = int (*)();
  auto get = reinterpret_cast<GetFn>(OmpSymbol("omp_get_max_threads"));
  return get != nullptr ? get() : 0;
}

} // namespace bt::rt
