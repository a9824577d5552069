//===- CPUCodegen.h - layer-level bt IR → CPU shared object -----*- C++ -*-===//
//
// The C++ API of the CPU back end (DESIGN.md §2):
//
//   bt::CPUPipelineOptions popts;            // bt-cpu-pipeline options
//   if (failed(bt::runCPUPipeline(module, popts))) ...   // → LLVM dialect
//   llvm::Expected<std::string> so = bt::compileToSharedObject(module, {});
//
// The shared object exports the kernel ABI of docs/abi.md:
// `void bt_entry_<name>(void **argv)` per public function and
// `int32_t bt_kernel_abi_version(void)` (= 1); it needs libm and libc, and its
// BLAS calls (cblas_sgemm) stay undefined, to be resolved by the process.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_CPUCODEGEN_H
#define BT_CODEGEN_CPUCODEGEN_H

#include "bt/Codegen/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace bt {

struct CPUCodegenOptions {
  /// LLVM CPU name (e.g. "x86-64-v3", "znver3"); empty or "native": the host
  /// CPU (llvm::sys::getHostCPUName) with the host's features.
  std::string cpu;
  /// Extra LLVM target features ("+avx2,-avx512f"), appended to the host's
  /// when compiling for the host.
  std::string features;
  /// LLVM optimization level of the IR pipeline and code generation, 0-3.
  unsigned optLevel = 3;
  /// Let LLVM unroll loops (full and runtime unrolling). Off by default: it
  /// fully unrolls the static inner loops of the generated nests into huge
  /// scalar blocks (slow to compile, slower to run than the vectorized loop).
  bool unrollLoops = false;
  /// Let the loop vectorizer call glibc's vector math library (libmvec:
  /// expf, logf, sinf, cosf); the shared object then also needs
  /// libmvec.so.1 (part of glibc), only if it uses it.
  bool vectorMath = true;
  /// ld.lld to use; empty: ld.lld-19, ld.lld in PATH, /usr/lib/llvm-19/bin.
  std::string linker;
  /// DT_SONAME of the shared object.
  std::string soname = "libbt_kernels.so";
  /// Directories searched for libm.so.6 / libc.so.6 (DT_NEEDED); empty: the
  /// usual multiarch directories.
  std::vector<std::string> libraryDirs;
};

/// The CPU that an empty / "native" `CPUCodegenOptions::cpu` stands for.
std::string getHostCPUName();

/// Runs `bt-cpu-pipeline` on `module` (layer-level bt IR → LLVM dialect) with a
/// PassManager that honors the MLIR PassManager command-line options when the
/// tool registered them (mlir::registerPassManagerCLOptions,
/// mlir::registerDefaultTimingManagerCLOptions: --mlir-print-ir-after-all,
/// --mlir-timing, ...). Registers the dialect extensions it needs
/// (registerCPUCodegenDialects) in the module's context.
mlir::LogicalResult runCPUPipeline(mlir::ModuleOp module,
                                   const CPUPipelineOptions &options = {});

/// Translates `module` (LLVM dialect) to LLVM IR and optimizes it.
/// Returns the textual LLVM IR (for inspection and tests).
llvm::Expected<std::string> compileToLLVMIR(mlir::ModuleOp module,
                                            const CPUCodegenOptions &options);

/// Translates `module` (LLVM dialect) to LLVM IR, optimizes it at
/// `options.optLevel` with a TargetMachine for `options.cpu`, emits an object
/// file and links it with ld.lld into a shared object; returns its bytes.
/// Errors carry the linker's stderr.
llvm::Expected<std::string> compileToSharedObject(mlir::ModuleOp module,
                                                  const CPUCodegenOptions &options);

} // namespace bt

#endif // BT_CODEGEN_CPUCODEGEN_H
