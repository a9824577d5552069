// RUN: bt-opt %s --bt-lower-to-linalg --split-input-file --verify-diagnostics

// Model-level ops must be decomposed first.
bt.param @"lm" : tensor<16x8xf32>
func.func @model_level(%h: tensor<2x8xf32>) -> tensor<2x16xf32> {
  // expected-error @below {{'bt.lm_head' op is not a layer-level op that bt-lower-to-linalg can lower; run bt-decompose first}}
  %l = bt.lm_head %h weight @"lm" : tensor<2x8xf32> -> tensor<2x16xf32>
  return %l : tensor<2x16xf32>
}
