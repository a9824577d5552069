//===- GPUKernelBuilder.h - helpers of the hand-built GPU kernels -*- C++ -*-===//
//
// Shared by the kernels the CUDA target emits itself at tensor level
// (GPUAttention.cpp, GPULayerNorm.cpp, GPUEmbeddingGrad.cpp): a small builder
// of arithmetic at one insertion point and the read-only view of an operand.
// Internal to lib/Codegen/CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_CODEGEN_GPUKERNELBUILDER_H
#define BT_LIB_CODEGEN_GPUKERNELBUILDER_H

#include "bt/Codegen/BF16.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

namespace bt::codegen {

using mlir::Location;
using mlir::OpBuilder;
using mlir::Value;
using mlir::ValueRange;

/// Threads per warp.
constexpr int64_t kWarpSize = 32;

/// Arithmetic, loads and warp collectives at one insertion point, for the
/// kernels the CUDA target builds itself (gpu / scf / arith / math / memref
/// ops): index and f32 constants, unsigned index arithmetic, f32 math, the
/// f32 loads and stores of GPUAttention.cpp and warp shuffles.
struct KB {
  OpBuilder &b;
  Location loc;

  Value idx(int64_t v) { return b.create<mlir::arith::ConstantIndexOp>(loc, v); }
  Value f32(double v) {
    return b.create<mlir::arith::ConstantOp>(loc, b.getF32FloatAttr(v));
  }
  Value i32(int32_t v) {
    return b.create<mlir::arith::ConstantOp>(loc, b.getI32IntegerAttr(v));
  }
  Value addi(Value x, Value y) { return b.create<mlir::arith::AddIOp>(loc, x, y); }
  Value subi(Value x, Value y) { return b.create<mlir::arith::SubIOp>(loc, x, y); }
  Value muli(Value x, Value y) { return b.create<mlir::arith::MulIOp>(loc, x, y); }
  Value divu(Value x, Value y) { return b.create<mlir::arith::DivUIOp>(loc, x, y); }
  Value remu(Value x, Value y) { return b.create<mlir::arith::RemUIOp>(loc, x, y); }
  Value minu(Value x, Value y) { return b.create<mlir::arith::MinUIOp>(loc, x, y); }
  Value maxu(Value x, Value y) { return b.create<mlir::arith::MaxUIOp>(loc, x, y); }
  Value ceilDiv(Value x, Value y) {
    return b.create<mlir::arith::CeilDivUIOp>(loc, x, y);
  }
  Value ult(Value x, Value y) {
    return b.create<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::ult, x, y);
  }
  Value ule(Value x, Value y) {
    return b.create<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::ule, x, y);
  }
  Value land(Value x, Value y) { return b.create<mlir::arith::AndIOp>(loc, x, y); }
  Value select(Value c, Value x, Value y) {
    return b.create<mlir::arith::SelectOp>(loc, c, x, y);
  }
  Value addf(Value x, Value y) { return b.create<mlir::arith::AddFOp>(loc, x, y); }
  Value subf(Value x, Value y) { return b.create<mlir::arith::SubFOp>(loc, x, y); }
  Value mulf(Value x, Value y) { return b.create<mlir::arith::MulFOp>(loc, x, y); }
  Value divf(Value x, Value y) { return b.create<mlir::arith::DivFOp>(loc, x, y); }
  Value maxf(Value x, Value y) { return b.create<mlir::arith::MaximumFOp>(loc, x, y); }
  Value exp(Value x) { return b.create<mlir::math::ExpOp>(loc, x); }
  Value oeq(Value x, Value y) {
    return b.create<mlir::arith::CmpFOp>(loc, mlir::arith::CmpFPredicate::OEQ, x, y);
  }
  /// Loads an element as f32 (bf16 extended exactly in integer ops,
  /// bt/Codegen/BF16.h: the same code on NVPTX and the emulator).
  Value loadF(Value mem, ValueRange indices) {
    Value v = b.create<mlir::memref::LoadOp>(loc, mem, indices);
    if (v.getType().isBF16())
      return bt::codegen::extendBF16(b, loc, v);
    if (!v.getType().isF32())
      v = b.create<mlir::arith::ExtFOp>(loc, b.getF32Type(), v);
    return v;
  }
  /// Stores an f32 value, rounded to the memref's element type.
  void storeF(Value v, Value mem, ValueRange indices) {
    mlir::Type elt =
        mlir::cast<mlir::MemRefType>(mem.getType()).getElementType();
    if (elt != v.getType())
      v = b.create<mlir::arith::TruncFOp>(loc, elt, v);
    b.create<mlir::memref::StoreOp>(loc, v, mem, indices);
  }
  /// Key-mask element as f32 (0 or 1).
  Value maskF(Value mem, ValueRange indices) {
    Value m = b.create<mlir::memref::LoadOp>(loc, mem, indices);
    if (m.getType().isInteger(1))
      return b.create<mlir::arith::UIToFPOp>(loc, b.getF32Type(), m);
    return b.create<mlir::arith::SIToFPOp>(loc, b.getF32Type(), m);
  }
  /// Butterfly reduction over the 32 lanes of a warp (every lane gets the
  /// result).
  Value warpReduce(Value v, bool max) {
    for (int32_t off = kWarpSize / 2; off >= 1; off /= 2) {
      Value o = b.create<mlir::gpu::ShuffleOp>(loc, v, i32(off), i32(kWarpSize),
                                         mlir::gpu::ShuffleMode::XOR)
                    .getShuffleResult();
      v = max ? maxf(v, o) : addf(v, o);
    }
    return v;
  }
  Value broadcastLane(Value v, Value lane) {
    Value l32 = b.create<mlir::arith::IndexCastOp>(loc, b.getI32Type(), lane);
    return b.create<mlir::gpu::ShuffleOp>(loc, v, l32, i32(kWarpSize),
                                    mlir::gpu::ShuffleMode::IDX)
        .getShuffleResult();
  }
  void barrier() { b.create<mlir::gpu::BarrierOp>(loc); }
};

/// `bufferization.to_memref ... read_only` of the tensor `t` with a fully
/// dynamic strided layout (any buffer of `t` casts to it).
inline Value readOnlyMemref(OpBuilder &b, Location loc, Value t) {
  auto tt = mlir::cast<mlir::RankedTensorType>(t.getType());
  llvm::SmallVector<int64_t> strides(tt.getRank(), mlir::ShapedType::kDynamic);
  auto layout = mlir::StridedLayoutAttr::get(
      b.getContext(), mlir::ShapedType::kDynamic, strides);
  auto op = b.create<mlir::bufferization::ToMemrefOp>(
      loc, mlir::MemRefType::get(tt.getShape(), tt.getElementType(), layout),
      t);
  op.setReadOnly(true);
  return op;
}

} // namespace bt::codegen

#endif // BT_LIB_CODEGEN_GPUKERNELBUILDER_H
