//===- LinalgToGPU.cpp - linalg ops on device memrefs → gpu.launch ---------===//
//
// bt-linalg-to-gpu: the CUDA pipeline's mapping of the non-GEMM kernels
// (every linalg op left after bt-gemm-to-blas{callee=bt_gpu_sgemm}) onto the
// GPU: one gpu.launch per op, one thread per point of the op's parallel
// iteration space, the reduction dimensions as sequential loops in the
// thread with the outputs carried in registers — except a row reduction
// (matchRowReduction): one thread block per output point, its threads
// sharing the reduction and combining in shared memory.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CUDA/Passes.h"

#include "GPUUtils.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

namespace bt {
#define GEN_PASS_DEF_BTLINALGTOGPU
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;
using bt::codegen::insideKernel;

namespace {

/// Builds `if (!cond) { printf("bt kernel: <msg>"); trap }` in place of a
/// `cf.assert` inside a kernel (cf.assert lowers to a host-only abort).
void emitDeviceAssert(OpBuilder &b, Location loc, Value cond, StringRef msg) {
  Value t = b.create<arith::ConstantOp>(loc, b.getBoolAttr(true));
  Value failed = b.create<arith::XOrIOp>(loc, cond, t);
  auto ifOp = b.create<scf::IfOp>(loc, failed, /*withElseRegion=*/false);
  OpBuilder tb = ifOp.getThenBodyBuilder();
  std::string text = "bt kernel: ";
  for (char c : msg) {
    if (c == '%')
      text += '%';
    text += c;
  }
  text += "\n";
  tb.create<gpu::PrintfOp>(loc, tb.getStringAttr(text), ValueRange{});
  tb.create<LLVM::Trap>(loc);
}

/// The payload block argument of `operand`, or null: linalg.map has none for
/// its init.
BlockArgument blockArgOf(linalg::LinalgOp op, OpOperand &operand) {
  if (operand.getOperandNumber() >= op.getBlock()->getNumArguments())
    return BlockArgument();
  return op.getMatchingBlockArgument(&operand);
}

/// Whether the payload reads `operand` (an init without a block argument is
/// not read).
bool payloadReads(linalg::LinalgOp op, OpOperand &operand) {
  BlockArgument arg = blockArgOf(op, operand);
  return arg && !arg.use_empty();
}

/// Clones the payload of `op` at `b` for the iteration point `ivs` (one value
/// per loop dimension) with the current output values `outs`; returns the
/// yielded values.
SmallVector<Value> emitPayload(OpBuilder &b, Location loc, linalg::LinalgOp op,
                               ValueRange ivs, ValueRange outs) {
  Block *body = op.getBlock();
  IRMapping map;
  for (OpOperand *in : op.getDpsInputOperands()) {
    BlockArgument arg = blockArgOf(op, *in);
    if (!payloadReads(op, *in))
      continue;
    if (!isa<MemRefType>(in->get().getType())) {
      map.map(arg, in->get()); // a scalar operand, e.g. linalg.fill's value
      continue;
    }
    AffineMap m = op.getMatchingIndexingMap(in);
    std::optional<SmallVector<Value, 8>> idx =
        affine::expandAffineMap(b, loc, m, ivs);
    // A constant global (e.g. the rotary inv_freq table) is read in the
    // kernel; the outliner copies the memref.global into the gpu.module.
    Value src = in->get();
    if (auto global = src.getDefiningOp<memref::GetGlobalOp>())
      src = b.clone(*global)->getResult(0);
    map.map(arg, b.create<memref::LoadOp>(loc, src, *idx));
  }
  for (auto [i, init] : llvm::enumerate(op.getDpsInitsMutable()))
    if (BlockArgument arg = blockArgOf(op, init); arg && outs[i])
      map.map(arg, outs[i]);
  for (Operation &inner : body->without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      map.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    if (auto assert = dyn_cast<cf::AssertOp>(inner)) {
      emitDeviceAssert(b, assert.getLoc(), map.lookup(assert.getArg()),
                       assert.getMsg());
      continue;
    }
    b.clone(inner, map);
  }
  SmallVector<Value> results;
  for (Value v : body->getTerminator()->getOperands())
    results.push_back(map.lookupOrDefault(v));
  return results;
}

/// Sets ivs[par[i]] to the coordinates of the linear point `id` of the
/// parallel space of sizes `parSizes` (the last parallel dim fastest).
void delinearize(OpBuilder &b, Location loc, Value id, ArrayRef<unsigned> par,
                 ArrayRef<Value> parSizes, SmallVectorImpl<Value> &ivs) {
  Value rest = id;
  for (int i = static_cast<int>(par.size()) - 1; i >= 0; --i) {
    if (i == 0) {
      ivs[par[i]] = rest;
      break;
    }
    ivs[par[i]] = b.create<arith::RemUIOp>(loc, rest, parSizes[i]);
    rest = b.create<arith::DivUIOp>(loc, rest, parSizes[i]);
  }
}

/// A reduction a thread block shares (lowerRowReduction): one output, one
/// reduction dim that is the innermost dim of the first input (so that
/// consecutive threads read consecutive elements), its extent dynamic or at
/// least 64, and a payload that yields `combiner(x, acc)` with `acc` the
/// output's block argument used by nothing else and `combiner` an
/// associative, commutative arith op with a neutral element
/// (arith::getNeutralElement: addf, maximumf, addi, ...) on f32, f64, i32
/// or i64. A float combiner must allow reassociation (fastmath reassoc, or
/// maximumf/minimumf whose result does not depend on the order).
struct RowReduction {
  Operation *combiner = nullptr;
  Value element;   // x: the payload's value of one reduction point
  TypedAttr neutral;
};

std::optional<RowReduction> matchRowReduction(linalg::LinalgOp op,
                                              ArrayRef<unsigned> red,
                                              ArrayRef<Range> ranges) {
  if (op.getNumDpsInits() != 1 || red.size() != 1 ||
      op.getNumDpsInputs() < 1)
    return std::nullopt;
  if (std::optional<int64_t> n = getConstantIntValue(ranges[red[0]].size);
      n && *n < 64)
    return std::nullopt;
  OpOperand *first = op.getDpsInputOperand(0);
  if (!isa<MemRefType>(first->get().getType()))
    return std::nullopt;
  AffineMap m = op.getMatchingIndexingMap(first);
  if (m.getNumResults() == 0 ||
      m.getResults().back() != getAffineDimExpr(red[0], op->getContext()))
    return std::nullopt;
  BlockArgument acc = blockArgOf(op, op.getDpsInitsMutable()[0]);
  if (!acc || !acc.hasOneUse())
    return std::nullopt;
  Type t = acc.getType();
  if (!t.isF32() && !t.isF64() && !t.isInteger(32) && !t.isInteger(64))
    return std::nullopt;
  Value yielded = op.getBlock()->getTerminator()->getOperand(0);
  Operation *comb = yielded.getDefiningOp();
  if (!comb || comb->getBlock() != op.getBlock() ||
      comb->getNumOperands() != 2 || comb->getNumResults() != 1 ||
      *acc.getUsers().begin() != comb)
    return std::nullopt;
  if (!comb->hasTrait<OpTrait::IsCommutative>())
    return std::nullopt;
  if (auto fm = dyn_cast<arith::ArithFastMathInterface>(comb);
      fm && isa<arith::AddFOp, arith::MulFOp>(comb) &&
      !arith::bitEnumContainsAll(fm.getFastMathFlagsAttr().getValue(),
                                 arith::FastMathFlags::reassoc))
    return std::nullopt;
  std::optional<TypedAttr> neutral = arith::getNeutralElement(comb);
  if (!neutral)
    return std::nullopt;
  RowReduction r;
  r.combiner = comb;
  r.element = comb->getOperand(0) == acc ? comb->getOperand(1)
                                         : comb->getOperand(0);
  r.neutral = *neutral;
  return r;
}

struct LinalgToGPUPass : public bt::impl::BTLinalgToGPUBase<LinalgToGPUPass> {
  using BTLinalgToGPUBase::BTLinalgToGPUBase;

  /// `op` as a row reduction `r` (matchRowReduction): grid = the parallel
  /// points (one block each), `blockSize` threads (a power of two), thread
  /// t folds the reduction points t, t + bs, ... into a register that
  /// starts at the neutral element (the payload with `acc` = that
  /// register), a tree over dynamic shared memory combines the threads'
  /// values in a fixed order (deterministic), and thread 0 stores
  /// combiner(result, init).
  void lowerRowReduction(linalg::LinalgOp op, const RowReduction &r,
                         ArrayRef<unsigned> par, unsigned redDim,
                         ArrayRef<Value> parSizes, Value points,
                         Value redSize) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    Type elem = r.neutral.getType();
    const int64_t bytes = elem.getIntOrFloatBitWidth() / 8;
    Value c0 = b.create<arith::ConstantIndexOp>(loc, 0);
    Value c1 = b.create<arith::ConstantIndexOp>(loc, 1);
    Value bs = b.create<arith::ConstantIndexOp>(loc, blockSize);
    Value smem = b.create<arith::ConstantIntOp>(loc, blockSize * bytes, 32);
    Value nonEmpty =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, points, c0);
    auto guard = b.create<scf::IfOp>(loc, nonEmpty, /*withElseRegion=*/false);
    b.setInsertionPointToStart(guard.thenBlock());
    auto launch =
        b.create<gpu::LaunchOp>(loc, points, c1, c1, bs, c1, c1, smem);
    OpBuilder kb = OpBuilder::atBlockEnd(&launch.getBody().front());
    Value tid = launch.getThreadIds().x;
    SmallVector<Value> ivs(op.getNumLoops(), c0);
    delinearize(kb, loc, launch.getBlockIds().x, par, parSizes, ivs);
    auto space = gpu::AddressSpaceAttr::get(op->getContext(),
                                            gpu::AddressSpace::Workgroup);
    Value raw = kb.create<gpu::DynamicSharedMemoryOp>(
        loc, MemRefType::get({ShapedType::kDynamic}, kb.getI8Type(),
                             MemRefLayoutAttrInterface{}, space));
    Value shared = kb.create<memref::ViewOp>(
        loc,
        MemRefType::get({blockSize}, elem, MemRefLayoutAttrInterface{}, space),
        raw, c0, ValueRange{});
    Value neutral = kb.create<arith::ConstantOp>(loc, r.neutral);
    auto loop = kb.create<scf::ForOp>(
        loc, tid, redSize, bs, ValueRange{neutral},
        [&](OpBuilder &fb, Location, Value iv, ValueRange carried) {
          ivs[redDim] = iv;
          SmallVector<Value> v = emitPayload(fb, loc, op, ivs, carried);
          fb.create<scf::YieldOp>(loc, v[0]);
        });
    kb.create<memref::StoreOp>(loc, loop.getResult(0), shared, tid);
    kb.create<gpu::BarrierOp>(loc);
    auto combine = [&](OpBuilder &cb, Value x, Value y) {
      IRMapping map;
      map.map(r.combiner->getOperand(0), x);
      map.map(r.combiner->getOperand(1), y);
      return cb.clone(*r.combiner, map)->getResult(0);
    };
    for (int64_t half = blockSize / 2; half >= 1; half /= 2) {
      Value h = kb.create<arith::ConstantIndexOp>(loc, half);
      Value act =
          kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, tid, h);
      auto ifOp = kb.create<scf::IfOp>(loc, act, /*withElseRegion=*/false);
      OpBuilder tb = ifOp.getThenBodyBuilder();
      Value other = tb.create<arith::AddIOp>(loc, tid, h);
      Value mine = tb.create<memref::LoadOp>(loc, shared, tid);
      Value theirs = tb.create<memref::LoadOp>(loc, shared, other);
      tb.create<memref::StoreOp>(loc, combine(tb, mine, theirs), shared, tid);
      kb.create<gpu::BarrierOp>(loc);
    }
    Value lead =
        kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, tid, c0);
    auto leadIf = kb.create<scf::IfOp>(loc, lead, /*withElseRegion=*/false);
    OpBuilder lb = leadIf.getThenBodyBuilder();
    OpOperand &init = op.getDpsInitsMutable()[0];
    AffineMap m = op.getMatchingIndexingMap(&init);
    std::optional<SmallVector<Value, 8>> idx =
        affine::expandAffineMap(lb, loc, m, ivs);
    Value initValue = lb.create<memref::LoadOp>(loc, init.get(), *idx);
    Value total = lb.create<memref::LoadOp>(loc, shared, c0);
    // The combiner's operand order as the payload wrote it: (x, acc).
    BlockArgument acc = blockArgOf(op, init);
    Value result = r.combiner->getOperand(0) == acc
                       ? combine(lb, initValue, total)
                       : combine(lb, total, initValue);
    lb.create<memref::StoreOp>(loc, result, init.get(), *idx);
    kb.create<gpu::TerminatorOp>(loc);
    op->erase();
  }

  LogicalResult lower(linalg::LinalgOp op) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    for (OpOperand &operand : op->getOpOperands())
      if (isa<TensorType>(operand.get().getType()))
        return op->emitOpError("has tensor semantics; bt-linalg-to-gpu runs "
                               "after bufferization");
    SmallVector<Range> ranges = op.createLoopRanges(b, loc);
    SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
    SmallVector<unsigned> par, red;
    for (auto [i, it] : llvm::enumerate(iters))
      (it == utils::IteratorType::parallel ? par : red).push_back(i);
    auto size = [&](unsigned d) {
      return getValueOrCreateConstantIndexOp(b, loc, ranges[d].size);
    };
    Value c0 = b.create<arith::ConstantIndexOp>(loc, 0);
    Value c1 = b.create<arith::ConstantIndexOp>(loc, 1);
    Value bs = b.create<arith::ConstantIndexOp>(loc, blockSize);
    // Points of the parallel space (the last parallel dim varies fastest,
    // so consecutive threads touch consecutive elements).
    Value points = c1;
    SmallVector<Value> parSizes;
    for (unsigned d : par) {
      parSizes.push_back(size(d));
      points = b.create<arith::MulIOp>(loc, points, parSizes.back());
    }
    SmallVector<Value> redSizes;
    for (unsigned d : red)
      redSizes.push_back(size(d));
    if (llvm::isPowerOf2_64(static_cast<uint64_t>(blockSize)) &&
        blockSize >= 32)
      if (std::optional<RowReduction> r = matchRowReduction(op, red, ranges)) {
        lowerRowReduction(op, *r, par, red[0], parSizes, points, redSizes[0]);
        return success();
      }
    // No launch for an empty space (a grid of 0 blocks is an error).
    Value nonEmpty =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, points, c0);
    auto guard = b.create<scf::IfOp>(loc, nonEmpty, /*withElseRegion=*/false);
    b.setInsertionPointToStart(guard.thenBlock());
    Value grid = b.create<arith::CeilDivUIOp>(loc, points, bs);
    Value threads = b.create<arith::MinUIOp>(loc, points, bs);
    auto launch = b.create<gpu::LaunchOp>(loc, grid, c1, c1, threads, c1, c1);
    Block &body = launch.getBody().front();
    OpBuilder kb = OpBuilder::atBlockEnd(&body);
    Value id = kb.create<arith::AddIOp>(
        loc, kb.create<arith::MulIOp>(loc, launch.getBlockIds().x, bs),
        launch.getThreadIds().x);
    Value inRange =
        kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, id, points);
    auto inside = kb.create<scf::IfOp>(loc, inRange, /*withElseRegion=*/false);
    kb.create<gpu::TerminatorOp>(loc);

    OpBuilder ib = inside.getThenBodyBuilder();
    SmallVector<Value> ivs(iters.size(), c0);
    delinearize(ib, loc, id, par, parSizes, ivs);
    // The outputs' current values (registers across the reduction loops).
    SmallVector<Value> outs;
    for (OpOperand &init : op.getDpsInitsMutable()) {
      if (red.empty() && !payloadReads(op, init)) {
        outs.push_back(Value());
        continue;
      }
      AffineMap m = op.getMatchingIndexingMap(&init);
      std::optional<SmallVector<Value, 8>> idx =
          affine::expandAffineMap(ib, loc, m, ivs);
      outs.push_back(ib.create<memref::LoadOp>(loc, init.get(), *idx));
    }
    SmallVector<Value> results;
    if (red.empty()) {
      results = emitPayload(ib, loc, op, ivs, outs);
    } else {
      // Nested loops over the reduction dims carrying the outputs.
      std::function<SmallVector<Value>(OpBuilder &, unsigned, ValueRange)>
          nest = [&](OpBuilder &lb, unsigned level,
                     ValueRange carried) -> SmallVector<Value> {
        if (level == red.size())
          return emitPayload(lb, loc, op, ivs, carried);
        auto loop = lb.create<scf::ForOp>(
            loc, c0, redSizes[level], c1, carried,
            [&](OpBuilder &fb, Location, Value iv, ValueRange iterArgs) {
              ivs[red[level]] = iv;
              SmallVector<Value> r = nest(fb, level + 1, iterArgs);
              fb.create<scf::YieldOp>(loc, r);
            });
        return SmallVector<Value>(loop.getResults());
      };
      results = nest(ib, 0, outs);
    }
    for (auto [i, init] : llvm::enumerate(op.getDpsInitsMutable())) {
      AffineMap m = op.getMatchingIndexingMap(&init);
      std::optional<SmallVector<Value, 8>> idx =
          affine::expandAffineMap(ib, loc, m, ivs);
      ib.create<memref::StoreOp>(loc, results[i], init.get(), *idx);
    }
    op->erase();
    return success();
  }

  void runOnOperation() override {
    if (blockSize <= 0 || blockSize > 1024) {
      getOperation()->emitError()
          << "bt-linalg-to-gpu: block-size must be in [1, 1024], got "
          << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    SmallVector<linalg::LinalgOp> work;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (!insideKernel(op))
        work.push_back(op);
    });
    for (linalg::LinalgOp op : work)
      if (failed(lower(op)))
        return signalPassFailure();
    // The range checks of the kernels emitted at tensor level
    // (GPUKernels.h: cf.assert, whose memory effects the deallocation
    // pipeline knows) become the device's printf + trap as well.
    SmallVector<cf::AssertOp> asserts;
    getOperation()->walk([&](cf::AssertOp op) {
      if (insideKernel(op))
        asserts.push_back(op);
    });
    for (cf::AssertOp op : asserts) {
      OpBuilder b(op);
      emitDeviceAssert(b, op.getLoc(), op.getArg(), op.getMsg());
      op.erase();
    }
  }
};

} // namespace
