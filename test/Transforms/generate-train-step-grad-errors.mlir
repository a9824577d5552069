// RUN: bt-opt %s --bt-generate-train-step --split-input-file --verify-diagnostics

// train_step needs every op between a parameter and the loss to be
// differentiable; the reverse sweep's diagnostic points at the forward op
// (the clone in train_step keeps its location).

module {
  bt.param @w : tensor<4x4xf32>
  func.func @eval_loss(%x: tensor<2x4xf32>, %l: tensor<2xi64>) -> (tensor<f32> {bt.name = "loss"}) {
    %w = bt.param_ref @w : tensor<4x4xf32>
    %y = bt.linear %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    // expected-error @+1 {{op 'math.exp' has no vector-Jacobian rule}}
    %e = math.exp %y : tensor<2x4xf32>
    // expected-note @+1 {{it lies on a path from a parameter to this loss}}
    %loss = bt.cross_entropy %e, %l : tensor<2x4xf32>, tensor<2xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

module {
  bt.param @w : tensor<4x4xf32>
  func.func @eval_loss(%x: tensor<2x4xf32>, %l: tensor<2xi64>) -> (tensor<f32> {bt.name = "loss"}) {
    %w = bt.param_ref @w : tensor<4x4xf32>
    %y = bt.linear %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %loss = bt.cross_entropy %y, %l : tensor<2x4xf32>, tensor<2xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
  // expected-error @+1 {{bt-generate-train-step: the entry point 'train_step' is already defined}}
  func.func @train_step() {
    return
  }
}
