// RUN: bt-opt %s -split-input-file -verify-diagnostics --bt-lower-kv-caches

// bt-lower-kv-caches handles straight-line code and scf.for; other control
// flow and calls with caches are reported.

!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>
func.func @branch(%p: i1, %x: tensor<2x1x2x4xf32>) {
  %c = bt.kv_alloc : !l
  %r = scf.if %p -> (!l) {
    // expected-error @+1 {{'bt.kv_append' op uses a KV cache inside a 'scf.if'; bt-lower-kv-caches supports straight-line cache code and scf.for loops only}}
    %c1 = bt.kv_append %c[0], %x, %x : !l, tensor<2x1x2x4xf32>
    scf.yield %c1 : !l
  } else {
    scf.yield %c : !l
  }
  bt.kv_release %r : !l
  return
}

// -----

!g = !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>
// expected-error @+1 {{'func.func' op declares KV cache arguments or results; bt-lower-kv-caches does not lower calls}}
func.func private @callee(!g) -> !g
