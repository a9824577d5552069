//===- GPUEmbeddingGrad.cpp - bt.embedding_grad as one GPU kernel ---------===//
//
// The CUDA target's lowering of bt.embedding_grad (GPUKernels.h). The
// target-neutral lowering (BackwardToLinalg.cpp) is an scf.for over the
// ids on tensors; on the GPU that loop runs on the host, reads every id
// from device memory (a synchronous copy) and launches a kernel per row.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelBuilder.h"
#include "GPUKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using bt::codegen::readOnlyMemref;

namespace {

constexpr int64_t kThreads = 256;

/// `t` [d0, ..., dn] collapsed to [d0·…·dn] (`keepLast`: to
/// [d0·…·dn-1, dn]); a 0-d `t` becomes [1] / a 1-d one [1, dn].
Value collapse(OpBuilder &b, Location loc, Value t, bool keepLast) {
  auto type = cast<RankedTensorType>(t.getType());
  int64_t rank = type.getRank();
  int64_t lead = keepLast ? rank - 1 : rank;
  if (lead == 0) {
    SmallVector<int64_t> shape{1};
    SmallVector<ReassociationIndices> groups;
    if (keepLast) {
      shape.push_back(type.getDimSize(0));
      groups.push_back({0, 1});
    }
    return b.create<tensor::ExpandShapeOp>(
        loc, RankedTensorType::get(shape, type.getElementType()), t, groups);
  }
  if (lead == 1)
    return t;
  ReassociationIndices first;
  int64_t size = 1;
  for (int64_t d = 0; d < lead; ++d) {
    first.push_back(d);
    size = ShapedType::isDynamic(type.getDimSize(d)) || size == ShapedType::kDynamic
               ? ShapedType::kDynamic
               : size * type.getDimSize(d);
  }
  SmallVector<ReassociationIndices> groups{first};
  SmallVector<int64_t> shape{size};
  if (keepLast) {
    groups.push_back({lead});
    shape.push_back(type.getDimSize(lead));
  }
  return b.create<tensor::CollapseShapeOp>(
      loc, RankedTensorType::get(shape, type.getElementType()), t, groups);
}

} // namespace

Value bt::emitGPUEmbeddingGrad(OpBuilder &b, Location loc, Value ids, Value dy,
                               RankedTensorType tableType) {
  Value ids1 = readOnlyMemref(b, loc, collapse(b, loc, ids, /*keepLast=*/false));
  Value dy2 = readOnlyMemref(b, loc, collapse(b, loc, dy, /*keepLast=*/true));
  auto idx = [&](OpBuilder &ob, int64_t v) -> Value {
    return ob.create<arith::ConstantIndexOp>(loc, v);
  };
  Value rows = b.create<memref::DimOp>(loc, ids1, 0);
  Value cols = b.create<memref::DimOp>(loc, dy2, 1);
  int64_t vocab = tableType.getDimSize(0);
  SmallVector<Value> dyn;
  if (tableType.isDynamicDim(1))
    dyn.push_back(cols);
  auto outType =
      MemRefType::get(tableType.getShape(), tableType.getElementType());
  Value out = b.create<memref::AllocOp>(loc, outType, dyn);

  // One thread per column e of the table: zero the column, then add
  // dy[i, e] to table[ids[i], e] for i = 0, 1, ... (the target-neutral
  // lowering's order, so the same sums bit for bit); threads own disjoint
  // columns, neighbouring threads touch neighbouring elements.
  Value bs = idx(b, kThreads);
  Value threads = b.create<arith::MinSIOp>(loc, cols, bs);
  Value blocks = b.create<arith::CeilDivSIOp>(loc, cols, bs);
  Value any = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, cols,
                                      idx(b, 0));
  auto guard = b.create<scf::IfOp>(loc, any, /*withElseRegion=*/false);
  OpBuilder gb = guard.getThenBodyBuilder();
  Value one = idx(gb, 1);
  auto launch =
      gb.create<gpu::LaunchOp>(loc, blocks, one, one, threads, one, one);
  OpBuilder kb = OpBuilder::atBlockEnd(&launch.getBody().front());
  Value e = kb.create<arith::AddIOp>(
      loc,
      kb.create<arith::MulIOp>(loc, launch.getBlockIds().x, idx(kb, kThreads)),
      launch.getThreadIds().x);
  Value inRange =
      kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, e, cols);
  auto col = kb.create<scf::IfOp>(loc, inRange, /*withElseRegion=*/false);
  OpBuilder cb = col.getThenBodyBuilder();
  Type elt = tableType.getElementType();
  Value zero = cb.create<arith::ConstantOp>(loc, cb.getZeroAttr(elt));
  Value v = idx(cb, vocab);
  cb.create<scf::ForOp>(loc, idx(cb, 0), v, idx(cb, 1), ValueRange{},
                        [&](OpBuilder &lb, Location l, Value r, ValueRange) {
                          lb.create<memref::StoreOp>(l, zero, out,
                                                     ValueRange{r, e});
                          lb.create<scf::YieldOp>(l);
                        });
  cb.create<scf::ForOp>(
      loc, idx(cb, 0), rows, idx(cb, 1), ValueRange{},
      [&](OpBuilder &lb, Location l, Value i, ValueRange) {
        Value id = lb.create<memref::LoadOp>(l, ids1, ValueRange{i});
        Value row = lb.create<arith::IndexCastOp>(l, lb.getIndexType(), id);
        Value ok = lb.create<arith::AndIOp>(
            l,
            lb.create<arith::CmpIOp>(l, arith::CmpIPredicate::sge, row,
                                     idx(lb, 0)),
            lb.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, row, v));
        // bt-linalg-to-gpu makes it a printf + trap in the kernel.
        lb.create<cf::AssertOp>(
            l, ok, "bt.embedding_grad: token id out of range [0, V)");
        // An id out of range traps above; the clamp keeps the address
        // inside the table on the way there.
        Value safe = lb.create<arith::SelectOp>(l, ok, row, idx(lb, 0));
        Value acc = lb.create<memref::LoadOp>(l, out, ValueRange{safe, e});
        Value g = lb.create<memref::LoadOp>(l, dy2, ValueRange{i, e});
        lb.create<memref::StoreOp>(l, lb.create<arith::AddFOp>(l, acc, g), out,
                                   ValueRange{safe, e});
        lb.create<scf::YieldOp>(l);
      });
  kb.create<gpu::TerminatorOp>(loc);
  return b.create<bufferization::ToTensorOp>(loc, tableType, out,
                                             /*restrict=*/true,
                                             /*writable=*/true);
}
