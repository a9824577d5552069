//===- cuda_blas.cc - CUDA backend: the GEMMs on cuBLAS and cuBLASLt ------===//
//
// See bt/runtime/device/cuda/cuda.h: CudaBackend's GEMMs (Sgemm, GemmBf16,
// GemmBf16Bias) and the GPU ABI's bt_gpu_sgemm / bt_gpu_gemm_bf16* that the
// CUDA target's host code calls (docs/abi.md). cuBLAS and cuBLASLt are
// loaded on the first GEMM that needs them (dlopen, or the emulator's
// in-process entry points); only the entry points used are declared
// (cuda_driver.h).
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/device/cuda/cuda.h"
#include "bt/runtime/device/cuda/cuda_driver.h"

#include <dlfcn.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cblas.h"
#include "bt/runtime/base/status_macros.h"

namespace bt::rt {

namespace {
constexpr int kCublasOpN = 0, kCublasOpT = 1;
constexpr int kCublasDefaultMath = 0; // FP32 stays FP32 (no TF32)

bool IsTrans(int32_t t) { return t == CblasTrans; }

/// cblas_sgemm's order and transposes as the GEMMs accept them: row-major
/// (101), each transpose 111 or 112. Errors: InvalidArgument naming `name`.
absl::Status CheckOrder(absl::string_view name, int32_t order,
                        int32_t trans_a, int32_t trans_b) {
  if (order == CblasRowMajor &&
      (trans_a == CblasNoTrans || trans_a == CblasTrans) &&
      (trans_b == CblasNoTrans || trans_b == CblasTrans))
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      name, ": order ", order, ", transpose ", trans_a, "/", trans_b,
      " (expected row-major 101 and 111/112)"));
}

/// A library opened by OpenFirst: its handle and the name that loaded.
struct OpenedLibrary {
  void *handle = nullptr;
  std::string path;
};

/// dlopen of the first of `libraries` that loads. Errors: NotFound naming
/// `what` and each library's dlerror.
absl::StatusOr<OpenedLibrary> OpenFirst(const std::vector<std::string> &libraries,
                                        absl::string_view what) {
  std::vector<std::string> errors;
  for (const std::string &lib : libraries) {
    ::dlerror();
    if (void *handle = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL))
      return OpenedLibrary{handle, lib};
    const char *e = ::dlerror();
    errors.push_back(e ? e : lib);
  }
  return absl::NotFoundError(
      absl::StrCat(what, " not found: ", absl::StrJoin(errors, "; ")));
}
} // namespace

absl::Status CudaBackend::LoadCublas() {
  auto cb = std::make_unique<Cublas>();
  SymbolLookup lookup = symbols_;
  if (lookup) {
    cb->path = symbols_name_.empty() ? "an in-process cuBLAS" : symbols_name_;
  } else {
    BT_ASSIGN_OR_RETURN(OpenedLibrary lib, OpenFirst(cublas_libraries_, "cuBLAS"));
    cb->library = lib.handle;
    cb->path = lib.path;
    lookup = DlsymIn(cb->library);
  }
  if (!Resolve(lookup, "cublasCreate_v2", cb->cublasCreate_v2) ||
      !Resolve(lookup, "cublasDestroy_v2", cb->cublasDestroy_v2) ||
      !Resolve(lookup, "cublasSetStream_v2", cb->cublasSetStream_v2) ||
      !Resolve(lookup, "cublasSetMathMode", cb->cublasSetMathMode) ||
      !Resolve(lookup, "cublasSgemm_v2", cb->cublasSgemm_v2))
    return absl::NotFoundError(
        absl::StrCat(cb->path, " lacks a cuBLAS entry point"));
  (void)Resolve(lookup, "cublasGemmEx", cb->cublasGemmEx); // optional
  if (int s = cb->cublasCreate_v2(&cb->handle); s != 0)
    return absl::InternalError(
        absl::StrCat("cublasCreate failed: cublasStatus ", s));
  if (int s = cb->cublasSetStream_v2(cb->handle, stream_); s != 0)
    return absl::InternalError(
        absl::StrCat("cublasSetStream failed: cublasStatus ", s));
  if (int s = cb->cublasSetMathMode(cb->handle, kCublasDefaultMath); s != 0)
    return absl::InternalError(
        absl::StrCat("cublasSetMathMode failed: cublasStatus ", s));
  cublas_ = std::move(cb);
  return absl::OkStatus();
}

absl::Status CudaBackend::LoadCublasLt() {
  auto lt = std::make_unique<CublasLt>();
  SymbolLookup lookup = symbols_;
  if (lookup) {
    lt->path = symbols_name_.empty() ? "an in-process cuBLASLt" : symbols_name_;
  } else {
    std::vector<std::string> libraries;
    std::string env = EnvOr("BT_CUBLASLT_LIBRARY", "");
    if (!env.empty())
      libraries = {env};
    else
      libraries = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    BT_ASSIGN_OR_RETURN(
        OpenedLibrary lib,
        OpenFirst(libraries, "cuBLASLt (needed by the bf16 GEMMs with a bias)"));
    lt->library = lib.handle;
    lt->path = lib.path;
    lookup = DlsymIn(lt->library);
  }
  if (!Resolve(lookup, "cublasLtCreate", lt->cublasLtCreate) ||
      !Resolve(lookup, "cublasLtDestroy", lt->cublasLtDestroy) ||
      !Resolve(lookup, "cublasLtMatmulDescCreate",
               lt->cublasLtMatmulDescCreate) ||
      !Resolve(lookup, "cublasLtMatmulDescDestroy",
               lt->cublasLtMatmulDescDestroy) ||
      !Resolve(lookup, "cublasLtMatmulDescSetAttribute",
               lt->cublasLtMatmulDescSetAttribute) ||
      !Resolve(lookup, "cublasLtMatrixLayoutCreate",
               lt->cublasLtMatrixLayoutCreate) ||
      !Resolve(lookup, "cublasLtMatrixLayoutDestroy",
               lt->cublasLtMatrixLayoutDestroy) ||
      !Resolve(lookup, "cublasLtMatmul", lt->cublasLtMatmul))
    return absl::NotFoundError(
        absl::StrCat(lt->path, " lacks a cuBLASLt entry point"));
  if (int s = lt->cublasLtCreate(&lt->handle); s != 0)
    return absl::InternalError(
        absl::StrCat("cublasLtCreate failed: cublasStatus ", s));
  cublas_lt_ = std::move(lt);
  return absl::OkStatus();
}

absl::Status CudaBackend::Sgemm(int32_t order, int32_t trans_a, int32_t trans_b,
                                int32_t m, int32_t n, int32_t k, float alpha,
                                const float *a, int32_t lda, const float *b,
                                int32_t ldb, float beta, float *c,
                                int32_t ldc) {
  BT_RETURN_IF_ERROR(CheckOrder("bt_gpu_sgemm", order, trans_a, trans_b));
  if (!cublas_)
    BT_RETURN_IF_ERROR(LoadCublas());
  // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, and a
  // row-major matrix is its transpose in column-major order.
  if (!capturing())
    ++gemms_;
  int s = cublas_->cublasSgemm_v2(
      cublas_->handle, IsTrans(trans_b) ? kCublasOpT : kCublasOpN,
      IsTrans(trans_a) ? kCublasOpT : kCublasOpN, n, m, k, &alpha, b, ldb, a,
      lda, &beta, c, ldc);
  if (s != 0)
    return absl::InternalError(absl::StrCat(
        "cublasSgemm (m=", m, " n=", n, " k=", k, ") failed: cublasStatus ", s));
  return absl::OkStatus();
}

absl::Status CudaBackend::GemmBf16(int32_t order, int32_t trans_a,
                                   int32_t trans_b, int32_t m, int32_t n,
                                   int32_t k, float alpha, const void *a,
                                   int32_t lda, const void *b, int32_t ldb,
                                   float beta, void *c, int32_t ldc,
                                   bool bf16_c) {
  BT_RETURN_IF_ERROR(
      CheckOrder(bf16_c ? "bt_gpu_gemm_bf16_out" : "bt_gpu_gemm_bf16", order,
                 trans_a, trans_b));
  if (!cublas_)
    BT_RETURN_IF_ERROR(LoadCublas());
  if (cublas_->cublasGemmEx == nullptr)
    return absl::NotFoundError(absl::StrCat(
        cublas_->path, " lacks cublasGemmEx (needed by the bf16 GEMMs)"));
  // cudaDataType_t / cublasComputeType_t / cublasGemmAlgo_t values
  // (library_types.h, cublas_api.h).
  constexpr int kR16BF = 14, kR32F = 0, kCompute32F = 68, kGemmDefault = -1;
  if (!capturing())
    ++gemms_;
  // Row-major C = op(A)·op(B) as column-major Cᵀ = op(B)ᵀ·op(A)ᵀ (Sgemm).
  int s = cublas_->cublasGemmEx(
      cublas_->handle, IsTrans(trans_b) ? kCublasOpT : kCublasOpN,
      IsTrans(trans_a) ? kCublasOpT : kCublasOpN, n, m, k, &alpha, b, kR16BF,
      ldb, a, kR16BF, lda, &beta, c, bf16_c ? kR16BF : kR32F, ldc,
      kCompute32F, kGemmDefault);
  if (s != 0)
    return absl::InternalError(absl::StrCat(
        bf16_c ? "cublasGemmEx bf16 -> bf16 (m=" : "cublasGemmEx bf16 (m=", m,
                                            " n=", n, " k=", k,
                                            ") failed: cublasStatus ", s));
  return absl::OkStatus();
}

absl::Status CudaBackend::GemmBf16Bias(int32_t order, int32_t trans_a,
                                       int32_t trans_b, int32_t m, int32_t n,
                                       int32_t k, float alpha, const void *a,
                                       int32_t lda, const void *b,
                                       int32_t ldb, void *c, int32_t ldc,
                                       const void *bias) {
  BT_RETURN_IF_ERROR(
      CheckOrder("bt_gpu_gemm_bf16_bias_out", order, trans_a, trans_b));
  if (!cublas_lt_)
    BT_RETURN_IF_ERROR(LoadCublasLt());
  const CublasLt &lt = *cublas_lt_;
  // cudaDataType_t, cublasComputeType_t, cublasOperation_t and
  // cublasLtMatmulDescAttributes_t / cublasLtEpilogue_t values
  // (library_types.h, cublas_api.h, cublasLt.h).
  constexpr int kR16BF = 14, kR32F = 0, kCompute32F = 68;
  constexpr int kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7,
                kDescBiasPointer = 8;
  constexpr int32_t kEpilogueBias = 4;
  // Row-major C = op(A)·op(B) as column-major Cᵀ = op(B)ᵀ·op(A)ᵀ (Sgemm):
  // cuBLASLt's A is our B, its B our A; its D [n, m] has one bias element
  // per row, i.e. per column of our row-major C.
  const int32_t op_first = IsTrans(trans_b) ? kCublasOpT : kCublasOpN;
  const int32_t op_second = IsTrans(trans_a) ? kCublasOpT : kCublasOpN;
  void *desc = nullptr, *first = nullptr, *second = nullptr, *out = nullptr;
  auto cleanup = [&] {
    if (out)
      lt.cublasLtMatrixLayoutDestroy(out);
    if (second)
      lt.cublasLtMatrixLayoutDestroy(second);
    if (first)
      lt.cublasLtMatrixLayoutDestroy(first);
    if (desc)
      lt.cublasLtMatmulDescDestroy(desc);
  };
  auto fail = [&](const char *what, int s) {
    cleanup();
    return absl::InternalError(absl::StrCat(
        what, " (bf16 GEMM with a bias, m=", m, " n=", n, " k=", k,
        ") failed: cublasStatus ", s));
  };
  if (int s = lt.cublasLtMatmulDescCreate(&desc, kCompute32F, kR32F))
    return fail("cublasLtMatmulDescCreate", s);
  if (int s = lt.cublasLtMatmulDescSetAttribute(desc, kDescTransA, &op_first,
                                                sizeof op_first))
    return fail("cublasLtMatmulDescSetAttribute(TRANSA)", s);
  if (int s = lt.cublasLtMatmulDescSetAttribute(desc, kDescTransB, &op_second,
                                                sizeof op_second))
    return fail("cublasLtMatmulDescSetAttribute(TRANSB)", s);
  if (int s = lt.cublasLtMatmulDescSetAttribute(
          desc, kDescEpilogue, &kEpilogueBias, sizeof kEpilogueBias))
    return fail("cublasLtMatmulDescSetAttribute(EPILOGUE)", s);
  if (int s = lt.cublasLtMatmulDescSetAttribute(desc, kDescBiasPointer, &bias,
                                                sizeof bias))
    return fail("cublasLtMatmulDescSetAttribute(BIAS_POINTER)", s);
  // Stored (column-major) shapes: op(X) = X for N, Xᵀ for T.
  const bool tf = IsTrans(trans_b), ts = IsTrans(trans_a);
  if (int s = lt.cublasLtMatrixLayoutCreate(&first, kR16BF, tf ? k : n,
                                            tf ? n : k, ldb))
    return fail("cublasLtMatrixLayoutCreate", s);
  if (int s = lt.cublasLtMatrixLayoutCreate(&second, kR16BF, ts ? m : k,
                                            ts ? k : m, lda))
    return fail("cublasLtMatrixLayoutCreate", s);
  if (int s = lt.cublasLtMatrixLayoutCreate(&out, kR16BF, n, m, ldc))
    return fail("cublasLtMatrixLayoutCreate", s);
  if (!capturing())
    ++gemms_;
  const float beta = 0.0f;
  // No algorithm given: cuBLASLt's own heuristic, no workspace.
  if (int s = lt.cublasLtMatmul(lt.handle, desc, &alpha, b, first, a, second,
                                &beta, c, out, c, out, nullptr, nullptr, 0,
                                stream_))
    return fail("cublasLtMatmul", s);
  cleanup();
  return absl::OkStatus();
}

} // namespace bt::rt

using bt::rt::CudaBackend;

extern "C" void bt_gpu_sgemm(int32_t order, int32_t trans_a, int32_t trans_b,
                             int32_t m, int32_t n, int32_t k, float alpha,
                             const float *a, int32_t lda, const float *b,
                             int32_t ldb, float beta, float *c, int32_t ldc) {
  CudaBackend &g = bt::rt::CurrentOrDie("bt_gpu_sgemm");
  absl::Status s = g.Sgemm(order, trans_a, trans_b, m, n, k, alpha, a, lda, b,
                           ldb, beta, c, ldc);
  if (!s.ok())
    bt::rt::Die("bt_gpu_sgemm", s);
}

namespace {
/// bt_gpu_gemm_bf16 and bt_gpu_gemm_bf16_out: CudaBackend::GemmBf16 on the
/// current backend, with an f32 or (bf16_c) bf16 C; dies with `name` on an
/// error (the host code has no error path).
void GemmBf16OrDie(const char *name, int32_t order, int32_t trans_a,
                   int32_t trans_b, int32_t m, int32_t n, int32_t k,
                   float alpha, const void *a, int32_t lda, const void *b,
                   int32_t ldb, float beta, void *c, int32_t ldc,
                   bool bf16_c) {
  CudaBackend &g = bt::rt::CurrentOrDie(name);
  absl::Status s = g.GemmBf16(order, trans_a, trans_b, m, n, k, alpha, a, lda,
                              b, ldb, beta, c, ldc, bf16_c);
  if (!s.ok())
    bt::rt::Die(name, s);
}
} // namespace

extern "C" void bt_gpu_gemm_bf16(int32_t order, int32_t trans_a,
                                 int32_t trans_b, int32_t m, int32_t n,
                                 int32_t k, float alpha, const void *a,
                                 int32_t lda, const void *b, int32_t ldb,
                                 float beta, float *c, int32_t ldc) {
  GemmBf16OrDie("bt_gpu_gemm_bf16", order, trans_a, trans_b, m, n, k, alpha,
                a, lda, b, ldb, beta, c, ldc, /*bf16_c=*/false);
}

extern "C" void bt_gpu_gemm_bf16_out(int32_t order, int32_t trans_a,
                                     int32_t trans_b, int32_t m, int32_t n,
                                     int32_t k, float alpha, const void *a,
                                     int32_t lda, const void *b, int32_t ldb,
                                     float beta, void *c, int32_t ldc) {
  GemmBf16OrDie("bt_gpu_gemm_bf16_out", order, trans_a, trans_b, m, n, k,
                alpha, a, lda, b, ldb, beta, c, ldc, /*bf16_c=*/true);
}

extern "C" void bt_gpu_gemm_bf16_bias_out(int32_t order, int32_t trans_a,
                                          int32_t trans_b, int32_t m,
                                          int32_t n, int32_t k, float alpha,
                                          const void *a, int32_t lda,
                                          const void *b, int32_t ldb,
                                          float beta, void *c, int32_t ldc,
                                          const void *bias) {
  CudaBackend &g = bt::rt::CurrentOrDie("bt_gpu_gemm_bf16_bias_out");
  absl::Status s =
      beta != 0.0f
          ? absl::InvalidArgumentError(absl::StrCat(
                "bt_gpu_gemm_bf16_bias_out: beta ", beta, " (must be 0)"))
          : g.GemmBf16Bias(order, trans_a, trans_b, m, n, k, alpha, a, lda, b,
                           ldb, c, ldc, bias);
  if (!s.ok())
    bt::rt::Die("bt_gpu_gemm_bf16_bias_out", s);
}
