// RUN: bt-opt %s --bt-eliminate-dead-prefill | FileCheck %s
// RUN: bt-opt %s --bt-eliminate-dead-prefill=report --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: bt-opt %s --bt-decompose --bt-eliminate-dead-prefill | FileCheck %s --check-prefix=LAYER
// RUN: bt-opt %s --bt-decompose --bt-eliminate-dead-prefill=report --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=LAYER-REPORT
// Both orders compile (the narrowed IR is valid all the way down):
// RUN: bt-opt %s --bt-eliminate-dead-prefill --bt-decompose --bt-cpu-pipeline -o /dev/null
// RUN: bt-opt %s --bt-decompose --bt-eliminate-dead-prefill --bt-cpu-pipeline -o /dev/null

// bt-eliminate-dead-prefill on naive prefills: the token decoder runs over
// every prompt block (as the training graph does) and only some blocks'
// outputs are used. Slices move up through bt.lm_head and bt.token_decoder
// (model level) or through the layer ops (after bt-decompose) to the block
// decoder, whose global attention needs every block; the other blocks'
// token-decoder work disappears.

#neox = #bt.neox<hidden = 16, layers = 1, heads = 2, head_dim = 8, intermediate = 32, rotary_dims = 4, rotary_base = 10000.0, eps = 1.0e-05>

module {
  bt.param @"emb4.weight" : tensor<32x4xf32>
  bt.param @"emb2.weight" : tensor<32x8xf32>
  bt.param @"emb8.weight" : tensor<32x2xf32>
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
  bt.param @"td_p1.gpt_neox.embed_in.weight" : tensor<32x16xf32>
  bt.param @"td_p1.gpt_neox.layers.0.input_layernorm.weight" : tensor<16xf32>
  bt.param @"td_p1.gpt_neox.layers.0.input_layernorm.bias" : tensor<16xf32>
  bt.param @"td_p1.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<16xf32>
  bt.param @"td_p1.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<16xf32>
  bt.param @"td_p1.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<48x16xf32>
  bt.param @"td_p1.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<48xf32>
  bt.param @"td_p1.gpt_neox.layers.0.attention.dense.weight" : tensor<16x16xf32>
  bt.param @"td_p1.gpt_neox.layers.0.attention.dense.bias" : tensor<16xf32>
  bt.param @"td_p1.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<32x16xf32>
  bt.param @"td_p1.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<32xf32>
  bt.param @"td_p1.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<16x32xf32>
  bt.param @"td_p1.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<16xf32>
  bt.param @"td_p1.gpt_neox.final_layer_norm.weight" : tensor<16xf32>
  bt.param @"td_p1.gpt_neox.final_layer_norm.bias" : tensor<16xf32>
  bt.param @"td_p1.expansion_layer.weight" : tensor<16x16x1xf32>
  bt.param @"td_p1.expansion_layer.bias" : tensor<16xf32>
  bt.param @"td_p1.embed_out.weight" : tensor<32x16xf32>
  bt.param @"td_p3.gpt_neox.embed_in.weight" : tensor<32x16xf32>
  bt.param @"td_p3.gpt_neox.layers.0.input_layernorm.weight" : tensor<16xf32>
  bt.param @"td_p3.gpt_neox.layers.0.input_layernorm.bias" : tensor<16xf32>
  bt.param @"td_p3.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<16xf32>
  bt.param @"td_p3.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<16xf32>
  bt.param @"td_p3.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<48x16xf32>
  bt.param @"td_p3.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<48xf32>
  bt.param @"td_p3.gpt_neox.layers.0.attention.dense.weight" : tensor<16x16xf32>
  bt.param @"td_p3.gpt_neox.layers.0.attention.dense.bias" : tensor<16xf32>
  bt.param @"td_p3.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<32x16xf32>
  bt.param @"td_p3.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<32xf32>
  bt.param @"td_p3.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<16x32xf32>
  bt.param @"td_p3.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<16xf32>
  bt.param @"td_p3.gpt_neox.final_layer_norm.weight" : tensor<16xf32>
  bt.param @"td_p3.gpt_neox.final_layer_norm.bias" : tensor<16xf32>
  bt.param @"td_p3.expansion_layer.weight" : tensor<48x16x1xf32>
  bt.param @"td_p3.expansion_layer.bias" : tensor<48xf32>
  bt.param @"td_p3.embed_out.weight" : tensor<32x16xf32>
  bt.param @"td_s4.gpt_neox.embed_in.weight" : tensor<32x16xf32>
  bt.param @"td_s4.gpt_neox.layers.0.input_layernorm.weight" : tensor<16xf32>
  bt.param @"td_s4.gpt_neox.layers.0.input_layernorm.bias" : tensor<16xf32>
  bt.param @"td_s4.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<16xf32>
  bt.param @"td_s4.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<16xf32>
  bt.param @"td_s4.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<48x16xf32>
  bt.param @"td_s4.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<48xf32>
  bt.param @"td_s4.gpt_neox.layers.0.attention.dense.weight" : tensor<16x16xf32>
  bt.param @"td_s4.gpt_neox.layers.0.attention.dense.bias" : tensor<16xf32>
  bt.param @"td_s4.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<32x16xf32>
  bt.param @"td_s4.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<32xf32>
  bt.param @"td_s4.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<16x32xf32>
  bt.param @"td_s4.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<16xf32>
  bt.param @"td_s4.gpt_neox.final_layer_norm.weight" : tensor<16xf32>
  bt.param @"td_s4.gpt_neox.final_layer_norm.bias" : tensor<16xf32>
  bt.param @"td_s4.expansion_layer.weight" : tensor<64x16x1xf32>
  bt.param @"td_s4.expansion_layer.bias" : tensor<64xf32>
  bt.param @"td_s4.embed_out.weight" : tensor<32x16xf32>

// CHECK-LABEL: func.func @prefill_lb4_p2
//  CHECK-SAME:   (%[[IDS:.*]]: tensor<2x8x4xi64>, %[[DEC:.*]]: tensor<2x8x4xi64>)
// The block decoder still sees every block.
//       CHECK:   %[[CTX:.*]] = bt.block_decoder {{.*}} : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
//       CHECK:   %[[C:.*]] = tensor.extract_slice %[[CTX]][0, 7, 0] [2, 1, 16] [1, 1, 1] : tensor<2x8x16xf32> to tensor<2x1x16xf32>
//       CHECK:   %[[I:.*]] = tensor.extract_slice %[[DEC]][0, 7, 0] [2, 1, 4] [1, 1, 1] : tensor<2x8x4xi64> to tensor<2x1x4xi64>
//       CHECK:   %[[H:.*]] = bt.token_decoder %[[C]], %[[I]] {{.*}} : tensor<2x1x16xf32>, tensor<2x1x4xi64> -> tensor<2x1x4x16xf32>
//       CHECK:   %[[L:.*]] = bt.lm_head %[[H]] {{.*}} -> tensor<2x1x4x32xf32>
//       CHECK:   return %[[L]]
// REPORT: remark: bt-eliminate-dead-prefill: 2 ops rewritten; token-decoder blocks: 14 removed, 2 remaining, 0 dynamic rewrites; KV caches removed: 0 local, 0 global; 0 ops removed
// At layer level: the token decoder (prefix projection, token embedding,
// local attention, MLP, LM head) runs on the last block only; the block
// decoder keeps all 8 blocks up to its global attention, after which only
// block 7 is computed (its context is the only one read).
// LAYER-LABEL: func.func @prefill_lb4_p2
//       LAYER:   bt.attention {{.*}} : tensor<2x8x2x8xf32> -> tensor<2x8x2x8xf32>
//       LAYER:   tensor.extract_slice %{{.*}}[0, 7, 0, 0] [2, 1, 2, 8] [1, 1, 1, 1] : tensor<2x8x2x8xf32> to tensor<2x1x2x8xf32>
//       LAYER:   bt.prefix_projection {{.*}} : tensor<2x1x16xf32>, tensor<32x16x1xf32>, tensor<32xf32> -> tensor<2x1x2x16xf32>
//       LAYER:   tensor.extract_slice %[[LDEC:.*]][0, 7, 0] [2, 1, 3] [1, 1, 1] : tensor<2x8x4xi64> to tensor<2x1x3xi64>
//       LAYER:   bt.local_attention {{.*}} : tensor<2x1x5x2x8xf32> -> tensor<2x1x5x2x8xf32>
// The last layer keeps only the outputs P-1 .. P+L_B-2 after its attention.
//       LAYER:   tensor.extract_slice %{{.*}}[0, 0, 1, 0, 0] [2, 1, 4, 2, 8] [1, 1, 1, 1, 1] : tensor<2x1x5x2x8xf32> to tensor<2x1x4x2x8xf32>
//       LAYER:   bt.gelu %{{.*}} : tensor<2x1x4x32xf32>
//       LAYER:   %[[LOGITS:.*]] = bt.linear {{.*}} : tensor<2x1x4x16xf32>, tensor<32x16xf32> -> tensor<2x1x4x32xf32>
//  LAYER-NEXT:   return %[[LOGITS]]
// LAYER-REPORT: remark: bt-eliminate-dead-prefill: {{[0-9]+}} ops rewritten; token-decoder blocks: 14 removed, 2 remaining

  // Naive prefill, L_B = 4, P = 2, B = 2, N = 8: the token decoder runs over
  // every prompt block; only the last block's logits (the first generated
  // block) are used.
  func.func @prefill_lb4_p2(%ids: tensor<2x8x4xi64>, %dec: tensor<2x8x4xi64>) -> tensor<2x1x4x32xf32> {
    %emb = bt.embedder %ids table @"emb4.weight" : tensor<2x8x4xi64> -> tensor<2x8x16xf32>
    %ctx = bt.block_decoder %emb config #neox params "bd" : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
    %h = bt.token_decoder %ctx, %dec params "td_p2" config #neox strategy prefix prefix_length 2
        : tensor<2x8x16xf32>, tensor<2x8x4xi64> -> tensor<2x8x4x16xf32>
    %logits = bt.lm_head %h weight @"td_p2.embed_out.weight" : tensor<2x8x4x16xf32> -> tensor<2x8x4x32xf32>
    %last = tensor.extract_slice %logits[0, 7, 0, 0] [2, 1, 4, 32] [1, 1, 1, 1]
        : tensor<2x8x4x32xf32> to tensor<2x1x4x32xf32>
    return %last : tensor<2x1x4x32xf32>
  }

// CHECK-LABEL: func.func @prefill_lb2_p1_one_sequence
//       CHECK:   %[[CTX:.*]] = bt.block_decoder {{.*}} -> tensor<4x6x16xf32>
//       CHECK:   %[[C:.*]] = tensor.extract_slice %[[CTX]][1, 5, 0] [1, 1, 16] [1, 1, 1]
//       CHECK:   %[[I:.*]] = tensor.extract_slice %{{.*}}[1, 5, 0] [1, 1, 2] [1, 1, 1]
//       CHECK:   %[[H:.*]] = bt.token_decoder %[[C]], %[[I]] {{.*}} -> tensor<1x1x2x16xf32>
//       CHECK:   %[[L:.*]] = bt.lm_head %[[H]] {{.*}} -> tensor<1x1x2x32xf32>
//       CHECK:   %[[R:.*]] = tensor.extract_slice %[[L]][0, 0, 0, 0] [1, 1, 2, 32] [1, 1, 1, 1] : tensor<1x1x2x32xf32> to tensor<2x32xf32>
//       CHECK:   return %[[R]]
// REPORT: remark: bt-eliminate-dead-prefill: 2 ops rewritten; token-decoder blocks: 23 removed, 1 remaining
// LAYER-LABEL: func.func @prefill_lb2_p1_one_sequence
//       LAYER:   bt.prefix_projection {{.*}} -> tensor<1x1x1x16xf32>
//       LAYER:   bt.local_attention {{.*}} : tensor<1x1x2x2x8xf32> -> tensor<1x1x2x2x8xf32>
// LAYER-REPORT: remark: bt-eliminate-dead-prefill: {{[0-9]+}} ops rewritten; token-decoder blocks: 23 removed, 1 remaining

  // L_B = 2, P = 1, B = 4, N = 6, one sequence of the batch (rank-reducing).
  func.func @prefill_lb2_p1_one_sequence(%ids: tensor<4x6x2xi64>, %dec: tensor<4x6x2xi64>) -> tensor<2x32xf32> {
    %emb = bt.embedder %ids table @"emb2.weight" : tensor<4x6x2xi64> -> tensor<4x6x16xf32>
    %ctx = bt.block_decoder %emb config #neox params "bd" : tensor<4x6x16xf32> -> tensor<4x6x16xf32>
    %h = bt.token_decoder %ctx, %dec params "td_p1" config #neox strategy prefix prefix_length 1
        : tensor<4x6x16xf32>, tensor<4x6x2xi64> -> tensor<4x6x2x16xf32>
    %logits = bt.lm_head %h weight @"td_p1.embed_out.weight" : tensor<4x6x2x16xf32> -> tensor<4x6x2x32xf32>
    %last = tensor.extract_slice %logits[1, 5, 0, 0] [1, 1, 2, 32] [1, 1, 1, 1]
        : tensor<4x6x2x32xf32> to tensor<2x32xf32>
    return %last : tensor<2x32xf32>
  }

// Only token 0 of the LM head is computed; the token decoder still decodes
// the whole block (its dims other than B and N_blk are not block dims).
// CHECK-LABEL: func.func @prefill_lb8_p3_first_token
//       CHECK:   %[[C:.*]] = tensor.extract_slice %{{.*}}[0, 3, 0] [1, 1, 16] [1, 1, 1]
//       CHECK:   %[[I:.*]] = tensor.extract_slice %{{.*}}[0, 3, 0] [1, 1, 8] [1, 1, 1]
//       CHECK:   %[[H:.*]] = bt.token_decoder %[[C]], %[[I]] {{.*}} prefix_length 3 {{.*}} -> tensor<1x1x8x16xf32>
//       CHECK:   %[[H0:.*]] = tensor.extract_slice %[[H]][0, 0, 0, 0] [1, 1, 1, 16] [1, 1, 1, 1]
//       CHECK:   %[[L:.*]] = bt.lm_head %[[H0]] {{.*}} : tensor<1x1x1x16xf32> -> tensor<1x1x1x32xf32>
// REPORT: remark: bt-eliminate-dead-prefill: 2 ops rewritten; token-decoder blocks: 3 removed, 1 remaining
// At layer level the last layer also computes only output position P-1.
// LAYER-LABEL: func.func @prefill_lb8_p3_first_token
//       LAYER:   bt.local_attention {{.*}} : tensor<1x1x10x2x8xf32>
//       LAYER:   tensor.extract_slice %{{.*}}[0, 0, 2, 0, 0] [1, 1, 1, 2, 8] [1, 1, 1, 1, 1] : tensor<1x1x10x2x8xf32> to tensor<1x1x1x2x8xf32>
//       LAYER:   bt.linear {{.*}} -> tensor<1x1x1x32xf32>

  // L_B = 8, P = 3, B = 1, N = 4: only the first token's distribution.
  func.func @prefill_lb8_p3_first_token(%ids: tensor<1x4x8xi64>, %dec: tensor<1x4x8xi64>) -> tensor<32xf32> {
    %emb = bt.embedder %ids table @"emb8.weight" : tensor<1x4x8xi64> -> tensor<1x4x16xf32>
    %ctx = bt.block_decoder %emb config #neox params "bd" : tensor<1x4x16xf32> -> tensor<1x4x16xf32>
    %h = bt.token_decoder %ctx, %dec params "td_p3" config #neox strategy prefix prefix_length 3
        : tensor<1x4x16xf32>, tensor<1x4x8xi64> -> tensor<1x4x8x16xf32>
    %logits = bt.lm_head %h weight @"td_p3.embed_out.weight" : tensor<1x4x8x16xf32> -> tensor<1x4x8x32xf32>
    %first = tensor.extract_slice %logits[0, 3, 0, 0] [1, 1, 1, 32] [1, 1, 1, 1]
        : tensor<1x4x8x32xf32> to tensor<32xf32>
    return %first : tensor<32xf32>
  }

// CHECK-LABEL: func.func @hull_with_mask
//  CHECK-SAME:   (%{{.*}}: tensor<2x8x4xi64>, %[[DEC:.*]]: tensor<2x8x4xi64>, %[[MASK:.*]]: tensor<2x8x4xi64>)
//       CHECK:   %[[C:.*]] = tensor.extract_slice %{{.*}}[0, 2, 0] [2, 4, 16] [1, 1, 1]
//       CHECK:   %[[I:.*]] = tensor.extract_slice %[[DEC]][0, 2, 0] [2, 4, 4] [1, 1, 1]
//       CHECK:   %[[M:.*]] = tensor.extract_slice %[[MASK]][0, 2, 0] [2, 4, 4] [1, 1, 1]
//       CHECK:   %[[H:.*]] = bt.token_decoder %[[C]], %[[I]] mask %[[M]] {{.*}} -> tensor<2x4x4x16xf32>
//       CHECK:   %[[L:.*]] = bt.lm_head %[[H]]
//       CHECK:   %[[A:.*]] = tensor.extract_slice %[[L]][0, 0, 0, 0] [2, 1, 4, 32]
//       CHECK:   %[[B:.*]] = tensor.extract_slice %[[L]][0, 3, 0, 0] [2, 1, 4, 32]
//       CHECK:   return %[[A]], %[[B]]
// REPORT: remark: bt-eliminate-dead-prefill: 2 ops rewritten; token-decoder blocks: 8 removed, 8 remaining

  // Two reads (blocks 2 and 5) and a token mask: the token decoder runs on
  // their hull, blocks 2 .. 5.
  func.func @hull_with_mask(%ids: tensor<2x8x4xi64>, %dec: tensor<2x8x4xi64>, %mask: tensor<2x8x4xi64>)
      -> (tensor<2x1x4x32xf32>, tensor<2x1x4x32xf32>) {
    %emb = bt.embedder %ids table @"emb4.weight" : tensor<2x8x4xi64> -> tensor<2x8x16xf32>
    %ctx = bt.block_decoder %emb config #neox params "bd" : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
    %h = bt.token_decoder %ctx, %dec mask %mask params "td_p2" config #neox strategy prefix prefix_length 2
        : tensor<2x8x16xf32>, tensor<2x8x4xi64>, tensor<2x8x4xi64> -> tensor<2x8x4x16xf32>
    %logits = bt.lm_head %h weight @"td_p2.embed_out.weight" : tensor<2x8x4x16xf32> -> tensor<2x8x4x32xf32>
    %a = tensor.extract_slice %logits[0, 2, 0, 0] [2, 1, 4, 32] [1, 1, 1, 1]
        : tensor<2x8x4x32xf32> to tensor<2x1x4x32xf32>
    %b = tensor.extract_slice %logits[0, 5, 0, 0] [2, 1, 4, 32] [1, 1, 1, 1]
        : tensor<2x8x4x32xf32> to tensor<2x1x4x32xf32>
    return %a, %b : tensor<2x1x4x32xf32>, tensor<2x1x4x32xf32>
  }

// CHECK-LABEL: func.func @one_logit
//       CHECK:   %[[SEQ:.*]] = arith.index_cast
//       CHECK:   %[[TOK:.*]] = arith.index_cast
//       CHECK:   %[[C:.*]] = tensor.extract_slice %{{.*}}[%[[SEQ]], 7, 0] [1, 1, 16] [1, 1, 1]
//       CHECK:   %[[I:.*]] = tensor.extract_slice %{{.*}}[%[[SEQ]], 7, 0] [1, 1, 4] [1, 1, 1]
//       CHECK:   %[[H:.*]] = bt.token_decoder %[[C]], %[[I]] {{.*}} -> tensor<1x1x4x16xf32>
//       CHECK:   %[[H0:.*]] = tensor.extract_slice %[[H]][0, 0, 0, 0] [1, 1, 1, 16]
//       CHECK:   %[[L:.*]] = bt.lm_head %[[H0]] {{.*}} -> tensor<1x1x1x32xf32>
//       CHECK:   tensor.extract %[[L]][%{{.*}}, %{{.*}}, %{{.*}}, %[[TOK]]] : tensor<1x1x1x32xf32>
// REPORT: remark: bt-eliminate-dead-prefill: 2 ops rewritten; token-decoder blocks: 15 removed, 1 remaining

  // One logit (tensor.extract) at indices read at run time.
  func.func @one_logit(%ids: tensor<2x8x4xi64>, %dec: tensor<2x8x4xi64>, %at: tensor<2xi64>) -> tensor<f32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c7 = arith.constant 7 : index
    %s64 = tensor.extract %at[%c0] : tensor<2xi64>
    %t64 = tensor.extract %at[%c1] : tensor<2xi64>
    %seq = arith.index_cast %s64 : i64 to index
    %tok = arith.index_cast %t64 : i64 to index
    %emb = bt.embedder %ids table @"emb4.weight" : tensor<2x8x4xi64> -> tensor<2x8x16xf32>
    %ctx = bt.block_decoder %emb config #neox params "bd" : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
    %h = bt.token_decoder %ctx, %dec params "td_p2" config #neox strategy prefix prefix_length 2
        : tensor<2x8x16xf32>, tensor<2x8x4xi64> -> tensor<2x8x4x16xf32>
    %logits = bt.lm_head %h weight @"td_p2.embed_out.weight" : tensor<2x8x4x16xf32> -> tensor<2x8x4x32xf32>
    %x = tensor.extract %logits[%seq, %c7, %c0, %tok] : tensor<2x8x4x32xf32>
    %t = tensor.from_elements %x : tensor<f32>
    return %t : tensor<f32>
  }

// CHECK-LABEL: func.func @prefill_dynamic
//       CHECK:   %[[N:.*]] = tensor.dim %{{.*}}, %c1
//       CHECK:   %[[LAST:.*]] = arith.subi %[[N]], %c1
//       CHECK:   %[[CTX:.*]] = bt.block_decoder {{.*}} -> tensor<?x?x16xf32>
//       CHECK:   %[[C:.*]] = tensor.extract_slice %[[CTX]][0, %[[LAST]], 0] [%{{.*}}, 1, 16] [1, 1, 1] : tensor<?x?x16xf32> to tensor<?x1x16xf32>
//       CHECK:   %[[I:.*]] = tensor.extract_slice %{{.*}}[0, %[[LAST]], 0] [%{{.*}}, 1, 4] [1, 1, 1] : tensor<?x?x4xi64> to tensor<?x1x4xi64>
//       CHECK:   %[[H:.*]] = bt.token_decoder %[[C]], %[[I]] {{.*}} -> tensor<?x1x4x16xf32>
//       CHECK:   %[[L:.*]] = bt.lm_head %[[H]] {{.*}} -> tensor<?x1x4x32xf32>
//       CHECK:   return %[[L]]
// REPORT: remark: bt-eliminate-dead-prefill: 2 ops rewritten; token-decoder blocks: 0 removed, 0 remaining, 1 dynamic rewrites
// LAYER-LABEL: func.func @prefill_dynamic
//       LAYER:   bt.prefix_projection {{.*}} -> tensor<?x1x2x16xf32>
//       LAYER:   bt.local_attention {{.*}} : tensor<?x1x5x2x8xf32>
// LAYER-REPORT: remark: bt-eliminate-dead-prefill: {{[0-9]+}} ops rewritten; token-decoder blocks: 0 removed, 0 remaining, 1 dynamic rewrites

  // Dynamic batch and block count: the last block, whatever N is.
  func.func @prefill_dynamic(%ids: tensor<?x?x4xi64>, %dec: tensor<?x?x4xi64>) -> tensor<?x1x4x32xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %b = tensor.dim %ids, %c0 : tensor<?x?x4xi64>
    %n = tensor.dim %ids, %c1 : tensor<?x?x4xi64>
    %last = arith.subi %n, %c1 : index
    %emb = bt.embedder %ids table @"emb4.weight" : tensor<?x?x4xi64> -> tensor<?x?x16xf32>
    %ctx = bt.block_decoder %emb config #neox params "bd" : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
    %h = bt.token_decoder %ctx, %dec params "td_p2" config #neox strategy prefix prefix_length 2
        : tensor<?x?x16xf32>, tensor<?x?x4xi64> -> tensor<?x?x4x16xf32>
    %logits = bt.lm_head %h weight @"td_p2.embed_out.weight" : tensor<?x?x4x16xf32> -> tensor<?x?x4x32xf32>
    %s = tensor.extract_slice %logits[0, %last, 0, 0] [%b, 1, 4, 32] [1, 1, 1, 1]
        : tensor<?x?x4x32xf32> to tensor<?x1x4x32xf32>
    return %s : tensor<?x1x4x32xf32>
  }

// CHECK-LABEL: func.func @prefill_summation
//       CHECK:   %[[C:.*]] = tensor.extract_slice %{{.*}}[0, %{{.*}}, 0] [3, 1, 16] [1, 1, 1] : tensor<3x?x16xf32> to tensor<3x1x16xf32>
//       CHECK:   bt.token_decoder %[[C]], {{.*}} strategy summation {{.*}} -> tensor<3x1x4x16xf32>
// REPORT: remark: bt-eliminate-dead-prefill: 2 ops rewritten; token-decoder blocks: 0 removed, 3 remaining, 1 dynamic rewrites
// LAYER-LABEL: func.func @prefill_summation
//       LAYER:   bt.prefix_projection {{.*}} -> tensor<3x1x4x16xf32>
//       LAYER:   bt.local_attention {{.*}} : tensor<3x1x4x2x8xf32>
// LAYER-REPORT: remark: bt-eliminate-dead-prefill: {{[0-9]+}} ops rewritten; token-decoder blocks: 0 removed, 3 remaining, 1 dynamic rewrites

  // Summation strategy (MEGABYTE), L_B = P = 4, static batch, dynamic N.
  func.func @prefill_summation(%ids: tensor<3x?x4xi64>, %dec: tensor<3x?x4xi64>) -> tensor<3x1x4x32xf32> {
    %c1 = arith.constant 1 : index
    %n = tensor.dim %ids, %c1 : tensor<3x?x4xi64>
    %last = arith.subi %n, %c1 : index
    %emb = bt.embedder %ids table @"emb4.weight" : tensor<3x?x4xi64> -> tensor<3x?x16xf32>
    %ctx = bt.block_decoder %emb config #neox params "bd" : tensor<3x?x16xf32> -> tensor<3x?x16xf32>
    %h = bt.token_decoder %ctx, %dec params "td_s4" config #neox strategy summation prefix_length 4
        : tensor<3x?x16xf32>, tensor<3x?x4xi64> -> tensor<3x?x4x16xf32>
    %logits = bt.lm_head %h weight @"td_s4.embed_out.weight" : tensor<3x?x4x16xf32> -> tensor<3x?x4x32xf32>
    %s = tensor.extract_slice %logits[0, %last, 0, 0] [3, 1, 4, 32] [1, 1, 1, 1]
        : tensor<3x?x4x32xf32> to tensor<3x1x4x32xf32>
    return %s : tensor<3x1x4x32xf32>
  }

// CHECK-LABEL: func.func @embedder_slice
//       CHECK:   %[[I:.*]] = tensor.extract_slice %{{.*}}[0, 3, 0] [2, 2, 4] [1, 1, 1]
//       CHECK:   %[[E:.*]] = bt.embedder %[[I]] {{.*}} : tensor<2x2x4xi64> -> tensor<2x2x16xf32>
//       CHECK:   return %[[E]]
// REPORT: remark: bt-eliminate-dead-prefill: 1 ops rewritten

  // The embedder alone is block-local too.
  func.func @embedder_slice(%ids: tensor<2x8x4xi64>) -> tensor<2x2x16xf32> {
    %emb = bt.embedder %ids table @"emb4.weight" : tensor<2x8x4xi64> -> tensor<2x8x16xf32>
    %s = tensor.extract_slice %emb[0, 3, 0] [2, 2, 16] [1, 1, 1] : tensor<2x8x16xf32> to tensor<2x2x16xf32>
    return %s : tensor<2x2x16xf32>
  }

// CHECK-LABEL: func.func @strided_read
//       CHECK:   %[[H:.*]] = bt.token_decoder {{.*}} -> tensor<2x8x4x16xf32>
//       CHECK:   tensor.extract_slice %[[H]][0, 0, 0, 0] [2, 4, 4, 16] [1, 2, 1, 1]
// REPORT: remark: bt-eliminate-dead-prefill: 0 ops rewritten; token-decoder blocks: 0 removed, 16 remaining

  // A strided read is not narrowed.
  func.func @strided_read(%ctx: tensor<2x8x16xf32>, %dec: tensor<2x8x4xi64>) -> tensor<2x4x4x16xf32> {
    %h = bt.token_decoder %ctx, %dec params "td_p2" config #neox strategy prefix prefix_length 2
        : tensor<2x8x16xf32>, tensor<2x8x4xi64> -> tensor<2x8x4x16xf32>
    %s = tensor.extract_slice %h[0, 0, 0, 0] [2, 4, 4, 16] [1, 2, 1, 1] : tensor<2x8x4x16xf32> to tensor<2x4x4x16xf32>
    return %s : tensor<2x4x4x16xf32>
  }
}
