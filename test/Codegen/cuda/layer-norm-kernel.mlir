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
