//===- Passes.h - bt CUDA code generation passes ----------------*- C++ -*-===//
//
// The passes of the CUDA target (CUDA/Passes.td, lib/Codegen/CUDA).
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_CUDA_PASSES_H
#define BT_CODEGEN_CUDA_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace bt {

#define GEN_PASS_DECL
#include "bt/Codegen/CUDA/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "bt/Codegen/CUDA/Passes.h.inc"

} // namespace bt

#endif // BT_CODEGEN_CUDA_PASSES_H
