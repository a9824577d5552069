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

#include "bt/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

namespace bt {
#define GEN_PASS_DEF_BTGPUSAMPLERKERNELS
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;

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
constexpr const char *kSamplerKernels = R"mlir(
gpu.module @bt_sampler_kernels {
  gpu.func @bt_sample_greedy(
      %logits: memref<?x?xf32, strided<[?, ?], offset: ?>>,
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
    %live = arith.cmpi ult, %r, %rows : index
    scf.if %live {
      %lead = arith.cmpi eq, %t, %c0 : index
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
        %best:3 = scf.for %v = %t to %vocab step %c256
            iter_args(%bi = %none, %bv = %ninf, %nan = %z32) -> (i32, f32, i32) {
          %l = memref.load %logits[%r, %v] : memref<?x?xf32, strided<[?, ?], offset: ?>>
          %is_nan = arith.cmpf uno, %l, %l : f32
          %gt = arith.cmpf ogt, %l, %bv : f32
          %v32 = arith.index_cast %v : index to i32
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
}
)mlir";

struct GPUSamplerKernelsPass
    : public bt::impl::BTGPUSamplerKernelsBase<GPUSamplerKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module.lookupSymbol<func::FuncOp>("bt_rt_sample") ||
        module.lookupSymbol("bt_sampler_kernels"))
      return;
    ParserConfig config(&getContext());
    OwningOpRef<ModuleOp> parsed =
        parseSourceString<ModuleOp>(kSamplerKernels, config, "bt-sampler");
    if (!parsed) {
      module.emitError("bt-gpu-sampler-kernels: the sampler kernels do not "
                       "parse (internal error)");
      return signalPassFailure();
    }
    for (auto kernels :
         llvm::make_early_inc_range(parsed->getOps<gpu::GPUModuleOp>()))
      kernels->moveBefore(module.getBody(), module.getBody()->end());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
  }
};

} // namespace
