// RUN: bt-opt %s --bt-fuse-elementwise | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A single-use producer read element for element is fused.
// CHECK-LABEL: func.func @fused
//       CHECK:   linalg.generic
//       CHECK:     arith.addf
//       CHECK:     arith.mulf
//   CHECK-NOT:   linalg.generic
func.func @fused(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.mulf %x, %x : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// A per-row producer (e.g. 1/sum of a softmax) read with a broadcast is not
// fused: it would be recomputed for every element of the row.
// CHECK-LABEL: func.func @broadcast_not_fused
//       CHECK:   linalg.generic
//       CHECK:     arith.divf
//       CHECK:   linalg.generic
//       CHECK:     arith.mulf
func.func @broadcast_not_fused(%sum: tensor<4xf32>, %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %one = arith.constant 1.0 : f32
  %e1 = tensor.empty() : tensor<4xf32>
  %inv = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%sum : tensor<4xf32>) outs(%e1 : tensor<4xf32>) {
  ^bb0(%s: f32, %o: f32):
    %r = arith.divf %one, %s : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %inv : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %i: f32, %o: f32):
    %r = arith.mulf %a, %i : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// A producer with two uses is not duplicated.
// CHECK-LABEL: func.func @multi_use_not_fused
//       CHECK:   %[[S:.*]] = linalg.generic
//       CHECK:     arith.addf
//       CHECK:   linalg.generic {{.*}} ins(%[[S]] :
//       CHECK:   return %[[S]],
func.func @multi_use_not_fused(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.mulf %x, %x : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %s, %p : tensor<4x8xf32>, tensor<4x8xf32>
}
