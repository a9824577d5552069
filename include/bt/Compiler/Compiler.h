//===- Compiler.h - the compile phases of a Block Transformer --*- C++ -*-===//
//
// The compile driver (docs/design.md §2), as phases in the manner of IREE's
// `--compile-to` phases. A Compilation imports a model (bt/Model/ModelSpec.h)
// and runs the phases one after the other, each a pass pipeline on the
// module:
//
//   Phase::Model   model-level bt IR with the entry points: eval, eval_loss
//                  (import), prefill, decode_block, decode_tokens (vanilla:
//                  prefill, decode_step) (bt-generate-entry-points),
//                  [train_step, apply_gradients (bt-generate-train-step)],
//                  KV-cache lifetimes verified
//   Phase::Layer   layer-level bt IR (bt-decompose), [grad
//                  (bt-generate-gradients)]
//   Phase::Linalg  linalg on tensors with the entry points' final
//                  signatures (the front half of bt-cpu-pipeline /
//                  bt-cuda-pipeline: KV caches → tensors, weights → leading
//                  arguments); the kernel interface is read here
//   Phase::LLVM    LLVM-dialect host code; on the CUDA target the kernels'
//                  PTX is taken out of the module
//
// and then compileKernels() turns the host code into a shared object. What
// the artifact needs besides the weights comes back as data: the kernel
// interface (KernelInterface.h), the KV-cache plan (bt::KVPlan) and the
// kernels (CompiledKernels). The same phases are registered as the
// `bt-compile-pipeline` pass pipeline for bt-opt (registerCompilePipeline).
//
//===----------------------------------------------------------------------===//

#ifndef BT_COMPILER_COMPILER_H
#define BT_COMPILER_COMPILER_H

#include "bt/Compiler/KernelInterface.h"
#include "bt/Model/ModelSpec.h"
#include "bt/Transforms/KVPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace mlir {
class DialectRegistry;
class MLIRContext;
class OpPassManager;
} // namespace mlir

namespace bt::compiler {

/// The phases of a compile, in order; a phase names the IR it produces.
enum class Phase { Model, Layer, Linalg, LLVM };

/// The phase named `name` ("model", "layer", "linalg", "llvm").
std::optional<Phase> parsePhase(llvm::StringRef name);
llvm::StringRef getPhaseName(Phase phase);

/// What the kernels are compiled for.
enum class Target { CPU, CUDA };

/// The target named `name` ("cpu", "cuda").
std::optional<Target> parseTarget(llvm::StringRef name);

struct Options {
  Target target = Target::CPU;
  /// Build the `grad` entry point (loss and parameter gradients,
  /// bt-generate-gradients). Not on the CUDA target.
  bool gradEntry = false;
  /// Build `train_step` / `apply_gradients` (bt-generate-train-step). Not
  /// on the CUDA target.
  bool trainStep = false;
  bool applyGradients = false;
  /// bt-fuse-local-attention (the token decoder's attention as one kernel).
  bool fuseLocalAttention = true;
  /// f32 GEMMs through BLAS (cblas_sgemm; cuBLAS on the CUDA target).
  bool blas = true;
  /// CPU target: the function the GEMMs call (bt-cpu-pipeline
  /// sgemm-function): "bt_cpu_sgemm", the runtime's (small-M products
  /// without packing, runtime/device/cpu/small_gemm.h), for kernels the bt
  /// runtime loads; "cblas_sgemm" for a process with OpenBLAS alone.
  std::string sgemmFunction = "bt_cpu_sgemm";
  /// The LLVM CPU of the host code: "native" (this machine) or a name such
  /// as x86-64-v3, znver4.
  std::string cpu = "x86-64-v3";
  /// CUDA target: the GPU architecture and the toolkit whose libdevice
  /// resolves the kernels' math functions (empty: defaultCUDAPath()).
  std::string gpuChip = "sm_90";
  std::string cudaPath;
  /// CUDA target: "f32" or "bf16" (bt-cuda-pipeline's `dtype`: the GEMM
  /// weights and inputs in bf16, f32 accumulation; and the KV caches in
  /// bf16, bt-generate-entry-points `kv-dtype`; docs/codegen-cuda.md,
  /// "bf16").
  std::string dtype = "f32";
  /// CUDA target: compile the kernels to PTX (false: keep the NVVM-dialect
  /// gpu.module in the module, for bt-opt and tests).
  bool gpuBinary = true;
  /// CUDA target: also compile the kernels for the CUDA emulator
  /// (bt-nvvm-to-host, docs/cuda-emulator.md): CompiledKernels::cudaEmu.
  bool emulatorKernels = true;
  /// CUDA target: a file with a gpu.module (as `bt-run compile --emit nvvm`
  /// writes it, e.g. edited to debug a kernel) that replaces the generated
  /// NVVM gpu.module before the PTX and the emulator's kernels are built;
  /// empty: the generated one. Errors: a file that does not parse or does
  /// not hold exactly one gpu.module of the generated one's name.
  std::string nvvmKernels;
  /// The compile cache's directory (bt/Codegen/CompileCache.h: the kernel
  /// libraries and the PTX, keyed by the module and the codegen options);
  /// empty: none.
  std::string cacheDir;
  /// With cacheDir: also keep the whole result of compileKernels (false:
  /// only the shared objects and the PTX, so that the passes run, e.g. when
  /// --mlir-timing or --mlir-print-ir-* watch them).
  bool cacheWholeCompile = true;
};

/// The kernels of a compiled model: what an artifact holds besides the
/// weights, the config and the tokenizer (docs/abi.md).
struct CompiledKernels {
  /// The entry points and the KV-cache memory plan.
  KernelInterface interface;
  /// The host code as a shared object (ELF bytes).
  std::string sharedObject;
  /// The LLVM CPU the host code was compiled for (the host's name for
  /// "native").
  std::string cpu;
  /// CUDA target: the PTX of every kernel and the GPU architecture.
  std::string ptx;
  std::string gpuChip;
  /// CUDA target with Options::emulatorKernels: the same kernels compiled
  /// for the host by bt-nvvm-to-host, a shared object with the ABI of
  /// runtime/device/cuda_emu/bt_emu_abi.h (the artifact's cuda_emu section).
  std::string cudaEmu;
};

/// `kernels` as bytes (the compile cache's "kernels" entries;
/// lib/Compiler/CompiledKernelsCache.cpp has the layout).
std::string serializeCompiledKernels(const CompiledKernels &kernels);
/// The CompiledKernels that serializeCompiledKernels wrote as `bytes`.
/// Errors: truncated bytes, trailing bytes, malformed JSON or a missing or
/// mistyped field (named by its JSON path).
llvm::Expected<CompiledKernels> deserializeCompiledKernels(llvm::StringRef bytes);

/// Registers the dialects, interface models and translations that a compile
/// for any target needs (the bt dialect, registerCUDACodegenDialects, the
/// autodiff interfaces). The GPU dialects are registered, never loaded on the
/// CPU target.
void registerCompilerDialects(mlir::DialectRegistry &registry);

/// One compile of one model. Each phase runs a PassManager that honors the
/// MLIR pass-manager command-line options when the tool registered them
/// (--mlir-print-ir-after-all, --mlir-timing, ...); failures are reported as
/// diagnostics on the context.
class Compilation {
public:
  /// Imports `spec` into `context` (bt::importModel) and computes its KV
  /// plan (bt-plan-kv-memory, from the model ops). The context needs the
  /// registrations of registerCompilerDialects.
  static mlir::FailureOr<Compilation>
  import(mlir::MLIRContext &context, const ModelSpec &spec, Options options);

  /// Runs the phases after the last one run up to and including `phase`
  /// (nothing if `phase` already ran). Fails on an option the target does
  /// not support (training entry points on CUDA).
  mlir::LogicalResult runTo(Phase phase);

  /// Runs every phase and compiles the host code to a shared object.
  /// With Options::cacheDir, called before any phase ran and without
  /// Options::nvvmKernels, the whole result comes from the compile cache
  /// when this compiler built it before from the same imported module and
  /// options (kernelsCacheKey), and is stored there otherwise; the module
  /// is then left as imported. A cache that cannot be used is a warning.
  mlir::FailureOr<CompiledKernels> compileKernels();

  /// The host code as optimized LLVM IR (text), after every phase.
  mlir::FailureOr<std::string> emitLLVMIR();
  /// CUDA target with Options::emulatorKernels: the kernels as the CUDA
  /// emulator runs them (LLVM IR text), after every phase.
  mlir::FailureOr<std::string> emitEmulatorLLVMIR();

  mlir::ModuleOp getModule() { return *module; }
  const Options &getOptions() const { return options; }
  /// The KV-cache plan of the imported model (per-sequence coefficients;
  /// the caches at 2 bytes for `--dtype bf16` on the CUDA target, the
  /// weights at the IR's element type).
  const KVPlan &getKVPlan() const { return kvPlan; }
  /// The entry points and the memory plan (readKernelInterface of the
  /// module and getKVPlan()), once Phase::Linalg ran.
  const KernelInterface &getKernelInterface() const { return interface; }
  /// The kernels' PTX, once Phase::LLVM ran on the CUDA target.
  const std::string &getPTX() const { return ptx; }
  /// The kernels for the CUDA emulator (a host module), once Phase::LLVM ran
  /// on the CUDA target with Options::emulatorKernels; null otherwise.
  mlir::ModuleOp getEmulatorKernels() {
    return emulator ? *emulator : mlir::ModuleOp();
  }

private:
  Compilation(mlir::OwningOpRef<mlir::ModuleOp> module, Options options,
              KVPlan plan);
  /// CUDA, after the LLVM phase's passes: the --nvvm-kernels replacement,
  /// the emulator's kernels and (gpuBinary) the PTX (finishCUDAKernels).
  mlir::LogicalResult finishKernels();
  /// compileKernels without the whole-result cache.
  mlir::FailureOr<CompiledKernels> compileKernelsUncached();

  mlir::OwningOpRef<mlir::ModuleOp> module;
  Options options;
  KVPlan kvPlan;
  std::optional<Phase> done;
  KernelInterface interface;
  std::string ptx;
  mlir::OwningOpRef<mlir::ModuleOp> emulator;
};

/// Appends the passes of `phase` (from the previous phase's IR) to `pm`.
/// Phase::Model starts from an imported model (bt::importModel, or a file
/// such as examples/block_tiny.mlir).
void buildPhasePipeline(mlir::OpPassManager &pm, Phase phase,
                        const Options &options);

/// The kernel interface of `module` after Phase::Linalg: each public
/// function's inputs (arguments without bt.param), outputs (results without
/// bt.inout_arg) and parameters (bt.params), from the attributes the
/// passes set (bt.name, bt.dims, bt.inout); and the memory plan the artifact
/// carries (KVMemoryPlan): the per-sequence coefficients of `plan` (the
/// global cache's bytes per entry of all layers, L_B = 1 for vanilla) and
/// the weights' bytes as the entry points take them: one copy of each
/// parameter at the element type of its bt.param argument (e.g. BF16 after
/// bt-bf16-gemms), as the runtime keeps one device copy per weight
/// (rt::Model::Open). A module without entry points keeps `plan`'s weight
/// bytes.
KernelInterface readKernelInterface(mlir::ModuleOp module, const KVPlan &plan);

/// Registers `bt-compile-pipeline` (imported model IR → the IR of
/// `compile-to`, on `target`) with the global pass registry (bt-opt).
void registerCompilePipeline();

} // namespace bt::compiler

#endif // BT_COMPILER_COMPILER_H
