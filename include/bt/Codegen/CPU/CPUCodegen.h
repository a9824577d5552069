//===- CPUCodegen.h - layer-level bt IR → CPU shared object -----*- C++ -*-===//
//
// The C++ API of the CPU back end (docs/design.md §2, lib/Codegen/CPU):
// `bt-cpu-pipeline` (layer-level bt IR → LLVM dialect with the kernel ABI of
// docs/abi.md) and the LLVM back end that turns LLVM-dialect host code into a
// shared object (also used for the host code of the CUDA target):
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

#ifndef BT_CODEGEN_CPU_CPUCODEGEN_H
#define BT_CODEGEN_CPU_CPUCODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace bt {

/// Options of `bt-cpu-pipeline`.
struct CPUPipelineOptions : public mlir::PassPipelineOptions<CPUPipelineOptions> {
  Option<bool> blas{*this, "blas",
                    llvm::cl::desc("Turn f32 GEMMs into cblas_sgemm calls "
                                   "(bt-gemm-to-blas); loops otherwise"),
                    llvm::cl::init(true)};
  Option<std::string> sgemmFunction{
      *this, "sgemm-function",
      llvm::cl::desc("The function the GEMMs call, with cblas_sgemm's "
                     "signature: cblas_sgemm (OpenBLAS), or bt_cpu_sgemm "
                     "(the bt runtime's: small-M products without packing, "
                     "the rest cblas_sgemm; runtime/device/cpu/small_gemm.h)"),
      llvm::cl::init("cblas_sgemm")};
  Option<int64_t> blasMinMNK{
      *this, "blas-min-mnk",
      llvm::cl::desc("Static GEMMs with M*N*K below this stay loops"),
      llvm::cl::init(4096)};
  Option<bool> fuseLocalAttention{
      *this, "fuse-local-attention",
      llvm::cl::desc("Fuse split_qkv -> rotary -> local_attention into "
                     "bt.fused_local_attention (bt-fuse-local-attention), "
                     "lowered to one kernel per block and head"),
      llvm::cl::init(true)};
  Option<bool> parallel{
      *this, "parallel",
      llvm::cl::desc("Run the outer parallel loop of every generated kernel "
                     "on OpenMP threads (convert-linalg-to-parallel-loops, "
                     "bt-parallel-outer-loops, convert-scf-to-openmp; the "
                     "kernel library then needs libomp.so.5)"),
      llvm::cl::init(true)};
  Option<bool> approximateMath{
      *this, "approximate-math",
      llvm::cl::desc("Polynomial f32 erf and tanh (bt-math-approximation) "
                     "instead of libm calls, so their loops vectorize, in "
                     "every function but the entry points that compute "
                     "gradients (grad, train_step: there, on megabyte_tiny, "
                     "it moved an ill-conditioned AdamW element of the "
                     "x86-64-v3 executable 2.2e-4 from the fixture, past the "
                     "2e-4 bound)"),
      llvm::cl::init(true)};
  Option<bool> fuse{*this, "fuse-elementwise",
                    llvm::cl::desc("Run bt-fuse-elementwise"),
                    llvm::cl::init(true)};
  Option<bool> entryWrappers{
      *this, "entry-wrappers",
      llvm::cl::desc("Emit bt_entry_<name> and bt_kernel_abi_version "
                     "(bt-emit-entry-wrappers)"),
      llvm::cl::init(true)};
  Option<bool> internalize{
      *this, "internalize",
      llvm::cl::desc("Give every function but the ABI entry points internal "
                     "linkage (off to call functions by name, e.g. from "
                     "mlir-cpu-runner)"),
      llvm::cl::init(true)};
};

/// Appends the passes of `bt-cpu-pipeline` to `pm` (which runs on a
/// builtin.module). The pass list is documented in docs/codegen.md.
void buildCPUPipeline(mlir::OpPassManager &pm, const CPUPipelineOptions &options);

/// The two halves of `bt-cpu-pipeline`: layer-level bt IR → linalg on
/// tensors, where the entry points have their final signatures (KV caches
/// as in-out tensors, weights as leading arguments; the kernel interface is
/// fixed), and from there → LLVM dialect.
void buildCPULayerToLinalgPipeline(mlir::OpPassManager &pm,
                                   const CPUPipelineOptions &options);
void buildCPULinalgToLLVMPipeline(mlir::OpPassManager &pm,
                                  const CPUPipelineOptions &options);

/// Registers `bt-cpu-pipeline` with the global pass registry (for bt-opt).
void registerCPUPipeline();

/// Registers the dialects and external interface models that the CPU
/// pipeline and compileToSharedObject need: those of the target-neutral
/// stages (registerCodegenDialects) and the builtin / LLVM dialect → LLVM IR
/// translations.
void registerCPUCodegenDialects(mlir::DialectRegistry &registry);

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
  /// compileToSharedObject: the compile cache's directory
  /// (bt/Codegen/CompileCache.h); empty: no cache.
  std::string cacheDir;
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
/// Errors carry the linker's stderr. With `options.cacheDir`, a shared object
/// that the same compiler built from the same module and options is read
/// from the compile cache instead, and a new one is stored there; a cache
/// that cannot be opened, read or written is a warning on `module` (the
/// compile goes on without it), never an error.
llvm::Expected<std::string> compileToSharedObject(mlir::ModuleOp module,
                                                  const CPUCodegenOptions &options);

namespace codegen {
class CompileCacheKey;
} // namespace codegen

/// Adds to `key` every input of compileToSharedObject other than the module:
/// the LLVM target (triple, and the CPU and features as resolved for
/// `options.cpu`, "" = this machine's), the optimization options, the soname,
/// and the linker and libraries the link would use. The compile cache's key
/// of a shared object is these and the module; a key of anything that
/// contains such a compile (Compilation::compileKernels) adds them too.
/// Errors: those compileToSharedObject reports before it compiles (no LLVM
/// target for the CPU, no linker or C library found).
llvm::Error addSharedObjectKeyFields(codegen::CompileCacheKey &key,
                                     const CPUCodegenOptions &options);

} // namespace bt

#endif // BT_CODEGEN_CPU_CPUCODEGEN_H
