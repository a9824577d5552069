// RUN: bt-opt %s -split-input-file | bt-opt -split-input-file | FileCheck %s
// RUN: bt-opt %s -split-input-file --mlir-print-op-generic | bt-opt -split-input-file | FileCheck %s

// Round trip of the dialect additions for generation (docs/generation.md):
// a global KV cache with dynamic capacity and bt.kv_alloc's capacity operand,
// bt.block_decoder's positions operand (vanilla generation), the incremental
// token decoder step with a local cache, and bt.sample.

!g = !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>
!l = !bt.kv_cache<local, batch = ?, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>
#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>

module {
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

  // CHECK-LABEL: func.func private @types
  // CHECK-SAME: !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>
  // CHECK-SAME: !bt.kv_cache<global, batch = 3, layers = 2, heads = 1, capacity = ?, head_dim = 8, bf16>
  func.func private @types(!g, !bt.kv_cache<global, batch = 3, layers = 2, heads = 1, capacity = ?, head_dim = 8, bf16>)

  // A dynamic capacity is given at allocation.
  // CHECK-LABEL: func.func @alloc_dynamic_capacity
  // CHECK-SAME:  (%[[B:[^:]+]]: index, %[[C:[^:]+]]: index)
  // CHECK: %[[G:.+]] = bt.kv_alloc batch %[[B]] capacity %[[C]] : !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>
  // CHECK: bt.kv_release %[[G]]
  // CHECK: %[[H:.+]] = bt.kv_alloc capacity %[[C]] : !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>
  func.func @alloc_dynamic_capacity(%b: index, %c: index) {
    %g = bt.kv_alloc batch %b capacity %c : !g
    bt.kv_release %g : !g
    %h = bt.kv_alloc capacity %c : !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>
    bt.kv_release %h : !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>
    return
  }

  // Vanilla prefill: per-row positions with mask and cache.
  // CHECK-LABEL: func.func @block_decoder_positions
  // CHECK-SAME:  (%[[X:[^:]+]]: tensor<?x?x8xf32>, %[[M:[^:]+]]: tensor<?x?xi64>, %[[P:[^:]+]]: tensor<?x?xi64>, %[[G:[^:]+]]: !bt.kv_cache
  // CHECK:      %[[Y:.+]], %[[G1:.+]] = bt.block_decoder %[[X]] mask %[[M]] positions %[[P]] cache %[[G]] config
  // CHECK-SAME:   params "gpt_neox"
  // CHECK-SAME:   : tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<?x?xi64>, !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>
  // CHECK-SAME:   -> tensor<?x?x8xf32>, !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>
  // Positions alone (no mask, no cache), i32.
  // CHECK:      %[[Z:.+]] = bt.block_decoder %[[X]] positions %{{.+}} config
  // CHECK-SAME:   : tensor<?x?x8xf32>, tensor<?x?xi32> -> tensor<?x?x8xf32>
  func.func @block_decoder_positions(%x: tensor<?x?x8xf32>, %m: tensor<?x?xi64>, %p: tensor<?x?xi64>, %g: !g)
      -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, !g) {
    %y, %g1 = bt.block_decoder %x mask %m positions %p cache %g params "gpt_neox" config #cfg
        : tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<?x?xi64>, !g -> tensor<?x?x8xf32>, !g
    %p32 = arith.trunci %p : tensor<?x?xi64> to tensor<?x?xi32>
    %z = bt.block_decoder %x positions %p32 config #cfg params "gpt_neox"
        : tensor<?x?x8xf32>, tensor<?x?xi32> -> tensor<?x?x8xf32>
    return %y, %z, %g1 : tensor<?x?x8xf32>, tensor<?x?x8xf32>, !g
  }

  // Two incremental steps of the token decoder (P = 2 prefix vectors, then
  // one token) on a local cache, each followed by sampling.
  // CHECK-LABEL: func.func @token_decoder_steps
  // CHECK-SAME:  (%[[PRE:[^:]+]]: tensor<?x2x8xf32>, %[[TOK:[^:]+]]: tensor<?x1x8xf32>, %[[P0:[^:]+]]: tensor<2xi64>, %[[P1:[^:]+]]: tensor<1xi64>, %[[S:[^:]+]]: i64, %[[B:[^:]+]]: index)
  // CHECK:      %[[C0:.+]] = bt.kv_alloc batch %[[B]] : !bt.kv_cache<local, batch = ?, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>
  // CHECK:      %[[H0:.+]], %[[C1:.+]] = bt.token_decoder_step %[[PRE]], %[[P0]] cache %[[C0]] config <hidden = 8, {{.*}}> params "token_decoder"
  // CHECK-SAME:   : tensor<?x2x8xf32>, tensor<2xi64>, !bt.kv_cache<local, batch = ?, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>
  // CHECK-SAME:   -> tensor<?x2x8xf32>, !bt.kv_cache<local, batch = ?, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>
  // CHECK:      %[[H1:.+]], %[[C2:.+]] = bt.token_decoder_step %[[TOK]], %[[P1]] cache %[[C1]] config
  // CHECK:      bt.kv_release %[[C2]]
  // CHECK:      %[[T:.+]] = bt.sample %{{.+}}, %[[S]] : tensor<?x8xf32> -> tensor<?xi64>
  // CHECK:      return %[[H0]], %[[H1]], %[[T]]
  func.func @token_decoder_steps(%pre: tensor<?x2x8xf32>, %tok: tensor<?x1x8xf32>,
                                 %p0: tensor<2xi64>, %p1: tensor<1xi64>, %s: i64, %b: index)
      -> (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?xi64>) {
    %c0 = bt.kv_alloc batch %b : !l
    %h0, %c1 = bt.token_decoder_step %pre, %p0 cache %c0 config #cfg params "token_decoder"
        : tensor<?x2x8xf32>, tensor<2xi64>, !l -> tensor<?x2x8xf32>, !l
    %h1, %c2 = bt.token_decoder_step %tok, %p1 cache %c1 config #cfg params "token_decoder"
        : tensor<?x1x8xf32>, tensor<1xi64>, !l -> tensor<?x1x8xf32>, !l
    bt.kv_release %c2 : !l
    %c0i = arith.constant 0 : index
    %last = tensor.extract_slice %h1[0, 0, 0] [%b, 1, 8] [1, 1, 1] : tensor<?x1x8xf32> to tensor<?x8xf32>
    %t = bt.sample %last, %s : tensor<?x8xf32> -> tensor<?xi64>
    return %h0, %h1, %t : tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?xi64>
  }
}
