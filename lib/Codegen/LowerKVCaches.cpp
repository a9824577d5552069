//===- LowerKVCaches.cpp - !bt.kv_cache → destination-passing tensors -----===//
//
// bt-lower-kv-caches: before bufferization, every KV cache value becomes its
// storage tensor [B, layers, 2, H, C, hd], its key-valid flags [B, C] i64 and
// per-layer fill lengths (index values tracked here). Appends are
// extract_slice → generic → insert_slice at the fill length, so one-shot
// bufferization writes them in place; attention reads views of the filled
// part (docs/generation.md, "KV caches across the ABI").
//
//===----------------------------------------------------------------------===//

#include "Attention.h"
#include "GPUAttention.h"
#include "bt/Codegen/Passes.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"

namespace bt {
#define GEN_PASS_DEF_BTLOWERKVCACHES
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

bool isCache(Value v) { return isa<KVCacheType>(v.getType()); }
bool isCacheType(Type t) { return isa<KVCacheType>(t); }

RankedTensorType storageType(KVCacheType c) {
  return RankedTensorType::get({c.getBatch(), c.getLayers(), 2, c.getHeads(),
                                c.getCapacity(), c.getHeadDim()},
                               c.getElementType());
}

RankedTensorType flagsType(KVCacheType c) {
  return RankedTensorType::get({c.getBatch(), c.getCapacity()},
                               IntegerType::get(c.getContext(), 64));
}

/// The tensors of one cache value.
struct Cache {
  KVCacheType type;
  Value kv;                     // [B, Ly, 2, H, C, hd]
  Value flags;                  // [B, C] i64
  SmallVector<OpFoldResult> len; // per layer
  OpFoldResult batch, capacity;
  /// Flag ranges already written (start, size, mask; null mask = ones): the
  /// flags are shared by the layers, which append the same entries one after
  /// the other, so only the first layer's append writes them.
  SmallVector<std::tuple<OpFoldResult, OpFoldResult, Value>> flagsWritten;
  /// The storage / flags arguments this value descends from (by appends),
  /// null for a cache allocated in the function.
  BlockArgument kvArg, flagsArg;
};

class Lowering {
public:
  Lowering(func::FuncOp fn, bool gpuAttention)
      : fn(fn), b(fn.getContext()), gpuAttention(gpuAttention) {}
  LogicalResult run();

private:
  LogicalResult checkStructure();
  void lowerArguments();
  LogicalResult lowerBlock(Block &block);
  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerFor(scf::ForOp loop);
  LogicalResult lowerYield(scf::YieldOp yield);
  LogicalResult lowerReturn(func::ReturnOp ret);
  /// The values a cache is carried as through a loop: storage, flags and
  /// one fill length per layer.
  SmallVector<Value> carried(Location l, const Cache &c) {
    SmallVector<Value> v = {c.kv, c.flags};
    for (OpFoldResult len : c.len)
      v.push_back(idx(l, len));
    return v;
  }
  /// The cache whose carried values (see carried()) start at `values[0]`,
  /// with the type, sizes and argument ties of `like`.
  Cache fromCarried(const Cache &like, ValueRange values) {
    Cache c = like;
    c.kv = values[0];
    c.flags = values[1];
    for (unsigned i = 0; i < c.len.size(); ++i)
      c.len[i] = values[2 + i];
    c.flagsWritten.clear();
    return c;
  }

  Value idx(Location l, OpFoldResult v) {
    return getValueOrCreateConstantIndexOp(b, l, v);
  }
  OpFoldResult add(Location l, OpFoldResult a, OpFoldResult c) {
    std::optional<int64_t> ca = getConstantIntValue(a),
                           cc = getConstantIntValue(c);
    if (ca && cc)
      return b.getIndexAttr(*ca + *cc);
    return b.create<arith::AddIOp>(l, idx(l, a), idx(l, c)).getResult();
  }
  /// Size of dim `d` of `v` (static or tensor.dim).
  OpFoldResult dimOf(Location l, Value v, int64_t d) {
    auto t = cast<RankedTensorType>(v.getType());
    if (!t.isDynamicDim(d))
      return b.getIndexAttr(t.getDimSize(d));
    return b.create<tensor::DimOp>(l, v, d).getResult();
  }
  /// Whether two index values are the same (equal constants or one value).
  static bool sameIndex(OpFoldResult a, OpFoldResult c) {
    std::optional<int64_t> ca = getConstantIntValue(a),
                           cc = getConstantIntValue(c);
    if (ca || cc)
      return ca && cc && *ca == *cc;
    return a == c;
  }
  static int64_t staticOf(OpFoldResult v) {
    std::optional<int64_t> c = getConstantIntValue(v);
    return c ? *c : kDyn;
  }

  /// Writes `x` [B, S, H, hd] into kv[:, layer, which, :, len : len+S, :].
  Value writeEntries(Location l, const Cache &c, Value kv, Value x,
                     int64_t layer, int64_t which, OpFoldResult len,
                     OpFoldResult s);
  /// Writes the flags (mask as i64, or ones) into valid[:, len : len+S].
  Value writeFlags(Location l, const Cache &c, Value mask, OpFoldResult len,
                   OpFoldResult s);
  /// kv[:, layer, which, :, 0 : len, :] as [B, H, len, hd].
  Value readEntries(Location l, const Cache &c, int64_t layer, int64_t which,
                    OpFoldResult len);

  func::FuncOp fn;
  OpBuilder b;
  /// Attention as the CUDA target's dedicated kernels (GPUAttention.h).
  bool gpuAttention;
  DenseMap<Value, Cache> caches;
  /// Cache arguments, in order, with the three arguments that replace each.
  SmallVector<std::pair<BlockArgument, std::array<BlockArgument, 3>>> cacheArgs;
  /// Results that are the updated value of an argument (storage or flags).
  SmallVector<std::pair<unsigned, BlockArgument>> pendingTies;
  /// Lowered cache ops, erased (in reverse order) once every op is lowered:
  /// their cache results stay keys of `caches` until then.
  SmallVector<Operation *> dead;
};

LogicalResult Lowering::checkStructure() {
  Block *entry = &fn.getBody().front();
  WalkResult r = fn.walk([&](Operation *op) -> WalkResult {
    bool usesCache = llvm::any_of(op->getOperandTypes(), isCacheType) ||
                     llvm::any_of(op->getResultTypes(), isCacheType);
    if (!usesCache)
      return WalkResult::advance();
    // The entry block, or the bodies of scf.for ops nested in it.
    for (Block *block = op->getBlock(); block != entry;
         block = block->getParentOp()->getBlock()) {
      if (!isa<scf::ForOp>(block->getParentOp())) {
        op->emitOpError()
            << "uses a KV cache inside a '"
            << block->getParentOp()->getName()
            << "'; bt-lower-kv-caches supports straight-line cache code and "
               "scf.for loops only";
        return WalkResult::interrupt();
      }
    }
    if (!isa<KVAllocOp, KVAppendOp, KVAttendOp, KVLengthOp, KVReleaseOp,
             func::ReturnOp, scf::ForOp, scf::YieldOp>(op)) {
      op->emitOpError() << "uses a KV cache; bt-lower-kv-caches handles only "
                           "the KV-cache ops, scf.for and func.return (run "
                           "bt-decompose first)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (r.wasInterrupted())
    return failure();
  for (Block &block : fn.getBody())
    if (&block != entry &&
        llvm::any_of(block.getArgumentTypes(), isCacheType))
      return fn.emitOpError() << "has a KV cache block argument; "
                                 "bt-lower-kv-caches supports straight-line "
                                 "cache code only";
  return success();
}

void Lowering::lowerArguments() {
  MLIRContext *ctx = fn.getContext();
  // Insert the three replacements right after each cache argument, last
  // first so that earlier indices stay valid.
  SmallVector<unsigned> indices;
  for (BlockArgument a : fn.getArguments())
    if (isCache(a))
      indices.push_back(a.getArgNumber());
  auto dims = [&](ArrayRef<StringRef> names) {
    SmallVector<Attribute> d;
    for (StringRef n : names)
      d.push_back(StringAttr::get(ctx, n));
    return ArrayAttr::get(ctx, d);
  };
  for (unsigned i : llvm::reverse(indices)) {
    auto type = cast<KVCacheType>(fn.getArgument(i).getType());
    std::string name = "kv_cache";
    if (auto n = fn.getArgAttrOfType<StringAttr>(i, "bt.name"))
      name = n.str();
    bool standard = name == "kv_cache";
    std::string validName = standard ? "kv_valid" : name + "_valid";
    std::string lenName = standard ? "cache_length" : name + "_length";
    Location l = fn.getArgument(i).getLoc();
    Builder ab(ctx);
    auto named = [&](StringRef n, ArrayAttr d) {
      return ab.getDictionaryAttr(
          {ab.getNamedAttr("bt.name", ab.getStringAttr(n)),
           ab.getNamedAttr("bt.dims", d)});
    };
    (void)fn.insertArgument(
        i + 1, storageType(type),
        named(name, dims({"B", "Ly", "", "H", "C", "hd"})), l);
    (void)fn.insertArgument(i + 2, flagsType(type),
                            named(validName, dims({"B", "C"})), l);
    (void)fn.insertArgument(i + 3,
                            RankedTensorType::get({}, IntegerType::get(ctx, 64)),
                            named(lenName, dims({})), l);
  }
  // The initial state of each argument cache: every layer filled up to
  // cache_length.
  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  for (BlockArgument a : fn.getArguments()) {
    if (!isCache(a))
      continue;
    unsigned i = a.getArgNumber();
    std::array<BlockArgument, 3> repl = {fn.getArgument(i + 1),
                                         fn.getArgument(i + 2),
                                         fn.getArgument(i + 3)};
    cacheArgs.push_back({a, repl});
    Location l = a.getLoc();
    Cache c;
    c.type = cast<KVCacheType>(a.getType());
    c.kv = repl[0];
    c.flags = repl[1];
    c.kvArg = repl[0];
    c.flagsArg = repl[1];
    Value len64 = b.create<tensor::ExtractOp>(l, repl[2], ValueRange{});
    Value len = b.create<arith::IndexCastOp>(l, b.getIndexType(), len64);
    c.len.assign(c.type.getLayers(), len);
    c.batch = dimOf(l, c.kv, 0);
    c.capacity = dimOf(l, c.kv, 4);
    caches[a] = c;
  }
}

Value Lowering::writeEntries(Location l, const Cache &c, Value kv, Value x,
                             int64_t layer, int64_t which, OpFoldResult len,
                             OpFoldResult s) {
  KVCacheType t = c.type;
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  SmallVector<OpFoldResult> offsets = {zero, b.getIndexAttr(layer),
                                       b.getIndexAttr(which), zero, len, zero};
  SmallVector<OpFoldResult> sizes = {c.batch, one, one,
                                     b.getIndexAttr(t.getHeads()), s,
                                     b.getIndexAttr(t.getHeadDim())};
  SmallVector<OpFoldResult> strides(6, one);
  auto dstType = RankedTensorType::get(
      {staticOf(c.batch), t.getHeads(), staticOf(s), t.getHeadDim()},
      t.getElementType());
  Value dst = b.create<tensor::ExtractSliceOp>(l, dstType, kv, offsets, sizes,
                                               strides);
  // dst[b, h, s, d] = x[b, s, h, d].
  MLIRContext *ctx = b.getContext();
  AffineExpr d0, d1, d2, d3;
  bindDims(ctx, d0, d1, d2, d3);
  SmallVector<AffineMap> maps = {AffineMap::get(4, 0, {d0, d2, d1, d3}, ctx),
                                 AffineMap::getMultiDimIdentityMap(4, ctx)};
  SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
  Value moved =
      b.create<linalg::GenericOp>(
           l, TypeRange{dstType}, ValueRange{x}, ValueRange{dst}, maps, iters,
           [](OpBuilder &nb, Location nl, ValueRange a) {
             nb.create<linalg::YieldOp>(nl, a[0]);
           })
          .getResult(0);
  return b.create<tensor::InsertSliceOp>(l, moved, kv, offsets, sizes,
                                         strides);
}

Value Lowering::writeFlags(Location l, const Cache &c, Value mask,
                           OpFoldResult len, OpFoldResult s) {
  Type i64 = b.getI64Type();
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  SmallVector<OpFoldResult> offsets = {zero, len}, sizes = {c.batch, s},
                            strides = {one, one};
  auto dstType =
      RankedTensorType::get({staticOf(c.batch), staticOf(s)}, i64);
  Value dst = b.create<tensor::ExtractSliceOp>(l, dstType, c.flags, offsets,
                                               sizes, strides);
  Value filled;
  if (!mask) {
    Value oneV = b.create<arith::ConstantOp>(l, b.getI64IntegerAttr(1));
    filled = b.create<linalg::FillOp>(l, oneV, dst).getResult(0);
  } else {
    MLIRContext *ctx = b.getContext();
    SmallVector<AffineMap> maps(2, AffineMap::getMultiDimIdentityMap(2, ctx));
    SmallVector<utils::IteratorType> iters(2, utils::IteratorType::parallel);
    filled = b.create<linalg::GenericOp>(
                  l, TypeRange{dstType}, ValueRange{mask}, ValueRange{dst},
                  maps, iters,
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    Value m = a[0];
                    Type mt = m.getType();
                    if (mt.isInteger(1))
                      m = nb.create<arith::ExtUIOp>(nl, i64, m);
                    else if (!mt.isInteger(64))
                      m = nb.create<arith::ExtSIOp>(nl, i64, m);
                    nb.create<linalg::YieldOp>(nl, m);
                  })
                 .getResult(0);
  }
  return b.create<tensor::InsertSliceOp>(l, filled, c.flags, offsets, sizes,
                                         strides);
}

Value Lowering::readEntries(Location l, const Cache &c, int64_t layer,
                            int64_t which, OpFoldResult len) {
  KVCacheType t = c.type;
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  SmallVector<OpFoldResult> offsets = {zero, b.getIndexAttr(layer),
                                       b.getIndexAttr(which), zero, zero, zero};
  SmallVector<OpFoldResult> sizes = {c.batch, one, one,
                                     b.getIndexAttr(t.getHeads()), len,
                                     b.getIndexAttr(t.getHeadDim())};
  SmallVector<OpFoldResult> strides(6, one);
  auto type = RankedTensorType::get(
      {staticOf(c.batch), t.getHeads(), staticOf(len), t.getHeadDim()},
      t.getElementType());
  return b.create<tensor::ExtractSliceOp>(l, type, c.kv, offsets, sizes,
                                          strides);
}

LogicalResult Lowering::lowerOp(Operation *op) {
  Location l = op->getLoc();
  b.setInsertionPoint(op);
  if (auto alloc = dyn_cast<KVAllocOp>(op)) {
    Cache c;
    c.type = cast<KVCacheType>(alloc.getType());
    c.batch = c.type.hasStaticBatch() ? OpFoldResult(b.getIndexAttr(c.type.getBatch()))
                                      : OpFoldResult(alloc.getBatch());
    c.capacity = c.type.hasStaticCapacity()
                     ? OpFoldResult(b.getIndexAttr(c.type.getCapacity()))
                     : OpFoldResult(alloc.getCapacity());
    SmallVector<OpFoldResult> shape = {
        c.batch,
        b.getIndexAttr(c.type.getLayers()),
        b.getIndexAttr(2),
        b.getIndexAttr(c.type.getHeads()),
        c.capacity,
        b.getIndexAttr(c.type.getHeadDim())};
    c.kv = b.create<tensor::EmptyOp>(l, shape, c.type.getElementType());
    Value flags = b.create<tensor::EmptyOp>(
        l, ArrayRef<OpFoldResult>{c.batch, c.capacity}, b.getI64Type());
    Value zero = b.create<arith::ConstantOp>(l, b.getI64IntegerAttr(0));
    c.flags = b.create<linalg::FillOp>(l, zero, flags).getResult(0);
    c.len.assign(c.type.getLayers(), b.getIndexAttr(0));
    caches[alloc.getResult()] = c;
    dead.push_back(op);
    return success();
  }
  if (auto append = dyn_cast<KVAppendOp>(op)) {
    Cache c = caches.lookup(append.getCache());
    int64_t layer = append.getLayer();
    OpFoldResult len = c.len[layer];
    OpFoldResult s = dimOf(l, append.getKey(), 1);
    OpFoldResult end = add(l, len, s);
    // Appending past the capacity is a runtime error (bt.kv_append).
    std::optional<int64_t> endC = getConstantIntValue(end),
                           capC = getConstantIntValue(c.capacity);
    if (!(endC && capC && *endC <= *capC)) {
      Value fits = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ule,
                                           idx(l, end), idx(l, c.capacity));
      b.create<cf::AssertOp>(
          l, fits, "bt.kv_append: the KV cache capacity is exceeded");
    }
    Value kv = writeEntries(l, c, c.kv, append.getKey(), layer, 0, len, s);
    kv = writeEntries(l, c, kv, append.getValue(), layer, 1, len, s);
    Cache next = c;
    Value mask = append.getKeyMask();
    // The same start and mask (whose shape fixes S), or no mask and the
    // same S.
    bool written = llvm::any_of(c.flagsWritten, [&](const auto &w) {
      return sameIndex(std::get<0>(w), len) && std::get<2>(w) == mask &&
             (mask || sameIndex(std::get<1>(w), s));
    });
    if (!written) {
      next.flags = writeFlags(l, c, mask, len, s);
      next.flagsWritten.push_back({len, s, mask});
    }
    next.kv = kv;
    next.len[layer] = end;
    caches[append.getResult()] = next;
    dead.push_back(op);
    return success();
  }
  if (auto attend = dyn_cast<KVAttendOp>(op)) {
    Cache c = caches.lookup(attend.getCache());
    int64_t layer = attend.getLayer();
    OpFoldResult len = c.len[layer];
    Value keys = readEntries(l, c, layer, 0, len);
    Value values = readEntries(l, c, layer, 1, len);
    SmallVector<OpFoldResult> offsets(2, b.getIndexAttr(0)),
        sizes = {c.batch, len}, strides(2, b.getIndexAttr(1));
    Value flags = b.create<tensor::ExtractSliceOp>(
        l,
        RankedTensorType::get({staticOf(c.batch), staticOf(len)},
                              b.getI64Type()),
        c.flags, offsets, sizes, strides);
    double scale = attend.getScale().convertToDouble();
    auto qType = cast<RankedTensorType>(attend.getQuery().getType());
    Value out = gpuAttention && gpuAttentionSupports(qType)
                    ? emitGPUAttention(b, l, attend.getQuery(), keys, values,
                                       flags, scale, /*headMajorKV=*/true)
                    : emitCachedAttention(b, l, attend.getQuery(), keys,
                                          values, flags, scale);
    if (out.getType() != attend.getType())
      out = b.create<tensor::CastOp>(l, attend.getType(), out);
    attend.getResult().replaceAllUsesWith(out);
    dead.push_back(op);
    return success();
  }
  if (auto length = dyn_cast<KVLengthOp>(op)) {
    Cache c = caches.lookup(length.getCache());
    length.getResult().replaceAllUsesWith(idx(l, c.len[length.getLayer()]));
    dead.push_back(op);
    return success();
  }
  if (isa<KVReleaseOp>(op)) {
    dead.push_back(op);
    return success();
  }
  if (auto ret = dyn_cast<func::ReturnOp>(op))
    return lowerReturn(ret);
  if (auto loop = dyn_cast<scf::ForOp>(op)) {
    if (llvm::any_of(loop.getInitArgs().getTypes(), isCacheType))
      return lowerFor(loop);
    // Cache reads inside a loop that carries no cache.
    return lowerBlock(*loop.getBody());
  }
  if (auto yield = dyn_cast<scf::YieldOp>(op))
    return lowerYield(yield);
  return success();
}

LogicalResult Lowering::lowerBlock(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  for (Operation *op : ops)
    if (failed(lowerOp(op)))
      return failure();
  return success();
}

LogicalResult Lowering::lowerFor(scf::ForOp loop) {
  Location l = loop.getLoc();
  b.setInsertionPoint(loop);
  // Expanded init values; for each old iter arg, its first new position.
  SmallVector<Value> inits;
  SmallVector<unsigned> first;
  for (Value init : loop.getInitArgs()) {
    first.push_back(inits.size());
    if (!isCache(init)) {
      inits.push_back(init);
      continue;
    }
    SmallVector<Value> v = carried(l, caches.lookup(init));
    inits.append(v.begin(), v.end());
  }
  auto newLoop = b.create<scf::ForOp>(l, loop.getLowerBound(),
                                      loop.getUpperBound(), loop.getStep(),
                                      inits);
  Block *body = newLoop.getBody();
  // ForOp::build adds a terminator only without iter args.
  if (!body->empty())
    body->getTerminator()->erase();
  Block *oldBody = loop.getBody();
  loop.getInductionVar().replaceAllUsesWith(newLoop.getInductionVar());
  for (auto [i, arg] : llvm::enumerate(loop.getRegionIterArgs())) {
    ValueRange newArgs = newLoop.getRegionIterArgs();
    if (!isCache(arg)) {
      arg.replaceAllUsesWith(newArgs[first[i]]);
      continue;
    }
    Cache init = caches.lookup(loop.getInitArgs()[i]);
    caches[arg] = fromCarried(
        init, newArgs.slice(first[i], 2 + init.type.getLayers()));
  }
  body->getOperations().splice(body->end(), oldBody->getOperations());
  for (auto [i, res] : llvm::enumerate(loop.getResults())) {
    if (!isCache(res)) {
      res.replaceAllUsesWith(newLoop.getResult(first[i]));
      continue;
    }
    Cache init = caches.lookup(loop.getInitArgs()[i]);
    caches[res] = fromCarried(
        init, newLoop.getResults().slice(first[i], 2 + init.type.getLayers()));
  }
  dead.push_back(loop);
  return lowerBlock(*body);
}

LogicalResult Lowering::lowerYield(scf::YieldOp yield) {
  if (!llvm::any_of(yield.getOperandTypes(), isCacheType))
    return success();
  Location l = yield.getLoc();
  b.setInsertionPoint(yield);
  SmallVector<Value> operands;
  for (Value v : yield.getOperands()) {
    if (!isCache(v)) {
      operands.push_back(v);
      continue;
    }
    SmallVector<Value> c = carried(l, caches.lookup(v));
    operands.append(c.begin(), c.end());
  }
  b.create<scf::YieldOp>(l, operands);
  dead.push_back(yield);
  return success();
}

LogicalResult Lowering::lowerReturn(func::ReturnOp ret) {
  if (!llvm::any_of(ret.getOperandTypes(), isCacheType))
    return success();
  SmallVector<Value> operands;
  // (new result index, tied argument) for the storage and flags results.
  SmallVector<std::pair<unsigned, BlockArgument>> tied;
  SmallVector<std::pair<unsigned, unsigned>> origin; // new index -> old index
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (!isCache(v)) {
      origin.push_back({operands.size(), i});
      operands.push_back(v);
      continue;
    }
    Cache c = caches.lookup(v);
    if (c.kvArg)
      tied.push_back({static_cast<unsigned>(operands.size()), c.kvArg});
    operands.push_back(c.kv);
    if (c.flagsArg)
      tied.push_back({static_cast<unsigned>(operands.size()), c.flagsArg});
    operands.push_back(c.flags);
  }
  // New result types and attributes.
  SmallVector<Type> resultTypes;
  for (Value v : operands)
    resultTypes.push_back(v.getType());
  SmallVector<DictionaryAttr> oldAttrs;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    oldAttrs.push_back(fn.getResultAttrDict(i));
  SmallVector<DictionaryAttr> newAttrs(operands.size());
  for (auto [newIdx, oldIdx] : origin)
    newAttrs[newIdx] = oldAttrs[oldIdx];
  b.setInsertionPoint(ret);
  b.create<func::ReturnOp>(ret.getLoc(), operands);
  ret.erase();
  fn.setFunctionType(
      FunctionType::get(fn.getContext(), fn.getArgumentTypes(), resultTypes));
  for (DictionaryAttr &attrs : newAttrs)
    if (!attrs)
      attrs = b.getDictionaryAttr({});
  fn.setAllResultAttrs(newAttrs);
  // Tied results get the names of their arguments (bt.inout_arg, see run()).
  for (auto [resultIdx, arg] : tied) {
    if (auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    "bt.name"))
      fn.setResultAttr(resultIdx, "bt.name", name);
    if (auto dims = fn.getArgAttr(arg.getArgNumber(), "bt.dims"))
      fn.setResultAttr(resultIdx, "bt.dims", dims);
    pendingTies.push_back({resultIdx, arg});
  }
  return success();
}

LogicalResult Lowering::run() {
  if (fn.isExternal()) {
    if (llvm::any_of(fn.getArgumentTypes(), isCacheType) ||
        llvm::any_of(fn.getResultTypes(), isCacheType))
      return fn.emitOpError() << "declares KV cache arguments or results; "
                                 "bt-lower-kv-caches does not lower calls";
    return success();
  }
  bool any = llvm::any_of(fn.getArgumentTypes(), isCacheType);
  fn.walk([&](Operation *op) {
    any |= llvm::any_of(op->getResultTypes(), isCacheType);
  });
  if (!any)
    return success();
  if (failed(checkStructure()))
    return failure();
  lowerArguments();
  if (failed(lowerBlock(fn.getBody().front())))
    return failure();
  for (Operation *op : llvm::reverse(dead)) {
    // Cache values are used only by other (dead) cache ops by now.
    for (Value r : op->getResults())
      if (isCache(r))
        r.dropAllUses();
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument a : block.getArguments())
          a.dropAllUses();
    op->erase();
  }
  dead.clear();
  // Erase the cache arguments (now unused).
  llvm::BitVector erase(fn.getNumArguments());
  for (auto &[arg, repl] : cacheArgs) {
    (void)repl;
    erase.set(arg.getArgNumber());
  }
  fn.eraseArguments(erase);
  for (auto [resultIdx, arg] : pendingTies) {
    fn.setArgAttr(arg.getArgNumber(), "bt.inout", b.getUnitAttr());
    fn.setResultAttr(resultIdx, "bt.inout_arg",
                     fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     "bt.name"));
  }
  return success();
}

struct LowerKVCachesPass
    : public bt::impl::BTLowerKVCachesBase<LowerKVCachesPass> {
  using BTLowerKVCachesBase::BTLowerKVCachesBase;

  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (failed(Lowering(fn, gpuAttention).run()))
        return signalPassFailure();
  }
};

} // namespace
