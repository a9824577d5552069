// RUN: bt-opt %s --split-input-file --bt-bf16-gemms | FileCheck %s

// A parameter used only as the weight of f32 GEMMs (in every function)
// becomes a bf16 argument; each GEMM's activation is rounded to bf16 by a
// generic (round to nearest even in integer ops, NaN → quiet NaN), and the
// GEMM keeps its f32 init and result.
// CHECK-LABEL: func.func @linear
//  CHECK-SAME:   %[[W:.*]]: tensor<8x4xbf16> {bt.param = "w"}
//  CHECK-SAME:   %[[X:.*]]: tensor<?x4xf32>
//       CHECK:   %[[XB:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<?x4xf32>) outs(%{{.*}} : tensor<?x4xbf16>)
//       CHECK:     arith.bitcast %{{.*}} : f32 to i32
//       CHECK:     arith.constant 32767 : i32
//       CHECK:     arith.cmpf uno
//       CHECK:     arith.trunci %{{.*}} : i32 to i16
//       CHECK:     arith.bitcast %{{.*}} : i16 to bf16
//       CHECK:   linalg.matmul_transpose_b ins(%[[XB]], %[[W]] : tensor<?x4xbf16>, tensor<8x4xbf16>) outs(%{{.*}} : tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-LABEL: func.func @other
//  CHECK-SAME:   tensor<8x4xbf16> {bt.param = "w"}
//       CHECK:   linalg.matmul_transpose_b ins(%{{.*}}, %{{.*}} : tensor<2x4xbf16>, tensor<8x4xbf16>)
func.func @linear(%w: tensor<8x4xf32> {bt.param = "w"}, %x: tensor<?x4xf32>, %init: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %y = linalg.matmul_transpose_b ins(%x, %w : tensor<?x4xf32>, tensor<8x4xf32>) outs(%init : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
func.func @other(%w: tensor<8x4xf32> {bt.param = "w"}, %x: tensor<2x4xf32>, %init: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %y = linalg.matmul_transpose_b ins(%x, %w : tensor<2x4xf32>, tensor<8x4xf32>) outs(%init : tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// A parameter with any other use, in any function, stays f32 everywhere
// (here: an elementwise use in @update, as a training step's optimizer
// would make); so do vectors (biases) and the GEMMs on it.
// CHECK-LABEL: func.func @linear
//  CHECK-SAME:   tensor<8x4xf32> {bt.param = "w"}
//  CHECK-SAME:   tensor<8xf32> {bt.param = "b"}
//   CHECK-NOT:   bf16
// CHECK-LABEL: func.func @update
//   CHECK-NOT:   bf16
func.func @linear(%w: tensor<8x4xf32> {bt.param = "w"}, %b: tensor<8xf32> {bt.param = "b"}, %x: tensor<?x4xf32>, %init: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %y = linalg.matmul_transpose_b ins(%x, %w : tensor<?x4xf32>, tensor<8x4xf32>) outs(%init : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
func.func @update(%w: tensor<8x4xf32> {bt.param = "w"}) -> tensor<8x4xf32> {
  %z = arith.addf %w, %w : tensor<8x4xf32>
  return %z : tensor<8x4xf32>
}

// -----

// The weight as the first input (x · W with W as A) is no weight use.
// CHECK-LABEL: func.func @first
//  CHECK-SAME:   tensor<4x4xf32> {bt.param = "w"}
//   CHECK-NOT:   bf16
func.func @first(%w: tensor<4x4xf32> {bt.param = "w"}, %x: tensor<4x4xf32>, %init: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %y = linalg.matmul ins(%w, %x : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
