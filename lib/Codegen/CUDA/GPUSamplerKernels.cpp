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
/// thread per row r of the batch (grid ceil(B' / block) x 1 x 1):
///
/// - logits F32 [B', V] (any strides), tokens I64 [B'] (any stride);
/// - state I64 [B'', 2], B'' >= B': [r, 0] whether row r emitted EOS earlier
///   in this block (read only when step > 0, reset at step 0), [r, 1] set to
///   1 when the row's logits hold a NaN (sticky; zeroed when `first` != 0, the
///   first launch on a fresh state buffer);
/// - step: the step within the block (0 .. L_B - 1); eos: the EOS id (< 0:
///   no EOS handling); pad: generation_pad_token_id.
///
/// The token is the runtime's greedy choice (sampler_callback.h ArgMax:
/// the lowest id among equal maxima, -inf counts, an all -inf row gives 0;
/// the same comparisons in the same order, so the same id as the CPU
/// sampler), or `pad` after the row's EOS in this block or for a NaN row.
constexpr const char *kSamplerKernels = R"mlir(
gpu.module @bt_sampler_kernels {
  gpu.func @bt_sample_greedy(
      %logits: memref<?x?xf32, strided<[?, ?], offset: ?>>,
      %tokens: memref<?xi64, strided<[?], offset: ?>>,
      %state: memref<?x2xi64>, %step: i64, %first: i64, %eos: i64,
      %pad: i64) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %zero = arith.constant 0 : i64
    %one = arith.constant 1 : i64
    %false = arith.constant false
    %true = arith.constant true
    %ninf = arith.constant 0xFF800000 : f32
    %bid = gpu.block_id x
    %bdim = gpu.block_dim x
    %tid = gpu.thread_id x
    %base = arith.muli %bid, %bdim : index
    %r = arith.addi %base, %tid : index
    %rows = memref.dim %tokens, %c0 : memref<?xi64, strided<[?], offset: ?>>
    %vocab = memref.dim %logits, %c1 : memref<?x?xf32, strided<[?, ?], offset: ?>>
    %live = arith.cmpi ult, %r, %rows : index
    scf.if %live {
      %is_first = arith.cmpi ne, %first, %zero : i64
      scf.if %is_first {
        memref.store %zero, %state[%r, %c1] : memref<?x2xi64>
      }
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
      %res:2 = scf.if %skip -> (i64, i64) {
        scf.yield %pad, %fin : i64, i64
      } else {
        %best:3 = scf.for %v = %c0 to %vocab step %c1
            iter_args(%bi = %c0, %bv = %ninf, %nan = %false) -> (index, f32, i1) {
          %l = memref.load %logits[%r, %v] : memref<?x?xf32, strided<[?, ?], offset: ?>>
          %is_nan = arith.cmpf uno, %l, %l : f32
          %gt = arith.cmpf ogt, %l, %bv : f32
          %ni = arith.select %gt, %v, %bi : index
          %nv = arith.select %gt, %l, %bv : f32
          %nn = arith.ori %nan, %is_nan : i1
          scf.yield %ni, %nv, %nn : index, f32, i1
        }
        scf.if %best#2 {
          memref.store %one, %state[%r, %c1] : memref<?x2xi64>
        }
        %id = arith.index_cast %best#0 : index to i64
        %tok = arith.select %best#2, %pad, %id : i64
        %hit = arith.cmpi eq, %id, %eos : i64
        %valid = arith.xori %best#2, %true : i1
        %hit_on = arith.andi %eos_on, %hit : i1
        %ended = arith.andi %hit_on, %valid : i1
        %nf = arith.select %ended, %one, %fin : i64
        scf.yield %tok, %nf : i64, i64
      }
      memref.store %res#1, %state[%r, %c0] : memref<?x2xi64>
      memref.store %res#0, %tokens[%r] : memref<?xi64, strided<[?], offset: ?>>
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
