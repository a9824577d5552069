// RUN: bt-opt %s -split-input-file -verify-diagnostics

// Verifier errors of the layer-level ops (bt.layer_norm, bt.linear, bt.gelu,
// bt.embedding_lookup, bt.prefix_projection, bt.split_qkv, bt.rotary,
// bt.attention, bt.local_attention, bt.fused_local_attention). One rule per
// case; shapes of a small Block Transformer (B = 2, N_blk = 6, D = T = 64,
// P = 2, H = 2, hd = 32, S = P + L_B - 1 = 5 in the token decoder).

//===----------------------------------------------------------------------===//
// bt.layer_norm
//===----------------------------------------------------------------------===//

func.func @f(%x: tensor<f32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'bt.layer_norm' op input must have rank >= 1 [..., C], got rank 0}}
  %y = bt.layer_norm %x, %w, %w eps 1.0e-05 : tensor<f32>, tensor<64xf32>, tensor<64xf32> -> tensor<f32>
  return
}

// -----

// weight is [C].
func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<32xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'bt.layer_norm' op weight must have shape [64], got [32]}}
  %y = bt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<2x6x64xf32>, tensor<32xf32>, tensor<64xf32> -> tensor<2x6x64xf32>
  return
}

// -----

// bias is [C].
func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<64xf32>, %b: tensor<1x64xf32>) {
  // expected-error @+1 {{'bt.layer_norm' op bias must have shape [64], got [1, 64]}}
  %y = bt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<2x6x64xf32>, tensor<64xf32>, tensor<1x64xf32> -> tensor<2x6x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'bt.layer_norm' op result type must equal the input type 'tensor<2x6x64xf32>'}}
  %y = bt.layer_norm %x, %w, %w eps 1.0e-05 : tensor<2x6x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<2x6x64xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<64xbf16>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'bt.layer_norm' op weight element type must be 'f32', got 'bf16'}}
  %y = bt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<2x6x64xf32>, tensor<64xbf16>, tensor<64xf32> -> tensor<2x6x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf16>) {
  // expected-error @+1 {{'bt.layer_norm' op bias element type must be 'f32', got 'f16'}}
  %y = bt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<2x6x64xf32>, tensor<64xf32>, tensor<64xf16> -> tensor<2x6x64xf32>
  return
}

// -----

// eps > 0.
func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'bt.layer_norm' op eps must be > 0, got 0}}
  %y = bt.layer_norm %x, %w, %w eps 0.0 : tensor<2x6x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<2x6x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.linear
//===----------------------------------------------------------------------===//

func.func @f(%x: tensor<f32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{'bt.linear' op input must have rank >= 1 [..., K], got rank 0}}
  %y = bt.linear %x, %w : tensor<f32>, tensor<64x64xf32> -> tensor<64xf32>
  return
}

// -----

// The weight is [N, K] or a Conv1d(k=1) [N, K, 1].
func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<128x64x2xf32>) {
  // expected-error @+1 {{'bt.linear' op weight must be [N, K] or [N, K, 1], got [128, 64, 2]}}
  %y = bt.linear %x, %w : tensor<2x6x64xf32>, tensor<128x64x2xf32> -> tensor<2x6x128xf32>
  return
}

// -----

// K of the input = K of the weight (PyTorch layout [out, in]).
func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<64x256xf32>) {
  // expected-error @+1 {{'bt.linear' op input features (64) must equal the weight's K (256)}}
  %y = bt.linear %x, %w : tensor<2x6x64xf32>, tensor<64x256xf32> -> tensor<2x6x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<192x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'bt.linear' op bias must have shape [192], got [64]}}
  %y = bt.linear %x, %w, %b : tensor<2x6x64xf32>, tensor<192x64xf32>, tensor<64xf32> -> tensor<2x6x192xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<192x64xf32>) {
  // expected-error @+1 {{'bt.linear' op result must have shape [2, 6, 192], got [2, 6, 64]}}
  %y = bt.linear %x, %w : tensor<2x6x64xf32>, tensor<192x64xf32> -> tensor<2x6x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<192x64xbf16>) {
  // expected-error @+1 {{'bt.linear' op weight element type must be 'f32', got 'bf16'}}
  %y = bt.linear %x, %w : tensor<2x6x64xf32>, tensor<192x64xbf16> -> tensor<2x6x192xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<192x64xf32>, %b: tensor<192xbf16>) {
  // expected-error @+1 {{'bt.linear' op bias element type must be 'f32', got 'bf16'}}
  %y = bt.linear %x, %w, %b : tensor<2x6x64xf32>, tensor<192x64xf32>, tensor<192xbf16> -> tensor<2x6x192xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x64xf32>, %w: tensor<192x64xf32>) {
  // expected-error @+1 {{'bt.linear' op result element type must be 'f32', got 'f16'}}
  %y = bt.linear %x, %w : tensor<2x6x64xf32>, tensor<192x64xf32> -> tensor<2x6x192xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.gelu
//===----------------------------------------------------------------------===//

// SameOperandsAndResultType (only expressible in generic form).
func.func @f(%x: tensor<2x6x256xf32>) {
  // expected-error @+1 {{'bt.gelu' op requires the same type for all operands and results}}
  %y = "bt.gelu"(%x) : (tensor<2x6x256xf32>) -> tensor<2x6x256xbf16>
  return
}

// -----

// ODS type constraint: activations are f32 / bf16 / f16 tensors.
func.func @f(%x: tensor<2x6x256xi32>) {
  // expected-error @+1 {{'bt.gelu' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<2x6x256xi32>'}}
  %y = bt.gelu %x : tensor<2x6x256xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.embedding_lookup
//===----------------------------------------------------------------------===//

func.func @f(%ids: tensor<2x6x4xi64>, %t: tensor<512x16x1xf32>) {
  // expected-error @+1 {{'bt.embedding_lookup' op table must be rank 2 [V, E], got rank 3}}
  %y = bt.embedding_lookup %ids, %t : tensor<2x6x4xi64>, tensor<512x16x1xf32> -> tensor<2x6x4x16xf32>
  return
}

// -----

// result = ids shape + [E] (no concatenation; that is bt.embedder).
func.func @f(%ids: tensor<2x6x4xi64>, %t: tensor<512x16xf32>) {
  // expected-error @+1 {{'bt.embedding_lookup' op result must have shape [2, 6, 4, 16], got [2, 6, 64]}}
  %y = bt.embedding_lookup %ids, %t : tensor<2x6x4xi64>, tensor<512x16xf32> -> tensor<2x6x64xf32>
  return
}

// -----

func.func @f(%ids: tensor<2x6x4xi64>, %t: tensor<512x16xf32>) {
  // expected-error @+1 {{'bt.embedding_lookup' op result element type must be 'f32', got 'bf16'}}
  %y = bt.embedding_lookup %ids, %t : tensor<2x6x4xi64>, tensor<512x16xf32> -> tensor<2x6x4x16xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.prefix_projection
//===----------------------------------------------------------------------===//

func.func @f(%c: tensor<f32>, %w: tensor<128x64x1xf32>, %b: tensor<128xf32>) {
  // expected-error @+1 {{'bt.prefix_projection' op context_embedding must have rank >= 1 [..., D], got rank 0}}
  %p = bt.prefix_projection %c, %w, %b prefix_length 2 : tensor<f32>, tensor<128x64x1xf32>, tensor<128xf32> -> tensor<2x64xf32>
  return
}

// -----

func.func @f(%c: tensor<2x6x64xf32>, %w: tensor<128x64x1xf32>, %b: tensor<128xf32>) {
  // expected-error @+1 {{'bt.prefix_projection' op result must have rank >= 2 [..., P, T], got rank 1}}
  %p = bt.prefix_projection %c, %w, %b prefix_length 2 : tensor<2x6x64xf32>, tensor<128x64x1xf32>, tensor<128xf32> -> tensor<128xf32>
  return
}

// -----

// Prefix length >= 1.
func.func @f(%c: tensor<2x6x64xf32>, %w: tensor<128x64x1xf32>, %b: tensor<128xf32>) {
  // expected-error @+1 {{'bt.prefix_projection' op prefix_length must be >= 1, got 0}}
  %p = bt.prefix_projection %c, %w, %b prefix_length 0 : tensor<2x6x64xf32>, tensor<128x64x1xf32>, tensor<128xf32> -> tensor<2x6x0x64xf32>
  return
}

// -----

// result = [..., P, T] with P = prefix_length.
func.func @f(%c: tensor<2x6x64xf32>, %w: tensor<128x64x1xf32>, %b: tensor<128xf32>) {
  // expected-error @+1 {{'bt.prefix_projection' op result must have shape [2, 6, 2, 32], got [2, 6, 4, 32]}}
  %p = bt.prefix_projection %c, %w, %b prefix_length 2 : tensor<2x6x64xf32>, tensor<128x64x1xf32>, tensor<128xf32> -> tensor<2x6x4x32xf32>
  return
}

// -----

// The weight is a Conv1d(k=1) [P*T, D, 1] or a Linear [P*T, D].
func.func @f(%c: tensor<2x6x64xf32>, %w: tensor<128x64x1x1xf32>, %b: tensor<128xf32>) {
  // expected-error @+1 {{'bt.prefix_projection' op weight must be [P*T, D, 1] (Conv1d) or [P*T, D], got [128, 64, 1, 1]}}
  %p = bt.prefix_projection %c, %w, %b prefix_length 2 : tensor<2x6x64xf32>, tensor<128x64x1x1xf32>, tensor<128xf32> -> tensor<2x6x2x64xf32>
  return
}

// -----

// Weight rows = P * T (here 2 * 64).
func.func @f(%c: tensor<2x6x64xf32>, %w: tensor<64x64x1xf32>, %b: tensor<128xf32>) {
  // expected-error @+1 {{'bt.prefix_projection' op weight must have shape [128, 64, 1], got [64, 64, 1]}}
  %p = bt.prefix_projection %c, %w, %b prefix_length 2 : tensor<2x6x64xf32>, tensor<64x64x1xf32>, tensor<128xf32> -> tensor<2x6x2x64xf32>
  return
}

// -----

// Weight columns = D of the context embedding (2-D form).
func.func @f(%c: tensor<2x6x64xf32>, %w: tensor<128x96xf32>, %b: tensor<128xf32>) {
  // expected-error @+1 {{'bt.prefix_projection' op weight must have shape [128, 64], got [128, 96]}}
  %p = bt.prefix_projection %c, %w, %b prefix_length 2 : tensor<2x6x64xf32>, tensor<128x96xf32>, tensor<128xf32> -> tensor<2x6x2x64xf32>
  return
}

// -----

func.func @f(%c: tensor<2x6x64xf32>, %w: tensor<128x64x1xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'bt.prefix_projection' op bias must have shape [128], got [64]}}
  %p = bt.prefix_projection %c, %w, %b prefix_length 2 : tensor<2x6x64xf32>, tensor<128x64x1xf32>, tensor<64xf32> -> tensor<2x6x2x64xf32>
  return
}

// -----

func.func @f(%c: tensor<2x6x64xf32>, %w: tensor<128x64x1xbf16>, %b: tensor<128xf32>) {
  // expected-error @+1 {{'bt.prefix_projection' op weight element type must be 'f32', got 'bf16'}}
  %p = bt.prefix_projection %c, %w, %b prefix_length 2 : tensor<2x6x64xf32>, tensor<128x64x1xbf16>, tensor<128xf32> -> tensor<2x6x2x64xf32>
  return
}

// -----

func.func @f(%c: tensor<2x6x64xf32>, %w: tensor<128x64x1xf32>, %b: tensor<128xf16>) {
  // expected-error @+1 {{'bt.prefix_projection' op bias element type must be 'f32', got 'f16'}}
  %p = bt.prefix_projection %c, %w, %b prefix_length 2 : tensor<2x6x64xf32>, tensor<128x64x1xf32>, tensor<128xf16> -> tensor<2x6x2x64xf32>
  return
}

// -----

func.func @f(%c: tensor<2x6x64xf32>, %w: tensor<128x64x1xf32>, %b: tensor<128xf32>) {
  // expected-error @+1 {{'bt.prefix_projection' op result element type must be 'f32', got 'bf16'}}
  %p = bt.prefix_projection %c, %w, %b prefix_length 2 : tensor<2x6x64xf32>, tensor<128x64x1xf32>, tensor<128xf32> -> tensor<2x6x2x64xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.split_qkv
//===----------------------------------------------------------------------===//

func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{'bt.split_qkv' op qkv must have rank >= 1 [..., H*3*hd], got rank 0}}
  %q, %k, %v = bt.split_qkv %x heads 2 head_dim 32 : tensor<f32> -> tensor<2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x192xf32>) {
  // expected-error @+1 {{'bt.split_qkv' op heads and head_dim must be >= 1}}
  %q, %k, %v = bt.split_qkv %x heads 0 head_dim 32 : tensor<2x6x192xf32> -> tensor<2x6x0x32xf32>, tensor<2x6x0x32xf32>, tensor<2x6x0x32xf32>
  return
}

// -----

// Width rule: qkv width = 3 * heads * head_dim.
func.func @f(%x: tensor<2x6x192xf32>) {
  // expected-error @+1 {{'bt.split_qkv' op qkv last dim (192) must equal 3 * heads * head_dim (96)}}
  %q, %k, %v = bt.split_qkv %x heads 2 head_dim 16 : tensor<2x6x192xf32> -> tensor<2x6x2x16xf32>, tensor<2x6x2x16xf32>, tensor<2x6x2x16xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x192xf32>) {
  // expected-error @+1 {{'bt.split_qkv' op q must have shape [2, 6, 2, 32], got [2, 6, 64]}}
  %q, %k, %v = bt.split_qkv %x heads 2 head_dim 32 : tensor<2x6x192xf32> -> tensor<2x6x64xf32>, tensor<2x6x64xf32>, tensor<2x6x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x192xf32>) {
  // expected-error @+1 {{'bt.split_qkv' op q element type must be 'f32', got 'bf16'}}
  %q, %k, %v = bt.split_qkv %x heads 2 head_dim 32 : tensor<2x6x192xf32> -> tensor<2x6x2x32xbf16>, tensor<2x6x2x32xbf16>, tensor<2x6x2x32xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x6x192xf32>) {
  // expected-error @+1 {{'bt.split_qkv' op q, k and v must have the same type}}
  %q, %k, %v = bt.split_qkv %x heads 2 head_dim 32 : tensor<2x6x192xf32> -> tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>, tensor<2x6x32x2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.rotary
//===----------------------------------------------------------------------===//

func.func @f(%x: tensor<6x64xf32>, %p: tensor<6xi64>) {
  // expected-error @+1 {{'bt.rotary' op input must have rank >= 3 [..., S, H, hd], got rank 2}}
  %y = bt.rotary %x, %p rotary_dims 8 base 10000.0 : tensor<6x64xf32>, tensor<6xi64> -> tensor<6x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x2x32xf32>, %p: tensor<6xi64>) {
  // expected-error @+1 {{'bt.rotary' op result type must equal the input type 'tensor<2x6x2x32xf32>'}}
  %y = bt.rotary %x, %p rotary_dims 8 base 10000.0 : tensor<2x6x2x32xf32>, tensor<6xi64> -> tensor<2x6x64xf32>
  return
}

// -----

// Rotary dims even.
func.func @f(%x: tensor<2x6x2x32xf32>, %p: tensor<6xi64>) {
  // expected-error @+1 {{'bt.rotary' op rotary_dims (7) must be even, > 0 and <= head_dim (32)}}
  %y = bt.rotary %x, %p rotary_dims 7 base 10000.0 : tensor<2x6x2x32xf32>, tensor<6xi64> -> tensor<2x6x2x32xf32>
  return
}

// -----

// Rotary dims > 0 (an op that rotates nothing should not exist).
func.func @f(%x: tensor<2x6x2x32xf32>, %p: tensor<6xi64>) {
  // expected-error @+1 {{'bt.rotary' op rotary_dims (0) must be even, > 0 and <= head_dim (32)}}
  %y = bt.rotary %x, %p rotary_dims 0 base 10000.0 : tensor<2x6x2x32xf32>, tensor<6xi64> -> tensor<2x6x2x32xf32>
  return
}

// -----

// Rotary dims <= hd.
func.func @f(%x: tensor<2x6x2x32xf32>, %p: tensor<6xi64>) {
  // expected-error @+1 {{'bt.rotary' op rotary_dims (64) must be even, > 0 and <= head_dim (32)}}
  %y = bt.rotary %x, %p rotary_dims 64 base 10000.0 : tensor<2x6x2x32xf32>, tensor<6xi64> -> tensor<2x6x2x32xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x2x32xf32>, %p: tensor<6xi64>) {
  // expected-error @+1 {{'bt.rotary' op rotary base must be > 0, got -1}}
  %y = bt.rotary %x, %p rotary_dims 8 base -1.0 : tensor<2x6x2x32xf32>, tensor<6xi64> -> tensor<2x6x2x32xf32>
  return
}

// -----

// Positions are [S] or the leading dims up to S.
func.func @f(%x: tensor<2x6x2x32xf32>, %p: tensor<5xi64>) {
  // expected-error @+1 {{'bt.rotary' op positions must have shape [6] or [2, 6], got [5]}}
  %y = bt.rotary %x, %p rotary_dims 8 base 10000.0 : tensor<2x6x2x32xf32>, tensor<5xi64> -> tensor<2x6x2x32xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x5x2x32xf32>, %p: tensor<6x5xi64>) {
  // expected-error @+1 {{'bt.rotary' op positions must have shape [5] or [2, 6, 5], got [6, 5]}}
  %y = bt.rotary %x, %p rotary_dims 8 base 10000.0 : tensor<2x6x5x2x32xf32>, tensor<6x5xi64> -> tensor<2x6x5x2x32xf32>
  return
}

// -----

// ODS type constraint: positions are i32 / i64.
func.func @f(%x: tensor<2x6x2x32xf32>, %p: tensor<6xf32>) {
  // expected-error @+1 {{'bt.rotary' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<6xf32>'}}
  %y = bt.rotary %x, %p rotary_dims 8 base 10000.0 : tensor<2x6x2x32xf32>, tensor<6xf32> -> tensor<2x6x2x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.attention
//===----------------------------------------------------------------------===//

func.func @f(%q: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'bt.attention' op q must be rank 4 [B, S, H, hd], got rank 3}}
  %o = bt.attention %q, %q, %q scale 0.17677669529663687 : tensor<6x2x32xf32> -> tensor<6x2x32xf32>
  return
}

// -----

// key_mask is [B, S].
func.func @f(%q: tensor<2x6x2x32xf32>, %m: tensor<2x5xi64>) {
  // expected-error @+1 {{'bt.attention' op key_mask must have shape [2, 6], got [2, 5]}}
  %o = bt.attention %q, %q, %q key_mask %m scale 0.17677669529663687 : tensor<2x6x2x32xf32>, tensor<2x5xi64> -> tensor<2x6x2x32xf32>
  return
}

// -----

func.func @f(%q: tensor<2x6x2x32xf32>) {
  // expected-error @+1 {{'bt.attention' op scale must be > 0, got 0}}
  %o = bt.attention %q, %q, %q scale 0.0 : tensor<2x6x2x32xf32> -> tensor<2x6x2x32xf32>
  return
}

// -----

// AllTypesMatch<q, k, v, result> (only expressible in generic form).
func.func @f(%q: tensor<2x6x2x32xf32>, %k: tensor<2x5x2x32xf32>) {
  // expected-error @+1 {{'bt.attention' op failed to verify that all of {q, k, v, result} have same type}}
  %o = "bt.attention"(%q, %k, %k) <{scale = 0.17677669529663687 : f64}> : (tensor<2x6x2x32xf32>, tensor<2x5x2x32xf32>, tensor<2x5x2x32xf32>) -> tensor<2x6x2x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.local_attention
//===----------------------------------------------------------------------===//

func.func @f(%q: tensor<12x5x2x32xf32>) {
  // expected-error @+1 {{'bt.local_attention' op q must be rank 5 [B, N_blk, S, H, hd], got rank 4}}
  %o = bt.local_attention %q, %q, %q scale 0.17677669529663687 : tensor<12x5x2x32xf32> -> tensor<12x5x2x32xf32>
  return
}

// -----

// key_mask is [B, N_blk, S].
func.func @f(%q: tensor<2x6x5x2x32xf32>, %m: tensor<2x6xi1>) {
  // expected-error @+1 {{'bt.local_attention' op key_mask must have shape [2, 6, 5], got [2, 6]}}
  %o = bt.local_attention %q, %q, %q key_mask %m scale 0.17677669529663687 : tensor<2x6x5x2x32xf32>, tensor<2x6xi1> -> tensor<2x6x5x2x32xf32>
  return
}

// -----

func.func @f(%q: tensor<2x6x5x2x32xf32>) {
  // expected-error @+1 {{'bt.local_attention' op scale must be > 0, got -5.000000e-01}}
  %o = bt.local_attention %q, %q, %q scale -0.5 : tensor<2x6x5x2x32xf32> -> tensor<2x6x5x2x32xf32>
  return
}

// -----

// AllTypesMatch<q, k, v, result> (only expressible in generic form).
func.func @f(%q: tensor<2x6x5x2x32xf32>, %v: tensor<2x6x5x2x32xbf16>) {
  // expected-error @+1 {{'bt.local_attention' op failed to verify that all of {q, k, v, result} have same type}}
  %o = "bt.local_attention"(%q, %q, %v) <{scale = 0.17677669529663687 : f64}> : (tensor<2x6x5x2x32xf32>, tensor<2x6x5x2x32xf32>, tensor<2x6x5x2x32xbf16>) -> tensor<2x6x5x2x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.fused_local_attention
//===----------------------------------------------------------------------===//

func.func @f(%qkv: tensor<12x5x192xf32>, %p: tensor<5xi64>) {
  // expected-error @+1 {{'bt.fused_local_attention' op qkv must be rank 4 [B, N_blk, S, H*3*hd], got rank 3}}
  %o = bt.fused_local_attention %qkv, %p heads 2 head_dim 32 rotary_dims 8 base 10000.0 scale 0.17677669529663687 : tensor<12x5x192xf32>, tensor<5xi64> -> tensor<12x5x2x32xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x6x5x192xf32>, %p: tensor<5xi64>) {
  // expected-error @+1 {{'bt.fused_local_attention' op heads and head_dim must be >= 1}}
  %o = bt.fused_local_attention %qkv, %p heads 2 head_dim 0 rotary_dims 8 base 10000.0 scale 0.17677669529663687 : tensor<2x6x5x192xf32>, tensor<5xi64> -> tensor<2x6x5x2x0xf32>
  return
}

// -----

// Width rule: qkv width = 3 * heads * head_dim.
func.func @f(%qkv: tensor<2x6x5x192xf32>, %p: tensor<5xi64>) {
  // expected-error @+1 {{'bt.fused_local_attention' op qkv last dim (192) must equal 3 * heads * head_dim (288)}}
  %o = bt.fused_local_attention %qkv, %p heads 3 head_dim 32 rotary_dims 8 base 10000.0 scale 0.17677669529663687 : tensor<2x6x5x192xf32>, tensor<5xi64> -> tensor<2x6x5x3x32xf32>
  return
}

// -----

// Rotary dims even, > 0 and <= hd.
func.func @f(%qkv: tensor<2x6x5x192xf32>, %p: tensor<5xi64>) {
  // expected-error @+1 {{'bt.fused_local_attention' op rotary_dims (33) must be even, > 0 and <= head_dim (32)}}
  %o = bt.fused_local_attention %qkv, %p heads 2 head_dim 32 rotary_dims 33 base 10000.0 scale 0.17677669529663687 : tensor<2x6x5x192xf32>, tensor<5xi64> -> tensor<2x6x5x2x32xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x6x5x192xf32>, %p: tensor<5xi64>) {
  // expected-error @+1 {{'bt.fused_local_attention' op rotary base must be > 0, got 0}}
  %o = bt.fused_local_attention %qkv, %p heads 2 head_dim 32 rotary_dims 8 base 0.0 scale 0.17677669529663687 : tensor<2x6x5x192xf32>, tensor<5xi64> -> tensor<2x6x5x2x32xf32>
  return
}

// -----

// Positions are [S] or [B, N_blk, S].
func.func @f(%qkv: tensor<2x6x5x192xf32>, %p: tensor<2x6xi64>) {
  // expected-error @+1 {{'bt.fused_local_attention' op positions must have shape [5] or [2, 6, 5], got [2, 6]}}
  %o = bt.fused_local_attention %qkv, %p heads 2 head_dim 32 rotary_dims 8 base 10000.0 scale 0.17677669529663687 : tensor<2x6x5x192xf32>, tensor<2x6xi64> -> tensor<2x6x5x2x32xf32>
  return
}

// -----

// key_mask is [B, N_blk, S].
func.func @f(%qkv: tensor<2x6x5x192xf32>, %p: tensor<5xi64>, %m: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.fused_local_attention' op key_mask must have shape [2, 6, 5], got [2, 6, 4]}}
  %o = bt.fused_local_attention %qkv, %p key_mask %m heads 2 head_dim 32 rotary_dims 8 base 10000.0 scale 0.17677669529663687 : tensor<2x6x5x192xf32>, tensor<5xi64>, tensor<2x6x4xi64> -> tensor<2x6x5x2x32xf32>
  return
}

// -----

// result = [B, N_blk, S, H, hd].
func.func @f(%qkv: tensor<2x6x5x192xf32>, %p: tensor<5xi64>) {
  // expected-error @+1 {{'bt.fused_local_attention' op result must have shape [2, 6, 5, 2, 32], got [2, 6, 5, 64]}}
  %o = bt.fused_local_attention %qkv, %p heads 2 head_dim 32 rotary_dims 8 base 10000.0 scale 0.17677669529663687 : tensor<2x6x5x192xf32>, tensor<5xi64> -> tensor<2x6x5x64xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x6x5x192xbf16>, %p: tensor<5xi64>) {
  // expected-error @+1 {{'bt.fused_local_attention' op result element type must be 'bf16', got 'f32'}}
  %o = bt.fused_local_attention %qkv, %p heads 2 head_dim 32 rotary_dims 8 base 10000.0 scale 0.17677669529663687 : tensor<2x6x5x192xbf16>, tensor<5xi64> -> tensor<2x6x5x2x32xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x6x5x192xf32>, %p: tensor<5xi64>) {
  // expected-error @+1 {{'bt.fused_local_attention' op scale must be > 0, got 0}}
  %o = bt.fused_local_attention %qkv, %p heads 2 head_dim 32 rotary_dims 8 base 10000.0 scale 0.0 : tensor<2x6x5x192xf32>, tensor<5xi64> -> tensor<2x6x5x2x32xf32>
  return
}
