// RUN: bt-opt %s --bt-generate-entry-points --bt-verify-kv-lifetimes | FileCheck %s
// RUN: bt-opt %s --bt-generate-entry-points --bt-decompose --bt-verify-kv-lifetimes | FileCheck %s --check-prefix=LAYER
// RUN: bt-opt %s --bt-generate-entry-points="kv-dtype=bf16" --bt-decompose --bt-verify-kv-lifetimes | FileCheck %s --check-prefix=BF16
// RUN: not bt-opt %s --bt-generate-entry-points="kv-dtype=f16" 2>&1 | FileCheck %s --check-prefix=BADDTYPE

// bt-generate-entry-points on a block_tiny-like model (L_B = 4, prefix of
// P = 2, D = T = 8, V = 16, block decoder 2 layers, token decoder 1 layer):
// the model is read off the forward @eval, and prefill / decode_block /
// decode_tokens are derived with the signatures of docs/generation.md. The
// result passes bt-verify-kv-lifetimes, before and after bt-decompose.

#bd = #bt.neox<hidden = 8, layers = 2, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
#td = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>

module {
  bt.param @"embedder.embeddings.weight" : tensor<16x2xf32>
  bt.param @"token_decoder.gpt_neox.embed_in.weight" : tensor<16x8xf32>
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
  bt.param @"token_decoder.embed_out.weight" : tensor<16x8xf32>
  bt.param @"token_decoder.expansion_layer.weight" : tensor<16x8x1xf32>
  bt.param @"token_decoder.expansion_layer.bias" : tensor<16xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.input_layernorm.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.dense.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<16x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<16xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<8x16xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.input_layernorm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.input_layernorm.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.attention.dense.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.mlp.dense_h_to_4h.weight" : tensor<16x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.mlp.dense_h_to_4h.bias" : tensor<16xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.mlp.dense_4h_to_h.weight" : tensor<8x16xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.final_layer_norm.bias" : tensor<8xf32>

  // The forward (as the importer builds it, reduced to the model-level ops).
  func.func @eval(%ids: tensor<?x?x4xi64>, %mask: tensor<?x?x4xi64>, %bmask: tensor<?x?xi64>) -> tensor<?x?x4x16xf32> {
    %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<?x?x4xi64> -> tensor<?x?x8xf32>
    %ctx = bt.block_decoder %x mask %bmask params "block_decoder.gpt_neox" config #bd
        : tensor<?x?x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
    %h = bt.token_decoder %ctx, %ids mask %mask params "token_decoder" config #td
        strategy prefix prefix_length 2
        : tensor<?x?x8xf32>, tensor<?x?x4xi64>, tensor<?x?x4xi64> -> tensor<?x?x4x8xf32>
    %logits = bt.lm_head %h weight @"token_decoder.embed_out.weight" : tensor<?x?x4x8xf32> -> tensor<?x?x4x16xf32>
    return %logits : tensor<?x?x4x16xf32>
  }
}

// CHECK-LABEL: func.func @prefill(
// CHECK-SAME:    %[[IDS:[^:]*]]: tensor<?x?x4xi64> {bt.dims = ["B", "N", "L_B"], bt.name = "input_ids"},
// CHECK-SAME:    %[[BM:[^:]*]]: tensor<?x?xi64> {bt.dims = ["B", "N"], bt.name = "block_attention_mask"},
// CHECK-SAME:    %[[G:[^:]*]]: !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = ?, head_dim = 4, f32> {bt.inout, bt.name = "kv_cache"})
// CHECK-SAME:    -> (tensor<?x8xf32> {bt.dims = ["B", "D"], bt.name = "context"},
// CHECK-SAME:        !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = ?, head_dim = 4, f32> {bt.inout_arg = "kv_cache", bt.name = "kv_cache"})
// CHECK:         %[[X:.*]] = bt.embedder %[[IDS]] table @embedder.embeddings.weight : tensor<?x?x4xi64> -> tensor<?x?x8xf32>
// CHECK:         %[[H:.*]], %[[G1:.*]] = bt.block_decoder %[[X]] mask %[[BM]] cache %[[G]] config <hidden = 8, layers = 2, {{.*}}> params "block_decoder.gpt_neox"
// The context of the last block: h[:, N-1].
// CHECK:         %[[N:.*]] = tensor.dim %[[H]], %{{.*}} : tensor<?x?x8xf32>
// CHECK:         %[[LAST:.*]] = arith.subi %[[N]], %{{.*}} : index
// CHECK:         %[[CTX:.*]] = tensor.extract_slice %[[H]][0, %[[LAST]], 0] [%{{.*}}, 1, 8] [1, 1, 1] : tensor<?x?x8xf32> to tensor<?x8xf32>
// CHECK:         return %[[CTX]], %[[G1]]

// CHECK-LABEL: func.func @decode_block(
// CHECK-SAME:    %[[IDS:[^:]*]]: tensor<?x1x4xi64> {bt.dims = ["B", "", "L_B"], bt.name = "input_ids"},
// CHECK-SAME:    %[[G:[^:]*]]: !bt.kv_cache<global, {{.*}}> {bt.inout, bt.name = "kv_cache"})
// CHECK-SAME:    -> (tensor<?x8xf32> {bt.dims = ["B", "D"], bt.name = "context"}, !bt.kv_cache<global, {{.*}}> {bt.inout_arg = "kv_cache", bt.name = "kv_cache"})
// CHECK:         %[[X:.*]] = bt.embedder %[[IDS]] {{.*}} -> tensor<?x1x8xf32>
// No mask: the new block is valid.
// CHECK:         %[[H:.*]], %[[G1:.*]] = bt.block_decoder %[[X]] cache %[[G]] config
// CHECK:         %[[CTX:.*]] = tensor.extract_slice %[[H]][0, 0, 0] [%{{.*}}, 1, 8] [1, 1, 1] : tensor<?x1x8xf32> to tensor<?x8xf32>
// CHECK:         return %[[CTX]], %[[G1]]

// CHECK-LABEL: func.func @decode_tokens(
// CHECK-SAME:    %[[CTX:[^:]*]]: tensor<?x8xf32> {bt.dims = ["B", "D"], bt.name = "context"},
// CHECK-SAME:    %[[POS:[^:]*]]: tensor<5xi64> {bt.dims = [""], bt.name = "positions"},
// CHECK-SAME:    %[[SMP:[^:]*]]: tensor<i64> {bt.dims = [], bt.name = "sampler"})
// CHECK-SAME:    -> (tensor<?x4xi64> {bt.dims = ["B", "L_B"], bt.name = "tokens"}, tensor<?x4x16xf32> {bt.dims = ["B", "L_B", "V"], bt.name = "step_logits"})
// CHECK:         %[[S:.*]] = tensor.extract %[[SMP]][] : tensor<i64>
// CHECK:         %[[B:.*]] = tensor.dim %[[CTX]]
// The local cache holds the block's P + L_B - 1 = 5 inputs.
// CHECK:         %[[C0:.*]] = bt.kv_alloc batch %[[B]] : !bt.kv_cache<local, batch = ?, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>
// CHECK:         %[[PRE:.*]] = bt.prefix_projection %[[CTX]], %{{.*}}, %{{.*}} prefix_length 2 : tensor<?x8xf32>, tensor<16x8x1xf32>, tensor<16xf32> -> tensor<?x2x8xf32>
// CHECK:         %[[TOKS0:.*]] = tensor.empty(%[[B]]) : tensor<?x4xi64>
// CHECK:         %[[LOGS0:.*]] = tensor.empty(%[[B]]) : tensor<?x4x16xf32>
// Step 0: the P prefix vectors at positions[0 : 2].
// CHECK:         %[[P0:.*]] = tensor.extract_slice %[[POS]][0] [2] [1] : tensor<5xi64> to tensor<2xi64>
// CHECK:         %[[H0:.*]], %[[C1:.*]] = bt.token_decoder_step %[[PRE]], %[[P0]] cache %[[C0]] config <hidden = 8, layers = 1, {{.*}}> params "token_decoder" : tensor<?x2x8xf32>, tensor<2xi64>
// CHECK:         %[[LAST0:.*]] = tensor.extract_slice %[[H0]][0, 1, 0] [%[[B]], 1, 8] [1, 1, 1] : tensor<?x2x8xf32> to tensor<?x8xf32>
// CHECK:         %[[L0:.*]] = bt.lm_head %[[LAST0]] weight @token_decoder.embed_out.weight : tensor<?x8xf32> -> tensor<?x16xf32>
// CHECK:         %[[T0:.*]] = bt.sample %[[L0]], %[[S]] : tensor<?x16xf32> -> tensor<?xi64>
// CHECK:         %[[LOGS1:.*]] = tensor.insert_slice %[[L0]] into %[[LOGS0]][0, 0, 0] [%[[B]], 1, 16]
// CHECK:         %[[TOKS1:.*]] = tensor.insert_slice %[[T0]] into %[[TOKS0]][0, 0] [%[[B]], 1]
// Steps 1 .. L_B-1 in one loop carrying the cache, tokens and step logits:
// step k embeds token k-1 (read back from tokens) at positions[P + k - 1].
// CHECK:         %[[R:.*]]:3 = scf.for %[[K:.*]] = %c1 to %c4 step %[[ONE:[^ ]*]] iter_args(%[[C:.*]] = %[[C1]], %[[TOKS:.*]] = %[[TOKS1]], %[[LOGS:.*]] = %[[LOGS1]])
// CHECK-SAME:      -> (!bt.kv_cache<local, {{.*}}>, tensor<?x4xi64>, tensor<?x4x16xf32>)
// CHECK:           %[[KM1:.*]] = arith.subi %[[K]], %[[ONE]] : index
// CHECK:           %[[PREV:.*]] = tensor.extract_slice %[[TOKS]][0, %[[KM1]]] [%[[B]], 1] [1, 1] : tensor<?x4xi64> to tensor<?x1xi64>
// CHECK:           %[[E:.*]] = bt.embedding_lookup %[[PREV]], %{{.*}} : tensor<?x1xi64>, tensor<16x8xf32> -> tensor<?x1x8xf32>
// CHECK:           %[[AT:.*]] = arith.addi %[[K]], %c1{{.*}} : index
// CHECK:           %[[PK:.*]] = tensor.extract_slice %[[POS]][%[[AT]]] [1] [1] : tensor<5xi64> to tensor<1xi64>
// CHECK:           %[[HK:.*]], %[[CK:.*]] = bt.token_decoder_step %[[E]], %[[PK]] cache %[[C]]
// CHECK:           %[[LASTK:.*]] = tensor.extract_slice %[[HK]][0, 0, 0] [%[[B]], 1, 8]
// CHECK:           %[[LK:.*]] = bt.lm_head %[[LASTK]]
// CHECK:           %[[TK:.*]] = bt.sample %[[LK]], %[[S]]
// CHECK:           %[[LOGSK:.*]] = tensor.insert_slice %[[LK]] into %[[LOGS]][0, %[[K]], 0] [%[[B]], 1, 16]
// CHECK:           %[[TOKSK:.*]] = tensor.insert_slice %[[TK]] into %[[TOKS]][0, %[[K]]] [%[[B]], 1]
// CHECK:           scf.yield %[[CK]], %[[TOKSK]], %[[LOGSK]]
// CHECK:         bt.kv_release %[[R]]#0
// CHECK-NEXT:    return %[[R]]#1, %[[R]]#2 : tensor<?x4xi64>, tensor<?x4x16xf32>

// After bt-decompose the block decoder's cache appends the block mask, the
// token decoder's local cache the prefix, then one token per loop iteration.
// kv-dtype=bf16 (the CUDA target's --dtype bf16): both caches store bf16;
// the activations and the appended keys / values stay f32 (the append rounds).
// BF16-LABEL: func.func @prefill(
// BF16-SAME:    !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = ?, head_dim = 4, bf16>
// BF16:         bt.kv_append %{{.*}}[0], {{.*}} : !bt.kv_cache<global, {{.*}}, bf16>, tensor<?x?x2x4xf32>
// BF16-LABEL: func.func @decode_tokens(
// BF16:         bt.kv_alloc {{.*}} : !bt.kv_cache<local, {{.*}}, bf16>
// BF16:         bt.kv_attend %{{.*}} : tensor<?x2x2x4xf32>, !bt.kv_cache<local, {{.*}}, bf16> -> tensor<?x2x2x4xf32>

// BADDTYPE: error: bt-generate-entry-points: kv-dtype must be 'bf16' or empty (the activations' type), got 'f16'

// LAYER-LABEL: func.func @prefill(
// LAYER:         bt.kv_length %{{.*}}[0]
// LAYER:         bt.kv_append %{{.*}}[0], {{.*}} key_mask
// LAYER:         bt.kv_append %{{.*}}[1], {{.*}} key_mask
// LAYER-LABEL: func.func @decode_tokens(
// LAYER:         bt.kv_alloc
// LAYER:         bt.kv_append %{{.*}}[0], %{{.*}}, %{{.*}} : !bt.kv_cache<local, {{.*}}>, tensor<?x2x2x4xf32>
// LAYER:         scf.for
// LAYER:           bt.kv_append %{{.*}}[0], %{{.*}}, %{{.*}} : !bt.kv_cache<local, {{.*}}>, tensor<?x1x2x4xf32>
// LAYER:           scf.yield
// LAYER:         bt.kv_release
// LAYER-NOT:     bt.token_decoder_step
