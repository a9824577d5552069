//===- ReshapesToViews.cpp - memref.reshape with stored shapes → views -----===//
//
// bt-reshapes-to-views: bt-lower-to-linalg expresses expansions with two
// dynamic dims in one group as `tensor.reshape` with a `tensor.from_elements`
// shape (MLIR 19 cannot bufferize such an expand_shape). Bufferized, the
// shape is a small buffer written by `memref.store`s that `memref.reshape`
// reads at run time. On the GPU every buffer lives in device memory, where
// the host cannot store; this pass reads the sizes from the stores and
// builds the view with `memref.reinterpret_cast` instead.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/Matchers.h"

namespace bt {
#define GEN_PASS_DEF_BTRESHAPESTOVIEWS
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

/// The buffer whose stores define a shape buffer: the buffer itself, or the
/// source of the `memref.copy` that fills it (bufferization copies a shape
/// tensor that is used more than once).
Value shapeSource(Value shape) {
  for (Operation *user : shape.getUsers())
    if (auto copy = dyn_cast<memref::CopyOp>(user))
      if (copy.getTarget() == shape)
        return copy.getSource();
  return shape;
}

/// The sizes a shape buffer holds: each element must be written by exactly
/// one `memref.store` with a constant index (the bufferized
/// tensor.from_elements), which dominates `reshape`.
FailureOr<SmallVector<Value>> storedSizes(memref::ReshapeOp reshape,
                                          DominanceInfo &dom) {
  Value shape = shapeSource(reshape.getShape());
  Operation *alloc = shape.getDefiningOp();
  if (!alloc || !isa<memref::AllocOp, memref::AllocaOp>(alloc))
    return failure();
  auto type = cast<MemRefType>(shape.getType());
  if (!type.hasStaticShape() || type.getRank() != 1)
    return failure();
  SmallVector<Value> sizes(type.getDimSize(0));
  for (Operation *user : shape.getUsers()) {
    auto store = dyn_cast<memref::StoreOp>(user);
    if (!store)
      continue;
    APInt idx;
    if (store.getMemRef() != shape ||
        !matchPattern(store.getIndices()[0], m_ConstantInt(&idx)))
      return failure();
    uint64_t i = idx.getZExtValue();
    if (i >= sizes.size() || sizes[i] ||
        !dom.properlyDominates(store.getOperation(), reshape))
      return failure();
    sizes[i] = store.getValue();
  }
  if (llvm::any_of(sizes, [](Value v) { return !v; }))
    return failure();
  return sizes;
}

/// Erases shape buffers that only stores and copies touch any more.
void eraseDeadShapeBuffers(Operation *root) {
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<Operation *> allocs;
    root->walk([&](Operation *op) {
      if (isa<memref::AllocOp, memref::AllocaOp>(op))
        allocs.push_back(op);
    });
    for (Operation *alloc : allocs) {
      auto type = cast<MemRefType>(alloc->getResult(0).getType());
      if (type.getRank() != 1 || !type.getElementType().isIntOrIndex())
        continue;
      Value buf = alloc->getResult(0);
      bool dead = llvm::all_of(buf.getUsers(), [&](Operation *u) {
        if (isa<memref::StoreOp>(u))
          return true;
        auto copy = dyn_cast<memref::CopyOp>(u);
        return copy && copy.getTarget() == buf;
      });
      if (!dead)
        continue;
      for (Operation *u : llvm::make_early_inc_range(buf.getUsers()))
        u->erase();
      alloc->erase();
      changed = true;
    }
  }
}

struct ReshapesToViewsPass
    : public bt::impl::BTReshapesToViewsBase<ReshapesToViewsPass> {
  void runOnOperation() override {
    SmallVector<memref::ReshapeOp> reshapes;
    getOperation()->walk([&](memref::ReshapeOp r) { reshapes.push_back(r); });
    if (reshapes.empty())
      return;
    DominanceInfo dom(getOperation());
    for (memref::ReshapeOp reshape : reshapes) {
      FailureOr<SmallVector<Value>> sizes = storedSizes(reshape, dom);
      if (failed(sizes)) {
        reshape.emitOpError("has a shape operand that is not a buffer whose "
                            "elements are each stored once with a constant "
                            "index before the reshape; bt-reshapes-to-views "
                            "cannot turn it into a view");
        return signalPassFailure();
      }
      OpBuilder b(reshape);
      Location loc = reshape.getLoc();
      auto resultType = cast<MemRefType>(reshape.getResult().getType());
      // Sizes as index values, static ones as attributes.
      SmallVector<OpFoldResult> mixedSizes;
      for (auto [i, v] : llvm::enumerate(*sizes)) {
        Value idx = v;
        if (!idx.getType().isIndex())
          idx = b.create<arith::IndexCastOp>(loc, b.getIndexType(), v);
        if (!resultType.isDynamicDim(i))
          mixedSizes.push_back(b.getIndexAttr(resultType.getDimSize(i)));
        else
          mixedSizes.push_back(idx);
      }
      // Row-major strides of the (identity-layout) result.
      int64_t rank = resultType.getRank();
      SmallVector<OpFoldResult> strides(rank);
      OpFoldResult stride = b.getIndexAttr(1);
      for (int64_t i = rank - 1; i >= 0; --i) {
        strides[i] = stride;
        if (i == 0)
          break;
        std::optional<int64_t> s = getConstantIntValue(stride);
        std::optional<int64_t> d = getConstantIntValue(mixedSizes[i]);
        if (s && d) {
          stride = b.getIndexAttr(*s * *d);
        } else {
          Value sv = getValueOrCreateConstantIndexOp(b, loc, stride);
          Value dv = getValueOrCreateConstantIndexOp(b, loc, mixedSizes[i]);
          stride = b.create<arith::MulIOp>(loc, sv, dv).getResult();
        }
      }
      // memref.reshape requires an identity-layout source: offset 0.
      auto view = b.create<memref::ReinterpretCastOp>(
          loc, resultType, reshape.getSource(), b.getIndexAttr(0), mixedSizes,
          strides);
      reshape.replaceAllUsesWith(view.getResult());
      reshape.erase();
    }
    eraseDeadShapeBuffers(getOperation());
  }
};

} // namespace
