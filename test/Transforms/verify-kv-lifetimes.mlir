// RUN: bt-opt %s -split-input-file --bt-verify-kv-lifetimes | FileCheck %s

// Valid KV-cache lifetimes: the pass must accept every function unchanged
// (bt-opt fails, and so does this test, if it reports any diagnostic).

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

// CHECK-LABEL: func.func @straight_line
// CHECK:         %[[C0:.*]] = bt.kv_alloc
// CHECK:         %[[C1:.*]] = bt.kv_append %[[C0]][0]
// CHECK:         bt.kv_attend %{{.*}}, %[[C1]][0]
// CHECK:         bt.kv_length %[[C1]][0]
// CHECK:         bt.kv_release %[[C1]]
func.func @straight_line(%k: tensor<2x1x1x4xf32>, %q: tensor<2x1x1x4xf32>) -> tensor<2x1x1x4xf32> {
  %c0 = bt.kv_alloc : !c
  %c1 = bt.kv_append %c0[0], %k, %k : !c, tensor<2x1x1x4xf32>
  %o = bt.kv_attend %q, %c1[0] scale 0.5 : tensor<2x1x1x4xf32>, !c -> tensor<2x1x1x4xf32>
  %n = bt.kv_length %c1[0] : !c
  bt.kv_release %c1 : !c
  return %o : tensor<2x1x1x4xf32>
}

// -----

// Generation: a global cache with dynamic batch carried through the decode
// steps as an scf.for iter_arg, released after the loop.

!g = !bt.kv_cache<global, batch = ?, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

// CHECK-LABEL: func.func @generate
// CHECK:         %[[G:.*]] = bt.kv_alloc batch %{{.*}} : !bt.kv_cache<global, batch = ?
// CHECK:         %[[R:.*]]:2 = scf.for {{.*}} iter_args(%[[A:.*]] = %{{.*}}, %[[GC:.*]] = %[[G]])
// CHECK:           bt.kv_append %[[GC]][0]
// CHECK:           scf.yield
// CHECK:         bt.kv_release %[[R]]#1
func.func @generate(%n: index, %k: tensor<?x1x1x4xf32>, %q: tensor<?x1x1x4xf32>, %steps: index) -> tensor<?x1x1x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %g = bt.kv_alloc batch %n : !g
  %res:2 = scf.for %i = %c0 to %steps step %c1 iter_args(%acc = %q, %cache = %g) -> (tensor<?x1x1x4xf32>, !g) {
    %next = bt.kv_append %cache[0], %k, %k : !g, tensor<?x1x1x4xf32>
    %len = bt.kv_length %next[0] : !g
    %o = bt.kv_attend %acc, %next[0] scale 0.5 : tensor<?x1x1x4xf32>, !g -> tensor<?x1x1x4xf32>
    scf.yield %o, %next : tensor<?x1x1x4xf32>, !g
  }
  bt.kv_release %res#1 : !g
  return %res#0 : tensor<?x1x1x4xf32>
}

// -----

// Token decoder: one local cache per block, allocated and released inside
// the loop body, with an inner loop over the block's tokens that carries it.

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

// CHECK-LABEL: func.func @token_decoder_blocks
// CHECK:         scf.for
// CHECK:           %[[L:.*]] = bt.kv_alloc : !bt.kv_cache<local
// CHECK:           %[[T:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[L]])
// CHECK:           bt.kv_release %[[T]]
func.func @token_decoder_blocks(%k: tensor<2x1x1x4xf32>, %q: tensor<2x1x1x4xf32>, %blocks: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %b = %c0 to %blocks step %c1 {
    %l = bt.kv_alloc : !l
    %t = scf.for %j = %c0 to %c4 step %c1 iter_args(%lc = %l) -> (!l) {
      %l1 = bt.kv_append %lc[0], %k, %k : !l, tensor<2x1x1x4xf32>
      %o = bt.kv_attend %q, %l1[0] scale 0.5 : tensor<2x1x1x4xf32>, !l -> tensor<2x1x1x4xf32>
      scf.yield %l1 : !l
    }
    bt.kv_release %t : !l
  }
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

// CHECK-LABEL: func.func @if_both_release
// CHECK:         scf.if
// CHECK:           bt.kv_release
// CHECK:         } else {
// CHECK:           bt.kv_release
func.func @if_both_release(%p: i1, %k: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  scf.if %p {
    %c1 = bt.kv_append %c[0], %k, %k : !c, tensor<2x1x1x4xf32>
    bt.kv_release %c1 : !c
  } else {
    bt.kv_release %c : !c
  }
  return
}

// CHECK-LABEL: func.func @if_both_yield
// CHECK:         %[[R:.*]] = scf.if
// CHECK:         bt.kv_release %[[R]]
func.func @if_both_yield(%p: i1, %k: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  %r = scf.if %p -> (!c) {
    %c1 = bt.kv_append %c[0], %k, %k : !c, tensor<2x1x1x4xf32>
    scf.yield %c1 : !c
  } else {
    // A fresh cache replaces the old one on this path.
    bt.kv_release %c : !c
    %d = bt.kv_alloc : !c
    scf.yield %d : !c
  }
  bt.kv_release %r : !c
  return
}

// Reads in a branch without an else do not consume the cache.
// CHECK-LABEL: func.func @if_read_only
func.func @if_read_only(%p: i1, %q: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  scf.if %p {
    %o = bt.kv_attend %q, %c[0] scale 0.5 : tensor<2x1x1x4xf32>, !c -> tensor<2x1x1x4xf32>
    %n = bt.kv_length %c[0] : !c
  }
  bt.kv_release %c : !c
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

// CHECK-LABEL: func.func @while_carries_cache
// CHECK:         %[[W:.*]] = scf.while (%{{.*}} = %{{.*}}) : (!bt.kv_cache
// CHECK:           scf.condition
// CHECK:           bt.kv_append
// CHECK:           scf.yield
// CHECK:         bt.kv_release %[[W]]
func.func @while_carries_cache(%k: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  %w = scf.while (%a = %c) : (!c) -> !c {
    %n = bt.kv_length %a[0] : !c
    %c4 = arith.constant 4 : index
    %more = arith.cmpi ult, %n, %c4 : index
    scf.condition(%more) %a : !c
  } do {
  ^bb0(%b: !c):
    %b1 = bt.kv_append %b[0], %k, %k : !c, tensor<2x1x1x4xf32>
    scf.yield %b1 : !c
  }
  bt.kv_release %w : !c
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>
!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

// CHECK-LABEL: func.func @execute_region
// CHECK:         %[[R:.*]] = scf.execute_region -> !bt.kv_cache
// CHECK:           bt.kv_append
// CHECK:           scf.yield
// CHECK:         bt.kv_release %[[R]]
func.func @execute_region(%k: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  %r = scf.execute_region -> !c {
    %c1 = bt.kv_append %c[0], %k, %k : !c, tensor<2x1x1x4xf32>
    scf.yield %c1 : !c
  }
  bt.kv_release %r : !c
  return
}

// An execute_region with several blocks and exits that agree, and a local
// cache that lives and dies inside it.
// CHECK-LABEL: func.func @execute_region_multi_block
// CHECK:         scf.execute_region
// CHECK:           cf.cond_br
// CHECK:         ^bb1:
// CHECK:           scf.yield
// CHECK:         ^bb2:
// CHECK:           scf.yield
func.func @execute_region_multi_block(%p: i1, %k: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  scf.execute_region {
    %l = bt.kv_alloc : !l
    cf.cond_br %p, ^bb1, ^bb2
  ^bb1:
    bt.kv_release %l : !l
    bt.kv_release %c : !c
    scf.yield
  ^bb2:
    %l1 = bt.kv_append %l[0], %k, %k : !l, tensor<2x1x1x4xf32>
    bt.kv_release %l1 : !l
    bt.kv_release %c : !c
    scf.yield
  }
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

// CHECK-LABEL: func.func @cfg_both_release
// CHECK:         cf.cond_br
// CHECK:       ^bb1:
// CHECK:         bt.kv_release
// CHECK:       ^bb2:
// CHECK:         bt.kv_release
func.func @cfg_both_release(%p: i1, %k: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  cf.cond_br %p, ^bb1, ^bb2
^bb1:
  bt.kv_release %c : !c
  cf.br ^bb3
^bb2:
  %c1 = bt.kv_append %c[0], %k, %k : !c, tensor<2x1x1x4xf32>
  bt.kv_release %c1 : !c
  cf.br ^bb3
^bb3:
  return
}

// CHECK-LABEL: func.func @cfg_block_argument
// CHECK:         cf.cond_br %{{.*}}, ^bb1, ^bb2
// CHECK:       ^bb1:
// CHECK:         %[[C1:.*]] = bt.kv_append
// CHECK:         cf.br ^bb3(%[[C1]] : !bt.kv_cache
// CHECK:       ^bb2:
// CHECK:         cf.br ^bb3(%{{.*}} : !bt.kv_cache
// CHECK:       ^bb3(%[[M:[0-9a-z_]+]]: !bt.kv_cache
// CHECK:         bt.kv_release %[[M]]
func.func @cfg_block_argument(%p: i1, %k: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  cf.cond_br %p, ^bb1, ^bb2
^bb1:
  %c1 = bt.kv_append %c[0], %k, %k : !c, tensor<2x1x1x4xf32>
  cf.br ^bb3(%c1 : !c)
^bb2:
  cf.br ^bb3(%c : !c)
^bb3(%m: !c):
  bt.kv_release %m : !c
  return
}

// cf.cond_br passing caches directly as successor operands.
// CHECK-LABEL: func.func @cfg_cond_br_operands
// CHECK:         cf.cond_br %{{.*}}, ^bb1(%{{.*}} : !bt.kv_cache{{.*}}), ^bb2(%{{.*}} : !bt.kv_cache
func.func @cfg_cond_br_operands(%p: i1, %k: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  %c1 = bt.kv_append %c[0], %k, %k : !c, tensor<2x1x1x4xf32>
  cf.cond_br %p, ^bb1(%c1 : !c), ^bb2(%c1 : !c)
^bb1(%a: !c):
  bt.kv_release %a : !c
  return
^bb2(%b: !c):
  bt.kv_release %b : !c
  return
}

// cf.switch (any BranchOpInterface op) passing the cache to its successors.
// CHECK-LABEL: func.func @cfg_switch
// CHECK:         cf.switch
// CHECK:         default: ^bb1(%{{.*}} : !bt.kv_cache
// CHECK:         0: ^bb2(%{{.*}} : !bt.kv_cache
func.func @cfg_switch(%i: i32) {
  %c = bt.kv_alloc : !c
  cf.switch %i : i32, [
    default: ^bb1(%c : !c),
    0: ^bb2(%c : !c)
  ]
^bb1(%a: !c):
  bt.kv_release %a : !c
  return
^bb2(%b: !c):
  bt.kv_release %b : !c
  return
}

// An unstructured loop carrying the cache through a block argument.
// CHECK-LABEL: func.func @cfg_loop
// CHECK:       ^bb1(%[[H:[0-9a-z_]+]]: !bt.kv_cache
// CHECK:         bt.kv_length %[[H]]
// CHECK:       ^bb2:
// CHECK:         bt.kv_append %[[H]]
// CHECK:         cf.br ^bb1
// CHECK:       ^bb3:
// CHECK:         bt.kv_release %[[H]]
func.func @cfg_loop(%k: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  cf.br ^bb1(%c : !c)
^bb1(%h: !c):
  %n = bt.kv_length %h[0] : !c
  %c4 = arith.constant 4 : index
  %more = arith.cmpi ult, %n, %c4 : index
  cf.cond_br %more, ^bb2, ^bb3
^bb2:
  %h1 = bt.kv_append %h[0], %k, %k : !c, tensor<2x1x1x4xf32>
  cf.br ^bb1(%h1 : !c)
^bb3:
  bt.kv_release %h : !c
  return
}

// -----

!g = !bt.kv_cache<global, batch = ?, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

// A global cache may cross function boundaries: returned by one function,
// received as an argument (and consumed) by another, passed to a call.

// CHECK-LABEL: func.func @make_cache
// CHECK:         %[[G:.*]] = bt.kv_alloc
// CHECK:         return %[[G]]
func.func @make_cache(%n: index) -> !g {
  %g = bt.kv_alloc batch %n : !g
  return %g : !g
}

// CHECK-LABEL: func.func @prefill
// CHECK:         %[[G1:.*]] = bt.kv_append
// CHECK:         return %[[G1]]
func.func @prefill(%g: !g, %k: tensor<?x1x1x4xf32>) -> !g {
  %g1 = bt.kv_append %g[0], %k, %k : !g, tensor<?x1x1x4xf32>
  return %g1 : !g
}

// CHECK-LABEL: func.func @drop
// CHECK:         bt.kv_release
func.func @drop(%g: !g) {
  bt.kv_release %g : !g
  return
}

// CHECK-LABEL: func.func @caller
// CHECK:         %[[G:.*]] = call @make_cache
// CHECK:         %[[G1:.*]] = call @prefill(%[[G]]
// CHECK:         call @drop(%[[G1]])
func.func @caller(%n: index, %k: tensor<?x1x1x4xf32>) {
  %g = call @make_cache(%n) : (index) -> !g
  %g1 = call @prefill(%g, %k) : (!g, tensor<?x1x1x4xf32>) -> !g
  call @drop(%g1) : (!g) -> ()
  return
}

// -----

// bt.block_decoder with a cache consumes its cache operand and produces the
// next cache value: prefill, then decode steps in a loop.

!g = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>
#cfg = #bt.neox<hidden = 4, layers = 1, heads = 1, head_dim = 4, intermediate = 8, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>

bt.param @"bd.layers.0.input_layernorm.weight" : tensor<4xf32>
bt.param @"bd.layers.0.input_layernorm.bias" : tensor<4xf32>
bt.param @"bd.layers.0.post_attention_layernorm.weight" : tensor<4xf32>
bt.param @"bd.layers.0.post_attention_layernorm.bias" : tensor<4xf32>
bt.param @"bd.layers.0.attention.query_key_value.weight" : tensor<12x4xf32>
bt.param @"bd.layers.0.attention.query_key_value.bias" : tensor<12xf32>
bt.param @"bd.layers.0.attention.dense.weight" : tensor<4x4xf32>
bt.param @"bd.layers.0.attention.dense.bias" : tensor<4xf32>
bt.param @"bd.layers.0.mlp.dense_h_to_4h.weight" : tensor<8x4xf32>
bt.param @"bd.layers.0.mlp.dense_h_to_4h.bias" : tensor<8xf32>
bt.param @"bd.layers.0.mlp.dense_4h_to_h.weight" : tensor<4x8xf32>
bt.param @"bd.layers.0.mlp.dense_4h_to_h.bias" : tensor<4xf32>
bt.param @"bd.final_layer_norm.weight" : tensor<4xf32>
bt.param @"bd.final_layer_norm.bias" : tensor<4xf32>

// CHECK-LABEL: func.func @block_decoder_cache
// CHECK:         %[[G:.*]] = bt.kv_alloc
// CHECK:         %{{.*}}, %[[G1:.*]] = bt.block_decoder %{{.*}} cache %[[G]]
// CHECK:         %[[R:.*]]:2 = scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %[[GC:.*]] = %[[G1]])
// CHECK:           bt.block_decoder %{{.*}} cache %[[GC]]
// CHECK:         bt.kv_release %[[R]]#1
func.func @block_decoder_cache(%x: tensor<2x3x4xf32>, %steps: index) -> tensor<2x1x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %g = bt.kv_alloc : !g
  %ctx, %g1 = bt.block_decoder %x cache %g params "bd" config #cfg
      : tensor<2x3x4xf32>, !g -> tensor<2x3x4xf32>, !g
  %last = tensor.extract_slice %ctx[0, 2, 0] [2, 1, 4] [1, 1, 1] : tensor<2x3x4xf32> to tensor<2x1x4xf32>
  %r:2 = scf.for %i = %c0 to %steps step %c1 iter_args(%h = %last, %gc = %g1) -> (tensor<2x1x4xf32>, !g) {
    %h1, %gn = bt.block_decoder %h cache %gc params "bd" config #cfg
        : tensor<2x1x4xf32>, !g -> tensor<2x1x4xf32>, !g
    scf.yield %h1, %gn : tensor<2x1x4xf32>, !g
  }
  bt.kv_release %r#1 : !g
  return %r#0 : tensor<2x1x4xf32>
}

// -----

// A local cache may flow into nested regions, and be yielded out of an
// scf.if (or loop) nested inside the region that allocated it.

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

// CHECK-LABEL: func.func @local_yield_within_allocating_region
// CHECK:         scf.for
// CHECK:           %[[L:.*]] = bt.kv_alloc : !bt.kv_cache<local
// CHECK:           %[[R:.*]] = scf.if
// CHECK:             bt.kv_append %[[L]][0]
// CHECK:             scf.yield
// CHECK:           } else {
// CHECK:             scf.yield %[[L]]
// CHECK:           bt.kv_release %[[R]]
func.func @local_yield_within_allocating_region(%p: i1, %k: tensor<2x1x1x4xf32>, %blocks: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %b = %c0 to %blocks step %c1 {
    %l = bt.kv_alloc : !l
    %r = scf.if %p -> (!l) {
      %l1 = bt.kv_append %l[0], %k, %k : !l, tensor<2x1x1x4xf32>
      scf.yield %l1 : !l
    } else {
      scf.yield %l : !l
    }
    bt.kv_release %r : !l
  }
  return
}

// A local cache allocated at function level is carried through a loop and
// an scf.while (both nested in the function body) and released there.
// CHECK-LABEL: func.func @local_through_nested_loops
// CHECK:         %[[L:.*]] = bt.kv_alloc : !bt.kv_cache<local
// CHECK:         %[[F:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[L]])
// CHECK:         %[[W:.*]] = scf.while (%{{.*}} = %[[F]])
// CHECK:         bt.kv_release %[[W]]
func.func @local_through_nested_loops(%k: tensor<2x1x1x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %l = bt.kv_alloc : !l
  %f = scf.for %j = %c0 to %c4 step %c1 iter_args(%lc = %l) -> (!l) {
    %l1 = bt.kv_append %lc[0], %k, %k : !l, tensor<2x1x1x4xf32>
    scf.yield %l1 : !l
  }
  %w = scf.while (%a = %f) : (!l) -> !l {
    %n = bt.kv_length %a[0] : !l
    %more = arith.cmpi ult, %n, %c4 : index
    scf.condition(%more) %a : !l
  } do {
  ^bb0(%b: !l):
    %b1 = bt.kv_append %b[0], %k, %k : !l, tensor<2x1x1x4xf32>
    scf.yield %b1 : !l
  }
  bt.kv_release %w : !l
  return
}

// -----

// An scf.execute_region whose body never exits (an infinite loop) must not
// crash the pass; control never reaches the code after it.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

// CHECK-LABEL: func.func @execute_region_without_exit
// CHECK:         scf.execute_region
// CHECK:         bt.kv_release
func.func @execute_region_without_exit(%k: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  scf.execute_region {
    cf.br ^bb1
  ^bb1:
    cf.br ^bb1
  }
  bt.kv_release %c : !c
  return
}

// -----

// A local cache allocated in the function body flows through an scf.while
// and an scf.execute_region nested in an scf.if branch, and is yielded out of
// the branch: it never leaves the function body that allocated it.

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

// CHECK-LABEL: func.func @local_through_while_in_if
// CHECK:         %[[L:.*]] = bt.kv_alloc : !bt.kv_cache<local
// CHECK:         %[[R:.*]] = scf.if
// CHECK:           scf.while (%{{.*}} = %[[L]])
// CHECK:         bt.kv_release %[[R]]
func.func @local_through_while_in_if(%p: i1, %k: tensor<2x1x1x4xf32>) {
  %l = bt.kv_alloc : !l
  %r = scf.if %p -> (!l) {
    %w = scf.while (%a = %l) : (!l) -> !l {
      scf.condition(%p) %a : !l
    } do {
    ^bb0(%b: !l):
      %b1 = bt.kv_append %b[0], %k, %k : !l, tensor<2x1x1x4xf32>
      scf.yield %b1 : !l
    }
    scf.yield %w : !l
  } else {
    scf.yield %l : !l
  }
  bt.kv_release %r : !l
  return
}

// CHECK-LABEL: func.func @local_through_execute_region_in_if
// CHECK:         %[[L:.*]] = bt.kv_alloc : !bt.kv_cache<local
// CHECK:         %[[R:.*]] = scf.if
// CHECK:           scf.execute_region
// CHECK:             scf.yield %[[L]]
// CHECK:         bt.kv_release %[[R]]
func.func @local_through_execute_region_in_if(%p: i1) {
  %l = bt.kv_alloc : !l
  %r = scf.if %p -> (!l) {
    %e = scf.execute_region -> !l {
      scf.yield %l : !l
    }
    scf.yield %e : !l
  } else {
    scf.yield %l : !l
  }
  bt.kv_release %r : !l
  return
}

// CHECK-LABEL: func.func @local_through_block_arguments
// CHECK:         %[[L:.*]] = bt.kv_alloc : !bt.kv_cache<local
// CHECK:         %[[R:.*]] = scf.execute_region
// CHECK:           cf.br ^bb1(%[[L]] : !bt.kv_cache
// CHECK:         bt.kv_release %[[R]]
func.func @local_through_block_arguments(%p: i1, %k: tensor<2x1x1x4xf32>) {
  %l = bt.kv_alloc : !l
  %r = scf.execute_region -> !l {
    cf.br ^bb1(%l : !l)
  ^bb1(%x: !l):
    %n = bt.kv_length %x[0] : !l
    %c4 = arith.constant 4 : index
    %more = arith.cmpi ult, %n, %c4 : index
    cf.cond_br %more, ^bb2, ^bb3
  ^bb2:
    %x1 = bt.kv_append %x[0], %k, %k : !l, tensor<2x1x1x4xf32>
    cf.br ^bb1(%x1 : !l)
  ^bb3:
    scf.yield %x : !l
  }
  bt.kv_release %r : !l
  return
}
