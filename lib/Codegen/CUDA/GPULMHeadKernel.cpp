//===- GPULMHeadKernel.cpp - the LM head with a greedy argmax epilogue ----===//
//
// `bt_lm_head_argmax_bf16`: the bf16 LM head GEMM on the tensor cores
// (mma.sync m16n8k16, bf16 x bf16 -> f32) whose epilogue keeps, per row and
// tile of 64 vocabulary ids, the greedy maximum instead of writing the
// logits: the building block of a greedy decode step whose logits never
// reach memory (docs/codegen-cuda.md, "Efficiency of the decode step").
// bt-gpu-sampler-kernels adds it beside the bf16 samplers
// (GPUSamplerKernels.cpp); its text is written here.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelText.h"

#include <string>

namespace bt::codegen {
namespace {

/// The kernel's signature, constants, thread geometry and the GEMM: after
/// it, %e0 .. %e7 hold this lane's eight f32 products of the m-tile %m0
/// (the mma's D layout: %e0, %e1 row %ra, %e2, %e3 row %rb, columns
/// %c00, %c01 of the warp's first n8 subtile; %e4 .. %e7 the same of the
/// second, columns %c10, %c11).
constexpr const char *kHead = R"mlir(
  gpu.func @bt_lm_head_argmax_bf16(
      %x: memref<?x?xi32, strided<[?, 1], offset: ?>>,
      %w: memref<?x?xi32, strided<[?, 1], offset: ?>>,
      %pv: memref<?x?xf32, strided<[?, 1], offset: ?>>,
      %pi: memref<?x?xi32, strided<[?, 1], offset: ?>>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %c256 = arith.constant 256 : index
    %c512 = arith.constant 512 : index
    %z32 = arith.constant 0 : i32
    %one32 = arith.constant 1 : i32
    %two32 = arith.constant 2 : i32
    %width = arith.constant 32 : i32
    %f0 = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %qnan = arith.constant 0x7FC00000 : f32
    %none = arith.constant 2147483647 : i32
    %rnd = arith.constant 32767 : i32
    %hi16 = arith.constant -65536 : i32
    %s16 = arith.constant 16 : i32
    %tile = gpu.block_id x
    %tid = gpu.thread_id x
    %warp = arith.divui %tid, %c32 : index
    %lane = arith.remui %tid, %c32 : index
    %g = arith.divui %lane, %c4 : index
    %q = arith.remui %lane, %c4 : index
    %q4 = arith.addi %q, %c4 : index
    %lead = arith.cmpi eq, %q, %c0 : index
    %rows = memref.dim %x, %c0 : memref<?x?xi32, strided<[?, 1], offset: ?>>
    %kw = memref.dim %x, %c1 : memref<?x?xi32, strided<[?, 1], offset: ?>>
    %cols = memref.dim %w, %c0 : memref<?x?xi32, strided<[?, 1], offset: ?>>
    %lastrow = arith.subi %rows, %c1 : index
    %lastcol = arith.subi %cols, %c1 : index
    %t64 = arith.muli %tile, %c64 : index
    %w16 = arith.muli %warp, %c16 : index
    %n0 = arith.addi %t64, %w16 : index
    %nb0 = arith.addi %n0, %g : index
    %nb1 = arith.addi %nb0, %c8 : index
    %okb0 = arith.cmpi ult, %nb0, %cols : index
    %okb1 = arith.cmpi ult, %nb1, %cols : index
    %nc0 = arith.minui %nb0, %lastcol : index
    %nc1 = arith.minui %nb1, %lastcol : index
    %q2 = arith.muli %q, %c2 : index
    %c00 = arith.addi %n0, %q2 : index
    %c01 = arith.addi %c00, %c1 : index
    %c10 = arith.addi %c00, %c8 : index
    %c11 = arith.addi %c10, %c1 : index
    %raw = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %sv = memref.view %raw[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4x16xf32, #gpu.address_space<workgroup>>
    %si = memref.view %raw[%c256][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4x16xi32, #gpu.address_space<workgroup>>
    %sn = memref.view %raw[%c512][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4x16xi32, #gpu.address_space<workgroup>>
    %g8 = arith.addi %g, %c8 : index
    %row_lead = arith.cmpi ult, %tid, %c16 : index
    scf.for %m0 = %c0 to %rows step %c16 {
      %ra = arith.addi %m0, %g : index
      %rb = arith.addi %ra, %c8 : index
      %oka = arith.cmpi ult, %ra, %rows : index
      %okb = arith.cmpi ult, %rb, %rows : index
      %rac = arith.minui %ra, %lastrow : index
      %rbc = arith.minui %rb, %lastrow : index
      %e:8 = scf.for %k = %c0 to %kw step %c8
          iter_args(%d0 = %f0, %d1 = %f0, %d2 = %f0, %d3 = %f0,
                    %d4 = %f0, %d5 = %f0, %d6 = %f0, %d7 = %f0)
          -> (f32, f32, f32, f32, f32, f32, f32, f32) {
        %k1 = arith.addi %k, %q : index
        %k2 = arith.addi %k, %q4 : index
        %xa0 = memref.load %x[%rac, %k1] : memref<?x?xi32, strided<[?, 1], offset: ?>>
        %xa1 = memref.load %x[%rbc, %k1] : memref<?x?xi32, strided<[?, 1], offset: ?>>
        %xa2 = memref.load %x[%rac, %k2] : memref<?x?xi32, strided<[?, 1], offset: ?>>
        %xa3 = memref.load %x[%rbc, %k2] : memref<?x?xi32, strided<[?, 1], offset: ?>>
        %wb0 = memref.load %w[%nc0, %k1] : memref<?x?xi32, strided<[?, 1], offset: ?>>
        %wb1 = memref.load %w[%nc0, %k2] : memref<?x?xi32, strided<[?, 1], offset: ?>>
        %wb2 = memref.load %w[%nc1, %k1] : memref<?x?xi32, strided<[?, 1], offset: ?>>
        %wb3 = memref.load %w[%nc1, %k2] : memref<?x?xi32, strided<[?, 1], offset: ?>>
        %a0 = arith.select %oka, %xa0, %z32 : i32
        %a1 = arith.select %okb, %xa1, %z32 : i32
        %a2 = arith.select %oka, %xa2, %z32 : i32
        %a3 = arith.select %okb, %xa3, %z32 : i32
        %b0 = arith.select %okb0, %wb0, %z32 : i32
        %b1 = arith.select %okb0, %wb1, %z32 : i32
        %b2 = arith.select %okb1, %wb2, %z32 : i32
        %b3 = arith.select %okb1, %wb3, %z32 : i32
        %s0 = llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"(%a0, %a1, %a2, %a3, %b0, %b1, %d0, %d1, %d2, %d3) : (i32, i32, i32, i32, i32, i32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
        %s1 = llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"(%a0, %a1, %a2, %a3, %b2, %b3, %d4, %d5, %d6, %d7) : (i32, i32, i32, i32, i32, i32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
        %n0_ = llvm.extractvalue %s0[0] : !llvm.struct<(f32, f32, f32, f32)>
        %n1_ = llvm.extractvalue %s0[1] : !llvm.struct<(f32, f32, f32, f32)>
        %n2_ = llvm.extractvalue %s0[2] : !llvm.struct<(f32, f32, f32, f32)>
        %n3_ = llvm.extractvalue %s0[3] : !llvm.struct<(f32, f32, f32, f32)>
        %n4_ = llvm.extractvalue %s1[0] : !llvm.struct<(f32, f32, f32, f32)>
        %n5_ = llvm.extractvalue %s1[1] : !llvm.struct<(f32, f32, f32, f32)>
        %n6_ = llvm.extractvalue %s1[2] : !llvm.struct<(f32, f32, f32, f32)>
        %n7_ = llvm.extractvalue %s1[3] : !llvm.struct<(f32, f32, f32, f32)>
        scf.yield %n0_, %n1_, %n2_, %n3_, %n4_, %n5_, %n6_, %n7_ : f32, f32, f32, f32, f32, f32, f32, f32
      }
)mlir";

/// One candidate of a row's running maximum: the product `{E}` at column
/// `{C}` (an index), rounded to bf16 (round to nearest even, as cuBLAS
/// stores a bf16 logit), taken when its column is inside the vocabulary and
/// it exceeds the maximum `{V}` so far (strict: in ascending column order
/// the lowest id among equal maxima stays); `{N}` the NaN flag so far.
/// Defines `{P}v`, `{P}i`, `{P}n`.
constexpr const char *kCandidate = R"mlir(
      {P}ok = arith.cmpi ult, {C}, %cols : index
      {P}bits = arith.bitcast {E} : f32 to i32
      {P}lsb0 = arith.shrui {P}bits, %s16 : i32
      {P}lsb = arith.andi {P}lsb0, %one32 : i32
      {P}up0 = arith.addi {P}bits, %rnd : i32
      {P}up = arith.addi {P}up0, {P}lsb : i32
      {P}rb = arith.andi {P}up, %hi16 : i32
      {P}r = arith.bitcast {P}rb : i32 to f32
      {P}gt0 = arith.cmpf ogt, {P}r, {V} : f32
      {P}gt = arith.andi {P}gt0, {P}ok : i1
      {P}c32 = arith.index_cast {C} : index to i32
      {P}v = arith.select {P}gt, {P}r, {V} : f32
      {P}i = arith.select {P}gt, {P}c32, {I} : i32
      {P}isnan0 = arith.cmpf uno, {E}, {E} : f32
      {P}isnan = arith.andi {P}isnan0, {P}ok : i1
      {P}nan32 = arith.extui {P}isnan : i1 to i32
      {P}n = arith.ori {N}, {P}nan32 : i32
)mlir";

/// The larger of (`{V}`, `{I}`, `{N}`) and (`{OV}`, `{OI}`, `{ON}`): the
/// other's value when it is larger, or equal with a lower id; NaN flags
/// ORed. Defines `{P}v`, `{P}i`, `{P}n`.
constexpr const char *kCombine = R"mlir(
      {P}gt = arith.cmpf ogt, {OV}, {V} : f32
      {P}eq = arith.cmpf oeq, {OV}, {V} : f32
      {P}lt = arith.cmpi slt, {OI}, {I} : i32
      {P}tie = arith.andi {P}eq, {P}lt : i1
      {P}take = arith.ori {P}gt, {P}tie : i1
      {P}v = arith.select {P}take, {OV}, {V} : f32
      {P}i = arith.select {P}take, {OI}, {I} : i32
      {P}n = arith.ori {N}, {ON} : i32
)mlir";

/// kCombine with the lane `lane ^ {OFF}` (a shuffle of the three values).
constexpr const char *kShuffleCombine = R"mlir(
      {P}ov, {P}okv = gpu.shuffle xor {V}, {OFF}, %width : f32
      {P}oi, {P}oki = gpu.shuffle xor {I}, {OFF}, %width : i32
      {P}on, {P}okn = gpu.shuffle xor {N}, {OFF}, %width : i32
)mlir";

/// Thread t < 16 folds the four warps' maxima of row m0 + t (warp order is
/// column order) and writes its tile's entry.
constexpr const char *kRowTail = R"mlir(
      gpu.barrier
      scf.if %row_lead {
        %wv0 = memref.load %sv[%c0, %tid] : memref<4x16xf32, #gpu.address_space<workgroup>>
        %wi0 = memref.load %si[%c0, %tid] : memref<4x16xi32, #gpu.address_space<workgroup>>
        %wn0 = memref.load %sn[%c0, %tid] : memref<4x16xi32, #gpu.address_space<workgroup>>
)mlir";

/// Running maximum of one row over this lane's four candidates, then over
/// the four lanes of its group; returns the stem of the result.
std::string rowMaximum(std::string &o, const std::string &row,
                       const char *const (&values)[4]) {
  const char *cols[4] = {"%c00", "%c01", "%c10", "%c11"};
  std::string v = "%ninf", i = "%none", n = "%z32";
  for (int c = 0; c < 4; ++c) {
    std::string p = "%" + row + "c" + std::to_string(c) + "_";
    o += subst(kCandidate, {{"P", p}, {"E", values[c]}, {"C", cols[c]},
                            {"V", v}, {"I", i}, {"N", n}});
    v = p + "v", i = p + "i", n = p + "n";
  }
  for (int s = 0; s < 2; ++s) {
    std::string p = "%" + row + "x" + std::to_string(s) + "_";
    const char *off = s == 0 ? "%one32" : "%two32";
    o += subst(kShuffleCombine,
               {{"P", p}, {"V", v}, {"I", i}, {"N", n}, {"OFF", off}});
    o += subst(kCombine, {{"P", p}, {"V", v}, {"I", i}, {"N", n},
                          {"OV", p + "ov"}, {"OI", p + "oi"},
                          {"ON", p + "on"}});
    v = p + "v", i = p + "i", n = p + "n";
  }
  return "%" + row + "x1_";
}

} // namespace

std::string lmHeadArgmaxKernelText() {
  std::string o = kHead;
  const char *rowA[4] = {"%e#0", "%e#1", "%e#4", "%e#5"};
  const char *rowB[4] = {"%e#2", "%e#3", "%e#6", "%e#7"};
  const std::string a = rowMaximum(o, "ma", rowA);
  const std::string b = rowMaximum(o, "mb", rowB);
  // Lane q = 0 of each group writes its rows' maxima for the warp.
  o += subst(R"mlir(
      scf.if %lead {
        memref.store {A}v, %sv[%warp, %g] : memref<4x16xf32, #gpu.address_space<workgroup>>
        memref.store {A}i, %si[%warp, %g] : memref<4x16xi32, #gpu.address_space<workgroup>>
        memref.store {A}n, %sn[%warp, %g] : memref<4x16xi32, #gpu.address_space<workgroup>>
        memref.store {B}v, %sv[%warp, %g8] : memref<4x16xf32, #gpu.address_space<workgroup>>
        memref.store {B}i, %si[%warp, %g8] : memref<4x16xi32, #gpu.address_space<workgroup>>
        memref.store {B}n, %sn[%warp, %g8] : memref<4x16xi32, #gpu.address_space<workgroup>>
      }
)mlir",
             {{"A", a}, {"B", b}});
  o += kRowTail;
  std::string v = "%wv0", i = "%wi0", n = "%wn0";
  for (int w = 1; w < 4; ++w) {
    const std::string p = "%wf" + std::to_string(w) + "_";
    const std::string cw = "%c" + std::to_string(w);
    o += subst(R"mlir(
        {P}ov = memref.load %sv[{W}, %tid] : memref<4x16xf32, #gpu.address_space<workgroup>>
        {P}oi = memref.load %si[{W}, %tid] : memref<4x16xi32, #gpu.address_space<workgroup>>
        {P}on = memref.load %sn[{W}, %tid] : memref<4x16xi32, #gpu.address_space<workgroup>>
)mlir",
               {{"P", p}, {"W", cw}});
    o += subst(kCombine, {{"P", p}, {"V", v}, {"I", i}, {"N", n},
                          {"OV", p + "ov"}, {"OI", p + "oi"},
                          {"ON", p + "on"}});
    v = p + "v", i = p + "i", n = p + "n";
  }
  o += subst(R"mlir(
        %row = arith.addi %m0, %tid : index
        %live = arith.cmpi ult, %row, %rows : index
        scf.if %live {
          %isnan = arith.cmpi ne, {N}, %z32 : i32
          %out = arith.select %isnan, %qnan, {V} : f32
          memref.store %out, %pv[%row, %tile] : memref<?x?xf32, strided<[?, 1], offset: ?>>
          memref.store {I}, %pi[%row, %tile] : memref<?x?xi32, strided<[?, 1], offset: ?>>
        }
      }
      gpu.barrier
    }
    gpu.return
  }
)mlir",
             {{"V", v}, {"I", i}, {"N", n}});
  return o;
}

} // namespace bt::codegen
