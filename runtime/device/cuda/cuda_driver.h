//===- cuda_driver.h - the driver API and cuBLAS entry points --*- C++ -*-===//
//
// Internal to runtime/device/cuda (cuda.cc, cuda_graph.cc): the CUDA driver
// API and cuBLAS entry points a CudaBackend resolves at run time (dlopen /
// CudaOptions::symbols; LoadDriver and LoadCublas in cuda.cc), with the C
// signatures of cuda.h / cublas_api.h spelled without the CUDA headers.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DEVICE_CUDA_CUDA_DRIVER_H
#define BT_RUNTIME_DEVICE_CUDA_CUDA_DRIVER_H

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"

namespace bt::rt {

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

} // namespace bt::rt

#endif // BT_RUNTIME_DEVICE_CUDA_CUDA_DRIVER_H
