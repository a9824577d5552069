//===- cuda.cc - CUDA backend: the driver API via dlopen ------------------===//
//
// See bt/runtime/device/cuda/cuda.h. Only the driver entry points the
// runtime needs are declared (cuda_driver.h: their C signatures from cuda.h
// of CUDA 12/13), so the runtime builds without the CUDA toolkit and runs
// without a driver. The GEMMs (cuBLAS, cuBLASLt) are in cuda_blas.cc.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/device/cuda/cuda.h"
#include "bt/runtime/device/cuda/cuda_driver.h"

#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/base/status_macros.h"

namespace bt::rt {

namespace {

std::atomic<CudaBackend *> g_current{nullptr};

} // namespace

std::string EnvOr(const char *name, const std::string &fallback) {
  const char *v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

SymbolLookup DlsymIn(void *library) {
  return [library](const char *name) { return ::dlsym(library, name); };
}

namespace {

// Every driver entry point of `d` from `lookup`; returns the names missing.
std::vector<std::string> ResolveDriver(const SymbolLookup &lookup,
                                       CudaDriver &d) {
  std::vector<std::string> missing;
#define BT_RESOLVE(fn)                                                         \
  if (!Resolve(lookup, #fn, d.fn))                                             \
    missing.push_back(#fn);
  BT_RESOLVE(cuInit)
  BT_RESOLVE(cuDriverGetVersion)
  BT_RESOLVE(cuDeviceGetCount)
  BT_RESOLVE(cuDeviceGet)
  BT_RESOLVE(cuDeviceGetName)
  BT_RESOLVE(cuDeviceTotalMem_v2)
  BT_RESOLVE(cuDeviceGetAttribute)
  BT_RESOLVE(cuDevicePrimaryCtxRetain)
  BT_RESOLVE(cuDevicePrimaryCtxRelease_v2)
  BT_RESOLVE(cuCtxSetCurrent)
  BT_RESOLVE(cuStreamCreate)
  BT_RESOLVE(cuStreamDestroy_v2)
  BT_RESOLVE(cuStreamSynchronize)
  BT_RESOLVE(cuModuleLoadDataEx)
  BT_RESOLVE(cuModuleUnload)
  BT_RESOLVE(cuModuleGetFunction)
  BT_RESOLVE(cuLaunchKernel)
  BT_RESOLVE(cuMemAlloc_v2)
  BT_RESOLVE(cuMemFree_v2)
  BT_RESOLVE(cuMemcpyDtoH_v2)
  BT_RESOLVE(cuMemcpyHtoD_v2)
  BT_RESOLVE(cuMemsetD8Async)
  BT_RESOLVE(cuGetErrorName)
#undef BT_RESOLVE
  Resolve(lookup, "cuStreamBeginCapture_v2", d.cuStreamBeginCapture_v2);
  Resolve(lookup, "cuStreamEndCapture", d.cuStreamEndCapture);
  Resolve(lookup, "cuGraphGetNodes", d.cuGraphGetNodes);
  Resolve(lookup, "cuGraphInstantiateWithFlags", d.cuGraphInstantiateWithFlags);
  Resolve(lookup, "cuGraphLaunch", d.cuGraphLaunch);
  Resolve(lookup, "cuGraphExecDestroy", d.cuGraphExecDestroy);
  Resolve(lookup, "cuGraphDestroy", d.cuGraphDestroy);
  Resolve(lookup, "cuMemcpyDtoDAsync_v2", d.cuMemcpyDtoDAsync_v2);
  return missing;
}

// The driver API: from options.symbols when set, else dlopen of `path`.
absl::StatusOr<std::unique_ptr<CudaDriver>>
LoadDriver(const std::string &path, const CudaOptions &options) {
  auto d = std::make_unique<CudaDriver>();
  SymbolLookup lookup = options.symbols;
  if (lookup) {
    d->path = options.symbols_name.empty() ? "an in-process driver"
                                           : options.symbols_name;
  } else {
    d->path = path;
    ::dlerror();
    d->library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (d->library == nullptr) {
      const char *e = ::dlerror();
      return absl::NotFoundError(absl::StrCat(
          "no CUDA driver found: dlopen(", path, "): ",
          e ? e : "unknown error",
          " (the NVIDIA driver's libcuda.so.1 is needed to run on a GPU)"));
    }
    lookup = DlsymIn(d->library);
  }
  std::vector<std::string> missing = ResolveDriver(lookup, *d);
  if (!missing.empty())
    return absl::NotFoundError(
        absl::StrCat("CUDA driver ", d->path, " lacks ",
                     absl::StrJoin(missing, ", "), " (too old?)"));
  return d;
}

} // namespace

[[noreturn]] void Die(absl::string_view what, const absl::Status &s) {
  std::fprintf(stderr, "bt: %.*s: %s\n", static_cast<int>(what.size()),
               what.data(), std::string(s.message()).c_str());
  std::fflush(stderr);
  // The emulated device has reported what failed (docs/cuda-emulator.md):
  // exit status 1, without the crash of an abort.
  if (CudaBackend *b = CudaBackend::Current(); b != nullptr && b->emulated())
    std::_Exit(1);
  std::abort();
}

namespace {
/// The entry-point call in progress on this thread (RunHostCode): where an
/// allocation failure of its host code returns to, the blocks the host code
/// holds, and the failure. Thread-local, so that nothing setjmp's caller
/// keeps on its stack changes between setjmp and longjmp.
struct HostCall {
  std::jmp_buf env;
  bool active = false;
  absl::flat_hash_set<uint64_t> blocks;
  absl::Status failure;
};
thread_local HostCall t_host_call;
} // namespace

CudaBackend &CurrentOrDie(const char *fn) {
  CudaBackend *b = CudaBackend::Current();
  if (b == nullptr)
    Die(fn, absl::FailedPreconditionError(
                "no CUDA backend is active (the CUDA target's kernels run only "
                "in a runtime that opened a GPU)"));
  return *b;
}

//===----------------------------------------------------------------------===//
// CudaDeviceInfo, DevicePool
//===----------------------------------------------------------------------===//

std::string CudaDeviceInfo::Describe() const {
  return absl::StrFormat("%s (sm_%d%d, %.1f GiB, CUDA driver %d.%d)", name,
                         cc_major, cc_minor,
                         static_cast<double>(total_memory) / (1ull << 30),
                         driver_version / 1000, (driver_version % 1000) / 10);
}

DevicePool::DevicePool(AllocFn alloc, FreeFn free, bool caching)
    : alloc_(std::move(alloc)), free_(std::move(free)), caching_(caching) {}

DevicePool::~DevicePool() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto &[size, address] : cached_)
    free_(address);
  for (auto &[address, size] : in_use_)
    free_(address);
}

uint64_t DevicePool::Rounded(uint64_t bytes) {
  constexpr uint64_t kSmall = 256, kLarge = 1ull << 20;
  if (bytes <= kLarge)
    return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

absl::StatusOr<uint64_t> DevicePool::Allocate(int64_t bytes) {
  if (bytes < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("device allocation of ", bytes, " bytes"));
  if (bytes == 0)
    return 0;
  uint64_t size = caching_ ? Rounded(static_cast<uint64_t>(bytes))
                          : static_cast<uint64_t>(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cached_.find(size);
  if (it != cached_.end()) {
    uint64_t address = it->second;
    cached_.erase(it);
    bytes_cached_ -= size;
    in_use_[address] = size;
    bytes_in_use_ += size;
    return address;
  }
  absl::StatusOr<uint64_t> address = alloc_(size);
  ++device_allocations_;
  if (!address.ok() && !cached_.empty()) {
    // Release the cache and retry once.
    for (auto &[s, a] : cached_)
      free_(a);
    device_frees_ += static_cast<int64_t>(cached_.size());
    cached_.clear();
    bytes_cached_ = 0;
    address = alloc_(size);
    ++device_allocations_;
  }
  if (!address.ok())
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", bytes, " bytes of device memory (", size,
        " with rounding; ", bytes_in_use_, " bytes in use): ",
        address.status().message()));
  in_use_[*address] = size;
  bytes_in_use_ += size;
  return *address;
}

absl::Status DevicePool::Free(uint64_t address) {
  if (address == 0)
    return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_use_.find(address);
  if (it == in_use_.end())
    return absl::InvalidArgumentError(absl::StrFormat(
        "bt_gpu_free(0x%x): not a block of the device memory pool (never "
        "allocated, or freed twice)",
        address));
  uint64_t size = it->second;
  in_use_.erase(it);
  bytes_in_use_ -= size;
  if (!caching_) {
    free_(address);
    ++device_frees_;
    return absl::OkStatus();
  }
  cached_.emplace(size, address);
  bytes_cached_ += size;
  return absl::OkStatus();
}

void DevicePool::Trim() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto &[size, address] : cached_)
    free_(address);
  device_frees_ += static_cast<int64_t>(cached_.size());
  cached_.clear();
  bytes_cached_ = 0;
}

int64_t DevicePool::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_in_use_;
}
int64_t DevicePool::bytes_cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_cached_;
}
int64_t DevicePool::device_allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return device_allocations_;
}
int64_t DevicePool::device_frees() const {
  std::lock_guard<std::mutex> lock(mu_);
  return device_frees_;
}

//===----------------------------------------------------------------------===//
// CudaBackend
//===----------------------------------------------------------------------===//

absl::Status CudaBackend::Check(int result, absl::string_view what) const {
  if (result == kCudaSuccess)
    return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, " failed: ", driver_->ErrorName(result)));
}

absl::StatusOr<std::unique_ptr<CudaBackend>>
CudaBackend::Open(const CudaOptions &options) {
  std::string path = options.driver_library.empty()
                         ? EnvOr("BT_CUDA_DRIVER", "libcuda.so.1")
                         : options.driver_library;
  BT_ASSIGN_OR_RETURN(std::unique_ptr<CudaDriver> driver,
                      LoadDriver(path, options));
  const bool emulated = options.emulated;
  if (options.symbols)
    path = driver->path;
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  b->driver_ = std::move(driver);
  CudaDriver &d = *b->driver_;
  auto unavailable = [&](CUresult r, absl::string_view what) {
    return absl::UnavailableError(
        absl::StrCat("no CUDA GPU found: ", what, " failed with ",
                     d.ErrorName(r), " (driver ", path, ")"));
  };
  if (CUresult r = d.cuInit(0); r != kCudaSuccess)
    return unavailable(r, "cuInit");
  int count = 0;
  if (CUresult r = d.cuDeviceGetCount(&count); r != kCudaSuccess)
    return unavailable(r, "cuDeviceGetCount");
  if (count == 0)
    return absl::UnavailableError(
        absl::StrCat("no CUDA GPU found: the driver (", path,
                     ") reports no device"));
  if (options.device < 0 || options.device >= count)
    return absl::UnavailableError(absl::StrCat(
        "CUDA device ", options.device, " does not exist (", count,
        " device(s))"));
  CUdevice dev = 0;
  if (CUresult r = d.cuDeviceGet(&dev, options.device); r != kCudaSuccess)
    return unavailable(r, "cuDeviceGet");
  b->cu_device_ = dev;
  CudaDeviceInfo &info = b->device_;
  info.ordinal = options.device;
  char name[256] = {0};
  BT_RETURN_IF_ERROR(
      b->Check(d.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName"));
  info.name = name;
  size_t total = 0;
  BT_RETURN_IF_ERROR(
      b->Check(d.cuDeviceTotalMem_v2(&total, dev), "cuDeviceTotalMem"));
  info.total_memory = static_cast<int64_t>(total);
  BT_RETURN_IF_ERROR(b->Check(
      d.cuDeviceGetAttribute(&info.cc_major, kAttrComputeCapabilityMajor, dev),
      "cuDeviceGetAttribute"));
  BT_RETURN_IF_ERROR(b->Check(
      d.cuDeviceGetAttribute(&info.cc_minor, kAttrComputeCapabilityMinor, dev),
      "cuDeviceGetAttribute"));
  BT_RETURN_IF_ERROR(
      b->Check(d.cuDriverGetVersion(&info.driver_version), "cuDriverGetVersion"));
  BT_RETURN_IF_ERROR(b->Check(d.cuDevicePrimaryCtxRetain(&b->context_, dev),
                              "cuDevicePrimaryCtxRetain"));
  BT_RETURN_IF_ERROR(b->Check(d.cuCtxSetCurrent(b->context_), "cuCtxSetCurrent"));
  BT_RETURN_IF_ERROR(b->Check(d.cuStreamCreate(&b->stream_, 0), "cuStreamCreate"));
  CudaDriver *dp = b->driver_.get();
  b->pool_ = std::make_unique<DevicePool>(
      [dp](uint64_t bytes) -> absl::StatusOr<uint64_t> {
        CUdeviceptr p = 0;
        CUresult r = dp->cuMemAlloc_v2(&p, bytes);
        if (r != kCudaSuccess)
          return absl::ResourceExhaustedError(
              absl::StrCat("cuMemAlloc failed: ", dp->ErrorName(r)));
        return static_cast<uint64_t>(p);
      },
      [dp](uint64_t address) { dp->cuMemFree_v2(address); },
      /*caching=*/!emulated);
  b->symbols_ = options.symbols;
  b->symbols_name_ = options.symbols_name;
  b->emulated_ = emulated;
  b->cublas_libraries_ = options.cublas_libraries;
  if (b->cublas_libraries_.empty()) {
    std::string env = EnvOr("BT_CUBLAS_LIBRARY", "");
    if (!env.empty())
      b->cublas_libraries_ = {env};
    else
      b->cublas_libraries_ = {"libcublas.so.13", "libcublas.so.12",
                              "libcublas.so"};
  }
  return b;
}

CudaBackend::~CudaBackend() {
  if (Current() == this)
    g_current.store(nullptr);
  if (driver_ == nullptr)
    return;
  if (stream_ != nullptr)
    driver_->cuStreamSynchronize(stream_);
  if (cublas_ && cublas_->handle)
    cublas_->cublasDestroy_v2(cublas_->handle);
  if (cublas_lt_ && cublas_lt_->handle)
    cublas_lt_->cublasLtDestroy(cublas_lt_->handle);
  pool_.reset();
  if (module_ != nullptr)
    driver_->cuModuleUnload(module_);
  if (stream_ != nullptr)
    driver_->cuStreamDestroy_v2(stream_);
  if (context_ != nullptr)
    driver_->cuDevicePrimaryCtxRelease_v2(cu_device_);
  // The driver library stays loaded (unloading libcuda is not supported).
}

absl::Status CudaBackend::LoadModule(absl::string_view ptx) {
  // The driver wants NUL-terminated PTX text.
  std::string text(ptx);
  std::string log(16384, '\0');
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes};
  void *values[] = {log.data(),
                    reinterpret_cast<void *>(static_cast<uintptr_t>(log.size()))};
  void *module = nullptr;
  CUresult r =
      driver_->cuModuleLoadDataEx(&module, text.c_str(), 2, options, values);
  if (r != kCudaSuccess) {
    log.resize(std::strlen(log.c_str()));
    return absl::InternalError(
        absl::StrCat("cuModuleLoadData (the artifact's PTX) failed: ",
                     driver_->ErrorName(r), log.empty() ? "" : "\n", log));
  }
  std::lock_guard<std::mutex> lock(functions_mu_);
  if (module_ != nullptr)
    driver_->cuModuleUnload(module_);
  module_ = module;
  functions_.clear();
  return absl::OkStatus();
}

absl::Status CudaBackend::Launch(const char *name, int64_t gx, int64_t gy,
                                 int64_t gz, int64_t bx, int64_t by, int64_t bz,
                                 int32_t smem, void **params) {
  void *function = nullptr;
  {
    std::lock_guard<std::mutex> lock(functions_mu_);
    if (module_ == nullptr)
      return absl::FailedPreconditionError(
          absl::StrCat("launch of kernel '", name, "': no PTX module loaded"));
    auto it = functions_.find(name);
    if (it != functions_.end()) {
      function = it->second;
    } else {
      CUresult r = driver_->cuModuleGetFunction(&function, module_, name);
      if (r != kCudaSuccess)
        return absl::NotFoundError(
            absl::StrCat("kernel '", name, "' is not in the PTX module (",
                         driver_->ErrorName(r), ")"));
      functions_.emplace(name, function);
    }
  }
  for (int64_t v : {gx, gy, gz, bx, by, bz})
    if (v <= 0 || v > 0x7fffffff)
      return absl::InvalidArgumentError(absl::StrFormat(
          "launch of kernel '%s': grid (%d, %d, %d) block (%d, %d, %d) out of "
          "range",
          name, gx, gy, gz, bx, by, bz));
  if (!capturing())
    ++launches_;
  return Check(driver_->cuLaunchKernel(
                   function, static_cast<unsigned>(gx),
                   static_cast<unsigned>(gy), static_cast<unsigned>(gz),
                   static_cast<unsigned>(bx), static_cast<unsigned>(by),
                   static_cast<unsigned>(bz), static_cast<unsigned>(smem),
                   stream_, params, nullptr),
               absl::StrCat("cuLaunchKernel(", name, ")"));
}

absl::Status CudaBackend::RunHostCode(KernelEntryFn fn, void **argv) {
  HostCall &call = t_host_call;
  if (call.active) { // a nested call: no frame of its own
    fn(argv);
    return absl::OkStatus();
  }
  call.blocks.clear();
  call.failure = absl::OkStatus();
  call.active = true;
  // bt_gpu_alloc longjmps here; the frames it skips are the generated host
  // code's and bt_gpu_alloc's, none with anything to destroy.
  if (setjmp(call.env) == 0) {
    fn(argv);
    call.active = false;
    call.blocks.clear();
    return absl::OkStatus();
  }
  call.active = false;
  // Launches before the failure may still read the blocks.
  (void)Synchronize();
  const int64_t before = pool_->bytes_in_use();
  const size_t blocks = call.blocks.size();
  // During a capture the blocks are the capture's (CaptureGraph releases
  // them when `work` fails).
  if (!capturing())
    for (uint64_t address : call.blocks)
      (void)pool_->Free(address);
  call.blocks.clear();
  absl::Status failure = absl::Status(
      call.failure.code(),
      absl::StrCat(call.failure.message(), "; released the call's ", blocks,
                   " block(s), ", before - pool_->bytes_in_use(), " bytes; ",
                   pool_->bytes_in_use(), " bytes in use"));
  call.failure = absl::OkStatus();
  return failure;
}

absl::Status CudaBackend::Synchronize() {
  return Check(driver_->cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

absl::Status CudaBackend::CopyToHost(void *dst, uint64_t src, int64_t bytes) {
  if (bytes <= 0)
    return absl::OkStatus();
  BT_RETURN_IF_ERROR(Synchronize());
  ++to_host_copies_;
  to_host_bytes_ += bytes;
  return Check(driver_->cuMemcpyDtoH_v2(dst, src, static_cast<size_t>(bytes)),
               "cuMemcpyDtoH");
}

absl::Status CudaBackend::CopyToDevice(uint64_t dst, const void *src,
                                       int64_t bytes) {
  if (bytes <= 0)
    return absl::OkStatus();
  BT_RETURN_IF_ERROR(Synchronize());
  ++to_device_copies_;
  to_device_bytes_ += bytes;
  return Check(driver_->cuMemcpyHtoD_v2(dst, src, static_cast<size_t>(bytes)),
               "cuMemcpyHtoD");
}

absl::Status CudaBackend::CopyOnDevice(uint64_t dst, uint64_t src,
                                       int64_t bytes) {
  if (bytes <= 0)
    return absl::OkStatus();
  if (driver_->cuMemcpyDtoDAsync_v2 == nullptr)
    return absl::UnimplementedError(absl::StrCat(
        "CUDA driver ", driver_->path, " lacks cuMemcpyDtoDAsync_v2"));
  if (!capturing())
    ++device_copies_;
  return Check(driver_->cuMemcpyDtoDAsync_v2(dst, src,
                                             static_cast<size_t>(bytes), stream_),
               "cuMemcpyDtoDAsync");
}

absl::Status CudaBackend::Memset(uint64_t dst, uint8_t value, int64_t bytes) {
  if (bytes <= 0)
    return absl::OkStatus();
  return Check(driver_->cuMemsetD8Async(dst, value, static_cast<size_t>(bytes),
                                        stream_),
               "cuMemsetD8Async");
}

DeviceTraffic CudaBackend::traffic() const {
  DeviceTraffic t;
  t.to_device_copies = to_device_copies_.load();
  t.to_device_bytes = to_device_bytes_.load();
  t.to_host_copies = to_host_copies_.load();
  t.to_host_bytes = to_host_bytes_.load();
  t.sampler_bytes = sampler_bytes_.load();
  t.kernel_launches = launches_.load();
  t.gemm_calls = gemms_.load();
  t.graph_launches = graph_launches_.load();
  t.graph_nodes = graph_nodes_launched_.load();
  t.device_copies = device_copies_.load();
  if (pool_) {
    t.driver_allocations = pool_->device_allocations();
    t.driver_frees = pool_->device_frees();
  }
  // The emulator counts device-memory traffic (cuda_emu/profile.cc).
  if (emulated_ && symbols_) {
    using Query = void (*)(int64_t *);
    if (auto q = reinterpret_cast<Query>(symbols_("bt_emu_global_traffic"))) {
      int64_t v[4] = {0, 0, 0, 0};
      q(v);
      t.global_bytes_read = v[0];
      t.global_bytes_written = v[1];
      t.global_access_bytes = v[2];
      t.gemm_flops = v[3];
    }
  }
  return t;
}

void CudaBackend::CountSamplerBytes(int64_t bytes) { sampler_bytes_ += bytes; }

void CudaBackend::MakeCurrent() { g_current.store(this); }

CudaBackend *CudaBackend::Current() { return g_current.load(); }

std::string DescribeCudaAvailability(const CudaOptions &options) {
  absl::StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::Open(options);
  if (!b.ok()) {
    std::string m(b.status().message());
    if (m.rfind("no CUDA", 0) != 0)
      m = absl::StrCat("no CUDA GPU found: ", m);
    return absl::StrCat("cuda: ", m);
  }
  return absl::StrCat("cuda: device ", (*b)->device().ordinal, ": ",
                      (*b)->device().Describe());
}

} // namespace bt::rt

//===----------------------------------------------------------------------===//
// The C ABI of the CUDA target's kernel library (docs/abi.md)
//===----------------------------------------------------------------------===//

using bt::rt::CudaBackend;

namespace bt::rt {
namespace {

/// bt_gpu_alloc's allocation: true with `address`, else false with the
/// failure stored in the call in progress (or fatal outside one). Every
/// object it creates is gone when it returns, so that the caller may
/// longjmp.
bool AllocateForHostCode(CudaBackend &b, int64_t bytes, uint64_t &address) {
  absl::StatusOr<uint64_t> a = b.pool().Allocate(bytes);
  HostCall &call = t_host_call;
  if (a.ok()) {
    address = *a;
    if (call.active && address != 0)
      call.blocks.insert(address);
    b.NoteCapturedAllocation(address);
    return true;
  }
  if (!call.active)
    Die("bt_gpu_alloc", a.status());
  call.failure = absl::Status(
      a.status().code(),
      absl::StrCat("out of device memory in the host code (bt_gpu_alloc of ",
                   bytes, " bytes): ", a.status().message()));
  return false;
}

[[noreturn]] void FailHostCall() { std::longjmp(t_host_call.env, 1); }

} // namespace
} // namespace bt::rt

extern "C" void *bt_gpu_alloc(int64_t bytes) {
  CudaBackend &b = bt::rt::CurrentOrDie("bt_gpu_alloc");
  uint64_t address = 0;
  if (!bt::rt::AllocateForHostCode(b, bytes, address))
    bt::rt::FailHostCall();
  return reinterpret_cast<void *>(static_cast<uintptr_t>(address));
}

extern "C" void bt_gpu_free(void *ptr) {
  if (ptr == nullptr)
    return;
  if (bt::rt::t_host_call.active)
    bt::rt::t_host_call.blocks.erase(reinterpret_cast<uintptr_t>(ptr));
  CudaBackend &b = bt::rt::CurrentOrDie("bt_gpu_free");
  const uint64_t block = reinterpret_cast<uintptr_t>(ptr);
  if (b.DeferCapturedFree(block))
    return; // replays of the graph being captured use the block
  if (b.OwnedByGraph(block))
    bt::rt::Die("bt_gpu_free",
                absl::FailedPreconditionError(absl::StrCat(
                    "block 0x", absl::Hex(block),
                    " belongs to a CUDA graph (an output of a captured call: "
                    "the graph releases it)")));
  absl::Status s = b.pool().Free(block);
  if (!s.ok())
    bt::rt::Die("bt_gpu_free", s);
}

extern "C" void bt_gpu_launch(const char *name, int64_t gx, int64_t gy,
                              int64_t gz, int64_t bx, int64_t by, int64_t bz,
                              int32_t smem, void **params, int32_t num_params) {
  (void)num_params; // the driver reads the kernel's own parameter list
  CudaBackend &b = bt::rt::CurrentOrDie("bt_gpu_launch");
  absl::Status s = b.Launch(name, gx, gy, gz, bx, by, bz, smem, params);
  if (!s.ok())
    bt::rt::Die("bt_gpu_launch", s);
}

extern "C" void bt_gpu_memcpy_dtoh(void *dst_host, const void *src_device,
                                   int64_t bytes) {
  CudaBackend &b = bt::rt::CurrentOrDie("bt_gpu_memcpy_dtoh");
  absl::Status s = b.CopyToHost(
      dst_host, reinterpret_cast<uintptr_t>(src_device), bytes);
  if (!s.ok())
    bt::rt::Die("bt_gpu_memcpy_dtoh", s);
}
