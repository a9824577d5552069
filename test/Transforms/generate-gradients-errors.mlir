// RUN: bt-opt %s -split-input-file --bt-generate-gradients -verify-diagnostics

// An op without a vector-Jacobian rule on a path from a parameter to the
// loss is an error located at the op, never a silent zero gradient.

module {
  bt.param @"w" : tensor<8x8xf32>
  func.func @eval_loss(%x: tensor<2x8xf32>, %y: tensor<2xi64>) -> (tensor<f32> {bt.name = "loss"}) {
    %w = bt.param_ref @"w" : tensor<8x8xf32>
    %h = bt.linear %x, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
    // expected-error @+1 {{op 'math.tanh' has no vector-Jacobian rule}}
    %t = math.tanh %h : tensor<2x8xf32>
    // expected-note @+1 {{it lies on a path from a parameter to this loss}}
    %loss = bt.cross_entropy %t, %y : tensor<2x8xf32>, tensor<2xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// The same op off the path (it does not reach the loss, or it reads no
// parameter) is fine.
module {
  bt.param @"w" : tensor<8x8xf32>
  func.func @eval_loss(%x: tensor<2x8xf32>, %y: tensor<2xi64>) -> (tensor<2x8xf32> {bt.name = "side"}, tensor<f32> {bt.name = "loss"}) {
    %w = bt.param_ref @"w" : tensor<8x8xf32>
    %tx = math.tanh %x : tensor<2x8xf32>
    %h = bt.linear %tx, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
    %side = math.tanh %h : tensor<2x8xf32>
    %loss = bt.cross_entropy %h, %y : tensor<2x8xf32>, tensor<2xi64> -> tensor<f32>
    return %side, %loss : tensor<2x8xf32>, tensor<f32>
  }
}

// -----

// linalg.generic has no rule (it cannot be differentiated soundly in
// general).
#id = affine_map<(d0, d1) -> (d0, d1)>
module {
  bt.param @"w" : tensor<8x8xf32>
  func.func @eval_loss(%x: tensor<2x8xf32>, %y: tensor<2xi64>) -> (tensor<f32> {bt.name = "loss"}) {
    %w = bt.param_ref @"w" : tensor<8x8xf32>
    %h = bt.linear %x, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
    %e = tensor.empty() : tensor<2x8xf32>
    // expected-error @+1 {{op 'linalg.generic' has no vector-Jacobian rule}}
    %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%h : tensor<2x8xf32>) outs(%e : tensor<2x8xf32>) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.mulf %a, %a : f32
      linalg.yield %s : f32
    } -> tensor<2x8xf32>
    // expected-note @+1 {{it lies on a path from a parameter to this loss}}
    %loss = bt.cross_entropy %g, %y : tensor<2x8xf32>, tensor<2xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Model-level ops must be decomposed first. They read their parameters by
// symbol, without a bt.param_ref operand, and are still on the path.
module {
  bt.param @"head" : tensor<512x64xf32>
  func.func @eval_loss(%x: tensor<2x6x64xf32>, %y: tensor<2x6xi64>) -> (tensor<f32> {bt.name = "loss"}) {
    // expected-error @+1 {{op 'bt.lm_head' has no vector-Jacobian rule (a model-level op: run bt-decompose first)}}
    %l = bt.lm_head %x weight @"head" : tensor<2x6x64xf32> -> tensor<2x6x512xf32>
    // expected-note @+1 {{it lies on a path from a parameter to this loss}}
    %loss = bt.cross_entropy %l, %y : tensor<2x6x512xf32>, tensor<2x6xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A differentiated value read inside the region of an op on the path.
module {
  bt.param @"w" : tensor<8x8xf32>
  func.func @eval_loss(%x: tensor<2x8xf32>, %y: tensor<2xi64>) -> (tensor<f32> {bt.name = "loss"}) {
    %w = bt.param_ref @"w" : tensor<8x8xf32>
    %h = bt.linear %x, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
    // expected-error @+1 {{op 'tensor.generate' reads a differentiated value inside its region}}
    %g = tensor.generate {
    ^bb0(%i: index, %j: index):
      %v = tensor.extract %h[%i, %j] : tensor<2x8xf32>
      tensor.yield %v : f32
    } : tensor<2x8xf32>
    %loss = bt.cross_entropy %g, %y : tensor<2x8xf32>, tensor<2xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// expected-error @+1 {{bt-generate-gradients: no function 'eval_loss' with a body}}
module {
  func.func @eval(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}

// -----

module {
  // expected-error @+1 {{bt-generate-gradients: 'eval_loss' has no result named 'loss' (bt.name)}}
  func.func @eval_loss(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}

// -----

module {
  func.func @eval_loss(%x: tensor<f32>) -> (tensor<f32> {bt.name = "loss"}) {
    return %x : tensor<f32>
  }
  // expected-error @+1 {{bt-generate-gradients: 'grad' is already defined}}
  func.func @grad() {
    return
  }
}

// -----

// Reading a differentiated tensor element by element (tensor.extract, then
// a float splat) is an error, not a zero.
module {
  bt.param @"w" : tensor<f32>
  func.func @eval_loss(%y: tensor<2xi64>) -> (tensor<f32> {bt.name = "loss"}) {
    %w = bt.param_ref @"w" : tensor<f32>
    // expected-error @+1 {{op 'tensor.extract' has no vector-Jacobian rule}}
    %s = tensor.extract %w[] : tensor<f32>
    %t = tensor.splat %s : tensor<2x8xf32>
    // expected-note @+1 {{it lies on a path from a parameter to this loss}}
    %loss = bt.cross_entropy %t, %y : tensor<2x8xf32>, tensor<2xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
