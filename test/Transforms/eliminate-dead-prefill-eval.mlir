// RUN: bt-opt %s --bt-eliminate-dead-prefill | FileCheck %s
// RUN: bt-opt %s --bt-eliminate-dead-prefill=report --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: bt-opt %s --bt-decompose --bt-eliminate-dead-prefill | FileCheck %s --check-prefix=LAYER
// RUN: bt-opt %s --bt-decompose --bt-eliminate-dead-prefill=report --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=LAYER-REPORT

// Negative test: the eval forward uses every token-decoder output (logits
// and loss of blocks 1 .. N-1), so no token-decoder block is removed.

#neox = #bt.neox<hidden = 16, layers = 1, heads = 2, head_dim = 8, intermediate = 32, rotary_dims = 4, rotary_base = 10000.0, eps = 1.0e-05>

module {
  bt.param @"emb4.weight" : tensor<32x4xf32>
  bt.param @"bd.layers.0.input_layernorm.weight" : tensor<16xf32>
  bt.param @"bd.layers.0.input_layernorm.bias" : tensor<16xf32>
  bt.param @"bd.layers.0.post_attention_layernorm.weight" : tensor<16xf32>
  bt.param @"bd.layers.0.post_attention_layernorm.bias" : tensor<16xf32>
  bt.param @"bd.layers.0.attention.query_key_value.weight" : tensor<48x16xf32>
  bt.param @"bd.layers.0.attention.query_key_value.bias" : tensor<48xf32>
  bt.param @"bd.layers.0.attention.dense.weight" : tensor<16x16xf32>
  bt.param @"bd.layers.0.attention.dense.bias" : tensor<16xf32>
  bt.param @"bd.layers.0.mlp.dense_h_to_4h.weight" : tensor<32x16xf32>
  bt.param @"bd.layers.0.mlp.dense_h_to_4h.bias" : tensor<32xf32>
  bt.param @"bd.layers.0.mlp.dense_4h_to_h.weight" : tensor<16x32xf32>
  bt.param @"bd.layers.0.mlp.dense_4h_to_h.bias" : tensor<16xf32>
  bt.param @"bd.final_layer_norm.weight" : tensor<16xf32>
  bt.param @"bd.final_layer_norm.bias" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.embed_in.weight" : tensor<32x16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.input_layernorm.weight" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.input_layernorm.bias" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<48x16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<48xf32>
  bt.param @"td_p2.gpt_neox.layers.0.attention.dense.weight" : tensor<16x16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.attention.dense.bias" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<32x16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<32xf32>
  bt.param @"td_p2.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<16x32xf32>
  bt.param @"td_p2.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.final_layer_norm.weight" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.final_layer_norm.bias" : tensor<16xf32>
  bt.param @"td_p2.expansion_layer.weight" : tensor<32x16x1xf32>
  bt.param @"td_p2.expansion_layer.bias" : tensor<32xf32>
  bt.param @"td_p2.embed_out.weight" : tensor<32x16xf32>

  // Model level: nothing changes.
  // CHECK-LABEL: func.func @eval
  //       CHECK:   %[[E:.*]] = bt.embedder %{{.*}} : tensor<2x6x4xi64> -> tensor<2x6x16xf32>
  //       CHECK:   %[[CTX:.*]] = bt.block_decoder %[[E]] mask %{{.*}} : tensor<2x6x16xf32>, tensor<2x6xi64> -> tensor<2x6x16xf32>
  //       CHECK:   %[[PREV:.*]] = tensor.extract_slice %[[CTX]][0, 0, 0] [2, 5, 16] [1, 1, 1]
  //       CHECK:   %[[H:.*]] = bt.token_decoder %[[PREV]], %{{.*}} mask %{{.*}} : tensor<2x5x16xf32>, tensor<2x5x4xi64>, tensor<2x5x4xi64> -> tensor<2x5x4x16xf32>
  //       CHECK:   %[[L:.*]] = bt.lm_head %[[H]] {{.*}} -> tensor<2x5x4x32xf32>
  //       CHECK:   %[[LOSS:.*]] = bt.cross_entropy %[[L]]
  //       CHECK:   return %[[L]], %[[LOSS]]
  // REPORT: remark: bt-eliminate-dead-prefill: 0 ops rewritten; token-decoder blocks: 0 removed, 10 remaining, 0 dynamic rewrites; KV caches removed: 0 local, 0 global; 0 ops removed
  //
  // Layer level: the token decoder keeps all 2 x 5 blocks; only work whose
  // results are never read goes: the block decoder's tail (after its
  // attention) for block 5, whose context decodes nothing, and the token
  // decoder's last-layer tail for the P - 1 = 1 discarded prefix position.
  // LAYER-LABEL: func.func @eval
  //       LAYER:   bt.attention {{.*}} : tensor<2x6x2x8xf32>, tensor<2x6xi64> -> tensor<2x6x2x8xf32>
  //       LAYER:   tensor.extract_slice %{{.*}}[0, 0, 0, 0] [2, 5, 2, 8] [1, 1, 1, 1] : tensor<2x6x2x8xf32> to tensor<2x5x2x8xf32>
  //       LAYER:   bt.prefix_projection {{.*}} : tensor<2x5x16xf32>, {{.*}} -> tensor<2x5x2x16xf32>
  //       LAYER:   bt.local_attention {{.*}} : tensor<2x5x5x2x8xf32>, tensor<2x5x5xi64> -> tensor<2x5x5x2x8xf32>
  //       LAYER:   tensor.extract_slice %{{.*}}[0, 0, 1, 0, 0] [2, 5, 4, 2, 8] [1, 1, 1, 1, 1] : tensor<2x5x5x2x8xf32> to tensor<2x5x4x2x8xf32>
  //       LAYER:   bt.linear {{.*}} -> tensor<2x5x4x32xf32>
  //       LAYER:   bt.cross_entropy
  // LAYER-REPORT: remark: bt-eliminate-dead-prefill: {{[0-9]+}} ops rewritten; token-decoder blocks: 0 removed, 10 remaining, 0 dynamic rewrites
  func.func @eval(%ids: tensor<2x6x4xi64>, %block_mask: tensor<2x6xi64>, %ctx_ids: tensor<2x5x4xi64>,
                  %ctx_mask: tensor<2x5x4xi64>, %labels: tensor<2x5x4xi64>)
      -> (tensor<2x5x4x32xf32>, tensor<f32>) {
    %emb = bt.embedder %ids table @"emb4.weight" : tensor<2x6x4xi64> -> tensor<2x6x16xf32>
    %ctx = bt.block_decoder %emb mask %block_mask params "bd" config #neox
        : tensor<2x6x16xf32>, tensor<2x6xi64> -> tensor<2x6x16xf32>
    %prev = tensor.extract_slice %ctx[0, 0, 0] [2, 5, 16] [1, 1, 1]
        : tensor<2x6x16xf32> to tensor<2x5x16xf32>
    %h = bt.token_decoder %prev, %ctx_ids mask %ctx_mask params "td_p2" config #neox
        strategy prefix prefix_length 2
        : tensor<2x5x16xf32>, tensor<2x5x4xi64>, tensor<2x5x4xi64> -> tensor<2x5x4x16xf32>
    %logits = bt.lm_head %h weight @"td_p2.embed_out.weight"
        : tensor<2x5x4x16xf32> -> tensor<2x5x4x32xf32>
    %loss = bt.cross_entropy %logits, %labels
        : tensor<2x5x4x32xf32>, tensor<2x5x4xi64> -> tensor<f32>
    return %logits, %loss : tensor<2x5x4x32xf32>, tensor<f32>
  }
}
