//===- cuda_driver.h - the driver API and cuBLAS entry points --*- C++ -*-===//
//
// Internal to runtime/device/cuda (cuda.cc, cuda_blas.cc, cuda_graph.cc):
// the CUDA driver API, cuBLAS and cuBLASLt entry points a CudaBackend
// resolves at run time (dlopen / CudaOptions::symbols; LoadDriver in
// cuda.cc, LoadCublas and LoadCublasLt in cuda_blas.cc), with the C
// signatures of cuda.h / cublas_api.h / cublasLt.h spelled without the CUDA
// headers, and the helpers those files share.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DEVICE_CUDA_CUDA_DRIVER_H
#define BT_RUNTIME_DEVICE_CUDA_CUDA_DRIVER_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace bt::rt {

class CudaBackend;

/// Where a backend finds entry points by name (dlsym in a library, or
/// CudaOptions::symbols: the emulator's).
using SymbolLookup = std::function<void *(const char *)>;

/// `fn` = the entry point `name` of `lookup`; whether it exists.
template <typename Fn>
bool Resolve(const SymbolLookup &lookup, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(lookup(name));
  return fn != nullptr;
}

/// dlsym in `library`.
SymbolLookup DlsymIn(void *library);

/// The environment variable `name`, or `fallback` when unset or empty.
std::string EnvOr(const char *name, const std::string &fallback);

/// Reports `what: s` on stderr and ends the process (exit status 1 on the
/// emulated device, which has reported what failed; abort otherwise): the
/// GPU ABI's host code has no error path.
[[noreturn]] void Die(absl::string_view what, const absl::Status &s);

/// The current backend (CudaBackend::Current), or Die naming `fn` when no
/// backend is active.
CudaBackend &CurrentOrDie(const char *fn);

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
constexpr CUresult kCudaSuccess = 0;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSizeBytes = 6;

struct CudaDriver {
  void *library = nullptr;
  std::string path;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int *);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDeviceTotalMem_v2)(size_t *, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(void **, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice);
  CUresult (*cuCtxSetCurrent)(void *);
  CUresult (*cuStreamCreate)(void **, unsigned);
  CUresult (*cuStreamDestroy_v2)(void *);
  CUresult (*cuStreamSynchronize)(void *);
  CUresult (*cuModuleLoadDataEx)(void **, const void *, unsigned, int *,
                                 void **);
  CUresult (*cuModuleUnload)(void *);
  CUresult (*cuModuleGetFunction)(void **, void *, const char *);
  CUresult (*cuLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, void *, void **,
                             void **);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree_v2)(CUdeviceptr);
  CUresult (*cuMemcpyDtoH_v2)(void *, CUdeviceptr, size_t);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, void *);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  // The graph API (CudaBackend::CaptureGraph): optional, null when the
  // driver lacks it.
  CUresult (*cuStreamBeginCapture_v2)(void *, int) = nullptr;
  CUresult (*cuStreamEndCapture)(void *, void **) = nullptr;
  CUresult (*cuGraphGetNodes)(void *, void **, size_t *) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(void **, void *,
                                          unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(void *, void *) = nullptr;
  CUresult (*cuGraphExecDestroy)(void *) = nullptr;
  CUresult (*cuGraphDestroy)(void *) = nullptr;
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr, CUdeviceptr, size_t,
                                   void *) = nullptr; // optional too
  bool has_graphs() const {
    return cuStreamBeginCapture_v2 && cuStreamEndCapture && cuGraphGetNodes &&
           cuGraphInstantiateWithFlags && cuGraphLaunch &&
           cuGraphExecDestroy && cuGraphDestroy;
  }

  std::string ErrorName(CUresult r) const {
    const char *name = nullptr;
    if (cuGetErrorName && cuGetErrorName(r, &name) == kCudaSuccess && name)
      return name;
    // The stub driver (and a failed driver) cannot name its errors: the
    // common ones from cuda.h.
    switch (r) {
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 35: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 719: return "CUDA_ERROR_LAUNCH_FAILED";
    default: return absl::StrCat("CUresult ", r);
    }
  }
};

struct Cublas {
  void *library = nullptr;
  std::string path;
  void *handle = nullptr;
  int (*cublasCreate_v2)(void **);
  int (*cublasDestroy_v2)(void *);
  int (*cublasSetStream_v2)(void *, void *);
  int (*cublasSetMathMode)(void *, int);
  int (*cublasSgemm_v2)(void *, int, int, int, int, int, const float *,
                        const float *, int, const float *, int, const float *,
                        float *, int);
  // cublasGemmEx (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B,
  // Btype, ldb, beta, C, Ctype, ldc, computeType, algo); null when the
  // library lacks it (the bf16 GEMMs then fail with NotFound).
  int (*cublasGemmEx)(void *, int, int, int, int, int, const void *,
                      const void *, int, int, const void *, int, int,
                      const void *, void *, int, int, int, int) = nullptr;
};

/// cuBLASLt (cublasLt.h), for the GEMMs with an epilogue: the bf16 GEMM
/// whose bias the epilogue adds (CudaBackend::GemmBf16Bias). Descriptors
/// and layouts are opaque host objects.
struct CublasLt {
  void *library = nullptr;
  std::string path;
  void *handle = nullptr;
  int (*cublasLtCreate)(void **);
  int (*cublasLtDestroy)(void *);
  // (desc, computeType, scaleType)
  int (*cublasLtMatmulDescCreate)(void **, int, int);
  int (*cublasLtMatmulDescDestroy)(void *);
  // (desc, attribute, buf, sizeInBytes)
  int (*cublasLtMatmulDescSetAttribute)(void *, int, const void *, size_t);
  // (layout, type, rows, cols, ld)
  int (*cublasLtMatrixLayoutCreate)(void **, int, uint64_t, uint64_t,
                                    int64_t);
  int (*cublasLtMatrixLayoutDestroy)(void *);
  // (handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc,
  //  algo, workspace, workspaceSize, stream)
  int (*cublasLtMatmul)(void *, void *, const void *, const void *, void *,
                        const void *, void *, const void *, const void *,
                        void *, void *, void *, const void *, void *, size_t,
                        void *);
};

} // namespace bt::rt

#endif // BT_RUNTIME_DEVICE_CUDA_CUDA_DRIVER_H
