// RUN: bt-opt %s --bt-lower-to-linalg | FileCheck %s

// Two rotary ops on the same positions share one cos/sin table [S, r/2]
// (inv_freq = 1/10000^(2i/r) evaluated in f32: r = 4 gives [1, 0.01]).
// Then one elementwise pass per op: element j < r reads its partner
// x[(j + r/2) mod r] and the table at j mod r/2; y = x·cos − partner·sin
// (j < r/2), x·cos + partner·sin (j < r), x (j >= r).

// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[PARTNER:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, (d3 + 2) mod 4)>
// CHECK-DAG: #[[TABLE:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d3 mod 2)>
// CHECK-DAG: #[[ROWTABLE:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3 mod 4)>

// CHECK-LABEL: func.func @rotary_shared_table
//  CHECK-SAME:   %[[Q:.*]]: tensor<?x5x2x16xf32>, %[[K:.*]]: tensor<?x5x2x16xf32>, %[[P:.*]]: tensor<5xi64>
//   CHECK-DAG:   %[[C2:.*]] = arith.constant 2 : index
//   CHECK-DAG:   %[[C4:.*]] = arith.constant 4 : index
//   CHECK-DAG:   %[[INV:.*]] = arith.constant dense<[1.000000e+00, 0.00999999977]> : tensor<2xf32>
//       CHECK:   %[[T:.*]]:2 = linalg.generic {{.*}} ins(%[[P]], %[[INV]] : tensor<5xi64>, tensor<2xf32>) outs(%{{.*}}, %{{.*}} : tensor<5x2xf32>, tensor<5x2xf32>)
//       CHECK:     %[[POS:.*]] = arith.sitofp %{{.*}} : i64 to f32
//       CHECK:     %[[ANG:.*]] = arith.mulf %[[POS]], %{{.*}} : f32
//       CHECK:     math.cos %[[ANG]]
//       CHECK:     math.sin %[[ANG]]
//   CHECK-NOT:   math.cos
//       CHECK:   linalg.generic {indexing_maps = [#[[ID]], #[[PARTNER]], #[[TABLE]], #[[TABLE]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[Q]], %[[Q]], %[[T]]#0, %[[T]]#1 :
//  CHECK-NEXT:   ^bb0(%[[X:.*]]: f32, %[[XP:.*]]: f32, %[[C:.*]]: f32, %[[S:.*]]: f32, %{{.*}}: f32):
//       CHECK:     %[[XC:.*]] = arith.mulf %[[X]], %[[C]]
//       CHECK:     %[[PS:.*]] = arith.mulf %[[XP]], %[[S]]
//       CHECK:     %[[Y1:.*]] = arith.subf %[[XC]], %[[PS]]
//       CHECK:     %[[Y2:.*]] = arith.addf %[[XC]], %[[PS]]
//       CHECK:     %[[J:.*]] = linalg.index 3 : index
//       CHECK:     %[[FIRST:.*]] = arith.cmpi ult, %[[J]], %[[C2]]
//       CHECK:     %[[ROT:.*]] = arith.cmpi ult, %[[J]], %[[C4]]
//       CHECK:     %[[R:.*]] = arith.select %[[FIRST]], %[[Y1]], %[[Y2]]
//       CHECK:     %[[Y:.*]] = arith.select %[[ROT]], %[[R]], %[[X]]
//       CHECK:     linalg.yield %[[Y]]
//       CHECK:   linalg.generic {{.*}} ins(%[[K]], %[[K]], %[[T]]#0, %[[T]]#1 :
func.func @rotary_shared_table(%q: tensor<?x5x2x16xf32>, %k: tensor<?x5x2x16xf32>, %p: tensor<5xi64>) -> (tensor<?x5x2x16xf32>, tensor<?x5x2x16xf32>) {
  %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : tensor<?x5x2x16xf32>, tensor<5xi64> -> tensor<?x5x2x16xf32>
  %kr = bt.rotary %k, %p rotary_dims 4 base 10000.0 : tensor<?x5x2x16xf32>, tensor<5xi64> -> tensor<?x5x2x16xf32>
  return %qr, %kr : tensor<?x5x2x16xf32>, tensor<?x5x2x16xf32>
}

// Per-row positions [B, S]: the table is [B, S, r/2], indexed by (b, s, j mod r/2).
// CHECK-LABEL: func.func @rotary_rows
//       CHECK:   linalg.generic {{.*}} outs(%{{.*}}, %{{.*}} : tensor<?x5x4xf32>, tensor<?x5x4xf32>)
//       CHECK:   linalg.generic {indexing_maps = [#[[ID]], #{{.*}}, #[[ROWTABLE]], #[[ROWTABLE]], #[[ID]]]
func.func @rotary_rows(%x: tensor<?x5x3x8xf32>, %p: tensor<?x5xi32>) -> tensor<?x5x3x8xf32> {
  %y = bt.rotary %x, %p rotary_dims 8 base 10000.0 : tensor<?x5x3x8xf32>, tensor<?x5xi32> -> tensor<?x5x3x8xf32>
  return %y : tensor<?x5x3x8xf32>
}
