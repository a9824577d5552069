//===- OptDriver.h - bt-opt's driver: limits, stack, atomic output -*- C++ -*-===//
//
// What bt-opt (and the IR fuzz target, fuzz/) run around MLIR's MlirOptMain:
// a bracket-nesting limit checked on the text before the recursive-descent
// parser sees it, the work on a thread with a large stack, and the output
// written through the runtime's AtomicFileWriter (bt/runtime/base/file_util.h).
//
//===----------------------------------------------------------------------===//

#ifndef BT_TOOLS_BTOPT_OPTDRIVER_H
#define BT_TOOLS_BTOPT_OPTDRIVER_H

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace bt {

/// The deepest nesting of brackets ( [ { < that bt-opt parses. MLIR's parser
/// recurses once (several frames) per level; real IR stays below 100 levels.
inline constexpr unsigned kMaxIRNesting = 2048;

/// The stack of the thread that parses, verifies, transforms and prints
/// (virtual memory: pages are committed only when touched). At kMaxIRNesting
/// the parser uses a few MiB of it.
inline constexpr unsigned kToolStackBytes = 512u << 20;

/// Scans textual IR for bracket nesting deeper than `limit`: ( [ { < open a
/// level, ) ] } > close one ("->", ">=" and "<=" are operators, not
/// brackets; string literals and // comments are skipped). Returns the
/// offset of the first bracket past the limit, or -1.
long findNestingBeyond(llvm::StringRef text, unsigned limit = kMaxIRNesting);

/// findNestingBeyond, reported as "<name>:<line>:<col>: error: ..." on `os`.
/// Failure when the limit is exceeded.
mlir::LogicalResult checkIRNesting(llvm::StringRef text, llvm::StringRef name,
                                   llvm::raw_ostream &os,
                                   unsigned limit = kMaxIRNesting);

/// Runs `fn` on a new thread with a `stackBytes` stack and waits for it.
void runOnLargeStack(llvm::function_ref<void()> fn,
                     unsigned stackBytes = kToolStackBytes);

/// bt-opt's main: mlir-opt's command line with every dialect, pass and
/// pipeline registered by the caller in `registry`.
int btOptMain(int argc, char **argv, mlir::DialectRegistry &registry);

} // namespace bt

#endif // BT_TOOLS_BTOPT_OPTDRIVER_H
