// RUN: bt-opt %s -split-input-file --bt-local-reshape-shapes | FileCheck %s
// RUN: bt-opt %s -split-input-file --bt-local-reshape-shapes \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   | FileCheck %s --check-prefix=BUF
// RUN: bt-opt %s -split-input-file \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   | FileCheck %s --check-prefix=UPSTREAM

// Two linears of [B·N] rows expanded to [B, N, 64] (LayerEmitter::expand)
// with the one shape CSE left them, the second added into the first in
// place: each reshape gets its own tensor.from_elements right before it,
// and both GEMMs run on their filled inits (no copy). Without the pass
// (LLVM 19's tensor.reshape aliases its shape with its result) both GEMMs
// run on copies of their inits and the shape is copied too.

// CHECK-LABEL: func.func @two_linears(
// CHECK-NOT:     tensor.from_elements
// CHECK:         %[[G1:.*]] = linalg.matmul_transpose_b
// CHECK-NEXT:    %[[S1:.*]] = tensor.from_elements %{{.*}}, %{{.*}}, %{{.*}} : tensor<3xindex>
// CHECK-NEXT:    %[[R1:.*]] = tensor.reshape %[[G1]](%[[S1]])
// CHECK:         %[[G2:.*]] = linalg.matmul_transpose_b
// CHECK-NEXT:    %[[S2:.*]] = tensor.from_elements %{{.*}}, %{{.*}}, %{{.*}} : tensor<3xindex>
// CHECK-NEXT:    %[[R2:.*]] = tensor.reshape %[[G2]](%[[S2]])
// CHECK-NOT:     tensor.from_elements
// CHECK:         return

// BUF-LABEL:   func.func @two_linears(
// BUF-NOT:       memref.copy
// BUF:           return

// UPSTREAM-LABEL: func.func @two_linears(
// UPSTREAM-COUNT-3: memref.copy
func.func @two_linears(%x: tensor<?x64xf32>, %w: tensor<64x64xf32>, %b: index, %n: index) -> tensor<?x?x64xf32> {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x64xf32>
  %s = tensor.from_elements %b, %n, %c64 : tensor<3xindex>
  %e = tensor.empty(%m) : tensor<?x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x64xf32>) -> tensor<?x64xf32>
  %g = linalg.matmul_transpose_b ins(%x, %w : tensor<?x64xf32>, tensor<64x64xf32>) outs(%f : tensor<?x64xf32>) -> tensor<?x64xf32>
  %r = tensor.reshape %g(%s) : (tensor<?x64xf32>, tensor<3xindex>) -> tensor<?x?x64xf32>
  %e2 = tensor.empty(%m) : tensor<?x64xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x64xf32>) -> tensor<?x64xf32>
  %g2 = linalg.matmul_transpose_b ins(%x, %w : tensor<?x64xf32>, tensor<64x64xf32>) outs(%f2 : tensor<?x64xf32>) -> tensor<?x64xf32>
  %r2 = tensor.reshape %g2(%s) : (tensor<?x64xf32>, tensor<3xindex>) -> tensor<?x?x64xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j, k)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r2 : tensor<?x?x64xf32>) outs(%r : tensor<?x?x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<?x?x64xf32>
  return %sum : tensor<?x?x64xf32>
}

// -----

// A shape of another producer (a function argument) is left alone.

// CHECK-LABEL: func.func @argument_shape(
// CHECK-SAME:    %[[X:.*]]: tensor<?xf32>, %[[S:.*]]: tensor<2xindex>)
// CHECK-NOT:     tensor.from_elements
// CHECK:         tensor.reshape %[[X]](%[[S]])
func.func @argument_shape(%x: tensor<?xf32>, %s: tensor<2xindex>) -> tensor<?x?xf32> {
  %r = tensor.reshape %x(%s) : (tensor<?xf32>, tensor<2xindex>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
