// RUN: bt-opt %s -split-input-file -verify-diagnostics --bt-generate-entry-points

// Errors of bt-generate-entry-points: the forward must be found and complete,
// the entry points must not exist yet, and a model without token decoder is
// a vanilla GPT-NeoX (L_B = 1).

// expected-error @+1 {{bt-generate-entry-points: no model-level forward (a function 'eval', or one with bt.embedder, bt.block_decoder and bt.lm_head)}}
module {
  func.func @f() {
    return
  }
}

// -----

module {
  bt.param @"embedder.embeddings.weight" : tensor<16x2xf32>
  // expected-error @+1 {{bt-generate-entry-points: the forward lacks a bt.block_decoder (without cache)}}
  func.func @eval(%ids: tensor<?x?x4xi64>) -> tensor<?x?x8xf32> {
    %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<?x?x4xi64> -> tensor<?x?x8xf32>
    return %x : tensor<?x?x8xf32>
  }
}

// -----

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
module {
  bt.param @"embedder.embeddings.weight" : tensor<16x2xf32>
  bt.param @"embed_out.weight" : tensor<16x8xf32>
  bt.param @"gpt_neox.layers.0.input_layernorm.weight" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.input_layernorm.bias" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"gpt_neox.layers.0.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"gpt_neox.layers.0.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"gpt_neox.layers.0.attention.dense.bias" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<16x8xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<16xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<8x16xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"gpt_neox.final_layer_norm.bias" : tensor<8xf32>
  func.func @eval(%ids: tensor<?x?x4xi64>) -> tensor<?x?x16xf32> {
    // expected-error @+1 {{bt-generate-entry-points: a model without bt.token_decoder is a vanilla GPT-NeoX and must have L_B = 1, got 4}}
    %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<?x?x4xi64> -> tensor<?x?x8xf32>
    %h = "bt.block_decoder"(%x) <{config = #cfg, operandSegmentSizes = array<i32: 1, 0, 0, 0>, params = "gpt_neox"}> : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %l = bt.lm_head %h weight @"embed_out.weight" : tensor<?x?x8xf32> -> tensor<?x?x16xf32>
    return %l : tensor<?x?x16xf32>
  }
}

// -----

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
module {
  bt.param @"gpt_neox.embed_in.weight" : tensor<16x8xf32>
  bt.param @"embed_out.weight" : tensor<16x8xf32>
  bt.param @"gpt_neox.layers.0.input_layernorm.weight" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.input_layernorm.bias" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"gpt_neox.layers.0.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"gpt_neox.layers.0.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"gpt_neox.layers.0.attention.dense.bias" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<16x8xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<16xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<8x16xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"gpt_neox.final_layer_norm.bias" : tensor<8xf32>
  func.func @eval(%ids: tensor<?x?x1xi64>) -> tensor<?x?x16xf32> {
    %x = bt.embedder %ids table @"gpt_neox.embed_in.weight" : tensor<?x?x1xi64> -> tensor<?x?x8xf32>
    %h = "bt.block_decoder"(%x) <{config = #cfg, operandSegmentSizes = array<i32: 1, 0, 0, 0>, params = "gpt_neox"}> : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %l = bt.lm_head %h weight @"embed_out.weight" : tensor<?x?x8xf32> -> tensor<?x?x16xf32>
    return %l : tensor<?x?x16xf32>
  }
  // expected-error @+1 {{bt-generate-entry-points: the entry point 'prefill' is already defined}}
  func.func @prefill() {
    return
  }
}
