//===- CUDAPipeline.cpp - bt-cuda-pipeline ---------------------------------===//
//
// Layer-level bt IR → host code (LLVM dialect, the kernel ABI of docs/abi.md
// on device buffers, calling the runtime's GPU ABI) + every kernel as PTX
// (one gpu.binary). docs/codegen-cuda.md lists the passes.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CUDA/CUDACodegen.h"
#include "bt/Codegen/CUDA/Passes.h"
#include "bt/Codegen/CompileCache.h"
#include "bt/Codegen/Dialects.h"
#include "bt/Codegen/Passes.h"
#include "bt/Codegen/PipelineStages.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;

#ifndef BT_DEFAULT_CUDA_PATH
#define BT_DEFAULT_CUDA_PATH "/usr/local/cuda"
#endif

std::string bt::defaultCUDAPath() { return BT_DEFAULT_CUDA_PATH; }

namespace {
std::string cudaPathOf(const bt::CUDAPipelineOptions &options) {
  return options.cudaPath.empty() ? bt::defaultCUDAPath()
                                  : std::string(options.cudaPath);
}
} // namespace

void bt::buildCUDALayerToLinalgPipeline(OpPassManager &pm,
                                        const CUDAPipelineOptions &options) {
  // The same front half as bt-cpu-pipeline, with the CUDA target's patterns:
  // attention as dedicated kernels (GPUAttention.h), the fused local
  // attention, prefill and split-K decode attention.
  codegen::LayerToLinalgStageOptions front;
  front.fuseLocalAttention = options.fuseLocalAttention;
  front.fuseElementwise = options.fuse;
  front.lowerBackward = true;
  front.target = &getCUDACodegenTarget();
  front.deviceCacheLength = options.deviceCacheLength;
  if (options.dtype == "bf16")
    front.addBeforeFusion = [](OpPassManager &pm) {
      pm.addPass(createBTBF16Gemms());
      pm.addPass(createCanonicalizerPass());
    };
  codegen::addLayerToLinalgStage(pm, front);
  // GEMM products that only elementwise kernels read: stored in bf16 (after
  // the fusion, which would merge their rounding back into the readers).
  if (options.dtype == "bf16") {
    pm.addPass(createBTBF16GemmOutputs());
    // The other activations between kernels (the residual stream, ...).
    pm.addPass(createBTBF16Activations());
  }
  // The optimizer's scalars (train_step) in kernels, not on the host.
  pm.addPass(createBTScalarsToKernels());
}

void bt::buildCUDALinalgToLLVMPipeline(OpPassManager &pm,
                                       const CUDAPipelineOptions &options) {
  // Tensors → buffers (all of them device memory from here on).
  codegen::addBufferizationStage(
      pm, [](OpPassManager &pm) { pm.addPass(createBTReshapesToViews()); });

  // GEMMs → cuBLAS through the runtime; copies and every other linalg op →
  // one kernel each; allocations → the runtime's device pool.
  codegen::addGemmToBlasStage(pm, options.blas, options.blasMinMNK,
                              "bt_gpu_sgemm", "bt_gpu_gemm_bf16",
                              "bt_gpu_gemm_bf16_out",
                              "bt_gpu_gemm_bf16_bias_out");
  // A bf16 greedy step's LM head and sampler in one runtime call, which
  // need not store the logits.
  pm.addPass(createBTGPULMHeadSampling());
  pm.addPass(createBTGPUDeviceAllocs());
  BTStridedCopiesToLinalgOptions copies;
  copies.contiguous = true;
  pm.addPass(createBTStridedCopiesToLinalg(copies));
  BTLinalgToGPUOptions kernels;
  kernels.blockSize = options.blockSize;
  pm.addPass(createBTLinalgToGPU(kernels));
  pm.addPass(createBufferizationToMemRefPass());
  // The cache length's reads (device-cache-length) into their kernels.
  pm.addPass(createBTGPUSinkDeviceScalars());
  pm.addPass(createBTGPUHostAccesses());

  // Kernels: outlined into one gpu.module → NVVM → PTX.
  // Constants and index arithmetic into the kernels (not kernel arguments).
  pm.addPass(createGpuLauchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createBTGPUSamplerKernels());
  pm.addPass(createBTMergeGPUModules());
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createLowerAffinePass());
  device.addPass(arith::createArithExpandOpsPass());
  device.addPass(createConvertSCFToCFPass());
  device.addPass(createConvertGpuOpsToNVVMOps());
  device.addPass(createBTGPUExternSharedMemory());
  device.addPass(createReconcileUnrealizedCastsPass());
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  if (options.binary) {
    GpuModuleToBinaryPassOptions toBinary;
    toBinary.toolkitPath = cudaPathOf(options);
    toBinary.compilationTarget = "isa";
    pm.addPass(createGpuModuleToBinaryPass(toBinary));
  }

  // Host code → LLVM dialect, GPU ops → the runtime's C ABI.
  codegen::addLoopsToLLVMStage(pm, [](OpPassManager &host) {
    host.addPass(arith::createArithExpandOpsPass());
  });
  pm.addPass(createBTGPUHostToRuntime());
  codegen::addEntryWrappersStage(pm, options.entryWrappers,
                                 options.internalize);
}

void bt::buildCUDAPipeline(OpPassManager &pm,
                           const CUDAPipelineOptions &options) {
  buildCUDALayerToLinalgPipeline(pm, options);
  buildCUDALinalgToLLVMPipeline(pm, options);
}

void bt::registerCUDAPipeline() {
  PassPipelineRegistration<CUDAPipelineOptions>(
      "bt-cuda-pipeline",
      "Lower layer-level bt IR to host code calling the bt runtime's GPU ABI "
      "and PTX kernels (docs/codegen-cuda.md)",
      buildCUDAPipeline);
}

namespace {
/// gpu.barrier declares no memory effects in MLIR 19, and the ownership-based
/// buffer deallocation rejects ops with unknown effects inside the attention
/// kernels (emitted as gpu.launch before bufferization). A barrier orders
/// all memory accesses of the block: it reads and writes memory.
struct BarrierEffectsModel
    : public MemoryEffectOpInterface::ExternalModel<BarrierEffectsModel,
                                                    gpu::BarrierOp> {
  void getEffects(
      Operation *,
      SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
          &effects) const {
    effects.emplace_back(MemoryEffects::Read::get());
    effects.emplace_back(MemoryEffects::Write::get());
  }
};
} // namespace

void bt::registerCUDACodegenInterfaceModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, gpu::GPUDialect *) {
    gpu::BarrierOp::attachInterface<BarrierEffectsModel>(*ctx);
  });
}

void bt::registerCUDACodegenDialects(DialectRegistry &registry) {
  registerCodegenDialects(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerCUDACodegenInterfaceModels(registry);
  registry.insert<gpu::GPUDialect, NVVM::NVVMDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

LogicalResult bt::verifyCUDAToolkit(Operation *anchor, StringRef cudaPath) {
  llvm::SmallString<256> libdevice(cudaPath.empty() ? defaultCUDAPath()
                                                    : cudaPath.str());
  llvm::sys::path::append(libdevice, "nvvm", "libdevice", "libdevice.10.bc");
  if (llvm::sys::fs::exists(libdevice))
    return success();
  return anchor->emitError()
         << "CUDA toolkit: " << libdevice
         << " not found (set --cuda-path / cuda-path= to the CUDA toolkit; "
            "without libdevice the math functions of the kernels stay "
            "unresolved)";
}

LogicalResult bt::runCUDAPipeline(ModuleOp module,
                                  const CUDAPipelineOptions &options,
                                  OwningOpRef<ModuleOp> *emulatorKernels) {
  if (options.binary && failed(verifyCUDAToolkit(module, options.cudaPath)))
    return failure();
  if (!emulatorKernels)
    return codegen::runPipeline(
        module, registerCUDACodegenDialects,
        [&](OpPassManager &pm) { buildCUDAPipeline(pm, options); });
  // The emulator needs the kernels as they go to PTX: the pipeline without
  // gpu-module-to-binary, the NVVM gpu.module lowered for the host
  // (bt-nvvm-to-host), then the PTX.
  CUDAPipelineOptions nvvm;
  nvvm.copyOptionValuesFrom(options);
  nvvm.binary = false;
  if (failed(codegen::runPipeline(
          module, registerCUDACodegenDialects,
          [&](OpPassManager &pm) { buildCUDAPipeline(pm, nvvm); })))
    return failure();
  return finishCUDAKernels(module, options, emulatorKernels);
}

namespace {

/// gpu-module-to-binary (format isa: PTX) on `module`.
LogicalResult runModuleToBinary(ModuleOp module,
                                const bt::CUDAPipelineOptions &options) {
  return bt::codegen::runPipeline(
      module, bt::registerCUDACodegenDialects, [&](OpPassManager &pm) {
        GpuModuleToBinaryPassOptions toBinary;
        toBinary.toolkitPath = cudaPathOf(options);
        toBinary.compilationTarget = "isa";
        pm.addPass(createGpuModuleToBinaryPass(toBinary));
      });
}

/// The compile cache's key of the PTX of `kernels`: the gpu.module (its
/// #nvvm.target holds the chip, features and optimization level) and the
/// libdevice it links.
FailureOr<bt::codegen::CompileCacheKey>
ptxKey(gpu::GPUModuleOp kernels, const bt::CUDAPipelineOptions &options,
       StringRef identity) {
  bt::codegen::CompileCacheKey key("ptx", identity);
  if (llvm::Error e = bt::addPTXKeyFields(key, options)) {
    llvm::consumeError(std::move(e));
    return failure();
  }
  key.addOperation("gpu.module", kernels);
  return key;
}

/// gpu-module-to-binary through the compile cache of `cacheDir`: the PTX of
/// an identical gpu.module from this compiler is reused (a gpu.binary as the
/// pass builds it); a cache that cannot be used is a warning.
LogicalResult cachedModuleToBinary(ModuleOp module,
                                   const bt::CUDAPipelineOptions &options,
                                   StringRef cacheDir) {
  SmallVector<gpu::GPUModuleOp> kernels(module.getOps<gpu::GPUModuleOp>());
  if (cacheDir.empty() || kernels.size() != 1 ||
      !kernels[0].getTargetsAttr() || kernels[0].getTargetsAttr().size() != 1)
    return runModuleToBinary(module, options);
  gpu::GPUModuleOp device = kernels[0];
  std::optional<bt::codegen::OpenCompileCache> cache =
      bt::codegen::openCompileCache(module, cacheDir);
  if (!cache)
    return runModuleToBinary(module, options);
  FailureOr<bt::codegen::CompileCacheKey> key =
      ptxKey(device, options, cache->identity);
  if (failed(key))
    return runModuleToBinary(module, options);
  Attribute target = device.getTargetsAttr()[0];
  // The entry: the object's properties (printed; e.g. {O = 3 : i32}), a
  // NUL, and the PTX.
  if (std::optional<std::string> entry = cache->cache.lookup(*key)) {
    size_t split = entry->find('\0');
    Attribute properties;
    if (split != std::string::npos && split > 0)
      properties = parseAttribute(StringRef(*entry).take_front(split),
                                  module.getContext());
    if (split != std::string::npos &&
        (split == 0 || isa_and_nonnull<DictionaryAttr>(properties))) {
      OpBuilder b(device);
      auto object = gpu::ObjectAttr::get(
          module.getContext(), target, gpu::CompilationTarget::Assembly,
          b.getStringAttr(StringRef(*entry).drop_front(split + 1)),
          cast_or_null<DictionaryAttr>(properties));
      b.create<gpu::BinaryOp>(device.getLoc(), device.getName(),
                              /*offloadingHandler=*/nullptr,
                              b.getArrayAttr({object}));
      device.erase();
      return success();
    }
  }
  StringRef name = device.getName();
  std::string kernelsName = name.str();
  if (failed(runModuleToBinary(module, options)))
    return failure();
  for (auto binary : module.getOps<gpu::BinaryOp>()) {
    if (binary.getName() != kernelsName || binary.getObjects().size() != 1)
      continue;
    auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    if (object.getTarget() != target ||
        object.getFormat() != gpu::CompilationTarget::Assembly)
      continue;
    std::string entry;
    llvm::raw_string_ostream os(entry);
    if (object.getProperties())
      object.getProperties().print(os);
    os << '\0' << object.getObject().getValue();
    if (llvm::Error e = cache->cache.store(*key, entry))
      module.emitWarning(llvm::toString(std::move(e)));
  }
  return success();
}

} // namespace

LogicalResult bt::finishCUDAKernels(ModuleOp module,
                                    const CUDAPipelineOptions &options,
                                    OwningOpRef<ModuleOp> *emulatorKernels,
                                    StringRef cacheDir) {
  if (emulatorKernels) {
    FailureOr<OwningOpRef<ModuleOp>> host = buildEmulatorKernels(module);
    if (failed(host))
      return failure();
    *emulatorKernels = std::move(*host);
  }
  if (!options.binary)
    return success();
  return cachedModuleToBinary(module, options, cacheDir);
}

FailureOr<OwningOpRef<ModuleOp>> bt::buildEmulatorKernels(ModuleOp module) {
  SmallVector<gpu::GPUModuleOp> kernels(module.getOps<gpu::GPUModuleOp>());
  if (kernels.size() != 1)
    return module.emitError()
           << "expected one NVVM gpu.module (bt-cuda-pipeline with "
              "binary=false), found "
           << kernels.size();
  OpBuilder b(module.getContext());
  OwningOpRef<ModuleOp> host = ModuleOp::create(module.getLoc());
  b.setInsertionPointToStart(host->getBody());
  auto device = cast<gpu::GPUModuleOp>(b.clone(*kernels.front()));
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  (void)applyPassManagerCLOptions(pm);
  pm.nest<gpu::GPUModuleOp>().addPass(createBTNVVMToHost());
  if (failed(pm.run(*host)))
    return failure();
  // The body of the gpu.module becomes the module.
  Block *body = device.getBody();
  while (&body->front() != body->getTerminator())
    body->front().moveBefore(device);
  device.erase();
  return host;
}

FailureOr<std::string> bt::takePTX(ModuleOp module) {
  SmallVector<gpu::BinaryOp> binaries(module.getOps<gpu::BinaryOp>());
  if (binaries.size() != 1)
    return module.emitError()
           << "expected one gpu.binary (run bt-cuda-pipeline with "
              "binary=true), found "
           << binaries.size();
  gpu::BinaryOp binary = binaries.front();
  ArrayAttr objects = binary.getObjects();
  if (objects.size() != 1)
    return binary.emitOpError() << "has " << objects.size()
                                << " objects; expected one PTX object";
  auto object = cast<gpu::ObjectAttr>(objects[0]);
  if (object.getFormat() != gpu::CompilationTarget::Assembly)
    return binary.emitOpError("holds no PTX (gpu-module-to-binary format=isa)");
  std::string ptx = object.getObject().getValue().str();
  // A trailing NUL is not part of the text.
  while (!ptx.empty() && ptx.back() == '\0')
    ptx.pop_back();
  binary.erase();
  WalkResult left = module.walk([&](Operation *op) {
    if (isa<gpu::GPUDialect>(op->getDialect())) {
      op->emitOpError("is left in the host code after bt-cuda-pipeline");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (left.wasInterrupted())
    return failure();
  module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  return ptx;
}

llvm::Error bt::addPTXKeyFields(codegen::CompileCacheKey &key,
                                const CUDAPipelineOptions &options) {
  llvm::SmallString<256> libdevice(cudaPathOf(options));
  llvm::sys::path::append(libdevice, "nvvm", "libdevice", "libdevice.10.bc");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> bitcode =
      llvm::MemoryBuffer::getFile(libdevice, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!bitcode)
    return llvm::createStringError(bitcode.getError(),
                                   "cannot read " + libdevice + ": " +
                                       bitcode.getError().message());
  key.add("libdevice", (*bitcode)->getBuffer());
  return llvm::Error::success();
}
