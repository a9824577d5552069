// RUN: bt-opt %s --bt-lower-to-linalg | FileCheck %s

// LayerNorm over the last dim with a dynamic batch: row sums, row sums of
// squared deviations (biased variance), per-row rstd/shift, then the affine
// normalization (PyTorch's (x*rstd + (-rstd*mean)) * w + b).

// CHECK-LABEL: func.func @layer_norm
//  CHECK-SAME:   %[[X:.*]]: tensor<?x3x40xf32>, %[[W:.*]]: tensor<40xf32>, %[[B:.*]]: tensor<40xf32>
//   CHECK-DAG:   %[[EPS:.*]] = arith.constant 9.99999974E-6 : f32
//   CHECK-DAG:   %[[C:.*]] = arith.constant 4.000000e+01 : f32
//       CHECK:   %[[DIM:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x3x40xf32>
//       CHECK:   %[[SUM:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins(%[[X]] : tensor<?x3x40xf32>)
//       CHECK:     arith.addf
//       CHECK:   %[[M2:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins(%[[X]], %[[SUM]] :
//       CHECK:     arith.divf %{{.*}}, %[[C]]
//       CHECK:     arith.subf
//       CHECK:     arith.mulf
//       CHECK:     arith.addf
//       CHECK:   %[[STATS:.*]]:2 = linalg.generic {{.*}} ins(%[[SUM]], %[[M2]] :
//       CHECK:     arith.addf %{{.*}}, %[[EPS]]
//       CHECK:     math.sqrt
//       CHECK:     %[[RSTD:.*]] = arith.divf
//       CHECK:     %[[RM:.*]] = arith.mulf %[[RSTD]]
//       CHECK:     %[[SHIFT:.*]] = arith.negf %[[RM]]
//       CHECK:     linalg.yield %[[RSTD]], %[[SHIFT]]
//       CHECK:   %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[STATS]]#0, %[[STATS]]#1, %[[W]], %[[B]] :
//       CHECK:   return %[[Y]] : tensor<?x3x40xf32>
func.func @layer_norm(%x: tensor<?x3x40xf32>, %w: tensor<40xf32>, %b: tensor<40xf32>) -> tensor<?x3x40xf32> {
  %y = bt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<?x3x40xf32>, tensor<40xf32>, tensor<40xf32> -> tensor<?x3x40xf32>
  return %y : tensor<?x3x40xf32>
}

// f16 activations are computed in f32 and rounded back.
// CHECK-LABEL: func.func @layer_norm_f16
//       CHECK:   arith.extf %{{.*}} : f16 to f32
//       CHECK:   arith.truncf %{{.*}} : f32 to f16
func.func @layer_norm_f16(%x: tensor<4x8xf16>, %w: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<4x8xf16> {
  %y = bt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<4x8xf16>, tensor<8xf16>, tensor<8xf16> -> tensor<4x8xf16>
  return %y : tensor<4x8xf16>
}
