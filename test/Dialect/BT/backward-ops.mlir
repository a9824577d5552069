// Round trip of the backward ops (reverse-mode differentiation,
// bt-generate-gradients), pretty and generic forms. Shapes of block_tiny:
// B = 2, N_blk = 6, L_B = 4, E = 16, D = T = 64, H = 2, hd = 32, V = 512.

// RUN: bt-opt %s | bt-opt | FileCheck %s
// RUN: bt-opt %s --mlir-print-op-generic | bt-opt | FileCheck %s

// CHECK-LABEL: func.func @layer_norm_grad
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = bt.layer_norm_grad %arg0, %arg1, %arg2 eps 1.000000e-05 : tensor<?x6x64xf32>, tensor<64xf32>
func.func @layer_norm_grad(%x: tensor<?x6x64xf32>, %w: tensor<64xf32>, %dy: tensor<?x6x64xf32>)
    -> (tensor<?x6x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %dx, %dw, %db = bt.layer_norm_grad %x, %w, %dy eps 1.0e-05 : tensor<?x6x64xf32>, tensor<64xf32>
  return %dx, %dw, %db : tensor<?x6x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// CHECK-LABEL: func.func @embedding_grad
// CHECK: bt.embedding_grad %arg0, %arg1 : tensor<2x6x4xi64>, tensor<2x6x4x16xf32> -> tensor<512x16xf32>
func.func @embedding_grad(%ids: tensor<2x6x4xi64>, %dy: tensor<2x6x4x16xf32>) -> tensor<512x16xf32> {
  %dt = bt.embedding_grad %ids, %dy : tensor<2x6x4xi64>, tensor<2x6x4x16xf32> -> tensor<512x16xf32>
  return %dt : tensor<512x16xf32>
}

// CHECK-LABEL: func.func @attention_grad
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = bt.attention_grad %arg0, %arg1, %arg2, %arg3 key_mask %arg4 scale 0.17677669529663687 : tensor<2x6x2x32xf32>, tensor<2x6xi64>
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = bt.attention_grad %arg5, %arg5, %arg5, %arg5 scale 0.17677669529663687 : tensor<?x?x5x2x32xf32>
func.func @attention_grad(%q: tensor<2x6x2x32xf32>, %k: tensor<2x6x2x32xf32>,
                          %v: tensor<2x6x2x32xf32>, %do: tensor<2x6x2x32xf32>,
                          %m: tensor<2x6xi64>, %l: tensor<?x?x5x2x32xf32>) {
  %dq, %dk, %dv = bt.attention_grad %q, %k, %v, %do key_mask %m scale 0.17677669529663687 : tensor<2x6x2x32xf32>, tensor<2x6xi64>
  %a:3 = bt.attention_grad %l, %l, %l, %l scale 0.17677669529663687 : tensor<?x?x5x2x32xf32>
  return
}

// CHECK-LABEL: func.func @cross_entropy_grad
// CHECK: bt.cross_entropy_grad %arg0, %arg1, %arg2 : tensor<?x?x4x512xf32>, tensor<?x?x4xi64>, tensor<f32>
// CHECK: bt.cross_entropy_grad %arg0, %arg1, %arg2 {ignore_index = 0 : i64} : tensor<?x?x4x512xf32>, tensor<?x?x4xi64>, tensor<f32>
func.func @cross_entropy_grad(%logits: tensor<?x?x4x512xf32>, %labels: tensor<?x?x4xi64>, %dl: tensor<f32>) {
  %g = bt.cross_entropy_grad %logits, %labels, %dl : tensor<?x?x4x512xf32>, tensor<?x?x4xi64>, tensor<f32>
  %h = bt.cross_entropy_grad %logits, %labels, %dl {ignore_index = 0 : i64} : tensor<?x?x4x512xf32>, tensor<?x?x4xi64>, tensor<f32>
  return
}
