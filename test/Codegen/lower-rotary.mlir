// RUN: bt-opt %s --bt-lower-to-linalg | FileCheck %s

// Two rotary ops on the same positions share one cos/sin table [S, r/2]
// (inv_freq = 1/10000^(2i/r) evaluated in f32: r = 4 gives [1, 0.01]).
// The rotated halves: y1 = x1*cos - x2*sin, y2 = x2*cos + x1*sin; the
// remaining hd - r dims are copied.

// CHECK-DAG: #[[SMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d3)>
// CHECK-DAG: #[[BSMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>

// CHECK-LABEL: func.func @rotary_shared_table
//  CHECK-SAME:   %[[Q:.*]]: tensor<?x5x2x16xf32>, %[[K:.*]]: tensor<?x5x2x16xf32>, %[[P:.*]]: tensor<5xi64>
//       CHECK:   %[[INV:.*]] = arith.constant dense<[1.000000e+00, 0.00999999977]> : tensor<2xf32>
//       CHECK:   %[[T:.*]]:2 = linalg.generic {{.*}} ins(%[[P]], %[[INV]] : tensor<5xi64>, tensor<2xf32>) outs(%{{.*}}, %{{.*}} : tensor<5x2xf32>, tensor<5x2xf32>)
//       CHECK:     %[[POS:.*]] = arith.sitofp %{{.*}} : i64 to f32
//       CHECK:     %[[ANG:.*]] = arith.mulf %[[POS]], %{{.*}} : f32
//       CHECK:     math.cos %[[ANG]]
//       CHECK:     math.sin %[[ANG]]
//   CHECK-NOT:   math.cos
//       CHECK:   %[[X1:.*]] = tensor.extract_slice %[[Q]][0, 0, 0, 0] [%{{.*}}, 5, 2, 2]
//       CHECK:   %[[X2:.*]] = tensor.extract_slice %[[Q]][0, 0, 0, 2] [%{{.*}}, 5, 2, 2]
//       CHECK:   %[[PASS:.*]] = tensor.extract_slice %[[Q]][0, 0, 0, 4] [%{{.*}}, 5, 2, 12]
//       CHECK:   tensor.insert_slice %[[PASS]] into %{{.*}}[0, 0, 0, 4] [%{{.*}}, 5, 2, 12]
//       CHECK:   linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #[[SMAP]], #[[SMAP]], #{{.*}}, #{{.*}}]{{.*}} ins(%[[X1]], %[[X2]], %[[T]]#0, %[[T]]#1 :
//  CHECK-NEXT:   ^bb0(%[[A1:.*]]: f32, %[[A2:.*]]: f32, %[[C:.*]]: f32, %[[S:.*]]: f32, %{{.*}}: f32, %{{.*}}: f32):
//   CHECK-DAG:     %[[A2S:.*]] = arith.mulf %[[A2]], %[[S]]
//   CHECK-DAG:     %[[A1C:.*]] = arith.mulf %[[A1]], %[[C]]
//   CHECK-DAG:     %[[Y1:.*]] = arith.subf %[[A1C]], %[[A2S]]
//   CHECK-DAG:     %[[A1S:.*]] = arith.mulf %[[A1]], %[[S]]
//   CHECK-DAG:     %[[A2C:.*]] = arith.mulf %[[A2]], %[[C]]
//   CHECK-DAG:     %[[Y2:.*]] = arith.addf %[[A2C]], %[[A1S]]
//       CHECK:     linalg.yield %[[Y1]], %[[Y2]]
//       CHECK:   linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %[[T]]#0, %[[T]]#1 :
func.func @rotary_shared_table(%q: tensor<?x5x2x16xf32>, %k: tensor<?x5x2x16xf32>, %p: tensor<5xi64>) -> (tensor<?x5x2x16xf32>, tensor<?x5x2x16xf32>) {
  %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : tensor<?x5x2x16xf32>, tensor<5xi64> -> tensor<?x5x2x16xf32>
  %kr = bt.rotary %k, %p rotary_dims 4 base 10000.0 : tensor<?x5x2x16xf32>, tensor<5xi64> -> tensor<?x5x2x16xf32>
  return %qr, %kr : tensor<?x5x2x16xf32>, tensor<?x5x2x16xf32>
}

// Per-row positions [B, S]: the table is [B, S, r/2], indexed by (b, s, i);
// rotary_dims = head_dim leaves nothing to copy.
// CHECK-LABEL: func.func @rotary_rows
//       CHECK:   linalg.generic {{.*}} outs(%{{.*}}, %{{.*}} : tensor<?x5x4xf32>, tensor<?x5x4xf32>)
//   CHECK-NOT:   tensor.insert_slice %{{.*}}[0, 0, 0, 8]
//       CHECK:   linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #[[BSMAP]], #[[BSMAP]], #{{.*}}, #{{.*}}]
func.func @rotary_rows(%x: tensor<?x5x3x8xf32>, %p: tensor<?x5xi32>) -> tensor<?x5x3x8xf32> {
  %y = bt.rotary %x, %p rotary_dims 8 base 10000.0 : tensor<?x5x3x8xf32>, tensor<?x5xi32> -> tensor<?x5x3x8xf32>
  return %y : tensor<?x5x3x8xf32>
}
