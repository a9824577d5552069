// RUN: bt-opt %s --bt-lower-to-linalg | FileCheck %s

// Leading dims collapse to M; the bias broadcast is the init of
// linalg.matmul_transpose_b, which accumulates x · Wᵀ onto it.

// CHECK-LABEL: func.func @linear_bias
//  CHECK-SAME:   %[[X:.*]]: tensor<?x5x37xf32>, %[[W:.*]]: tensor<29x37xf32>, %[[B:.*]]: tensor<29xf32>
//       CHECK:   %[[X2:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<?x5x37xf32> into tensor<?x37xf32>
//       CHECK:   %[[INIT:.*]] = linalg.broadcast ins(%[[B]] : tensor<29xf32>) outs(%{{.*}} : tensor<?x29xf32>) dimensions = [0]
//       CHECK:   %[[Y:.*]] = linalg.matmul_transpose_b ins(%[[X2]], %[[W]] : tensor<?x37xf32>, tensor<29x37xf32>) outs(%[[INIT]] : tensor<?x29xf32>)
//       CHECK:   %[[R:.*]] = tensor.expand_shape %[[Y]] {{\[}}[0, 1], [2]] output_shape [%{{.*}}, 5, 29] : tensor<?x29xf32> into tensor<?x5x29xf32>
//       CHECK:   return %[[R]]
func.func @linear_bias(%x: tensor<?x5x37xf32>, %w: tensor<29x37xf32>, %b: tensor<29xf32>) -> tensor<?x5x29xf32> {
  %y = bt.linear %x, %w, %b : tensor<?x5x37xf32>, tensor<29x37xf32>, tensor<29xf32> -> tensor<?x5x29xf32>
  return %y : tensor<?x5x29xf32>
}

// Conv1d weight [N, K, 1] is collapsed to [N, K]; no bias: zero init.
// CHECK-LABEL: func.func @linear_conv1d
//       CHECK:   %[[W2:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2]] : tensor<29x37x1xf32> into tensor<29x37xf32>
//       CHECK:   %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<8x29xf32>)
//       CHECK:   linalg.matmul_transpose_b ins(%{{.*}}, %[[W2]] : tensor<8x37xf32>, tensor<29x37xf32>) outs(%[[ZERO]] : tensor<8x29xf32>)
func.func @linear_conv1d(%x: tensor<2x4x37xf32>, %w: tensor<29x37x1xf32>) -> tensor<2x4x29xf32> {
  %y = bt.linear %x, %w : tensor<2x4x37xf32>, tensor<29x37x1xf32> -> tensor<2x4x29xf32>
  return %y : tensor<2x4x29xf32>
}

// Two dynamic leading dims cannot be one expand_shape group in MLIR 19: the
// result is re-shaped with tensor.reshape.
// CHECK-LABEL: func.func @linear_two_dynamic
//       CHECK:   tensor.collapse_shape %{{.*}} {{\[}}[0, 1, 2], [3]] : tensor<?x?x6x16xf32> into tensor<?x16xf32>
//       CHECK:   linalg.matmul_transpose_b
//       CHECK:   %[[SHAPE:.*]] = tensor.from_elements %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xindex>
//       CHECK:   tensor.reshape %{{.*}}(%[[SHAPE]]) : (tensor<?x48xf32>, tensor<4xindex>) -> tensor<?x?x6x48xf32>
func.func @linear_two_dynamic(%x: tensor<?x?x6x16xf32>, %w: tensor<48x16xf32>, %b: tensor<48xf32>) -> tensor<?x?x6x48xf32> {
  %y = bt.linear %x, %w, %b : tensor<?x?x6x16xf32>, tensor<48x16xf32>, tensor<48xf32> -> tensor<?x?x6x48xf32>
  return %y : tensor<?x?x6x48xf32>
}

// A vector input becomes a 1-row matrix.
// CHECK-LABEL: func.func @linear_vector
//       CHECK:   tensor.expand_shape %{{.*}} {{\[}}[0, 1]] output_shape [1, 37] : tensor<37xf32> into tensor<1x37xf32>
//       CHECK:   linalg.matmul_transpose_b
//       CHECK:   tensor.collapse_shape %{{.*}} {{\[}}[0, 1]] : tensor<1x29xf32> into tensor<29xf32>
func.func @linear_vector(%x: tensor<37xf32>, %w: tensor<29x37xf32>) -> tensor<29xf32> {
  %y = bt.linear %x, %w : tensor<37xf32>, tensor<29x37xf32> -> tensor<29xf32>
  return %y : tensor<29xf32>
}

// prefix_projection: the linear, then the last dim P·T split into [P, T].
// CHECK-LABEL: func.func @prefix_projection
//       CHECK:   linalg.matmul_transpose_b ins(%{{.*}}, %{{.*}} : tensor<?x8xf32>, tensor<10x8xf32>)
//       CHECK:   tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [%{{.*}}, 3, 10] : tensor<?x10xf32> into tensor<?x3x10xf32>
//       CHECK:   %[[P:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1], [2, 3]] output_shape [%{{.*}}, 3, 2, 5] : tensor<?x3x10xf32> into tensor<?x3x2x5xf32>
//       CHECK:   return %[[P]]
func.func @prefix_projection(%c: tensor<?x3x8xf32>, %w: tensor<10x8x1xf32>, %b: tensor<10xf32>) -> tensor<?x3x2x5xf32> {
  %y = bt.prefix_projection %c, %w, %b prefix_length 2 : tensor<?x3x8xf32>, tensor<10x8x1xf32>, tensor<10xf32> -> tensor<?x3x2x5xf32>
  return %y : tensor<?x3x2x5xf32>
}
