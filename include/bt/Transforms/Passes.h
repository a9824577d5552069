//===- Passes.h - bt transformation passes ----------------------*- C++ -*-===//

#ifndef BT_TRANSFORMS_PASSES_H
#define BT_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace bt {

#define GEN_PASS_DECL
#include "bt/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "bt/Transforms/Passes.h.inc"

} // namespace bt

#endif // BT_TRANSFORMS_PASSES_H
