// RUN: bt-opt %s --bt-eliminate-dead-prefill | FileCheck %s
// RUN: bt-opt %s --bt-eliminate-dead-prefill=report --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: bt-opt %s --bt-eliminate-dead-prefill --bt-verify-kv-lifetimes -o /dev/null

// bt-eliminate-dead-prefill removes KV-cache chains (kv_alloc → kv_append* /
// block_decoder with cache → kv_release) whose reads feed nothing live, and
// with them the work that only fed their appends.

#neox = #bt.neox<hidden = 16, layers = 1, heads = 2, head_dim = 8, intermediate = 32, rotary_dims = 4, rotary_base = 10000.0, eps = 1.0e-05>
!local = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 8, f32>
!dlocal = !bt.kv_cache<local, batch = ?, layers = 1, heads = 2, capacity = 6, head_dim = 8, f32>
!global = !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = 64, head_dim = 8, f32>

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

  // A decode loop (examples/block_tiny.mlir): the global cache is carried
  // through the loop and stays; each step's local cache is appended to and
  // attended, but the attention is never used.
  // CHECK-LABEL: func.func @dead_local_in_loop
  //       CHECK:   %[[G0:.*]] = bt.kv_alloc batch %{{.*}} : !bt.kv_cache<global
  //       CHECK:   scf.for
  //       CHECK:     bt.block_decoder %{{.*}} cache %{{.*}}
  //   CHECK-NOT:     bt.kv_alloc
  //   CHECK-NOT:     bt.kv_append
  //   CHECK-NOT:     bt.kv_attend
  //   CHECK-NOT:     bt.kv_release %{{.*}} : !bt.kv_cache<local
  //       CHECK:     scf.yield
  //       CHECK:   bt.kv_release %{{.*}} : !bt.kv_cache<global
  // REPORT: remark: bt-eliminate-dead-prefill: 0 ops rewritten; token-decoder blocks: 0 removed, 0 remaining, 0 dynamic rewrites; KV caches removed: 1 local, 0 global; 4 ops removed
  func.func @dead_local_in_loop(%prompt: tensor<?x3x16xf32>, %next: tensor<?x1x16xf32>,
                                %q: tensor<?x1x2x8xf32>, %kv: tensor<?x1x2x8xf32>, %steps: index) -> tensor<?x1x16xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %b = tensor.dim %prompt, %c0 : tensor<?x3x16xf32>
    %g0 = bt.kv_alloc batch %b : !global
    %ctx0, %g1 = bt.block_decoder %prompt cache %g0 params "bd" config #neox
        : tensor<?x3x16xf32>, !global -> tensor<?x3x16xf32>, !global
    %last, %gN = scf.for %i = %c0 to %steps step %c1
        iter_args(%x = %next, %g = %g1) -> (tensor<?x1x16xf32>, !global) {
      %y, %g2 = bt.block_decoder %x cache %g params "bd" config #neox
          : tensor<?x1x16xf32>, !global -> tensor<?x1x16xf32>, !global
      %l0 = bt.kv_alloc batch %b : !dlocal
      %l1 = bt.kv_append %l0[0], %kv, %kv : !dlocal, tensor<?x1x2x8xf32>
      %o = bt.kv_attend %q, %l1[0] scale 0.35355339059327373
          : tensor<?x1x2x8xf32>, !dlocal -> tensor<?x1x2x8xf32>
      bt.kv_release %l1 : !dlocal
      scf.yield %y, %g2 : tensor<?x1x16xf32>, !global
    }
    bt.kv_release %gN : !global
    return %last : tensor<?x1x16xf32>
  }

  // The attention is returned: the chain is live.
  // CHECK-LABEL: func.func @live_local
  //       CHECK:   bt.kv_alloc
  //       CHECK:   bt.kv_append
  //       CHECK:   bt.kv_attend
  //       CHECK:   bt.kv_release
  // REPORT: remark: bt-eliminate-dead-prefill: 0 ops rewritten; token-decoder blocks: 0 removed, 0 remaining, 0 dynamic rewrites; KV caches removed: 0 local, 0 global; 0 ops removed
  func.func @live_local(%q: tensor<2x1x2x8xf32>, %kv: tensor<2x1x2x8xf32>) -> tensor<2x1x2x8xf32> {
    %l0 = bt.kv_alloc : !local
    %l1 = bt.kv_append %l0[0], %kv, %kv : !local, tensor<2x1x2x8xf32>
    %o = bt.kv_attend %q, %l1[0] scale 0.35355339059327373
        : tensor<2x1x2x8xf32>, !local -> tensor<2x1x2x8xf32>
    bt.kv_release %l1 : !local
    return %o : tensor<2x1x2x8xf32>
  }

  // A global chain through the block decoder whose context is unused: the
  // cache, the block decoder and the embedder feeding it disappear.
  // CHECK-LABEL: func.func @dead_global
  //   CHECK-NOT:   bt.embedder
  //   CHECK-NOT:   bt.kv_alloc
  //   CHECK-NOT:   bt.block_decoder
  //   CHECK-NOT:   bt.kv_release
  //       CHECK:   return
  // REPORT: remark: bt-eliminate-dead-prefill: 0 ops rewritten; token-decoder blocks: 0 removed, 0 remaining, 0 dynamic rewrites; KV caches removed: 0 local, 1 global; 6 ops removed
  func.func @dead_global(%ids: tensor<?x3x4xi64>) {
    %c0 = arith.constant 0 : index
    %b = tensor.dim %ids, %c0 : tensor<?x3x4xi64>
    %x = bt.embedder %ids table @"emb4.weight" : tensor<?x3x4xi64> -> tensor<?x3x16xf32>
    %g0 = bt.kv_alloc batch %b : !global
    %y, %g1 = bt.block_decoder %x cache %g0 params "bd" config #neox
        : tensor<?x3x16xf32>, !global -> tensor<?x3x16xf32>, !global
    bt.kv_release %g1 : !global
    return
  }

  // Layer level: one token-decoder step whose keys/values go into a local
  // cache that nothing reads: the QKV projection and its LayerNorm go too.
  // CHECK-LABEL: func.func @dead_local_layer
  //  CHECK-NEXT:   return
  // REPORT: remark: bt-eliminate-dead-prefill: 0 ops rewritten; token-decoder blocks: 0 removed, 0 remaining, 0 dynamic rewrites; KV caches removed: 1 local, 0 global; 11 ops removed
  func.func @dead_local_layer(%x: tensor<2x1x16xf32>) {
    %lw = bt.param_ref @"td_p2.gpt_neox.layers.0.input_layernorm.weight" : tensor<16xf32>
    %lb = bt.param_ref @"td_p2.gpt_neox.layers.0.input_layernorm.bias" : tensor<16xf32>
    %w = bt.param_ref @"td_p2.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<48x16xf32>
    %bias = bt.param_ref @"td_p2.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<48xf32>
    %h = bt.layer_norm %x, %lw, %lb eps 1.0e-05 : tensor<2x1x16xf32>, tensor<16xf32>, tensor<16xf32> -> tensor<2x1x16xf32>
    %qkv = bt.linear %h, %w, %bias : tensor<2x1x16xf32>, tensor<48x16xf32>, tensor<48xf32> -> tensor<2x1x48xf32>
    %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : tensor<2x1x48xf32> -> tensor<2x1x2x8xf32>, tensor<2x1x2x8xf32>, tensor<2x1x2x8xf32>
    %l0 = bt.kv_alloc : !local
    %l1 = bt.kv_append %l0[0], %k, %v : !local, tensor<2x1x2x8xf32>
    %o = bt.kv_attend %q, %l1[0] scale 0.35355339059327373
        : tensor<2x1x2x8xf32>, !local -> tensor<2x1x2x8xf32>
    bt.kv_release %l1 : !local
    return
  }

  // A chain carried through a loop is kept (the pass does not follow it).
  // CHECK-LABEL: func.func @through_loop
  //       CHECK:   bt.kv_alloc
  //       CHECK:   scf.for
  //       CHECK:     bt.kv_append
  //       CHECK:   bt.kv_release
  // REPORT: remark: bt-eliminate-dead-prefill: 0 ops rewritten; token-decoder blocks: 0 removed, 0 remaining, 0 dynamic rewrites; KV caches removed: 0 local, 0 global; 0 ops removed
  func.func @through_loop(%kv: tensor<2x1x2x8xf32>, %n: index) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %l0 = bt.kv_alloc : !local
    %l = scf.for %i = %c0 to %n step %c1 iter_args(%c = %l0) -> (!local) {
      %c2 = bt.kv_append %c[0], %kv, %kv : !local, tensor<2x1x2x8xf32>
      scf.yield %c2 : !local
    }
    bt.kv_release %l : !local
    return
  }
}
