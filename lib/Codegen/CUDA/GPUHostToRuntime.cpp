//===- GPUHostToRuntime.cpp - host GPU ops → calls of the bt runtime ------===//
//
// bt-gpu-host-to-runtime: the host side of the CUDA kernel library talks to
// the GPU only through the runtime's small C ABI (docs/abi.md, "Kernel
// library (CUDA target)"); Debian has no libmlir_cuda_runtime, and the
// runtime owns the context, the stream, the loaded PTX module and the
// device memory pool. On the LLVM dialect (after the host conversions):
//
//   gpu.launch_func @m::@k blocks(gx, gy, gz) threads(bx, by, bz) args(...)
//     → bt_gpu_launch("k", gx, gy, gz, bx, by, bz, smem, params, n)
//       (params: n pointers to the kernel parameters, in the order of the
//       NVVM kernel signature: memref descriptors unpacked into
//       allocated, aligned, offset, sizes, strides)
//   gpu.alloc (sizes)  → bt_gpu_alloc(bytes)  (a memref descriptor on it)
//   gpu.dealloc %m     → bt_gpu_free(allocated pointer)
//
// and the sampler callback `_mlir_ciface_bt_rt_sample` becomes
// `_mlir_ciface_bt_gpu_sample`, the runtime's variant that receives device
// memory.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CUDA/Passes.h"

#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace bt {
#define GEN_PASS_DEF_BTGPUHOSTTORUNTIME
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

constexpr StringLiteral kLaunch = "bt_gpu_launch";
constexpr StringLiteral kAlloc = "bt_gpu_alloc";
constexpr StringLiteral kFree = "bt_gpu_free";
// The runtime's sampler callbacks: the host's, and the device's that this
// target calls instead (f32 logits; bf16 logits of --dtype bf16).
constexpr std::pair<StringLiteral, StringLiteral> kSamplers[] = {
    {"_mlir_ciface_bt_rt_sample", "_mlir_ciface_bt_gpu_sample"},
    {"_mlir_ciface_bt_rt_sample_bf16", "_mlir_ciface_bt_gpu_sample_bf16"}};

/// The entry block of the function around `op` (allocas go there, so that a
/// launch inside a loop does not grow the stack).
Block *entryBlockOf(Operation *op) {
  auto fn = op->getParentOfType<FunctionOpInterface>();
  return fn ? &fn.getFunctionBody().front() : nullptr;
}

struct LaunchFuncLowering : public ConvertOpToLLVMPattern<gpu::LaunchFuncOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(gpu::LaunchFuncOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getAsyncToken() || !op.getAsyncDependencies().empty())
      return rewriter.notifyMatchFailure(op, "async launches are not supported");
    if (op.hasClusterSize())
      return rewriter.notifyMatchFailure(op, "clusters are not supported");
    Block *entry = entryBlockOf(op);
    if (!entry)
      return rewriter.notifyMatchFailure(op, "not inside a function");
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    auto module = op->getParentOfType<ModuleOp>();

    SmallVector<Value> args = getTypeConverter()->promoteOperands(
        loc, op.getKernelOperands(), adaptor.getKernelOperands(), rewriter,
        /*useBarePtrCallConv=*/false);
    SmallVector<Type> argTypes;
    for (Value a : args)
      argTypes.push_back(a.getType());
    int32_t n = static_cast<int32_t>(args.size());

    // Storage for the parameter values and the array of pointers to them,
    // allocated once at the function entry.
    Value storage, params;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(entry);
      Value one = rewriter.create<LLVM::ConstantOp>(loc, i64,
                                                    rewriter.getI64IntegerAttr(1));
      auto structType = LLVM::LLVMStructType::getLiteral(ctx, argTypes);
      storage = rewriter.create<LLVM::AllocaOp>(loc, ptr, structType, one, 8);
      params = rewriter.create<LLVM::AllocaOp>(
          loc, ptr, LLVM::LLVMArrayType::get(ptr, std::max(n, 1)), one, 8);
    }
    auto structType = LLVM::LLVMStructType::getLiteral(ctx, argTypes);
    for (int32_t i = 0; i < n; ++i) {
      Value slot = rewriter.create<LLVM::GEPOp>(
          loc, ptr, structType, storage, ArrayRef<LLVM::GEPArg>{0, i});
      rewriter.create<LLVM::StoreOp>(loc, args[i], slot);
      Value entryPtr = rewriter.create<LLVM::GEPOp>(
          loc, ptr, ptr, params, ArrayRef<LLVM::GEPArg>{i});
      rewriter.create<LLVM::StoreOp>(loc, slot, entryPtr);
    }

    // The kernel's name as a NUL-terminated constant string (one global per
    // kernel; the runtime caches the CUfunction by name).
    StringRef kernel = op.getKernelName().getValue();
    std::string global = ("bt_kernel_name_" + kernel).str();
    Value name;
    if (auto g = module.lookupSymbol<LLVM::GlobalOp>(global)) {
      Value addr = rewriter.create<LLVM::AddressOfOp>(loc, g);
      name = addr;
    } else {
      name = LLVM::createGlobalString(loc, rewriter, global,
                                      (kernel + Twine('\0')).str(),
                                      LLVM::Linkage::Internal);
    }
    auto dim = [&](Value v) -> Value {
      if (v.getType() == i64)
        return v;
      return rewriter.create<LLVM::ZExtOp>(loc, i64, v);
    };
    Value smem = adaptor.getDynamicSharedMemorySize();
    if (!smem)
      smem = rewriter.create<LLVM::ConstantOp>(loc, i32,
                                               rewriter.getI32IntegerAttr(0));
    Value count =
        rewriter.create<LLVM::ConstantOp>(loc, i32, rewriter.getI32IntegerAttr(n));
    LLVM::LLVMFuncOp launch = LLVM::lookupOrCreateFn(
        module, kLaunch, {ptr, i64, i64, i64, i64, i64, i64, i32, ptr, i32},
        LLVM::LLVMVoidType::get(ctx));
    rewriter.create<LLVM::CallOp>(
        loc, launch,
        ValueRange{name, dim(adaptor.getGridSizeX()),
                   dim(adaptor.getGridSizeY()), dim(adaptor.getGridSizeZ()),
                   dim(adaptor.getBlockSizeX()), dim(adaptor.getBlockSizeY()),
                   dim(adaptor.getBlockSizeZ()), smem, params, count});
    rewriter.eraseOp(op);
    return success();
  }
};

struct AllocLowering : public ConvertOpToLLVMPattern<gpu::AllocOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(gpu::AllocOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getAsyncToken() || op.getHostShared() ||
        !op.getSymbolOperands().empty())
      return rewriter.notifyMatchFailure(op, "unsupported gpu.alloc form");
    MemRefType type = op.getMemref().getType();
    if (!isConvertibleAndHasIdentityMaps(type))
      return rewriter.notifyMatchFailure(op, "non-identity layout");
    Location loc = op.getLoc();
    SmallVector<Value, 4> shape, strides;
    Value bytes;
    getMemRefDescriptorSizes(loc, type, adaptor.getDynamicSizes(), rewriter,
                             shape, strides, bytes);
    Type ptr = LLVM::LLVMPointerType::get(op.getContext());
    LLVM::LLVMFuncOp alloc = LLVM::lookupOrCreateFn(
        op->getParentOfType<ModuleOp>(), kAlloc, {getIndexType()}, ptr);
    Value p = rewriter.create<LLVM::CallOp>(loc, alloc, bytes).getResult();
    Value desc = createMemRefDescriptor(loc, type, p, p, shape, strides, rewriter);
    rewriter.replaceOp(op, desc);
    return success();
  }
};

struct DeallocLowering : public ConvertOpToLLVMPattern<gpu::DeallocOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(gpu::DeallocOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getAsyncToken())
      return rewriter.notifyMatchFailure(op, "async dealloc");
    Location loc = op.getLoc();
    Value allocated =
        MemRefDescriptor(adaptor.getMemref()).allocatedPtr(rewriter, loc);
    Type ptr = LLVM::LLVMPointerType::get(op.getContext());
    LLVM::LLVMFuncOp free = LLVM::lookupOrCreateFn(
        op->getParentOfType<ModuleOp>(), kFree, {ptr},
        LLVM::LLVMVoidType::get(op.getContext()));
    rewriter.create<LLVM::CallOp>(loc, free, allocated);
    rewriter.eraseOp(op);
    return success();
  }
};

struct GPUHostToRuntimePass
    : public bt::impl::BTGPUHostToRuntimeBase<GPUHostToRuntimePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    LLVMTypeConverter converter(ctx);
    RewritePatternSet patterns(ctx);
    patterns.add<LaunchFuncLowering, AllocLowering, DeallocLowering>(converter);
    LLVMConversionTarget target(*ctx);
    target.addIllegalOp<gpu::LaunchFuncOp, gpu::AllocOp, gpu::DeallocOp>();
    target.addLegalOp<UnrealizedConversionCastOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();

    // The sampler callbacks receive device memory on this target.
    for (auto [cpuName, gpuName] : kSamplers) {
      auto cpu = module.lookupSymbol<LLVM::LLVMFuncOp>(cpuName);
      if (!cpu)
        continue;
      if (module.lookupSymbol(gpuName)) {
        cpu.emitOpError() << "both " << cpuName << " and " << gpuName
                          << " are declared";
        return signalPassFailure();
      }
      if (failed(SymbolTable::replaceAllSymbolUses(
              cpu, StringAttr::get(ctx, gpuName), module)))
        return signalPassFailure();
      cpu.setSymName(gpuName);
    }
  }
};

} // namespace
