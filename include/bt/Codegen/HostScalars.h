//===- HostScalars.h - scalar arguments passed by value ---------*- C++ -*-===//
//
// `bt.host_scalar` (UnitAttr) on a rank-0 argument of an entry point: the
// host code only reads the scalar (a `tensor.extract`, a `memref.load` after
// bufferization), never a kernel, so the caller passes it in host memory,
// by value, instead of copying 8 bytes to the device for the host code to
// copy them back (the KV cache's `cache_length`, decode_tokens' `sampler`
// handle). Set by `bt-scalars-to-kernels` on the CUDA target (on the CPU
// every buffer is host memory); read by `bt-gpu-host-accesses` (loads of it
// are host loads) and by the kernel interface (TensorSpec::hostScalar, the
// manifest's `TensorSpec.host_scalar`; docs/abi.md).
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_HOSTSCALARS_H
#define BT_CODEGEN_HOSTSCALARS_H

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringRef.h"

namespace bt {

/// The argument attribute's name.
constexpr llvm::StringLiteral kHostScalarAttrName = "bt.host_scalar";

/// Whether argument `i` of `fn` is passed by value in host memory.
inline bool isHostScalarArg(mlir::FunctionOpInterface fn, unsigned i) {
  return static_cast<bool>(fn.getArgAttr(i, kHostScalarAttrName));
}

} // namespace bt

#endif // BT_CODEGEN_HOSTSCALARS_H
