//===- Passes.h - bt code generation passes ---------------------*- C++ -*-===//

#ifndef BT_CODEGEN_PASSES_H
#define BT_CODEGEN_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace bt {

#define GEN_PASS_DECL
#include "bt/Codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "bt/Codegen/Passes.h.inc"

} // namespace bt

#endif // BT_CODEGEN_PASSES_H
