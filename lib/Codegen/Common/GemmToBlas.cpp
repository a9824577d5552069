//===- GemmToBlas.cpp - f32 GEMMs on memrefs → cblas_sgemm -----------------===//
//
// bt-gemm-to-blas: after bufferization, linalg matmul variants on f32 memrefs
// (or bf16 inputs with an f32 output, when a bf16 callee is given)
// with unit innermost strides become row-major cblas_sgemm calls
// (beta = 1: the output holds the init, e.g. the bias of bt.linear).
// linalg.matmul_transpose_a (the weight gradients of the backward sweep,
// dW = dyᵀ · x) becomes transA = CblasTrans. The CUDA pipeline calls the
// runtime's bt_gpu_sgemm instead (same signature, device pointers;
// docs/abi.md).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/BF16.h"
#include "bt/Codegen/CBLAS.h"
#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace bt {
#define GEN_PASS_DEF_BTGEMMTOBLAS
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

using bt::cblas::kNoTrans;
using bt::cblas::kRowMajor;
using bt::cblas::kTrans;

/// A supported GEMM: C (+)= op(A) · op(B), optionally batched over dim 0.
struct Gemm {
  Value a, b, c;
  bool transB;
  bool batched;
  bool transA = false;
  /// A and B are bf16 (C f32): the bf16 callee.
  bool bf16 = false;
};

/// Bytes of one element of a GEMM operand (f32 4, bf16 2).
int64_t elementBytes(Value v) {
  return cast<MemRefType>(v.getType()).getElementType().isBF16() ? 2 : 4;
}

/// A GEMM of linalg `op` on memrefs with unit innermost strides: all f32,
/// or (with `bf16`) bf16 inputs and an f32 output.
std::optional<Gemm> matchGemm(Operation *op, bool bf16) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureBufferSemantics())
    return std::nullopt;
  Gemm g;
  if (isa<linalg::MatmulOp>(op))
    g = {nullptr, nullptr, nullptr, false, false};
  else if (isa<linalg::MatmulTransposeBOp>(op))
    g = {nullptr, nullptr, nullptr, true, false};
  else if (isa<linalg::BatchMatmulOp>(op))
    g = {nullptr, nullptr, nullptr, false, true};
  else if (isa<linalg::BatchMatmulTransposeBOp>(op))
    g = {nullptr, nullptr, nullptr, true, true};
  else if (isa<linalg::MatmulTransposeAOp>(op))
    g = {nullptr, nullptr, nullptr, false, false, true};
  else
    return std::nullopt;
  g.a = linalgOp.getDpsInputOperand(0)->get();
  g.b = linalgOp.getDpsInputOperand(1)->get();
  g.c = linalgOp.getDpsInitOperand(0)->get();
  auto elementOf = [](Value v) {
    auto t = dyn_cast<MemRefType>(v.getType());
    return t ? t.getElementType() : Type();
  };
  Type ta = elementOf(g.a), tb = elementOf(g.b), tc = elementOf(g.c);
  if (!ta || !tb || !tc || !tc.isF32())
    return std::nullopt;
  g.bf16 = ta.isBF16() && tb.isBF16();
  if (!(ta.isF32() && tb.isF32()) && !(bf16 && g.bf16))
    return std::nullopt;
  for (Value v : {g.a, g.b, g.c}) {
    auto t = cast<MemRefType>(v.getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(getStridesAndOffset(t, strides, offset)) || strides.empty() ||
        strides.back() != 1)
      return std::nullopt;
  }
  return g;
}

/// The allocation or argument a memref view is taken from.
Value rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// Whether `op` certainly neither reads nor writes the buffer rooted at
/// `root`: it has no memory effects, or it is a linalg op on buffers (or an
/// allocation / deallocation) none of whose memref operands is a view of
/// `root`.
bool leavesBufferAlone(Operation *op, Value root) {
  if (isMemoryEffectFree(op))
    return true;
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!(linalgOp && linalgOp.hasPureBufferSemantics()) &&
      !isa<memref::AllocOp, memref::DeallocOp>(op))
    return false;
  for (Value operand : op->getOperands())
    if (isa<BaseMemRefType>(operand.getType()) && rootOf(operand) == root)
      return false;
  return true;
}

/// A `linalg.fill` of zero into `c` before `gemm` (only ops that leave
/// `c`'s buffer alone in between, e.g. the kernel that rounds the GEMM's
/// input to bf16) that BLAS can replace with beta = 0: `c` is a fresh
/// allocation (or a view of one) that neither input aliases, so no input
/// reads the zeros.
linalg::FillOp zeroFillBefore(Operation *gemm, const Gemm &g) {
  Value root = rootOf(g.c);
  if (!root.getDefiningOp<memref::AllocOp>() || rootOf(g.a) == root ||
      rootOf(g.b) == root)
    return nullptr;
  for (Operation *op = gemm->getPrevNode(); op; op = op->getPrevNode()) {
    if (auto fill = dyn_cast<linalg::FillOp>(op)) {
      if (!fill.hasPureBufferSemantics() || fill.getOutputs()[0] != g.c)
        return nullptr;
      auto cst = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
      auto value = cst ? dyn_cast<FloatAttr>(cst.getValue()) : FloatAttr();
      if (!value || !value.getValue().isZero())
        return nullptr;
      return fill;
    }
    if (!leavesBufferAlone(op, root))
      return nullptr;
  }
  return nullptr;
}

/// The marked generic (`bt.bf16_gemm_init`, made by bt-bf16-gemm-outputs)
/// that writes the whole of `c` before `gemm` in its block (the bias rounded
/// to bf16, broadcast over the rows), or null.
linalg::GenericOp bf16BiasInit(Operation *gemm, Value c) {
  for (Operation *user : c.getUsers()) {
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!generic || !generic->hasAttr(bt::codegen::kBF16GemmInitAttr) ||
        !generic.hasPureBufferSemantics() || generic.getNumDpsInputs() != 1 ||
        generic.getNumDpsInits() != 1 || generic.getDpsInits()[0] != c ||
        !generic.getIndexingMapsArray().back().isIdentity() ||
        generic->getBlock() != gemm->getBlock() ||
        !generic->isBeforeInBlock(gemm))
      continue;
    return generic;
  }
  return nullptr;
}

/// Whether `v` is a bf16 memref `[N]` with unit stride (a bias vector
/// cuBLASLt's epilogue can read).
bool isUnitStrideBF16Vector(Value v) {
  auto t = dyn_cast<MemRefType>(v.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  return t && t.getRank() == 1 && t.getElementType().isBF16() &&
         succeeded(getStridesAndOffset(t, strides, offset)) &&
         strides[0] == 1;
}

/// Where cuBLAS can write the bf16 product of a bf16 GEMM itself
/// (bt-bf16-gemm-outputs): the rounding generic and, for a bias in C, its
/// init generic.
struct BF16Product {
  linalg::GenericOp rounding;
  linalg::GenericOp biasInit; // null: the zero fill (beta = 0)
};

/// The BF16Product of `gemm`, if `g.c` is a fresh allocation initialized by
/// `zeroFill` or by a bf16BiasInit, read only by the generic marked
/// `bt.bf16_gemm_output` that rounds it element for element into a bf16
/// buffer with unit innermost stride later in the same block, and otherwise
/// only deallocated; that buffer's allocation or subview (if it is one and
/// comes after the init) can move in front of the init, and no op between
/// the init and the rounding touches that buffer.
std::optional<BF16Product> bf16Product(Operation *gemm, const Gemm &g,
                                       linalg::FillOp zeroFill,
                                       DominanceInfo &dom) {
  if (!g.bf16 || !g.c.getDefiningOp<memref::AllocOp>())
    return std::nullopt;
  BF16Product p;
  p.biasInit = zeroFill ? linalg::GenericOp() : bf16BiasInit(gemm, g.c);
  if (!zeroFill && !p.biasInit)
    return std::nullopt;
  Operation *init = zeroFill ? zeroFill.getOperation() : p.biasInit;
  for (Operation *user : g.c.getUsers()) {
    if (user == gemm || user == init || isa<memref::DeallocOp>(user))
      continue;
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!generic || p.rounding ||
        !generic->hasAttr(bt::codegen::kBF16GemmOutputAttr) ||
        !generic.hasPureBufferSemantics() || generic.getNumDpsInputs() != 1 ||
        generic.getNumDpsInits() != 1 || generic.getDpsInputs()[0] != g.c ||
        !llvm::all_of(generic.getIndexingMapsArray(),
                      [](AffineMap m) { return m.isIdentity(); }))
      return std::nullopt;
    p.rounding = generic;
  }
  if (!p.rounding || p.rounding->getBlock() != gemm->getBlock() ||
      !gemm->isBeforeInBlock(p.rounding))
    return std::nullopt;
  Value out = p.rounding.getDpsInits()[0];
  auto outType = cast<MemRefType>(out.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!outType.getElementType().isBF16() ||
      failed(getStridesAndOffset(outType, strides, offset)) ||
      strides.empty() || strides.back() != 1)
    return std::nullopt;
  // The first op that writes the bf16 buffer now: the bias init, or the GEMM.
  Operation *first = p.biasInit ? p.biasInit.getOperation() : gemm;
  Operation *def = out.getDefiningOp();
  if (def && def->getBlock() == first->getBlock() &&
      first->isBeforeInBlock(def)) {
    // An allocation, or a view of a buffer (a decode entry's bf16 logits go
    // straight into their row of step_logits [B, L_B, V]).
    if (!isa<memref::AllocOp, memref::SubViewOp>(def) ||
        !llvm::all_of(def->getOperands(), [&](Value v) {
          return dom.properlyDominates(v, first);
        }))
      return std::nullopt;
  }
  // The buffer holds the init and the product from `first` on, not from
  // the rounding: nothing in between may read or write it.
  Value outRoot = rootOf(out);
  for (Operation *op = first->getNextNode(); op != p.rounding.getOperation();
       op = op->getNextNode())
    if (op != def && op != gemm && !leavesBufferAlone(op, outRoot))
      return std::nullopt;
  return p;
}

struct GemmToBlasPass : public bt::impl::BTGemmToBlasBase<GemmToBlasPass> {
  using BTGemmToBlasBase::BTGemmToBlasBase;

  func::FuncOp getOrDeclareSgemm(ModuleOp module, StringRef callee,
                                 bool withBias = false) {
    if (auto f = module.lookupSymbol<func::FuncOp>(callee))
      return f;
    MLIRContext *ctx = module.getContext();
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    Type i32 = b.getI32Type(), f32 = b.getF32Type();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    // void cblas_sgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb,
    //                  beta, C, ldc); the same signature for every callee,
    // the bias callee with the bias vector's address after ldc.
    SmallVector<Type> params = {i32, i32, i32, i32, i32, i32, f32,
                                ptr, i32, ptr, i32, f32, ptr, i32};
    if (withBias)
      params.push_back(ptr);
    auto type = b.getFunctionType(params, {});
    auto f = b.create<func::FuncOp>(module.getLoc(), callee, type);
    f.setPrivate();
    return f;
  }

  bool worthIt(const Gemm &g) {
    if (minMNK <= 0)
      return true;
    auto at = cast<MemRefType>(g.a.getType());
    auto ct = cast<MemRefType>(g.c.getType());
    int64_t r = ct.getRank();
    int64_t m = ct.getDimSize(r - 2), n = ct.getDimSize(r - 1),
            k = at.getDimSize(g.transA ? r - 2 : r - 1);
    if (ShapedType::isDynamic(m) || ShapedType::isDynamic(n) ||
        ShapedType::isDynamic(k))
      return true;
    return m * n * k >= minMNK;
  }

  /// Replaces `op` (matched as `g`) by a call of the callee for its element
  /// types; the f32 product buffers a bf16-product fold leaves unused go to
  /// `deadBuffers` (erased once every GEMM is rewritten).
  void rewrite(Operation *op, Gemm g, DominanceInfo &dom,
               SmallVectorImpl<Operation *> &deadBuffers) {
    ModuleOp module = op->getParentOfType<ModuleOp>();
    StringRef calleeName = g.bf16 ? StringRef(bf16Callee) : StringRef(callee);
    linalg::FillOp zeroFill = zeroFillBefore(op, g);
    // A bf16 product written by cuBLAS into the rounding's buffer: the f32
    // buffer, its fill and the rounding go.
    std::optional<BF16Product> product;
    Value biasVector; // a bf16 bias the epilogue adds (bf16BiasOutCallee)
    if (!bf16OutCallee.empty() &&
        (product = bf16Product(op, g, zeroFill, dom))) {
      Value out = product->rounding.getDpsInits()[0];
      Operation *first = product->biasInit ? product->biasInit.getOperation()
                                           : op;
      if (Operation *def = out.getDefiningOp();
          def && def->getBlock() == first->getBlock() &&
          first->isBeforeInBlock(def))
        def->moveBefore(first);
      if (linalg::GenericOp init = product->biasInit) {
        if (!bf16BiasOutCallee.empty() && !g.batched &&
            isUnitStrideBF16Vector(init.getDpsInputs()[0])) {
          // The epilogue adds the bf16 bias: no broadcast, beta = 0.
          biasVector = init.getDpsInputs()[0];
        } else {
          // The bias broadcast writes bf16 (the values it wrote, rounded;
          // a bf16 bias as it is).
          OpBuilder ib(init);
          ib.create<linalg::GenericOp>(
              init.getLoc(), TypeRange{}, init.getDpsInputs(),
              ValueRange{out}, init.getIndexingMapsArray(),
              init.getIteratorTypesArray(),
              [](OpBuilder &nb, Location nl, ValueRange a) {
                Value v = a[0];
                if (!v.getType().isBF16())
                  v = bt::codegen::roundToBF16(nb, nl, v);
                nb.create<linalg::YieldOp>(nl, v);
              });
        }
        init.erase();
      }
      Value f32Product = g.c;
      g.c = out;
      calleeName = biasVector ? StringRef(bf16BiasOutCallee)
                              : StringRef(bf16OutCallee);
      product->rounding.erase();
      for (Operation *user : llvm::make_early_inc_range(f32Product.getUsers()))
        if (isa<memref::DeallocOp>(user))
          user->erase();
      // The fill (erased below with beta = 0) and the GEMM are its last
      // users; the allocation goes after them. With a bias init, beta
      // stays 1: cuBLAS adds the bf16 bias in C.
      deadBuffers.push_back(f32Product.getDefiningOp());
    }
    func::FuncOp sgemm =
        getOrDeclareSgemm(module, calleeName, /*withBias=*/bool(biasVector));
    OpBuilder b(op);
    Location loc = op->getLoc();
    Type i32 = b.getI32Type(), i64 = b.getI64Type();
    Type ptrType = LLVM::LLVMPointerType::get(b.getContext());
    unsigned r = g.batched ? 3 : 2;

    struct Operand {
      Value base;          // aligned pointer + offset, in bytes (index)
      ValueRange sizes;
      ValueRange strides;
    };
    auto describe = [&](Value m) {
      auto md = b.create<memref::ExtractStridedMetadataOp>(loc, m);
      Value aligned = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, m);
      Value size = b.create<arith::ConstantIndexOp>(loc, elementBytes(m));
      Value off = b.create<arith::MulIOp>(loc, md.getOffset(), size);
      return Operand{b.create<arith::AddIOp>(loc, aligned, off), md.getSizes(),
                     md.getStrides()};
    };
    Operand A = describe(g.a), B = describe(g.b), C = describe(g.c);
    Value one = b.create<arith::ConstantIndexOp>(loc, 1);
    // A is [M, K], or [K, M] with transA.
    Value m = C.sizes[r - 2], n = C.sizes[r - 1],
          k = A.sizes[g.transA ? r - 2 : r - 1];
    // BLAS requires ld >= max(1, row length) even where the row stride is
    // irrelevant (one row).
    auto ld = [&](const Operand &o, Value cols) -> Value {
      Value minLd = b.create<arith::MaxSIOp>(loc, cols, one);
      return b.create<arith::MaxSIOp>(loc, o.strides[r - 2], minLd);
    };
    auto toI32 = [&](Value idx) -> Value {
      return b.create<arith::IndexCastOp>(loc, i32, idx);
    };
    Value lda = toI32(ld(A, g.transA ? m : k));
    Value ldb = toI32(ld(B, g.transB ? k : n));
    Value ldc = toI32(ld(C, n));
    auto i32c = [&](int32_t v) -> Value {
      return b.create<arith::ConstantOp>(loc, b.getI32IntegerAttr(v));
    };
    Value order = i32c(kRowMajor), transA = i32c(g.transA ? kTrans : kNoTrans),
          transB = i32c(g.transB ? kTrans : kNoTrans);
    Value alpha = b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(1.0f));
    Value beta = alpha;
    if (zeroFill) {
      zeroFill.erase();
      beta = b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(0.0f));
    }
    std::optional<Operand> bias;
    if (biasVector) {
      beta = b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(0.0f));
      bias = describe(biasVector);
    }
    Value mI = toI32(m), nI = toI32(n), kI = toI32(k);

    auto emitCall = [&](OpBuilder &ob, Value aAddr, Value bAddr, Value cAddr) {
      auto toPtr = [&](Value idx) -> Value {
        Value asInt = ob.create<arith::IndexCastOp>(loc, i64, idx);
        return ob.create<LLVM::IntToPtrOp>(loc, ptrType, asInt);
      };
      SmallVector<Value> args = {order, transA, transB, mI, nI,
                                 kI, alpha, toPtr(aAddr), lda, toPtr(bAddr),
                                 ldb, beta, toPtr(cAddr), ldc};
      if (bias)
        args.push_back(toPtr(bias->base));
      ob.create<func::CallOp>(loc, sgemm, args);
    };

    if (!g.batched) {
      emitCall(b, A.base, B.base, C.base);
    } else {
      Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
      auto byteStride = [&](const Operand &o, Value m) -> Value {
        Value size = b.create<arith::ConstantIndexOp>(loc, elementBytes(m));
        return b.create<arith::MulIOp>(loc, o.strides[0], size);
      };
      Value sa = byteStride(A, g.a), sb = byteStride(B, g.b),
            sc = byteStride(C, g.c);
      b.create<scf::ForOp>(
          loc, zero, C.sizes[0], one, ValueRange{},
          [&](OpBuilder &lb, Location l, Value i, ValueRange) {
            auto at = [&](Value base, Value stride) -> Value {
              return lb.create<arith::AddIOp>(
                  l, base, lb.create<arith::MulIOp>(l, i, stride));
            };
            emitCall(lb, at(A.base, sa), at(B.base, sb), at(C.base, sc));
            lb.create<scf::YieldOp>(l);
          });
    }
    op->erase();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (callee.empty()) {
      module.emitError("bt-gemm-to-blas: the callee option is empty");
      return signalPassFailure();
    }
    SmallVector<std::pair<Operation *, Gemm>> work;
    module.walk([&](Operation *op) {
      if (std::optional<Gemm> g = matchGemm(op, !bf16Callee.empty());
          g && worthIt(*g))
        work.push_back({op, *g});
    });
    DominanceInfo dom(module);
    SmallVector<Operation *> deadBuffers;
    for (auto &[op, g] : work)
      rewrite(op, g, dom, deadBuffers);
    for (Operation *buffer : deadBuffers)
      buffer->erase();
  }
};

} // namespace
