// RUN: bt-opt %s --bt-generate-entry-points --bt-verify-kv-lifetimes | FileCheck %s
// RUN: bt-opt %s --bt-generate-entry-points --bt-decompose --bt-verify-kv-lifetimes | FileCheck %s --check-prefix=LAYER

// bt-generate-entry-points on a vanilla GPT-NeoX (no token decoder, L_B = 1;
// HF GPTNeoXForCausalLM semantics): prefill and decode_step with per-row
// positions (HF cumsum(mask) - 1), returning the logits of the last position.

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>

module {
  bt.param @"gpt_neox.embed_in.weight" : tensor<16x8xf32>
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
  bt.param @"embed_out.weight" : tensor<16x8xf32>

  // The forward as the importer builds it for a vanilla model.
  func.func @eval(%ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>) -> tensor<?x?x16xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %b = tensor.dim %ids, %c0 : tensor<?x?xi64>
    %t = tensor.dim %ids, %c1 : tensor<?x?xi64>
    %ids3 = tensor.expand_shape %ids [[0], [1, 2]] output_shape [%b, %t, 1] : tensor<?x?xi64> into tensor<?x?x1xi64>
    %x = bt.embedder %ids3 table @"gpt_neox.embed_in.weight" : tensor<?x?x1xi64> -> tensor<?x?x8xf32>
    %h = bt.block_decoder %x mask %mask params "gpt_neox" config #cfg : tensor<?x?x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
    %logits = bt.lm_head %h weight @"embed_out.weight" : tensor<?x?x8xf32> -> tensor<?x?x16xf32>
    return %logits : tensor<?x?x16xf32>
  }
}

// CHECK-NOT:   func.func @decode_block
// CHECK-NOT:   func.func @decode_tokens
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME:    %[[IDS:[^:]*]]: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "input_ids"},
// CHECK-SAME:    %[[M:[^:]*]]: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "attention_mask"},
// CHECK-SAME:    %[[P:[^:]*]]: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "positions"},
// CHECK-SAME:    %[[G:[^:]*]]: !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32> {bt.inout, bt.name = "kv_cache"})
// CHECK-SAME:    -> (tensor<?x16xf32> {bt.dims = ["B", "V"], bt.name = "logits"}, !bt.kv_cache<{{.*}}> {bt.inout_arg = "kv_cache", bt.name = "kv_cache"})
// CHECK:         %[[I3:.*]] = tensor.expand_shape %[[IDS]] {{\[}}[0], [1, 2]]
// CHECK:         %[[X:.*]] = bt.embedder %[[I3]] table @gpt_neox.embed_in.weight : tensor<?x?x1xi64> -> tensor<?x?x8xf32>
// CHECK:         %[[H:.*]], %[[G1:.*]] = bt.block_decoder %[[X]] mask %[[M]] positions %[[P]] cache %[[G]] config {{.*}} params "gpt_neox"
// CHECK:         %[[LAST:.*]] = tensor.extract_slice %[[H]][0, %{{.*}}, 0] [%{{.*}}, 1, 8] [1, 1, 1] : tensor<?x?x8xf32> to tensor<?x8xf32>
// CHECK:         %[[L:.*]] = bt.lm_head %[[LAST]] weight @embed_out.weight : tensor<?x8xf32> -> tensor<?x16xf32>
// CHECK:         return %[[L]], %[[G1]]

// decode_step: the position of the new token is the cache length minus the
// row's left padding (HF's cumsum(mask) - 1), and the token is sampled from
// the logits (bt.sample), so it can be fed back where it is.
// CHECK-LABEL: func.func @decode_step(
// CHECK-SAME:    %[[IDS:[^:]*]]: tensor<?x1xi64> {bt.dims = ["B", ""], bt.name = "input_ids"},
// CHECK-SAME:    %[[PAD:[^:]*]]: tensor<?x1xi64> {bt.dims = ["B", ""], bt.name = "left_padding"},
// CHECK-SAME:    %[[S:[^:]*]]: tensor<i64> {bt.dims = [], bt.name = "sampler"},
// CHECK-SAME:    %[[G:[^:]*]]: !bt.kv_cache<{{.*}}> {bt.inout, bt.name = "kv_cache"})
// CHECK-SAME:    -> (tensor<?x1xi64> {bt.dims = ["B", ""], bt.name = "tokens"}, tensor<?x16xf32> {bt.dims = ["B", "V"], bt.name = "logits"}, !bt.kv_cache<{{.*}}> {bt.inout_arg = "kv_cache", bt.name = "kv_cache"})
// CHECK:         %[[LEN:.*]] = bt.kv_length %[[G]][0]
// CHECK:         %[[LEN64:.*]] = arith.index_cast %[[LEN]] : index to i64
// CHECK:         %[[LENS:.*]] = tensor.splat %[[LEN64]][%{{.*}}] : tensor<?x1xi64>
// CHECK:         %[[P:.*]] = arith.subi %[[LENS]], %[[PAD]] : tensor<?x1xi64>
// CHECK:         %[[H:.*]], %[[G1:.*]] = bt.block_decoder %{{.*}} positions %[[P]] cache %[[G]] config
// CHECK:         %[[L:.*]] = bt.lm_head
// CHECK:         %[[H0:.*]] = tensor.extract %[[S]][] : tensor<i64>
// CHECK:         %[[T:.*]] = bt.sample %[[L]], %[[H0]] : tensor<?x16xf32> -> tensor<?xi64>
// CHECK:         %[[T2:.*]] = tensor.expand_shape %[[T]] {{\[}}[0, 1]]
// CHECK:         return %[[T2]], %[[L]], %[[G1]]

// The given positions feed RoPE (no kv_length offset); the mask the cache.
// LAYER-LABEL: func.func @prefill(
// LAYER-SAME:    %[[M:[^:]*]]: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "attention_mask"},
// LAYER-SAME:    %[[P:[^:]*]]: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "positions"},
// LAYER-NOT:     bt.kv_length
// LAYER:         bt.rotary %{{.*}}, %[[P]]
// LAYER:         bt.kv_append %{{.*}}[0], %{{.*}}, %{{.*}} key_mask %[[M]]
// LAYER-LABEL: func.func @decode_step(
// LAYER:         bt.kv_append %{{.*}}[0], %{{.*}}, %{{.*}} : !bt.kv_cache
