// RUN: bt-opt %s -split-input-file -verify-diagnostics

// Verifier errors of the KV-cache ops (bt.kv_alloc, bt.kv_append,
// bt.kv_attend, bt.kv_length, bt.kv_release): cache type agreement of the
// keys, values and queries. One rule per case. Lifetime rules (linear use,
// release on every path) belong to bt-verify-kv-lifetimes, not to the op
// verifiers.

//===----------------------------------------------------------------------===//
// bt.kv_alloc
//===----------------------------------------------------------------------===//

// A static batch takes no batch operand.
func.func @f(%n: index) {
  // expected-error @+1 {{'bt.kv_alloc' op batch operand given for a cache type with static batch 2}}
  %c = bt.kv_alloc batch %n : !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>
  return
}

// -----

// A dynamic batch needs one.
func.func @f() {
  // expected-error @+1 {{'bt.kv_alloc' op a cache type with dynamic batch '?' requires a batch operand}}
  %c = bt.kv_alloc : !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.kv_append
//===----------------------------------------------------------------------===//

!local = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>

// 0 <= layer < layers.
func.func @f(%c: !local, %k: tensor<2x1x2x32xf32>) {
  // expected-error @+1 {{'bt.kv_append' op layer 1 is out of range for a cache of 1 layers}}
  %c1 = bt.kv_append %c[1], %k, %k : !local, tensor<2x1x2x32xf32>
  return
}

// -----

!local = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>

func.func @f(%c: !local, %k: tensor<2x1x2x32xf32>) {
  // expected-error @+1 {{'bt.kv_append' op layer -1 is out of range for a cache of 1 layers}}
  %c1 = bt.kv_append %c[-1], %k, %k : !local, tensor<2x1x2x32xf32>
  return
}

// -----

!local = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>

func.func @f(%c: !local, %k: tensor<2x1x64xf32>) {
  // expected-error @+1 {{'bt.kv_append' op key must be rank 4 [B, S, H, hd], got rank 3}}
  %c1 = bt.kv_append %c[0], %k, %k : !local, tensor<2x1x64xf32>
  return
}

// -----

!local = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>

// Keys have the cache's heads and head_dim ...
func.func @f(%c: !local, %k: tensor<2x1x4x16xf32>) {
  // expected-error @+1 {{'bt.kv_append' op key [2, 1, 4, 16] does not match the cache [B, S, H, hd] = [2, S, 2, 32]}}
  %c1 = bt.kv_append %c[0], %k, %k : !local, tensor<2x1x4x16xf32>
  return
}

// -----

!local = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>

// ... and its batch.
func.func @f(%c: !local, %k: tensor<4x1x2x32xf32>) {
  // expected-error @+1 {{'bt.kv_append' op key [4, 1, 2, 32] does not match the cache [B, S, H, hd] = [2, S, 2, 32]}}
  %c1 = bt.kv_append %c[0], %k, %k : !local, tensor<4x1x2x32xf32>
  return
}

// -----

!local = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>

// A static number of new entries above the capacity can never fit.
func.func @f(%c: !local, %k: tensor<2x7x2x32xf32>) {
  // expected-error @+1 {{'bt.kv_append' op key has 7 positions, more than the cache capacity (6)}}
  %c1 = bt.kv_append %c[0], %k, %k : !local, tensor<2x7x2x32xf32>
  return
}

// -----

!local = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>

func.func @f(%c: !local, %k: tensor<2x1x2x32xbf16>) {
  // expected-error @+1 {{'bt.kv_append' op key element type 'bf16' does not fit the cache's 'f32' (expected 'f32')}}
  %c1 = bt.kv_append %c[0], %k, %k : !local, tensor<2x1x2x32xbf16>
  return
}

// -----

!local = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>

// key_mask is [B, S] of the key.
func.func @f(%c: !local, %k: tensor<2x1x2x32xf32>, %m: tensor<2x5xi1>) {
  // expected-error @+1 {{'bt.kv_append' op key_mask must have shape [2, 1], got [2, 5]}}
  %c1 = bt.kv_append %c[0], %k, %k key_mask %m : !local, tensor<2x1x2x32xf32>, tensor<2x5xi1>
  return
}

// -----

!local = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>
!other = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 8, head_dim = 32, f32>

// AllTypesMatch<cache, result> (only expressible in generic form).
func.func @f(%c: !local, %k: tensor<2x1x2x32xf32>) {
  // expected-error @+1 {{'bt.kv_append' op failed to verify that all of {cache, result} have same type}}
  %c1 = "bt.kv_append"(%c, %k, %k) <{layer = 0 : i64}> : (!local, tensor<2x1x2x32xf32>, tensor<2x1x2x32xf32>) -> !other
  return
}

// -----

!local = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>

// AllTypesMatch<key, value> (only expressible in generic form).
func.func @f(%c: !local, %k: tensor<2x1x2x32xf32>, %v: tensor<2x2x2x32xf32>) {
  // expected-error @+1 {{'bt.kv_append' op failed to verify that all of {key, value} have same type}}
  %c1 = "bt.kv_append"(%c, %k, %v) <{layer = 0 : i64}> : (!local, tensor<2x1x2x32xf32>, tensor<2x2x2x32xf32>) -> !local
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.kv_attend
//===----------------------------------------------------------------------===//

!global = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, f32>

func.func @f(%c: !global, %q: tensor<2x1x2x32xf32>) {
  // expected-error @+1 {{'bt.kv_attend' op layer 2 is out of range for a cache of 2 layers}}
  %o = bt.kv_attend %q, %c[2] scale 0.17677669529663687 : tensor<2x1x2x32xf32>, !global -> tensor<2x1x2x32xf32>
  return
}

// -----

!global = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, f32>

func.func @f(%c: !global, %q: tensor<2x2x32xf32>) {
  // expected-error @+1 {{'bt.kv_attend' op query must be rank 4 [B, S, H, hd], got rank 3}}
  %o = bt.kv_attend %q, %c[0] scale 0.17677669529663687 : tensor<2x2x32xf32>, !global -> tensor<2x2x32xf32>
  return
}

// -----

!global = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, f32>

// Queries have the cache's heads and head_dim (dynamic batch matches any B).
func.func @f(%c: !global, %q: tensor<2x1x2x64xf32>) {
  // expected-error @+1 {{'bt.kv_attend' op query [2, 1, 2, 64] does not match the cache [B, S, H, hd] = [?, S, 2, 32]}}
  %o = bt.kv_attend %q, %c[0] scale 0.17677669529663687 : tensor<2x1x2x64xf32>, !global -> tensor<2x1x2x64xf32>
  return
}

// -----

!global = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, f32>

func.func @f(%c: !global, %q: tensor<2x17x2x32xf32>) {
  // expected-error @+1 {{'bt.kv_attend' op query has 17 positions, more than the cache capacity (16)}}
  %o = bt.kv_attend %q, %c[0] scale 0.17677669529663687 : tensor<2x17x2x32xf32>, !global -> tensor<2x17x2x32xf32>
  return
}

// -----

!global = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, f32>

func.func @f(%c: !global, %q: tensor<2x1x2x32xf16>) {
  // expected-error @+1 {{'bt.kv_attend' op query element type 'f16' does not fit the cache's 'f32' (expected 'f32')}}
  %o = bt.kv_attend %q, %c[0] scale 0.17677669529663687 : tensor<2x1x2x32xf16>, !global -> tensor<2x1x2x32xf16>
  return
}

// -----

!global = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, f32>

func.func @f(%c: !global, %q: tensor<2x1x2x32xf32>) {
  // expected-error @+1 {{'bt.kv_attend' op result type must equal the query type 'tensor<2x1x2x32xf32>'}}
  %o = bt.kv_attend %q, %c[0] scale 0.17677669529663687 : tensor<2x1x2x32xf32>, !global -> tensor<2x1x64xf32>
  return
}

// -----

!global = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, f32>

func.func @f(%c: !global, %q: tensor<2x1x2x32xf32>) {
  // expected-error @+1 {{'bt.kv_attend' op scale must be > 0, got 0}}
  %o = bt.kv_attend %q, %c[0] scale 0.0 : tensor<2x1x2x32xf32>, !global -> tensor<2x1x2x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.kv_length / bt.kv_release
//===----------------------------------------------------------------------===//

!global = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, f32>

func.func @f(%c: !global) {
  // expected-error @+1 {{'bt.kv_length' op layer 3 is out of range for a cache of 2 layers}}
  %n = bt.kv_length %c[3] : !global
  return
}

// -----

// ODS type constraint: the operand is a !bt.kv_cache.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'bt.kv_release' op operand #0 must be A key/value cache with an explicit, verified lifetime, but got 'tensor<4xf32>'}}
  "bt.kv_release"(%x) : (tensor<4xf32>) -> ()
  return
}

// -----

// A bf16 cache holds f32 keys (appends round), not f16 ones.
!global = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, bf16>

func.func @f(%c: !global, %k: tensor<2x1x2x32xf16>) {
  // expected-error @+1 {{'bt.kv_append' op key element type 'f16' does not fit the cache's 'bf16' (expected 'bf16' or f32)}}
  %c1 = bt.kv_append %c[0], %k, %k : !global, tensor<2x1x2x32xf16>
  return
}
