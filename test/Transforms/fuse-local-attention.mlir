// RUN: bt-opt %s --bt-decompose --bt-fuse-local-attention | FileCheck %s
// RUN: bt-opt %s --bt-decompose --bt-fuse-local-attention --bt-cpu-pipeline -o /dev/null

// bt-fuse-local-attention: split_qkv → rotary (q and k, same rotation) →
// local_attention becomes one bt.fused_local_attention; anything else is left
// alone.

!t = tensor<2x3x5x2x8xf32>
!qkv = tensor<2x3x5x48xf32>

module {
  bt.param @"td.gpt_neox.embed_in.weight" : tensor<32x16xf32>
  bt.param @"td.gpt_neox.layers.0.input_layernorm.weight" : tensor<16xf32>
  bt.param @"td.gpt_neox.layers.0.input_layernorm.bias" : tensor<16xf32>
  bt.param @"td.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<16xf32>
  bt.param @"td.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<16xf32>
  bt.param @"td.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<48x16xf32>
  bt.param @"td.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<48xf32>
  bt.param @"td.gpt_neox.layers.0.attention.dense.weight" : tensor<16x16xf32>
  bt.param @"td.gpt_neox.layers.0.attention.dense.bias" : tensor<16xf32>
  bt.param @"td.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<32x16xf32>
  bt.param @"td.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<32xf32>
  bt.param @"td.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<16x32xf32>
  bt.param @"td.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<16xf32>
  bt.param @"td.gpt_neox.layers.1.input_layernorm.weight" : tensor<16xf32>
  bt.param @"td.gpt_neox.layers.1.input_layernorm.bias" : tensor<16xf32>
  bt.param @"td.gpt_neox.layers.1.post_attention_layernorm.weight" : tensor<16xf32>
  bt.param @"td.gpt_neox.layers.1.post_attention_layernorm.bias" : tensor<16xf32>
  bt.param @"td.gpt_neox.layers.1.attention.query_key_value.weight" : tensor<48x16xf32>
  bt.param @"td.gpt_neox.layers.1.attention.query_key_value.bias" : tensor<48xf32>
  bt.param @"td.gpt_neox.layers.1.attention.dense.weight" : tensor<16x16xf32>
  bt.param @"td.gpt_neox.layers.1.attention.dense.bias" : tensor<16xf32>
  bt.param @"td.gpt_neox.layers.1.mlp.dense_h_to_4h.weight" : tensor<32x16xf32>
  bt.param @"td.gpt_neox.layers.1.mlp.dense_h_to_4h.bias" : tensor<32xf32>
  bt.param @"td.gpt_neox.layers.1.mlp.dense_4h_to_h.weight" : tensor<16x32xf32>
  bt.param @"td.gpt_neox.layers.1.mlp.dense_4h_to_h.bias" : tensor<16xf32>
  bt.param @"td.gpt_neox.final_layer_norm.weight" : tensor<16xf32>
  bt.param @"td.gpt_neox.final_layer_norm.bias" : tensor<16xf32>
  bt.param @"td.expansion_layer.weight" : tensor<32x16x1xf32>
  bt.param @"td.expansion_layer.bias" : tensor<32xf32>
  bt.param @"td.embed_out.weight" : tensor<32x16xf32>

  // CHECK-LABEL: func.func @fuse
  //  CHECK-SAME:   (%[[QKV:.*]]: tensor<2x3x5x48xf32>, %[[P:.*]]: tensor<5xi64>, %[[M:.*]]: tensor<2x3x5xi64>)
  //  CHECK-NEXT:   %[[O:.*]] = bt.fused_local_attention %[[QKV]], %[[P]] key_mask %[[M]] heads 2 head_dim 8 rotary_dims 4 base 1.000000e+04 scale 0.35355339059327373 : tensor<2x3x5x48xf32>, tensor<5xi64>, tensor<2x3x5xi64> -> tensor<2x3x5x2x8xf32>
  //  CHECK-NEXT:   return %[[O]]
  func.func @fuse(%qkv: !qkv, %p: tensor<5xi64>, %m: tensor<2x3x5xi64>) -> !t {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : !qkv -> !t, !t, !t
    %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %kr = bt.rotary %k, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %o = bt.local_attention %qr, %kr, %v key_mask %m scale 0.35355339059327373 : !t, tensor<2x3x5xi64> -> !t
    return %o : !t
  }

  // Dynamic B and N_blk, per-block positions [B, N_blk, S], no key mask.
  // CHECK-LABEL: func.func @fuse_dynamic_per_block_positions
  //  CHECK-NEXT:   bt.fused_local_attention %{{.*}}, %{{.*}} heads 2 head_dim 8 rotary_dims 8 base 5.000000e+02 scale 1.250000e-01 : tensor<?x?x5x48xf32>, tensor<?x?x5xi64> -> tensor<?x?x5x2x8xf32>
  //  CHECK-NEXT:   return
  func.func @fuse_dynamic_per_block_positions(%qkv: tensor<?x?x5x48xf32>, %p: tensor<?x?x5xi64>) -> tensor<?x?x5x2x8xf32> {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : tensor<?x?x5x48xf32> -> tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>, tensor<?x?x5x2x8xf32>
    %qr = bt.rotary %q, %p rotary_dims 8 base 500.0 : tensor<?x?x5x2x8xf32>, tensor<?x?x5xi64> -> tensor<?x?x5x2x8xf32>
    %kr = bt.rotary %k, %p rotary_dims 8 base 500.0 : tensor<?x?x5x2x8xf32>, tensor<?x?x5xi64> -> tensor<?x?x5x2x8xf32>
    %o = bt.local_attention %qr, %kr, %v scale 0.125 : tensor<?x?x5x2x8xf32> -> tensor<?x?x5x2x8xf32>
    return %o : tensor<?x?x5x2x8xf32>
  }

  // The token decoder as bt-decompose emits it: both layers fuse.
  // CHECK-LABEL: func.func @token_decoder
  //   CHECK-NOT:   bt.split_qkv
  //   CHECK-NOT:   bt.rotary
  //   CHECK-NOT:   bt.local_attention
  //       CHECK:   bt.fused_local_attention {{.*}} key_mask {{.*}} : tensor<2x3x5x48xf32>, tensor<5xi64>, tensor<2x3x5xi64> -> tensor<2x3x5x2x8xf32>
  //   CHECK-NOT:   bt.local_attention
  //       CHECK:   bt.fused_local_attention {{.*}} key_mask {{.*}} : tensor<2x3x5x48xf32>, tensor<5xi64>, tensor<2x3x5xi64> -> tensor<2x3x5x2x8xf32>
  //   CHECK-NOT:   bt.local_attention
  //       CHECK:   return
  func.func @token_decoder(%ctx: tensor<2x3x16xf32>, %ids: tensor<2x3x4xi64>, %mask: tensor<2x3x4xi64>) -> tensor<2x3x4x16xf32> {
    %h = bt.token_decoder %ctx, %ids mask %mask params "td"
        config #bt.neox<hidden = 16, layers = 2, heads = 2, head_dim = 8, intermediate = 32, rotary_dims = 4, rotary_base = 10000.0, eps = 1.0e-05>
        strategy prefix prefix_length 2 : tensor<2x3x16xf32>, tensor<2x3x4xi64>, tensor<2x3x4xi64> -> tensor<2x3x4x16xf32>
    return %h : tensor<2x3x4x16xf32>
  }

  //===--------------------------------------------------------------------===//
  // Left alone
  //===--------------------------------------------------------------------===//

  // CHECK-LABEL: func.func @different_positions
  //       CHECK:   bt.split_qkv
  //       CHECK:   bt.local_attention
  //   CHECK-NOT:   bt.fused_local_attention
  func.func @different_positions(%qkv: !qkv, %p: tensor<5xi64>, %p2: tensor<5xi64>) -> !t {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : !qkv -> !t, !t, !t
    %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %kr = bt.rotary %k, %p2 rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %o = bt.local_attention %qr, %kr, %v scale 0.35355339059327373 : !t -> !t
    return %o : !t
  }

  // CHECK-LABEL: func.func @different_rotary_dims
  //       CHECK:   bt.local_attention
  //   CHECK-NOT:   bt.fused_local_attention
  func.func @different_rotary_dims(%qkv: !qkv, %p: tensor<5xi64>) -> !t {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : !qkv -> !t, !t, !t
    %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %kr = bt.rotary %k, %p rotary_dims 2 base 10000.0 : !t, tensor<5xi64> -> !t
    %o = bt.local_attention %qr, %kr, %v scale 0.35355339059327373 : !t -> !t
    return %o : !t
  }

  // CHECK-LABEL: func.func @different_base
  //       CHECK:   bt.local_attention
  //   CHECK-NOT:   bt.fused_local_attention
  func.func @different_base(%qkv: !qkv, %p: tensor<5xi64>) -> !t {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : !qkv -> !t, !t, !t
    %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %kr = bt.rotary %k, %p rotary_dims 4 base 500.0 : !t, tensor<5xi64> -> !t
    %o = bt.local_attention %qr, %kr, %v scale 0.35355339059327373 : !t -> !t
    return %o : !t
  }

  // k is not rotated.
  // CHECK-LABEL: func.func @k_not_rotated
  //       CHECK:   bt.local_attention
  //   CHECK-NOT:   bt.fused_local_attention
  func.func @k_not_rotated(%qkv: !qkv, %p: tensor<5xi64>) -> !t {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : !qkv -> !t, !t, !t
    %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %o = bt.local_attention %qr, %k, %v scale 0.35355339059327373 : !t -> !t
    return %o : !t
  }

  // No rotary at all (rotary_dims = 0 in the config: bt-decompose emits none).
  // CHECK-LABEL: func.func @no_rotary
  //       CHECK:   bt.local_attention
  //   CHECK-NOT:   bt.fused_local_attention
  func.func @no_rotary(%qkv: !qkv) -> !t {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : !qkv -> !t, !t, !t
    %o = bt.local_attention %q, %k, %v scale 0.35355339059327373 : !t -> !t
    return %o : !t
  }

  // q and k swapped in the attention.
  // CHECK-LABEL: func.func @swapped_q_k
  //       CHECK:   bt.local_attention
  //   CHECK-NOT:   bt.fused_local_attention
  func.func @swapped_q_k(%qkv: !qkv, %p: tensor<5xi64>) -> !t {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : !qkv -> !t, !t, !t
    %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %kr = bt.rotary %k, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %o = bt.local_attention %kr, %qr, %v scale 0.35355339059327373 : !t -> !t
    return %o : !t
  }

  // v is rotated too.
  // CHECK-LABEL: func.func @rotated_v
  //       CHECK:   bt.local_attention
  //   CHECK-NOT:   bt.fused_local_attention
  func.func @rotated_v(%qkv: !qkv, %p: tensor<5xi64>) -> !t {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : !qkv -> !t, !t, !t
    %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %kr = bt.rotary %k, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %vr = bt.rotary %v, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %o = bt.local_attention %qr, %kr, %vr scale 0.35355339059327373 : !t -> !t
    return %o : !t
  }

  // q and k from two different projections.
  // CHECK-LABEL: func.func @two_splits
  //       CHECK:   bt.local_attention
  //   CHECK-NOT:   bt.fused_local_attention
  func.func @two_splits(%qkv: !qkv, %qkv2: !qkv, %p: tensor<5xi64>) -> !t {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : !qkv -> !t, !t, !t
    %q2, %k2, %v2 = bt.split_qkv %qkv2 heads 2 head_dim 8 : !qkv -> !t, !t, !t
    %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %kr = bt.rotary %k2, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %o = bt.local_attention %qr, %kr, %v scale 0.35355339059327373 : !t -> !t
    return %o : !t
  }

  // The rotated k is also returned (e.g. appended to a cache): fusing would
  // compute it twice.
  // CHECK-LABEL: func.func @rotated_k_used_elsewhere
  //       CHECK:   bt.local_attention
  //   CHECK-NOT:   bt.fused_local_attention
  func.func @rotated_k_used_elsewhere(%qkv: !qkv, %p: tensor<5xi64>) -> (!t, !t) {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : !qkv -> !t, !t, !t
    %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %kr = bt.rotary %k, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %o = bt.local_attention %qr, %kr, %v scale 0.35355339059327373 : !t -> !t
    return %o, %kr : !t, !t
  }

  // v is also returned.
  // CHECK-LABEL: func.func @v_used_elsewhere
  //       CHECK:   bt.local_attention
  //   CHECK-NOT:   bt.fused_local_attention
  func.func @v_used_elsewhere(%qkv: !qkv, %p: tensor<5xi64>) -> (!t, !t) {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : !qkv -> !t, !t, !t
    %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %kr = bt.rotary %k, %p rotary_dims 4 base 10000.0 : !t, tensor<5xi64> -> !t
    %o = bt.local_attention %qr, %kr, %v scale 0.35355339059327373 : !t -> !t
    return %o, %v : !t, !t
  }

  // Global attention (block decoder, vanilla): not fused.
  // CHECK-LABEL: func.func @global_attention
  //       CHECK:   bt.attention
  //   CHECK-NOT:   bt.fused_local_attention
  func.func @global_attention(%qkv: tensor<2x5x48xf32>, %p: tensor<5xi64>) -> tensor<2x5x2x8xf32> {
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : tensor<2x5x48xf32> -> tensor<2x5x2x8xf32>, tensor<2x5x2x8xf32>, tensor<2x5x2x8xf32>
    %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : tensor<2x5x2x8xf32>, tensor<5xi64> -> tensor<2x5x2x8xf32>
    %kr = bt.rotary %k, %p rotary_dims 4 base 10000.0 : tensor<2x5x2x8xf32>, tensor<5xi64> -> tensor<2x5x2x8xf32>
    %o = bt.attention %qr, %kr, %v scale 0.35355339059327373 : tensor<2x5x2x8xf32> -> tensor<2x5x2x8xf32>
    return %o : tensor<2x5x2x8xf32>
  }
}
