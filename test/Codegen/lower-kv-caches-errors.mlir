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

// -----

// A bf16 cache of f32 activations needs a target's mixed-precision attention
// (the CUDA target's kernels); the head loop computes in one type.
!g = !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 5, head_dim = 4, bf16>
func.func @bf16_cache(%x: tensor<2x1x2x4xf32>) -> tensor<2x1x2x4xf32> {
  %c = bt.kv_alloc : !g
  %c1 = bt.kv_append %c[0], %x, %x : !g, tensor<2x1x2x4xf32>
  // expected-error @+1 {{'bt.kv_attend' op attention over a 'bf16' KV cache of 'f32' queries is not supported by the target-neutral lowering (the CUDA target's attention kernels read bf16 caches, up to head dim 128; --dtype bf16 is for --target cuda)}}
  %o = bt.kv_attend %x, %c1[0] scale 5.000000e-01 : tensor<2x1x2x4xf32>, !g -> tensor<2x1x2x4xf32>
  bt.kv_release %c1 : !g
  return %o : tensor<2x1x2x4xf32>
}
