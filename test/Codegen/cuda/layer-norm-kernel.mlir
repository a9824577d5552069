// RUN: bt-opt %s -split-input-file --bt-lower-to-linalg=target=cuda | FileCheck %s
// RUN: bt-opt %s -split-input-file --bt-cuda-pipeline="binary=false" | FileCheck %s --check-prefix=NVVM

// bt.layer_norm on the CUDA target: ONE kernel (GPULayerNorm.cpp), a block
// of 256 threads per row of the flattened [B·2, 768] input: per-thread
// strided sums, a fixed shared-memory tree (s = 128 ... 1) for Σx, the same
// for Σ(x − mean)², then y = (x·rstd + shift)·w + b per column. No linalg
// ops are left for bt-linalg-to-gpu (which made five or six kernels of
// them).
// CHECK-LABEL: func.func @ln
//   CHECK-DAG:   %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<?x2x768xf32>
//   CHECK-DAG:   %[[X:.*]] = bufferization.to_memref %arg0 read_only
//       CHECK:   %[[ROWS:.*]] = arith.muli %{{.*}}, %c2 : index
//       CHECK:   scf.if
//       CHECK:     gpu.launch blocks(%[[B:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[ROWS]], %{{.*}} = %c1, %{{.*}} = %c1) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c256, %{{.*}} = %c1, %{{.*}} = %c1) dynamic_shared_memory_size %c1024_i32
//       CHECK:       %[[SH:.*]] = memref.view {{.*}} to memref<256xf32, #gpu.address_space<workgroup>>
//       CHECK:       scf.for %{{.*}} = %[[T]] to %c768 step %c256 iter_args
//       CHECK:         memref.load %[[X]]
//       CHECK:       memref.store %{{.*}}, %[[SH]][%[[T]]]
//       CHECK:       gpu.barrier
//       CHECK:       arith.cmpi ult, %[[T]], %c128
// CHECK-COUNT-7:     gpu.barrier
//       CHECK:       arith.cmpi ult, %[[T]], %c1 :
//       CHECK:       gpu.barrier
//       CHECK:       memref.load %[[SH]][%c0]
//       CHECK:       gpu.barrier
//       CHECK:       arith.divf
//       CHECK:       scf.for %{{.*}} = %[[T]] to %c768 step %c256 iter_args
//       CHECK:         arith.subf
//       CHECK:         arith.mulf
//       CHECK:       math.sqrt
//       CHECK:       arith.negf
//       CHECK:       scf.for %[[I:.*]] = %[[T]] to %c768 step %c256 {
//       CHECK:         memref.store %{{.*}}, %[[OUT]][%{{.*}}, %{{.*}}, %[[I]]]
//       CHECK:       gpu.terminator
//   CHECK-NOT:   gpu.launch
//   CHECK-NOT:   linalg.
//       CHECK:   bufferization.to_tensor %[[OUT]] restrict writable
// NVVM: gpu.module @bt_kernels
// NVVM-COUNT-1: llvm.func @ln_kernel(
// NVVM-NOT: llvm.func @ln_kernel_0(
func.func @ln(%x: tensor<?x2x768xf32>, %w: tensor<768xf32>, %b: tensor<768xf32>) -> tensor<?x2x768xf32> {
  %y = bt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<?x2x768xf32>, tensor<768xf32>, tensor<768xf32> -> tensor<?x2x768xf32>
  return %y : tensor<?x2x768xf32>
}

// -----

// Two LayerNorms of one input (GPT-NeoX's input and post-attention
// LayerNorms of a parallel-residual layer): ONE kernel (emitGPULayerNormPair)
// at the first, the statistics once, then per column one load of x and a
// store to each output.
// CHECK-LABEL: func.func @ln_pair
//   CHECK-DAG:   %[[OUT0:.*]] = memref.alloc(%{{.*}}) : memref<?x2x768xf32>
//   CHECK-DAG:   %[[OUT1:.*]] = memref.alloc(%{{.*}}) : memref<?x2x768xf32>
//   CHECK-DAG:   %[[X:.*]] = bufferization.to_memref %arg0 read_only
//       CHECK:   gpu.launch
//       CHECK:       math.sqrt
//       CHECK:       math.sqrt
//       CHECK:       scf.for %[[I:.*]] = %{{.*}} to %c768 step %c256 {
//       CHECK:         memref.load %[[X]]
//   CHECK-NOT:         memref.load %[[X]]
//       CHECK:         memref.store %{{.*}}, %[[OUT0]][%{{.*}}, %{{.*}}, %[[I]]]
//   CHECK-NOT:         memref.load %[[X]]
//       CHECK:         memref.store %{{.*}}, %[[OUT1]][%{{.*}}, %{{.*}}, %[[I]]]
//       CHECK:       gpu.terminator
//   CHECK-NOT:   gpu.launch
//       CHECK:   return
// NVVM-COUNT-1: llvm.func @ln_pair_kernel(
// NVVM-NOT: llvm.func @ln_pair_kernel_0(
func.func @ln_pair(%x: tensor<?x2x768xf32>, %w0: tensor<768xf32>, %b0: tensor<768xf32>, %w1: tensor<768xf32>, %b1: tensor<768xf32>) -> (tensor<?x2x768xf32>, tensor<?x2x768xf32>) {
  %y0 = bt.layer_norm %x, %w0, %b0 eps 1.0e-05 : tensor<?x2x768xf32>, tensor<768xf32>, tensor<768xf32> -> tensor<?x2x768xf32>
  %y1 = bt.layer_norm %x, %w1, %b1 eps 1.0e-03 : tensor<?x2x768xf32>, tensor<768xf32>, tensor<768xf32> -> tensor<?x2x768xf32>
  return %y0, %y1 : tensor<?x2x768xf32>, tensor<?x2x768xf32>
}

// -----

// Not fused: the second LayerNorm's weight is computed after the first
// (it is not available there), and LayerNorms of different inputs.
// CHECK-LABEL: func.func @ln_pair_late_weight
// CHECK-COUNT-2: gpu.launch blocks
//   CHECK-NOT:   gpu.launch blocks
// CHECK-LABEL: func.func @ln_two_inputs
// CHECK-COUNT-2: gpu.launch blocks
//   CHECK-NOT:   gpu.launch blocks
func.func @ln_pair_late_weight(%x: tensor<?x2x768xf32>, %w0: tensor<768xf32>, %b0: tensor<768xf32>, %b1: tensor<768xf32>) -> (tensor<?x2x768xf32>, tensor<?x2x768xf32>) {
  %y0 = bt.layer_norm %x, %w0, %b0 eps 1.0e-05 : tensor<?x2x768xf32>, tensor<768xf32>, tensor<768xf32> -> tensor<?x2x768xf32>
  %w1 = bt.gelu %w0 : tensor<768xf32>
  %y1 = bt.layer_norm %x, %w1, %b1 eps 1.0e-05 : tensor<?x2x768xf32>, tensor<768xf32>, tensor<768xf32> -> tensor<?x2x768xf32>
  return %y0, %y1 : tensor<?x2x768xf32>, tensor<?x2x768xf32>
}
func.func @ln_two_inputs(%x: tensor<?x2x768xf32>, %z: tensor<?x2x768xf32>, %w: tensor<768xf32>, %b: tensor<768xf32>) -> (tensor<?x2x768xf32>, tensor<?x2x768xf32>) {
  %y0 = bt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<?x2x768xf32>, tensor<768xf32>, tensor<768xf32> -> tensor<?x2x768xf32>
  %y1 = bt.layer_norm %z, %w, %b eps 1.0e-05 : tensor<?x2x768xf32>, tensor<768xf32>, tensor<768xf32> -> tensor<?x2x768xf32>
  return %y0, %y1 : tensor<?x2x768xf32>, tensor<?x2x768xf32>
}
