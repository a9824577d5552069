// RUN: bt-opt %s -split-input-file --bt-decompose -verify-diagnostics

// Errors of bt-decompose: token decoders it cannot decompose.

#td = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>

// The summation strategy looks the BOS id up in the token table; an id
// outside [0, V) cannot be embedded.
module {
  bt.param @"token_decoder.gpt_neox.embed_in.weight" : tensor<16x8xf32>
  bt.param @"token_decoder.expansion_layer.weight" : tensor<32x12x1xf32>
  bt.param @"token_decoder.expansion_layer.bias" : tensor<32xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.input_layernorm.bias" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.attention.dense.bias" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<16x8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<16xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<8x16xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.final_layer_norm.bias" : tensor<8xf32>
  func.func @bos_out_of_range(%ctx: tensor<2x3x12xf32>, %ids: tensor<2x3x4xi64>) -> tensor<2x3x4x8xf32> {
    // expected-error @below {{'bt.token_decoder' op cannot be decomposed: bos_token_id (16) is outside the token table @"token_decoder.gpt_neox.embed_in.weight" of 16 rows}}
    %h = bt.token_decoder %ctx, %ids params "token_decoder" config #td strategy summation prefix_length 4 {bos_token_id = 16 : i64}
        : tensor<2x3x12xf32>, tensor<2x3x4xi64> -> tensor<2x3x4x8xf32>
    return %h : tensor<2x3x4x8xf32>
  }
}
