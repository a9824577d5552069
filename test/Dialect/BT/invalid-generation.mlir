// RUN: bt-opt %s -split-input-file -verify-diagnostics

// Verifier errors of the dialect additions for generation: dynamic cache
// capacity, bt.kv_alloc's capacity operand, bt.block_decoder's positions,
// bt.token_decoder_step and bt.sample. One rule per case.

// A local cache (one block of the token decoder) has a static capacity.
// expected-error @+1 {{!bt.kv_cache: a local cache must have a static capacity (at most P + L_B entries)}}
func.func private @f(!bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>)

// -----

// A static capacity takes no capacity operand.
func.func @f(%n: index) {
  // expected-error @+1 {{'bt.kv_alloc' op capacity operand given for a cache type with static capacity 16}}
  %c = bt.kv_alloc capacity %n : !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 4, f32>
  return
}

// -----

// A dynamic capacity needs one.
func.func @f(%n: index) {
  // expected-error @+1 {{'bt.kv_alloc' op a cache type with dynamic capacity '?' requires a capacity operand}}
  %c = bt.kv_alloc batch %n : !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>
  return
}

// -----

// bt.block_decoder: positions are [B, N_blk].
#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x6x8xf32>, %p: tensor<6xi64>) {
  // expected-error @+1 {{'bt.block_decoder' op positions must have shape [2, 6], got [6]}}
  %y = bt.block_decoder %x positions %p params "gpt_neox" config #cfg : tensor<2x6x8xf32>, tensor<6xi64> -> tensor<2x6x8xf32>
  return
}

// -----

// ODS type constraint: positions are i32 / i64.
#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x6x8xf32>, %p: tensor<2x6xf32>) {
  // expected-error @+1 {{'bt.block_decoder' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2x6xf32>'}}
  %y = bt.block_decoder %x positions %p params "gpt_neox" config #cfg : tensor<2x6x8xf32>, tensor<2x6xf32> -> tensor<2x6x8xf32>
  return
}

// -----

// bt.block_decoder: a static block count above a static capacity cannot fit,
// a dynamic capacity is never exceeded statically.
#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
!g = !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 4, head_dim = 4, f32>
func.func @f(%x: tensor<2x6x8xf32>, %c: !g) {
  // expected-error @+1 {{'bt.block_decoder' op input has 6 blocks, more than the cache capacity (4)}}
  %y, %c1 = bt.block_decoder %x cache %c params "gpt_neox" config #cfg : tensor<2x6x8xf32>, !g -> tensor<2x6x8xf32>, !g
  return
}

// -----

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
!l = !bt.kv_cache<local, batch = ?, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>

// bt.token_decoder_step: input [B, S, T].
func.func @f(%x: tensor<2x8xf32>, %p: tensor<2xi64>, %c: !l) {
  // expected-error @+1 {{'bt.token_decoder_step' op input must be rank 3 [B, S, T], got rank 2}}
  %h, %c1 = bt.token_decoder_step %x, %p cache %c config #cfg params "token_decoder" : tensor<2x8xf32>, tensor<2xi64>, !l -> tensor<2x8xf32>, !l
  return
}

// -----

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
!l = !bt.kv_cache<local, batch = ?, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>

// The config's width is T.
func.func @f(%x: tensor<2x2x16xf32>, %p: tensor<2xi64>, %c: !l) {
  // expected-error @+1 {{'bt.token_decoder_step' op config hidden (8) must equal the token-decoder width T (16)}}
  %h, %c1 = bt.token_decoder_step %x, %p cache %c config #cfg params "token_decoder" : tensor<2x2x16xf32>, tensor<2xi64>, !l -> tensor<2x2x16xf32>, !l
  return
}

// -----

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
!l = !bt.kv_cache<local, batch = ?, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>

// One position per input.
func.func @f(%x: tensor<2x2x8xf32>, %p: tensor<3xi64>, %c: !l) {
  // expected-error @+1 {{'bt.token_decoder_step' op positions must have shape [2], got [3]}}
  %h, %c1 = bt.token_decoder_step %x, %p cache %c config #cfg params "token_decoder" : tensor<2x2x8xf32>, tensor<3xi64>, !l -> tensor<2x2x8xf32>, !l
  return
}

// -----

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
!g = !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>

// The token decoder's cache is local.
func.func @f(%x: tensor<2x2x8xf32>, %p: tensor<2xi64>, %c: !g) {
  // expected-error @+1 {{'bt.token_decoder_step' op the token decoder's cache must have 'local' scope, got 'global'}}
  %h, %c1 = bt.token_decoder_step %x, %p cache %c config #cfg params "token_decoder" : tensor<2x2x8xf32>, tensor<2xi64>, !g -> tensor<2x2x8xf32>, !g
  return
}

// -----

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
!l2 = !bt.kv_cache<local, batch = ?, layers = 2, heads = 2, capacity = 5, head_dim = 4, f32>

// The cache matches the config.
func.func @f(%x: tensor<2x2x8xf32>, %p: tensor<2xi64>, %c: !l2) {
  // expected-error @+1 {{'bt.token_decoder_step' op cache (layers = 2, heads = 2, head_dim = 4) does not match the config (layers = 1, heads = 2, head_dim = 4)}}
  %h, %c1 = bt.token_decoder_step %x, %p cache %c config #cfg params "token_decoder" : tensor<2x2x8xf32>, tensor<2xi64>, !l2 -> tensor<2x2x8xf32>, !l2
  return
}

// -----

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
!l3 = !bt.kv_cache<local, batch = 3, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>

// ... and the input's batch.
func.func @f(%x: tensor<2x2x8xf32>, %p: tensor<2xi64>, %c: !l3) {
  // expected-error @+1 {{'bt.token_decoder_step' op cache batch (3) does not match the input batch B (2)}}
  %h, %c1 = bt.token_decoder_step %x, %p cache %c config #cfg params "token_decoder" : tensor<2x2x8xf32>, tensor<2xi64>, !l3 -> tensor<2x2x8xf32>, !l3
  return
}

// -----

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
!l = !bt.kv_cache<local, batch = ?, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>

// A static number of inputs above the capacity cannot fit.
func.func @f(%x: tensor<2x6x8xf32>, %p: tensor<6xi64>, %c: !l) {
  // expected-error @+1 {{'bt.token_decoder_step' op input has 6 positions, more than the cache capacity (5)}}
  %h, %c1 = bt.token_decoder_step %x, %p cache %c config #cfg params "token_decoder" : tensor<2x6x8xf32>, tensor<6xi64>, !l -> tensor<2x6x8xf32>, !l
  return
}

// -----

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
!l = !bt.kv_cache<local, batch = ?, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>

// The stack's parameters are declared under {params}.gpt_neox.
func.func @f(%x: tensor<2x2x8xf32>, %p: tensor<2xi64>, %c: !l) {
  // expected-error @+1 {{'bt.token_decoder_step' op expects parameter @"token_decoder.gpt_neox.layers.0.input_layernorm.weight" of shape [8], but no bt.param of that name is declared}}
  %h, %c1 = bt.token_decoder_step %x, %p cache %c config #cfg params "token_decoder" : tensor<2x2x8xf32>, tensor<2xi64>, !l -> tensor<2x2x8xf32>, !l
  return
}

// -----

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
!l = !bt.kv_cache<local, batch = ?, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>

// With every parameter declared, a well-formed step verifies (no error).
module {
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
  func.func @ok(%x: tensor<2x2x8xf32>, %p: tensor<2xi64>, %c: !l) -> (tensor<2x2x8xf32>, !l) {
    %h, %c1 = bt.token_decoder_step %x, %p cache %c config #cfg params "token_decoder" : tensor<2x2x8xf32>, tensor<2xi64>, !l -> tensor<2x2x8xf32>, !l
    return %h, %c1 : tensor<2x2x8xf32>, !l
  }
}

// -----

// bt.sample: logits [B, V].
func.func @f(%l: tensor<2x3x8xf32>, %s: i64) {
  // expected-error @+1 {{'bt.sample' op logits must be rank 2 [B, V], got rank 3}}
  %t = bt.sample %l, %s : tensor<2x3x8xf32> -> tensor<2xi64>
  return
}

// -----

// One token per row.
func.func @f(%l: tensor<2x8xf32>, %s: i64) {
  // expected-error @+1 {{'bt.sample' op result must have shape [2], got [3]}}
  %t = bt.sample %l, %s : tensor<2x8xf32> -> tensor<3xi64>
  return
}

// -----

// ODS type constraint: the sampler reads f32 logits.
func.func @f(%l: tensor<2x8xf16>, %s: i64) {
  // expected-error @+1 {{'bt.sample' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<2x8xf16>'}}
  %t = bt.sample %l, %s : tensor<2x8xf16> -> tensor<2xi64>
  return
}
