//===- BF16.h - bf16 rounding and extension as integer ops -------*- C++ -*-===//
//
// The conversions between f32 and bf16 that the CUDA target's `--dtype bf16`
// uses (docs/codegen-cuda.md, "bf16"): bt-bf16-gemms rounds the GEMM inputs,
// bt-lower-kv-caches rounds the keys and values it appends to a bf16 KV
// cache, the attention kernels extend what they read; bt-bf16-gemm-outputs
// rounds the GEMM products that elementwise kernels read. Built from arith
// integer ops so that every backend (NVPTX, and the x86 code of the CUDA
// emulator) computes the same bits without a libcall, and identical to the
// runtime's bt::rt::F32ToBf16 (runtime/base/tensor.h), which rounds weights
// at upload.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_BF16_H
#define BT_CODEGEN_BF16_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringRef.h"

namespace bt::codegen {

/// f32 scalar `x` → bf16, round to nearest even; NaN → a quiet NaN with its
/// sign. Overflow rounds to ±inf, as IEEE rounding does.
mlir::Value roundToBF16(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);

/// bf16 scalar `x` → f32, exactly (the bf16 bits as the high half).
mlir::Value extendBF16(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);

/// Ranked tensor `x` of f32 (any shape, dynamic dims read with tensor.dim)
/// rounded to bf16 element for element by one elementwise `linalg.generic`
/// (roundToBF16 in its body) into a `tensor.empty`: the rounding of the GEMM
/// inputs (bt-bf16-gemms) and of the GEMM products (bt-bf16-gemm-outputs).
/// Returns the bf16 tensor of `x`'s shape.
mlir::Value roundTensorToBF16(mlir::OpBuilder &b, mlir::Location loc,
                              mlir::Value x);

/// The unit attributes by which bt-bf16-gemm-outputs hands its bf16 GEMM
/// products to bt-gemm-to-blas: on the generic that rounds a GEMM's f32
/// product `[M, N]` to bf16 element for element, and on the generic that
/// broadcasts the GEMM's bias `[N]`, rounded to bf16 (held as f32), into its
/// init (cuBLAS's C, beta = 1). docs/codegen-cuda.md, "bf16".
inline constexpr llvm::StringLiteral kBF16GemmOutputAttr =
    "bt.bf16_gemm_output";
inline constexpr llvm::StringLiteral kBF16GemmInitAttr = "bt.bf16_gemm_init";

} // namespace bt::codegen

#endif // BT_CODEGEN_BF16_H
