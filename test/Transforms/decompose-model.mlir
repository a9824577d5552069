// RUN: bt-opt %s -split-input-file --bt-decompose | FileCheck %s
// RUN: bt-opt %s -split-input-file --bt-decompose | FileCheck %s --check-prefix=NOMODEL

// bt-decompose on whole models: bt.lm_head alone, the Block Transformer eval
// forward (embedder -> block decoder -> slice -> token decoder -> lm_head ->
// cross_entropy), and a vanilla GPT-NeoX (L_B = 1 embedder on
// gpt_neox.embed_in, a block decoder on "gpt_neox", lm_head on embed_out).

// NOMODEL-NOT: bt.embedder
// NOMODEL-NOT: bt.block_decoder
// NOMODEL-NOT: bt.token_decoder
// NOMODEL-NOT: bt.lm_head

// The untied LM head: a bias-free bt.linear on the parameter.
// CHECK-LABEL: func.func @lm_head
// CHECK-SAME:    (%[[H:.*]]: tensor<?x3x4x8xf32>)
// CHECK-NEXT:    %[[W:.*]] = bt.param_ref @token_decoder.embed_out.weight : tensor<16x8xf32>
// CHECK-NEXT:    %[[L:.*]] = bt.linear %[[H]], %[[W]] : tensor<?x3x4x8xf32>, tensor<16x8xf32> -> tensor<?x3x4x16xf32>
// CHECK-NEXT:    return %[[L]]
module {
  bt.param @"token_decoder.embed_out.weight" : tensor<16x8xf32>
  func.func @lm_head(%h: tensor<?x3x4x8xf32>) -> tensor<?x3x4x16xf32> {
    %l = bt.lm_head %h weight @"token_decoder.embed_out.weight" : tensor<?x3x4x8xf32> -> tensor<?x3x4x16xf32>
    return %l : tensor<?x3x4x16xf32>
  }
}

// -----

#block = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 32, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
#token = #bt.neox<hidden = 8, layers = 1, heads = 1, head_dim = 8, intermediate = 32, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>

// CHECK-LABEL: func.func @eval
// CHECK-SAME:    (%[[IDS:[^:]*]]: tensor<2x4x4xi64>, %[[BMASK:[^:]*]]: tensor<2x4xi64>, %[[TIDS:[^:]*]]: tensor<2x3x4xi64>, %[[TMASK:[^:]*]]: tensor<2x3x4xi64>, %[[LABELS:[^:]*]]: tensor<2x3x4xi64>)
// Embedder: lookup [B, N, L_B, E] then token-major concat to [B, N, D].
// CHECK:         %[[TABLE:.*]] = bt.param_ref @embedder.embeddings.weight : tensor<16x2xf32>
// CHECK-NEXT:    %[[LOOK:.*]] = bt.embedding_lookup %[[IDS]], %[[TABLE]] : tensor<2x4x4xi64>, tensor<16x2xf32> -> tensor<2x4x4x2xf32>
// CHECK-NEXT:    %[[EMB:.*]] = tensor.collapse_shape %[[LOOK]] {{\[}}[0], [1], [2, 3]] : tensor<2x4x4x2xf32> into tensor<2x4x8xf32>
// Block decoder over the 4 blocks (positions 0..3, block mask).
// CHECK:         %[[BPOS:.*]] = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
// CHECK:         bt.param_ref @block_decoder.gpt_neox.layers.0.input_layernorm.weight
// CHECK:         bt.layer_norm %[[EMB]]
// CHECK:         bt.split_qkv %{{.*}} heads 2 head_dim 4
// CHECK:         bt.rotary %{{.*}}, %[[BPOS]]
// CHECK:         bt.attention {{.*}} key_mask %[[BMASK]] scale 5.000000e-01
// CHECK:         arith.addf %{{.*}}, %[[EMB]] : tensor<2x4x8xf32>
// CHECK:         bt.param_ref @block_decoder.gpt_neox.final_layer_norm.bias
// CHECK-NEXT:    %[[CTX:.*]] = bt.layer_norm {{.*}} -> tensor<2x4x8xf32>
// The caller's slice: context of blocks 0..N-2 decodes blocks 1..N-1.
// CHECK-NEXT:    %[[PREV:.*]] = tensor.extract_slice %[[CTX]][0, 0, 0] [2, 3, 8] [1, 1, 1]
// Token decoder (prefix, P = 2): prefix first, outputs P-1 .. P+L_B-2.
// CHECK:         %[[PREFIX:.*]] = bt.prefix_projection %[[PREV]], {{.*}} prefix_length 2 {{.*}} -> tensor<2x3x2x8xf32>
// CHECK:         %[[IN_IDS:.*]] = tensor.extract_slice %[[TIDS]][0, 0, 0] [2, 3, 3] [1, 1, 1]
// CHECK:         %[[TOK:.*]] = bt.embedding_lookup %[[IN_IDS]]
// CHECK:         %[[IN:.*]] = tensor.concat dim(2) %[[PREFIX]], %[[TOK]] {{.*}} -> tensor<2x3x5x8xf32>
// CHECK:         %[[ONES:.*]] = arith.constant dense<1> : tensor<2x3x2xi64>
// CHECK:         %[[IN_MASK:.*]] = tensor.extract_slice %[[TMASK]][0, 0, 0] [2, 3, 3] [1, 1, 1]
// CHECK:         %[[KEYMASK:.*]] = tensor.concat dim(2) %[[ONES]], %[[IN_MASK]]
// CHECK:         %[[TPOS:.*]] = arith.constant dense<[0, 1, 2, 3, 4]> : tensor<5xi64>
// CHECK:         bt.param_ref @token_decoder.gpt_neox.layers.0.input_layernorm.weight
// CHECK:         bt.layer_norm %[[IN]]
// CHECK:         bt.split_qkv %{{.*}} heads 1 head_dim 8
// CHECK:         bt.rotary %{{.*}}, %[[TPOS]]
// CHECK:         bt.local_attention {{.*}} key_mask %[[KEYMASK]] scale 0.35355339059327373
// CHECK:         bt.param_ref @token_decoder.gpt_neox.final_layer_norm.bias
// CHECK-NEXT:    %[[HID:.*]] = bt.layer_norm {{.*}} -> tensor<2x3x5x8xf32>
// CHECK-NEXT:    %[[DEC:.*]] = tensor.extract_slice %[[HID]][0, 0, 1, 0] [2, 3, 4, 8] [1, 1, 1, 1]
// CHECK-NEXT:    %[[HEAD:.*]] = bt.param_ref @token_decoder.embed_out.weight
// CHECK-NEXT:    %[[LOGITS:.*]] = bt.linear %[[DEC]], %[[HEAD]] : tensor<2x3x4x8xf32>, tensor<16x8xf32> -> tensor<2x3x4x16xf32>
// bt.cross_entropy is kept.
// CHECK-NEXT:    %[[LOSS:.*]] = bt.cross_entropy %[[LOGITS]], %[[LABELS]]
// CHECK-NEXT:    return %[[LOGITS]], %[[LOSS]]
module {
  bt.param @"embedder.embeddings.weight" : tensor<16x2xf32>
  bt.param @"token_decoder.gpt_neox.embed_in.weight" : tensor<16x8xf32>
  bt.param @"token_decoder.embed_out.weight" : tensor<16x8xf32>
  bt.param @"token_decoder.expansion_layer.weight" : tensor<16x8x1xf32>
  bt.param @"token_decoder.expansion_layer.bias" : tensor<16xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.input_layernorm.bias" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.attention.dense.bias" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<32x8xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<32xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<8x32xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"token_decoder.gpt_neox.final_layer_norm.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.input_layernorm.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.dense.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<32x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<32xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<8x32xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.final_layer_norm.bias" : tensor<8xf32>

  func.func @eval(%ids: tensor<2x4x4xi64>, %block_mask: tensor<2x4xi64>, %td_ids: tensor<2x3x4xi64>,
                  %td_mask: tensor<2x3x4xi64>, %labels: tensor<2x3x4xi64>) -> (tensor<2x3x4x16xf32>, tensor<f32>) {
    %emb = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x4x4xi64> -> tensor<2x4x8xf32>
    %ctx = bt.block_decoder %emb mask %block_mask params "block_decoder.gpt_neox" config #block
        : tensor<2x4x8xf32>, tensor<2x4xi64> -> tensor<2x4x8xf32>
    %prev = tensor.extract_slice %ctx[0, 0, 0] [2, 3, 8] [1, 1, 1] : tensor<2x4x8xf32> to tensor<2x3x8xf32>
    %h = bt.token_decoder %prev, %td_ids mask %td_mask params "token_decoder" config #token strategy prefix prefix_length 2
        : tensor<2x3x8xf32>, tensor<2x3x4xi64>, tensor<2x3x4xi64> -> tensor<2x3x4x8xf32>
    %logits = bt.lm_head %h weight @"token_decoder.embed_out.weight" : tensor<2x3x4x8xf32> -> tensor<2x3x4x16xf32>
    %loss = bt.cross_entropy %logits, %labels : tensor<2x3x4x16xf32>, tensor<2x3x4xi64> -> tensor<f32>
    return %logits, %loss : tensor<2x3x4x16xf32>, tensor<f32>
  }
}

// -----

// Vanilla GPTNeoXForCausalLM: the L_B = 1 embedder is a plain lookup, the
// stack's parameters live under "gpt_neox", the head is embed_out.
#neox = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 32, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>

// CHECK-LABEL: func.func @vanilla
// CHECK-SAME:    (%[[IDS:[^:]*]]: tensor<2x?x1xi64>, %[[MASK:[^:]*]]: tensor<2x?xi64>)
// CHECK:         %[[TABLE:.*]] = bt.param_ref @gpt_neox.embed_in.weight : tensor<16x8xf32>
// CHECK-NEXT:    %[[LOOK:.*]] = bt.embedding_lookup %[[IDS]], %[[TABLE]] : tensor<2x?x1xi64>, tensor<16x8xf32> -> tensor<2x?x1x8xf32>
// CHECK-NEXT:    %[[X:.*]] = tensor.collapse_shape %[[LOOK]] {{\[}}[0], [1], [2, 3]] : tensor<2x?x1x8xf32> into tensor<2x?x8xf32>
// CHECK:         %[[POS:.*]] = tensor.generate
// CHECK:         bt.param_ref @gpt_neox.layers.0.input_layernorm.weight
// CHECK:         bt.param_ref @gpt_neox.layers.0.attention.query_key_value.weight : tensor<24x8xf32>
// CHECK:         bt.param_ref @gpt_neox.layers.0.mlp.dense_h_to_4h.weight : tensor<32x8xf32>
// CHECK:         bt.layer_norm %[[X]]
// CHECK:         bt.rotary %{{.*}}, %[[POS]]
// CHECK:         bt.attention {{.*}} key_mask %[[MASK]] scale 5.000000e-01 : tensor<2x?x2x4xf32>, tensor<2x?xi64>
// CHECK:         %[[A:.*]] = bt.linear {{.*}} -> tensor<2x?x8xf32>
// CHECK:         bt.gelu {{.*}} : tensor<2x?x32xf32>
// CHECK:         %[[M:.*]] = bt.linear {{.*}} -> tensor<2x?x8xf32>
// CHECK:         %[[MA:.*]] = arith.addf %[[M]], %[[A]]
// CHECK:         arith.addf %[[MA]], %[[X]]
// CHECK:         bt.param_ref @gpt_neox.final_layer_norm.weight
// CHECK:         bt.param_ref @gpt_neox.final_layer_norm.bias
// CHECK-NEXT:    %[[HID:.*]] = bt.layer_norm
// CHECK-NEXT:    %[[HEAD:.*]] = bt.param_ref @embed_out.weight : tensor<16x8xf32>
// CHECK-NEXT:    %[[LOGITS:.*]] = bt.linear %[[HID]], %[[HEAD]] : tensor<2x?x8xf32>, tensor<16x8xf32> -> tensor<2x?x16xf32>
// CHECK-NEXT:    return %[[LOGITS]]
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
  bt.param @"gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<32x8xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<32xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<8x32xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"gpt_neox.final_layer_norm.bias" : tensor<8xf32>

  func.func @vanilla(%ids: tensor<2x?x1xi64>, %mask: tensor<2x?xi64>) -> tensor<2x?x16xf32> {
    %x = bt.embedder %ids table @"gpt_neox.embed_in.weight" : tensor<2x?x1xi64> -> tensor<2x?x8xf32>
    %h = bt.block_decoder %x mask %mask params "gpt_neox" config #neox
        : tensor<2x?x8xf32>, tensor<2x?xi64> -> tensor<2x?x8xf32>
    %logits = bt.lm_head %h weight @"embed_out.weight" : tensor<2x?x8xf32> -> tensor<2x?x16xf32>
    return %logits : tensor<2x?x16xf32>
  }
}
