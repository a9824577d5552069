// RUN: bt-opt %s -split-input-file --bt-lower-backward -verify-diagnostics

// The backward lowering is f32 only (training runs in fp32, as the fixtures).
func.func @bf16(%x: tensor<2x8xbf16>, %w: tensor<8xbf16>, %dy: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  // expected-error @+1 {{'bt.layer_norm_grad' op bt-lower-backward supports f32 tensors only}}
  %dx, %dw, %db = bt.layer_norm_grad %x, %w, %dy eps 1.0e-05 : tensor<2x8xbf16>, tensor<8xbf16>
  return %dx : tensor<2x8xbf16>
}

// -----

// The head loop needs a static head count.
func.func @dynamic_heads(%q: tensor<2x6x?x32xf32>) -> tensor<2x6x?x32xf32> {
  // expected-error @+1 {{'bt.attention_grad' op the number of heads must be static for code generation}}
  %a:3 = bt.attention_grad %q, %q, %q, %q scale 0.17677669529663687 : tensor<2x6x?x32xf32>
  return %a#0 : tensor<2x6x?x32xf32>
}
