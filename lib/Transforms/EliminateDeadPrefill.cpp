//===- EliminateDeadPrefill.cpp - bt-eliminate-dead-prefill ----------------===//
//
// Removes the token-decoder work of blocks whose outputs are never used
// (paper §2.4: "the prefill stage [can] be skipped entirely — except for the
// most recent block"; docs/design.md §4). See Passes.td for the contract.
//
// The transformation is "narrowing": an op that is block-local along a result
// dimension d (BlockLocalOpInterface, or one of the upstream tensor/arith ops
// the decomposition emits) and whose results are only read through
// `tensor.extract_slice` / `tensor.extract` (and `tensor.dim`) is recomputed
// on the hull of the ranges its users read along d: its block-partitioned
// operands are sliced (getOperandBlockDim), shared operands (weights, 1-D
// positions) stay, the users re-slice the narrowed result. Applied greedily,
// the slices travel up from the used outputs through the model- or
// layer-level token decoder until they reach an op that is not block-local
// (the block decoder, a function argument); everything the slices no longer
// read becomes dead and is erased. KV-cache chains (kv_alloc → kv_append* →
// kv_release) whose reads feed nothing live are erased as well.
//
//===----------------------------------------------------------------------===//

#include "bt/Transforms/EliminateDeadPrefill.h"

#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace bt {
#define GEN_PASS_DEF_BTELIMINATEDEADPREFILL
#include "bt/Transforms/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

RankedTensorType rankedType(Value v) {
  return llvm::dyn_cast<RankedTensorType>(v.getType());
}

//===----------------------------------------------------------------------===//
// Block-local view of an op
//===----------------------------------------------------------------------===//

/// The block-local structure of the ops this pass narrows: bt ops through
/// BlockLocalOpInterface, and the upstream ops `bt-decompose` emits around
/// them (elementwise arith/math on tensors, tensor.concat, tensor.cast,
/// tensor.collapse_shape / expand_shape), whose block dims are derived here.
struct BlockLocal {
  /// True if `op` can be narrowed at all: side-effect free, no regions,
  /// ranked tensor results of one rank, and block-local structure known.
  static bool supports(Operation *op) {
    if (op->getNumResults() == 0 || op->getNumRegions() != 0 ||
        !isMemoryEffectFree(op))
      return false;
    int64_t rank = -1;
    for (Value r : op->getResults()) {
      RankedTensorType t = rankedType(r);
      if (!t || (rank >= 0 && t.getRank() != rank))
        return false;
      rank = t.getRank();
    }
    if (isa<BlockLocalOpInterface>(op))
      return true;
    if (isa<tensor::CastOp, tensor::ConcatOp, tensor::CollapseShapeOp,
            tensor::ExpandShapeOp>(op))
      return true;
    if (OpTrait::hasElementwiseMappableTraits(op))
      return llvm::all_of(op->getOperands(), [&](Value v) {
        RankedTensorType t = rankedType(v);
        return t && t.getRank() == rank;
      });
    return false;
  }

  static int64_t rank(Operation *op) {
    return rankedType(op->getResult(0)).getRank();
  }

  /// True if the results are independent along result dim `d`.
  static bool isBlockDim(Operation *op, int64_t d) {
    if (d < 0 || d >= rank(op))
      return false;
    if (auto bl = dyn_cast<BlockLocalOpInterface>(op))
      return bl.isBlockLocalAlong(d);
    if (auto concat = dyn_cast<tensor::ConcatOp>(op))
      return static_cast<int64_t>(concat.getDim()) != d;
    if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
      return collapse.getReassociationIndices()[d].size() == 1;
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
      for (const ReassociationIndices &g : expand.getReassociationIndices())
        if (llvm::is_contained(g, d))
          return g.size() == 1;
      return false;
    }
    return true; // cast, elementwise
  }

  /// For a block dim `d`, the dim of operand `idx` partitioned the same way,
  /// or nullopt if the operand is shared by all blocks (or not a tensor).
  static std::optional<int64_t> operandDim(Operation *op, unsigned idx,
                                           int64_t d) {
    if (!rankedType(op->getOperand(idx)))
      return std::nullopt;
    if (auto bl = dyn_cast<BlockLocalOpInterface>(op)) {
      std::optional<int64_t> od = bl.getOperandBlockDim(idx, d);
      if (od && (*od < 0 || *od >= rankedType(op->getOperand(idx)).getRank()))
        return std::nullopt;
      return od;
    }
    if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
      return collapse.getReassociationIndices()[d].front();
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
      if (idx != 0)
        return std::nullopt;
      for (auto [i, g] : llvm::enumerate(expand.getReassociationIndices()))
        if (llvm::is_contained(g, d))
          return static_cast<int64_t>(i);
      return std::nullopt;
    }
    return d; // cast, concat, elementwise
  }
};

//===----------------------------------------------------------------------===//
// Sizes
//===----------------------------------------------------------------------===//

/// True if `size` is known to equal the extent of dim `d` of `v`: static
/// equality, or a `tensor.dim` / slice size of a value whose dim is
/// partitioned like it (through block-local ops).
bool isExtentOf(OpFoldResult size, Value v, int64_t d) {
  std::optional<int64_t> cst = getConstantIntValue(size);
  RankedTensorType t = rankedType(v);
  if (cst && t && !t.isDynamicDim(d))
    return *cst == t.getDimSize(d);
  SmallVector<std::pair<Value, int64_t>> work{{v, d}};
  DenseSet<std::pair<Value, int64_t>> seen;
  Value sizeValue = llvm::dyn_cast_if_present<Value>(size);
  while (!work.empty() && seen.size() < 256) {
    auto [w, k] = work.pop_back_val();
    if (!seen.insert({w, k}).second)
      continue;
    RankedTensorType wt = rankedType(w);
    if (cst && wt && !wt.isDynamicDim(k))
      return *cst == wt.getDimSize(k);
    if (sizeValue) {
      if (auto dim = sizeValue.getDefiningOp<tensor::DimOp>()) {
        std::optional<int64_t> idx = dim.getConstantIndex();
        if (dim.getSource() == w && idx && *idx == k)
          return true;
      }
    }
    Operation *def = w.getDefiningOp();
    if (!def)
      continue;
    // The block decoder is not block-local (global attention), but its
    // result has the shape of its input.
    if (auto decoder = dyn_cast<BlockDecoderOp>(def)) {
      if (w == decoder.getResult())
        work.push_back({decoder.getInput(), k});
      continue;
    }
    if (auto slice = dyn_cast<tensor::ExtractSliceOp>(def)) {
      // Map result dim k to the source dim (skipping dropped unit dims).
      llvm::SmallBitVector dropped = slice.getDroppedDims();
      int64_t seenResult = -1;
      for (int64_t s = 0; s < slice.getSourceType().getRank(); ++s) {
        if (dropped.test(s))
          continue;
        if (++seenResult != k)
          continue;
        OpFoldResult sliceSize = slice.getMixedSizes()[s];
        if (isEqualConstantIntOrValue(sliceSize, size))
          return true;
        // A slice that keeps all of dim s has its source's extent.
        std::optional<int64_t> off =
            getConstantIntValue(slice.getMixedOffsets()[s]);
        auto sizeDim = llvm::dyn_cast_if_present<Value>(sliceSize)
                           ? llvm::cast<Value>(sliceSize)
                                 .getDefiningOp<tensor::DimOp>()
                           : tensor::DimOp();
        if (off && *off == 0 && sizeDim &&
            sizeDim.getSource() == slice.getSource() &&
            sizeDim.getConstantIndex() == std::optional<int64_t>(s))
          work.push_back({slice.getSource(), s});
        break;
      }
      continue;
    }
    if (!BlockLocal::supports(def) || !BlockLocal::isBlockDim(def, k))
      continue;
    for (unsigned i = 0; i < def->getNumOperands(); ++i)
      if (std::optional<int64_t> od = BlockLocal::operandDim(def, i, k))
        work.push_back({def->getOperand(i), *od});
  }
  return false;
}

/// The range [offset, offset + size) of dim d a user reads.
struct Range {
  OpFoldResult offset, size;
};

/// What users of an op read along one result dim: a range common to all of
/// them (the hull), or nothing narrower than the whole dim.
struct Hull {
  bool narrow = false;
  OpFoldResult offset, size;
};

//===----------------------------------------------------------------------===//
// Statistics shared by the patterns
//===----------------------------------------------------------------------===//

struct Counters {
  int64_t rewritten = 0;
  int64_t removedBlocks = 0;
  int64_t dynamicRewrites = 0;
};

/// Ops whose B · N_blk is the token-decoder work of one block: the model-level
/// token decoder and, at layer level, its prefix projection (one per token
/// decoder, for both strategies).
bool isTokenDecoderRoot(Operation *op) {
  return isa<TokenDecoderOp, PrefixProjectionOp>(op);
}

/// B · N_blk of a token-decoder root (dims 0 and 1 of its result), if static.
std::optional<int64_t> blockCount(Operation *op) {
  RankedTensorType t = rankedType(op->getResult(0));
  if (!t || t.getRank() < 3 || t.isDynamicDim(0) || t.isDynamicDim(1))
    return std::nullopt;
  return t.getDimSize(0) * t.getDimSize(1);
}

//===----------------------------------------------------------------------===//
// Narrowing pattern
//===----------------------------------------------------------------------===//

/// op(x..., w...) read only through slices of some blocks
///   → op(slice(x)..., w...), re-sliced by its users.
struct NarrowBlockLocalOp : public RewritePattern {
  NarrowBlockLocalOp(MLIRContext *ctx, Counters &counters)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx),
        counters(counters) {}

  Counters &counters;

  /// A read of a result: the user and the range it reads along each dim.
  using Reads = SmallVector<std::pair<Operation *, SmallVector<Range>>>;

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!BlockLocal::supports(op))
      return failure();
    Reads reads;
    SmallVector<tensor::DimOp> dims;
    SmallVector<Hull> hulls;
    if (failed(collectReads(op, rewriter, reads, dims)) ||
        !narrowingHulls(op, reads, rewriter, hulls))
      return failure();
    Operation *narrowed = createNarrowed(op, hulls, rewriter);
    // Statistics.
    ++counters.rewritten;
    if (isTokenDecoderRoot(op)) {
      std::optional<int64_t> before = blockCount(op), after = blockCount(narrowed);
      if (before && after)
        counters.removedBlocks += *before - *after;
      else
        ++counters.dynamicRewrites;
    }

    rewireUsers(op, narrowed, hulls, reads, dims, rewriter);
    rewriter.eraseOp(op);
    return success();
  }

  /// The users of `op`'s results: `reads` (slices and element extractions,
  /// with the ranges they read) and `dims` (constant-index tensor.dim).
  /// Fails if some use is anything else, or if nothing is read.
  static LogicalResult collectReads(Operation *op, PatternRewriter &rewriter,
                                    Reads &reads,
                                    SmallVectorImpl<tensor::DimOp> &dims) {
    int64_t rank = BlockLocal::rank(op);
    // Every use must be a slice, an element extraction or a dim query.
    for (Value result : op->getResults()) {
      for (Operation *user : result.getUsers()) {
        if (auto slice = dyn_cast<tensor::ExtractSliceOp>(user)) {
          SmallVector<Range> ranges;
          for (int64_t d = 0; d < rank; ++d) {
            std::optional<int64_t> stride =
                getConstantIntValue(slice.getMixedStrides()[d]);
            if (stride && *stride == 1)
              ranges.push_back(
                  {slice.getMixedOffsets()[d], slice.getMixedSizes()[d]});
            else
              ranges.push_back({OpFoldResult(), OpFoldResult()}); // whole dim
          }
          reads.push_back({user, ranges});
        } else if (auto extract = dyn_cast<tensor::ExtractOp>(user)) {
          SmallVector<Range> ranges;
          for (Value idx : extract.getIndices())
            ranges.push_back({getAsOpFoldResult(idx), rewriter.getIndexAttr(1)});
          reads.push_back({user, ranges});
        } else if (auto dim = dyn_cast<tensor::DimOp>(user)) {
          if (!dim.getConstantIndex())
            return failure();
          dims.push_back(dim);
        } else {
          return failure();
        }
      }
    }
    return success(!reads.empty());

  }

  /// The hull of `reads` along each block dim of `op` that some operand
  /// carries (`hulls`, one per result dim; `narrow` where it is narrower
  /// than the whole dim and its bounds dominate `op`). False if no dim
  /// narrows.
  static bool narrowingHulls(Operation *op, const Reads &reads,
                             PatternRewriter &rewriter,
                             SmallVectorImpl<Hull> &hulls) {
    int64_t rank = BlockLocal::rank(op);
    DominanceInfo dominance;
    auto dominates = [&](OpFoldResult ofr) {
      auto v = llvm::dyn_cast_if_present<Value>(ofr);
      return !v || dominance.properlyDominates(v, op);
    };
    hulls.assign(rank, Hull());
    bool any = false;
    for (int64_t d = 0; d < rank; ++d) {
      if (!BlockLocal::isBlockDim(op, d))
        continue;
      // Some operand must carry the dim, or its extent would be lost.
      bool carried = false;
      for (unsigned i = 0; i < op->getNumOperands() && !carried; ++i)
        carried = BlockLocal::operandDim(op, i, d).has_value();
      if (!carried)
        continue;
      Hull h = hullOf(reads, d, rewriter);
      if (!h.narrow || !dominates(h.offset) || !dominates(h.size))
        continue;
      std::optional<int64_t> off = getConstantIntValue(h.offset);
      if (off && *off == 0 && isExtentOf(h.size, op->getResult(0), d))
        continue; // the whole dim
      hulls[d] = h;
      any = true;
    }
    return any;

  }

  /// `op` recomputed on `hulls`: its partitioned operands sliced, its
  /// results narrowed (an expand_shape gets the narrowed output shape).
  static Operation *createNarrowed(Operation *op, ArrayRef<Hull> hulls,
                                   PatternRewriter &rewriter) {
    int64_t rank = BlockLocal::rank(op);
    Location loc = op->getLoc();
    rewriter.setInsertionPoint(op);
    // Slices of the partitioned operands.
    SmallVector<Value> operands;
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      Value x = op->getOperand(i);
      RankedTensorType xt = rankedType(x);
      if (!xt) {
        operands.push_back(x);
        continue;
      }
      SmallVector<OpFoldResult> offsets(xt.getRank(), rewriter.getIndexAttr(0));
      SmallVector<OpFoldResult> sizes =
          tensor::getMixedSizes(rewriter, loc, x);
      SmallVector<OpFoldResult> strides(xt.getRank(), rewriter.getIndexAttr(1));
      bool sliced = false;
      for (int64_t d = 0; d < rank; ++d) {
        if (!hulls[d].narrow)
          continue;
        std::optional<int64_t> od = BlockLocal::operandDim(op, i, d);
        if (!od)
          continue;
        offsets[*od] = hulls[d].offset;
        sizes[*od] = hulls[d].size;
        sliced = true;
      }
      if (!sliced) {
        operands.push_back(x);
        continue;
      }
      operands.push_back(rewriter.create<tensor::ExtractSliceOp>(
          loc, x, offsets, sizes, strides));
    }

    // The narrowed op: same op, narrowed result types.
    SmallVector<Type> resultTypes;
    for (Value r : op->getResults()) {
      RankedTensorType t = rankedType(r);
      SmallVector<int64_t> shape(t.getShape());
      for (int64_t d = 0; d < rank; ++d)
        if (hulls[d].narrow) {
          std::optional<int64_t> s = getConstantIntValue(hulls[d].size);
          shape[d] = s ? *s : ShapedType::kDynamic;
        }
      resultTypes.push_back(t.clone(shape));
    }
    Operation *narrowed;
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
      SmallVector<OpFoldResult> outShape = getMixedValues(
          expand.getStaticOutputShape(), expand.getOutputShape(), rewriter);
      for (int64_t d = 0; d < rank; ++d)
        if (hulls[d].narrow)
          outShape[d] = hulls[d].size;
      narrowed = rewriter.create<tensor::ExpandShapeOp>(
          loc, resultTypes[0], operands[0], expand.getReassociationIndices(),
          outShape);
    } else {
      IRMapping map;
      for (auto [from, to] : llvm::zip(op->getOperands(), operands))
        map.map(from, to);
      narrowed = rewriter.clone(*op, map);
      for (auto [r, t] : llvm::zip(narrowed->getResults(), resultTypes))
        r.setType(t);
    }
    return narrowed;
  }

  /// Makes the users of `op` read `narrowed`: slices and extractions shifted
  /// by the hull offsets, dims of a narrowed dim from an operand that
  /// carries the full extent.
  static void rewireUsers(Operation *op, Operation *narrowed,
                          ArrayRef<Hull> hulls, Reads &reads,
                          ArrayRef<tensor::DimOp> dims,
                          PatternRewriter &rewriter) {
    int64_t rank = BlockLocal::rank(op);
    Location loc = op->getLoc();
    auto shifted = [&](OpFoldResult offset, int64_t d) -> OpFoldResult {
      if (!hulls[d].narrow)
        return offset;
      if (isEqualConstantIntOrValue(offset, hulls[d].offset))
        return rewriter.getIndexAttr(0);
      std::optional<int64_t> a = getConstantIntValue(offset);
      std::optional<int64_t> b = getConstantIntValue(hulls[d].offset);
      if (a && b)
        return rewriter.getIndexAttr(*a - *b);
      Value av = getValueOrCreateConstantIndexOp(rewriter, loc, offset);
      Value bv = getValueOrCreateConstantIndexOp(rewriter, loc, hulls[d].offset);
      return rewriter.create<arith::SubIOp>(loc, av, bv).getResult();
    };
    for (auto &[user, ranges] : reads) {
      unsigned resultNo = cast<OpResult>(user->getOperand(0)).getResultNumber();
      Value source = narrowed->getResult(resultNo);
      rewriter.setInsertionPoint(user);
      if (auto slice = dyn_cast<tensor::ExtractSliceOp>(user)) {
        SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
        for (int64_t d = 0; d < rank; ++d)
          offsets[d] = shifted(offsets[d], d);
        rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
            slice, slice.getType(), source, offsets, slice.getMixedSizes(),
            slice.getMixedStrides());
      } else {
        auto extract = cast<tensor::ExtractOp>(user);
        SmallVector<Value> indices;
        for (auto [d, idx] : llvm::enumerate(extract.getIndices()))
          indices.push_back(getValueOrCreateConstantIndexOp(
              rewriter, extract.getLoc(), shifted(idx, d)));
        rewriter.replaceOpWithNewOp<tensor::ExtractOp>(extract, source, indices);
      }
    }
    for (tensor::DimOp dim : dims) {
      int64_t d = *dim.getConstantIndex();
      unsigned resultNo = cast<OpResult>(dim.getSource()).getResultNumber();
      rewriter.setInsertionPoint(dim);
      if (!hulls[d].narrow) {
        rewriter.replaceOpWithNewOp<tensor::DimOp>(
            dim, narrowed->getResult(resultNo), d);
        continue;
      }
      // The full extent: from an operand that carries the dim.
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        if (std::optional<int64_t> od = BlockLocal::operandDim(op, i, d)) {
          rewriter.replaceOpWithNewOp<tensor::DimOp>(dim, op->getOperand(i),
                                                     *od);
          break;
        }
    }
  }

  /// The hull of what `reads` read along dim d: min/max of static ranges, or
  /// the range if every read has the same one; `narrow = false` otherwise.
  static Hull hullOf(ArrayRef<std::pair<Operation *, SmallVector<Range>>> reads,
                     int64_t d, PatternRewriter &rewriter) {
    Hull h;
    bool allStatic = true, allSame = true;
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
    const Range &first = reads.front().second[d];
    for (auto &[user, ranges] : reads) {
      const Range &r = ranges[d];
      if (!r.offset || !r.size)
        return h; // strided: the whole dim
      std::optional<int64_t> o = getConstantIntValue(r.offset);
      std::optional<int64_t> s = getConstantIntValue(r.size);
      if (o && s) {
        lo = std::min(lo, *o);
        hi = std::max(hi, *o + *s);
      } else {
        allStatic = false;
      }
      if (!isEqualConstantIntOrValue(r.offset, first.offset) ||
          !isEqualConstantIntOrValue(r.size, first.size))
        allSame = false;
    }
    if (allStatic) {
      h.narrow = true;
      h.offset = rewriter.getIndexAttr(lo);
      h.size = rewriter.getIndexAttr(hi - lo);
    } else if (allSame) {
      h.narrow = true;
      h.offset = first.offset;
      h.size = first.size;
    }
    return h;
  }
};

/// A slice that reads all of its source: the source itself (a cast where
/// only static-ness differs).
struct FoldWholeSlice : public OpRewritePattern<tensor::ExtractSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ExtractSliceOp slice,
                                PatternRewriter &rewriter) const override {
    RankedTensorType src = slice.getSourceType();
    if (slice.getType().getRank() != src.getRank())
      return failure();
    for (int64_t d = 0; d < src.getRank(); ++d) {
      std::optional<int64_t> off = getConstantIntValue(slice.getMixedOffsets()[d]);
      std::optional<int64_t> str = getConstantIntValue(slice.getMixedStrides()[d]);
      if (!off || *off != 0 || !str || *str != 1 ||
          !isExtentOf(slice.getMixedSizes()[d], slice.getSource(), d))
        return failure();
    }
    if (slice.getType() == src)
      rewriter.replaceOp(slice, slice.getSource());
    else
      rewriter.replaceOpWithNewOp<tensor::CastOp>(slice, slice.getType(),
                                                  slice.getSource());
    return success();
  }
};

/// extract_slice(tensor.splat %x) → tensor.splat %x of the slice's shape
/// (dynamic splats of constants, e.g. the key mask of the prefix positions).
struct SliceOfSplat : public OpRewritePattern<tensor::ExtractSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ExtractSliceOp slice,
                                PatternRewriter &rewriter) const override {
    auto splat = slice.getSource().getDefiningOp<tensor::SplatOp>();
    if (!splat)
      return failure();
    llvm::SmallBitVector dropped = slice.getDroppedDims();
    SmallVector<Value> dynamic;
    RankedTensorType type = slice.getType();
    int64_t r = 0;
    for (auto [d, size] : llvm::enumerate(slice.getMixedSizes())) {
      if (dropped.test(d))
        continue;
      if (type.isDynamicDim(r))
        dynamic.push_back(
            getValueOrCreateConstantIndexOp(rewriter, slice.getLoc(), size));
      ++r;
    }
    rewriter.replaceOpWithNewOp<tensor::SplatOp>(slice, splat.getInput(), type,
                                                 dynamic);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Dead KV-cache chains
//===----------------------------------------------------------------------===//

/// Erases every cache chain `kv_alloc → (kv_append | bt.block_decoder with
/// cache)* → kv_release` in `root` whose reads (kv_attend, kv_length, the
/// block decoder's tensor result) are all unused. A chain that flows into any
/// other op (a terminator, a call, a loop) is kept. Returns the number of
/// chains erased, by scope.
std::pair<int64_t, int64_t> eraseDeadCacheChains(Operation *root) {
  SmallVector<KVAllocOp> allocs;
  root->walk([&](KVAllocOp alloc) { allocs.push_back(alloc); });
  int64_t local = 0, global = 0;
  for (KVAllocOp alloc : allocs) {
    SmallVector<Operation *> chain{alloc};
    Value cache = alloc.getCache();
    bool dead = true, released = false;
    while (dead && !released) {
      Operation *consumer = nullptr;
      for (Operation *user : cache.getUsers()) {
        if (isa<KVAttendOp, KVLengthOp>(user)) {
          if (!user->use_empty())
            dead = false;
          chain.push_back(user);
          continue;
        }
        if (consumer) { // not linear: leave it to bt-verify-kv-lifetimes
          dead = false;
          break;
        }
        consumer = user;
      }
      if (!dead || !consumer) {
        dead = false;
        break;
      }
      chain.push_back(consumer);
      if (auto append = dyn_cast<KVAppendOp>(consumer)) {
        cache = append.getResult();
      } else if (auto decoder = dyn_cast<BlockDecoderOp>(consumer)) {
        if (decoder.getCache() != cache || !decoder.getResult().use_empty())
          dead = false;
        cache = decoder.getResultCache();
      } else if (isa<KVReleaseOp>(consumer)) {
        released = true;
      } else {
        dead = false;
      }
    }
    if (!dead || !released)
      continue;
    (llvm::cast<KVCacheType>(alloc.getType()).isLocal() ? local : global)++;
    // Readers first, then consumers from the end of the chain.
    llvm::SmallPtrSet<Operation *, 16> erased;
    for (Operation *op : chain)
      if (isa<KVAttendOp, KVLengthOp>(op)) {
        op->erase();
        erased.insert(op);
      }
    for (Operation *op : llvm::reverse(chain))
      if (!erased.contains(op))
        op->erase();
  }
  return {local, global};
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

} // namespace

FailureOr<DeadPrefillStats> bt::eliminateDeadPrefill(Operation *fn) {
  MLIRContext *ctx = fn->getContext();
  Counters counters;
  RewritePatternSet set(ctx);
  set.add<NarrowBlockLocalOp>(ctx, counters);
  set.add<FoldWholeSlice, SliceOfSplat>(ctx);
  tensor::populateMergeConsecutiveInsertExtractSlicePatterns(set);
  tensor::populateFoldTensorEmptyPatterns(set);
  tensor::ExtractSliceOp::getCanonicalizationPatterns(set, ctx);
  tensor::DimOp::getCanonicalizationPatterns(set, ctx);
  FrozenRewritePatternSet patterns(std::move(set));

  DeadPrefillStats stats;
  GreedyRewriteConfig config;
  config.enableRegionSimplification = GreedySimplifyRegionLevel::Disabled;
  config.maxIterations = GreedyRewriteConfig::kNoLimit;
  // Narrow and erase dead ops; erasing dead cache chains can make more of
  // the token decoder dead (the keys/values they appended).
  while (true) {
    if (failed(applyPatternsAndFoldGreedily(fn->getRegion(0), patterns,
                                            config)))
      return fn->emitError("bt-eliminate-dead-prefill did not converge");
    auto [local, global] = eraseDeadCacheChains(fn);
    stats.localCaches += local;
    stats.globalCaches += global;
    if (local + global == 0)
      break;
  }
  // Narrowing slices the same operand for several users (e.g. the residual
  // stream for both LayerNorms and the residual add).
  if (counters.rewritten > 0) {
    IRRewriter rewriter(ctx);
    DominanceInfo dominance(fn);
    eliminateCommonSubExpressions(rewriter, dominance, fn);
  }
  stats.rewritten = counters.rewritten;
  stats.removedBlocks = counters.removedBlocks;
  stats.dynamicRewrites = counters.dynamicRewrites;
  return stats;
}

namespace {

struct EliminateDeadPrefillPass
    : public bt::impl::BTEliminateDeadPrefillBase<EliminateDeadPrefillPass> {
  using BTEliminateDeadPrefillBase::BTEliminateDeadPrefillBase;

  void runOnOperation() override {
    SmallVector<Operation *> functions;
    getOperation()->walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<FunctionOpInterface>(op) && !op->getRegion(0).empty()) {
        functions.push_back(op);
        return WalkResult::skip();
      }
      return WalkResult::advance();
    });
    for (Operation *fn : functions) {
      int64_t opsBefore = countOps(fn);
      FailureOr<DeadPrefillStats> stats = eliminateDeadPrefill(fn);
      if (failed(stats))
        return signalPassFailure();

      // Token-decoder blocks computed after the pass (static shapes).
      int64_t remaining = 0;
      fn->walk([&](Operation *op) {
        if (isTokenDecoderRoot(op))
          if (std::optional<int64_t> n = blockCount(op))
            remaining += *n;
      });
      int64_t removedOps = std::max<int64_t>(0, opsBefore - countOps(fn));
      numRewritten += stats->rewritten;
      numRemovedBlocks += stats->removedBlocks;
      numDynamicRewrites += stats->dynamicRewrites;
      numRemainingBlocks += remaining;
      numLocalCachesRemoved += stats->localCaches;
      numGlobalCachesRemoved += stats->globalCaches;
      numOpsRemoved += removedOps;
      if (report)
        fn->emitRemark()
            << "bt-eliminate-dead-prefill: " << stats->rewritten
            << " ops rewritten; token-decoder blocks: "
            << stats->removedBlocks << " removed, " << remaining
            << " remaining, " << stats->dynamicRewrites
            << " dynamic rewrites; KV caches removed: " << stats->localCaches
            << " local, " << stats->globalCaches << " global; " << removedOps
            << " ops removed";
    }
  }

  static int64_t countOps(Operation *root) {
    int64_t n = 0;
    root->walk([&](Operation *) { ++n; });
    return n;
  }
};

} // namespace
