// RUN: bt-opt %s --bt-lower-to-linalg | FileCheck %s

// Causal attention, HF GPT-NeoX eager numerics:
//   v = where(t <= s, (q·k)·scale, MIN) + (1 - key_mask)·MIN   (MIN = finfo(f32).min)
//   p = exp(v - max_t v) · (1 / Σ_t exp(v - max_t v));  out = p · v
// [B, S, H, hd] is transposed to [B, H, S, hd] and collapsed to [B·H, S, hd]
// for the batched GEMMs.

// CHECK-DAG: #[[ID4:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[KEYMASK:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

// CHECK-LABEL: func.func @attention
//  CHECK-SAME:   %[[Q:.*]]: tensor<?x7x2x8xf32>, %[[K:.*]]: tensor<?x7x2x8xf32>, %[[V:.*]]: tensor<?x7x2x8xf32>, %[[M:.*]]: tensor<?x7xi64>
//   CHECK-DAG:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
//   CHECK-DAG:   %[[MIN:.*]] = arith.constant -3.40282347E+38 : f32
//   CHECK-DAG:   %[[SCALE:.*]] = arith.constant 0.353553385 : f32
//   CHECK-DAG:   %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
//       CHECK:   %[[QT:.*]] = linalg.transpose ins(%[[Q]] : tensor<?x7x2x8xf32>) outs(%{{.*}} : tensor<?x2x7x8xf32>) permutation = [0, 2, 1, 3]
//       CHECK:   %[[KT:.*]] = linalg.transpose ins(%[[K]]
//       CHECK:   %[[VT:.*]] = linalg.transpose ins(%[[V]]
//       CHECK:   %[[QG:.*]] = tensor.collapse_shape %[[QT]] {{\[}}[0, 1], [2], [3]] : tensor<?x2x7x8xf32> into tensor<?x7x8xf32>
//       CHECK:   %[[KG:.*]] = tensor.collapse_shape %[[KT]]
//       CHECK:   %[[VG:.*]] = tensor.collapse_shape %[[VT]]
//       CHECK:   %[[SG:.*]] = linalg.batch_matmul_transpose_b ins(%[[QG]], %[[KG]] : tensor<?x7x8xf32>, tensor<?x7x8xf32>) outs(%{{.*}} : tensor<?x7x7xf32>)
//       CHECK:   %[[S:.*]] = tensor.expand_shape %[[SG]] {{\[}}[0, 1], [2], [3]] output_shape [%{{.*}}, 2, 7, 7]
//       CHECK:   %[[MAXINIT:.*]] = linalg.fill ins(%[[NEGINF]] : f32)
//       CHECK:   %[[MAX:.*]] = linalg.generic {indexing_maps = [#[[ID4]], #[[KEYMASK]], #[[ROW]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[S]], %[[M]] : tensor<?x2x7x7xf32>, tensor<?x7xi64>) outs(%[[MAXINIT]] : tensor<?x2x7xf32>)
//       CHECK:     %[[X:.*]] = arith.mulf %{{.*}}, %[[SCALE]]
//       CHECK:     %[[QI:.*]] = linalg.index 2 : index
//       CHECK:     %[[KI:.*]] = linalg.index 3 : index
//       CHECK:     %[[CAUSAL:.*]] = arith.cmpi ule, %[[KI]], %[[QI]] : index
//       CHECK:     %[[W:.*]] = arith.select %[[CAUSAL]], %[[X]], %[[MIN]]
//       CHECK:     %[[MF:.*]] = arith.sitofp %{{.*}} : i64 to f32
//       CHECK:     %[[INV:.*]] = arith.subf %[[ONE]], %[[MF]]
//       CHECK:     %[[ADD:.*]] = arith.mulf %[[INV]], %[[MIN]]
//       CHECK:     %[[MASKED:.*]] = arith.addf %[[W]], %[[ADD]]
//       CHECK:     arith.maximumf %{{.*}}, %[[MASKED]]
//       CHECK:   %[[E:.*]] = linalg.generic {{.*}} ins(%[[S]], %[[M]], %[[MAX]] :
//       CHECK:     arith.subf
//       CHECK:     math.exp
//       CHECK:   %[[SUM:.*]] = linalg.generic {{.*}}["parallel", "parallel", "parallel", "reduction"]{{.*}} ins(%[[E]] :
//       CHECK:   %[[RINV:.*]] = linalg.generic {{.*}} ins(%[[SUM]] :
//       CHECK:     arith.divf %[[ONE]]
//       CHECK:   %[[P:.*]] = linalg.generic {{.*}} ins(%[[E]], %[[RINV]] :
//       CHECK:   %[[PG:.*]] = tensor.collapse_shape %[[P]]
//       CHECK:   %[[OG:.*]] = linalg.batch_matmul ins(%[[PG]], %[[VG]] : tensor<?x7x7xf32>, tensor<?x7x8xf32>)
//       CHECK:   %[[O:.*]] = tensor.expand_shape %[[OG]]
//       CHECK:   %[[R:.*]] = linalg.transpose ins(%[[O]] : tensor<?x2x7x8xf32>) outs(%{{.*}} : tensor<?x7x2x8xf32>) permutation = [0, 2, 1, 3]
//       CHECK:   return %[[R]]
func.func @attention(%q: tensor<?x7x2x8xf32>, %k: tensor<?x7x2x8xf32>, %v: tensor<?x7x2x8xf32>, %m: tensor<?x7xi64>) -> tensor<?x7x2x8xf32> {
  %o = bt.attention %q, %k, %v key_mask %m scale 0.35355339059327373 : tensor<?x7x2x8xf32>, tensor<?x7xi64> -> tensor<?x7x2x8xf32>
  return %o : tensor<?x7x2x8xf32>
}

// Block-local attention: [B, N_blk, S, H, hd] with an i1 key mask
// [B, N_blk, S]; B and N_blk dynamic. The expansion of the [B·N·H, S, S]
// scores (two dynamic dims in one group) goes through tensor.reshape.
// CHECK-LABEL: func.func @local_attention
//       CHECK:   linalg.transpose {{.*}} permutation = [0, 1, 3, 2, 4]
//       CHECK:   tensor.collapse_shape %{{.*}} {{\[}}[0, 1, 2], [3], [4]] : tensor<?x?x2x5x8xf32> into tensor<?x5x8xf32>
//       CHECK:   linalg.batch_matmul_transpose_b
//       CHECK:   tensor.reshape %{{.*}}(%{{.*}}) : (tensor<?x5x5xf32>, tensor<5xindex>) -> tensor<?x?x2x5x5xf32>
//       CHECK:   linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<?x?x2x5x5xf32>, tensor<?x?x5xi1>)
//       CHECK:     arith.uitofp %{{.*}} : i1 to f32
//       CHECK:   linalg.batch_matmul
func.func @local_attention(%q: tensor<?x?x5x2x8xf32>, %k: tensor<?x?x5x2x8xf32>, %v: tensor<?x?x5x2x8xf32>, %m: tensor<?x?x5xi1>) -> tensor<?x?x5x2x8xf32> {
  %o = bt.local_attention %q, %k, %v key_mask %m scale 0.35355339059327373 : tensor<?x?x5x2x8xf32>, tensor<?x?x5xi1> -> tensor<?x?x5x2x8xf32>
  return %o : tensor<?x?x5x2x8xf32>
}

// Without a key mask nothing is added to the causal scores.
// CHECK-LABEL: func.func @attention_no_mask
//       CHECK:   linalg.generic {{.*}} ins(%{{.*}} : tensor<2x2x7x7xf32>)
//   CHECK-NOT:     arith.sitofp
//       CHECK:     arith.select
//  CHECK-NEXT:     arith.maximumf
func.func @attention_no_mask(%q: tensor<2x7x2x8xf32>, %k: tensor<2x7x2x8xf32>, %v: tensor<2x7x2x8xf32>) -> tensor<2x7x2x8xf32> {
  %o = bt.attention %q, %k, %v scale 0.35355339059327373 : tensor<2x7x2x8xf32> -> tensor<2x7x2x8xf32>
  return %o : tensor<2x7x2x8xf32>
}

// The fused op is the unfused chain: split views, one shared cos/sin table
// for q and k, then the local attention.
// CHECK-LABEL: func.func @fused_local_attention
//       CHECK:   %[[T:.*]]:2 = linalg.generic {{.*}} outs(%{{.*}}, %{{.*}} : tensor<6x2xf32>, tensor<6x2xf32>)
//       CHECK:   %[[E:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1], [2], [3, 4, 5]] output_shape [%{{.*}}, 2, 6, 2, 3, 8]
//       CHECK:   tensor.extract_slice %[[E]][0, 0, 0, 0, 0, 0]
//       CHECK:   tensor.extract_slice %[[E]][0, 0, 0, 0, 1, 0]
//       CHECK:   tensor.extract_slice %[[E]][0, 0, 0, 0, 2, 0]
//       CHECK:   linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %[[T]]#0, %[[T]]#1 :
//       CHECK:   linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %[[T]]#0, %[[T]]#1 :
//   CHECK-NOT:   math.cos
//       CHECK:   linalg.batch_matmul_transpose_b
//       CHECK:   linalg.batch_matmul
func.func @fused_local_attention(%qkv: tensor<?x2x6x48xf32>, %p: tensor<6xi64>) -> tensor<?x2x6x2x8xf32> {
  %o = bt.fused_local_attention %qkv, %p heads 2 head_dim 8 rotary_dims 4 base 10000.0 scale 0.35355339059327373 : tensor<?x2x6x48xf32>, tensor<6xi64> -> tensor<?x2x6x2x8xf32>
  return %o : tensor<?x2x6x2x8xf32>
}
