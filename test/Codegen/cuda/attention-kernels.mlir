// RUN: bt-opt %s --bt-lower-kv-caches=target=cuda --bt-lower-to-linalg=target=cuda --split-input-file | FileCheck %s
// RUN: bt-opt %s --bt-cuda-pipeline="binary=false" --split-input-file -o %t
// RUN: FileCheck %s --input-file %t --check-prefix=NVVM

// The CUDA target's dedicated attention kernels (docs/codegen-cuda.md,
// "Attention kernels"), emitted at tensor level by bt-lower-to-linalg and
// bt-lower-kv-caches with target=cuda (operands through read-only
// to_memref, the result a fresh buffer returned by to_tensor restrict), and
// their NVVM IR after bt-cuda-pipeline.

// bt.fused_local_attention: ONE kernel, a block per (block, head) = B·N·H
// blocks of 32·min(S, 4) threads; q and k rotated (the bt.rotary payload
// with the cos/sin table) and v staged in three [S, hd + 1] shared arrays
// (3·6·9·4 = 648 bytes of dynamic shared memory); a warp per query row: a
// lane per key with the score from shared memory, butterfly max and sum
// over the warp (shuffle xor 16, 8, 4, 2, 1), the probabilities broadcast
// lane by lane (shuffle idx) into the lane's output slots; only the
// [S, hd] result of the head is written.
// CHECK-LABEL: func.func @fused_local_attention
//       CHECK:   %[[G0:.*]] = arith.muli %{{.*}}, %c2
//       CHECK:   %[[G:.*]] = arith.muli %[[G0]], %c2
//       CHECK:   %[[QKV:.*]] = bufferization.to_memref %{{.*}} read_only : memref<?x2x6x48xf32, strided<[?, ?, ?, ?], offset: ?>>
//       CHECK:   %[[COS:.*]] = bufferization.to_memref %{{.*}} read_only : memref<6x2xf32
//       CHECK:   %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<?x2x6x2x8xf32>
//       CHECK:   gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[G]], %{{.*}} = %c1, %{{.*}} = %c1) threads(%[[TID:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1, %{{.*}} = %c1) dynamic_shared_memory_size %c648_i32
//       CHECK:     %[[SMEM:.*]] = gpu.dynamic_shared_memory
//       CHECK:     %[[QS:.*]] = memref.view %[[SMEM]][%c0][] {{.*}} to memref<6x9xf32, #gpu.address_space<workgroup>>
//       CHECK:     %[[KS:.*]] = memref.view %[[SMEM]][%c216][] {{.*}} to memref<6x9xf32, #gpu.address_space<workgroup>>
//       CHECK:     %[[VS:.*]] = memref.view %[[SMEM]][%c432][] {{.*}} to memref<6x9xf32, #gpu.address_space<workgroup>>
//       CHECK:     scf.for %{{.*}} = %[[TID]] to %c48 step %c128 {
//       CHECK:       memref.store %{{.*}}, %[[VS]]
//       CHECK:       memref.load %[[COS]]
//       CHECK:       memref.store %{{.*}}, %[[QS]]
//       CHECK:       memref.store %{{.*}}, %[[KS]]
//       CHECK:     gpu.barrier
//       CHECK:     scf.for %[[ROW:.*]] = %{{.*}} to %c6 step %c4 {
//       CHECK:       scf.for %{{.*}} = %c0 to %{{.*}} step %c32 iter_args(
//       CHECK:         scf.for
//       CHECK:           memref.load %[[QS]][%[[ROW]],
//       CHECK:           memref.load %[[KS]]
//       CHECK:         gpu.shuffle xor %{{.*}}, %c16_i32, %c32_i32 : f32
//       CHECK:         arith.maximumf
//       CHECK:         gpu.shuffle xor %{{.*}}, %c1_i32, %c32_i32 : f32
//       CHECK:         math.exp
//       CHECK:         gpu.shuffle xor %{{.*}}, %c16_i32, %c32_i32 : f32
//       CHECK:         arith.addf
//       CHECK:         scf.for
//       CHECK:           gpu.shuffle idx
//       CHECK:           memref.load %[[VS]]
//       CHECK:       memref.store %{{.*}}, %[[OUT]][%{{.*}}, %{{.*}}, %[[ROW]], %{{.*}}, %{{.*}}] : memref<?x2x6x2x8xf32>
//       CHECK:     gpu.terminator
//   CHECK-NOT:   gpu.launch
//       CHECK:   bufferization.to_tensor %[[OUT]] restrict writable
//   CHECK-NOT:   linalg.matmul
// The dynamic shared memory as CUDA declares it (.extern .shared, aligned).
//       NVVM: llvm.mlir.global external @__dynamic_shmem__{{[0-9]+}}() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// NVVM-LABEL: llvm.func @fused_local_attention_kernel_0(
//  NVVM-SAME:   gpu.kernel
//       NVVM:   nvvm.read.ptx.sreg.tid.x
//       NVVM:   nvvm.barrier0
//       NVVM:   nvvm.shfl.sync  bfly
//       NVVM:   llvm.call @__nv_expf
//       NVVM:   nvvm.shfl.sync  idx
func.func @fused_local_attention(%qkv: tensor<?x2x6x48xf32>, %p: tensor<6xi64>) -> tensor<?x2x6x2x8xf32> {
  %o = bt.fused_local_attention %qkv, %p heads 2 head_dim 8 rotary_dims 4 base 10000.0 scale 0.35355339059327373 : tensor<?x2x6x48xf32>, tensor<6xi64> -> tensor<?x2x6x2x8xf32>
  return %o : tensor<?x2x6x2x8xf32>
}

// -----

// Prefill (bt.attention, dynamic S): the tiled online-softmax kernel, one
// block per (head, 4 query rows) (grid B·H × ceil(S/4)), keys and values
// staged per tile of 32 in padded [32, hd + 1] shared arrays shared by the
// block's 4 warps, the warps' query rows in [4, hd]; a row without a valid
// causal key falls back to HF's mean over the keys whose score is MIN.
// CHECK-LABEL: func.func @prefill
//       CHECK:   %[[OUT:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?x2x8xf32>
//       CHECK:   %[[GROUPS:.*]] = arith.ceildivui %{{.*}}, %c4
//       CHECK:   gpu.launch blocks({{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %[[GROUPS]], %{{.*}} = %c1) threads({{.*}}) in (%{{.*}} = %c128, {{.*}}) dynamic_shared_memory_size %c2432_i32
//       CHECK:     %[[KS:.*]] = memref.view %{{.*}}[%c0][] {{.*}} to memref<32x9xf32, #gpu.address_space<workgroup>>
//       CHECK:     %[[VS:.*]] = memref.view %{{.*}}[%c1152][] {{.*}} to memref<32x9xf32, #gpu.address_space<workgroup>>
//       CHECK:     %[[QS:.*]] = memref.view %{{.*}}[%c2304][] {{.*}} to memref<4x8xf32, #gpu.address_space<workgroup>>
//       CHECK:     gpu.barrier
//       CHECK:     scf.for %[[T0:.*]] = %{{.*}} to %{{.*}} step %c32 iter_args(
// The tile (32 keys x 8 dims = 256 elements, 2 per thread) is staged with
// every global load issued before the shared-memory stores.
//       CHECK:       memref.load %[[K:[0-9a-z_]+]]
//       CHECK:       memref.load %[[V:[0-9a-z_]+]]
//       CHECK:       memref.load %[[K]]
//       CHECK:       memref.load %[[V]]
//       CHECK:       scf.if
//       CHECK:         memref.store %{{.*}}, %[[KS]]
//       CHECK:         memref.store %{{.*}}, %[[VS]]
//       CHECK:       scf.if
//       CHECK:         memref.store %{{.*}}, %[[KS]]
//       CHECK:         memref.store %{{.*}}, %[[VS]]
//       CHECK:       gpu.barrier
//       CHECK:       scf.if
//       CHECK:         gpu.shuffle xor
//       CHECK:         gpu.shuffle idx
//       CHECK:       gpu.barrier
//       CHECK:     scf.if
//       CHECK:       arith.cmpf oeq
//       CHECK:       scf.if
//       CHECK:         scf.for
//       CHECK:       memref.store %{{.*}}, %[[OUT]]
//   CHECK-NOT:   gpu.launch
// NVVM-LABEL: llvm.func @prefill_kernel(
//       NVVM:   nvvm.barrier0
//       NVVM:   nvvm.shfl.sync  bfly
func.func @prefill(%q: tensor<?x?x2x8xf32>, %k: tensor<?x?x2x8xf32>, %v: tensor<?x?x2x8xf32>, %m: tensor<?x?xi64>) -> tensor<?x?x2x8xf32> {
  %o = bt.attention %q, %k, %v key_mask %m scale 0.35355339059327373 : tensor<?x?x2x8xf32>, tensor<?x?xi64> -> tensor<?x?x2x8xf32>
  return %o : tensor<?x?x2x8xf32>
}

// -----

// Decode (bt.kv_attend, S = 1) over the block cache. Up to 128 keys, or a
// grid of at least 8192 blocks (B·H, two full waves of an H100: splitting adds
// waves and workspace traffic, not parallelism): one kernel, one block per
// head (grid B·H), attending every key and writing the normalized rows. Else:
// split-K (FlashDecoding): the first kernel has one block per (head, chunk
// of 128 keys) (grid B·H × 1 × ceil(len / 128)) and writes each split's
// partial (acc[hd], max, sum) to a workspace [splits, B·H, S, hd + 2]; the
// second, one warp per (head, query row), rescales and sums the splits.
// CHECK-LABEL: func.func @decode
//       CHECK:   %[[KEYS:.*]] = tensor.extract_slice %{{.*}}[0, 0, 0, 0, 0, 0] [%{{.*}}, 1, 1, 2, %{{.*}}, 8]
//       CHECK:   %[[K:.*]] = bufferization.to_memref %[[KEYS]] read_only : memref<?x2x?x8xf32, strided<[?, ?, ?, ?], offset: ?>>
//       CHECK:   %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<?x1x2x8xf32>
//       CHECK:   %[[FITS:.*]] = arith.cmpi ule, %{{.*}}, %c128 : index
//       CHECK:   %[[WIDE:.*]] = arith.cmpi uge, %{{.*}}, %c8192 : index
//       CHECK:   %[[ONE:.*]] = arith.ori %[[FITS]], %[[WIDE]] : i1
//       CHECK:   scf.if %[[ONE]] {
//       CHECK:     gpu.launch blocks({{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %c1, %{{.*}} = %c1) threads({{.*}}) in (%{{.*}} = %c32,
//       CHECK:       memref.load %[[K]]
//       CHECK:       memref.store %{{.*}}, %[[OUT]]
//       CHECK:   } else {
//       CHECK:     %[[SPLITS:.*]] = arith.ceildivui %{{.*}}, %c128
//       CHECK:     %[[WS:.*]] = memref.alloc(%[[SPLITS]], %{{.*}}) : memref<?x?x1x10xf32>
//       CHECK:     gpu.launch blocks({{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %c1, %{{.*}} = %[[SPLITS]]) threads({{.*}}) in (%{{.*}} = %c32,
//       CHECK:       memref.load %[[K]]
//       CHECK:       memref.store %{{.*}}, %[[WS]]
//       CHECK:     gpu.launch blocks({{.*}}) threads({{.*}}) in (%{{.*}} = %c32,
//       CHECK:     scf.for %{{.*}} = %c0 to %[[SPLITS]]
//       CHECK:       memref.load %[[WS]]
//       CHECK:       arith.maximumf
//       CHECK:     scf.for %{{.*}} = %c0 to %[[SPLITS]]
//       CHECK:       math.exp
//       CHECK:     memref.store %{{.*}}, %[[OUT]]
// NVVM-LABEL: llvm.func internal @decode(
//       NVVM: gpu.module @bt_kernels
//       NVVM:   nvvm.barrier0
//       NVVM:   nvvm.shfl.sync  bfly
//       NVVM:   nvvm.shfl.sync  idx
//       NVVM:   llvm.call @__nv_expf
!g = !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = ?, head_dim = 8, f32>
func.func @decode(%k: tensor<?x1x2x8xf32>, %v: tensor<?x1x2x8xf32>, %q: tensor<?x1x2x8xf32>,
                  %c: !g {bt.inout, bt.name = "kv_cache"})
    -> (tensor<?x1x2x8xf32> {bt.name = "out"}, !g {bt.inout_arg = "kv_cache", bt.name = "kv_cache"}) {
  %c1 = bt.kv_append %c[0], %k, %v : !g, tensor<?x1x2x8xf32>
  %o = bt.kv_attend %q, %c1[0] scale 0.35355339059327373 : tensor<?x1x2x8xf32>, !g -> tensor<?x1x2x8xf32>
  return %o, %c1 : tensor<?x1x2x8xf32>, !g
}

// -----

// A bf16 block cache of f32 activations (--dtype bf16): the append rounds
// each key and value to nearest even in integer ops (the same bits on NVPTX
// and the emulator), the decode kernels read bf16 and extend it exactly
// (bits << 16), and attention computes in f32.
// CHECK-LABEL: func.func @decode_bf16_cache
//       CHECK:   linalg.generic
//       CHECK:     arith.bitcast %{{.*}} : f32 to i32
//       CHECK:     arith.shrui
//       CHECK:     arith.trunci %{{.*}} : i32 to i16
//       CHECK:     %[[R:.*]] = arith.bitcast %{{.*}} : i16 to bf16
//       CHECK:     linalg.yield %[[R]] : bf16
//       CHECK:   } -> tensor<?x2x1x8xbf16>
//       CHECK:   %[[K:.*]] = bufferization.to_memref %{{.*}} read_only : memref<?x2x?x8xbf16, strided<[?, ?, ?, ?], offset: ?>>
//       CHECK:   gpu.launch
//       CHECK:     %[[L:.*]] = memref.load %[[K]]
//       CHECK:     %[[B:.*]] = arith.bitcast %[[L]] : bf16 to i16
//       CHECK:     %[[W:.*]] = arith.extui %[[B]] : i16 to i32
//       CHECK:     %[[S:.*]] = arith.shli %[[W]], %{{.*}} : i32
//       CHECK:     arith.bitcast %[[S]] : i32 to f32
// NVVM-LABEL: llvm.func internal @decode_bf16_cache(
!g = !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = ?, head_dim = 8, bf16>
func.func @decode_bf16_cache(%k: tensor<?x1x2x8xf32>, %v: tensor<?x1x2x8xf32>, %q: tensor<?x1x2x8xf32>,
                  %c: !g {bt.inout, bt.name = "kv_cache"})
    -> (tensor<?x1x2x8xf32> {bt.name = "out"}, !g {bt.inout_arg = "kv_cache", bt.name = "kv_cache"}) {
  %c1 = bt.kv_append %c[0], %k, %v : !g, tensor<?x1x2x8xf32>
  %o = bt.kv_attend %q, %c1[0] scale 0.35355339059327373 : tensor<?x1x2x8xf32>, !g -> tensor<?x1x2x8xf32>
  return %o, %c1 : tensor<?x1x2x8xf32>, !g
}
