// RUN: bt-opt %s --split-input-file --verify-diagnostics --bt-lower-kv-caches=device-cache-length=true

// One cache_length describes every layer: a returned cache whose layers
// were appended different numbers of entries has no such length.
!g = !bt.kv_cache<global, batch = 2, layers = 2, heads = 2, capacity = 8, head_dim = 4, f32>

func.func @uneven(%k1: tensor<2x1x2x4xf32>, %k2: tensor<2x2x2x4xf32>,
                  %c: !g {bt.inout, bt.name = "kv_cache"})
    -> (!g {bt.inout_arg = "kv_cache", bt.name = "kv_cache"}) {
  %c1 = bt.kv_append %c[0], %k1, %k1 : !g, tensor<2x1x2x4xf32>
  %c2 = bt.kv_append %c1[1], %k2, %k2 : !g, tensor<2x2x2x4xf32>
  // expected-error@+2 {{bt-lower-kv-caches: a returned KV cache whose layers have different lengths cannot keep one length on the device}}
  // expected-error@+1 {{failed to legalize operation 'func.return'}}
  return %c2 : !g
}
