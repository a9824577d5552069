//===- GPUSamplerKernels.cpp - the sampler's kernels ----------------------===//
//
// bt-gpu-sampler-kernels (CUDA/Passes.td): a module whose host code calls
// the runtime's sampler (`bt_rt_sample`, SampleBufferization.cpp) gets the
// kernels that let the runtime sample on the device, so that a greedy step
// of decode_tokens copies neither the logits to the host nor the tokens back
// (docs/generation.md, "Sampling on the device"). The runtime's callback
// `_mlir_ciface_bt_gpu_sample` launches them by name with the descriptors it
// receives (runtime/device/cuda/cuda_call.cc); their source is the MLIR
// below, so they go through the same device passes, PTX and emulator
// library as every other kernel.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/BF16.h"
#include "bt/Codegen/CUDA/Passes.h"
#include "GPUKernelText.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

namespace bt {
#define GEN_PASS_DEF_BTGPUSAMPLERKERNELS
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;
using bt::codegen::subst;

namespace {

/// `bt_sample_greedy(logits, tokens, state, step, first, eos, pad)`, one
/// thread block of 256 threads per row r of the batch: grid B' x 1 x 1,
/// block 256 x 1 x 1, 3072 bytes of dynamic shared memory (the launch of
/// runtime/device/cuda/cuda_call.cc SampleOnDevice, kSampleThreads):
///
/// - logits F32 [B', V] (any strides), tokens I64 [B'] (any stride);
/// - state I64 [B'', 2], B'' >= B': [r, 0] whether row r emitted EOS earlier
///   in this block (read only when step > 0, reset at step 0), [r, 1] set to
///   1 when the row's logits hold a NaN (sticky; zeroed when `first` != 0, the
///   first launch on a fresh state buffer);
/// - step: the step within the block (0 .. L_B - 1); eos: the EOS id (< 0:
///   no EOS handling); pad: generation_pad_token_id.
///
/// The token is the runtime's greedy choice (sampler_callback.h ArgMax: the
/// lowest id among equal maxima, -inf counts, an all -inf row gives 0), or
/// `pad` after the row's EOS in this block or for a NaN row. Thread t scans
/// ids t, t + 256, ... in ascending order keeping the first strict maximum
/// (ArgMax's comparison), so it holds the lowest id of its share's maximum,
/// or none (value -inf, id V) when no logit of its share exceeds -inf; a
/// tree over shared memory then keeps the larger value, the lower id among
/// equal values (== also for +0 and -0, as ArgMax's strict >), and ORs the
/// NaN flags: the same id as ArgMax's sequential scan. A row's V logits are
/// read once, coalesced (consecutive threads read consecutive ids).
constexpr const char *kGreedyHead = R"mlir(
  gpu.func @{NAME}(
      %logits: memref<?x?xf32, strided<[?, ?], offset: ?>>,{IDS}
      %tokens: memref<?xi64, strided<[?], offset: ?>>,
      %state: memref<?x2xi64>, %step: i64, %first: i64, %eos: i64,
      %pad: i64) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %c1024 = arith.constant 1024 : index
    %c2048 = arith.constant 2048 : index
    %zero = arith.constant 0 : i64
    %one = arith.constant 1 : i64
    %z32 = arith.constant 0 : i32
    %true = arith.constant true
    %ninf = arith.constant 0xFF800000 : f32
    %r = gpu.block_id x
    %t = gpu.thread_id x
    %rows = memref.dim %tokens, %c0 : memref<?xi64, strided<[?], offset: ?>>
    %vocab = memref.dim %logits, %c1 : memref<?x?xf32, strided<[?, ?], offset: ?>>
    %none = arith.index_cast %vocab : index to i32
    %raw = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %sv = memref.view %raw[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xf32, #gpu.address_space<workgroup>>
    %si = memref.view %raw[%c1024][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xi32, #gpu.address_space<workgroup>>
    %sn = memref.view %raw[%c2048][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xi32, #gpu.address_space<workgroup>>
    %lead = arith.cmpi eq, %t, %c0 : index
)mlir";

/// The row's EOS rule, shared by both kernels (%r, %rows, %lead, %state,
/// %step, %first, %eos, %pad, %tokens defined before it): a row that emitted
/// EOS earlier in this block gets `pad` (thread 0 writes it) and nothing
/// else; the other rows go on in the `else` region it leaves open.
constexpr const char *kEosPrologue = R"mlir(
    %live = arith.cmpi ult, %r, %rows : index
    scf.if %live {
      %is_first = arith.cmpi ne, %first, %zero : i64
      %at0 = arith.cmpi eq, %step, %zero : i64
      %fin = scf.if %at0 -> (i64) {
        scf.yield %zero : i64
      } else {
        %old = memref.load %state[%r, %c0] : memref<?x2xi64>
        scf.yield %old : i64
      }
      %eos_on = arith.cmpi sge, %eos, %zero : i64
      %done = arith.cmpi ne, %fin, %zero : i64
      %skip = arith.andi %eos_on, %done : i1
      scf.if %skip {
        scf.if %lead {
          scf.if %is_first {
            memref.store %zero, %state[%r, %c1] : memref<?x2xi64>
          }
          memref.store %fin, %state[%r, %c0] : memref<?x2xi64>
          memref.store %pad, %tokens[%r] : memref<?xi64, strided<[?], offset: ?>>
        }
      } else {
)mlir";

/// bt_sample_greedy after kEosPrologue: the argmax of the row.
constexpr const char *kGreedyBody = R"mlir(
        %best:3 = scf.for %v = %t to %vocab step %c256
            iter_args(%bi = %none, %bv = %ninf, %nan = %z32) -> (i32, f32, i32) {
          %l = memref.load %logits[%r, %v] : memref<?x?xf32, strided<[?, ?], offset: ?>>
          %is_nan = arith.cmpf uno, %l, %l : f32
          %gt = arith.cmpf ogt, %l, %bv : f32
          {ID}
          %ni = arith.select %gt, %v32, %bi : i32
          %nv = arith.select %gt, %l, %bv : f32
          %n32 = arith.extui %is_nan : i1 to i32
          %nn = arith.ori %nan, %n32 : i32
          scf.yield %ni, %nv, %nn : i32, f32, i32
        }
        memref.store %best#1, %sv[%t] : memref<256xf32, #gpu.address_space<workgroup>>
        memref.store %best#0, %si[%t] : memref<256xi32, #gpu.address_space<workgroup>>
        memref.store %best#2, %sn[%t] : memref<256xi32, #gpu.address_space<workgroup>>
        gpu.barrier
        // Halves of 128, 64, ..., 1 threads fold the upper half into theirs.
        scf.for %k = %c0 to %c8 step %c1 {
          %half = arith.shrui %c128, %k : index
          %act = arith.cmpi ult, %t, %half : index
          scf.if %act {
            %u = arith.addi %t, %half : index
            %v1 = memref.load %sv[%t] : memref<256xf32, #gpu.address_space<workgroup>>
            %i1 = memref.load %si[%t] : memref<256xi32, #gpu.address_space<workgroup>>
            %n1 = memref.load %sn[%t] : memref<256xi32, #gpu.address_space<workgroup>>
            %v2 = memref.load %sv[%u] : memref<256xf32, #gpu.address_space<workgroup>>
            %i2 = memref.load %si[%u] : memref<256xi32, #gpu.address_space<workgroup>>
            %n2 = memref.load %sn[%u] : memref<256xi32, #gpu.address_space<workgroup>>
            %gt2 = arith.cmpf ogt, %v2, %v1 : f32
            %eq2 = arith.cmpf oeq, %v2, %v1 : f32
            %lt2 = arith.cmpi slt, %i2, %i1 : i32
            %tie = arith.andi %eq2, %lt2 : i1
            %take = arith.ori %gt2, %tie : i1
            %mv = arith.select %take, %v2, %v1 : f32
            %mi = arith.select %take, %i2, %i1 : i32
            %mn = arith.ori %n1, %n2 : i32
            memref.store %mv, %sv[%t] : memref<256xf32, #gpu.address_space<workgroup>>
            memref.store %mi, %si[%t] : memref<256xi32, #gpu.address_space<workgroup>>
            memref.store %mn, %sn[%t] : memref<256xi32, #gpu.address_space<workgroup>>
          }
          gpu.barrier
        }
        scf.if %lead {
          %fv = memref.load %sv[%c0] : memref<256xf32, #gpu.address_space<workgroup>>
          %fi = memref.load %si[%c0] : memref<256xi32, #gpu.address_space<workgroup>>
          %fn = memref.load %sn[%c0] : memref<256xi32, #gpu.address_space<workgroup>>
          %is_nan = arith.cmpi ne, %fn, %z32 : i32
          %no_max = arith.cmpf oeq, %fv, %ninf : f32
          %fi64 = arith.extui %fi : i32 to i64
          %id = arith.select %no_max, %zero, %fi64 : i64
          scf.if %is_first {
            memref.store %zero, %state[%r, %c1] : memref<?x2xi64>
          }
          scf.if %is_nan {
            memref.store %one, %state[%r, %c1] : memref<?x2xi64>
          }
          %tok = arith.select %is_nan, %pad, %id : i64
          %hit = arith.cmpi eq, %id, %eos : i64
          %valid = arith.xori %is_nan, %true : i1
          %hit_on = arith.andi %eos_on, %hit : i1
          %ended = arith.andi %hit_on, %valid : i1
          %nf = arith.select %ended, %one, %fin : i64
          memref.store %nf, %state[%r, %c0] : memref<?x2xi64>
          memref.store %tok, %tokens[%r] : memref<?xi64, strided<[?], offset: ?>>
        }
      }
    }
    gpu.return
  }
)mlir";

/// The text of `bt_sample_greedy` (documented at kGreedyHead) or, with
/// `partials`, of `bt_sample_greedy_partials(pv, pi, tokens, state, step,
/// first, eos, pad)`: the greedy token of each row from the per-tile maxima
/// of bt_lm_head_argmax_bf16 (GPUKernelText.h) instead of the logits, so
/// that a greedy step whose logits nobody keeps never writes them:
///
/// - pv F32 [B', T] (any strides): row r's largest logit among the ids of
///   tile j (-inf when none exceeds -inf, NaN when one is NaN);
/// - pi I32 [B', T] (any strides): its lowest id (2^31 - 1 for none);
/// - tokens, state, step, first, eos, pad and the launch (grid B', block
///   256, 3072 bytes of shared memory) as bt_sample_greedy's.
///
/// pv[r, j] takes the place of logit j and pi[r, j] of its id in
/// bt_sample_greedy's scan: thread t visits the tiles t, t + 256, ... in
/// ascending order and keeps the first strict maximum, whose id is the
/// lowest of its share's maximum because the tiles' ids ascend with j; the
/// tree keeps the lower id among equal values, a NaN tile flags the row, and
/// a row without a value above -inf gives 0. So the token is
/// bt_sample_greedy_bf16's on logits equal to those the LM head computed.
std::string greedyKernelText(bool partials) {
  std::string head = subst(
      kGreedyHead,
      {{"NAME", partials ? "bt_sample_greedy_partials" : "bt_sample_greedy"},
       {"IDS", partials ? "\n      %ids: memref<?x?xi32, strided<[?, ?], offset: ?>>,"
                        : ""}});
  std::string body = subst(
      kGreedyBody,
      {{"ID", partials ? "%v32 = memref.load %ids[%r, %v] : "
                         "memref<?x?xi32, strided<[?, ?], offset: ?>>"
                       : "%v32 = arith.index_cast %v : index to i32"}});
  return head + kEosPrologue + body;
}

/// The text of `bt_sample` (documented at sampleKernelText), written as a
/// sequence of passes over the row with block-wide reductions between them.
class SampleKernelWriter {
public:
  std::string out;

  /// A fresh SSA name stem.
  std::string fresh(const char *stem) {
    return std::string("%") + stem + std::to_string(counter++) + "_";
  }
  /// A tree over the 256 threads' values `in` (f64 or i64) with `op`
  /// (an arith binary op); every thread gets the result. The shared buffer
  /// is free again when it returns (a barrier after the read).
  std::string reduce(const std::string &in, bool f64, const char *op) {
    std::string p = fresh("red");
    out += subst(R"(
        memref.store {IN}, {BUF}[%t] : {BT}
        gpu.barrier
        scf.for {P}k = %c0 to %c8 step %c1 {
          {P}h = arith.shrui %c128, {P}k : index
          {P}a = arith.cmpi ult, %t, {P}h : index
          scf.if {P}a {
            {P}u = arith.addi %t, {P}h : index
            {P}x = memref.load {BUF}[%t] : {BT}
            {P}y = memref.load {BUF}[{P}u] : {BT}
            {P}z = {OP} {P}x, {P}y : {T}
            memref.store {P}z, {BUF}[%t] : {BT}
          }
          gpu.barrier
        }
        {P}r = memref.load {BUF}[%c0] : {BT}
        gpu.barrier
)",
                 {{"P", p},
                  {"IN", in},
                  {"BUF", f64 ? "%shf" : "%shi"},
                  {"BT", f64 ? kSharedF64 : kSharedI64},
                  {"T", f64 ? "f64" : "i64"},
                  {"OP", op}});
    return p + "r";
  }
  /// The exclusive prefix sum over threads 0 .. t - 1 of `in`, added in
  /// thread order by thread 0 (the order of the ids, chunk by chunk).
  std::string exclusiveScan(const std::string &in, bool f64) {
    std::string p = fresh("scan");
    out += subst(R"(
        memref.store {IN}, {BUF}[%t] : {BT}
        gpu.barrier
        scf.if %lead {
          {P}s = scf.for {P}i = %c0 to %c256 step %c1 iter_args({P}acc = {ZERO}) -> ({T}) {
            {P}v = memref.load {BUF}[{P}i] : {BT}
            memref.store {P}acc, {BUF}[{P}i] : {BT}
            {P}n = {ADD} {P}acc, {P}v : {T}
            scf.yield {P}n : {T}
          }
        }
        gpu.barrier
        {P}r = memref.load {BUF}[%t] : {BT}
        gpu.barrier
)",
                 {{"P", p},
                  {"IN", in},
                  {"BUF", f64 ? "%shf" : "%shi"},
                  {"BT", f64 ? kSharedF64 : kSharedI64},
                  {"T", f64 ? "f64" : "i64"},
                  {"ZERO", f64 ? "%f0" : "%zero"},
                  {"ADD", f64 ? "arith.addf" : "arith.addi"}});
    return p + "r";
  }

  static constexpr const char *kSharedF64 =
      "memref<256xf64, #gpu.address_space<workgroup>>";
  static constexpr const char *kSharedI64 =
      "memref<256xi64, #gpu.address_space<workgroup>>";

private:
  int counter = 0;
};

/// The element `{V}` (an index) of the row: its logit `{P}l`, the order-preserving
/// unsigned key of the logit `{P}key` (i64 in [0, 2^32): the bits with the
/// sign bit flipped for +, all bits flipped for -), x = logit / temperature
/// `{P}x` (f64, the CPU sampler's `p[v] * inv_t`), whether top-k keeps it
/// `{P}tk` (x >= %thr) and x or -inf when masked `{P}xm`.
constexpr const char *kElement = R"(
            {P}l = memref.load %logits[%r, {V}] : memref<?x?xf32, strided<[?, ?], offset: ?>>
            {P}x0 = arith.extf {P}l : f32 to f64
            {P}x = arith.mulf {P}x0, %inv_t : f64
            {P}b = arith.bitcast {P}l : f32 to i32
            {P}n = arith.cmpi slt, {P}b, %z32 : i32
            {P}f = arith.select {P}n, %m32, %s32 : i32
            {P}k32 = arith.xori {P}b, {P}f : i32
            {P}key = arith.extui {P}k32 : i32 to i64
            {P}tk = arith.cmpf oge, {P}x, %thr : f64
            {P}xm = arith.select {P}tk, {P}x, %ninf : f64
)";
/// After kElement, with %m (max of the kept x) and %z: the probability
/// `{P}p` = exp(xm - m) / z (0 for a masked token).
constexpr const char *kProbability = R"(
            {P}d = arith.subf {P}xm, %m : f64
            {P}e = math.exp {P}d : f64
            {P}p = arith.divf {P}e, %z : f64
)";
/// After kProbability, inside the draw passes (%ks, %nkeep, %all, %kept of
/// top-p; `{RK}` the tie rank so far): whether the token is in the final
/// distribution `{P}keep`, its probability `{P}q` and the next tie rank
/// `{P}nrk`.
constexpr const char *kKeep = R"(
            {P}pos = arith.cmpf ogt, {P}p, %f0 : f64
            {P}gt = arith.cmpi ugt, {P}key, %ks : i64
            {P}eq = arith.cmpi eq, {P}key, %ks : i64
            {P}tie = arith.andi {P}eq, {P}pos : i1
            {P}rok = arith.cmpi slt, {RK}, %nkeep : i64
            {P}tok = arith.andi {P}tie, {P}rok : i1
            {P}in0 = arith.ori {P}gt, {P}tok : i1
            {P}in1 = arith.ori {P}in0, %all : i1
            {P}keep = arith.andi {P}pos, {P}in1 : i1
            {P}ti = arith.extui {P}tie : i1 to i64
            {P}nrk = arith.addi {RK}, {P}ti : i64
            {P}q = arith.divf {P}p, %kept : f64
)";

/// bt_sample, the kernel's signature, constants and the row's chunk of ids.
constexpr const char *kHead = R"(
  gpu.func @bt_sample(
      %logits: memref<?x?xf32, strided<[?, ?], offset: ?>>,
      %tokens: memref<?xi64, strided<[?], offset: ?>>,
      %state: memref<?x2xi64>, %rng: memref<?xi64>, %step: i64, %first: i64,
      %eos: i64, %pad: i64, %inv_t: f64, %top_k: i64, %top_p: f64) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c32 = arith.constant 32 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %c2048 = arith.constant 2048 : index
    %zero = arith.constant 0 : i64
    %one = arith.constant 1 : i64
    %two = arith.constant 2 : i64
    %three = arith.constant 3 : i64
    %minus1 = arith.constant -1 : i64
    %kmax = arith.constant 4294967295 : i64
    %z32 = arith.constant 0 : i32
    %m32 = arith.constant -1 : i32
    %s32 = arith.constant -2147483648 : i32
    %true = arith.constant true
    %f0 = arith.constant 0.0 : f64
    %f1 = arith.constant 1.0 : f64
    %ninf = arith.constant 0xFFF0000000000000 : f64
    %pinf = arith.constant 0x7FF0000000000000 : f64
    %r = gpu.block_id x
    %t = gpu.thread_id x
    %lead = arith.cmpi eq, %t, %c0 : index
    %rows = memref.dim %tokens, %c0 : memref<?xi64, strided<[?], offset: ?>>
    %vocab = memref.dim %logits, %c1 : memref<?x?xf32, strided<[?, ?], offset: ?>>
    %vocab64 = arith.index_cast %vocab : index to i64
    %raw = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %shf = memref.view %raw[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xf64, #gpu.address_space<workgroup>>
    %shi = memref.view %raw[%c2048][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xi64, #gpu.address_space<workgroup>>
    %chunk = arith.ceildivui %vocab, %c256 : index
    %lo0 = arith.muli %t, %chunk : index
    %lo = arith.minui %lo0, %vocab : index
    %hi0 = arith.addi %lo, %chunk : index
    %hi = arith.minui %hi0, %vocab : index
)";

/// bt_sample after kEosPrologue: the NaN scan (pass 1).
constexpr const char *kNanScan = R"(
        %nan_t = scf.for %nv = %lo to %hi step %c1 iter_args(%na = %zero) -> (i64) {
          %nl = memref.load %logits[%r, %nv] : memref<?x?xf32, strided<[?, ?], offset: ?>>
          %nu = arith.cmpf uno, %nl, %nl : f32
          %nu64 = arith.extui %nu : i1 to i64
          %no = arith.ori %na, %nu64 : i64
          scf.yield %no : i64
        }
)";
/// bt_sample, Top-k: the bisection over the 32-bit keys, counting the keys >= the midpoint ({NAN}: the NaN flag).
constexpr const char *kTopKBisection = R"(
        %has_nan = arith.cmpi ne, {NAN}, %zero : i64
        %finite_ok = arith.xori %has_nan, %true : i1
        %k_pos = arith.cmpi sgt, %top_k, %zero : i64
        %k_lt = arith.cmpi slt, %top_k, %vocab64 : i64
        %k_on0 = arith.andi %k_pos, %k_lt : i1
        %k_on = arith.andi %k_on0, %finite_ok : i1
        %thr = scf.if %k_on -> (f64) {
          %kb:2 = scf.for %kit = %c0 to %c32 step %c1 iter_args(%blo = %zero, %bhi = %kmax) -> (i64, i64) {
            %ks0 = arith.addi %blo, %bhi : i64
            %ks1 = arith.addi %ks0, %one : i64
            %kmid = arith.shrui %ks1, %one : i64
            %kcnt = scf.for %kv = %lo to %hi step %c1 iter_args(%ka = %zero) -> (i64) {
              %kl = memref.load %logits[%r, %kv] : memref<?x?xf32, strided<[?, ?], offset: ?>>
              %kbits = arith.bitcast %kl : f32 to i32
              %kneg = arith.cmpi slt, %kbits, %z32 : i32
              %kflip = arith.select %kneg, %m32, %s32 : i32
              %kk32 = arith.xori %kbits, %kflip : i32
              %kkey = arith.extui %kk32 : i32 to i64
              %kge = arith.cmpi uge, %kkey, %kmid : i64
              %kge64 = arith.extui %kge : i1 to i64
              %kn = arith.addi %ka, %kge64 : i64
              scf.yield %kn : i64
            }
)";
/// bt_sample, Top-k: the next bisection bounds ({CNT}: the count), the threshold x of the found key, and the opening of the max scan.
constexpr const char *kTopKThreshold = R"(
            %kok = arith.cmpi sge, {CNT}, %top_k : i64
            %knlo = arith.select %kok, %kmid, %blo : i64
            %kmm1 = arith.subi %kmid, %one : i64
            %knhi = arith.select %kok, %bhi, %kmm1 : i64
            scf.yield %knlo, %knhi : i64, i64
          }
          %tk32 = arith.trunci %kb#0 : i64 to i32
          %tpos = arith.cmpi slt, %tk32, %z32 : i32
          %tflip = arith.select %tpos, %s32, %m32 : i32
          %tbits = arith.xori %tk32, %tflip : i32
          %tl = arith.bitcast %tbits : i32 to f32
          %tx0 = arith.extf %tl : f32 to f64
          %tx = arith.mulf %tx0, %inv_t : f64
          scf.yield %tx : f64
        } else {
          scf.yield %ninf : f64
        }
        %mx_t = scf.for %mv = %lo to %hi step %c1 iter_args(%ma = %ninf) -> (f64) {)";
/// bt_sample, The max scan's step ({P}: its element).
constexpr const char *kMaxStep = R"(
          %mn = arith.maximumf %ma, {P}xm : f64
          scf.yield %mn : f64
        }
)";
/// bt_sample, The error code of the row ({M}: the max) and the opening of the softmax normalizer's scan.
constexpr const char *kErrorsAndZ = R"(
        %m = arith.addf {M}, %f0 : f64
        %m_pinf = arith.cmpf oeq, %m, %pinf : f64
        %m_ninf = arith.cmpf oeq, %m, %ninf : f64
        %c_inf = arith.select %m_pinf, %two, %zero : i64
        %c_none = arith.select %m_ninf, %three, %c_inf : i64
        %code = arith.select %has_nan, %one, %c_none : i64
        %ok = arith.cmpi eq, %code, %zero : i64
        %res:2 = scf.if %ok -> (i64, i64) {
          %rng_old = memref.load %rng[%r] : memref<?xi64>
          %z_t = scf.for %zv = %lo to %hi step %c1 iter_args(%za = %f0) -> (f64) {)";
/// bt_sample, The normalizer scan's step ({P}: its element).
constexpr const char *kZStep = R"(
            {P}d = arith.subf {P}xm, %m : f64
            {P}e = math.exp {P}d : f64
            %zn = arith.addf %za, {P}e : f64
            scf.yield %zn : f64
          }
)";
/// bt_sample, Top-p: the bisection over the keys for the mass at or above the midpoint ({Z}: the normalizer).
constexpr const char *kTopPBisection = R"(
          %z = arith.addf {Z}, %f0 : f64
          %p_on = arith.cmpf olt, %top_p, %f1 : f64
          %tp:5 = scf.if %p_on -> (i64, i64, f64, i64, i1) {
            %pb:2 = scf.for %pit = %c0 to %c32 step %c1 iter_args(%plo = %zero, %phi = %kmax) -> (i64, i64) {
              %ps0 = arith.addi %plo, %phi : i64
              %ps1 = arith.addi %ps0, %one : i64
              %pmid = arith.shrui %ps1, %one : i64
              %psum = scf.for %pv = %lo to %hi step %c1 iter_args(%pa = %f0) -> (f64) {)";
/// bt_sample, Top-p: the bisection scan's step ({P}: its element).
constexpr const char *kTopPSumStep = R"(
                %pge = arith.cmpi uge, {P}key, %pmid : i64
                %padd = arith.select %pge, {P}p, %f0 : f64
                %pn = arith.addf %pa, %padd : f64
                scf.yield %pn : f64
              }
)";
/// bt_sample, Top-p: the next bisection bounds ({S}: the mass), then the scan for the mass above the cut, the total, the ties and their p.
constexpr const char *kTopPCut = R"(
              %pok = arith.cmpf oge, {S}, %top_p : f64
              %pnlo = arith.select %pok, %pmid, %plo : i64
              %pmm1 = arith.subi %pmid, %one : i64
              %pnhi = arith.select %pok, %phi, %pmm1 : i64
              scf.yield %pnlo, %pnhi : i64, i64
            }
            %kstar = arith.addi %pb#0, %zero : i64
            %tq:4 = scf.for %qv = %lo to %hi step %c1 iter_args(%qgt = %f0, %qall = %f0, %qti = %zero, %qps = %f0) -> (f64, f64, i64, f64) {)";
/// bt_sample, Top-p: the scan's step over the cut's ties ({P}: its element).
constexpr const char *kTopPTies = R"(
              %qg = arith.cmpi ugt, {P}key, %kstar : i64
              %qe = arith.cmpi eq, {P}key, %kstar : i64
              %qpos = arith.cmpf ogt, {P}p, %f0 : f64
              %qtie = arith.andi %qe, %qpos : i1
              %qgadd = arith.select %qg, {P}p, %f0 : f64
              %qngt = arith.addf %qgt, %qgadd : f64
              %qnall = arith.addf %qall, {P}p : f64
              %qt64 = arith.extui %qtie : i1 to i64
              %qnti = arith.addi %qti, %qt64 : i64
              %qtp = arith.select %qtie, {P}p, %f0 : f64
              %qnps = arith.maximumf %qps, %qtp : f64
              scf.yield %qngt, %qnall, %qnti, %qnps : f64, f64, i64, f64
            }
)";
/// bt_sample, Top-p: how many ties are kept and the kept mass; the draw u from the row's stream; the opening of the chunk-sum scan.
constexpr const char *kTopPEnd = R"(
            %pall = arith.cmpf olt, {SALL}, %top_p : f64
            %b1 = arith.addf {SGT}, {PSTAR} : f64
            %w:2 = scf.while (%wj = %one, %wb = %b1) : (i64, f64) -> (i64, f64) {
              %wmore = arith.cmpi slt, %wj, {TIES} : i64
              %wunder = arith.cmpf olt, %wb, %top_p : f64
              %wc = arith.andi %wmore, %wunder : i1
              scf.condition(%wc) %wj, %wb : i64, f64
            } do {
            ^bb0(%wj2: i64, %wb2: f64):
              %wj3 = arith.addi %wj2, %one : i64
              %wb3 = arith.addf %wb2, {PSTAR} : f64
              scf.yield %wj3, %wb3 : i64, f64
            }
            %pkept = arith.select %pall, {SALL}, %w#1 : f64
            scf.yield %kstar, %w#0, %pkept, {TBASE}, %pall : i64, i64, f64, i64, i1
          } else {
            scf.yield %zero, %zero, %f1, %zero, %true : i64, i64, f64, i64, i1
          }
          %ks = arith.addi %tp#0, %zero : i64
          %nkeep = arith.addi %tp#1, %zero : i64
          %kept = arith.addf %tp#2, %f0 : f64
          %all = arith.ori %tp#4, %tp#4 : i1
          %gamma = arith.constant {GAMMA} : i64
          %mix1 = arith.constant {MIX1} : i64
          %mix2 = arith.constant {MIX2} : i64
          %c30 = arith.constant 30 : i64
          %c27 = arith.constant 27 : i64
          %c31 = arith.constant 31 : i64
          %c11 = arith.constant 11 : i64
          %ulp53 = arith.constant 0x3CA0000000000000 : f64
          %st1 = arith.addi %rng_old, %gamma : i64
          %g1 = arith.shrui %st1, %c30 : i64
          %g2 = arith.xori %st1, %g1 : i64
          %g3 = arith.muli %g2, %mix1 : i64
          %g4 = arith.shrui %g3, %c27 : i64
          %g5 = arith.xori %g3, %g4 : i64
          %g6 = arith.muli %g5, %mix2 : i64
          %g7 = arith.shrui %g6, %c31 : i64
          %g8 = arith.xori %g6, %g7 : i64
          %g9 = arith.shrui %g8, %c11 : i64
          %uf = arith.uitofp %g9 : i64 to f64
          %u = arith.mulf %uf, %ulp53 : f64
          %cs:2 = scf.for %cv = %lo to %hi step %c1 iter_args(%ca = %f0, %crk = %tp#3) -> (f64, i64) {)";
/// bt_sample, The chunk-sum scan's step ({P}: its element).
constexpr const char *kCumStep = R"(
            %cadd = arith.select {P}keep, {P}q, %f0 : f64
            %cn = arith.addf %ca, %cadd : f64
            scf.yield %cn, {P}nrk : f64, i64
          }
)";
/// bt_sample, The scan for the first kept id whose cumulative probability exceeds u ({PRE}: the chunk's starting sum).
constexpr const char *kFindStart = R"(
          %fd:4 = scf.for %dv = %lo to %hi step %c1 iter_args(%dcum = {PRE}, %dfound = %vocab64, %dlast = %minus1, %drk = %tp#3) -> (f64, i64, i64, i64) {)";
/// bt_sample, The find scan's step ({P}: its element).
constexpr const char *kFindStep = R"(
            %dadd = arith.select {P}keep, {P}q, %f0 : f64
            %dncum = arith.addf %dcum, %dadd : f64
            %dv64 = arith.index_cast %dv : index to i64
            %dh0 = arith.cmpf olt, %u, %dncum : f64
            %dh1 = arith.andi %dh0, {P}keep : i1
            %dnone = arith.cmpi eq, %dfound, %vocab64 : i64
            %dh = arith.andi %dh1, %dnone : i1
            %dnf = arith.select %dh, %dv64, %dfound : i64
            %dnl = arith.select {P}keep, %dv64, %dlast : i64
            scf.yield %dncum, %dnf, %dnl, {P}nrk : f64, i64, i64, i64
          }
)";
/// bt_sample, The token ({FMIN}, {LMAX}: the first hit, the last kept id), the state and stream updates.
constexpr const char *kTail = R"(
          %none = arith.cmpi eq, {FMIN}, %vocab64 : i64
          %tok = arith.select %none, {LMAX}, {FMIN} : i64
          scf.yield %tok, %st1 : i64, i64
        } else {
          scf.yield %pad, %zero : i64, i64
        }
        scf.if %lead {
          scf.if %is_first {
            memref.store %zero, %state[%r, %c1] : memref<?x2xi64>
          }
          %bad = arith.cmpi ne, %code, %zero : i64
          scf.if %bad {
            memref.store %code, %state[%r, %c1] : memref<?x2xi64>
          }
          scf.if %ok {
            memref.store %res#1, %rng[%r] : memref<?xi64>
          }
          %hit = arith.cmpi eq, %res#0, %eos : i64
          %hit_on = arith.andi %eos_on, %hit : i1
          %ended = arith.andi %hit_on, %ok : i1
          %nf = arith.select %ended, %one, %fin : i64
          memref.store %nf, %state[%r, %c0] : memref<?x2xi64>
          memref.store %res#0, %tokens[%r] : memref<?xi64, strided<[?], offset: ?>>
        }
      }
    }
    gpu.return
  }
)";

/// `bt_sample(logits, tokens, state, rng, step, first, eos, pad, inv_t,
/// top_k, top_p)`: one token per row drawn from the CPU sampler's
/// distribution (runtime/generate/sampler.cc Distribution / SampleToken),
/// one thread block of 256 threads per row r (grid B', 4096 bytes of dynamic
/// shared memory: an f64 and an i64 slot per thread):
///
/// - logits F32 [B', V] (any strides), tokens I64 [B'] (any stride);
/// - state I64 [B'', 2] as bt_sample_greedy's, except that [r, 1] holds an
///   error code: 1 a NaN logit, 2 a +inf logit kept by top-k, 3 no finite
///   logit (all -inf); the row then gets `pad` and draws nothing;
/// - rng I64 [B'']: row r's SplitMix64 state (sampler.h Rng), advanced by
///   one draw per sampled token and by nothing else;
/// - step, first, eos, pad: as bt_sample_greedy's;
/// - inv_t: 1 / temperature (f64, as the CPU computes it); top_k: 0 or >= V
///   is off; top_p: 1 is off.
///
/// Thread t owns the ids [t C, (t + 1) C), C = ceil(V / 256), visited in
/// ascending order. With x = logit * inv_t in f64:
/// 1. NaN check.
/// 2. top-k: the k-th largest logit by bisection over the 32-bit keys (the
///    largest key with at least k keys >= it, 32 counting passes); x is
///    monotone in the logit, so the threshold is that logit * inv_t, and
///    x < threshold is masked as on the CPU (ties at the threshold kept).
/// 3. m = max of the kept x (+inf or -inf: error codes 2 / 3); z = sum of
///    exp(x - m); p = exp(x - m) / z.
/// 4. top-p (the CPU's order: p descending, id ascending; keep while the
///    mass before the token is < top_p): K*, the largest key whose tokens
///    and those above carry >= top_p (32 passes), is the key of the token
///    that crosses top_p; every token above it is kept, and of the tokens
///    with key K* (equal logits, equal p) the first n in id order, n counted
///    as the CPU accumulates them; p is divided by the kept mass. When even
///    the total is < top_p (rounding) every token is kept.
/// 5. The draw: u = Uniform() of the row's stream, and the first kept id
///    in ascending order whose cumulative probability exceeds u (the last
///    kept id when none does). Thread t's cumulative starts at the sum of
///    the chunk sums before it.
///
/// The same comparisons and the same f64 values per token as the CPU; the
/// sums (z, the kept mass, the cumulative) are added in another order, so
/// a token can differ from the CPU's only when u, or the top-p boundary,
/// falls within a few ulps of a cumulative sum (docs/generation.md).
std::string sampleKernelText() {
  SampleKernelWriter w;
  std::string &o = w.out;
  // The element of the chunk loop's variable `var` (kElement).
  auto loopElem = [&](const char *stem, const char *var) {
    std::string p = w.fresh(stem);
    o += subst(kElement, {{"P", p}, {"V", var}});
    return p;
  };
  auto prob = [&](const std::string &p) { o += subst(kProbability, {{"P", p}}); };
  o += kHead;
  o += kEosPrologue;
  o += kNanScan;
  std::string nan = w.reduce("%nan_t", false, "arith.maxsi");
  o += subst(kTopKBisection,
             {{"NAN", nan}});
  std::string kcount = w.reduce("%kcnt", false, "arith.addi");
  o += subst(kTopKThreshold,
             {{"CNT", kcount}});
  {
    std::string p = loopElem("m", "%mv");
    o += subst(kMaxStep,
               {{"P", p}});
  }
  std::string m = w.reduce("%mx_t", true, "arith.maximumf");
  o += subst(kErrorsAndZ,
             {{"M", m}});
  {
    std::string p = loopElem("z", "%zv");
    o += subst(kZStep,
               {{"P", p}});
  }
  std::string z = w.reduce("%z_t", true, "arith.addf");
  o += subst(kTopPBisection,
             {{"Z", z}});
  {
    std::string p = loopElem("p", "%pv");
    prob(p);
    o += subst(kTopPSumStep,
               {{"P", p}});
  }
  std::string psum = w.reduce("%psum", true, "arith.addf");
  o += subst(kTopPCut,
             {{"S", psum}});
  {
    std::string p = loopElem("q", "%qv");
    prob(p);
    o += subst(kTopPTies,
               {{"P", p}});
  }
  std::string sgt = w.reduce("%tq#0", true, "arith.addf");
  std::string sall = w.reduce("%tq#1", true, "arith.addf");
  std::string ties = w.reduce("%tq#2", false, "arith.addi");
  std::string pstar = w.reduce("%tq#3", true, "arith.maximumf");
  std::string tbase = w.exclusiveScan("%tq#2", false);
  o += subst(kTopPEnd,
             {{"SALL", sall},
              {"SGT", sgt},
              {"PSTAR", pstar},
              {"TIES", ties},
              {"TBASE", tbase},
              {"GAMMA", std::to_string(static_cast<int64_t>(0x9E3779B97F4A7C15ULL))},
              {"MIX1", std::to_string(static_cast<int64_t>(0xBF58476D1CE4E5B9ULL))},
              {"MIX2", std::to_string(static_cast<int64_t>(0x94D049BB133111EBULL))}});
  {
    std::string p = loopElem("c", "%cv");
    prob(p);
    o += subst(kKeep, {{"P", p}, {"RK", "%crk"}});
    o += subst(kCumStep,
               {{"P", p}});
  }
  std::string pre = w.exclusiveScan("%cs#0", true);
  o += subst(kFindStart,
             {{"PRE", pre}});
  {
    std::string p = loopElem("d", "%dv");
    prob(p);
    o += subst(kKeep, {{"P", p}, {"RK", "%drk"}});
    o += subst(kFindStep,
               {{"P", p}});
  }
  std::string fmin = w.reduce("%fd#1", false, "arith.minsi");
  std::string lmax = w.reduce("%fd#2", false, "arith.maxsi");
  o += subst(kTail,
             {{"FMIN", fmin}, {"LMAX", lmax}});
  return o;
}

/// Adds to `kernels` the bf16 variant of its kernel `name` (`name_bf16`):
/// a clone whose logits (argument 0) are
/// memref<?x?xbf16, strided<[?, ?], offset: ?>>, every logit it loads
/// extended exactly to f32 right after the load (codegen::extendBF16: integer
/// ops, the same on NVPTX and the emulator), so that the rest of the kernel
/// computes on the same f32 values as the f32 kernel would.
void addBF16Variant(gpu::GPUModuleOp kernels, StringRef name) {
  auto f32 = kernels.lookupSymbol<gpu::GPUFuncOp>(name);
  OpBuilder b(f32);
  b.setInsertionPointAfter(f32);
  auto fn = cast<gpu::GPUFuncOp>(b.clone(*f32.getOperation()));
  fn.setName((name + "_bf16").str());
  BlockArgument logits = fn.getArgument(0);
  auto wideType = cast<MemRefType>(logits.getType());
  logits.setType(MemRefType::get(wideType.getShape(), b.getBF16Type(),
                                 wideType.getLayout(),
                                 wideType.getMemorySpace()));
  SmallVector<Type> inputs(fn.front().getArgumentTypes());
  fn.setType(b.getFunctionType(inputs, {}));
  for (Operation *user : llvm::to_vector(logits.getUsers())) {
    auto load = dyn_cast<memref::LoadOp>(user);
    if (!load)
      continue; // memref.dim: no element
    SmallVector<OpOperand *> reads;
    for (OpOperand &use : load.getResult().getUses())
      reads.push_back(&use);
    load.getResult().setType(b.getBF16Type());
    OpBuilder after(load);
    after.setInsertionPointAfter(load);
    Value wide = bt::codegen::extendBF16(after, load.getLoc(), load);
    for (OpOperand *read : reads)
      read->set(wide);
  }
}

struct GPUSamplerKernelsPass
    : public bt::impl::BTGPUSamplerKernelsBase<GPUSamplerKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    const bool f32 = module.lookupSymbol<func::FuncOp>("bt_rt_sample");
    // bt-gpu-lm-head-sampling's call samples like bt_rt_sample_bf16 (and
    // may have replaced every call of it).
    const bool bf16 =
        module.lookupSymbol<func::FuncOp>("bt_rt_sample_bf16") ||
        module.lookupSymbol<func::FuncOp>("bt_gpu_lm_head_sample_bf16");
    if ((!f32 && !bf16) || module.lookupSymbol("bt_sampler_kernels"))
      return;
    ParserConfig config(&getContext());
    // With the bf16 samplers, the LM head whose epilogue is the greedy
    // argmax (GPUKernelText.h).
    const std::string text =
        std::string("gpu.module @bt_sampler_kernels {") +
        greedyKernelText(/*partials=*/false) + sampleKernelText() +
        (bf16 ? bt::codegen::lmHeadArgmaxKernelText() +
                    greedyKernelText(/*partials=*/true)
              : std::string()) +
        "}\n";
    OwningOpRef<ModuleOp> parsed =
        parseSourceString<ModuleOp>(text, config, "bt-sampler");
    if (!parsed) {
      module.emitError("bt-gpu-sampler-kernels: the sampler kernels do not "
                       "parse (internal error)");
      return signalPassFailure();
    }
    // The f32 kernels for bt_rt_sample, their bf16 variants for
    // bt_rt_sample_bf16.
    for (auto kernels :
         llvm::make_early_inc_range(parsed->getOps<gpu::GPUModuleOp>())) {
      for (StringRef name : {"bt_sample_greedy", "bt_sample"}) {
        if (bf16)
          addBF16Variant(kernels, name);
        if (!f32)
          kernels.lookupSymbol<gpu::GPUFuncOp>(name).erase();
      }
      kernels->moveBefore(module.getBody(), module.getBody()->end());
    }
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
  }
};

} // namespace
