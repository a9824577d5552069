// RUN: bt-opt %s --bt-generate-train-step="train-step=false" --split-input-file --verify-diagnostics

// expected-error @+1 {{bt-generate-train-step: no function 'eval_loss' (the model-level forward with loss)}}
module {
  func.func @eval(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}

// -----

module {
  // expected-error @+1 {{bt-generate-train-step: 'eval_loss' has no result named 'loss' (bt.name)}}
  func.func @eval_loss(%x: tensor<f32>) -> (tensor<f32> {bt.name = "logits"}) {
    return %x : tensor<f32>
  }
}

// -----

module {
  // expected-error @+1 {{bt-generate-train-step: the loss reads no parameter}}
  func.func @eval_loss(%x: tensor<f32>) -> (tensor<f32> {bt.name = "loss"}) {
    return %x : tensor<f32>
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
  // expected-error @+1 {{bt-generate-train-step: the entry point 'apply_gradients' is already defined}}
  func.func @apply_gradients() {
    return
  }
}
