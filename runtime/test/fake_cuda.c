/*===- fake_cuda.c - a fake CUDA driver and cuBLAS for the runtime's tests ===//
 *
 * The subset of the CUDA driver API and cuBLAS that bt::rt::CudaBackend
 * loads (runtime/src/cuda.cc), implemented on host memory so that the
 * backend's logic (device discovery, module and kernel lookup, launches, the
 * memory pool, copies, the row-major → column-major GEMM mapping) is tested
 * on machines without a GPU. Kernels are not executed: a launch is recorded
 * (bt_fake_cuda_last_launch). cublasSgemm_v2 computes the column-major GEMM
 * of cuBLAS's documented semantics on the (host) pointers.
 *
 * BT_FAKE_CUDA_NO_DEVICE=1 makes cuInit fail with CUDA_ERROR_NO_DEVICE.
 *
 *===----------------------------------------------------------------------===*/

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
  kSuccess = 0,
  kInvalidValue = 1,
  kNoDevice = 100,
  kInvalidPtx = 218,
  kNotFound = 500,
};

static int64_t g_allocs, g_frees, g_launches;
static char g_last_name[256];
static unsigned g_last_dims[6], g_last_smem;
static int64_t g_last_param0;

int64_t bt_fake_cuda_allocations(void) { return g_allocs; }
int64_t bt_fake_cuda_frees(void) { return g_frees; }
int64_t bt_fake_cuda_launches(void) { return g_launches; }
/* The last launch: its kernel name, grid and block dims, shared memory and
 * the first 8 bytes of its first parameter. */
const char *bt_fake_cuda_last_launch(unsigned dims[6], unsigned *smem,
                                     int64_t *param0) {
  memcpy(dims, g_last_dims, sizeof(g_last_dims));
  *smem = g_last_smem;
  *param0 = g_last_param0;
  return g_last_name;
}

CUresult cuInit(unsigned flags) {
  const char *e = getenv("BT_FAKE_CUDA_NO_DEVICE");
  (void)flags;
  return e != NULL && *e == '1' ? kNoDevice : kSuccess;
}
CUresult cuDriverGetVersion(int *v) {
  *v = 13000;
  return kSuccess;
}
CUresult cuDeviceGetCount(int *n) {
  *n = 1;
  return kSuccess;
}
CUresult cuDeviceGet(int *d, int ordinal) {
  if (ordinal != 0)
    return kInvalidValue;
  *d = 0;
  return kSuccess;
}
CUresult cuDeviceGetName(char *name, int len, int dev) {
  (void)dev;
  snprintf(name, (size_t)len, "bt fake GPU");
  return kSuccess;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev) {
  (void)dev;
  *bytes = (size_t)1 << 30;
  return kSuccess;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  (void)dev;
  *v = attr == 75 ? 9 : 0;
  return kSuccess;
}
static int g_context, g_stream;
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  (void)dev;
  *ctx = &g_context;
  return kSuccess;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
  (void)dev;
  return kSuccess;
}
CUresult cuCtxSetCurrent(void *ctx) {
  return ctx == &g_context ? kSuccess : kInvalidValue;
}
CUresult cuStreamCreate(void **s, unsigned flags) {
  (void)flags;
  *s = &g_stream;
  return kSuccess;
}
CUresult cuStreamDestroy_v2(void *s) {
  (void)s;
  return kSuccess;
}
CUresult cuStreamSynchronize(void *s) {
  return s == &g_stream ? kSuccess : kInvalidValue;
}

struct Function {
  char name[256];
  struct Function *next; /* the module's functions, freed with it */
};
struct Module {
  char *text;
  struct Function *functions;
};

CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n,
                            int *options, void **values) {
  const char *text = (const char *)image;
  if (strstr(text, ".version") == NULL) {
    for (unsigned i = 0; i + 1 < n; ++i)
      if (options[i] == 5 && options[i + 1] == 6)
        snprintf((char *)values[i], (size_t)(uintptr_t)values[i + 1],
                 "fake ptxas: no .version directive");
    return kInvalidPtx;
  }
  struct Module *m = (struct Module *)malloc(sizeof(struct Module));
  m->text = strdup(text);
  m->functions = NULL;
  *module = m;
  return kSuccess;
}
CUresult cuModuleUnload(void *module) {
  struct Module *m = (struct Module *)module;
  while (m->functions != NULL) {
    struct Function *f = m->functions;
    m->functions = f->next;
    free(f);
  }
  free(m->text);
  free(m);
  return kSuccess;
}
CUresult cuModuleGetFunction(void **fn, void *module, const char *name) {
  struct Module *m = (struct Module *)module;
  char pattern[300];
  snprintf(pattern, sizeof(pattern), ".entry %s(", name);
  if (strstr(m->text, pattern) == NULL)
    return kNotFound;
  struct Function *f = (struct Function *)malloc(sizeof(struct Function));
  snprintf(f->name, sizeof(f->name), "%s", name);
  f->next = m->functions; /* owned by the module, as in CUDA */
  m->functions = f;
  *fn = f;
  return kSuccess;
}
CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, unsigned smem,
                        void *stream, void **params, void **extra) {
  struct Function *f = (struct Function *)fn;
  (void)extra;
  if (stream != &g_stream)
    return kInvalidValue;
  snprintf(g_last_name, sizeof(g_last_name), "%s", f->name);
  g_last_dims[0] = gx;
  g_last_dims[1] = gy;
  g_last_dims[2] = gz;
  g_last_dims[3] = bx;
  g_last_dims[4] = by;
  g_last_dims[5] = bz;
  g_last_smem = smem;
  g_last_param0 = 0;
  if (params != NULL && params[0] != NULL)
    memcpy(&g_last_param0, params[0], sizeof(g_last_param0));
  ++g_launches;
  return kSuccess;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
  size_t rounded = (bytes + 255) / 256 * 256;
  void *m = aligned_alloc(256, rounded);
  if (m == NULL)
    return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  /* Kernels are not executed, so nothing initializes what they would write
     (e.g. the device sampler's state): start every allocation zeroed so the
     host path sees the same bytes under any allocator (ASan fills fresh
     malloc memory with 0xbe). */
  memset(m, 0, rounded);
  ++g_allocs;
  *p = (CUdeviceptr)(uintptr_t)m;
  return kSuccess;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  ++g_frees;
  free((void *)(uintptr_t)p);
  return kSuccess;
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
  memcpy(dst, (const void *)(uintptr_t)src, bytes);
  return kSuccess;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
  memcpy((void *)(uintptr_t)dst, src, bytes);
  return kSuccess;
}
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes,
                         void *stream) {
  (void)stream;
  memset((void *)(uintptr_t)dst, value, bytes);
  return kSuccess;
}
CUresult cuGetErrorName(CUresult r, const char **name) {
  switch (r) {
  case kSuccess:
    *name = "CUDA_SUCCESS";
    return kSuccess;
  case kNoDevice:
    *name = "CUDA_ERROR_NO_DEVICE";
    return kSuccess;
  case kInvalidPtx:
    *name = "CUDA_ERROR_INVALID_PTX";
    return kSuccess;
  case kNotFound:
    *name = "CUDA_ERROR_NOT_FOUND";
    return kSuccess;
  default:
    return kInvalidValue;
  }
}

/* --- cuBLAS ------------------------------------------------------------- */

static int g_cublas_handle, g_math_mode = -1;
int bt_fake_cublas_math_mode(void) { return g_math_mode; }

int cublasCreate_v2(void **handle) {
  *handle = &g_cublas_handle;
  return 0;
}
int cublasDestroy_v2(void *handle) {
  (void)handle;
  return 0;
}
int cublasSetStream_v2(void *handle, void *stream) {
  (void)handle;
  return stream == &g_stream ? 0 : 7; /* CUBLAS_STATUS_INVALID_VALUE */
}
int cublasSetMathMode(void *handle, int mode) {
  (void)handle;
  g_math_mode = mode;
  return 0;
}
/* Column-major C = alpha·op(A)·op(B) + beta·C, C m×n, op(A) m×k, op(B) k×n;
 * op: 0 = N, 1 = T. */
int cublasSgemm_v2(void *handle, int ta, int tb, int m, int n, int k,
                   const float *alpha, const float *a, int lda, const float *b,
                   int ldb, const float *beta, float *c, int ldc) {
  (void)handle;
  if (m < 0 || n < 0 || k < 0 || ldc < (m > 1 ? m : 1) ||
      lda < ((ta ? k : m) > 1 ? (ta ? k : m) : 1) ||
      ldb < ((tb ? n : k) > 1 ? (tb ? n : k) : 1))
    return 7;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (int p = 0; p < k; ++p) {
        float av = ta ? a[p + (size_t)i * lda] : a[i + (size_t)p * lda];
        float bv = tb ? b[j + (size_t)p * ldb] : b[p + (size_t)j * ldb];
        acc += av * bv;
      }
      float *cij = &c[i + (size_t)j * ldc];
      *cij = *alpha * acc + (*beta == 0.0f ? 0.0f : *beta * *cij);
    }
  return 0;
}
