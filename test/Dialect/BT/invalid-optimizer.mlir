// RUN: bt-opt %s -split-input-file -verify-diagnostics

// Verifier errors of the optimizer ops (BTOptimizerOps.td). One rule per case.

func.func @f() -> tensor<f32> {
  // expected-error @+1 {{'bt.global_norm' op needs at least one tensor}}
  %n = "bt.global_norm"() : () -> tensor<f32>
  return %n : tensor<f32>
}

// -----

func.func @f(%n: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'bt.clip_coefficient' op max_norm must be > 0, got 0}}
  %c = bt.clip_coefficient %n max_norm 0.0
  return %c : tensor<f32>
}

// -----

func.func @f(%n: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'bt.clip_coefficient' op eps must be >= 0, got -1}}
  %c = bt.clip_coefficient %n max_norm 1.0 {eps = -1.0 : f64}
  return %c : tensor<f32>
}

// -----

func.func @f(%n: tensor<2xf32>) -> tensor<f32> {
  // expected-error @+1 {{'bt.clip_coefficient' op operand #0 must be 0D tensor of 32-bit float values}}
  %c = "bt.clip_coefficient"(%n) {max_norm = 1.0 : f64} : (tensor<2xf32>) -> tensor<f32>
  return %c : tensor<f32>
}

// -----

func.func @f(%s: tensor<i64>, %p: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'bt.lr_schedule' op cos_min_ratio must be in [0, 1], got 1.5}}
  %lr = bt.lr_schedule %s, %p, %s, %s {cos_min_ratio = 1.5 : f64}
  return %lr : tensor<f32>
}

// -----

func.func @f(%s: tensor<i64>, %p: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'bt.lr_schedule' op warmup_min_ratio must be in [0, 1], got 2}}
  %lr = bt.lr_schedule %s, %p, %s, %s {warmup_min_ratio = 2.0 : f64}
  return %lr : tensor<f32>
}

// -----

func.func @f(%s: tensor<i64>, %p: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'bt.lr_schedule' op initial_ratio must be in [0, 1], got -5.000000e-01}}
  %lr = bt.lr_schedule %s, %p, %s, %s {initial_ratio = -0.5 : f64}
  return %lr : tensor<f32>
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<5xf32>, %lr: tensor<f32>, %s: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'bt.adamw' op grad must have the shape of param: 5 vs 4}}
  %p1, %m1, %v1 = bt.adamw %p, %g, %p, %p lr %lr step %s clip %lr
      beta1 0.9 beta2 0.95 eps 1.0e-8 weight_decay 0.1 : tensor<4xf32>, tensor<5xf32>
  return %p1 : tensor<4xf32>
}

// -----

func.func @f(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'bt.adamw' op beta1 must be in [0, 1), got 1}}
  %p1, %m1, %v1 = bt.adamw %p, %p, %p, %p lr %lr step %s clip %lr
      beta1 1.0 beta2 0.95 eps 1.0e-8 weight_decay 0.1 : tensor<4xf32>, tensor<4xf32>
  return %p1 : tensor<4xf32>
}

// -----

func.func @f(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'bt.adamw' op beta2 must be in [0, 1), got -1.000000e-01}}
  %p1, %m1, %v1 = bt.adamw %p, %p, %p, %p lr %lr step %s clip %lr
      beta1 0.9 beta2 -0.1 eps 1.0e-8 weight_decay 0.1 : tensor<4xf32>, tensor<4xf32>
  return %p1 : tensor<4xf32>
}

// -----

func.func @f(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'bt.adamw' op eps must be >= 0, got -1.000000e-08}}
  %p1, %m1, %v1 = bt.adamw %p, %p, %p, %p lr %lr step %s clip %lr
      beta1 0.9 beta2 0.95 eps -1.0e-8 weight_decay 0.1 : tensor<4xf32>, tensor<4xf32>
  return %p1 : tensor<4xf32>
}

// -----

func.func @f(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'bt.adamw' op weight_decay must be >= 0, got -1.000000e-01}}
  %p1, %m1, %v1 = bt.adamw %p, %p, %p, %p lr %lr step %s clip %lr
      beta1 0.9 beta2 0.95 eps 1.0e-8 weight_decay -0.1 : tensor<4xf32>, tensor<4xf32>
  return %p1 : tensor<4xf32>
}

// -----

// Parameters and moments are f32 (master weights), whatever the gradient's type.
func.func @f(%p: tensor<4xbf16>, %lr: tensor<f32>, %s: tensor<i64>) -> tensor<4xbf16> {
  // expected-error @+1 {{'bt.adamw' op operand #0 must be ranked tensor of 32-bit float values}}
  %p1, %m1, %v1 = bt.adamw %p, %p, %p, %p lr %lr step %s clip %lr
      beta1 0.9 beta2 0.95 eps 1.0e-8 weight_decay 0.1 : tensor<4xbf16>, tensor<4xbf16>
  return %p1 : tensor<4xbf16>
}

// -----

func.func @f(%p: tensor<4xf32>, %m: tensor<3xf32>, %lr: tensor<f32>, %s: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'bt.adamw' op failed to verify that all of {param, exp_avg, exp_avg_sq, new_param, new_exp_avg, new_exp_avg_sq} have same type}}
  %p1, %m1, %v1 = "bt.adamw"(%p, %p, %m, %p, %lr, %s, %lr) {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %p1 : tensor<4xf32>
}
