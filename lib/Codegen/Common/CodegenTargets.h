//===- CodegenTargets.h - the lowering passes' target hooks -----*- C++ -*-===//
//
// How the target-neutral lowering passes find their code-generation target
// (lib/Codegen/Common, internal): the one their C++ factory received, else
// the registered one their `target` option names (CodegenTarget.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_CODEGEN_COMMON_CODEGENTARGETS_H
#define BT_LIB_CODEGEN_COMMON_CODEGENTARGETS_H

#include "bt/Codegen/CodegenTarget.h"

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

namespace bt::codegen {

/// `explicitTarget` if not null, else the registered target named `name`
/// (null for an empty or unknown name).
const CodegenTarget *resolveCodegenTarget(const CodegenTarget *explicitTarget,
                                          llvm::StringRef name);

/// The same into `result`; an unknown name is an error located at `root`.
mlir::LogicalResult resolveCodegenTarget(const CodegenTarget *explicitTarget,
                                         llvm::StringRef name,
                                         mlir::Operation *root,
                                         const CodegenTarget *&result);

} // namespace bt::codegen

#endif // BT_LIB_CODEGEN_COMMON_CODEGENTARGETS_H
