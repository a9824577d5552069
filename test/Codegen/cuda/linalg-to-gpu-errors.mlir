// RUN: bt-opt %s --bt-linalg-to-gpu --split-input-file --verify-diagnostics
// RUN: not bt-opt %s --bt-linalg-to-gpu=block-size=2048 --split-input-file 2>&1 | FileCheck %s --check-prefix=BS

// BS: error: bt-linalg-to-gpu: block-size must be in [1, 1024], got 2048

func.func @tensor_semantics(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  // expected-error@+1 {{has tensor semantics; bt-linalg-to-gpu runs after bufferization}}
  %r = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
