//===- EmitEntryWrappers.cpp - bt_entry_<name>(argv) of the kernel ABI -----===//
//
// bt-emit-entry-wrappers: on the LLVM dialect, wraps every C interface
// function `_mlir_ciface_<name>` into `void bt_entry_<name>(void **argv)`
// (docs/abi.md) and adds `int32_t bt_kernel_abi_version(void)`.
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Codegen/Passes.h"

#include "mlir/Conversion/LLVMCommon/PrintCallHelper.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"

namespace bt {
#define GEN_PASS_DEF_BTEMITENTRYWRAPPERS
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

constexpr StringLiteral kCifacePrefix = "_mlir_ciface_";
constexpr StringLiteral kEntryPrefix = "bt_entry_";
constexpr StringLiteral kAbiVersionName = "bt_kernel_abi_version";
constexpr int32_t kAbiVersion = 1;
constexpr StringLiteral kWeakImport = bt::BTDialect::WeakImportAttrHelper::getNameStr();

/// External functions marked `bt.weak_import` (the runtime's sampler) become
/// weak undefined symbols, so that the library loads in a process that does
/// not define them; a call checks the address first and, when it is null,
/// prints which symbol is missing and aborts.
void guardWeakImports(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  llvm::StringSet<> weak;
  for (auto f : module.getOps<LLVM::LLVMFuncOp>())
    if (f.isExternal() && f->hasAttr(kWeakImport)) {
      f.setLinkage(LLVM::Linkage::ExternWeak);
      weak.insert(f.getName());
    }
  if (weak.empty())
    return;
  SmallVector<LLVM::CallOp> calls;
  module.walk([&](LLVM::CallOp call) {
    if (call.getCallee() && weak.contains(*call.getCallee()))
      calls.push_back(call);
  });
  LLVMTypeConverter converter(ctx);
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  int counter = 0;
  for (LLVM::CallOp call : calls) {
    Location loc = call.getLoc();
    StringRef callee = *call.getCallee();
    OpBuilder b(call);
    Value addr = b.create<LLVM::AddressOfOp>(loc, ptr, callee);
    Value null = b.create<LLVM::ZeroOp>(loc, ptr);
    Value missing =
        b.create<LLVM::ICmpOp>(loc, LLVM::ICmpPredicate::eq, addr, null);
    Block *before = call->getBlock();
    Block *after = before->splitBlock(call);
    Block *fail = b.createBlock(after);
    b.setInsertionPointToEnd(before);
    b.create<LLVM::CondBrOp>(loc, missing, fail, after);
    b.setInsertionPointToEnd(fail);
    LLVM::createPrintStrCall(
        b, loc, module, ("bt_weak_import_msg_" + Twine(counter++)).str(),
        ("bt kernels: " + callee +
         " is not defined in this process (the runtime provides it)")
            .str(),
        converter, /*addNewline=*/false, /*runtimeFunctionName=*/"puts");
    LLVM::LLVMFuncOp abortFn = LLVM::lookupOrCreateFn(
        module, "abort", {}, LLVM::LLVMVoidType::get(ctx));
    b.create<LLVM::CallOp>(loc, abortFn, ValueRange{});
    b.create<LLVM::UnreachableOp>(loc);
  }
}

struct EmitEntryWrappersPass
    : public bt::impl::BTEmitEntryWrappersBase<EmitEntryWrappersPass> {
  using BTEmitEntryWrappersBase::BTEmitEntryWrappersBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    Type i32 = IntegerType::get(ctx, 32);
    Type voidType = LLVM::LLVMVoidType::get(ctx);

    SmallVector<LLVM::LLVMFuncOp> wrappers;
    for (auto f : module.getOps<LLVM::LLVMFuncOp>())
      if (f.getName().starts_with(kCifacePrefix) && !f.isExternal())
        wrappers.push_back(f);

    llvm::StringSet<> exported;
    for (LLVM::LLVMFuncOp w : wrappers) {
      StringRef name = w.getName().drop_front(kCifacePrefix.size());
      LLVM::LLVMFunctionType type = w.getFunctionType();
      if (!isa<LLVM::LLVMVoidType>(type.getReturnType())) {
        w.emitOpError() << "returns " << type.getReturnType()
                        << "; the kernel ABI only returns memrefs (through "
                           "the result block)";
        return signalPassFailure();
      }
      for (Type p : type.getParams())
        if (!isa<LLVM::LLVMPointerType>(p)) {
          w.emitOpError() << "takes a " << p
                          << " argument; the kernel ABI only passes memref "
                             "descriptors";
          return signalPassFailure();
        }
      std::string entryName = (kEntryPrefix + name).str();
      if (module.lookupSymbol(entryName)) {
        module.emitError() << "symbol " << entryName << " already exists";
        return signalPassFailure();
      }
      Location loc = w.getLoc();
      auto entry = b.create<LLVM::LLVMFuncOp>(
          loc, entryName, LLVM::LLVMFunctionType::get(voidType, {ptr}));
      Block *body = entry.addEntryBlock(b);
      OpBuilder eb = OpBuilder::atBlockEnd(body);
      Value argv = body->getArgument(0);
      SmallVector<Value> args;
      for (unsigned i = 0, e = type.getNumParams(); i < e; ++i) {
        Value slot = eb.create<LLVM::GEPOp>(
            loc, ptr, ptr, argv, ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
        args.push_back(eb.create<LLVM::LoadOp>(loc, ptr, slot));
      }
      eb.create<LLVM::CallOp>(loc, w, args);
      eb.create<LLVM::ReturnOp>(loc, ValueRange{});
      exported.insert(entryName);
    }

    if (!module.lookupSymbol(kAbiVersionName)) {
      auto version = b.create<LLVM::LLVMFuncOp>(
          module.getLoc(), kAbiVersionName, LLVM::LLVMFunctionType::get(i32, {}));
      Block *body = version.addEntryBlock(b);
      OpBuilder vb = OpBuilder::atBlockEnd(body);
      Value v = vb.create<LLVM::ConstantOp>(module.getLoc(), i32,
                                            vb.getI32IntegerAttr(kAbiVersion));
      vb.create<LLVM::ReturnOp>(module.getLoc(), v);
    }
    exported.insert(kAbiVersionName);

    guardWeakImports(module);

    if (!internalize)
      return;
    for (auto f : module.getOps<LLVM::LLVMFuncOp>())
      if (!f.isExternal() && !exported.contains(f.getName()))
        f.setLinkage(LLVM::Linkage::Internal);
  }
};

} // namespace
