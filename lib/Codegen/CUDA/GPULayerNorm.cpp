//===- GPULayerNorm.cpp - bt.layer_norm as one GPU kernel -----------------===//
//
// The CUDA target's lowering of bt.layer_norm (GPUKernels.h). The
// target-neutral lowering (DenseToLinalg.cpp, LayerEmitter::layerNorm) is
// four linalg ops (row sum, row sum of squared deviations, the per-row
// rstd / shift, the normalization) that bt-linalg-to-gpu turns into five or
// six kernels (with the fills of the reductions' accumulators); at decode
// sizes each is a launch of a few microseconds that moves a few kilobytes
// (the 2026-11-27 H100 profile: 6 of the ~20 kernels of a token-decoder
// layer). Here it is one kernel.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelBuilder.h"
#include "GPUKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using bt::codegen::KB;
using bt::codegen::readOnlyMemref;

namespace {

/// Threads per block (one block per row); a power of two for the tree.
constexpr int64_t kThreads = 256;

/// Σ over the block of every thread's `v` (the same value in every thread):
/// a fixed shared-memory tree over `sh` [kThreads] (thread t adds t + s for
/// s = 128, 64, ..., 1), so the sum does not depend on scheduling.
Value blockSum(KB &k, Value sh, Value tid, Value v) {
  k.b.create<memref::StoreOp>(k.loc, v, sh, ValueRange{tid});
  k.barrier();
  for (int64_t s = kThreads / 2; s >= 1; s /= 2) {
    auto ifOp = k.b.create<scf::IfOp>(k.loc, k.ult(tid, k.idx(s)), false);
    OpBuilder tb = ifOp.getThenBodyBuilder();
    Value other = tb.create<arith::AddIOp>(
        k.loc, tid, tb.create<arith::ConstantIndexOp>(k.loc, s));
    Value a = tb.create<memref::LoadOp>(k.loc, sh, ValueRange{tid});
    Value c = tb.create<memref::LoadOp>(k.loc, sh, ValueRange{other});
    tb.create<memref::StoreOp>(k.loc, tb.create<arith::AddFOp>(k.loc, a, c),
                               sh, ValueRange{tid});
    k.barrier();
  }
  Value total = k.b.create<memref::LoadOp>(k.loc, sh, ValueRange{k.idx(0)});
  // Everyone has read the total before `sh` is written again.
  k.barrier();
  return total;
}

/// Σ_i f(i) over the thread's columns i = tid, tid + kThreads, ... < n.
Value threadSum(KB &k, Value tid, Value n,
                function_ref<Value(KB &, Value)> f) {
  auto loop = k.b.create<scf::ForOp>(
      k.loc, tid, n, k.idx(kThreads), ValueRange{k.f32(0.0)},
      [&](OpBuilder &lb, Location l, Value i, ValueRange acc) {
        KB lk{lb, l};
        lb.create<scf::YieldOp>(l, lk.addf(acc[0], f(lk, i)));
      });
  return loop.getResult(0);
}

} // namespace

bool bt::gpuLayerNormSupports(RankedTensorType x) {
  return x.getElementType().isF32() && x.getRank() >= 1;
}

namespace {

/// The weight, bias and eps of one LayerNorm of a shared input.
struct Affine {
  Value weight, bias;
  double eps;
};

/// The LayerNorms `norms` of `x` [..., C] as one kernel (a block per row):
/// the statistics once, then every output per column from one load of x.
SmallVector<Value> emitLayerNorms(OpBuilder &b, Location loc, Value x,
                                  ArrayRef<Affine> norms) {
  auto xt = cast<RankedTensorType>(x.getType());
  const int64_t rank = xt.getRank();
  KB h{b, loc};
  // The outputs have x's shape; the kernel sees x and them as [R, C].
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < rank; ++d)
    if (xt.isDynamicDim(d))
      dyn.push_back(b.createOrFold<tensor::DimOp>(loc, x, d));
  auto outType = MemRefType::get(xt.getShape(), xt.getElementType());
  SmallVector<Value> outs, wms, bms;
  for (size_t j = 0; j < norms.size(); ++j)
    outs.push_back(b.create<memref::AllocOp>(loc, outType, dyn));
  Value xm = readOnlyMemref(b, loc, x);
  for (const Affine &n : norms) {
    wms.push_back(readOnlyMemref(b, loc, n.weight));
    bms.push_back(readOnlyMemref(b, loc, n.bias));
  }
  Value rows = h.idx(1);
  for (int64_t d = 0; d + 1 < rank; ++d)
    rows = b.createOrFold<arith::MulIOp>(
        loc, rows, b.createOrFold<tensor::DimOp>(loc, x, d));
  Value any = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ugt, rows,
                                      h.idx(0));
  auto guard = b.create<scf::IfOp>(loc, any, /*withElseRegion=*/false);
  OpBuilder gb = guard.getThenBodyBuilder();
  Value one = gb.create<arith::ConstantIndexOp>(loc, 1);
  Value smem = gb.create<arith::ConstantOp>(
      loc, gb.getI32IntegerAttr(static_cast<int32_t>(4 * kThreads)));
  auto launch = gb.create<gpu::LaunchOp>(
      loc, rows, one, one,
      gb.create<arith::ConstantIndexOp>(loc, kThreads), one, one, smem);
  OpBuilder kb = OpBuilder::atBlockEnd(&launch.getBody().front());
  KB k{kb, loc};
  MLIRContext *ctx = b.getContext();
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  Value raw = kb.create<gpu::DynamicSharedMemoryOp>(
      loc, MemRefType::get({ShapedType::kDynamic}, kb.getI8Type(),
                           MemRefLayoutAttrInterface{}, space));
  Value sh = kb.create<memref::ViewOp>(
      loc,
      MemRefType::get({kThreads}, kb.getF32Type(), MemRefLayoutAttrInterface{},
                      space),
      raw, k.idx(0), ValueRange{});
  Value tid = launch.getThreadIds().x;
  // Row r of the flattened [R, C] → x's indices (r delinearized over the
  // leading dims, innermost fastest).
  Value r = launch.getBlockIds().x;
  SmallVector<Value> lead(rank - 1);
  Value rest = r;
  for (int64_t d = rank - 2; d >= 0; --d) {
    if (d == 0) {
      lead[d] = rest;
      break;
    }
    Value size = kb.createOrFold<memref::DimOp>(loc, xm, d);
    lead[d] = kb.create<arith::RemUIOp>(loc, rest, size);
    rest = kb.create<arith::DivUIOp>(loc, rest, size);
  }
  auto at = [&](Value i) {
    SmallVector<Value> ix(lead.begin(), lead.end());
    ix.push_back(i);
    return ix;
  };
  Value n = kb.createOrFold<memref::DimOp>(loc, xm, rank - 1);
  Value c = kb.create<arith::UIToFPOp>(
      loc, kb.getF32Type(),
      kb.create<arith::IndexCastUIOp>(loc, kb.getI64Type(), n));
  // LayerEmitter::layerNorm's arithmetic: mean = Σx / C, var = Σ(x − mean)²
  // / C, rstd = 1 / sqrt(var + eps), shift = −rstd·mean,
  // y = (x·rstd + shift)·w + b; the sums in a different order (per-thread
  // strided partial sums, then the tree). mean and var do not depend on
  // the weights, so LayerNorms of one input share them.
  Value sum = blockSum(k, sh, tid, threadSum(k, tid, n, [&](KB &lk, Value i) {
                         return lk.b.create<memref::LoadOp>(lk.loc, xm, at(i))
                             .getResult();
                       }));
  Value mean = k.divf(sum, c);
  Value m2 = blockSum(k, sh, tid, threadSum(k, tid, n, [&](KB &lk, Value i) {
                        Value d = lk.subf(
                            lk.b.create<memref::LoadOp>(lk.loc, xm, at(i)),
                            mean);
                        return lk.mulf(d, d);
                      }));
  Value var = k.divf(m2, c);
  SmallVector<Value> rstds, shifts;
  for (const Affine &a : norms) {
    Value rstd = k.divf(
        k.f32(1.0), kb.create<math::SqrtOp>(loc, k.addf(var, k.f32(a.eps))));
    rstds.push_back(rstd);
    shifts.push_back(kb.create<arith::NegFOp>(loc, k.mulf(rstd, mean)));
  }
  kb.create<scf::ForOp>(
      loc, tid, n, k.idx(kThreads), ValueRange{},
      [&](OpBuilder &lb, Location l, Value i, ValueRange) {
        KB lk{lb, l};
        Value xv = lb.create<memref::LoadOp>(l, xm, at(i));
        for (size_t j = 0; j < norms.size(); ++j) {
          Value v = lk.mulf(xv, rstds[j]);
          v = lk.addf(v, shifts[j]);
          v = lk.mulf(v, lb.create<memref::LoadOp>(l, wms[j], ValueRange{i}));
          v = lk.addf(v, lb.create<memref::LoadOp>(l, bms[j], ValueRange{i}));
          lb.create<memref::StoreOp>(l, v, outs[j], at(i));
        }
        lb.create<scf::YieldOp>(l);
      });
  kb.create<gpu::TerminatorOp>(loc);
  SmallVector<Value> results;
  for (Value out : outs)
    results.push_back(b.create<bufferization::ToTensorOp>(
        loc, xt, out, /*restrict=*/true, /*writable=*/true));
  return results;
}

} // namespace

Value bt::emitGPULayerNorm(OpBuilder &b, Location loc, Value x, Value weight,
                           Value bias, double eps) {
  return emitLayerNorms(b, loc, x, {Affine{weight, bias, eps}}).front();
}

std::pair<Value, Value>
bt::emitGPULayerNormPair(OpBuilder &b, Location loc, Value x, Value weight0,
                         Value bias0, double eps0, Value weight1, Value bias1,
                         double eps1) {
  SmallVector<Value> ys = emitLayerNorms(
      b, loc, x, {Affine{weight0, bias0, eps0}, Affine{weight1, bias1, eps1}});
  return {ys[0], ys[1]};
}
