// RUN: bt-opt %s -split-input-file --bt-lower-backward | FileCheck %s
// RUN: bt-opt %s -split-input-file --bt-lower-backward --bt-lower-to-linalg | FileCheck %s --check-prefix=NOBT

// bt-lower-backward: the backward ops of the vector-Jacobian rules → linalg /
// tensor / scf / cf on tensors (numerics: bt-codegen-tests GradTest). No bt
// op is left after bt-lower-to-linalg.
// NOBT-NOT: {{^ *%.* = bt\.}}

// LayerNorm backward: row sum, centred square sum (the forward's statistics),
// mean / rstd, one reduction for Σ dy·w and Σ dy·w·x̂, the elementwise dx,
// and one reduction over all leading dims (reduction, reduction, parallel)
// for dweight and dbias.
// CHECK-LABEL: func.func @layer_norm_grad
//       CHECK:   linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0 :
//       CHECK:   linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %{{.*}} :
//       CHECK:   math.sqrt
//       CHECK:   %[[SUMS:.*]]:2 = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg2, %arg1,
//       CHECK:   %[[DX:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %arg2, %arg1, %{{.*}}, %{{.*}}, %[[SUMS]]#0, %[[SUMS]]#1
//       CHECK:   %[[DWB:.*]]:2 = linalg.generic {{.*}}iterator_types = ["reduction", "reduction", "parallel"]} ins(%arg0, %arg2,
//       CHECK:   return %[[DX]], %[[DWB]]#0, %[[DWB]]#1
func.func @layer_norm_grad(%x: tensor<?x6x64xf32>, %w: tensor<64xf32>, %dy: tensor<?x6x64xf32>)
    -> (tensor<?x6x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %dx, %dw, %db = bt.layer_norm_grad %x, %w, %dy eps 1.0e-05 : tensor<?x6x64xf32>, tensor<64xf32>
  return %dx, %dw, %db : tensor<?x6x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// Embedding backward: a zero table, then one loop over the flattened ids that
// adds each row of dy to its table row (repeated ids accumulate in order).
// CHECK-LABEL: func.func @embedding_grad
//       CHECK:   %[[IDS:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1, 2]] : tensor<2x6x4xi64> into tensor<48xi64>
//       CHECK:   %[[DY:.*]] = tensor.collapse_shape %arg1 {{\[\[}}0, 1, 2], [3]] : tensor<2x6x4x16xf32> into tensor<48x16xf32>
//       CHECK:   %[[ZERO:.*]] = linalg.fill {{.*}} -> tensor<512x16xf32>
//       CHECK:   scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[T:.*]] = %[[ZERO]]) -> (tensor<512x16xf32>)
//       CHECK:     %[[ID:.*]] = tensor.extract %[[IDS]][%[[I]]]
//       CHECK:     cf.assert %{{.*}}, "bt.embedding_grad: token id out of range [0, V)"
//       CHECK:     %[[ROW:.*]] = tensor.extract_slice %[[T]][%[[R:.*]], 0] [1, 16] [1, 1]
//       CHECK:     %[[SRC:.*]] = tensor.extract_slice %[[DY]][%[[I]], 0] [1, 16] [1, 1]
//       CHECK:     %[[ADD:.*]] = linalg.generic {{.*}} ins(%[[SRC]] : tensor<1x16xf32>) outs(%[[ROW]] : tensor<1x16xf32>)
//       CHECK:       arith.addf
//       CHECK:     tensor.insert_slice %[[ADD]] into %[[T]][%[[R]], 0] [1, 16] [1, 1]
func.func @embedding_grad(%ids: tensor<2x6x4xi64>, %dy: tensor<2x6x4x16xf32>) -> tensor<512x16xf32> {
  %dt = bt.embedding_grad %ids, %dy : tensor<2x6x4xi64>, tensor<2x6x4x16xf32> -> tensor<512x16xf32>
  return %dt : tensor<512x16xf32>
}

// -----

// Attention backward: one loop over the B·H heads carrying dq, dk, dv; per
// head the probabilities are recomputed (q·kᵀ), then dV = Pᵀ·dO, dP = dO·Vᵀ,
// dQ = dS·K, dK = dSᵀ·Q, written into the head's slices; marked
// bt.independent_iterations (the CPU pipeline runs the heads in parallel).
// CHECK-LABEL: func.func @attention_grad
//       CHECK:   %[[G:.*]]:3 = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[DQ:.*]] = %{{.*}}, %[[DK:.*]] = %{{.*}}, %[[DV:.*]] = %{{.*}}) -> (tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>)
//       CHECK:     %[[MASK:.*]] = tensor.extract_slice %arg4[%{{.*}}, 0] [1, 6] [1, 1] : tensor<2x6xi64> to tensor<6xi64>
//   CHECK-DAG:     %[[DOH:.*]] = tensor.extract_slice %arg3[{{.*}}] [1, 6, 1, 32] [1, 1, 1, 1] : tensor<2x6x2x32xf32> to tensor<6x32xf32>
//   CHECK-DAG:     %[[VH:.*]] = tensor.extract_slice %arg2[{{.*}}] [1, 6, 1, 32] [1, 1, 1, 1] : tensor<2x6x2x32xf32> to tensor<6x32xf32>
//   CHECK-DAG:     %[[KH:.*]] = tensor.extract_slice %arg1[{{.*}}] [1, 6, 1, 32] [1, 1, 1, 1] : tensor<2x6x2x32xf32> to tensor<6x32xf32>
//   CHECK-DAG:     %[[QH:.*]] = tensor.extract_slice %arg0[{{.*}}] [1, 6, 1, 32] [1, 1, 1, 1] : tensor<2x6x2x32xf32> to tensor<6x32xf32>
//       CHECK:     linalg.matmul_transpose_b ins(%[[QH]], %[[KH]] :
//       CHECK:     %[[DVH:.*]] = linalg.matmul_transpose_a ins(%[[P:.*]], %[[DOH]] :
//       CHECK:     linalg.matmul_transpose_b ins(%[[DOH]], %[[VH]] :
//       CHECK:     %[[DQH:.*]] = linalg.matmul ins(%[[DS:.*]], %[[KH]] :
//       CHECK:     %[[DKH:.*]] = linalg.matmul_transpose_a ins(%[[DS]], %[[QH]] :
//       CHECK:     %[[NQ:.*]] = tensor.insert_slice %[[DQH]] into %[[DQ]]
//       CHECK:     %[[NK:.*]] = tensor.insert_slice %[[DKH]] into %[[DK]]
//       CHECK:     %[[NV:.*]] = tensor.insert_slice %[[DVH]] into %[[DV]]
//       CHECK:     scf.yield %[[NQ]], %[[NK]], %[[NV]]
//       CHECK:   } {bt.independent_iterations}
//       CHECK:   return %[[G]]#0, %[[G]]#1, %[[G]]#2
func.func @attention_grad(%q: tensor<2x6x2x32xf32>, %k: tensor<2x6x2x32xf32>,
                          %v: tensor<2x6x2x32xf32>, %do: tensor<2x6x2x32xf32>,
                          %m: tensor<2x6xi64>)
    -> (tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>) {
  %dq, %dk, %dv = bt.attention_grad %q, %k, %v, %do key_mask %m scale 0.17677669529663687 : tensor<2x6x2x32xf32>, tensor<2x6xi64>
  return %dq, %dk, %dv : tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>
}

// -----

// Block-local form (rank 5): the loop runs over B·N_blk·H heads of S = 5.
// CHECK-LABEL: func.func @local_attention_grad
//       CHECK:   scf.for {{.*}} -> (tensor<?x?x5x2x32xf32>, tensor<?x?x5x2x32xf32>, tensor<?x?x5x2x32xf32>)
//       CHECK:     tensor.extract_slice %arg0[{{.*}}] [1, 1, 5, 1, 32] [1, 1, 1, 1, 1] : tensor<?x?x5x2x32xf32> to tensor<5x32xf32>
func.func @local_attention_grad(%l: tensor<?x?x5x2x32xf32>) -> tensor<?x?x5x2x32xf32> {
  %a:3 = bt.attention_grad %l, %l, %l, %l scale 0.17677669529663687 : tensor<?x?x5x2x32xf32>
  return %a#0 : tensor<?x?x5x2x32xf32>
}

// -----

// Cross-entropy backward: row max and log Σ exp as the forward, the count of
// counted labels (with the range check), loss_grad / n, then
// (softmax − onehot) · loss_grad / n on counted rows and 0 on ignored ones.
// CHECK-LABEL: func.func @cross_entropy_grad
//       CHECK:   %[[MAX:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<?x4x512xf32>)
//       CHECK:     arith.maximumf
//       CHECK:   math.exp
//       CHECK:   math.log
//       CHECK:   %[[N:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<?x4xi64>) outs(%{{.*}} : tensor<i64>)
//       CHECK:     cf.assert %{{.*}}, "bt.cross_entropy_grad: label out of range [0, V)"
//       CHECK:   %[[SCALE:.*]] = linalg.generic {{.*}} ins(%arg2, %[[N]] : tensor<f32>, tensor<i64>)
//       CHECK:     arith.divf
//       CHECK:   linalg.generic {{.*}} ins(%arg0, %[[MAX]], %{{.*}}, %arg1, %[[SCALE]] :
//       CHECK:     math.exp
//       CHECK:     arith.cmpi ne, %{{.*}}, %c-100_i64
//       CHECK:     linalg.index 2
func.func @cross_entropy_grad(%logits: tensor<?x4x512xf32>, %labels: tensor<?x4xi64>, %dl: tensor<f32>) -> tensor<?x4x512xf32> {
  %g = bt.cross_entropy_grad %logits, %labels, %dl : tensor<?x4x512xf32>, tensor<?x4xi64>, tensor<f32>
  return %g : tensor<?x4x512xf32>
}
