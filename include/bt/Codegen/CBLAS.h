//===- CBLAS.h - CBLAS enum values the BLAS lowering passes ----*- C++ -*-===//
//
// The CBLAS_ORDER / CBLAS_TRANSPOSE values (cblas.h, OpenBLAS; cuBLAS calls
// through bt's runtime take the same) that bt-gemm-to-blas passes as i32
// constants to every bt_*gemm* call, and that the passes reading those calls
// back (bt-gpu-lm-head-sampling) match. Defined once here.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_CBLAS_H
#define BT_CODEGEN_CBLAS_H

#include <cstdint>

namespace bt::cblas {

/// CblasRowMajor: every matrix bt passes is row-major.
constexpr int32_t kRowMajor = 101;
/// CblasNoTrans / CblasTrans: op(X) = X / Xᵀ.
constexpr int32_t kNoTrans = 111;
constexpr int32_t kTrans = 112;

} // namespace bt::cblas

#endif // BT_CODEGEN_CBLAS_H
