// RUN: bt-opt %s --bt-lower-to-linalg | FileCheck %s

// Exact GELU in PyTorch's order: (x * 0.5) * (1 + erf(x * f32(M_SQRT1_2))).
// CHECK-LABEL: func.func @gelu
//   CHECK-DAG:   %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
//   CHECK-DAG:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
//   CHECK-DAG:   %[[ALPHA:.*]] = arith.constant 0.707106769 : f32
//       CHECK:   linalg.generic
//  CHECK-NEXT:   ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
//       CHECK:     %[[S:.*]] = arith.mulf %[[IN]], %[[ALPHA]]
//       CHECK:     %[[E:.*]] = math.erf %[[S]]
//       CHECK:     %[[P:.*]] = arith.addf %[[E]], %[[ONE]]
//       CHECK:     %[[H:.*]] = arith.mulf %[[IN]], %[[HALF]]
//       CHECK:     %[[Y:.*]] = arith.mulf %[[H]], %[[P]]
//       CHECK:     linalg.yield %[[Y]]
func.func @gelu(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = bt.gelu %x : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// A temporary read only by the GELU (the MLP's first projection) is
// overwritten in place: the generic has no input, the value is its init.
// CHECK-LABEL: func.func @gelu_in_place
//       CHECK:   %[[H:.*]] = arith.addf
//       CHECK:   linalg.generic {indexing_maps = [#{{.*}}], iterator_types = ["parallel", "parallel"]} outs(%[[H]] : tensor<4x64xf32>)
//       CHECK:     math.erf
func.func @gelu_in_place(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %h = arith.addf %x, %x : tensor<4x64xf32>
  %y = bt.gelu %h : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// Row gather with a bounds check (an id outside [0, V) aborts).
// CHECK-LABEL: func.func @embedding_lookup
//  CHECK-SAME:   %[[IDS:.*]]: tensor<?x3xi64>, %[[T:.*]]: tensor<10x6xf32>
//       CHECK:   linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]{{.*}} ins(%[[IDS]] : tensor<?x3xi64>) outs(%{{.*}} : tensor<?x3x6xf32>)
//       CHECK:     %[[ROW:.*]] = arith.index_cast %{{.*}} : i64 to index
//       CHECK:     cf.assert %{{.*}}, "bt.embedding_lookup: token id out of range [0, V)"
//       CHECK:     %[[COL:.*]] = linalg.index 2 : index
//       CHECK:     tensor.extract %[[T]][%[[ROW]], %[[COL]]] : tensor<10x6xf32>
func.func @embedding_lookup(%ids: tensor<?x3xi64>, %t: tensor<10x6xf32>) -> tensor<?x3x6xf32> {
  %y = bt.embedding_lookup %ids, %t : tensor<?x3xi64>, tensor<10x6xf32> -> tensor<?x3x6xf32>
  return %y : tensor<?x3x6xf32>
}

// Per-head interleaved QKV rows [.., H, 3, hd]: views, no copy.
// CHECK-LABEL: func.func @split_qkv
//       CHECK:   %[[E:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1], [2, 3, 4]] output_shape [%{{.*}}, 4, 2, 3, 4] : tensor<?x4x24xf32> into tensor<?x4x2x3x4xf32>
//       CHECK:   %[[Q:.*]] = tensor.extract_slice %[[E]][0, 0, 0, 0, 0] [%{{.*}}, 4, 2, 1, 4] [1, 1, 1, 1, 1] : tensor<?x4x2x3x4xf32> to tensor<?x4x2x4xf32>
//       CHECK:   %[[K:.*]] = tensor.extract_slice %[[E]][0, 0, 0, 1, 0] [%{{.*}}, 4, 2, 1, 4] [1, 1, 1, 1, 1] : tensor<?x4x2x3x4xf32> to tensor<?x4x2x4xf32>
//       CHECK:   %[[V:.*]] = tensor.extract_slice %[[E]][0, 0, 0, 2, 0] [%{{.*}}, 4, 2, 1, 4] [1, 1, 1, 1, 1] : tensor<?x4x2x3x4xf32> to tensor<?x4x2x4xf32>
//       CHECK:   return %[[Q]], %[[K]], %[[V]]
func.func @split_qkv(%x: tensor<?x4x24xf32>) -> (tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>) {
  %q, %k, %v = bt.split_qkv %x heads 2 head_dim 4 : tensor<?x4x24xf32> -> tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>
  return %q, %k, %v : tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>
}

// Mean cross-entropy: row max, sum of exp(x - max), then -((x[label] - max)
// - log(sum)) summed in f64 over labels != ignore_index and divided by their
// count (0/0 = NaN when all are ignored).
// CHECK-LABEL: func.func @cross_entropy
//       CHECK:   %[[MAX:.*]] = linalg.generic {{.*}}["parallel", "parallel", "reduction"]
//       CHECK:     arith.maximumf
//       CHECK:   %[[SUM:.*]] = linalg.generic {{.*}}["parallel", "parallel", "reduction"]
//       CHECK:     math.exp
//       CHECK:   %[[TOT:.*]]:2 = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]{{.*}} outs(%{{.*}}, %{{.*}} : tensor<f64>, tensor<i64>)
//       CHECK:     %[[VALID:.*]] = arith.cmpi ne, %{{.*}}, %c-100_i64 : i64
//       CHECK:     cf.assert %{{.*}}, "bt.cross_entropy: label out of range [0, V)"
//       CHECK:     tensor.extract
//       CHECK:     math.log
//       CHECK:     arith.extf %{{.*}} : f32 to f64
//       CHECK:   linalg.generic {{.*}} ins(%[[TOT]]#0, %[[TOT]]#1 : tensor<f64>, tensor<i64>) outs(%{{.*}} : tensor<f32>)
//       CHECK:     arith.truncf %{{.*}} : f64 to f32
//       CHECK:     arith.sitofp %{{.*}} : i64 to f32
//       CHECK:     arith.divf
func.func @cross_entropy(%l: tensor<?x4x11xf32>, %y: tensor<?x4xi64>) -> tensor<f32> {
  %loss = bt.cross_entropy %l, %y : tensor<?x4x11xf32>, tensor<?x4xi64> -> tensor<f32>
  return %loss : tensor<f32>
}
