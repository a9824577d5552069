// RUN: bt-opt %s --bt-decompose --bt-verify-kv-lifetimes | FileCheck %s

// bt-decompose on the ops added for generation: bt.token_decoder_step (the
// token decoder's stack over new inputs with a local cache: per layer
// kv_append without key mask, kv_attend, with the given positions) and
// bt.block_decoder with positions (no kv_length is read for them).

#td = #bt.neox<hidden = 8, layers = 2, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
#bd = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
!l = !bt.kv_cache<local, batch = ?, layers = 2, heads = 2, capacity = 3, head_dim = 4, f32>
!g = !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>

module {
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
  bt.param @"token_decoder.gpt_neox.layers.1.input_layernorm.weight" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.input_layernorm.bias" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.attention.dense.bias" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.mlp.dense_h_to_4h.weight" : tensor<16x8xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.mlp.dense_h_to_4h.bias" : tensor<16xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.mlp.dense_4h_to_h.weight" : tensor<8x16xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.final_layer_norm.bias" : tensor<8xf32>
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

// CHECK-LABEL: func.func @steps
// CHECK-SAME:    (%[[PRE:[^:]*]]: tensor<?x2x8xf32>, %[[TOK:[^:]*]]: tensor<?x1x8xf32>, %[[P0:[^:]*]]: tensor<2xi64>, %[[P1:[^:]*]]: tensor<1xi64>, %[[B:[^:]*]]: index)
// CHECK:         %[[C0:.*]] = bt.kv_alloc batch %[[B]]
// CHECK-NOT:     bt.kv_length
// CHECK:         bt.layer_norm %[[PRE]]
// CHECK:         %[[Q:.*]], %[[K:.*]], %[[V:.*]] = bt.split_qkv
// CHECK:         %[[RQ:.*]] = bt.rotary %[[Q]], %[[P0]]
// CHECK:         %[[RK:.*]] = bt.rotary %[[K]], %[[P0]]
// CHECK:         %[[C1:.*]] = bt.kv_append %[[C0]][0], %[[RK]], %[[V]] : !bt.kv_cache<local, {{.*}}>, tensor<?x2x2x4xf32>
// CHECK:         bt.kv_attend %[[RQ]], %[[C1]][0] scale 5.000000e-01
// CHECK:         %[[C2:.*]] = bt.kv_append %[[C1]][1], %{{[^ ]*}}, %{{[^ ]*}} : !bt.kv_cache
// CHECK:         bt.kv_attend %{{.*}}, %[[C2]][1]
// CHECK:         bt.param_ref @token_decoder.gpt_neox.final_layer_norm.bias
// CHECK-NEXT:    %[[H0:.*]] = bt.layer_norm
// Second step: one token at its own position.
// CHECK:         bt.layer_norm %[[TOK]]
// CHECK:         bt.rotary %{{.*}}, %[[P1]]
// CHECK:         %[[C3:.*]] = bt.kv_append %[[C2]][0]
// CHECK:         %[[C4:.*]] = bt.kv_append %[[C3]][1]
// CHECK:         bt.param_ref @token_decoder.gpt_neox.final_layer_norm.bias
// CHECK-NEXT:    %[[H1:.*]] = bt.layer_norm
// CHECK:         bt.kv_release %[[C4]]
// CHECK-NEXT:    return %[[H0]], %[[H1]]
// CHECK-NOT:     bt.token_decoder_step
  func.func @steps(%pre: tensor<?x2x8xf32>, %tok: tensor<?x1x8xf32>, %p0: tensor<2xi64>, %p1: tensor<1xi64>, %b: index)
      -> (tensor<?x2x8xf32>, tensor<?x1x8xf32>) {
    %c0 = bt.kv_alloc batch %b : !l
    %h0, %c1 = bt.token_decoder_step %pre, %p0 cache %c0 config #td params "token_decoder"
        : tensor<?x2x8xf32>, tensor<2xi64>, !l -> tensor<?x2x8xf32>, !l
    %h1, %c2 = bt.token_decoder_step %tok, %p1 cache %c1 config #td params "token_decoder"
        : tensor<?x1x8xf32>, tensor<1xi64>, !l -> tensor<?x1x8xf32>, !l
    bt.kv_release %c2 : !l
    return %h0, %h1 : tensor<?x2x8xf32>, tensor<?x1x8xf32>
  }

// Per-row positions [B, N] go to bt.rotary as they are; the mask is the
// appended keys' flags.
// CHECK-LABEL: func.func @vanilla_prefill
// CHECK-SAME:    (%[[X:[^:]*]]: tensor<?x?x8xf32>, %[[M:[^:]*]]: tensor<?x?xi64>, %[[P:[^:]*]]: tensor<?x?xi64>, %[[G:[^:]*]]: !bt.kv_cache
// CHECK-NOT:     bt.kv_length
// CHECK:         %[[Q:.*]], %[[K:.*]], %[[V:.*]] = bt.split_qkv
// CHECK:         bt.rotary %[[Q]], %[[P]] rotary_dims 2 base 1.000000e+04 : tensor<?x?x2x4xf32>, tensor<?x?xi64> -> tensor<?x?x2x4xf32>
// CHECK:         %[[RK:.*]] = bt.rotary %[[K]], %[[P]]
// CHECK:         %[[G1:.*]] = bt.kv_append %[[G]][0], %[[RK]], %[[V]] key_mask %[[M]]
// CHECK:         return %{{.*}}, %[[G1]]
  func.func @vanilla_prefill(%x: tensor<?x?x8xf32>, %m: tensor<?x?xi64>, %p: tensor<?x?xi64>, %g: !g)
      -> (tensor<?x?x8xf32>, !g) {
    %y, %g1 = bt.block_decoder %x mask %m positions %p cache %g params "gpt_neox" config #bd
        : tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<?x?xi64>, !g -> tensor<?x?x8xf32>, !g
    return %y, %g1 : tensor<?x?x8xf32>, !g
  }
}
