// RUN: bt-opt %s -split-input-file -verify-diagnostics

// Verifier, parser and symbol-use errors of the parameter and model-level ops
// (bt.param, bt.param_ref, bt.embedder, bt.block_decoder, bt.token_decoder,
// bt.lm_head, bt.cross_entropy). One rule per case; shapes of a small Block
// Transformer (B = 2, N_blk = 6, L_B = 4, E = 16, D = T = 64, P = 2, V = 512).

//===----------------------------------------------------------------------===//
// bt.param / bt.param_ref
//===----------------------------------------------------------------------===//

// Parameters are statically shaped.
// expected-error @+1 {{'bt.param' op parameter type must be statically shaped, got 'tensor<?x16xf32>'}}
bt.param @"embedder.embeddings.weight" : tensor<?x16xf32>

// -----

// ODS type constraint: parameters are f32 / bf16 / f16 tensors.
// expected-error @+1 {{'bt.param' op attribute 'type' failed to satisfy constraint: type attribute of ranked tensor of 32-bit float or bfloat16 type or 16-bit float values}}
bt.param @"embedder.embeddings.weight" : tensor<512x16xi32>

// -----

// bt.param_ref must name a bt.param ...
func.func @f() -> tensor<512x64xf32> {
  // expected-error @+1 {{'bt.param_ref' op '@token_decoder.embed_out.weight' does not name a bt.param}}
  %w = bt.param_ref @"token_decoder.embed_out.weight" : tensor<512x64xf32>
  return %w : tensor<512x64xf32>
}

// -----

// ... and not another kind of symbol.
func.func private @g()
func.func @f() -> tensor<512x64xf32> {
  // expected-error @+1 {{'bt.param_ref' op '@g' does not name a bt.param}}
  %w = bt.param_ref @g : tensor<512x64xf32>
  return %w : tensor<512x64xf32>
}

// -----

// The result type is the declared type.
// expected-note @+1 {{declared here}}
bt.param @"token_decoder.embed_out.weight" : tensor<512x64xf32>
func.func @f() -> tensor<512x64xbf16> {
  // expected-error @+1 {{'bt.param_ref' op result type 'tensor<512x64xbf16>' does not match the declared type 'tensor<512x64xf32>' of @token_decoder.embed_out.weight}}
  %w = bt.param_ref @"token_decoder.embed_out.weight" : tensor<512x64xbf16>
  return %w : tensor<512x64xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// bt.embedder
//===----------------------------------------------------------------------===//

func.func @f(%ids: tensor<2x24xi64>) {
  // expected-error @+1 {{'bt.embedder' op ids must be rank 3 [B, N_blk, L_B], got rank 2}}
  %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x24xi64> -> tensor<2x6x64xf32>
  return
}

// -----

func.func @f(%ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.embedder' op result must be rank 3 [B, N_blk, D], got rank 4}}
  %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x6x4xi64> -> tensor<2x6x4x16xf32>
  return
}

// -----

// Result [B, N_blk] = ids [B, N_blk].
func.func @f(%ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.embedder' op result must have the [B, N_blk] of ids [2, 6], got [2, 5]}}
  %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x6x4xi64> -> tensor<2x5x64xf32>
  return
}

// -----

func.func @f(%ids: tensor<2x6x?xi64>) {
  // expected-error @+1 {{'bt.embedder' op block length L_B and width D must be static}}
  %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x6x?xi64> -> tensor<2x6x64xf32>
  return
}

// -----

// An empty block (L_B = 0) is rejected (it used to divide by zero).
func.func @f(%ids: tensor<2x6x0xi64>) {
  // expected-error @+1 {{'bt.embedder' op block length L_B must be >= 1, got 0}}
  %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x6x0xi64> -> tensor<2x6x64xf32>
  return
}

// -----

func.func @f(%ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.embedder' op block width D (66) must be a multiple of the block length L_B (4)}}
  %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x6x4xi64> -> tensor<2x6x66xf32>
  return
}

// -----

// ODS type constraint: ids are i32 / i64.
func.func @f(%ids: tensor<2x6x4xf32>) {
  // expected-error @+1 {{'bt.embedder' op operand #0 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2x6x4xf32>'}}
  %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x6x4xf32> -> tensor<2x6x64xf32>
  return
}

// -----

// The table must be declared.
func.func @f(%ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.embedder' op table @embedder.embeddings.weight does not name a bt.param}}
  %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
  return
}

// -----

// Projection-layer embedder (projection_method: projection_layer): the
// projection and its bias come together.
func.func @f(%ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.embedder' op the projection-layer embedder needs both 'projection' [D, E, L_B] and 'bias' [D]}}
  %x = bt.embedder %ids table @"embedder.embeddings.weight" projection @"embedder.projection_layer.weight" : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
  return
}

// -----

// With a projection, D need not be a multiple of L_B, but the weight must be
// the Conv1d [D, E, L_B].
module {
  bt.param @"embedder.embeddings.weight" : tensor<512x16xf32>
  bt.param @"embedder.projection_layer.weight" : tensor<66x16x2xf32>
  bt.param @"embedder.projection_layer.bias" : tensor<66xf32>
  func.func @f(%ids: tensor<2x6x4xi64>) {
    // expected-error @+1 {{'bt.embedder' op projection @embedder.projection_layer.weight must be [D, E, L_B] = [66, 16, 4], got [66, 16, 2]}}
    %x = bt.embedder %ids table @"embedder.embeddings.weight" projection @"embedder.projection_layer.weight" bias @"embedder.projection_layer.bias" : tensor<2x6x4xi64> -> tensor<2x6x66xf32>
    return
  }
}

// -----

module {
  bt.param @"embedder.embeddings.weight" : tensor<512x16xf32>
  bt.param @"embedder.projection_layer.weight" : tensor<64x16x4xf32>
  bt.param @"embedder.projection_layer.bias" : tensor<32xf32>
  func.func @f(%ids: tensor<2x6x4xi64>) {
    // expected-error @+1 {{'bt.embedder' op bias @embedder.projection_layer.bias must be [D] = [64], got [32]}}
    %x = bt.embedder %ids table @"embedder.embeddings.weight" projection @"embedder.projection_layer.weight" bias @"embedder.projection_layer.bias" : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
    return
  }
}

// -----

module {
  bt.param @"embedder.embeddings.weight" : tensor<512x16xf32>
  // expected-note @+1 {{declared here}}
  bt.param @"embedder.projection_layer.weight" : tensor<64x64xf32>
  bt.param @"embedder.projection_layer.bias" : tensor<64xf32>
  func.func @f(%ids: tensor<2x6x4xi64>) {
    // expected-error @+1 {{'bt.embedder' op projection @embedder.projection_layer.weight must be rank 3 [D, E, L_B], got [64, 64]}}
    %x = bt.embedder %ids table @"embedder.embeddings.weight" projection @"embedder.projection_layer.weight" bias @"embedder.projection_layer.bias" : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
    return
  }
}

// -----

module {
  bt.param @"embedder.embeddings.weight" : tensor<512x16xf32>
  bt.param @"embedder.projection_layer.weight" : tensor<64x16x4xbf16>
  bt.param @"embedder.projection_layer.bias" : tensor<64xf32>
  func.func @f(%ids: tensor<2x6x4xi64>) {
    // expected-error @+1 {{'bt.embedder' op projection and bias must have the table's element type 'f32'}}
    %x = bt.embedder %ids table @"embedder.embeddings.weight" projection @"embedder.projection_layer.weight" bias @"embedder.projection_layer.bias" : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
    return
  }
}

// -----

module {
  bt.param @"embedder.embeddings.weight" : tensor<512x16xf32>
  bt.param @"embedder.projection_layer.weight" : tensor<64x16x4xf32>
  func.func @f(%ids: tensor<2x6x4xi64>) {
    // expected-error @+1 {{'bt.embedder' op bias @embedder.projection_layer.bias does not name a bt.param}}
    %x = bt.embedder %ids table @"embedder.embeddings.weight" projection @"embedder.projection_layer.weight" bias @"embedder.projection_layer.bias" : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
    return
  }
}

// -----

// expected-note @+1 {{declared here}}
bt.param @"embedder.embeddings.weight" : tensor<8192xf32>
func.func @f(%ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.embedder' op table @embedder.embeddings.weight must be rank 2 [V, E], got [8192]}}
  %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
  return
}

// -----

// Width rule: E * L_B = D.
bt.param @"embedder.embeddings.weight" : tensor<512x32xf32>
func.func @f(%ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.embedder' op embedder width E (32) * L_B (4) = 128 must equal the block width D (64)}}
  %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
  return
}

// -----

// The result has the table's element type.
bt.param @"embedder.embeddings.weight" : tensor<512x16xbf16>
func.func @f(%ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.embedder' op result element type must be 'bf16', got 'f32'}}
  %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.block_decoder: verifier
//===----------------------------------------------------------------------===//

#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<12x64xf32>) {
  // expected-error @+1 {{'bt.block_decoder' op input must be rank 3 [B, N_blk, D], got rank 2}}
  %y = bt.block_decoder %x params "block_decoder.gpt_neox" config #cfg : tensor<12x64xf32> -> tensor<12x64xf32>
  return
}

// -----

#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x6x64xf32>) {
  // expected-error @+1 {{'bt.block_decoder' op result type 'tensor<2x6x64xbf16>' must equal the input type 'tensor<2x6x64xf32>'}}
  %y = bt.block_decoder %x params "block_decoder.gpt_neox" config #cfg : tensor<2x6x64xf32> -> tensor<2x6x64xbf16>
  return
}

// -----

// Width rule: config hidden = D.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x6x96xf32>) {
  // expected-error @+1 {{'bt.block_decoder' op config hidden (64) must equal the block-decoder width D (96)}}
  %y = bt.block_decoder %x params "block_decoder.gpt_neox" config #cfg : tensor<2x6x96xf32> -> tensor<2x6x96xf32>
  return
}

// -----

// A dynamic D is printed as '?' (it used to print INT64_MIN).
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x6x?xf32>) {
  // expected-error @+1 {{'bt.block_decoder' op config hidden (64) must equal the block-decoder width D (?)}}
  %y = bt.block_decoder %x params "block_decoder.gpt_neox" config #cfg : tensor<2x6x?xf32> -> tensor<2x6x?xf32>
  return
}

// -----

// The block mask is [B, N_blk].
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x6x64xf32>, %m: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.block_decoder' op mask must have shape [2, 6], got [2, 6, 4]}}
  %y = bt.block_decoder %x mask %m params "block_decoder.gpt_neox" config #cfg : tensor<2x6x64xf32>, tensor<2x6x4xi64> -> tensor<2x6x64xf32>
  return
}

// -----

// ODS type constraint: masks are i1 / i32 / i64.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x6x64xf32>, %m: tensor<2x6xf32>) {
  // expected-error @+1 {{'bt.block_decoder' op operand #1 must be ranked tensor of 1-bit signless integer or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2x6xf32>'}}
  %y = bt.block_decoder %x mask %m params "block_decoder.gpt_neox" config #cfg : tensor<2x6x64xf32>, tensor<2x6xf32> -> tensor<2x6x64xf32>
  return
}

// -----

// A cache operand needs a cache result (only expressible in generic form).
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x1x64xf32>, %c: !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>) {
  // expected-error @+1 {{'bt.block_decoder' op a cache operand requires a cache result and vice versa}}
  %y = "bt.block_decoder"(%x, %c) <{config = #cfg, operandSegmentSizes = array<i32: 1, 0, 0, 1>, params = "block_decoder.gpt_neox"}> : (tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>) -> tensor<2x1x64xf32>
  return
}

// -----

// The block decoder's cache is global.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x1x64xf32>, %c: !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>) {
  // expected-error @+1 {{'bt.block_decoder' op the block decoder's cache must have 'global' scope, got 'local'}}
  %y, %c1 = bt.block_decoder %x cache %c params "block_decoder.gpt_neox" config #cfg
      : tensor<2x1x64xf32>, !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
      -> tensor<2x1x64xf32>, !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  return
}

// -----

// The returned cache has the operand's type.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x1x64xf32>, %c: !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>) {
  // expected-error @+1 {{'bt.block_decoder' op result cache type '!bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 32, head_dim = 32, f32>' must equal the operand cache type '!bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>'}}
  %y, %c1 = bt.block_decoder %x cache %c params "block_decoder.gpt_neox" config #cfg
      : tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
      -> tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 32, head_dim = 32, f32>
  return
}

// -----

// Cache type agreement: layers / heads / head_dim of the config.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x1x64xf32>, %c: !bt.kv_cache<global, batch = 2, layers = 2, heads = 2, capacity = 16, head_dim = 32, f32>) {
  // expected-error @+1 {{'bt.block_decoder' op cache (layers = 2, heads = 2, head_dim = 32) does not match the config (layers = 1, heads = 2, head_dim = 32)}}
  %y, %c1 = bt.block_decoder %x cache %c params "block_decoder.gpt_neox" config #cfg
      : tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 2, layers = 2, heads = 2, capacity = 16, head_dim = 32, f32>
      -> tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 2, layers = 2, heads = 2, capacity = 16, head_dim = 32, f32>
  return
}

// -----

// Cache type agreement: element type of the activations (or bf16 storage
// for f32 activations).
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x1x64xf32>, %c: !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f16>) {
  // expected-error @+1 {{'bt.block_decoder' op cache element type 'f16' does not match the activations' 'f32' (expected 'f32', or bf16 for f32 activations)}}
  %y, %c1 = bt.block_decoder %x cache %c params "block_decoder.gpt_neox" config #cfg
      : tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f16>
      -> tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f16>
  return
}

// -----

// Cache type agreement: batch.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x1x64xf32>, %c: !bt.kv_cache<global, batch = 4, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>) {
  // expected-error @+1 {{'bt.block_decoder' op cache batch (4) does not match the input batch B (2)}}
  %y, %c1 = bt.block_decoder %x cache %c params "block_decoder.gpt_neox" config #cfg
      : tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 4, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
      -> tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 4, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  return
}

// -----

// The new blocks must fit in the cache (as for bt.kv_append).
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x6x64xf32>, %c: !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = 4, head_dim = 32, f32>) {
  // expected-error @+1 {{'bt.block_decoder' op input has 6 blocks, more than the cache capacity (4)}}
  %y, %c1 = bt.block_decoder %x cache %c params "block_decoder.gpt_neox" config #cfg
      : tensor<2x6x64xf32>, !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = 4, head_dim = 32, f32>
      -> tensor<2x6x64xf32>, !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = 4, head_dim = 32, f32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.block_decoder: custom parser
//===----------------------------------------------------------------------===//

#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x6x64xf32>, %m: tensor<2x6xi64>) {
  // expected-error @+1 {{expected 2 operand types, got 1}}
  %y = bt.block_decoder %x mask %m params "block_decoder.gpt_neox" config #cfg : tensor<2x6x64xf32> -> tensor<2x6x64xf32>
  return
}

// -----

#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x1x64xf32>, %c: !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>) {
  // expected-error @+1 {{expected 2 result types, got 1}}
  %y = bt.block_decoder %x cache %c params "block_decoder.gpt_neox" config #cfg : tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32> -> tensor<2x1x64xf32>
  return
}

// -----

#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x6x64xf32>) {
  // expected-error @+1 {{expected 'config'}}
  %y = bt.block_decoder %x params "block_decoder.gpt_neox" : tensor<2x6x64xf32> -> tensor<2x6x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x64xf32>) {
  // A #bt.neox written in full right before `:` would take the type list as
  // its type: the attribute parser says so instead of a bare "expected ':'".
  // expected-error @+1 {{#bt.neox takes no type, got 'tensor<2x6x64xf32>'; if this is the op's type list, move the config before other keywords or use an alias}}
  %y = bt.block_decoder %x params "block_decoder.gpt_neox" config #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05> : tensor<2x6x64xf32> -> tensor<2x6x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.block_decoder: parameters (verifyParams)
//===----------------------------------------------------------------------===//

// Every parameter of the stack must be declared.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%x: tensor<2x6x64xf32>) {
  // expected-error @+1 {{'bt.block_decoder' op expects parameter @"block_decoder.gpt_neox.layers.0.input_layernorm.weight" of shape [64], but no bt.param of that name is declared}}
  %y = bt.block_decoder %x params "block_decoder.gpt_neox" config #cfg : tensor<2x6x64xf32> -> tensor<2x6x64xf32>
  return
}

// -----

// ... with the shape the config implies.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
// expected-note @+1 {{declared here}}
bt.param @"block_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<96xf32>
func.func @f(%x: tensor<2x6x64xf32>) {
  // expected-error @+1 {{'bt.block_decoder' op expects parameter @"block_decoder.gpt_neox.layers.0.input_layernorm.weight" of shape [64], but it is declared as [96]}}
  %y = bt.block_decoder %x params "block_decoder.gpt_neox" config #cfg : tensor<2x6x64xf32> -> tensor<2x6x64xf32>
  return
}

// -----

// ... and the element type of the activations.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
// expected-note @+1 {{declared here}}
bt.param @"block_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<64xbf16>
func.func @f(%x: tensor<2x6x64xf32>) {
  // expected-error @+1 {{'bt.block_decoder' op expects parameter @"block_decoder.gpt_neox.layers.0.input_layernorm.weight" of element type 'f32', but it is declared as 'bf16'}}
  %y = bt.block_decoder %x params "block_decoder.gpt_neox" config #cfg : tensor<2x6x64xf32> -> tensor<2x6x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.token_decoder
//===----------------------------------------------------------------------===//

#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%ctx: tensor<12x64xf32>, %ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.token_decoder' op context_embedding must be rank 3 [B, N_blk, D], got rank 2}}
  %h = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg strategy prefix prefix_length 2 : tensor<12x64xf32>, tensor<2x6x4xi64> -> tensor<2x6x4x64xf32>
  return
}

// -----

#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%ctx: tensor<2x6x64xf32>, %ids: tensor<2x24xi64>) {
  // expected-error @+1 {{'bt.token_decoder' op ids must be rank 3 [B, N_blk, L_B], got rank 2}}
  %h = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg strategy prefix prefix_length 2 : tensor<2x6x64xf32>, tensor<2x24xi64> -> tensor<2x6x4x64xf32>
  return
}

// -----

#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%ctx: tensor<2x6x64xf32>, %ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.token_decoder' op result must be rank 4 [B, N_blk, L_B, T], got rank 3}}
  %h = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg strategy prefix prefix_length 2 : tensor<2x6x64xf32>, tensor<2x6x4xi64> -> tensor<2x24x64xf32>
  return
}

// -----

// ids [B, N_blk] = context [B, N_blk].
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%ctx: tensor<2x5x64xf32>, %ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.token_decoder' op ids [2, 6, 4] must have the [B, N_blk] of the context [2, 5]}}
  %h = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg strategy prefix prefix_length 2 : tensor<2x5x64xf32>, tensor<2x6x4xi64> -> tensor<2x5x4x64xf32>
  return
}

// -----

// The token mask has the shape of ids.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%ctx: tensor<2x6x64xf32>, %ids: tensor<2x6x4xi64>, %m: tensor<2x6xi64>) {
  // expected-error @+1 {{'bt.token_decoder' op mask must have shape [2, 6, 4], got [2, 6]}}
  %h = bt.token_decoder %ctx, %ids mask %m params "token_decoder" config #cfg strategy prefix prefix_length 2 : tensor<2x6x64xf32>, tensor<2x6x4xi64>, tensor<2x6xi64> -> tensor<2x6x4x64xf32>
  return
}

// -----

// Width rule: the result width is the config's hidden T.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%ctx: tensor<2x6x64xf32>, %ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.token_decoder' op result must have shape [2, 6, 4, 64], got [2, 6, 4, 32]}}
  %h = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg strategy prefix prefix_length 2 : tensor<2x6x64xf32>, tensor<2x6x4xi64> -> tensor<2x6x4x32xf32>
  return
}

// -----

#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%ctx: tensor<2x6x64xf32>, %ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.token_decoder' op result element type must be 'f32', got 'f16'}}
  %h = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg strategy prefix prefix_length 2 : tensor<2x6x64xf32>, tensor<2x6x4xi64> -> tensor<2x6x4x64xf16>
  return
}

// -----

// Prefix length >= 1.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%ctx: tensor<2x6x64xf32>, %ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.token_decoder' op prefix_length must be >= 1, got 0}}
  %h = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg strategy prefix prefix_length 0 : tensor<2x6x64xf32>, tensor<2x6x4xi64> -> tensor<2x6x4x64xf32>
  return
}

// -----

#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%ctx: tensor<2x6x64xf32>, %ids: tensor<2x6x?xi64>) {
  // expected-error @+1 {{'bt.token_decoder' op block length L_B must be static}}
  %h = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg strategy prefix prefix_length 2 : tensor<2x6x64xf32>, tensor<2x6x?xi64> -> tensor<2x6x?x64xf32>
  return
}

// -----

// Summation projects one vector per token: prefix_length = L_B.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%ctx: tensor<2x6x64xf32>, %ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.token_decoder' op the summation strategy projects one vector per token: prefix_length (2) must equal the block length L_B (4)}}
  %h = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg strategy summation prefix_length 2 : tensor<2x6x64xf32>, tensor<2x6x4xi64> -> tensor<2x6x4x64xf32>
  return
}

// -----

// The token table [V, T] must be declared (V is free).
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
func.func @f(%ctx: tensor<2x6x64xf32>, %ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.token_decoder' op expects parameter @"token_decoder.gpt_neox.embed_in.weight" of shape [?, 64], but no bt.param of that name is declared}}
  %h = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg strategy prefix prefix_length 2 : tensor<2x6x64xf32>, tensor<2x6x4xi64> -> tensor<2x6x4x64xf32>
  return
}

// -----

// The expansion layer is a Conv1d D -> P*T: [P*T, D, 1] = [128, 64, 1] for
// P = 2. A checkpoint with P = 1 does not fit.
#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
bt.param @"token_decoder.gpt_neox.embed_in.weight" : tensor<512x64xf32>
bt.param @"token_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<64xf32>
bt.param @"token_decoder.gpt_neox.layers.0.input_layernorm.bias" : tensor<64xf32>
bt.param @"token_decoder.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
bt.param @"token_decoder.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<64xf32>
bt.param @"token_decoder.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<192x64xf32>
bt.param @"token_decoder.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<192xf32>
bt.param @"token_decoder.gpt_neox.layers.0.attention.dense.weight" : tensor<64x64xf32>
bt.param @"token_decoder.gpt_neox.layers.0.attention.dense.bias" : tensor<64xf32>
bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<256x64xf32>
bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<256xf32>
bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<64x256xf32>
bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<64xf32>
bt.param @"token_decoder.gpt_neox.final_layer_norm.weight" : tensor<64xf32>
bt.param @"token_decoder.gpt_neox.final_layer_norm.bias" : tensor<64xf32>
// expected-note @+1 {{declared here}}
bt.param @"token_decoder.expansion_layer.weight" : tensor<64x64x1xf32>
bt.param @"token_decoder.expansion_layer.bias" : tensor<64xf32>
func.func @f(%ctx: tensor<2x6x64xf32>, %ids: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.token_decoder' op expects parameter @"token_decoder.expansion_layer.weight" of shape [128, 64, 1], but it is declared as [64, 64, 1]}}
  %h = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg strategy prefix prefix_length 2 : tensor<2x6x64xf32>, tensor<2x6x4xi64> -> tensor<2x6x4x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.lm_head
//===----------------------------------------------------------------------===//

func.func @f(%h: tensor<f32>) {
  // expected-error @+1 {{'bt.lm_head' op hidden must have rank >= 1 [..., T], got rank 0}}
  %l = bt.lm_head %h weight @"token_decoder.embed_out.weight" : tensor<f32> -> tensor<512xf32>
  return
}

// -----

func.func @f(%h: tensor<2x5x4x64xf32>) {
  // expected-error @+1 {{'bt.lm_head' op result [2, 20, 512] must have the leading dims of hidden [2, 5, 4, 64] and a last dim V}}
  %l = bt.lm_head %h weight @"token_decoder.embed_out.weight" : tensor<2x5x4x64xf32> -> tensor<2x20x512xf32>
  return
}

// -----

func.func @f(%h: tensor<2x5x4x64xf32>) {
  // expected-error @+1 {{'bt.lm_head' op result element type must be 'f32', got 'bf16'}}
  %l = bt.lm_head %h weight @"token_decoder.embed_out.weight" : tensor<2x5x4x64xf32> -> tensor<2x5x4x512xbf16>
  return
}

// -----

func.func @f(%h: tensor<2x5x4x64xf32>) {
  // expected-error @+1 {{'bt.lm_head' op weight @token_decoder.embed_out.weight does not name a bt.param}}
  %l = bt.lm_head %h weight @"token_decoder.embed_out.weight" : tensor<2x5x4x64xf32> -> tensor<2x5x4x512xf32>
  return
}

// -----

// expected-note @+1 {{declared here}}
bt.param @"token_decoder.embed_out.weight" : tensor<512x64x1xf32>
func.func @f(%h: tensor<2x5x4x64xf32>) {
  // expected-error @+1 {{'bt.lm_head' op weight @token_decoder.embed_out.weight must be rank 2 [V, T], got [512, 64, 1]}}
  %l = bt.lm_head %h weight @"token_decoder.embed_out.weight" : tensor<2x5x4x64xf32> -> tensor<2x5x4x512xf32>
  return
}

// -----

// The weight is [V, T] (PyTorch layout), not [T, V].
bt.param @"token_decoder.embed_out.weight" : tensor<64x512xf32>
func.func @f(%h: tensor<2x5x4x64xf32>) {
  // expected-error @+1 {{'bt.lm_head' op weight [64, 512] must be [V, T] with T = 64 and V = 512}}
  %l = bt.lm_head %h weight @"token_decoder.embed_out.weight" : tensor<2x5x4x64xf32> -> tensor<2x5x4x512xf32>
  return
}

// -----

// A dynamic T is printed as '?' (it used to print INT64_MIN).
bt.param @"token_decoder.embed_out.weight" : tensor<512x64xf32>
func.func @f(%h: tensor<2x?xf32>) {
  // expected-error @+1 {{'bt.lm_head' op weight [512, 64] must be [V, T] with T = ? and V = 500}}
  %l = bt.lm_head %h weight @"token_decoder.embed_out.weight" : tensor<2x?xf32> -> tensor<2x500xf32>
  return
}

// -----

bt.param @"token_decoder.embed_out.weight" : tensor<512x64xbf16>
func.func @f(%h: tensor<2x5x4x64xf32>) {
  // expected-error @+1 {{'bt.lm_head' op hidden element type must be 'bf16', got 'f32'}}
  %l = bt.lm_head %h weight @"token_decoder.embed_out.weight" : tensor<2x5x4x64xf32> -> tensor<2x5x4x512xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// bt.cross_entropy
//===----------------------------------------------------------------------===//

func.func @f(%logits: tensor<f32>, %labels: tensor<i64>) {
  // expected-error @+1 {{'bt.cross_entropy' op logits must have rank >= 1 [..., V], got rank 0}}
  %l = bt.cross_entropy %logits, %labels : tensor<f32>, tensor<i64> -> tensor<f32>
  return
}

// -----

// labels = logits without the last dim.
func.func @f(%logits: tensor<2x5x4x512xf32>, %labels: tensor<2x6x4xi64>) {
  // expected-error @+1 {{'bt.cross_entropy' op labels must have shape [2, 5, 4], got [2, 6, 4]}}
  %l = bt.cross_entropy %logits, %labels : tensor<2x5x4x512xf32>, tensor<2x6x4xi64> -> tensor<f32>
  return
}

// -----

// ODS type constraint: the loss is a 0-d f32 tensor.
func.func @f(%logits: tensor<2x5x4x512xf32>, %labels: tensor<2x5x4xi64>) {
  // expected-error @+1 {{'bt.cross_entropy' op result #0 must be 0D tensor of 32-bit float values, but got 'tensor<f16>'}}
  %l = bt.cross_entropy %logits, %labels : tensor<2x5x4x512xf32>, tensor<2x5x4xi64> -> tensor<f16>
  return
}
