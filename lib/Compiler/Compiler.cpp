//===- Compiler.cpp - the compile phases ----------------------------------===//
//
// Compilation (include/bt/Compiler/Compiler.h): import → Phase::Model →
// Phase::Layer → Phase::Linalg (the kernel interface is read) →
// Phase::LLVM (the PTX is taken out on CUDA) → the host code's shared
// object.
//
//===----------------------------------------------------------------------===//

#include "bt/Compiler/Compiler.h"

#include "bt/Codegen/CPU/CPUCodegen.h"
#include "bt/Codegen/CompileCache.h"
#include "bt/Codegen/CUDA/CUDACodegen.h"
#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Import/Import.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace bt;
using namespace bt::compiler;

std::optional<Phase> bt::compiler::parsePhase(StringRef name) {
  return llvm::StringSwitch<std::optional<Phase>>(name)
      .Case("model", Phase::Model)
      .Case("layer", Phase::Layer)
      .Case("linalg", Phase::Linalg)
      .Case("llvm", Phase::LLVM)
      .Default(std::nullopt);
}

StringRef bt::compiler::getPhaseName(Phase phase) {
  switch (phase) {
  case Phase::Model:
    return "model";
  case Phase::Layer:
    return "layer";
  case Phase::Linalg:
    return "linalg";
  case Phase::LLVM:
    return "llvm";
  }
  llvm_unreachable("unknown phase");
}

std::optional<Target> bt::compiler::parseTarget(StringRef name) {
  return llvm::StringSwitch<std::optional<Target>>(name)
      .Case("cpu", Target::CPU)
      .Case("cuda", Target::CUDA)
      .Default(std::nullopt);
}

void bt::compiler::registerCompilerDialects(DialectRegistry &registry) {
  registry.insert<BTDialect>();
  // A superset of registerCPUCodegenDialects.
  registerCUDACodegenDialects(registry);
}

//===----------------------------------------------------------------------===//
// Phase pipelines
//===----------------------------------------------------------------------===//

namespace {

void fillCPUOptions(CPUPipelineOptions &p, const Options &options) {
  p.blas = options.blas;
  p.sgemmFunction = options.sgemmFunction;
  p.fuseLocalAttention = options.fuseLocalAttention;
}

void fillCUDAOptions(CUDAPipelineOptions &p, const Options &options) {
  p.blas = options.blas;
  p.fuseLocalAttention = options.fuseLocalAttention;
  p.chip = options.gpuChip;
  p.cudaPath = options.cudaPath;
  p.binary = options.gpuBinary;
  p.dtype = options.dtype;
}

/// Runs the passes `build` adds on `module`, with the MLIR pass-manager and
/// timing command-line options when the tool registered them.
LogicalResult runPasses(ModuleOp module,
                        function_ref<void(OpPassManager &)> build) {
  PassManager pm(module->getContext(), module->getName().getStringRef());
  // Fails only when the tool did not register the pass-manager options;
  // then there is nothing to apply.
  (void)applyPassManagerCLOptions(pm);
  DefaultTimingManager timing;
  applyDefaultTimingManagerCLOptions(timing);
  TimingScope root = timing.getRootScope();
  pm.enableTiming(root);
  build(pm);
  return pm.run(module);
}

/// Whether the KV caches are bf16: `--dtype bf16` on the CUDA target (the
/// one rule both the entry points and the stored KV plan follow).
bool bf16KVCaches(const Options &options) {
  return options.target == Target::CUDA && options.dtype == "bf16";
}

Phase nextPhase(std::optional<Phase> done) {
  return done ? static_cast<Phase>(static_cast<int>(*done) + 1) : Phase::Model;
}

} // namespace

void bt::compiler::buildPhasePipeline(OpPassManager &pm, Phase phase,
                                      const Options &options) {
  bool cuda = options.target == Target::CUDA;
  switch (phase) {
  case Phase::Model: {
    // --dtype bf16 (CUDA): the KV caches in bf16 as well (issue 13 item 2).
    BTGenerateEntryPointsOptions entries;
    if (bf16KVCaches(options))
      entries.kvDType = "bf16";
    pm.addPass(createBTGenerateEntryPoints(entries));
    pm.addPass(createBTVerifyKVLifetimes());
    if (options.trainStep || options.applyGradients) {
      BTGenerateTrainStepOptions train;
      train.trainStep = options.trainStep;
      train.applyGradients = options.applyGradients;
      pm.addPass(createBTGenerateTrainStep(train));
    }
    return;
  }
  case Phase::Layer:
    pm.addPass(createBTDecompose());
    pm.addPass(createBTVerifyKVLifetimes());
    // grad: loss and d loss / d param, from eval_loss.
    if (options.gradEntry)
      pm.addPass(createBTGenerateGradients());
    return;
  case Phase::Linalg:
    if (cuda) {
      CUDAPipelineOptions p;
      fillCUDAOptions(p, options);
      buildCUDALayerToLinalgPipeline(pm, p);
    } else {
      CPUPipelineOptions p;
      fillCPUOptions(p, options);
      buildCPULayerToLinalgPipeline(pm, p);
    }
    return;
  case Phase::LLVM:
    if (cuda) {
      CUDAPipelineOptions p;
      fillCUDAOptions(p, options);
      buildCUDALinalgToLLVMPipeline(pm, p);
    } else {
      CPUPipelineOptions p;
      fillCPUOptions(p, options);
      buildCPULinalgToLLVMPipeline(pm, p);
    }
    return;
  }
}

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

Compilation::Compilation(OwningOpRef<ModuleOp> module, Options options,
                         KVPlan plan)
    : module(std::move(module)), options(std::move(options)),
      kvPlan(std::move(plan)) {}

FailureOr<Compilation> Compilation::import(MLIRContext &context,
                                           const ModelSpec &spec,
                                           Options options) {
  OwningOpRef<ModuleOp> module = importModel(&context, spec);
  if (!module)
    return failure();
  // The KV-cache plan from the model ops, before the generation functions
  // exist, as `bt-run plan` computes it.
  // bf16 KV caches (--dtype bf16 on the CUDA target) at 2 bytes.
  KVPlanRequest request;
  if (bf16KVCaches(options))
    request.cacheEltBytes = 2;
  FailureOr<KVPlan> plan = computeKVPlan(*module, request);
  if (failed(plan))
    return failure();
  return Compilation(std::move(module), std::move(options), std::move(*plan));
}

LogicalResult Compilation::runTo(Phase phase) {
  bool cuda = options.target == Target::CUDA;
  MLIRContext *ctx = module->getContext();
  DialectRegistry registry;
  if (cuda)
    registerCUDACodegenDialects(registry);
  else
    registerCPUCodegenDialects(registry);
  ctx->appendDialectRegistry(registry);

  for (Phase p = nextPhase(done); !done || *done < phase; p = nextPhase(done)) {
    if (p == Phase::LLVM && cuda && options.gpuBinary &&
        failed(verifyCUDAToolkit(*module, options.cudaPath)))
      return failure();
    // CUDA: the kernels stay an NVVM gpu.module through the LLVM phase, so
    // that the emulator's kernels and a replacement (--nvvm-kernels) see
    // them as they go to PTX; finishKernels then builds the PTX.
    Options phaseOptions = options;
    if (p == Phase::LLVM && cuda)
      phaseOptions.gpuBinary = false;
    if (failed(runPasses(*module, [&](OpPassManager &pm) {
          buildPhasePipeline(pm, p, phaseOptions);
        })))
      return failure();
    if (p == Phase::Linalg) {
      interface = readKernelInterface(*module, kvPlan);
    }
    if (p == Phase::LLVM && cuda && failed(finishKernels()))
      return failure();
    if (p == Phase::LLVM && cuda && options.gpuBinary) {
      FailureOr<std::string> kernels = takePTX(*module);
      if (failed(kernels))
        return failure();
      ptx = std::move(*kernels);
    }
    done = p;
  }
  return success();
}

LogicalResult Compilation::finishKernels() {
  if (!options.nvvmKernels.empty()) {
    OwningOpRef<ModuleOp> file =
        parseSourceFile<ModuleOp>(options.nvvmKernels, module->getContext());
    if (!file)
      return failure();
    SmallVector<gpu::GPUModuleOp> mine(module->getOps<gpu::GPUModuleOp>());
    SmallVector<gpu::GPUModuleOp> theirs(file->getOps<gpu::GPUModuleOp>());
    if (mine.size() != 1 || theirs.size() != 1 ||
        mine[0].getName() != theirs[0].getName())
      return (*file)->emitError()
             << "--nvvm-kernels " << options.nvvmKernels
             << ": expected one gpu.module @"
             << (mine.empty() ? StringRef("?") : mine[0].getName())
             << " (as --emit nvvm writes it)";
    theirs[0]->moveBefore(mine[0]);
    mine[0].erase();
  }
  CUDAPipelineOptions p;
  fillCUDAOptions(p, options);
  return finishCUDAKernels(*module, p,
                           options.emulatorKernels ? &emulator : nullptr,
                           options.cacheDir);
}

namespace {
/// The LLVM codegen options of the host code and the CPU name they stand
/// for ("native": this machine's).
CPUCodegenOptions hostCodegenOptions(const Options &options,
                                     std::string &cpuName) {
  CPUCodegenOptions codegen;
  codegen.cpu = options.cpu == "native" ? "" : options.cpu;
  cpuName = options.cpu == "native" ? getHostCPUName() : options.cpu;
  codegen.cacheDir = options.cacheDir;
  return codegen;
}

/// The compile cache's key of everything compileKernels returns: the
/// imported module, every option that changes the kernels, and what the
/// shared objects (host code; the emulator's kernels) and the PTX depend on
/// besides their modules. std::nullopt (with a warning on `module`) when
/// those cannot be determined; the compile then reports the reason itself.
std::optional<codegen::CompileCacheKey>
kernelsCacheKey(ModuleOp module, const Options &options,
                StringRef identity) {
  codegen::CompileCacheKey key("kernels", identity);
  key.add("target", options.target == Target::CUDA ? "cuda" : "cpu");
  key.addFlag("grad-entry", options.gradEntry);
  key.addFlag("train-step", options.trainStep);
  key.addFlag("apply-gradients", options.applyGradients);
  key.addFlag("fuse-local-attention", options.fuseLocalAttention);
  key.addFlag("blas", options.blas);
  key.add("sgemm-function", options.sgemmFunction);
  key.add("cpu", options.cpu);
  key.add("gpu-chip", options.gpuChip);
  key.add("cuda-path", options.cudaPath);
  key.add("dtype", options.dtype);
  key.addFlag("gpu-binary", options.gpuBinary);
  key.addFlag("emulator-kernels", options.emulatorKernels);
  std::string cpuName;
  CPUCodegenOptions host = hostCodegenOptions(options, cpuName);
  key.add("host-cpu", cpuName);
  llvm::Error fields = addSharedObjectKeyFields(key, host);
  if (!fields && options.target == Target::CUDA) {
    CUDAPipelineOptions p;
    fillCUDAOptions(p, options);
    fields = addPTXKeyFields(key, p);
  }
  if (fields) {
    module.emitWarning("compile cache not used: ")
        << llvm::toString(std::move(fields));
    return std::nullopt;
  }
  key.addOperation("module", module);
  return key;
}
} // namespace

FailureOr<CompiledKernels> Compilation::compileKernels() {
  std::optional<codegen::OpenCompileCache> cache;
  std::optional<codegen::CompileCacheKey> key;
  if (!done && options.nvvmKernels.empty() && options.cacheWholeCompile) {
    cache = codegen::openCompileCache(*module, options.cacheDir);
    // Warned once (openCompileCache); the shared objects and the PTX of
    // this compile do without the cache too.
    if (!cache)
      options.cacheDir.clear();
  }
  if (cache)
    key = kernelsCacheKey(*module, options, cache->identity);
  if (key) {
    if (std::optional<std::string> hit = cache->cache.lookup(*key)) {
      llvm::Expected<CompiledKernels> kernels =
          deserializeCompiledKernels(*hit);
      if (kernels)
        return std::move(*kernels);
      // An entry of an older layout under the same key cannot happen (the
      // compiler's identity is in the key); recompile and replace it.
      llvm::consumeError(kernels.takeError());
    }
  }
  FailureOr<CompiledKernels> kernels = compileKernelsUncached();
  if (succeeded(kernels) && key)
    if (llvm::Error e =
            cache->cache.store(*key, serializeCompiledKernels(*kernels)))
      module->emitWarning(llvm::toString(std::move(e)));
  return kernels;
}

FailureOr<CompiledKernels> Compilation::compileKernelsUncached() {
  if (failed(runTo(Phase::LLVM)))
    return failure();
  CompiledKernels kernels;
  llvm::Expected<std::string> so = compileToSharedObject(
      *module, hostCodegenOptions(options, kernels.cpu));
  if (!so)
    return module->emitError(llvm::toString(so.takeError()));
  kernels.interface = interface;
  kernels.sharedObject = std::move(*so);
  if (options.target == Target::CUDA) {
    kernels.ptx = ptx;
    kernels.gpuChip = options.gpuChip;
  }
  if (emulator) {
    // The kernels for the CUDA emulator (docs/cuda-emulator.md).
    std::string cpu;
    CPUCodegenOptions emu = hostCodegenOptions(options, cpu);
    emu.soname = "libbt_cuda_emu_kernels.so";
    llvm::Expected<std::string> so = compileToSharedObject(*emulator, emu);
    if (!so)
      return module->emitError(llvm::toString(so.takeError()));
    kernels.cudaEmu = std::move(*so);
  }
  return kernels;
}

FailureOr<std::string> Compilation::emitEmulatorLLVMIR() {
  if (failed(runTo(Phase::LLVM)))
    return failure();
  if (!emulator)
    return module->emitError(
        "no kernels for the CUDA emulator (target cuda with the emulator's "
        "kernels only)");
  std::string cpu;
  llvm::Expected<std::string> ir =
      compileToLLVMIR(*emulator, hostCodegenOptions(options, cpu));
  if (!ir)
    return module->emitError(llvm::toString(ir.takeError()));
  return std::move(*ir);
}

FailureOr<std::string> Compilation::emitLLVMIR() {
  if (failed(runTo(Phase::LLVM)))
    return failure();
  std::string cpu;
  llvm::Expected<std::string> ir =
      compileToLLVMIR(*module, hostCodegenOptions(options, cpu));
  if (!ir)
    return module->emitError(llvm::toString(ir.takeError()));
  return std::move(*ir);
}
