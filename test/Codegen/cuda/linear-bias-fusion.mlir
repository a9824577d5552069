// RUN: bt-opt %s -split-input-file --bt-lower-to-linalg=target=cuda | FileCheck %s
// RUN: bt-opt %s -split-input-file --bt-lower-to-linalg=target=cuda --convert-elementwise-to-linalg --canonicalize --cse --bt-fuse-elementwise | FileCheck %s --check-prefix=FUSED

// A GPT-NeoX MLP with its residual on the CUDA target: each bt.linear whose
// bias result feeds an elementwise op (the GELU, the residual add) is a
// matmul into a zero fill (cuBLAS beta = 0, no broadcast kernel) followed by
// the bias add as its own generic, and the GELU reads its input (not in
// place); bt-fuse-elementwise then merges bias + GELU into one generic and
// bias + residual into another: two elementwise kernels for the MLP instead
// of two bias broadcasts, the GELU and the add.
// CHECK-LABEL: func.func @mlp
//   CHECK-NOT:   linalg.broadcast
//       CHECK:   %[[F1:.*]] = linalg.fill
//       CHECK:   %[[H:.*]] = linalg.matmul_transpose_b ins(%arg0, %arg1 : {{.*}}) outs(%[[F1]] :
//       CHECK:   %[[HB:.*]] = linalg.generic {{.*}} ins(%[[H]], %arg2 : tensor<?x32xf32>, tensor<32xf32>)
//       CHECK:     arith.addf
//       CHECK:   %[[G:.*]] = linalg.generic {{.*}} ins(%[[HB]] : tensor<?x32xf32>) outs(%{{.*}} : tensor<?x32xf32>)
//       CHECK:     math.erf
//       CHECK:   %[[F2:.*]] = linalg.fill
//       CHECK:   %[[Y:.*]] = linalg.matmul_transpose_b ins(%[[G]], %arg3 : {{.*}}) outs(%[[F2]] :
//       CHECK:   %[[YB:.*]] = linalg.generic {{.*}} ins(%[[Y]], %arg4 : tensor<?x8xf32>, tensor<8xf32>)
//       CHECK:   arith.addf %[[YB]], %arg0 : tensor<?x8xf32>
// FUSED-LABEL: func.func @mlp
//       FUSED:   %[[H:.*]] = linalg.matmul_transpose_b
//       FUSED:   %[[G:.*]] = linalg.generic {{.*}} ins(%[[H]], %arg2 : tensor<?x32xf32>, tensor<32xf32>)
//       FUSED:     arith.addf
//       FUSED:     math.erf
//       FUSED:   %[[Y:.*]] = linalg.matmul_transpose_b ins(%[[G]], %arg3
//       FUSED:   linalg.generic {{.*}} ins(%[[Y]], %arg4, %arg0 : tensor<?x8xf32>, tensor<8xf32>, tensor<?x8xf32>)
//       FUSED:     arith.addf
//       FUSED:     arith.addf
//   FUSED-NOT:   linalg.generic
//       FUSED:   return
func.func @mlp(%x: tensor<?x8xf32>, %w1: tensor<32x8xf32>, %b1: tensor<32xf32>, %w2: tensor<8x32xf32>, %b2: tensor<8xf32>) -> tensor<?x8xf32> {
  %h = bt.linear %x, %w1, %b1 : tensor<?x8xf32>, tensor<32x8xf32>, tensor<32xf32> -> tensor<?x32xf32>
  %g = bt.gelu %h : tensor<?x32xf32>
  %y = bt.linear %g, %w2, %b2 : tensor<?x32xf32>, tensor<8x32xf32>, tensor<8xf32> -> tensor<?x8xf32>
  %r = arith.addf %y, %x : tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

// A linear whose result is not consumed by one elementwise op (here the
// function's result, as the QKV projection feeds bt.split_qkv) keeps the
// bias as the GEMM's init (broadcast, beta = 1); a GELU of a linear without
// bias stays in place.
// CHECK-LABEL: func.func @kept
//       CHECK:   linalg.broadcast ins(%arg2 : tensor<32xf32>)
//       CHECK:   linalg.matmul_transpose_b
//       CHECK:   %[[N:.*]] = linalg.matmul_transpose_b
//       CHECK:   linalg.generic {indexing_maps = [#{{.*}}], iterator_types = ["parallel", "parallel"]} outs(%[[N]] : tensor<?x32xf32>)
//       CHECK:     math.erf
func.func @kept(%x: tensor<?x8xf32>, %w1: tensor<32x8xf32>, %b1: tensor<32xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %h = bt.linear %x, %w1, %b1 : tensor<?x8xf32>, tensor<32x8xf32>, tensor<32xf32> -> tensor<?x32xf32>
  %n = bt.linear %x, %w1 : tensor<?x8xf32>, tensor<32x8xf32> -> tensor<?x32xf32>
  %g = bt.gelu %n : tensor<?x32xf32>
  return %h, %g : tensor<?x32xf32>, tensor<?x32xf32>
}
