// RUN: bt-opt %s -split-input-file --bt-verify-kv-lifetimes -verify-diagnostics

// Violations of the KV-cache lifetime rules (see bt-verify-kv-lifetimes in
// Passes.td), each reported at the offending op.

//===----------------------------------------------------------------------===//
// Linearity and use after release
//===----------------------------------------------------------------------===//

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @attend_after_release(%q: tensor<2x1x1x4xf32>) -> tensor<2x1x1x4xf32> {
  %c = bt.kv_alloc : !c
  // expected-note @+1 {{released here}}
  bt.kv_release %c : !c
  // expected-error @+1 {{'bt.kv_attend' uses a KV cache after it was released}}
  %o = bt.kv_attend %q, %c[0] scale 0.5 : tensor<2x1x1x4xf32>, !c -> tensor<2x1x1x4xf32>
  return %o : tensor<2x1x1x4xf32>
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @length_after_release() -> index {
  %c = bt.kv_alloc : !c
  // expected-note @+1 {{released here}}
  bt.kv_release %c : !c
  // expected-error @+1 {{'bt.kv_length' uses a KV cache after it was released}}
  %n = bt.kv_length %c[0] : !c
  return %n : index
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @double_release() {
  %c = bt.kv_alloc : !c
  // expected-note @+1 {{released here}}
  bt.kv_release %c : !c
  // expected-error @+1 {{KV cache released twice}}
  bt.kv_release %c : !c
  return
}

// -----

// Released on both branches of an scf.if, then released again after it.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @double_release_after_if(%p: i1) {
  %c = bt.kv_alloc : !c
  scf.if %p {
    // expected-note @+1 {{released here}}
    bt.kv_release %c : !c
  } else {
    bt.kv_release %c : !c
  }
  // expected-error @+1 {{KV cache released twice}}
  bt.kv_release %c : !c
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @attend_after_append(%k: tensor<2x1x1x4xf32>) -> tensor<2x1x1x4xf32> {
  %c0 = bt.kv_alloc : !c
  // expected-note @+1 {{consumed here}}
  %c1 = bt.kv_append %c0[0], %k, %k : !c, tensor<2x1x1x4xf32>
  // expected-error @+1 {{'bt.kv_attend' uses a KV cache after it was consumed by 'bt.kv_append' (use the value it returned)}}
  %o = bt.kv_attend %k, %c0[0] scale 0.5 : tensor<2x1x1x4xf32>, !c -> tensor<2x1x1x4xf32>
  bt.kv_release %c1 : !c
  return %o : tensor<2x1x1x4xf32>
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @append_twice_to_old_value(%k: tensor<2x1x1x4xf32>) {
  %c0 = bt.kv_alloc : !c
  // expected-note @+1 {{consumed here}}
  %c1 = bt.kv_append %c0[0], %k, %k : !c, tensor<2x1x1x4xf32>
  // expected-error @+1 {{'bt.kv_append' uses a KV cache after it was consumed by 'bt.kv_append' (use the value it returned)}}
  %c2 = bt.kv_append %c0[0], %k, %k : !c, tensor<2x1x1x4xf32>
  bt.kv_release %c1 : !c
  bt.kv_release %c2 : !c
  return
}

// -----

// The loop consumes its cache init; the old value is dead after the loop.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @release_init_after_for(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c = bt.kv_alloc : !c
  // expected-note @+1 {{consumed here}}
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%x = %c) -> (!c) {
    scf.yield %x : !c
  }
  bt.kv_release %r : !c
  // expected-error @+1 {{'bt.kv_release' uses a KV cache after it was consumed by 'scf.for' (use the value it returned)}}
  bt.kv_release %c : !c
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @read_init_after_for(%n: index) -> index {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c = bt.kv_alloc : !c
  // expected-note @+1 {{consumed here}}
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%x = %c) -> (!c) {
    scf.yield %x : !c
  }
  // expected-error @+1 {{'bt.kv_length' uses a KV cache after it was consumed by 'scf.for' (use the value it returned)}}
  %len = bt.kv_length %c[0] : !c
  bt.kv_release %r : !c
  return %len : index
}

// -----

!g = !bt.kv_cache<global, batch = ?, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func private @consume(!g)

func.func @use_after_call(%n: index) -> index {
  %g = bt.kv_alloc batch %n : !g
  // expected-note @+1 {{consumed here}}
  call @consume(%g) : (!g) -> ()
  // expected-error @+1 {{'bt.kv_length' uses a KV cache after it was consumed by 'func.call'}}
  %len = bt.kv_length %g[0] : !g
  return %len : index
}

// -----

!g = !bt.kv_cache<global, batch = ?, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func private @consume2(!g, !g)

func.func @same_cache_twice_to_call(%n: index) {
  %g = bt.kv_alloc batch %n : !g
  // expected-error @+2 {{'func.call' uses a KV cache after it was consumed by 'func.call'}}
  // expected-note @+1 {{consumed here}}
  call @consume2(%g, %g) : (!g, !g) -> ()
  return
}

// -----

// Yielding a cache out of a region consumes it; scf.yield returns nothing,
// so the message has no hint to use a returned value.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @release_after_execute_region_yield() {
  %c = bt.kv_alloc : !c
  %r = scf.execute_region -> !c {
    // expected-note @+1 {{consumed here}}
    scf.yield %c : !c
  }
  bt.kv_release %r : !c
  // expected-error-re @+1 {{{{^}}'bt.kv_release' uses a KV cache after it was consumed by 'scf.yield'{{$}}}}
  bt.kv_release %c : !c
  return
}

// -----

// The block decoder consumes its cache operand.

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

func.func @release_after_block_decoder(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %g = bt.kv_alloc : !g
  // expected-note @+1 {{consumed here}}
  %ctx, %g1 = bt.block_decoder %x cache %g params "bd" config #cfg
      : tensor<2x3x4xf32>, !g -> tensor<2x3x4xf32>, !g
  bt.kv_release %g1 : !g
  // expected-error @+1 {{'bt.kv_release' uses a KV cache after it was consumed by 'bt.block_decoder' (use the value it returned)}}
  bt.kv_release %g : !g
  return %ctx : tensor<2x3x4xf32>
}

//===----------------------------------------------------------------------===//
// Leaks
//===----------------------------------------------------------------------===//

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @leak_at_function_end(%k: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  // expected-note @+1 {{KV cache defined here}}
  %c1 = bt.kv_append %c[0], %k, %k : !c, tensor<2x1x1x4xf32>
  // expected-error @+1 {{KV cache is not released on this path: it is still live at the end of the function (leak)}}
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

// expected-note @+1 {{KV cache received here}}
func.func @leak_of_argument(%c: !c) {
  // expected-error @+1 {{KV cache is not released on this path: it is still live at the end of the function (leak)}}
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @leak_on_one_return(%p: i1) {
  // expected-note @+1 {{KV cache allocated here}}
  %c = bt.kv_alloc : !c
  cf.cond_br %p, ^bb1, ^bb2
^bb1:
  bt.kv_release %c : !c
  return
^bb2:
  // expected-error @+1 {{KV cache is not released on this path: it is still live at the end of the function (leak)}}
  return
}

// -----

// Released on the then-branch only: the else-branch leaks.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @if_leak_in_else(%p: i1) {
  %c = bt.kv_alloc : !c
  scf.if %p {
    // expected-note @+1 {{consumed here}}
    bt.kv_release %c : !c
  } else {
    // expected-error @+1 {{KV cache is still live at the end of this branch but is consumed on another path through the 'scf.if' (it leaks on this path)}}
    scf.yield
  }
  return
}

// -----

// Released on the else-branch only: the then-branch leaks.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @if_leak_in_then(%p: i1, %k: tensor<2x1x1x4xf32>) {
  %c = bt.kv_alloc : !c
  %r = scf.if %p -> (!c) {
    %d = bt.kv_alloc : !c
    // expected-error @+1 {{KV cache is still live at the end of this branch but is consumed on another path through the 'scf.if' (it leaks on this path)}}
    scf.yield %d : !c
  } else {
    // expected-note @+1 {{consumed here}}
    %c1 = bt.kv_append %c[0], %k, %k : !c, tensor<2x1x1x4xf32>
    scf.yield %c1 : !c
  }
  bt.kv_release %r : !c
  return
}

// -----

// The two exits of an scf.execute_region disagree on the outer cache.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @execute_region_exit_leak(%p: i1) {
  %c = bt.kv_alloc : !c
  scf.execute_region {
    cf.cond_br %p, ^bb1, ^bb2
  ^bb1:
    // expected-note @+1 {{consumed here}}
    bt.kv_release %c : !c
    scf.yield
  ^bb2:
    // expected-error @+1 {{KV cache is still live at this exit of the region but is consumed on another path through the 'scf.execute_region' (it leaks on this path)}}
    scf.yield
  }
  return
}

// -----

// A cache allocated in a branch and not released there.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @if_branch_local_leak(%p: i1) {
  scf.if %p {
    // expected-note @+1 {{KV cache allocated here}}
    %d = bt.kv_alloc : !c
    // expected-error @+1 {{KV cache is not released on this path: it is still live at the end of this 'scf.if' branch (leak)}}
    scf.yield
  }
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @if_consumed_in_then_without_else(%p: i1) {
  %c = bt.kv_alloc : !c
  // expected-error @+1 {{KV cache is consumed in the 'then' region of this 'scf.if', which has no 'else' region: it leaks when the condition is false}}
  scf.if %p {
    // expected-note @+1 {{consumed here}}
    bt.kv_release %c : !c
  }
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @for_consumes_outer_cache(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-note @+1 {{KV cache allocated here}}
  %c = bt.kv_alloc : !c
  scf.for %i = %c0 to %n step %c1 {
    // expected-error @+1 {{KV cache defined outside the 'scf.for' loop is consumed inside it, once per iteration; pass it through the loop-carried values instead}}
    bt.kv_release %c : !c
  }
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @for_body_leak(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    // expected-note @+1 {{KV cache allocated here}}
    %c = bt.kv_alloc : !c
    // expected-error @+1 {{KV cache is not released on this path: it is still live at the end of the 'scf.for' body (leak)}}
    scf.yield
  }
  return
}

// -----

// The body yields a fresh cache and drops the loop-carried one.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @for_iter_arg_leak(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c = bt.kv_alloc : !c
  // expected-note @+1 {{KV cache received here}}
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%x = %c) -> (!c) {
    %d = bt.kv_alloc : !c
    // expected-error @+1 {{KV cache is not released on this path: it is still live at the end of the 'scf.for' body (leak)}}
    scf.yield %d : !c
  }
  bt.kv_release %r : !c
  return
}

// -----

// Leaks along one edge of cf.cond_br. The edges into ^bb3 disagree; the
// error is at the branch of the edge that still holds the cache, whichever
// of the two edges the pass visits first.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @cond_br_leak_on_true_edge(%p: i1) {
  // expected-note @+1 {{KV cache allocated here}}
  %c = bt.kv_alloc : !c
  cf.cond_br %p, ^bb1, ^bb2
^bb1:
  // expected-error @+1 {{KV cache is not released on this path: it is still live on this edge into a successor block but not on another edge into that block (leak)}}
  cf.br ^bb3
^bb2:
  // expected-note @+1 {{consumed here}}
  bt.kv_release %c : !c
  cf.br ^bb3
^bb3:
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @cond_br_leak_on_false_edge(%p: i1) {
  // expected-note @+1 {{KV cache allocated here}}
  %c = bt.kv_alloc : !c
  cf.cond_br %p, ^bb1, ^bb2
^bb1:
  // expected-note @+1 {{consumed here}}
  bt.kv_release %c : !c
  cf.br ^bb3
^bb2:
  // expected-error @+1 {{KV cache is not released on this path: it is still live on this edge into a successor block but not on another edge into that block (leak)}}
  cf.br ^bb3
^bb3:
  return
}

// -----

// The cond_br itself is the leaking edge: the false successor is entered
// with the cache still live, the true one with it passed as an argument.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @cond_br_leaks_directly(%p: i1) {
  // expected-note @+1 {{KV cache allocated here}}
  %c = bt.kv_alloc : !c
  // expected-error @+1 {{KV cache is not released on this path: it is still live on this edge into a successor block but not on another edge into that block (leak)}}
  cf.cond_br %p, ^bb1, ^bb2
^bb1:
  // expected-note @+1 {{consumed here}}
  bt.kv_release %c : !c
  cf.br ^bb2
^bb2:
  return
}

// -----

// A cache allocated on one path only and not released before the join.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @cond_br_leak_of_path_allocation(%p: i1) {
  cf.cond_br %p, ^bb1, ^bb2
^bb1:
  // expected-note @+1 {{KV cache allocated here}}
  %c = bt.kv_alloc : !c
  // expected-error @+1 {{KV cache is not released on this path: it is still live on this edge into a successor block but not on another edge into that block (leak)}}
  cf.br ^bb3
^bb2:
  cf.br ^bb3
^bb3:
  return
}

// -----

// An unstructured loop whose body allocates a cache and keeps it on the back
// edge.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @cfg_loop_back_edge_leak(%p: i1) {
  cf.br ^bb1
^bb1:
  cf.cond_br %p, ^bb2, ^bb3
^bb2:
  // expected-note @+1 {{KV cache allocated here}}
  %c = bt.kv_alloc : !c
  // expected-error @+1 {{KV cache is not released on this path: it is still live on this edge into a successor block but not on another edge into that block (leak)}}
  cf.br ^bb1
^bb3:
  return
}

// -----

// An unstructured loop releasing a cache defined before it.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @cfg_loop_consumes_outer_cache(%p: i1) {
  // expected-note @+1 {{KV cache allocated here}}
  %c = bt.kv_alloc : !c
  cf.br ^bb1
^bb1:
  cf.cond_br %p, ^bb2, ^bb3
^bb2:
  // expected-error @+1 {{KV cache defined outside a loop is consumed inside it, once per iteration; pass it through the block arguments of the loop instead}}
  bt.kv_release %c : !c
  cf.br ^bb1
^bb3:
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @switch_leak_on_default(%i: i32) {
  // expected-note @+1 {{KV cache allocated here}}
  %c = bt.kv_alloc : !c
  cf.switch %i : i32, [
    // expected-error @-1 {{KV cache is not released on this path: it is still live on this edge into a successor block but not on another edge into that block (leak)}}
    default: ^bb2,
    0: ^bb1
  ]
^bb1:
  // expected-note @+1 {{consumed here}}
  bt.kv_release %c : !c
  cf.br ^bb2
^bb2:
  return
}

//===----------------------------------------------------------------------===//
// scf.while
//===----------------------------------------------------------------------===//

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @while_body_leak(%p: i1) {
  %c = bt.kv_alloc : !c
  %w = scf.while (%a = %c) : (!c) -> !c {
    scf.condition(%p) %a : !c
  } do {
  ^bb0(%b: !c):
    // expected-note @+1 {{KV cache allocated here}}
    %t = bt.kv_alloc : !c
    // expected-error @+1 {{KV cache is not released on this path: it is still live at the end of the 'scf.while' body (leak)}}
    scf.yield %b : !c
  }
  bt.kv_release %w : !c
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @while_condition_leak(%p: i1) {
  %c = bt.kv_alloc : !c
  %w = scf.while (%a = %c) : (!c) -> !c {
    // expected-note @+1 {{KV cache allocated here}}
    %t = bt.kv_alloc : !c
    // expected-error @+1 {{KV cache is not released on this path: it is still live at the end of the 'scf.while' condition region (leak)}}
    scf.condition(%p) %a : !c
  } do {
  ^bb0(%b: !c):
    scf.yield %b : !c
  }
  bt.kv_release %w : !c
  return
}

// -----

// The condition region forwards a fresh cache and drops the carried one.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @while_carried_leak(%p: i1) {
  %c = bt.kv_alloc : !c
  // expected-note @+1 {{KV cache received here}}
  %w = scf.while (%a = %c) : (!c) -> !c {
    %t = bt.kv_alloc : !c
    // expected-error @+1 {{KV cache is not released on this path: it is still live at the end of the 'scf.while' condition region (leak)}}
    scf.condition(%p) %t : !c
  } do {
  ^bb0(%b: !c):
    scf.yield %b : !c
  }
  bt.kv_release %w : !c
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @while_consumes_outer_cache(%p: i1) {
  // expected-note @+1 {{KV cache allocated here}}
  %c = bt.kv_alloc : !c
  scf.while : () -> () {
    scf.condition(%p)
  } do {
    // expected-error @+1 {{KV cache defined outside the 'scf.while' loop is consumed inside it, once per iteration; pass it through the loop-carried values instead}}
    bt.kv_release %c : !c
    scf.yield
  }
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @while_result_leak(%p: i1) {
  %c = bt.kv_alloc : !c
  // expected-note @+1 {{KV cache defined here}}
  %w = scf.while (%a = %c) : (!c) -> !c {
    scf.condition(%p) %a : !c
  } do {
  ^bb0(%b: !c):
    scf.yield %b : !c
  }
  // expected-error @+1 {{KV cache is not released on this path: it is still live at the end of the function (leak)}}
  return
}

//===----------------------------------------------------------------------===//
// Local caches stay local
//===----------------------------------------------------------------------===//

// -----

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

func.func @local_returned() -> !l {
  // expected-note @+1 {{KV cache allocated here}}
  %l = bt.kv_alloc : !l
  // expected-error @+1 {{local KV cache escapes the region it was allocated in: it is returned from the function}}
  return %l : !l
}

// -----

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

// expected-error @+1 {{a local KV cache cannot be a function argument: it lives for one block of the token decoder and is allocated inside it}}
func.func @local_argument(%l: !l) {
  bt.kv_release %l : !l
  return
}

// -----

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

func.func private @use_local(!l)

func.func @local_passed_to_call() {
  // expected-note @+1 {{KV cache allocated here}}
  %l = bt.kv_alloc : !l
  // expected-error @+1 {{local KV cache escapes the region it was allocated in: it is passed to a call}}
  call @use_local(%l) : (!l) -> ()
  return
}

// -----

// A callee cannot hand out a local cache either.

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

func.func private @make_local() -> !l

func.func @local_returned_by_call() {
  // expected-error @+1 {{local KV cache escapes the region it was allocated in: it is returned by a call}}
  %l = call @make_local() : () -> !l
  bt.kv_release %l : !l
  return
}

// -----

// A fresh local cache per iteration must not be carried to the next one.

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

func.func @local_yielded_from_for_body(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %l = bt.kv_alloc : !l
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%x = %l) -> (!l) {
    bt.kv_release %x : !l
    // expected-note @+1 {{KV cache allocated here}}
    %fresh = bt.kv_alloc : !l
    // expected-error @+1 {{local KV cache escapes the region it was allocated in (a local cache lives for one block of the token decoder)}}
    scf.yield %fresh : !l
  }
  bt.kv_release %r : !l
  return
}

// -----

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

func.func @local_yielded_from_if_branch(%p: i1) {
  %r = scf.if %p -> (!l) {
    // expected-note @+1 {{KV cache allocated here}}
    %a = bt.kv_alloc : !l
    // expected-error @+1 {{local KV cache escapes the region it was allocated in (a local cache lives for one block of the token decoder)}}
    scf.yield %a : !l
  } else {
    %b = bt.kv_alloc : !l
    scf.yield %b : !l
  }
  bt.kv_release %r : !l
  return
}

// -----

// Appending to a local cache keeps its origin: the appended value cannot
// escape either.

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

func.func @local_appended_escapes_execute_region(%k: tensor<2x1x1x4xf32>) {
  %r = scf.execute_region -> !l {
    %a = bt.kv_alloc : !l
    // expected-note @+1 {{KV cache defined here}}
    %a1 = bt.kv_append %a[0], %k, %k : !l, tensor<2x1x1x4xf32>
    // expected-error @+1 {{local KV cache escapes the region it was allocated in (a local cache lives for one block of the token decoder)}}
    scf.yield %a1 : !l
  }
  bt.kv_release %r : !l
  return
}

// -----

// A local cache allocated in the condition region of an scf.while escapes
// through scf.condition (it becomes the loop's result).

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

func.func @local_escapes_while_condition(%p: i1) {
  %w = scf.while : () -> !l {
    // expected-note @+1 {{KV cache allocated here}}
    %a = bt.kv_alloc : !l
    // expected-error @+1 {{local KV cache escapes the region it was allocated in (a local cache lives for one block of the token decoder)}}
    scf.condition(%p) %a : !l
  } do {
  ^bb0(%b: !l):
    bt.kv_release %b : !l
    scf.yield
  }
  bt.kv_release %w : !l
  return
}

// -----

// The scf.if result may hold the cache allocated in this iteration (else
// branch): yielding it to the next iteration lets it escape the loop body.

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

func.func @local_escapes_through_if_result(%p: i1, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = bt.kv_alloc : !l
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%x = %a) -> (!l) {
    %b = bt.kv_alloc : !l
    // expected-note @+1 {{KV cache defined here}}
    %s = scf.if %p -> (!l) {
      bt.kv_release %b : !l
      scf.yield %x : !l
    } else {
      bt.kv_release %x : !l
      scf.yield %b : !l
    }
    // expected-error @+1 {{local KV cache escapes the region it was allocated in (a local cache lives for one block of the token decoder)}}
    scf.yield %s : !l
  }
  bt.kv_release %r : !l
  return
}

// -----

// A loop that swaps its two carried local caches: after an odd number of
// iterations %r#0 holds %b, allocated inside the execute_region.

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

func.func @local_escapes_through_swapping_loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = bt.kv_alloc : !l
  %e = scf.execute_region -> !l {
    %b = bt.kv_alloc : !l
    // expected-note @+1 {{KV cache defined here}}
    %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%x = %a, %y = %b) -> (!l, !l) {
      scf.yield %y, %x : !l, !l
    }
    bt.kv_release %r#1 : !l
    // expected-error @+1 {{local KV cache escapes the region it was allocated in (a local cache lives for one block of the token decoder)}}
    scf.yield %r#0 : !l
  }
  bt.kv_release %e : !l
  return
}

// -----

// A block argument that receives a local cache allocated inside the
// execute_region on one edge (and an outer one on the other) cannot be
// yielded out of it.

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

func.func @local_escapes_through_block_argument(%p: i1) {
  %a = bt.kv_alloc : !l
  %r = scf.execute_region -> !l {
    cf.cond_br %p, ^bb1, ^bb2
  ^bb1:
    bt.kv_release %a : !l
    %b = bt.kv_alloc : !l
    cf.br ^bb3(%b : !l)
  ^bb2:
    cf.br ^bb3(%a : !l)
  // expected-note @+1 {{KV cache received here}}
  ^bb3(%x: !l):
    // expected-error @+1 {{local KV cache escapes the region it was allocated in (a local cache lives for one block of the token decoder)}}
    scf.yield %x : !l
  }
  bt.kv_release %r : !l
  return
}

// -----

// The same through the back edge of an unstructured loop: the loop header
// is entered with an outer cache but the back edge brings one allocated in
// the execute_region.

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 1, capacity = 6, head_dim = 4, f32>

func.func @local_escapes_through_loop_back_edge(%p: i1) {
  %a = bt.kv_alloc : !l
  %r = scf.execute_region -> !l {
    cf.br ^bb1(%a : !l)
  // expected-note @+1 {{KV cache received here}}
  ^bb1(%x: !l):
    cf.cond_br %p, ^bb2, ^bb3
  ^bb2:
    bt.kv_release %x : !l
    %b = bt.kv_alloc : !l
    cf.br ^bb1(%b : !l)
  ^bb3:
    // expected-error @+1 {{local KV cache escapes the region it was allocated in (a local cache lives for one block of the token decoder)}}
    scf.yield %x : !l
  }
  bt.kv_release %r : !l
  return
}

//===----------------------------------------------------------------------===//
// Caches used by other ops
//===----------------------------------------------------------------------===//

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @cast_of_cache() {
  %c = bt.kv_alloc : !c
  // expected-error @+1 {{'builtin.unrealized_conversion_cast' cannot use a !bt.kv_cache value: only bt KV-cache ops, control flow and calls may}}
  %i = builtin.unrealized_conversion_cast %c : !c to i64
  bt.kv_release %c : !c
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @select_of_caches(%p: i1) {
  %a = bt.kv_alloc : !c
  %b = bt.kv_alloc : !c
  // expected-error @+1 {{'arith.select' cannot use a !bt.kv_cache value: only bt KV-cache ops, control flow and calls may}}
  %s = arith.select %p, %a, %b : !c
  bt.kv_release %s : !c
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>
#id = affine_map<(d0) -> (d0)>

func.func @cache_inside_linalg(%t: tensor<4xf32>) -> tensor<4xf32> {
  %c = bt.kv_alloc : !c
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%t : tensor<4xf32>) outs(%t : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    // expected-error @+1 {{KV caches cannot be used inside 'linalg.generic': only scf.if/for/while/execute_region and branches between blocks carry cache lifetimes}}
    %n = bt.kv_length %c[0] : !c
    linalg.yield %in : f32
  } -> tensor<4xf32>
  bt.kv_release %c : !c
  return %r : tensor<4xf32>
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @cache_inside_index_switch(%i: index) {
  %c = bt.kv_alloc : !c
  %r = scf.index_switch %i -> !c
  case 0 {
    scf.yield %c : !c
  }
  default {
    // The default region is the op's first region: reported there.
    // expected-error @+1 {{KV caches cannot be used inside 'scf.index_switch': only scf.if/for/while/execute_region and branches between blocks carry cache lifetimes}}
    scf.yield %c : !c
  }
  bt.kv_release %r : !c
  return
}

// -----

// A cache must come from bt.kv_alloc, a KV-cache op, control flow or a call.

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @cache_from_cast(%i: i64) {
  // expected-error @+1 {{'builtin.unrealized_conversion_cast' cannot produce a !bt.kv_cache value: only bt.kv_alloc, bt KV-cache ops, control flow and calls may}}
  %c = builtin.unrealized_conversion_cast %i : i64 to !c
  bt.kv_release %c : !c
  return
}

// -----

!c = !bt.kv_cache<global, batch = 2, layers = 1, heads = 1, capacity = 8, head_dim = 4, f32>

func.func @cache_from_poison() {
  // expected-error @+1 {{'ub.poison' cannot produce a !bt.kv_cache value: only bt.kv_alloc, bt KV-cache ops, control flow and calls may}}
  %c = ub.poison : !c
  bt.kv_release %c : !c
  return
}
