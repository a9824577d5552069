//===- GPUAttention.cpp - dedicated GPU attention kernels -----------------===//
//
// See GPUAttention.h. Kernels are `gpu.launch` ops with workgroup
// (shared-memory) attributions; gpu-kernel-outlining turns them into
// gpu.func kernels of the CUDA pipeline's PTX module.
//
//===----------------------------------------------------------------------===//

#include "GPUAttention.h"
#include "GPUKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using bt::codegen::KB;
using bt::codegen::readOnlyMemref;

namespace {

/// finfo(float32).min, the HF mask value.
constexpr double kF32Min = -3.4028234663852886e38;
constexpr int64_t kWarp = bt::codegen::kWarpSize;
/// Query rows (warps) per block of the prefill kernel.
constexpr int64_t kRowsPerBlock = 4;
/// Keys per split of the decode (split-K) kernel.
constexpr int64_t kKeysPerSplit = 128;
/// Largest static query length handled as decode (split-K).
constexpr int64_t kMaxDecodeRows = 4;
/// Blocks (batch rows × heads) from which a decode attention runs without
/// split-K whatever its key count. A decode block is S ≤ 4 warps, and an
/// H100 SM holds at most 32 resident blocks: 4224 = 132 SMs × 32 blocks is
/// a full wave, so splitting the keys of a grid of two waves adds waves, not
/// parallelism, while its workspace (per split, row and head hd + 2 f32,
/// written and read again by the combine kernel) adds memory traffic: at
/// the planned max batch of block_main_b4_85 (8454 rows × 16 heads, up to
/// 544 block entries, 5 splits) about 0.054 MB per generated token, 3.9 % of
/// the minimum (docs/codegen-cuda.md, "Attention kernels"). Batch 256 (4096
/// blocks at 16 heads), timed split on an H100 (docs/gpu-runs/), stays
/// split.
constexpr int64_t kMinBlocksWithoutSplit = 8192;


/// A warp's online-softmax state for one query row: running max, running
/// sum, and the lane's slots of the output accumulator (dims lane + 32·j).
struct RowState {
  Value m, l;
  SmallVector<Value> acc;

  SmallVector<Value> flat() const {
    SmallVector<Value> v{m, l};
    v.append(acc.begin(), acc.end());
    return v;
  }
  static RowState from(ValueRange v) {
    RowState s;
    s.m = v[0];
    s.l = v[1];
    s.acc.assign(v.begin() + 2, v.end());
    return s;
  }
};

/// The lane's head-dim slot j: d = lane + 32·j, clamped into [0, hd) so that
/// loads stay in bounds (`inRange` says whether the slot is real).
std::pair<Value, Value> laneDim(KB &k, Value lane, int64_t j, int64_t hd) {
  Value d = k.addi(lane, k.idx(kWarp * j));
  Value inRange = k.ult(d, k.idx(hd));
  return {k.select(inRange, d, k.idx(0)), inRange};
}

/// One tile of up to 32 keys for a warp's query row: the lane's key has the
/// (masked, scaled) score `x` and takes part iff `keyOk`; `vAt(kb, jj, d)`
/// loads value component d of the tile's key jj. Online-softmax update
/// (FlashAttention): m' = max(m, max_x), acc' = acc·e^(m−m') + Σ p·v,
/// l' = l·e^(m−m') + Σ p with p = e^(x−m').
RowState attendTile(KB &k, const RowState &st, Value x, Value keyOk,
                    Value lane, int64_t hd,
                    function_ref<Value(KB &, Value, Value)> vAt) {
  Value negInf = k.f32(-std::numeric_limits<double>::infinity());
  Value xm = k.select(keyOk, x, negInf);
  Value mt = k.warpReduce(xm, /*max=*/true);
  Value mNew = k.maxf(st.m, mt);
  Value none = k.oeq(mNew, negInf);
  Value alpha = k.select(none, k.f32(1.0), k.exp(k.subf(st.m, mNew)));
  Value p = k.select(keyOk, k.exp(k.subf(x, mNew)), k.f32(0.0));
  Value psum = k.warpReduce(p, /*max=*/false);
  RowState out;
  out.m = mNew;
  out.l = k.addf(k.mulf(st.l, alpha), psum);
  SmallVector<Value> scaled;
  for (Value a : st.acc)
    scaled.push_back(k.mulf(a, alpha));
  int64_t slots = static_cast<int64_t>(st.acc.size());
  auto loop = k.b.create<scf::ForOp>(
      k.loc, k.idx(0), k.idx(kWarp), k.idx(1), scaled,
      [&](OpBuilder &lb, Location l, Value jj, ValueRange accs) {
        KB kk{lb, l};
        Value pj = kk.broadcastLane(p, jj);
        SmallVector<Value> next;
        for (int64_t j = 0; j < slots; ++j) {
          Value d = laneDim(kk, lane, j, hd).first;
          next.push_back(kk.addf(accs[j], kk.mulf(pj, vAt(kk, jj, d))));
        }
        lb.create<scf::YieldOp>(l, next);
      });
  out.acc.assign(loop.getResults().begin(), loop.getResults().end());
  return out;
}

/// Σ_d qs[qRow, d] · ks[kRow, d] over d < hd: the score of a query row and
/// a key row staged in shared memory (`qs`, `ks`: [rows, ≥ hd] f32).
Value sharedRowDot(KB &k, Value qs, Value qRow, Value ks, Value kRow,
                   int64_t hd) {
  auto dot = k.b.create<scf::ForOp>(
      k.loc, k.idx(0), k.idx(hd), k.idx(1), ValueRange{k.f32(0.0)},
      [&](OpBuilder &db, Location dl, Value d, ValueRange acc) {
        KB dk{db, dl};
        Value qd = db.create<memref::LoadOp>(dl, qs, ValueRange{qRow, d});
        Value kd = db.create<memref::LoadOp>(dl, ks, ValueRange{kRow, d});
        db.create<scf::YieldOp>(dl, dk.addf(acc[0], dk.mulf(qd, kd)));
      });
  return dot.getResult(0);
}

/// HF's result for a query row without any valid causal key: the mean of v
/// over the keys whose score is exactly MIN, i.e. keys t ≤ pos with mask 0
/// and keys t > pos with mask 1, among `numKeys`. Returns the lane's slots.
SmallVector<Value> noValidKeyMean(KB &k, Value numKeys, Value pos,
                                  function_ref<Value(KB &, Value)> maskAt,
                                  function_ref<Value(KB &, Value, Value)> vAt,
                                  Value lane, int64_t hd, int64_t slots) {
  SmallVector<Value> init(slots, k.f32(0.0));
  init.push_back(k.f32(0.0)); // count
  auto loop = k.b.create<scf::ForOp>(
      k.loc, k.idx(0), numKeys, k.idx(1), init,
      [&](OpBuilder &lb, Location l, Value t, ValueRange it) {
        KB kk{lb, l};
        Value m = maskAt(kk, t);
        Value causal = kk.ule(t, pos);
        // causal: weight 1 − m; non-causal: weight m.
        Value w = kk.select(causal, kk.subf(kk.f32(1.0), m), m);
        SmallVector<Value> next;
        for (int64_t j = 0; j < slots; ++j) {
          Value d = laneDim(kk, lane, j, hd).first;
          next.push_back(kk.addf(it[j], kk.mulf(w, vAt(kk, t, d))));
        }
        next.push_back(kk.addf(it[slots], w));
        lb.create<scf::YieldOp>(l, next);
      });
  SmallVector<Value> mean;
  Value count = loop.getResult(slots);
  for (int64_t j = 0; j < slots; ++j)
    mean.push_back(k.divf(loop.getResult(j), count));
  return mean;
}

/// Writes the lane's output slots of a finished query row (run by the whole
/// warp): slot j = acc[j] / l, or, with `hasMask`, for a row without any
/// valid key (m == MIN: every score was masked) noValidKeyMean over
/// `numKeys(k)` keys (built in the fallback branch) at query position `pos`
/// (`maskAt`, `vAt` as there). Slot j
/// goes to `out` at `outAt(d)` (d = its head dim) where it is a real slot.
void storeRowResult(KB &k, ValueRange acc, Value l, Value m, bool hasMask,
                    function_ref<Value(KB &)> numKeys, Value pos,
                    function_ref<Value(KB &, Value)> maskAt,
                    function_ref<Value(KB &, Value, Value)> vAt, Value lane,
                    int64_t hd, Value out,
                    function_ref<SmallVector<Value>(Value)> outAt) {
  int64_t slots = static_cast<int64_t>(acc.size());
  SmallVector<Value> result;
  for (int64_t j = 0; j < slots; ++j)
    result.push_back(k.divf(acc[j], l));
  if (hasMask) {
    Value noKey = k.oeq(m, k.f32(kF32Min));
    auto fb = k.b.create<scf::IfOp>(
        k.loc, noKey,
        [&](OpBuilder &fbb, Location fl) {
          KB fk{fbb, fl};
          SmallVector<Value> mean = noValidKeyMean(fk, numKeys(fk), pos, maskAt,
                                                   vAt, lane, hd, slots);
          fbb.create<scf::YieldOp>(fl, mean);
        },
        [&](OpBuilder &fbb, Location fl) {
          fbb.create<scf::YieldOp>(fl, result);
        });
    result.assign(fb.getResults().begin(), fb.getResults().end());
  }
  for (int64_t j = 0; j < slots; ++j) {
    auto [d, inRange] = laneDim(k, lane, j, hd);
    auto st = k.b.create<scf::IfOp>(k.loc, inRange, false);
    OpBuilder tb = st.getThenBodyBuilder();
    KB tk{tb, k.loc};
    tk.storeF(result[j], out, outAt(d));
  }
}


Value dimOf(OpBuilder &b, Location loc, Value t, int64_t d) {
  return b.createOrFold<tensor::DimOp>(loc, t, d);
}

/// The kernel's shared memory: f32 arrays of the given shapes carved out of
/// the dynamic shared memory (`gpu.dynamic_shared_memory` + `memref.view`;
/// workgroup attributions would be memref block arguments of the launch,
/// which the buffer deallocation pipeline would rewrite).
struct SharedLayout {
  SmallVector<SmallVector<int64_t>> shapes;
  int64_t bytes() const {
    int64_t total = 0;
    for (const auto &s : shapes) {
      int64_t n = 4;
      for (int64_t d : s)
        n *= d;
      total += n;
    }
    return total;
  }
  SmallVector<Value> views(OpBuilder &b, Location loc) const {
    MLIRContext *ctx = b.getContext();
    auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
    Value raw = b.create<gpu::DynamicSharedMemoryOp>(
        loc, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                             MemRefLayoutAttrInterface{}, space));
    SmallVector<Value> out;
    int64_t offset = 0;
    for (const auto &s : shapes) {
      Value off = b.create<arith::ConstantIndexOp>(loc, offset);
      auto type = MemRefType::get(s, b.getF32Type(),
                                  MemRefLayoutAttrInterface{}, space);
      out.push_back(
          b.create<memref::ViewOp>(loc, type, raw, off, ValueRange{}));
      int64_t n = 4;
      for (int64_t d : s)
        n *= d;
      offset += n;
    }
    return out;
  }
};

/// A `gpu.launch` guarded by `cond` (no launch of an empty grid) with the
/// dynamic shared memory of `shared`; `body` fills the kernel and gets the
/// shared arrays.
void launchIf(OpBuilder &b, Location loc, Value cond, Value gx, Value gy,
              Value gz, Value bx, const SharedLayout &shared,
              function_ref<void(OpBuilder &, gpu::LaunchOp, ValueRange)> body) {
  auto guard = b.create<scf::IfOp>(loc, cond, /*withElseRegion=*/false);
  OpBuilder gb = guard.getThenBodyBuilder();
  Value one = gb.create<arith::ConstantIndexOp>(loc, 1);
  Value smem;
  if (shared.bytes() > 0)
    smem = gb.create<arith::ConstantOp>(
        loc, gb.getI32IntegerAttr(static_cast<int32_t>(shared.bytes())));
  auto launch = gb.create<gpu::LaunchOp>(loc, gx, gy, gz, bx, one, one, smem);
  OpBuilder kb = OpBuilder::atBlockEnd(&launch.getBody().front());
  SmallVector<Value> arrays = shared.views(kb, loc);
  body(kb, launch, arrays);
  kb.create<gpu::TerminatorOp>(loc);
}

} // namespace

bool bt::gpuAttentionSupports(RankedTensorType q) {
  int64_t n = q.getRank();
  if (n < 4 || !isa<FloatType>(q.getElementType()))
    return false;
  int64_t h = q.getDimSize(n - 2), hd = q.getDimSize(n - 1);
  return !ShapedType::isDynamic(h) && !ShapedType::isDynamic(hd) && hd > 0 &&
         hd <= kGPUAttentionMaxHeadDim;
}

namespace {

/// One emitGPUAttention call: the operands as memrefs, the host-side sizes
/// (used inside the kernels as launch operands) and the kernels it emits.
struct AttentionEmitter {
  Location loc;
  bool headMajorKV, hasMask;
  double scale;
  /// Batch dims, heads, head dim, lane slots per row (ceil(hd / 32)), query
  /// rows per block.
  int64_t nb, heads, hd, slots, rows;
  /// Host-side: the batch dims, S, Sk and the position of query 0 (Sk − S).
  /// With a device key count, Sk is the capacity of the views (the grids'
  /// size) and the kernels use keysIn / offsetIn.
  SmallVector<Value> batch;
  Value seq, keys, offset;
  /// q, k, v, the key mask (or null) and the result, as memrefs.
  Value qm, km, vm, mm, out;
  /// The device key count: a 0-d i64 memref and the host index added to it
  /// (GPUKeyCount), or null.
  Value countMem, countAdd;

  /// The number of keys as a kernel sees it: the device count, or Sk.
  Value keysIn(KB &kk) const {
    if (!countMem)
      return keys;
    Value n = kk.b.create<memref::LoadOp>(kk.loc, countMem, ValueRange{});
    Value ni = kk.b.create<arith::IndexCastOp>(kk.loc, kk.b.getIndexType(), n);
    return kk.addi(ni, countAdd);
  }
  /// The position of query 0 as a kernel sees it: keysIn − S.
  Value offsetIn(KB &kk, Value keysNow) const {
    return countMem ? kk.subi(keysNow, seq) : offset;
  }

  /// g (a block of the grid) → (batch indices, head).
  std::pair<SmallVector<Value>, Value> split(KB &kk, Value gi) const {
    Value head = kk.remu(gi, kk.idx(heads));
    Value rest = kk.divu(gi, kk.idx(heads));
    SmallVector<Value> bi(nb);
    for (int64_t i = nb - 1; i >= 0; --i) {
      if (i == 0) {
        bi[i] = rest;
      } else {
        bi[i] = kk.remu(rest, batch[i]);
        rest = kk.divu(rest, batch[i]);
      }
    }
    return std::make_pair(bi, head);
  }
  static SmallVector<Value> idx4(ArrayRef<Value> bi, Value a, Value c,
                                 Value d) {
    SmallVector<Value> ix(bi.begin(), bi.end());
    ix.append({a, c, d});
    return ix;
  }
  SmallVector<Value> kvIdx(ArrayRef<Value> bi, Value t, Value head,
                           Value d) const {
    return headMajorKV ? idx4(bi, head, t, d) : idx4(bi, t, head, d);
  }
  static SmallVector<Value> maskIdx(ArrayRef<Value> bi, Value t) {
    SmallVector<Value> ix(bi.begin(), bi.end());
    ix.push_back(t);
    return ix;
  }

  /// The softmax-normalized row (acc / l, masked rows as the reference
  /// computes them) of query row `s` stored to the result.
  void storeRow(KB &rk, ValueRange acc, Value l, Value m, Value pos,
                Value lane, ArrayRef<Value> bi, Value head, Value s) const {
    storeRowResult(
        rk, acc, l, m, hasMask, [&](KB &kk) { return keysIn(kk); }, pos,
        [&](KB &mk, Value t) { return mk.maskF(mm, maskIdx(bi, t)); },
        [&](KB &vk, Value t, Value d) {
          return vk.loadF(vm, kvIdx(bi, t, head, d));
        },
        lane, hd, out, [&](Value d) { return idx4(bi, s, head, d); });
  }

  void attentionKernel(OpBuilder &kb, gpu::LaunchOp launch, ValueRange shared,
                       Value chunk, Value ws) const;
  void stageTile(KB &tk, Value tid, Value t0, Value kEnd, ArrayRef<Value> bi,
                 Value head, Value ks, Value vs) const;
  void storePartial(KB &rk, const RowState &fin, Value lane,
                    ArrayRef<Value> wsRow, Value ws) const;
  void combineKernel(OpBuilder &kb, gpu::LaunchOp launch, Value splits,
                     Value ws) const;
};

/// Loads in flight per thread and array in one batch of stageTile.
constexpr int64_t kStageUnroll = 16;

/// Stages the keys and values t0 + [0, 32) (zeros from kEnd on) of
/// (`bi`, `head`) into the shared tiles `ks`, `vs` [32, hd + 1], with the
/// block's 32·rows threads: element i = row·hd + col of the tile is loaded by
/// thread i mod threads. The ⌈32·hd / threads⌉ elements of a thread go in
/// batches of kStageUnroll: all of a batch's global loads are issued before
/// its shared-memory stores, so their latencies overlap (a loop of
/// load-then-store waits one full global-memory latency per element: 64 per
/// tile at hd 64 and one query row, ~40 µs per tile on an H100).
void AttentionEmitter::stageTile(KB &tk, Value tid, Value t0, Value kEnd,
                                 ArrayRef<Value> bi, Value head, Value ks,
                                 Value vs) const {
  const int64_t total = kWarp * hd, threads = kWarp * rows;
  const int64_t iters = (total + threads - 1) / threads;
  const int64_t unroll = std::min(iters, kStageUnroll);
  const int64_t batches = (iters + unroll - 1) / unroll;
  auto batch = [&](OpBuilder &cb, Location cl, Value first) {
    KB ck{cb, cl};
    struct Elem {
      Value inTile, row, col, kv, vv;
    };
    SmallVector<Elem> elems;
    for (int64_t u = 0; u < unroll; ++u) {
      // i = tid + threads·(first + u)
      Value i = ck.addi(
          tid, ck.muli(ck.idx(threads), ck.addi(first, ck.idx(u))));
      Value inTile = ck.ult(i, ck.idx(total));
      Value ic = ck.select(inTile, i, ck.idx(0));
      Value row = ck.divu(ic, ck.idx(hd));
      Value col = ck.remu(ic, ck.idx(hd));
      Value t = ck.addi(t0, row);
      Value ok = ck.ult(t, kEnd);
      Value tc = ck.select(ok, t, ck.idx(0));
      Value zero = ck.f32(0.0);
      Value kv = ck.select(ok, ck.loadF(km, kvIdx(bi, tc, head, col)), zero);
      Value vv = ck.select(ok, ck.loadF(vm, kvIdx(bi, tc, head, col)), zero);
      elems.push_back({inTile, row, col, kv, vv});
    }
    for (const Elem &e : elems) {
      auto st = cb.create<scf::IfOp>(cl, e.inTile, false);
      OpBuilder sb = st.getThenBodyBuilder();
      sb.create<memref::StoreOp>(cl, e.kv, ks, ValueRange{e.row, e.col});
      sb.create<memref::StoreOp>(cl, e.vv, vs, ValueRange{e.row, e.col});
    }
  };
  if (batches == 1) {
    batch(tk.b, tk.loc, tk.idx(0));
    return;
  }
  tk.b.create<scf::ForOp>(
      tk.loc, tk.idx(0), tk.idx(iters), tk.idx(unroll), ValueRange{},
      [&](OpBuilder &cb, Location cl, Value first, ValueRange) {
        batch(cb, cl, first);
        cb.create<scf::YieldOp>(cl);
      });
}

/// The attention kernel: block (g, row group, split), warp per query row.
/// With `ws` (split-K), writes (acc, m, l) of the split to `ws`
/// [Z, G, S, hd + 2]; else the normalized rows to the result.
void AttentionEmitter::attentionKernel(OpBuilder &kb, gpu::LaunchOp launch,
                                       ValueRange shared, Value chunk,
                                       Value ws) const {
  KB kk{kb, loc};
  Value ks = shared[0], vs = shared[1], qs = shared[2];
  Value tid = launch.getThreadIds().x;
  Value lane = kk.remu(tid, kk.idx(kWarp));
  Value warp = kk.divu(tid, kk.idx(kWarp));
  SmallVector<Value> bi;
  Value head;
  std::tie(bi, head) = split(kk, launch.getBlockIds().x);
  Value group = launch.getBlockIds().y;
  Value z = launch.getBlockIds().z;
  Value s = kk.addi(kk.muli(group, kk.idx(rows)), warp);
  Value rowValid = kk.ult(s, seq);
  Value sc = kk.select(rowValid, s, kk.idx(0));
  Value numKeys = keysIn(kk);
  Value offset = offsetIn(kk, numKeys);
  Value pos = kk.addi(offset, sc);
  // Keys of this block: its split, up to the causal limit of its last row
  // (none for a split wholly past a device key count: the neutral partial
  // m = −inf, l = 0).
  Value kBeg = kk.muli(z, chunk);
  Value kEndSplit = kk.minu(numKeys, kk.addi(kBeg, chunk));
  Value lastRow = kk.minu(kk.subi(seq, kk.idx(1)),
                          kk.addi(kk.muli(group, kk.idx(rows)),
                                  kk.idx(rows - 1)));
  Value kEnd = kk.minu(kEndSplit, kk.addi(offset, kk.addi(lastRow, kk.idx(1))));
  // The warp's query row into shared memory.
  for (int64_t j = 0; j < slots; ++j) {
    auto [d, inRange] = laneDim(kk, lane, j, hd);
    Value qv = kk.loadF(qm, idx4(bi, sc, head, d));
    auto st = kb.create<scf::IfOp>(loc, inRange, false);
    OpBuilder tb = st.getThenBodyBuilder();
    tb.create<memref::StoreOp>(loc, qv, qs, ValueRange{warp, d});
  }
  kk.barrier();
  Value negInf = kk.f32(-std::numeric_limits<double>::infinity());
  RowState init{negInf, kk.f32(0.0), SmallVector<Value>(slots, kk.f32(0.0))};
  auto tiles = kb.create<scf::ForOp>(
      loc, kBeg, kk.maxu(kBeg, kEnd), kk.idx(kWarp), init.flat(),
      [&](OpBuilder &lb, Location l, Value t0, ValueRange it) {
        KB tk{lb, l};
        // Cooperative, coalesced load of the tile's keys and values, in
        // batches of unrolled loads (stageTile).
        stageTile(tk, tid, t0, kEnd, bi, head, ks, vs);
        tk.barrier();
        // Warp-uniform: rows past S keep their state.
        auto rowIf = lb.create<scf::IfOp>(
            l, rowValid,
            [&](OpBuilder &rb, Location rl) {
              KB rk{rb, rl};
              Value t = rk.addi(t0, lane);
              Value keyOk = rk.land(rk.ult(t, kEnd), rk.ule(t, pos));
              Value dot = sharedRowDot(rk, qs, warp, ks, lane, hd);
              Value x = rk.mulf(dot, rk.f32(scale));
              if (hasMask) {
                Value tc = rk.select(rk.ult(t, numKeys), t, rk.idx(0));
                Value mv = rk.maskF(mm, maskIdx(bi, tc));
                x = rk.addf(x, rk.mulf(rk.subf(rk.f32(1.0), mv),
                                       rk.f32(kF32Min)));
              }
              RowState next = attendTile(
                  rk, RowState::from(it), x, keyOk, lane, hd,
                  [&](KB &vk, Value jj, Value d) -> Value {
                    return vk.b.create<memref::LoadOp>(vk.loc, vs,
                                                       ValueRange{jj, d});
                  });
              rb.create<scf::YieldOp>(rl, next.flat());
            },
            [&](OpBuilder &rb, Location rl) {
              rb.create<scf::YieldOp>(rl, it);
            });
        // The next tile overwrites the shared buffers.
        tk.barrier();
        lb.create<scf::YieldOp>(l, rowIf.getResults());
      });
  RowState fin = RowState::from(tiles.getResults());
  auto rowIf = kb.create<scf::IfOp>(loc, rowValid, false);
  OpBuilder rb = rowIf.getThenBodyBuilder();
  KB rk{rb, loc};
  if (ws)
    storePartial(rk, fin, lane, {z, launch.getBlockIds().x, sc}, ws);
  else
    storeRow(rk, fin.acc, fin.l, fin.m, pos, lane, bi, head, sc);
}

/// Split-K: the partial row (acc by lane, then m and l by lane 0) of one
/// split to `ws` at [wsRow..., d].
void AttentionEmitter::storePartial(KB &rk, const RowState &fin, Value lane,
                                    ArrayRef<Value> wsRow, Value ws) const {
  OpBuilder &rb = rk.b;
  for (int64_t j = 0; j < slots; ++j) {
    auto [d, inRange] = laneDim(rk, lane, j, hd);
    auto st = rb.create<scf::IfOp>(loc, inRange, false);
    OpBuilder tb = st.getThenBodyBuilder();
    SmallVector<Value> ix(wsRow.begin(), wsRow.end());
    ix.push_back(d);
    tb.create<memref::StoreOp>(loc, fin.acc[j], ws, ix);
  }
  Value first = rb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, lane,
                                         rk.idx(0));
  auto st = rb.create<scf::IfOp>(loc, first, false);
  OpBuilder tb = st.getThenBodyBuilder();
  SmallVector<Value> ixm(wsRow.begin(), wsRow.end()), ixl = ixm;
  ixm.push_back(tb.create<arith::ConstantIndexOp>(loc, hd));
  ixl.push_back(tb.create<arith::ConstantIndexOp>(loc, hd + 1));
  tb.create<memref::StoreOp>(loc, fin.m, ws, ixm);
  tb.create<memref::StoreOp>(loc, fin.l, ws, ixl);
}

/// Split-K: combines the `splits` partial rows of `ws`, one warp per (head,
/// query row).
void AttentionEmitter::combineKernel(OpBuilder &kb, gpu::LaunchOp launch,
                                     Value splits, Value ws) const {
  KB kk{kb, loc};
  Value lane = launch.getThreadIds().x;
  Value gs = launch.getBlockIds().x;
  Value s = kk.remu(gs, seq);
  Value gi = kk.divu(gs, seq);
  SmallVector<Value> bi;
  Value head;
  std::tie(bi, head) = split(kk, gi);
  Value pos = kk.addi(offsetIn(kk, keysIn(kk)), s);
  Value negInf = kk.f32(-std::numeric_limits<double>::infinity());
  auto wsAt = [&](KB &wk, Value zi, Value c) {
    return wk.b.create<memref::LoadOp>(wk.loc, ws, ValueRange{zi, gi, s, c});
  };
  auto maxLoop = kb.create<scf::ForOp>(
      loc, kk.idx(0), splits, kk.idx(1), ValueRange{negInf},
      [&](OpBuilder &lb, Location l, Value zi, ValueRange it) {
        KB lk{lb, l};
        lb.create<scf::YieldOp>(l, lk.maxf(it[0], wsAt(lk, zi, lk.idx(hd))));
      });
  Value mMax = maxLoop.getResult(0);
  SmallVector<Value> init(slots + 1, kk.f32(0.0));
  auto sumLoop = kb.create<scf::ForOp>(
      loc, kk.idx(0), splits, kk.idx(1), init,
      [&](OpBuilder &lb, Location l, Value zi, ValueRange it) {
        KB lk{lb, l};
        Value mz = wsAt(lk, zi, lk.idx(hd));
        Value w = lk.select(lk.oeq(mz, negInf), lk.f32(0.0),
                            lk.exp(lk.subf(mz, mMax)));
        SmallVector<Value> next;
        for (int64_t j = 0; j < slots; ++j) {
          Value d = laneDim(lk, lane, j, hd).first;
          next.push_back(lk.addf(it[j], lk.mulf(w, wsAt(lk, zi, d))));
        }
        next.push_back(
            lk.addf(it[slots], lk.mulf(w, wsAt(lk, zi, lk.idx(hd + 1)))));
        lb.create<scf::YieldOp>(l, next);
      });
  storeRow(kk, sumLoop.getResults().take_front(slots), sumLoop.getResult(slots),
           mMax, pos, lane, bi, head, s);
}

} // namespace

Value bt::emitGPUAttention(OpBuilder &b, Location loc, Value q, Value k,
                           Value v, Value keyMask, double scale,
                           bool headMajorKV, const GPUKeyCount *deviceKeys) {
  KB h{b, loc};
  auto qt = cast<RankedTensorType>(q.getType());
  int64_t n = qt.getRank();
  AttentionEmitter e{loc, headMajorKV, static_cast<bool>(keyMask), scale};
  e.nb = n - 3;
  const int64_t nb = e.nb;
  e.heads = qt.getDimSize(nb + 1);
  e.hd = qt.getDimSize(nb + 2);
  const int64_t hd = e.hd;
  e.slots = (hd + kWarp - 1) / kWarp;

  // Host-side sizes.
  Value g = h.idx(e.heads);
  for (int64_t i = 0; i < nb; ++i) {
    e.batch.push_back(dimOf(b, loc, q, i));
    g = h.muli(g, e.batch.back());
  }
  e.seq = dimOf(b, loc, q, nb);
  e.keys = dimOf(b, loc, k, headMajorKV ? nb + 1 : nb);
  e.offset = h.subi(e.keys, e.seq);

  e.qm = readOnlyMemref(b, loc, q);
  e.km = readOnlyMemref(b, loc, k);
  e.vm = readOnlyMemref(b, loc, v);
  e.mm = e.hasMask ? readOnlyMemref(b, loc, keyMask) : Value();
  if (deviceKeys) {
    e.countMem = readOnlyMemref(b, loc, deviceKeys->length);
    e.countAdd = getValueOrCreateConstantIndexOp(b, loc, deviceKeys->added);
  }
  SmallVector<Value> dynSizes;
  for (int64_t i = 0; i < n; ++i)
    if (qt.isDynamicDim(i))
      dynSizes.push_back(dimOf(b, loc, q, i));
  e.out = b.create<memref::AllocOp>(
      loc, MemRefType::get(qt.getShape(), qt.getElementType()), dynSizes);

  bool decode = !qt.isDynamicDim(nb) && qt.getDimSize(nb) <= kMaxDecodeRows;
  e.rows = decode ? qt.getDimSize(nb) : kRowsPerBlock;
  Value nonEmpty = b.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::ugt, h.muli(g, e.seq), h.idx(0));

  SharedLayout shared{{{kWarp, hd + 1}, {kWarp, hd + 1}, {e.rows, hd}}};
  Value threads = h.idx(kWarp * e.rows);
  if (!decode) {
    Value groups = h.ceilDiv(e.seq, h.idx(e.rows));
    Value chunk = e.keys; // one split: all keys
    launchIf(b, loc, nonEmpty, g, groups, h.idx(1), threads, shared,
             [&](OpBuilder &kb, gpu::LaunchOp launch, ValueRange arrays) {
               e.attentionKernel(kb, launch, arrays, chunk, Value());
             });
  } else {
    Value chunk = h.idx(kKeysPerSplit);
    // All keys in one split when they fit one chunk (the token decoder's
    // local cache always, the block cache up to 128 blocks) or when the
    // grid alone fills the device (g ≥ kMinBlocksWithoutSplit): one launch
    // that writes the normalized rows, no workspace and no combine kernel
    // (the combine of one split rescales by exp(0) = 1: the same values).
    Value fits = h.ule(e.keys, chunk);
    Value wide = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::uge, g,
                                         h.idx(kMinBlocksWithoutSplit));
    auto oneSplit = b.create<scf::IfOp>(
        loc, b.create<arith::OrIOp>(loc, fits, wide), /*withElseRegion=*/true);
    OpBuilder tb = oneSplit.getThenBodyBuilder();
    KB tk{tb, loc};
    launchIf(tb, loc, nonEmpty, g, tk.idx(1), tk.idx(1), threads, shared,
             [&](OpBuilder &kb, gpu::LaunchOp launch, ValueRange arrays) {
               e.attentionKernel(kb, launch, arrays, e.keys, Value());
             });
    OpBuilder eb = oneSplit.getElseBodyBuilder();
    KB ek{eb, loc};
    Value splits = ek.ceilDiv(e.keys, chunk);
    Value ws = eb.create<memref::AllocOp>(
        loc,
        MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic,
                         qt.getDimSize(nb), hd + 2},
                        eb.getF32Type()),
        ValueRange{splits, g});
    launchIf(eb, loc, nonEmpty, g, ek.idx(1), splits, threads, shared,
             [&](OpBuilder &kb, gpu::LaunchOp launch, ValueRange arrays) {
               e.attentionKernel(kb, launch, arrays, chunk, ws);
             });
    launchIf(eb, loc, nonEmpty, ek.muli(g, e.seq), ek.idx(1), ek.idx(1),
             ek.idx(kWarp), SharedLayout{},
             [&](OpBuilder &kb, gpu::LaunchOp launch, ValueRange) {
               e.combineKernel(kb, launch, splits, ws);
             });
  }
  return b.create<bufferization::ToTensorOp>(
      loc, RankedTensorType::get(qt.getShape(), qt.getElementType()), e.out,
      /*restrict=*/true, /*writable=*/true);
}

bool bt::gpuFusedLocalAttentionSupports(RankedTensorType qkv,
                                        int64_t headDim) {
  if (qkv.getRank() != 4 || !isa<FloatType>(qkv.getElementType()) ||
      qkv.isDynamicDim(2) || qkv.isDynamicDim(3) || headDim <= 0 ||
      headDim > kGPUAttentionMaxHeadDim)
    return false;
  int64_t s = qkv.getDimSize(2);
  return s > 0 && 3 * s * (headDim + 1) * 4 <= 48 * 1024;
}

Value bt::emitGPUFusedLocalAttention(OpBuilder &b, Location loc, Value qkv,
                                     Value cosT, Value sinT, Value keyMask,
                                     int64_t heads, int64_t hd,
                                     int64_t rotaryDims, double scale) {
  KB h{b, loc};
  auto qt = cast<RankedTensorType>(qkv.getType());
  int64_t seqLen = qt.getDimSize(2);
  int64_t slots = (hd + kWarp - 1) / kWarp;
  int64_t rows = std::min<int64_t>(seqLen, kRowsPerBlock);
  int64_t half = rotaryDims / 2;
  bool hasMask = static_cast<bool>(keyMask);
  bool blockTables = cast<RankedTensorType>(cosT.getType()).getRank() == 4;

  Value bSize = dimOf(b, loc, qkv, 0), nSize = dimOf(b, loc, qkv, 1);
  Value g = h.muli(h.muli(bSize, nSize), h.idx(heads));
  Value qm = readOnlyMemref(b, loc, qkv);
  Value cm = readOnlyMemref(b, loc, cosT), sm = readOnlyMemref(b, loc, sinT);
  Value mm = hasMask ? readOnlyMemref(b, loc, keyMask) : Value();
  auto outType = MemRefType::get({qt.getDimSize(0), qt.getDimSize(1), seqLen,
                                  heads, hd},
                                 qt.getElementType());
  SmallVector<Value> dyn;
  if (qt.isDynamicDim(0))
    dyn.push_back(bSize);
  if (qt.isDynamicDim(1))
    dyn.push_back(nSize);
  Value out = b.create<memref::AllocOp>(loc, outType, dyn);
  Value nonEmpty =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ugt, g, h.idx(0));
  SharedLayout shared{{{seqLen, hd + 1}, {seqLen, hd + 1}, {seqLen, hd + 1}}};

  launchIf(
      b, loc, nonEmpty, g, h.idx(1), h.idx(1), h.idx(kWarp * rows), shared,
      [&](OpBuilder &kb, gpu::LaunchOp launch, ValueRange sh) {
        KB kk{kb, loc};
        Value qs = sh[0], ks = sh[1], vs = sh[2];
        Value tid = launch.getThreadIds().x;
        Value lane = kk.remu(tid, kk.idx(kWarp));
        Value warp = kk.divu(tid, kk.idx(kWarp));
        Value gi = launch.getBlockIds().x;
        Value head = kk.remu(gi, kk.idx(heads));
        Value rest = kk.divu(gi, kk.idx(heads));
        Value nIdx = kk.remu(rest, nSize);
        Value bIdx = kk.divu(rest, nSize);
        Value threads = kk.idx(kWarp * rows);
        // q, k rotated and v into shared memory.
        kb.create<scf::ForOp>(
            loc, tid, kk.idx(seqLen * hd), threads, ValueRange{},
            [&](OpBuilder &lb, Location l, Value i, ValueRange) {
              KB lk{lb, l};
              Value s = lk.divu(i, lk.idx(hd));
              Value d = lk.remu(i, lk.idx(hd));
              Value base = lk.muli(head, lk.idx(3 * hd));
              auto at = [&](int64_t which, Value dd) {
                Value col = lk.addi(base, lk.addi(lk.idx(which * hd), dd));
                return lk.loadF(qm, ValueRange{bIdx, nIdx, s, col});
              };
              Value v = at(2, d);
              lb.create<memref::StoreOp>(l, v, vs, ValueRange{s, d});
              if (half == 0) {
                lb.create<memref::StoreOp>(l, at(0, d), qs, ValueRange{s, d});
                lb.create<memref::StoreOp>(l, at(1, d), ks, ValueRange{s, d});
                lb.create<scf::YieldOp>(l);
                return;
              }
              // The bt.rotary payload: partner x[(d + r/2) mod r], table at
              // d mod r/2; y = x·c − p·s (d < r/2), x·c + p·s (d < r), x.
              Value isRot = lk.ult(d, lk.idx(rotaryDims));
              Value isFirst = lk.ult(d, lk.idx(half));
              Value dr = lk.select(isRot, d, lk.idx(0));
              Value partner =
                  lk.remu(lk.addi(dr, lk.idx(half)), lk.idx(rotaryDims));
              Value ti = lk.remu(dr, lk.idx(half));
              SmallVector<Value> tix{s, ti};
              if (blockTables)
                tix = {bIdx, nIdx, s, ti};
              Value c = lk.loadF(cm, tix), sn = lk.loadF(sm, tix);
              auto rotate = [&](int64_t which) {
                Value x = at(which, d);
                Value p = at(which, partner);
                Value xc = lk.mulf(x, c), ps = lk.mulf(p, sn);
                Value rot =
                    lk.select(isFirst, lk.subf(xc, ps), lk.addf(xc, ps));
                return lk.select(isRot, rot, x);
              };
              lb.create<memref::StoreOp>(l, rotate(0), qs, ValueRange{s, d});
              lb.create<memref::StoreOp>(l, rotate(1), ks, ValueRange{s, d});
              lb.create<scf::YieldOp>(l);
            });
        kk.barrier();
        // Each warp attends its query rows s = warp, warp + rows, ...
        Value negInf = kk.f32(-std::numeric_limits<double>::infinity());
        kb.create<scf::ForOp>(
            loc, warp, kk.idx(seqLen), kk.idx(rows), ValueRange{},
            [&](OpBuilder &rb, Location rl, Value s, ValueRange) {
              KB rk{rb, rl};
              RowState init{negInf, rk.f32(0.0),
                            SmallVector<Value>(slots, rk.f32(0.0))};
              auto maskAt = [&](KB &mk, Value t) {
                return mk.maskF(mm, ValueRange{bIdx, nIdx, t});
              };
              auto tiles = rb.create<scf::ForOp>(
                  rl, rk.idx(0), rk.addi(s, rk.idx(1)), rk.idx(kWarp),
                  init.flat(),
                  [&](OpBuilder &tb, Location tl, Value t0, ValueRange it) {
                    KB tk{tb, tl};
                    Value t = tk.addi(t0, lane);
                    Value keyOk = tk.ule(t, s);
                    Value tc = tk.select(keyOk, t, tk.idx(0));
                    Value dot = sharedRowDot(tk, qs, s, ks, tc, hd);
                    Value x = tk.mulf(dot, tk.f32(scale));
                    if (hasMask)
                      x = tk.addf(x, tk.mulf(tk.subf(tk.f32(1.0),
                                                     maskAt(tk, tc)),
                                             tk.f32(kF32Min)));
                    RowState next = attendTile(
                        tk, RowState::from(it), x, keyOk, lane, hd,
                        [&](KB &vk, Value jj, Value d) -> Value {
                          Value tj = vk.addi(t0, jj);
                          Value ok = vk.ult(tj, vk.idx(seqLen));
                          tj = vk.select(ok, tj, vk.idx(0));
                          return vk.b.create<memref::LoadOp>(
                              vk.loc, vs, ValueRange{tj, d});
                        });
                    tb.create<scf::YieldOp>(tl, next.flat());
                  });
              RowState fin = RowState::from(tiles.getResults());
              storeRowResult(
                  rk, fin.acc, fin.l, fin.m, hasMask,
                  [&](KB &fk) { return fk.idx(seqLen); }, s, maskAt,
                  [&](KB &vk, Value t, Value d) -> Value {
                    return vk.b.create<memref::LoadOp>(vk.loc, vs,
                                                       ValueRange{t, d});
                  },
                  lane, hd, out,
                  [&](Value d) -> SmallVector<Value> {
                    return {bIdx, nIdx, s, head, d};
                  });
              rb.create<scf::YieldOp>(rl);
            });
      });
  return b.create<bufferization::ToTensorOp>(
      loc,
      RankedTensorType::get(outType.getShape(), outType.getElementType()),
      out, /*restrict=*/true, /*writable=*/true);
}
