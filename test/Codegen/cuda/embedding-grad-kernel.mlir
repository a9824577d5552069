// RUN: bt-opt %s -split-input-file --bt-lower-backward=target=cuda | FileCheck %s

// bt.embedding_grad on the CUDA target: one kernel, a thread per column of
// the [V, E] table (blocks of 256 threads, no launch for E = 0) zeroes its
// column, then adds dy[i, e] for the ids in row-major order (ids [2, 6, 4]
// and dy [2, 6, 4, 16] collapsed to [48] and [48, 16]); an id outside
// [0, V) fails the cf.assert in the kernel (bt-linalg-to-gpu makes it
// printf + trap). No host loop over the ids.
// CHECK-LABEL: func.func @embedding_grad
//   CHECK-DAG:   %[[IDS:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1, 2]] : tensor<2x6x4xi64> into tensor<48xi64>
//   CHECK-DAG:   %[[DY:.*]] = tensor.collapse_shape %arg1 {{\[}}[0, 1, 2], [3]] : tensor<2x6x4x16xf32> into tensor<48x16xf32>
//   CHECK-DAG:   %[[IDM:.*]] = bufferization.to_memref %[[IDS]] read_only
//   CHECK-DAG:   %[[DYM:.*]] = bufferization.to_memref %[[DY]] read_only
//       CHECK:   %[[OUT:.*]] = memref.alloc() : memref<512x16xf32>
//       CHECK:   scf.if
//       CHECK:     gpu.launch
//       CHECK:       scf.if
//       CHECK:         scf.for %[[R:.*]] = %{{.*}} to %c512
//       CHECK:           memref.store %{{.*}}, %[[OUT]][%[[R]], %[[E:.*]]]
//       CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}}
//       CHECK:           %[[ID:.*]] = memref.load %[[IDM]][%[[I]]]
//       CHECK:           cf.assert %{{.*}}, "bt.embedding_grad: token id out of range [0, V)"
//       CHECK:           %[[ROW:.*]] = arith.select
//       CHECK:           %[[ACC:.*]] = memref.load %[[OUT]][%[[ROW]], %[[E]]]
//       CHECK:           %[[G:.*]] = memref.load %[[DYM]][%[[I]], %[[E]]]
//       CHECK:           %[[SUM:.*]] = arith.addf %[[ACC]], %[[G]]
//       CHECK:           memref.store %[[SUM]], %[[OUT]][%[[ROW]], %[[E]]]
//       CHECK:   %[[T:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
//       CHECK:   return %[[T]]
func.func @embedding_grad(%ids: tensor<2x6x4xi64>, %dy: tensor<2x6x4x16xf32>) -> tensor<512x16xf32> {
  %dt = bt.embedding_grad %ids, %dy : tensor<2x6x4xi64>, tensor<2x6x4x16xf32> -> tensor<512x16xf32>
  return %dt : tensor<512x16xf32>
}

// -----

// The other backward ops keep the target-neutral lowering.
// CHECK-LABEL: func.func @layer_norm_grad
//   CHECK-NOT:   gpu.launch
//       CHECK:   linalg.generic
func.func @layer_norm_grad(%x: tensor<3x8xf32>, %w: tensor<8xf32>, %dy: tensor<3x8xf32>) -> (tensor<3x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dw, %db = bt.layer_norm_grad %x, %w, %dy eps 1.0e-05 : tensor<3x8xf32>, tensor<8xf32>
  return %dx, %dw, %db : tensor<3x8xf32>, tensor<8xf32>, tensor<8xf32>
}
