//===- KVCachesToTensors.cpp - !bt.kv_cache → destination-passing tensors -===//
//
// The patterns of bt-lower-kv-caches (include/bt/Codegen/KVCachesToTensors.h):
// every KV cache value becomes its storage tensor [B, layers, 2, H, C, hd],
// its key-valid flags [B, C] i64 and per-layer fill lengths (index values
// tracked in KVCacheLowering). Appends are extract_slice → generic →
// insert_slice at the fill length, so one-shot bufferization writes them in
// place; attention reads views of the filled part (docs/generation.md, "KV
// caches across the ABI").
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Codegen/BF16.h"
#include "bt/Codegen/KVCachesToTensors.h"
#include "bt/Codegen/LayerToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;
using namespace bt;

using Cache = KVCacheLowering::Cache;

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

Value idx(OpBuilder &b, Location l, OpFoldResult v) {
  return getValueOrCreateConstantIndexOp(b, l, v);
}

OpFoldResult add(OpBuilder &b, Location l, OpFoldResult x, OpFoldResult y) {
  std::optional<int64_t> cx = getConstantIntValue(x),
                         cy = getConstantIntValue(y);
  if (cx && cy)
    return b.getIndexAttr(*cx + *cy);
  if (cy == 0)
    return x;
  if (cx == 0)
    return y;
  return b.create<arith::AddIOp>(l, idx(b, l, x), idx(b, l, y)).getResult();
}

/// Size of dim `d` of `v` (static or tensor.dim).
OpFoldResult dimOf(OpBuilder &b, Location l, Value v, int64_t d) {
  auto t = cast<RankedTensorType>(v.getType());
  if (!t.isDynamicDim(d))
    return b.getIndexAttr(t.getDimSize(d));
  return b.create<tensor::DimOp>(l, v, d).getResult();
}

/// Whether two index values are the same (equal constants or one value).
bool sameIndex(OpFoldResult x, OpFoldResult y) {
  std::optional<int64_t> cx = getConstantIntValue(x),
                         cy = getConstantIntValue(y);
  if (cx || cy)
    return cx && cy && *cx == *cy;
  return x == y;
}

int64_t staticOf(OpFoldResult v) {
  std::optional<int64_t> c = getConstantIntValue(v);
  return c ? *c : kDyn;
}

/// The values a cache is carried as through a loop: storage, flags and one
/// fill length per layer.
SmallVector<Value> carried(OpBuilder &b, Location l, const Cache &c) {
  SmallVector<Value> v = {c.kv, c.flags};
  for (OpFoldResult len : c.len)
    v.push_back(idx(b, l, len));
  return v;
}

/// The cache whose carried values (see carried()) start at `values[0]`, with
/// the type, sizes and argument ties of `like`.
Cache fromCarried(const Cache &like, ValueRange values) {
  Cache c = like;
  c.kv = values[0];
  c.flags = values[1];
  for (unsigned i = 0; i < c.len.size(); ++i)
    c.len[i] = values[2 + i];
  c.flagsWritten.clear();
  return c;
}

/// The entries [start, start + n) of one layer's keys (which = 0) or values
/// (which = 1): kv[:, layer, which, :, start : start+n, :] of the storage
/// [B, Ly, 2, H, C, hd], as [B, H, n, hd] (the unit dims dropped).
struct EntrySlice {
  SmallVector<OpFoldResult> offsets, sizes, strides;
  RankedTensorType type;

  EntrySlice(OpBuilder &b, const Cache &c, int64_t layer, int64_t which,
             OpFoldResult start, OpFoldResult n) {
    KVCacheType t = c.type;
    OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
    offsets = {zero, b.getIndexAttr(layer), b.getIndexAttr(which),
               zero, start, zero};
    sizes = {c.batch, one, one, b.getIndexAttr(t.getHeads()), n,
             b.getIndexAttr(t.getHeadDim())};
    strides.assign(6, one);
    type = RankedTensorType::get(
        {staticOf(c.batch), t.getHeads(), staticOf(n), t.getHeadDim()},
        t.getElementType());
  }
  Value extract(OpBuilder &b, Location l, Value kv) const {
    return b.create<tensor::ExtractSliceOp>(l, type, kv, offsets, sizes,
                                            strides);
  }
};

/// Writes `x` [B, S, H, hd] into kv[:, layer, which, :, len : len+S, :],
/// rounded to nearest even where the cache is bf16 and `x` f32
/// (codegen::roundToBF16).
Value writeEntries(OpBuilder &b, Location l, const Cache &c, Value kv, Value x,
                   int64_t layer, int64_t which, OpFoldResult len,
                   OpFoldResult s) {
  EntrySlice slice(b, c, layer, which, len, s);
  RankedTensorType dstType = slice.type;
  Value dst = slice.extract(b, l, kv);
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
             Value v = a[0];
             if (a[1].getType().isBF16() && v.getType().isF32())
               v = codegen::roundToBF16(nb, nl, v);
             nb.create<linalg::YieldOp>(nl, v);
           })
          .getResult(0);
  return b.create<tensor::InsertSliceOp>(l, moved, kv, slice.offsets,
                                         slice.sizes, slice.strides);
}

/// Writes the flags (mask as i64, or ones) into valid[:, len : len+S].
Value writeFlags(OpBuilder &b, Location l, const Cache &c, Value mask,
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

/// kv[:, layer, which, :, 0 : len, :] as [B, H, len, hd].
Value readEntries(OpBuilder &b, Location l, const Cache &c, int64_t layer,
                  int64_t which, OpFoldResult len) {
  return EntrySlice(b, c, layer, which, b.getIndexAttr(0), len)
      .extract(b, l, c.kv);
}

/// A pattern that reads and records cache states in a KVCacheLowering.
template <typename OpT>
struct CachePattern : OpConversionPattern<OpT> {
  CachePattern(MLIRContext *ctx, KVCacheLowering &lowering)
      : OpConversionPattern<OpT>(ctx), lowering(lowering) {}
  KVCacheLowering &lowering;

  /// `op`, whose result is the cache state `c`, is done: records `c` and
  /// erases `op`.
  LogicalResult define(ConversionPatternRewriter &rewriter, OpT op,
                       Cache c) const {
    lowering.set(op.getResult(), std::move(c));
    rewriter.eraseOp(op);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// KV-cache ops
//===----------------------------------------------------------------------===//

/// bt.kv_alloc → tensor.empty storage, flags filled with 0, lengths 0.
struct AllocLowering : CachePattern<KVAllocOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(KVAllocOp alloc, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = alloc.getLoc();
    OpBuilder &b = rewriter;
    Cache c;
    c.type = cast<KVCacheType>(alloc.getType());
    c.batch = c.type.hasStaticBatch()
                  ? OpFoldResult(b.getIndexAttr(c.type.getBatch()))
                  : OpFoldResult(adaptor.getBatch());
    c.capacity = c.type.hasStaticCapacity()
                     ? OpFoldResult(b.getIndexAttr(c.type.getCapacity()))
                     : OpFoldResult(adaptor.getCapacity());
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
    return define(rewriter, alloc, std::move(c));
  }
};

/// bt.kv_append → a capacity check, k and v written at the layer's fill
/// length, the flags written once per group of layer appends.
struct AppendLowering : CachePattern<KVAppendOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(KVAppendOp append, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = append.getLoc();
    OpBuilder &b = rewriter;
    const Cache &c = lowering.lookup(append.getCache());
    int64_t layer = append.getLayer();
    OpFoldResult len = c.len[layer];
    OpFoldResult s = dimOf(b, l, adaptor.getKey(), 1);
    OpFoldResult end = add(b, l, len, s);
    // Where the entries go: the fill length (with a device length, base +
    // the entries appended here).
    OpFoldResult at = c.absolute(b, l, layer);
    // Appending past the capacity is a runtime error (bt.kv_append). A
    // length on the device is not checked here: the host code would have
    // to read it (the caller, which keeps the length, checks it).
    std::optional<int64_t> endC = getConstantIntValue(end),
                           capC = getConstantIntValue(c.capacity);
    if (!c.base && !(endC && capC && *endC <= *capC)) {
      Value fits = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ule,
                                           idx(b, l, end),
                                           idx(b, l, c.capacity));
      b.create<cf::AssertOp>(
          l, fits, "bt.kv_append: the KV cache capacity is exceeded");
    }
    Value kv =
        writeEntries(b, l, c, c.kv, adaptor.getKey(), layer, 0, at, s);
    kv = writeEntries(b, l, c, kv, adaptor.getValue(), layer, 1, at, s);
    Cache next = c;
    Value mask = adaptor.getKeyMask();
    // The same start and mask (whose shape fixes S), or no mask and the
    // same S.
    bool written = llvm::any_of(c.flagsWritten, [&](const auto &w) {
      return sameIndex(std::get<0>(w), len) && std::get<2>(w) == mask &&
             (mask || sameIndex(std::get<1>(w), s));
    });
    if (!written) {
      next.flags = writeFlags(b, l, c, mask, at, s);
      next.flagsWritten.push_back({len, s, mask});
    }
    next.kv = kv;
    next.len[layer] = end;
    return define(rewriter, append, std::move(next));
  }
};

/// bt.kv_attend → the head-loop attention over the layer's views.
struct AttendLowering : CachePattern<KVAttendOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(KVAttendOp attend, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // The head loop computes in the activations' type (a bf16 cache of f32
    // activations is a target's: CodegenTarget::attendsMixedPrecisionCache,
    // checked by the pass before it converts).
    if (cast<KVCacheType>(attend.getCache().getType()).getElementType() !=
        getElementTypeOrSelf(attend.getQuery().getType()))
      return rewriter.notifyMatchFailure(attend, "mixed-precision cache");
    KVCacheLowering::AttendOperands in =
        lowering.emitAttendOperands(rewriter, attend);
    Value out = codegen::emitAttention(
        rewriter, attend.getLoc(), adaptor.getQuery(), in.keys, in.values,
        in.flags, attend.getScale().convertToDouble(), /*headMajorKV=*/true);
    codegen::replaceOpWithCasts(rewriter, attend, out);
    return success();
  }
};

struct LengthLowering : CachePattern<KVLengthOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(KVLengthOp length, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    const Cache &c = lowering.lookup(length.getCache());
    Location l = length.getLoc();
    rewriter.replaceOp(
        length, idx(rewriter, l, c.absolute(rewriter, l, length.getLayer())));
    return success();
  }
};

struct ReleaseLowering : CachePattern<KVReleaseOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(KVReleaseOp release, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.eraseOp(release);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Control flow that carries caches
//===----------------------------------------------------------------------===//

/// A stand-in of cache type for `values` (the carried values of one cache),
/// for the rewriter APIs that need one value per replaced cache value; its
/// users are cache ops, which are all rewritten, and it is erased after the
/// conversion.
Value standIn(ConversionPatternRewriter &rewriter, Location l, Type cacheType,
              ValueRange values, KVCacheLowering &lowering) {
  auto cast =
      rewriter.create<UnrealizedConversionCastOp>(l, cacheType, values);
  lowering.standIns.push_back(cast);
  return cast.getResult(0);
}

/// scf.for carrying caches → an scf.for carrying, for each, its storage,
/// flags and one fill length per layer.
struct ForLowering : CachePattern<scf::ForOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(scf::ForOp loop, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = loop.getLoc();
    // Expanded init values; for each old iter arg, its first new position.
    SmallVector<Value> inits;
    SmallVector<unsigned> first;
    for (auto [i, init] : llvm::enumerate(loop.getInitArgs())) {
      first.push_back(inits.size());
      if (!isCache(init)) {
        inits.push_back(adaptor.getInitArgs()[i]);
        continue;
      }
      SmallVector<Value> v = carried(rewriter, l, lowering.lookup(init));
      inits.append(v.begin(), v.end());
    }
    auto newLoop = rewriter.create<scf::ForOp>(
        l, adaptor.getLowerBound(), adaptor.getUpperBound(),
        adaptor.getStep(), inits);
    Block *body = newLoop.getBody();
    // ForOp::build adds a terminator only without iter args.
    if (!body->empty())
      rewriter.eraseOp(body->getTerminator());
    // The old body's arguments: the induction variable, then one value per
    // old iter arg (a stand-in for each cache, whose state is recorded).
    SmallVector<Value> argValues = {newLoop.getInductionVar()};
    ValueRange newArgs = newLoop.getRegionIterArgs();
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(body);
      for (auto [i, arg] : llvm::enumerate(loop.getRegionIterArgs())) {
        if (!isCache(arg)) {
          argValues.push_back(newArgs[first[i]]);
          continue;
        }
        const Cache &init = lowering.lookup(loop.getInitArgs()[i]);
        Cache c = fromCarried(
            init, newArgs.slice(first[i], 2 + init.type.getLayers()));
        Value cast = standIn(rewriter, l, arg.getType(),
                             newArgs.slice(first[i], 2 + init.type.getLayers()),
                             lowering);
        lowering.set(arg, c);
        lowering.set(cast, c);
        argValues.push_back(cast);
      }
    }
    rewriter.mergeBlocks(loop.getBody(), body, argValues);
    // The old results: the new ones, a stand-in for each cache.
    SmallVector<Value> results;
    for (auto [i, res] : llvm::enumerate(loop.getResults())) {
      if (!isCache(res)) {
        results.push_back(newLoop.getResult(first[i]));
        continue;
      }
      const Cache &init = lowering.lookup(loop.getInitArgs()[i]);
      ValueRange values =
          newLoop.getResults().slice(first[i], 2 + init.type.getLayers());
      Cache c = fromCarried(init, values);
      Value cast = standIn(rewriter, l, res.getType(), values, lowering);
      lowering.set(res, c);
      lowering.set(cast, c);
      results.push_back(cast);
    }
    rewriter.replaceOp(loop, results);
    return success();
  }
};

/// scf.yield of caches → the carried values of each.
struct YieldLowering : CachePattern<scf::YieldOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(scf::YieldOp yield, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location l = yield.getLoc();
    SmallVector<Value> operands;
    for (auto [i, v] : llvm::enumerate(yield.getOperands())) {
      if (!isCache(v)) {
        operands.push_back(adaptor.getOperands()[i]);
        continue;
      }
      SmallVector<Value> c = carried(rewriter, l, lowering.lookup(v));
      operands.append(c.begin(), c.end());
    }
    rewriter.replaceOpWithNewOp<scf::YieldOp>(yield, operands);
    return success();
  }
};

/// The length a returned cache `c` with a device length leaves in its
/// length argument: base + the entries appended to layer 0 (every layer
/// appends the same entries: one cache_length describes them all, as
/// without a device length), written in place by a 0-d linalg.generic (one
/// thread on the GPU). Layers with different constant counts are an error.
FailureOr<Value> updatedLength(ConversionPatternRewriter &rewriter,
                               Location l, const Cache &c) {
  OpFoldResult appended = c.len.front();
  std::optional<int64_t> first = getConstantIntValue(appended);
  for (OpFoldResult len : c.len)
    if (std::optional<int64_t> n = getConstantIntValue(len);
        first && n && *n != *first)
      return emitError(l) << "bt-lower-kv-caches: a returned KV cache whose "
                             "layers have different lengths cannot keep one "
                             "length on the device";
  OpBuilder &b = rewriter;
  Value delta = b.create<arith::IndexCastOp>(l, b.getI64Type(),
                                             idx(b, l, appended));
  auto map = AffineMap::get(0, 0, b.getContext());
  return b
      .create<linalg::GenericOp>(
          l, TypeRange{c.base.getType()}, ValueRange{}, ValueRange{c.base},
          ArrayRef<AffineMap>{map}, ArrayRef<utils::IteratorType>{},
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            nb.create<linalg::YieldOp>(
                nl, nb.create<arith::AddIOp>(nl, a[0], delta).getResult());
          })
      .getResult(0);
}

/// func.return of caches → the storage and flags of each (and the updated
/// length of a cache with a device length); the function's
/// new result attributes and in-place ties are recorded for
/// finishKVCacheSignature.
struct ReturnLowering : CachePattern<func::ReturnOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(func::ReturnOp ret, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto fn = ret->getParentOfType<func::FuncOp>();
    SmallVector<Value> operands;
    SmallVector<DictionaryAttr> attrs;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      if (!isCache(v)) {
        operands.push_back(adaptor.getOperands()[i]);
        attrs.push_back(fn.getResultAttrDict(i));
        continue;
      }
      const Cache &c = lowering.lookup(v);
      if (c.kvArg)
        lowering.ties.push_back({static_cast<unsigned>(operands.size()),
                                 c.kvArg});
      operands.push_back(c.kv);
      attrs.push_back(nullptr);
      if (c.flagsArg)
        lowering.ties.push_back({static_cast<unsigned>(operands.size()),
                                 c.flagsArg});
      operands.push_back(c.flags);
      attrs.push_back(nullptr);
      if (c.base) {
        FailureOr<Value> length = updatedLength(rewriter, ret.getLoc(), c);
        if (failed(length))
          return failure();
        lowering.ties.push_back({static_cast<unsigned>(operands.size()),
                                 c.base});
        operands.push_back(*length);
        attrs.push_back(nullptr);
      }
    }
    lowering.resultAttrs = attrs;
    lowering.returnLowered = true;
    rewriter.replaceOpWithNewOp<func::ReturnOp>(ret, operands);
    return success();
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// KVCacheLowering
//===----------------------------------------------------------------------===//

void KVCacheLowering::reset() {
  caches.clear();
  cacheArgs.clear();
  resultAttrs.clear();
  ties.clear();
  returnLowered = false;
  standIns.clear();
}

const Cache &KVCacheLowering::lookup(Value cache) const {
  auto it = caches.find(cache);
  assert(it != caches.end() && "a KV cache used before it was lowered");
  return it->second;
}

OpFoldResult Cache::absolute(OpBuilder &b, Location l, int64_t layer) const {
  if (!base)
    return len[layer];
  Value len64 = b.create<tensor::ExtractOp>(l, base, ValueRange{});
  Value start = b.create<arith::IndexCastOp>(l, b.getIndexType(), len64);
  return add(b, l, start, len[layer]);
}

KVCacheLowering::AttendOperands
KVCacheLowering::emitAttendOperands(OpBuilder &b, KVAttendOp attend,
                                    bool wholeCapacity) const {
  Location l = attend.getLoc();
  const Cache &c = lookup(attend.getCache());
  int64_t layer = attend.getLayer();
  OpFoldResult len =
      wholeCapacity ? c.capacity : c.absolute(b, l, layer);
  AttendOperands in;
  in.keys = readEntries(b, l, c, layer, 0, len);
  in.values = readEntries(b, l, c, layer, 1, len);
  SmallVector<OpFoldResult> offsets(2, b.getIndexAttr(0)),
      sizes = {c.batch, len}, strides(2, b.getIndexAttr(1));
  in.flags = b.create<tensor::ExtractSliceOp>(
      l,
      RankedTensorType::get({staticOf(c.batch), staticOf(len)},
                            b.getI64Type()),
      c.flags, offsets, sizes, strides);
  return in;
}

void bt::populateBTKVCacheToTensorPatterns(RewritePatternSet &patterns,
                                           KVCacheLowering &lowering) {
  patterns.add<AllocLowering, AppendLowering, AttendLowering, LengthLowering,
               ReleaseLowering, ForLowering, YieldLowering, ReturnLowering>(
      patterns.getContext(), lowering);
}

//===----------------------------------------------------------------------===//
// Function signatures
//===----------------------------------------------------------------------===//

void bt::lowerKVCacheArguments(func::FuncOp fn, KVCacheLowering &lowering,
                               bool deviceLength) {
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
    if (auto n = fn.getArgAttrOfType<StringAttr>(i, bt::BTDialect::getNameAttrName()))
      name = n.str();
    bool standard = name == "kv_cache";
    std::string validName = standard ? "kv_valid" : name + "_valid";
    std::string lenName = standard ? "cache_length" : name + "_length";
    Location l = fn.getArgument(i).getLoc();
    Builder ab(ctx);
    auto named = [&](StringRef n, ArrayAttr d) {
      return ab.getDictionaryAttr(
          {ab.getNamedAttr(bt::BTDialect::getNameAttrName(), ab.getStringAttr(n)),
           ab.getNamedAttr(bt::BTDialect::getDimsAttrName(), d)});
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
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  for (BlockArgument a : fn.getArguments()) {
    if (!isCache(a))
      continue;
    unsigned i = a.getArgNumber();
    std::array<BlockArgument, 3> repl = {fn.getArgument(i + 1),
                                         fn.getArgument(i + 2),
                                         fn.getArgument(i + 3)};
    lowering.cacheArgs.push_back({a, repl});
    Location l = a.getLoc();
    Cache c;
    c.type = cast<KVCacheType>(a.getType());
    c.kv = repl[0];
    c.flags = repl[1];
    c.kvArg = repl[0];
    c.flagsArg = repl[1];
    if (deviceLength) {
      c.base = repl[2];
      c.len.assign(c.type.getLayers(), b.getIndexAttr(0));
    } else {
      Value len64 = b.create<tensor::ExtractOp>(l, repl[2], ValueRange{});
      Value len = b.create<arith::IndexCastOp>(l, b.getIndexType(), len64);
      c.len.assign(c.type.getLayers(), len);
    }
    c.batch = dimOf(b, l, c.kv, 0);
    c.capacity = dimOf(b, l, c.kv, 4);
    lowering.set(a, c);
  }
}

void bt::finishKVCacheSignature(func::FuncOp fn, KVCacheLowering &lowering) {
  for (Operation *op : llvm::reverse(lowering.standIns))
    if (op->use_empty())
      op->erase();
  lowering.standIns.clear();
  Builder b(fn.getContext());
  // The results, as the new func.return returns them.
  if (lowering.returnLowered) {
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    fn.setFunctionType(FunctionType::get(
        fn.getContext(), fn.getArgumentTypes(), ret.getOperandTypes()));
    SmallVector<DictionaryAttr> attrs = lowering.resultAttrs;
    for (DictionaryAttr &a : attrs)
      if (!a)
        a = b.getDictionaryAttr({});
    fn.setAllResultAttrs(attrs);
    // Tied results get the names of their arguments (bt.inout_arg below).
    for (const KVCacheLowering::Tie &tie : lowering.ties) {
      unsigned argNo = tie.arg.getArgNumber();
      if (auto name = fn.getArgAttrOfType<StringAttr>(argNo, bt::BTDialect::getNameAttrName()))
        fn.setResultAttr(tie.result, bt::BTDialect::getNameAttrName(), name);
      if (auto dims = fn.getArgAttr(argNo, bt::BTDialect::getDimsAttrName()))
        fn.setResultAttr(tie.result, bt::BTDialect::getDimsAttrName(), dims);
    }
  }
  // Erase the cache arguments (now unused).
  llvm::BitVector erase(fn.getNumArguments());
  for (auto &[arg, repl] : lowering.cacheArgs)
    erase.set(arg.getArgNumber());
  fn.eraseArguments(erase);
  for (const KVCacheLowering::Tie &tie : lowering.ties) {
    unsigned argNo = tie.arg.getArgNumber();
    fn.setArgAttr(argNo, bt::BTDialect::getInOutAttrName(), b.getUnitAttr());
    fn.setResultAttr(tie.result, bt::BTDialect::getInOutArgAttrName(),
                     fn.getArgAttrOfType<StringAttr>(argNo, bt::BTDialect::getNameAttrName()));
  }
}
