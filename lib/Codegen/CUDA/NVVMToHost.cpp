//===- NVVMToHost.cpp - the NVVM kernels as host LLVM IR for the emulator -===//
//
// bt-nvvm-to-host: rewrites a gpu.module exactly as it goes to PTX (LLVM
// dialect + NVVM ops, after convert-gpu-to-nvvm) into host LLVM dialect that
// the CUDA emulator runs (docs/cuda-emulator.md). The contract with the
// emulator is runtime/device/cuda_emu/bt_emu_abi.h:
//
//   nvvm.read.ptx.sreg.{tid,ntid,ctaid,nctaid}.{x,y,z}, laneid, warpsize
//                       → i32 loads of the thread state (bt_emu_thread())
//   nvvm.barrier0       → bt_emu_barrier(t, site)
//   nvvm.shfl.sync      → bt_emu_shfl(t, kind, mask, value, b, c, site, &ok)
//   llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"
//                       → bt_emu_mma(t, kind, frags, site), the fragments in
//                         an alloca (MLIR 19's nvvm.mma.sync cannot express
//                         the bf16 mma: its verifier wants vector<2xf16>
//                         operands where the intrinsic takes i32, fixed
//                         upstream in llvm-project#122664, LLVM 20)
//   llvm.load/store of global or shared memory
//                       → the address from bt_emu_load/store(t, p, bytes, site)
//   the dynamic shared memory global → the block's buffer (t->smem)
//   vprintf             → bt_emu_vprintf(t, format, args)
//   llvm.intr.trap      → bt_emu_trap(t, site)
//   __nv_* (libdevice)  → the host's libm function of the same meaning
//   every address space → 0
//
// and adds, per kernel K, the entry `void K(void **params)` (the kernel
// body becomes the internal function `K.bt_emu_body`), the constant
// `K__bt_emu_flags`, `K__bt_emu_param_bytes` (the parameters' sizes, for a
// stream capture), and the site table that names the IR location of every
// checked access, barrier, shuffle and trap.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"

namespace bt {
#define GEN_PASS_DEF_BTNVVMTOHOST
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

// bt_emu_abi.h: indices of BtEmuThread::sreg, the offset of smem, the
// shuffle kinds, the kernel flags and the ABI version.
enum Sreg : int64_t {
  kTidX = 0, kNtidX = 3, kCtaidX = 6, kNctaidX = 9, kLaneId = 12,
  kWarpSize = 13,
};
constexpr int64_t kSmemOffset = 64;
constexpr uint32_t kShflBfly = 0, kShflIdx = 1, kShflUp = 2, kShflDown = 3;
constexpr uint32_t kKernelSync = 1;
constexpr uint32_t kAbiVersion = 3;
constexpr uint32_t kMmaM16N8K16Bf16F32 = 0;
/// The one warp mma the emulator runs (BT_EMU_MMA_M16N8K16_BF16_F32).
constexpr StringLiteral kMmaBf16Intrinsic =
    "llvm.nvvm.mma.m16n8k16.row.col.bf16";

/// Whether `op` is a warp-collective op of the kernels (the kernel then runs
/// one fiber per thread).
bool isWarpSync(Operation *op) {
  if (isa<NVVM::Barrier0Op, NVVM::ShflOp>(op))
    return true;
  auto call = dyn_cast<LLVM::CallIntrinsicOp>(op);
  return call && call.getIntrin() == kMmaBf16Intrinsic;
}

/// The bytes a kernel parameter of `type` occupies in cuLaunchKernel's
/// kernelParams: pointers 8, integers and floats their width (the NVVM
/// lowering passes nothing else: memref descriptors arrive unpacked).
int32_t paramByteSize(Type type) {
  if (isa<LLVM::LLVMPointerType>(type))
    return 8;
  return static_cast<int32_t>((type.getIntOrFloatBitWidth() + 7) / 8);
}

/// libdevice functions and the libm function that computes the same
/// (the emulator cannot give libdevice's exact rounding,
/// docs/cuda-emulator.md).
const llvm::StringMap<StringRef> &libdeviceToLibm() {
  static const llvm::StringMap<StringRef> map = [] {
    llvm::StringMap<StringRef> m;
    for (StringRef f :
         {"expf", "exp2f", "exp10f", "expm1f", "logf", "log2f", "log10f",
          "log1pf", "sinf", "cosf", "tanf", "asinf", "acosf", "atanf",
          "atan2f", "sinhf", "coshf", "tanhf", "asinhf", "acoshf", "atanhf",
          "erff", "erfcf", "sqrtf", "cbrtf", "powf", "fabsf", "floorf",
          "ceilf", "roundf", "truncf", "rintf", "nearbyintf", "fmaxf",
          "fminf", "fmodf", "copysignf", "fmaf", "hypotf", "exp", "exp2",
          "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
          "tanh", "erf", "erfc", "sqrt", "cbrt", "pow", "fabs", "floor",
          "ceil", "round", "trunc", "fmax", "fmin", "fmod", "copysign",
          "fma", "atan", "atan2"})
      m[("__nv_" + f).str()] = f;
    return m;
  }();
  return map;
}

/// Bytes of a loaded or stored value (natural alignment = size).
std::optional<uint32_t> accessBytes(Type t) {
  if (isa<LLVM::LLVMPointerType>(t))
    return 8;
  if (auto i = dyn_cast<IntegerType>(t))
    return std::max<uint32_t>(1, (i.getWidth() + 7) / 8);
  if (auto f = dyn_cast<FloatType>(t))
    return f.getWidth() / 8;
  if (auto v = dyn_cast<VectorType>(t))
    if (std::optional<uint32_t> e = accessBytes(v.getElementType()))
      return *e * v.getNumElements();
  return std::nullopt;
}

bool isDynamicSharedMemory(LLVM::GlobalOp g) {
  auto array = dyn_cast<LLVM::LLVMArrayType>(g.getGlobalType());
  return g.getAddrSpace() == 3 && array && array.getNumElements() == 0;
}

struct NVVMToHostPass : public bt::impl::BTNVVMToHostBase<NVVMToHostPass> {
  using BTNVVMToHostBase::BTNVVMToHostBase;

  void runOnOperation() override;

private:
  LLVM::LLVMFuncOp declare(StringRef name, Type result, ArrayRef<Type> args,
                           bool noReturn = false);
  /// The thread state of the function around `op` (one bt_emu_thread() call
  /// at its entry).
  Value thread(Operation *op);
  /// A new site: `what` at `op`'s location in kernel `fn`.
  uint32_t site(Operation *op, StringRef what);
  /// Whether `ptr` may point to global or shared memory (not to an alloca
  /// or a constant global of the module).
  bool isChecked(Value ptr);
  /// Lowers one op of a kernel for the host: the NVVM ops to calls of the
  /// emulator (bt_emu_*), checked loads and stores, traps, shared-memory
  /// globals, libdevice calls to libm. Fails on what the emulator cannot
  /// run.
  LogicalResult lowerOp(Operation *op);
  /// nvvm.shfl.sync → bt_emu_shfl (i32 and f32).
  LogicalResult lowerShuffle(NVVM::ShflOp shfl);
  /// The bf16 m16n8k16 mma intrinsic (A 4 x i32, B 2 x i32, C 4 x f32 →
  /// struct of 4 f32) → bt_emu_mma; any other intrinsic fails.
  LogicalResult lowerIntrinsic(LLVM::CallIntrinsicOp call);
  /// A load or store of global or shared memory: its address through
  /// bt_emu_load / bt_emu_store (checked by the emulator).
  LogicalResult lowerAccess(Operation *op, Value addr, Type valueType,
                            OpOperand &addrOperand, StringRef what);
  /// vprintf → bt_emu_vprintf; libdevice __nv_* → libm; calls of external
  /// functions fail.
  LogicalResult lowerCall(LLVM::CallOp call);
  /// An i32 constant before `op`.
  static Value i32Const(OpBuilder &b, Location loc, uint32_t v) {
    return b.create<LLVM::ConstantOp>(loc, b.getI32Type(),
                                      b.getI32IntegerAttr(v));
  }
  /// The text of every op that gets a site, printed before any rewrite.
  DenseMap<Operation *, std::string> opText;
  void addEntry(LLVM::LLVMFuncOp kernel, bool sync);

  gpu::GPUModuleOp module;
  SymbolTable *symbols = nullptr;
  DenseMap<Operation *, Value> threads;
  DenseSet<StringRef> sharedMemoryGlobals;
  std::string siteTable;
  uint32_t numSites = 0;
};

LLVM::LLVMFuncOp NVVMToHostPass::declare(StringRef name, Type result,
                                         ArrayRef<Type> args, bool noReturn) {
  if (auto f = symbols->lookup<LLVM::LLVMFuncOp>(name))
    return f;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  auto f = b.create<LLVM::LLVMFuncOp>(
      module.getLoc(), name, LLVM::LLVMFunctionType::get(result, args));
  if (noReturn)
    f->setAttr("passthrough",
               b.getArrayAttr({b.getStringAttr("noreturn")}));
  symbols->insert(f);
  return f;
}

Value NVVMToHostPass::thread(Operation *op) {
  auto fn = op->getParentOfType<LLVM::LLVMFuncOp>();
  Value &t = threads[fn];
  if (!t) {
    OpBuilder b = OpBuilder::atBlockBegin(&fn.getBody().front());
    Type ptr = LLVM::LLVMPointerType::get(&getContext());
    LLVM::LLVMFuncOp get = declare("bt_emu_thread", ptr, {});
    t = b.create<LLVM::CallOp>(fn.getLoc(), get, ValueRange{}).getResult();
  }
  return t;
}

uint32_t NVVMToHostPass::site(Operation *op, StringRef what) {
  auto fn = op->getParentOfType<LLVM::LLVMFuncOp>();
  std::string text;
  llvm::raw_string_ostream os(text);
  os << fn.getName() << ": " << what << " ";
  Location loc = op->getLoc();
  if (!isa<UnknownLoc>(loc)) {
    loc.print(os);
    os << " ";
  }
  os << "`" << opText.lookup(op) << "`";
  for (char &c : text)
    if (c == '\n' || c == '\0')
      c = ' ';
  siteTable += text;
  siteTable.push_back('\0');
  return numSites++;
}

bool NVVMToHostPass::isChecked(Value ptr) {
  for (;;) {
    Operation *def = ptr.getDefiningOp();
    if (!def)
      return true; // a kernel argument or a block argument (phi)
    if (auto gep = dyn_cast<LLVM::GEPOp>(def)) {
      ptr = gep.getBase();
    } else if (auto cast = dyn_cast<LLVM::AddrSpaceCastOp>(def)) {
      ptr = cast.getArg();
    } else if (isa<LLVM::AllocaOp>(def)) {
      return false; // the thread's own memory
    } else if (auto addr = dyn_cast<LLVM::AddressOfOp>(def)) {
      return sharedMemoryGlobals.contains(addr.getGlobalName());
    } else {
      return true;
    }
  }
}

LogicalResult NVVMToHostPass::lowerOp(Operation *op) {
  MLIRContext *ctx = &getContext();
  Location loc = op->getLoc();
  OpBuilder b(op);
  Type i8 = b.getI8Type(), i32 = b.getI32Type();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  Type voidTy = LLVM::LLVMVoidType::get(ctx);
  auto i32c = [&](uint32_t v) { return i32Const(b, loc, v); };
  auto sreg = [&](int64_t index) {
    Value t = thread(op);
    Value p = b.create<LLVM::GEPOp>(loc, ptr, i32, t,
                                    ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(index)});
    Value v = b.create<LLVM::LoadOp>(loc, i32, p);
    op->getResult(0).replaceAllUsesWith(v);
    op->erase();
    return success();
  };

  // Special registers.
  if (isa<NVVM::ThreadIdXOp>(op)) return sreg(kTidX);
  if (isa<NVVM::ThreadIdYOp>(op)) return sreg(kTidX + 1);
  if (isa<NVVM::ThreadIdZOp>(op)) return sreg(kTidX + 2);
  if (isa<NVVM::BlockDimXOp>(op)) return sreg(kNtidX);
  if (isa<NVVM::BlockDimYOp>(op)) return sreg(kNtidX + 1);
  if (isa<NVVM::BlockDimZOp>(op)) return sreg(kNtidX + 2);
  if (isa<NVVM::BlockIdXOp>(op)) return sreg(kCtaidX);
  if (isa<NVVM::BlockIdYOp>(op)) return sreg(kCtaidX + 1);
  if (isa<NVVM::BlockIdZOp>(op)) return sreg(kCtaidX + 2);
  if (isa<NVVM::GridDimXOp>(op)) return sreg(kNctaidX);
  if (isa<NVVM::GridDimYOp>(op)) return sreg(kNctaidX + 1);
  if (isa<NVVM::GridDimZOp>(op)) return sreg(kNctaidX + 2);
  if (isa<NVVM::LaneIdOp>(op)) return sreg(kLaneId);
  if (isa<NVVM::WarpSizeOp>(op)) return sreg(kWarpSize);

  if (isa<NVVM::Barrier0Op>(op)) {
    LLVM::LLVMFuncOp f = declare("bt_emu_barrier", voidTy, {ptr, i32});
    b.create<LLVM::CallOp>(loc, f,
                           ValueRange{thread(op), i32c(site(op, "barrier"))});
    op->erase();
    return success();
  }

  if (auto shfl = dyn_cast<NVVM::ShflOp>(op))
    return lowerShuffle(shfl);

  if (isa<NVVM::NVVMDialect>(op->getDialect()))
    return op->emitOpError(
        "has no host lowering in bt-nvvm-to-host (the CUDA emulator runs "
        "nvvm.read.ptx.sreg.{tid,ntid,ctaid,nctaid}.*, laneid, warpsize, "
        "barrier0 and shfl.sync)");

  if (auto load = dyn_cast<LLVM::LoadOp>(op))
    return lowerAccess(op, load.getAddr(), load.getType(),
                       load.getAddrMutable(), "load");
  if (auto store = dyn_cast<LLVM::StoreOp>(op))
    return lowerAccess(op, store.getAddr(), store.getValue().getType(),
                       store.getAddrMutable(), "store");
  if (auto call = dyn_cast<LLVM::CallIntrinsicOp>(op))
    return lowerIntrinsic(call);
  if (isa<LLVM::AtomicRMWOp, LLVM::AtomicCmpXchgOp, LLVM::InlineAsmOp>(op))
    return op->emitOpError("is not supported by the CUDA emulator "
                           "(bt-nvvm-to-host)");
  if (isa<LLVM::Trap>(op)) {
    LLVM::LLVMFuncOp f =
        declare("bt_emu_trap", voidTy, {ptr, i32}, /*noReturn=*/true);
    b.create<LLVM::CallOp>(loc, f,
                           ValueRange{thread(op), i32c(site(op, "trap"))});
    op->erase();
    return success();
  }
  if (auto addr = dyn_cast<LLVM::AddressOfOp>(op)) {
    if (!sharedMemoryGlobals.contains(addr.getGlobalName()))
      return success();
    Value t = thread(op);
    Value p = b.create<LLVM::GEPOp>(loc, ptr, i8, t,
                                    ArrayRef<LLVM::GEPArg>{kSmemOffset});
    Value smem = b.create<LLVM::LoadOp>(loc, ptr, p);
    addr.getResult().replaceAllUsesWith(smem);
    op->erase();
    return success();
  }
  if (auto call = dyn_cast<LLVM::CallOp>(op))
    return lowerCall(call);
  return success();
}

LogicalResult NVVMToHostPass::lowerShuffle(NVVM::ShflOp shfl) {
  Operation *op = shfl;
  MLIRContext *ctx = &getContext();
  Location loc = op->getLoc();
  OpBuilder b(op);
  Type i8 = b.getI8Type(), i32 = b.getI32Type(), i64 = b.getI64Type();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  auto i32c = [&](uint32_t v) { return i32Const(b, loc, v); };
  Type valTy = shfl.getVal().getType();
  if (valTy != i32 && !valTy.isF32())
    return op->emitOpError("shuffles a ")
           << valTy << "; the emulator shuffles i32 and f32";
  uint32_t kind = 0;
  switch (shfl.getKind()) {
  case NVVM::ShflKind::bfly: kind = kShflBfly; break;
  case NVVM::ShflKind::idx: kind = kShflIdx; break;
  case NVVM::ShflKind::up: kind = kShflUp; break;
  case NVVM::ShflKind::down: kind = kShflDown; break;
  }
  // The validity flag lives in an alloca of the function entry.
  auto fn = op->getParentOfType<LLVM::LLVMFuncOp>();
  OpBuilder eb = OpBuilder::atBlockBegin(&fn.getBody().front());
  Value one = eb.create<LLVM::ConstantOp>(loc, i64, eb.getI64IntegerAttr(1));
  Value validSlot = eb.create<LLVM::AllocaOp>(loc, ptr, i8, one, 1);
  Value bits = shfl.getVal();
  if (valTy.isF32())
    bits = b.create<LLVM::BitcastOp>(loc, i32, bits);
  LLVM::LLVMFuncOp f = declare("bt_emu_shfl", i32,
                               {ptr, i32, i32, i32, i32, i32, i32, ptr});
  Value got =
      b.create<LLVM::CallOp>(
           loc, f,
           ValueRange{thread(op), i32c(kind), shfl.getThreadMask(), bits,
                      shfl.getOffset(), shfl.getMaskAndClamp(),
                      i32c(site(op, "shuffle")), validSlot})
          .getResult();
  Value value = got;
  if (valTy.isF32())
    value = b.create<LLVM::BitcastOp>(loc, valTy, got);
  Value result = value;
  if (shfl.getReturnValueAndIsValid()) {
    Value flag = b.create<LLVM::LoadOp>(loc, i8, validSlot);
    Value valid = b.create<LLVM::TruncOp>(loc, b.getI1Type(), flag);
    Type structTy = shfl.getType();
    Value s = b.create<LLVM::UndefOp>(loc, structTy);
    s = b.create<LLVM::InsertValueOp>(loc, s, value, 0);
    result = b.create<LLVM::InsertValueOp>(loc, s, valid, 1);
  }
  shfl.getResult().replaceAllUsesWith(result);
  op->erase();
  return success();
}

LogicalResult NVVMToHostPass::lowerIntrinsic(LLVM::CallIntrinsicOp call) {
  Operation *op = call;
  if (call.getIntrin() != kMmaBf16Intrinsic)
    return op->emitOpError("calls the intrinsic '")
           << call.getIntrin()
           << "', which the CUDA emulator does not run (it runs "
           << kMmaBf16Intrinsic << ")";
  MLIRContext *ctx = &getContext();
  OpBuilder b(op);
  Location loc = op->getLoc();
  Type i32 = b.getI32Type(), f32 = b.getF32Type(), i64 = b.getI64Type();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  auto resultTy = call.getNumResults() == 1
                      ? dyn_cast<LLVM::LLVMStructType>(call.getResult(0).getType())
                      : LLVM::LLVMStructType();
  ValueRange args = call.getArgs();
  bool ok = args.size() == 10 && resultTy && resultTy.getBody().size() == 4 &&
            llvm::all_of(resultTy.getBody(), [](Type t) { return t.isF32(); });
  for (auto [i, v] : llvm::enumerate(args))
    ok &= v.getType() == (i < 6 ? i32 : f32);
  if (!ok)
    return op->emitOpError("calls ")
           << kMmaBf16Intrinsic
           << " with operands or a result other than (4 x i32, 2 x i32, "
              "4 x f32) -> !llvm.struct<(f32, f32, f32, f32)>";
  // The 14 words a[4], b[2], c[4], d[4] (bt_emu_abi.h) in an alloca of the
  // function entry.
  auto fn = op->getParentOfType<LLVM::LLVMFuncOp>();
  OpBuilder eb = OpBuilder::atBlockBegin(&fn.getBody().front());
  Value count = eb.create<LLVM::ConstantOp>(loc, i64, eb.getI64IntegerAttr(14));
  Value frags = eb.create<LLVM::AllocaOp>(loc, ptr, i32, count, 4);
  auto word = [&](int32_t i) {
    return b.create<LLVM::GEPOp>(loc, ptr, i32, frags,
                                 ArrayRef<LLVM::GEPArg>{i});
  };
  for (auto [i, v] : llvm::enumerate(args))
    b.create<LLVM::StoreOp>(loc, v, word(static_cast<int32_t>(i)));
  LLVM::LLVMFuncOp f = declare("bt_emu_mma", LLVM::LLVMVoidType::get(ctx),
                               {ptr, i32, ptr, i32});
  b.create<LLVM::CallOp>(loc, f,
                         ValueRange{thread(op),
                                    i32Const(b, loc, kMmaM16N8K16Bf16F32),
                                    frags, i32Const(b, loc, site(op, "mma"))});
  Value d = b.create<LLVM::UndefOp>(loc, resultTy);
  for (int64_t i = 0; i < 4; ++i) {
    Value v = b.create<LLVM::LoadOp>(loc, f32, word(10 + i));
    d = b.create<LLVM::InsertValueOp>(loc, d, v, i);
  }
  call.getResult(0).replaceAllUsesWith(d);
  op->erase();
  return success();
}

LogicalResult NVVMToHostPass::lowerAccess(Operation *op, Value addr,
                                          Type valueType,
                                          OpOperand &addrOperand,
                                          StringRef what) {
  if (!isChecked(addr))
    return success();
  std::optional<uint32_t> bytes = accessBytes(valueType);
  if (!bytes)
    return op->emitOpError(what == "load" ? "loads a " : "stores a ")
           << valueType << ", which the CUDA emulator cannot check";
  Location loc = op->getLoc();
  OpBuilder b(op);
  Type i32 = b.getI32Type(), ptr = LLVM::LLVMPointerType::get(&getContext());
  LLVM::LLVMFuncOp f = declare(what == "load" ? "bt_emu_load" : "bt_emu_store",
                               ptr, {ptr, ptr, i32, i32});
  Value checked = b.create<LLVM::CallOp>(
                       loc, f,
                       ValueRange{thread(op), addr, i32Const(b, loc, *bytes),
                                  i32Const(b, loc, site(op, what))})
                      .getResult();
  addrOperand.set(checked);
  return success();
}

LogicalResult NVVMToHostPass::lowerCall(LLVM::CallOp call) {
  Operation *op = call;
  Location loc = op->getLoc();
  OpBuilder b(op);
  Type i32 = b.getI32Type(), ptr = LLVM::LLVMPointerType::get(&getContext());
  std::optional<StringRef> callee = call.getCallee();
  if (!callee)
    return op->emitOpError("is an indirect call, which the CUDA emulator "
                           "does not support");
  if (*callee == "vprintf") {
    LLVM::LLVMFuncOp f = declare("bt_emu_vprintf", i32, {ptr, ptr, ptr});
    auto c = b.create<LLVM::CallOp>(
        loc, f,
        ValueRange{thread(op), call.getOperand(0), call.getOperand(1)});
    call.getResult().replaceAllUsesWith(c.getResult());
    op->erase();
    return success();
  }
  if (callee->starts_with("__nv_")) {
    auto it = libdeviceToLibm().find(*callee);
    if (it == libdeviceToLibm().end())
      return op->emitOpError("calls libdevice's '")
             << *callee
             << "', which has no host binding in bt-nvvm-to-host";
    auto decl = symbols->lookup<LLVM::LLVMFuncOp>(*callee);
    LLVM::LLVMFuncOp f = declare(it->second, decl.getFunctionType().getReturnType(),
                                 decl.getFunctionType().getParams());
    call.setCalleeAttr(FlatSymbolRefAttr::get(f.getNameAttr()));
    return success();
  }
  auto target = symbols->lookup<LLVM::LLVMFuncOp>(*callee);
  if (!target || target.isExternal())
    return op->emitOpError("calls the external function '")
           << *callee << "', which has no host binding in bt-nvvm-to-host";
  return success();
}

void NVVMToHostPass::addEntry(LLVM::LLVMFuncOp kernel, bool sync) {
  MLIRContext *ctx = &getContext();
  Location loc = kernel.getLoc();
  std::string name = kernel.getName().str();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  Type i32 = IntegerType::get(ctx, 32);
  symbols->remove(kernel);
  kernel.setSymName(name + ".bt_emu_body");
  kernel.setLinkage(LLVM::Linkage::Internal);
  symbols->insert(kernel);

  OpBuilder b(kernel);
  b.setInsertionPointAfter(kernel);
  auto entry = b.create<LLVM::LLVMFuncOp>(
      loc, name,
      LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr}));
  symbols->insert(entry);
  Block *body = entry.addEntryBlock(b);
  b.setInsertionPointToStart(body);
  Value params = body->getArgument(0);
  SmallVector<Value> args;
  for (auto [i, type] :
       llvm::enumerate(kernel.getFunctionType().getParams())) {
    Value slot = b.create<LLVM::GEPOp>(loc, ptr, ptr, params,
                                       ArrayRef<LLVM::GEPArg>{(int32_t)i});
    Value valuePtr = b.create<LLVM::LoadOp>(loc, ptr, slot);
    args.push_back(b.create<LLVM::LoadOp>(loc, type, valuePtr));
  }
  b.create<LLVM::CallOp>(loc, kernel, args);
  b.create<LLVM::ReturnOp>(loc, ValueRange{});

  b.setInsertionPointAfter(entry);
  auto flags = b.create<LLVM::GlobalOp>(
      loc, i32, /*isConstant=*/true, LLVM::Linkage::External,
      name + "__bt_emu_flags", b.getI32IntegerAttr(sync ? kKernelSync : 0));
  symbols->insert(flags);
  // {count, bytes of parameter 0, ...}: what the emulator copies when a
  // stream capture records a launch (cuLaunchKernel's kernelParams point to
  // values of these sizes).
  SmallVector<int32_t> paramBytes{
      static_cast<int32_t>(kernel.getFunctionType().getNumParams())};
  for (Type type : kernel.getFunctionType().getParams())
    paramBytes.push_back(paramByteSize(type));
  auto table = b.create<LLVM::GlobalOp>(
      loc, LLVM::LLVMArrayType::get(i32, paramBytes.size()),
      /*isConstant=*/true, LLVM::Linkage::External,
      name + "__bt_emu_param_bytes", b.getI32TensorAttr(paramBytes));
  symbols->insert(table);
}

void NVVMToHostPass::runOnOperation() {
  module = getOperation();
  MLIRContext *ctx = &getContext();
  SymbolTable table(module);
  symbols = &table;
  // The ops that get a site as they read in the NVVM module (value names
  // are numbered per function, as in `bt-run compile --emit nvvm` and
  // `bt-opt --bt-cuda-pipeline=binary=false`), printed before any rewrite.
  {
    AsmState state(module);
    module.walk([&](Operation *op) {
      if (!isa<LLVM::LoadOp, LLVM::StoreOp, LLVM::Trap>(op) && !isWarpSync(op))
        return;
      std::string text;
      llvm::raw_string_ostream os(text);
      op->print(os, state);
      opText[op] = std::move(text);
    });
  }

  for (auto g : module.getOps<LLVM::GlobalOp>()) {
    if (isDynamicSharedMemory(g))
      sharedMemoryGlobals.insert(g.getSymName());
    else if (g.getAddrSpace() == 3)
      (void)g.emitOpError("is static shared memory, which the CUDA emulator "
                          "does not support (the kernels use the dynamic "
                          "shared memory)");
    else
      continue;
  }
  for (auto g : module.getOps<LLVM::GlobalOp>())
    if (g.getAddrSpace() == 3 && !isDynamicSharedMemory(g))
      return signalPassFailure();

  // Kernels, and whether each may synchronize (directly or through a
  // function it calls).
  SmallVector<LLVM::LLVMFuncOp> kernels;
  for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
    if (fn->hasAttr("nvvm.kernel") || fn->hasAttr("gpu.kernel"))
      kernels.push_back(fn);
  DenseSet<Operation *> syncFunctions;
  for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
    if (fn.walk([](Operation *op) {
            return isWarpSync(op) ? WalkResult::interrupt()
                       : WalkResult::advance();
          }).wasInterrupted())
      syncFunctions.insert(fn);
  for (bool changed = true; changed;) {
    changed = false;
    for (auto fn : module.getOps<LLVM::LLVMFuncOp>()) {
      if (syncFunctions.contains(fn))
        continue;
      bool calls = fn.walk([&](LLVM::CallOp call) {
                       std::optional<StringRef> c = call.getCallee();
                       Operation *t = c ? symbols->lookup(*c) : nullptr;
                       return t && syncFunctions.contains(t)
                                  ? WalkResult::interrupt()
                                  : WalkResult::advance();
                     }).wasInterrupted();
      if (calls) {
        syncFunctions.insert(fn);
        changed = true;
      }
    }
  }

  // Lower every op (collect first: lowering creates and erases ops).
  SmallVector<Operation *> ops;
  module.walk([&](Operation *op) {
    if (op->getParentOfType<LLVM::LLVMFuncOp>())
      ops.push_back(op);
  });
  bool failed = false;
  for (Operation *op : ops)
    failed |= mlir::failed(lowerOp(op));
  if (failed)
    return signalPassFailure();

  for (StringRef name : sharedMemoryGlobals)
    symbols->lookup(name)->erase();

  // Address spaces collapse to 0 (host memory).
  AttrTypeReplacer replacer;
  replacer.addReplacement([&](LLVM::LLVMPointerType t) -> std::optional<Type> {
    if (t.getAddressSpace() == 0)
      return std::nullopt;
    return LLVM::LLVMPointerType::get(ctx);
  });
  replacer.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true,
                                        /*replaceLocs=*/false,
                                        /*replaceTypes=*/true);
  module.walk([](LLVM::AddrSpaceCastOp cast) {
    cast.getResult().replaceAllUsesWith(cast.getArg());
    cast.erase();
  });
  for (auto g : module.getOps<LLVM::GlobalOp>())
    if (g.getAddrSpace() != 0)
      g.setAddrSpace(0);

  // Entries, flags, parameter sizes, the site table; no NVVM/GPU attributes
  // left.
  for (LLVM::LLVMFuncOp k : kernels)
    for (auto [i, type] : llvm::enumerate(k.getFunctionType().getParams()))
      if (!isa<LLVM::LLVMPointerType>(type) && !type.isIntOrFloat()) {
        k.emitOpError("parameter ")
            << i << " has type " << type
            << ", which the emulator cannot copy into a captured launch "
               "(expected a pointer, integer or float)";
        return signalPassFailure();
      }
  for (LLVM::LLVMFuncOp k : kernels)
    addEntry(k, syncFunctions.contains(k));
  module.walk([](Operation *op) {
    SmallVector<StringAttr> drop;
    for (NamedAttribute a : op->getDiscardableAttrs())
      if (a.getName().strref().starts_with("nvvm.") ||
          a.getName().strref().starts_with("gpu."))
        drop.push_back(a.getName());
    for (StringAttr n : drop)
      op->removeAttr(n);
  });
  OpBuilder b = OpBuilder::atBlockTerminator(module.getBody());
  Type i8 = b.getI8Type(), i32 = b.getI32Type();
  siteTable.push_back('\0'); // an empty table still has its terminator
  b.create<LLVM::GlobalOp>(
      module.getLoc(), LLVM::LLVMArrayType::get(i8, siteTable.size()),
      /*isConstant=*/true, LLVM::Linkage::External, "bt_emu_site_table",
      b.getStringAttr(siteTable));
  b.create<LLVM::GlobalOp>(module.getLoc(), i32, true, LLVM::Linkage::External,
                           "bt_emu_num_sites", b.getI32IntegerAttr(numSites));
  b.create<LLVM::GlobalOp>(module.getLoc(), i32, true, LLVM::Linkage::External,
                           "bt_emu_abi_version",
                           b.getI32IntegerAttr(kAbiVersion));
  threads.clear();
  opText.clear();
}

} // namespace
