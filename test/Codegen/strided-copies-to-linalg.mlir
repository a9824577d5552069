// RUN: bt-opt %s --bt-strided-copies-to-linalg | FileCheck %s
// RUN: bt-opt %s --bt-strided-copies-to-linalg=contiguous | FileCheck %s --check-prefix=ALL

// ALL (the CUDA pipeline: every copy becomes a kernel):
// ALL-LABEL: func.func @copies
//       ALL:   linalg.copy ins(%{{.*}} : memref<4x8xf32>) outs(%{{.*}} : memref<4x8xf32>)
//       ALL:   linalg.copy ins(%{{.*}} : memref<4x2xf32, strided<[8, 1], offset: 3>>)
//   ALL-NOT:   memref.copy

// Copies between identity layouts stay (llvm.memcpy); any other becomes a
// linalg.copy (loops) instead of a call to the runner utils' memrefCopy.
// CHECK-LABEL: func.func @copies
//  CHECK-SAME:   %[[A:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<4x8xf32>, %[[V:.*]]: memref<4x2xf32, strided<[8, 1], offset: 3>>, %[[C:.*]]: memref<4x2xf32>
//       CHECK:   memref.copy %[[A]], %[[B]]
//       CHECK:   linalg.copy ins(%[[V]] : memref<4x2xf32, strided<[8, 1], offset: 3>>) outs(%[[C]] : memref<4x2xf32>)
//   CHECK-NOT:   memref.copy
func.func @copies(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %v: memref<4x2xf32, strided<[8, 1], offset: 3>>, %c: memref<4x2xf32>) {
  memref.copy %a, %b : memref<4x8xf32> to memref<4x8xf32>
  memref.copy %v, %c : memref<4x2xf32, strided<[8, 1], offset: 3>> to memref<4x2xf32>
  return
}
