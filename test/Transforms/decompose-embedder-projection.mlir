// RUN: bt-opt %s --bt-decompose | FileCheck %s

// The projection-layer embedder (official projection_method: projection_layer,
// Conv1d(E -> D, kernel = stride = L_B, bias)) decomposes into the lookup and
// one bt.linear per kernel position k on lookup[:, :, k, :] and W[:, :, k],
// summed in order k = 0 .. L_B-1 with the bias in the first (L_B = 2, E = 3,
// D = 5).

// CHECK-LABEL: func.func @embed
// CHECK:         %[[T:.*]] = bt.param_ref @embedder.embeddings.weight : tensor<16x3xf32>
// CHECK:         %[[L:.*]] = bt.embedding_lookup %{{.*}}, %[[T]] : tensor<2x?x2xi64>, tensor<16x3xf32> -> tensor<2x?x2x3xf32>
// CHECK:         %[[W:.*]] = bt.param_ref @embedder.projection_layer.weight : tensor<5x3x2xf32>
// CHECK:         %[[B:.*]] = bt.param_ref @embedder.projection_layer.bias : tensor<5xf32>
// CHECK:         %[[X0:.*]] = tensor.extract_slice %[[L]][0, 0, 0, 0] [2, %{{.*}}, 1, 3] [1, 1, 1, 1] : tensor<2x?x2x3xf32> to tensor<2x?x3xf32>
// CHECK:         %[[W0:.*]] = tensor.extract_slice %[[W]][0, 0, 0] [5, 3, 1] [1, 1, 1] : tensor<5x3x2xf32> to tensor<5x3xf32>
// CHECK:         %[[Y0:.*]] = bt.linear %[[X0]], %[[W0]], %[[B]] : tensor<2x?x3xf32>, tensor<5x3xf32>, tensor<5xf32> -> tensor<2x?x5xf32>
// CHECK:         %[[X1:.*]] = tensor.extract_slice %[[L]][0, 0, 1, 0] [2, %{{.*}}, 1, 3] [1, 1, 1, 1] : tensor<2x?x2x3xf32> to tensor<2x?x3xf32>
// CHECK:         %[[W1:.*]] = tensor.extract_slice %[[W]][0, 0, 1] [5, 3, 1] [1, 1, 1] : tensor<5x3x2xf32> to tensor<5x3xf32>
// CHECK:         %[[Y1:.*]] = bt.linear %[[X1]], %[[W1]] : tensor<2x?x3xf32>, tensor<5x3xf32> -> tensor<2x?x5xf32>
// CHECK:         %[[S:.*]] = arith.addf %[[Y0]], %[[Y1]] : tensor<2x?x5xf32>
// CHECK:         return %[[S]]
// CHECK-NOT:     bt.embedder
module {
  bt.param @"embedder.embeddings.weight" : tensor<16x3xf32>
  bt.param @"embedder.projection_layer.weight" : tensor<5x3x2xf32>
  bt.param @"embedder.projection_layer.bias" : tensor<5xf32>
  func.func @embed(%ids: tensor<2x?x2xi64>) -> tensor<2x?x5xf32> {
    %x = bt.embedder %ids table @"embedder.embeddings.weight"
           projection @"embedder.projection_layer.weight"
           bias @"embedder.projection_layer.bias"
           : tensor<2x?x2xi64> -> tensor<2x?x5xf32>
    return %x : tensor<2x?x5xf32>
  }
}
