// RUN: bt-opt %s -split-input-file -verify-diagnostics

// Verifier errors of the backward ops (bt.layer_norm_grad, bt.embedding_grad,
// bt.attention_grad, bt.cross_entropy_grad).

func.func @f(%x: tensor<2x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{'bt.layer_norm_grad' op weight must have shape [64], got [32]}}
  %a:3 = bt.layer_norm_grad %x, %w, %x eps 1.0e-05 : tensor<2x64xf32>, tensor<32xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'bt.layer_norm_grad' op eps must be > 0}}
  %a:3 = bt.layer_norm_grad %x, %w, %x eps 0.0 : tensor<2x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x64xf32>, %w: tensor<64xf16>) {
  // expected-error @+1 {{'bt.layer_norm_grad' op failed to verify that all of {weight, weight_grad, bias_grad} have same type}}
  %a:3 = "bt.layer_norm_grad"(%x, %w, %x) {eps = 1.0e-05 : f64} : (tensor<2x64xf32>, tensor<64xf16>, tensor<2x64xf32>) -> (tensor<2x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @f(%ids: tensor<2x6xi64>, %dy: tensor<2x6x16xf32>) {
  // expected-error @+1 {{'bt.embedding_grad' op table_grad must have a static row count V}}
  %t = bt.embedding_grad %ids, %dy : tensor<2x6xi64>, tensor<2x6x16xf32> -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%ids: tensor<2x6xi64>, %dy: tensor<2x5x16xf32>) {
  // expected-error @+1 {{'bt.embedding_grad' op result_grad must have shape [2, 6, 16], got [2, 5, 16]}}
  %t = bt.embedding_grad %ids, %dy : tensor<2x6xi64>, tensor<2x5x16xf32> -> tensor<512x16xf32>
  return
}

// -----

func.func @f(%ids: tensor<2x6xi64>, %dy: tensor<2x6x16xf32>) {
  // expected-error @+1 {{'bt.embedding_grad' op table_grad must be rank 2 [V, E], got rank 1}}
  %t = bt.embedding_grad %ids, %dy : tensor<2x6xi64>, tensor<2x6x16xf32> -> tensor<16xf32>
  return
}

// -----

func.func @f(%q: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'bt.attention_grad' op q must be rank 4 [B, S, H, hd] (bt.attention) or 5 [B, N_blk, S, H, hd] (bt.local_attention), got rank 3}}
  %a:3 = bt.attention_grad %q, %q, %q, %q scale 0.5 : tensor<6x2x32xf32>
  return
}

// -----

func.func @f(%q: tensor<2x6x2x32xf32>, %m: tensor<2x5xi64>) {
  // expected-error @+1 {{'bt.attention_grad' op key_mask must have shape [2, 6], got [2, 5]}}
  %a:3 = bt.attention_grad %q, %q, %q, %q key_mask %m scale 0.5 : tensor<2x6x2x32xf32>, tensor<2x5xi64>
  return
}

// -----

func.func @f(%q: tensor<2x6x2x32xf32>) {
  // expected-error @+1 {{'bt.attention_grad' op scale must be > 0, got -1}}
  %a:3 = bt.attention_grad %q, %q, %q, %q scale -1.0 : tensor<2x6x2x32xf32>
  return
}

// -----

func.func @f(%q: tensor<2x6x2x32xf32>, %k: tensor<2x5x2x32xf32>) {
  // expected-error @+1 {{'bt.attention_grad' op failed to verify that all of {q, k, v, result_grad, q_grad, k_grad, v_grad} have same type}}
  %a:3 = "bt.attention_grad"(%q, %k, %q, %q) {scale = 0.5 : f64} : (tensor<2x6x2x32xf32>, tensor<2x5x2x32xf32>, tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>) -> (tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>)
  return
}

// -----

func.func @f(%l: tensor<2x5x512xf32>, %y: tensor<2x4xi64>, %d: tensor<f32>) {
  // expected-error @+1 {{'bt.cross_entropy_grad' op labels must have shape [2, 5], got [2, 4]}}
  %g = bt.cross_entropy_grad %l, %y, %d : tensor<2x5x512xf32>, tensor<2x4xi64>, tensor<f32>
  return
}
