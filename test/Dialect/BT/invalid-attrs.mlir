// RUN: bt-opt %s -split-input-file -verify-diagnostics

// Parser and verifier errors of the bt attributes (#bt.neox, #bt<strategy>)
// and of the !bt.kv_cache type. One rule per case.

//===----------------------------------------------------------------------===//
// #bt.neox: NeoXConfigAttr::verify
//===----------------------------------------------------------------------===//

// hidden >= 1
// expected-error @+1 {{#bt.neox: 'hidden' must be >= 1, got 0}}
func.func private @f() attributes {c = #bt.neox<hidden = 0, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>}

// -----

// layers >= 1
// expected-error @+1 {{#bt.neox: 'layers' must be >= 1, got 0}}
func.func private @f() attributes {c = #bt.neox<hidden = 64, layers = 0, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>}

// -----

// heads >= 1
// expected-error @+1 {{#bt.neox: 'heads' must be >= 1, got -2}}
func.func private @f() attributes {c = #bt.neox<hidden = 64, layers = 1, heads = -2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>}

// -----

// head_dim >= 1
// expected-error @+1 {{#bt.neox: 'head_dim' must be >= 1, got 0}}
func.func private @f() attributes {c = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 0, intermediate = 256, rotary_dims = 0, rotary_base = 10000.0, eps = 1.0e-05>}

// -----

// intermediate >= 1
// expected-error @+1 {{#bt.neox: 'intermediate' must be >= 1, got 0}}
func.func private @f() attributes {c = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 0, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>}

// -----

// Width rule: heads * head_dim = hidden.
// expected-error @+1 {{#bt.neox: hidden (64) must equal heads (2) * head_dim (16)}}
func.func private @f() attributes {c = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 16, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>}

// -----

// Rotary dims must be even.
// expected-error @+1 {{#bt.neox: rotary_dims (7) must be even and in [0, head_dim = 32]}}
func.func private @f() attributes {c = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 7, rotary_base = 10000.0, eps = 1.0e-05>}

// -----

// Rotary dims must be <= head_dim.
// expected-error @+1 {{#bt.neox: rotary_dims (34) must be even and in [0, head_dim = 32]}}
func.func private @f() attributes {c = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 34, rotary_base = 10000.0, eps = 1.0e-05>}

// -----

// Rotary dims must be >= 0.
// expected-error @+1 {{#bt.neox: rotary_dims (-2) must be even and in [0, head_dim = 32]}}
func.func private @f() attributes {c = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = -2, rotary_base = 10000.0, eps = 1.0e-05>}

// -----

// RoPE base > 0.
// expected-error @+1 {{#bt.neox: rotary_base must be > 0}}
func.func private @f() attributes {c = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 0.0, eps = 1.0e-05>}

// -----

// LayerNorm eps > 0.
// expected-error @+1 {{#bt.neox: eps must be > 0}}
func.func private @f() attributes {c = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = -1.0e-05>}

// -----

//===----------------------------------------------------------------------===//
// #bt.neox: NeoXConfigAttr::parse
//===----------------------------------------------------------------------===//

// Fields are keyword = value, in the documented order.
// expected-error @+1 {{expected 'layers'}}
func.func private @f() attributes {c = #bt.neox<hidden = 64, heads = 2, layers = 1, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>}

// -----

// Float fields need a float literal (MLIR rejects decimal integers there).
// expected-error @+2 {{unexpected decimal integer literal for a floating point value}}
// expected-note @+1 {{add a trailing dot to make the literal a float}}
func.func private @f() attributes {c = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000, eps = 1.0e-05>}

// -----

//===----------------------------------------------------------------------===//
// #bt<strategy ...>
//===----------------------------------------------------------------------===//

// Only 'prefix' and 'summation' exist.
// expected-error @+2 {{expected ::bt::TokenDecoderStrategy to be one of: prefix, summation}}
// expected-error @+1 {{failed to parse BT_TokenDecoderStrategyAttr parameter 'value'}}
func.func private @f() attributes {s = #bt<strategy middle>}

// -----

//===----------------------------------------------------------------------===//
// !bt.kv_cache: KVCacheType::parse and KVCacheType::verify
//===----------------------------------------------------------------------===//

// Scope is 'global' or 'local'.
// expected-error @+1 {{expected cache scope 'global' or 'local', got 'shared'}}
func.func private @f(!bt.kv_cache<shared, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>)

// -----

// batch >= 1 or '?'.
// expected-error @+1 {{!bt.kv_cache: batch must be >= 1 or '?', got 0}}
func.func private @f(!bt.kv_cache<global, batch = 0, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>)

// -----

// layers >= 1
// expected-error @+1 {{!bt.kv_cache: layers must be >= 1, got 0}}
func.func private @f(!bt.kv_cache<global, batch = 2, layers = 0, heads = 2, capacity = 16, head_dim = 32, f32>)

// -----

// heads >= 1
// expected-error @+1 {{!bt.kv_cache: heads must be >= 1, got 0}}
func.func private @f(!bt.kv_cache<local, batch = ?, layers = 1, heads = 0, capacity = 6, head_dim = 32, f32>)

// -----

// capacity >= 1
// expected-error @+1 {{!bt.kv_cache: capacity must be >= 1, got 0}}
func.func private @f(!bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 0, head_dim = 32, f32>)

// -----

// head_dim >= 1
// expected-error @+1 {{!bt.kv_cache: head_dim must be >= 1, got -32}}
func.func private @f(!bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = -32, f32>)

// -----

// Element type f32, bf16 or f16.
// expected-error @+1 {{!bt.kv_cache: element type must be f32, bf16 or f16, got 'f64'}}
func.func private @f(!bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f64>)

// -----

// Element type must be a float type.
// expected-error @+1 {{!bt.kv_cache: element type must be f32, bf16 or f16, got 'i32'}}
func.func private @f(!bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, i32>)
