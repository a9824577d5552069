// Round trip of every bt op, attribute and type, in the pretty form and
// through the generic form. Shapes are those of a small Block Transformer
// (block_tiny with 1 layer): B = 2, N_blk = 6, L_B = 4, E = 16, D = T = 64,
// P = 2, V = 512, H = 2, hd = 32, I = 256, rotary_dims = 8 (25% of hd).

// RUN: bt-opt %s -split-input-file | bt-opt -split-input-file | FileCheck %s
// RUN: bt-opt %s -split-input-file --mlir-print-op-generic | bt-opt -split-input-file | FileCheck %s

//===----------------------------------------------------------------------===//
// Model level: parameters, embedder, block decoder, token decoder (prefix),
// LM head, cross-entropy. Every parameter the model-level ops verify is
// declared under its official checkpoint name.
//===----------------------------------------------------------------------===//

#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32,
                intermediate = 256, rotary_dims = 8, rotary_base = 10000.0,
                eps = 1.0e-05>

// Symbol names that are valid bare identifiers print without quotes.
// CHECK-LABEL: module
// CHECK:       bt.param @embedder.embeddings.weight : tensor<512x16xf32>
bt.param @"embedder.embeddings.weight" : tensor<512x16xf32>
// CHECK:       bt.param @block_decoder.gpt_neox.layers.0.input_layernorm.weight : tensor<64xf32>
// CHECK:       bt.param @block_decoder.gpt_neox.layers.0.attention.query_key_value.weight : tensor<192x64xf32>
// CHECK:       bt.param @block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight : tensor<64x256xf32>
// CHECK:       bt.param @block_decoder.gpt_neox.final_layer_norm.bias : tensor<64xf32>
bt.param @"block_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<64xf32>
bt.param @"block_decoder.gpt_neox.layers.0.input_layernorm.bias" : tensor<64xf32>
bt.param @"block_decoder.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
bt.param @"block_decoder.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<64xf32>
bt.param @"block_decoder.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<192x64xf32>
bt.param @"block_decoder.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<192xf32>
bt.param @"block_decoder.gpt_neox.layers.0.attention.dense.weight" : tensor<64x64xf32>
bt.param @"block_decoder.gpt_neox.layers.0.attention.dense.bias" : tensor<64xf32>
bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<256x64xf32>
bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<256xf32>
bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<64x256xf32>
bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<64xf32>
bt.param @"block_decoder.gpt_neox.final_layer_norm.weight" : tensor<64xf32>
bt.param @"block_decoder.gpt_neox.final_layer_norm.bias" : tensor<64xf32>
// CHECK:       bt.param @token_decoder.gpt_neox.embed_in.weight : tensor<512x64xf32>
// CHECK:       bt.param @token_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias : tensor<256xf32>
// CHECK:       bt.param @token_decoder.gpt_neox.final_layer_norm.weight : tensor<64xf32>
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
// Conv1d(k=1) weight D -> P*T: [P*T, D, 1].
// CHECK:       bt.param @token_decoder.expansion_layer.weight : tensor<128x64x1xf32>
// CHECK:       bt.param @token_decoder.expansion_layer.bias : tensor<128xf32>
bt.param @"token_decoder.expansion_layer.weight" : tensor<128x64x1xf32>
bt.param @"token_decoder.expansion_layer.bias" : tensor<128xf32>
// CHECK:       bt.param @token_decoder.embed_out.weight : tensor<512x64xf32>
bt.param @"token_decoder.embed_out.weight" : tensor<512x64xf32>
// A symbol name that needs quotes keeps them.
// CHECK:       bt.param @"needs quotes/0" : tensor<2x3xbf16>
bt.param @"needs quotes/0" : tensor<2x3xbf16>

// CHECK-LABEL: func.func @param_ref()
func.func @param_ref() -> (tensor<512x64xf32>, tensor<2x3xbf16>) {
  // CHECK: %[[W:.+]] = bt.param_ref @token_decoder.embed_out.weight : tensor<512x64xf32>
  %w = bt.param_ref @"token_decoder.embed_out.weight" : tensor<512x64xf32>
  // CHECK: %[[Q:.+]] = bt.param_ref @"needs quotes/0" : tensor<2x3xbf16>
  %q = bt.param_ref @"needs quotes/0" : tensor<2x3xbf16>
  // CHECK: return %[[W]], %[[Q]]
  return %w, %q : tensor<512x64xf32>, tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @embedder
// CHECK-SAME:  (%[[IDS:[^:]+]]: tensor<2x6x4xi64>, %[[IDS32:[^:]+]]: tensor<?x?x4xi32>)
func.func @embedder(%ids: tensor<2x6x4xi64>, %ids32: tensor<?x?x4xi32>)
    -> (tensor<2x6x64xf32>, tensor<?x?x64xf32>) {
  // CHECK: %[[X:.+]] = bt.embedder %[[IDS]] table @embedder.embeddings.weight : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
  %x = bt.embedder %ids table @"embedder.embeddings.weight"
         : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
  // Dynamic B and N_blk, i32 ids.
  // CHECK: %[[Y:.+]] = bt.embedder %[[IDS32]] table @embedder.embeddings.weight : tensor<?x?x4xi32> -> tensor<?x?x64xf32>
  %y = bt.embedder %ids32 table @"embedder.embeddings.weight"
         : tensor<?x?x4xi32> -> tensor<?x?x64xf32>
  // CHECK: return %[[X]], %[[Y]]
  return %x, %y : tensor<2x6x64xf32>, tensor<?x?x64xf32>
}

// CHECK-LABEL: func.func @block_decoder
// CHECK-SAME:  (%[[X:[^:]+]]: tensor<2x6x64xf32>, %[[M:[^:]+]]: tensor<2x6xi64>)
func.func @block_decoder(%x: tensor<2x6x64xf32>, %m: tensor<2x6xi64>)
    -> (tensor<2x6x64xf32>, tensor<2x6x64xf32>, tensor<2x6x64xf32>) {
  // Plain (training / eval) form.
  // CHECK:      %[[C0:.+]] = bt.block_decoder %[[X]]
  // CHECK-SAME:   config <hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 1.000000e+04, eps = 1.000000e-05> params "block_decoder.gpt_neox"
  // CHECK-SAME:   : tensor<2x6x64xf32> -> tensor<2x6x64xf32>
  %c0 = bt.block_decoder %x params "block_decoder.gpt_neox" config #cfg
          : tensor<2x6x64xf32> -> tensor<2x6x64xf32>
  // With a block attention mask and a discardable attribute.
  // CHECK:      %[[C1:.+]] = bt.block_decoder %[[X]] mask %[[M]]
  // CHECK-SAME:   config <hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 1.000000e+04, eps = 1.000000e-05> params "block_decoder.gpt_neox"
  // CHECK-SAME:   {bt.tag = "masked"} : tensor<2x6x64xf32>, tensor<2x6xi64> -> tensor<2x6x64xf32>
  %c1 = bt.block_decoder %x mask %m params "block_decoder.gpt_neox" config #cfg
          {bt.tag = "masked"} : tensor<2x6x64xf32>, tensor<2x6xi64> -> tensor<2x6x64xf32>
  // The printed order (config first) with the config written in full.
  // CHECK:      %[[C2:.+]] = bt.block_decoder %[[X]]
  // CHECK-SAME:   config <hidden = 64, layers = 1, {{.*}}> params "block_decoder.gpt_neox"
  %c2 = bt.block_decoder %x config #bt.neox<hidden = 64, layers = 1, heads = 2,
          head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0,
          eps = 1.0e-05> params "block_decoder.gpt_neox"
          : tensor<2x6x64xf32> -> tensor<2x6x64xf32>
  // CHECK: return %[[C0]], %[[C1]], %[[C2]]
  return %c0, %c1, %c2 : tensor<2x6x64xf32>, tensor<2x6x64xf32>, tensor<2x6x64xf32>
}

// The prefill / decode-block form: a global cache in, the updated cache out.
// CHECK-LABEL: func.func @block_decoder_cache
// CHECK-SAME:  (%[[X:[^:]+]]: tensor<2x1x64xf32>, %[[M:[^:]+]]: tensor<2x1xi1>, %[[N:[^:]+]]: index)
func.func @block_decoder_cache(%x: tensor<2x1x64xf32>, %m: tensor<2x1xi1>, %n: index)
    -> (tensor<2x1x64xf32>, tensor<2x1x64xf32>) {
  // CHECK: %[[G0:.+]] = bt.kv_alloc : !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  %g0 = bt.kv_alloc : !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  // CHECK:      %[[Y:.+]], %[[G1:.+]] = bt.block_decoder %[[X]] cache %[[G0]]
  // CHECK-SAME:   config <hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 1.000000e+04, eps = 1.000000e-05> params "block_decoder.gpt_neox"
  // CHECK-SAME:   : tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  // CHECK-SAME:   -> tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  %y, %g1 = bt.block_decoder %x cache %g0 params "block_decoder.gpt_neox" config #cfg
      : tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
      -> tensor<2x1x64xf32>, !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  // CHECK: bt.kv_release %[[G1]] : !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  bt.kv_release %g1 : !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  // Mask and cache together, dynamic batch.
  // CHECK: %[[D0:.+]] = bt.kv_alloc batch %[[N]] : !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  %d0 = bt.kv_alloc batch %n : !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  // CHECK:      %[[Z:.+]], %[[D1:.+]] = bt.block_decoder %[[X]] mask %[[M]] cache %[[D0]] config
  // CHECK-SAME:   params "block_decoder.gpt_neox"
  // CHECK-SAME:   : tensor<2x1x64xf32>, tensor<2x1xi1>, !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  // CHECK-SAME:   -> tensor<2x1x64xf32>, !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  %z, %d1 = bt.block_decoder %x mask %m cache %d0 params "block_decoder.gpt_neox" config #cfg
      : tensor<2x1x64xf32>, tensor<2x1xi1>, !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
      -> tensor<2x1x64xf32>, !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  // CHECK: bt.kv_release %[[D1]] : !bt.kv_cache<global, batch = ?,
  bt.kv_release %d1 : !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = 16, head_dim = 32, f32>
  // CHECK: return %[[Y]], %[[Z]]
  return %y, %z : tensor<2x1x64xf32>, tensor<2x1x64xf32>
}

// CHECK-LABEL: func.func @token_decoder_prefix
// CHECK-SAME:  (%[[CTX:[^:]+]]: tensor<2x6x64xf32>, %[[IDS:[^:]+]]: tensor<2x6x4xi64>, %[[M:[^:]+]]: tensor<2x6x4xi64>)
func.func @token_decoder_prefix(%ctx: tensor<2x6x64xf32>, %ids: tensor<2x6x4xi64>,
                                %m: tensor<2x6x4xi64>)
    -> (tensor<2x6x4x64xf32>, tensor<2x6x4x64xf32>) {
  // CHECK:      %[[H0:.+]] = bt.token_decoder %[[CTX]], %[[IDS]] params "token_decoder"
  // CHECK-SAME:   config <hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 1.000000e+04, eps = 1.000000e-05>
  // CHECK-SAME:   strategy prefix prefix_length 2 :
  // CHECK-SAME:   tensor<2x6x64xf32>, tensor<2x6x4xi64> -> tensor<2x6x4x64xf32>
  %h0 = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg
          strategy prefix prefix_length 2
          : tensor<2x6x64xf32>, tensor<2x6x4xi64> -> tensor<2x6x4x64xf32>
  // CHECK:      %[[H1:.+]] = bt.token_decoder %[[CTX]], %[[IDS]] mask %[[M]] params "token_decoder"
  // CHECK-SAME:   strategy prefix prefix_length 2 :
  // CHECK-SAME:   tensor<2x6x64xf32>, tensor<2x6x4xi64>, tensor<2x6x4xi64> -> tensor<2x6x4x64xf32>
  %h1 = bt.token_decoder %ctx, %ids mask %m params "token_decoder" config #cfg
          strategy prefix prefix_length 2
          : tensor<2x6x64xf32>, tensor<2x6x4xi64>, tensor<2x6x4xi64> -> tensor<2x6x4x64xf32>
  // CHECK: return %[[H0]], %[[H1]]
  return %h0, %h1 : tensor<2x6x4x64xf32>, tensor<2x6x4x64xf32>
}

// CHECK-LABEL: func.func @lm_head_and_loss
// CHECK-SAME:  (%[[H:[^:]+]]: tensor<2x5x4x64xf32>, %[[L:[^:]+]]: tensor<2x5x4xi64>, %[[L32:[^:]+]]: tensor<40xi32>)
func.func @lm_head_and_loss(%h: tensor<2x5x4x64xf32>, %labels: tensor<2x5x4xi64>,
                            %flat: tensor<40xi32>) -> (tensor<f32>, tensor<f32>) {
  // CHECK: %[[LOGITS:.+]] = bt.lm_head %[[H]] weight @token_decoder.embed_out.weight : tensor<2x5x4x64xf32> -> tensor<2x5x4x512xf32>
  %logits = bt.lm_head %h weight @"token_decoder.embed_out.weight"
              : tensor<2x5x4x64xf32> -> tensor<2x5x4x512xf32>
  // The default ignore_index (-100) is elided.
  // CHECK: %[[LOSS:.+]] = bt.cross_entropy %[[LOGITS]], %[[L]] : tensor<2x5x4x512xf32>, tensor<2x5x4xi64> -> tensor<f32>
  %loss = bt.cross_entropy %logits, %labels
            : tensor<2x5x4x512xf32>, tensor<2x5x4xi64> -> tensor<f32>
  // CHECK: %[[FLAT:.+]] = bt.lm_head %{{.+}} weight @token_decoder.embed_out.weight : tensor<40x64xf32> -> tensor<40x512xf32>
  %hflat = tensor.collapse_shape %h [[0, 1, 2], [3]] : tensor<2x5x4x64xf32> into tensor<40x64xf32>
  %lflat = bt.lm_head %hflat weight @"token_decoder.embed_out.weight"
             : tensor<40x64xf32> -> tensor<40x512xf32>
  // CHECK: %[[LOSS2:.+]] = bt.cross_entropy %[[FLAT]], %[[L32]] {ignore_index = 0 : i64} : tensor<40x512xf32>, tensor<40xi32> -> tensor<f32>
  %loss2 = bt.cross_entropy %lflat, %flat {ignore_index = 0 : i64}
             : tensor<40x512xf32>, tensor<40xi32> -> tensor<f32>
  // CHECK: return %[[LOSS]], %[[LOSS2]]
  return %loss, %loss2 : tensor<f32>, tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// Token decoder, summation strategy (MEGABYTE): prefix_length = L_B = 4, so
// the expansion layer is D -> L_B*T = 256.
//===----------------------------------------------------------------------===//

#cfg = #bt.neox<hidden = 64, layers = 1, heads = 2, head_dim = 32,
                intermediate = 256, rotary_dims = 8, rotary_base = 10000.0,
                eps = 1.0e-05>

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
bt.param @"token_decoder.expansion_layer.weight" : tensor<256x64x1xf32>
bt.param @"token_decoder.expansion_layer.bias" : tensor<256xf32>

// CHECK-LABEL: func.func @token_decoder_summation
// CHECK-SAME:  (%[[CTX:[^:]+]]: tensor<2x6x64xf32>, %[[IDS:[^:]+]]: tensor<2x6x4xi32>, %[[M:[^:]+]]: tensor<2x6x4xi1>)
func.func @token_decoder_summation(%ctx: tensor<2x6x64xf32>, %ids: tensor<2x6x4xi32>,
                                   %m: tensor<2x6x4xi1>)
    -> (tensor<2x6x4x64xf32>, tensor<2x6x4x64xf32>) {
  // CHECK:      %[[H0:.+]] = bt.token_decoder %[[CTX]], %[[IDS]] params "token_decoder"
  // CHECK-SAME:   config <hidden = 64, layers = 1, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 1.000000e+04, eps = 1.000000e-05>
  // CHECK-SAME:   strategy summation prefix_length 4 :
  // CHECK-SAME:   tensor<2x6x64xf32>, tensor<2x6x4xi32> -> tensor<2x6x4x64xf32>
  %h0 = bt.token_decoder %ctx, %ids params "token_decoder" config #cfg
          strategy summation prefix_length 4
          : tensor<2x6x64xf32>, tensor<2x6x4xi32> -> tensor<2x6x4x64xf32>
  // A non-default bos_token_id is printed in the attribute dictionary.
  // CHECK:      %[[H1:.+]] = bt.token_decoder %[[CTX]], %[[IDS]] mask %[[M]] params "token_decoder"
  // CHECK-SAME:   strategy summation prefix_length 4 {bos_token_id = 2 : i64} :
  // CHECK-SAME:   tensor<2x6x64xf32>, tensor<2x6x4xi32>, tensor<2x6x4xi1> -> tensor<2x6x4x64xf32>
  %h1 = bt.token_decoder %ctx, %ids mask %m params "token_decoder" config #cfg
          strategy summation prefix_length 4 {bos_token_id = 2 : i64}
          : tensor<2x6x64xf32>, tensor<2x6x4xi32>, tensor<2x6x4xi1> -> tensor<2x6x4x64xf32>
  // CHECK: return %[[H0]], %[[H1]]
  return %h0, %h1 : tensor<2x6x4x64xf32>, tensor<2x6x4x64xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Layer level: the ops the model-level ops decompose into.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME:  (%[[X:[^:]+]]: tensor<2x6x64xf32>, %[[W:[^:]+]]: tensor<64xf32>, %[[B:[^:]+]]: tensor<64xf32>, %[[H:[^:]+]]: tensor<5x64xbf16>, %[[HW:[^:]+]]: tensor<64xbf16>)
func.func @layer_norm(%x: tensor<2x6x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>,
                      %h: tensor<5x64xbf16>, %hw: tensor<64xbf16>)
    -> (tensor<2x6x64xf32>, tensor<5x64xbf16>) {
  // CHECK: %[[Y:.+]] = bt.layer_norm %[[X]], %[[W]], %[[B]] eps 1.000000e-05 : tensor<2x6x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<2x6x64xf32>
  %y = bt.layer_norm %x, %w, %b eps 1.0e-05
         : tensor<2x6x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<2x6x64xf32>
  // CHECK: %[[Z:.+]] = bt.layer_norm %[[H]], %[[HW]], %[[HW]] eps 1.000000e-03 : tensor<5x64xbf16>, tensor<64xbf16>, tensor<64xbf16> -> tensor<5x64xbf16>
  %z = bt.layer_norm %h, %hw, %hw eps 1.0e-03
         : tensor<5x64xbf16>, tensor<64xbf16>, tensor<64xbf16> -> tensor<5x64xbf16>
  // CHECK: return %[[Y]], %[[Z]]
  return %y, %z : tensor<2x6x64xf32>, tensor<5x64xbf16>
}

// CHECK-LABEL: func.func @linear
// CHECK-SAME:  (%[[X:[^:]+]]: tensor<2x6x64xf32>, %[[WQKV:[^:]+]]: tensor<192x64xf32>, %[[BQKV:[^:]+]]: tensor<192xf32>, %[[WD:[^:]+]]: tensor<64x64xf32>, %[[WE:[^:]+]]: tensor<128x64x1xf32>, %[[BE:[^:]+]]: tensor<128xf32>)
func.func @linear(%x: tensor<2x6x64xf32>, %wqkv: tensor<192x64xf32>, %bqkv: tensor<192xf32>,
                  %wd: tensor<64x64xf32>, %we: tensor<128x64x1xf32>, %be: tensor<128xf32>)
    -> (tensor<2x6x192xf32>, tensor<2x6x64xf32>, tensor<2x6x128xf32>, tensor<?x128xf32>) {
  // 2-D weight with bias (the fused QKV projection D -> 3D).
  // CHECK: %[[A:.+]] = bt.linear %[[X]], %[[WQKV]], %[[BQKV]] : tensor<2x6x64xf32>, tensor<192x64xf32>, tensor<192xf32> -> tensor<2x6x192xf32>
  %a = bt.linear %x, %wqkv, %bqkv
         : tensor<2x6x64xf32>, tensor<192x64xf32>, tensor<192xf32> -> tensor<2x6x192xf32>
  // 2-D weight without bias.
  // CHECK: %[[B:.+]] = bt.linear %[[X]], %[[WD]] : tensor<2x6x64xf32>, tensor<64x64xf32> -> tensor<2x6x64xf32>
  %b = bt.linear %x, %wd : tensor<2x6x64xf32>, tensor<64x64xf32> -> tensor<2x6x64xf32>
  // Conv1d(k=1) weight [N, K, 1] with bias (the prefix expansion layer).
  // CHECK: %[[C:.+]] = bt.linear %[[X]], %[[WE]], %[[BE]] : tensor<2x6x64xf32>, tensor<128x64x1xf32>, tensor<128xf32> -> tensor<2x6x128xf32>
  %c = bt.linear %x, %we, %be
         : tensor<2x6x64xf32>, tensor<128x64x1xf32>, tensor<128xf32> -> tensor<2x6x128xf32>
  // Conv1d weight without bias, dynamic leading dim.
  // CHECK: %[[D:.+]] = bt.linear %{{.+}}, %[[WE]] : tensor<?x64xf32>, tensor<128x64x1xf32> -> tensor<?x128xf32>
  %xd = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x6x64xf32> into tensor<12x64xf32>
  %xc = tensor.cast %xd : tensor<12x64xf32> to tensor<?x64xf32>
  %d = bt.linear %xc, %we : tensor<?x64xf32>, tensor<128x64x1xf32> -> tensor<?x128xf32>
  // CHECK: return %[[A]], %[[B]], %[[C]], %[[D]]
  return %a, %b, %c, %d : tensor<2x6x192xf32>, tensor<2x6x64xf32>, tensor<2x6x128xf32>, tensor<?x128xf32>
}

// CHECK-LABEL: func.func @gelu
// CHECK-SAME:  (%[[X:[^:]+]]: tensor<2x6x256xf32>, %[[Y:[^:]+]]: tensor<8xf16>)
func.func @gelu(%x: tensor<2x6x256xf32>, %y: tensor<8xf16>) -> (tensor<2x6x256xf32>, tensor<8xf16>) {
  // CHECK: %[[A:.+]] = bt.gelu %[[X]] : tensor<2x6x256xf32>
  %a = bt.gelu %x : tensor<2x6x256xf32>
  // CHECK: %[[B:.+]] = bt.gelu %[[Y]] : tensor<8xf16>
  %b = bt.gelu %y : tensor<8xf16>
  // CHECK: return %[[A]], %[[B]]
  return %a, %b : tensor<2x6x256xf32>, tensor<8xf16>
}

// CHECK-LABEL: func.func @embedding_lookup
// CHECK-SAME:  (%[[IDS:[^:]+]]: tensor<2x6x4xi64>, %[[IDS32:[^:]+]]: tensor<?x3xi32>, %[[E:[^:]+]]: tensor<512x16xf32>, %[[T:[^:]+]]: tensor<512x64xbf16>)
func.func @embedding_lookup(%ids: tensor<2x6x4xi64>, %ids32: tensor<?x3xi32>,
                            %e: tensor<512x16xf32>, %t: tensor<512x64xbf16>)
    -> (tensor<2x6x4x16xf32>, tensor<?x3x64xbf16>) {
  // CHECK: %[[A:.+]] = bt.embedding_lookup %[[IDS]], %[[E]] : tensor<2x6x4xi64>, tensor<512x16xf32> -> tensor<2x6x4x16xf32>
  %a = bt.embedding_lookup %ids, %e : tensor<2x6x4xi64>, tensor<512x16xf32> -> tensor<2x6x4x16xf32>
  // CHECK: %[[B:.+]] = bt.embedding_lookup %[[IDS32]], %[[T]] : tensor<?x3xi32>, tensor<512x64xbf16> -> tensor<?x3x64xbf16>
  %b = bt.embedding_lookup %ids32, %t : tensor<?x3xi32>, tensor<512x64xbf16> -> tensor<?x3x64xbf16>
  // CHECK: return %[[A]], %[[B]]
  return %a, %b : tensor<2x6x4x16xf32>, tensor<?x3x64xbf16>
}

// CHECK-LABEL: func.func @prefix_projection
// CHECK-SAME:  (%[[CTX:[^:]+]]: tensor<2x6x64xf32>, %[[W3:[^:]+]]: tensor<128x64x1xf32>, %[[W2:[^:]+]]: tensor<128x64xf32>, %[[B:[^:]+]]: tensor<128xf32>)
func.func @prefix_projection(%ctx: tensor<2x6x64xf32>, %w3: tensor<128x64x1xf32>,
                             %w2: tensor<128x64xf32>, %b: tensor<128xf32>)
    -> (tensor<2x6x2x64xf32>, tensor<2x6x2x64xf32>) {
  // Conv1d weight [P*T, D, 1].
  // CHECK: %[[P:.+]] = bt.prefix_projection %[[CTX]], %[[W3]], %[[B]] prefix_length 2 : tensor<2x6x64xf32>, tensor<128x64x1xf32>, tensor<128xf32> -> tensor<2x6x2x64xf32>
  %p = bt.prefix_projection %ctx, %w3, %b prefix_length 2
         : tensor<2x6x64xf32>, tensor<128x64x1xf32>, tensor<128xf32> -> tensor<2x6x2x64xf32>
  // Linear weight [P*T, D].
  // CHECK: %[[Q:.+]] = bt.prefix_projection %[[CTX]], %[[W2]], %[[B]] prefix_length 2 : tensor<2x6x64xf32>, tensor<128x64xf32>, tensor<128xf32> -> tensor<2x6x2x64xf32>
  %q = bt.prefix_projection %ctx, %w2, %b prefix_length 2
         : tensor<2x6x64xf32>, tensor<128x64xf32>, tensor<128xf32> -> tensor<2x6x2x64xf32>
  // CHECK: return %[[P]], %[[Q]]
  return %p, %q : tensor<2x6x2x64xf32>, tensor<2x6x2x64xf32>
}

// CHECK-LABEL: func.func @split_qkv
// CHECK-SAME:  (%[[G:[^:]+]]: tensor<2x6x192xf32>, %[[L:[^:]+]]: tensor<2x6x5x192xf32>)
func.func @split_qkv(%g: tensor<2x6x192xf32>, %l: tensor<2x6x5x192xf32>)
    -> (tensor<2x6x2x32xf32>, tensor<2x6x5x2x32xf32>) {
  // CHECK: %[[Q:.+]], %[[K:.+]], %[[V:.+]] = bt.split_qkv %[[G]] heads 2 head_dim 32 : tensor<2x6x192xf32> -> tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>
  %q, %k, %v = bt.split_qkv %g heads 2 head_dim 32
      : tensor<2x6x192xf32> -> tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>
  // CHECK: %[[LQ:.+]], %[[LK:.+]], %[[LV:.+]] = bt.split_qkv %[[L]] heads 2 head_dim 32 : tensor<2x6x5x192xf32> -> tensor<2x6x5x2x32xf32>, tensor<2x6x5x2x32xf32>, tensor<2x6x5x2x32xf32>
  %lq, %lk, %lv = bt.split_qkv %l heads 2 head_dim 32
      : tensor<2x6x5x192xf32> -> tensor<2x6x5x2x32xf32>, tensor<2x6x5x2x32xf32>, tensor<2x6x5x2x32xf32>
  // CHECK: return %[[V]], %[[LK]]
  return %v, %lk : tensor<2x6x2x32xf32>, tensor<2x6x5x2x32xf32>
}

// CHECK-LABEL: func.func @rotary
// CHECK-SAME:  (%[[X:[^:]+]]: tensor<2x6x2x32xf32>, %[[P:[^:]+]]: tensor<6xi64>, %[[PB:[^:]+]]: tensor<2x6xi32>, %[[L:[^:]+]]: tensor<2x6x5x2x32xbf16>, %[[LP:[^:]+]]: tensor<2x6x5xi64>)
func.func @rotary(%x: tensor<2x6x2x32xf32>, %p: tensor<6xi64>, %pb: tensor<2x6xi32>,
                  %l: tensor<2x6x5x2x32xbf16>, %lp: tensor<2x6x5xi64>)
    -> (tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>, tensor<2x6x5x2x32xbf16>) {
  // Positions [S] shared by the batch (training: block index).
  // CHECK: %[[A:.+]] = bt.rotary %[[X]], %[[P]] rotary_dims 8 base 1.000000e+04 : tensor<2x6x2x32xf32>, tensor<6xi64> -> tensor<2x6x2x32xf32>
  %a = bt.rotary %x, %p rotary_dims 8 base 10000.0
         : tensor<2x6x2x32xf32>, tensor<6xi64> -> tensor<2x6x2x32xf32>
  // Positions [B, S] (generation: per-sequence positions); full rotary.
  // CHECK: %[[B:.+]] = bt.rotary %[[X]], %[[PB]] rotary_dims 32 base 5.000000e+02 : tensor<2x6x2x32xf32>, tensor<2x6xi32> -> tensor<2x6x2x32xf32>
  %b = bt.rotary %x, %pb rotary_dims 32 base 500.0
         : tensor<2x6x2x32xf32>, tensor<2x6xi32> -> tensor<2x6x2x32xf32>
  // Token decoder: [B, N_blk, S, H, hd] with positions [B, N_blk, S].
  // CHECK: %[[C:.+]] = bt.rotary %[[L]], %[[LP]] rotary_dims 8 base 1.000000e+04 : tensor<2x6x5x2x32xbf16>, tensor<2x6x5xi64> -> tensor<2x6x5x2x32xbf16>
  %c = bt.rotary %l, %lp rotary_dims 8 base 10000.0
         : tensor<2x6x5x2x32xbf16>, tensor<2x6x5xi64> -> tensor<2x6x5x2x32xbf16>
  // CHECK: return %[[A]], %[[B]], %[[C]]
  return %a, %b, %c : tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>, tensor<2x6x5x2x32xbf16>
}

// CHECK-LABEL: func.func @attention
// CHECK-SAME:  (%[[Q:[^:]+]]: tensor<2x6x2x32xf32>, %[[K:[^:]+]]: tensor<2x6x2x32xf32>, %[[V:[^:]+]]: tensor<2x6x2x32xf32>, %[[M:[^:]+]]: tensor<2x6xi64>)
func.func @attention(%q: tensor<2x6x2x32xf32>, %k: tensor<2x6x2x32xf32>,
                     %v: tensor<2x6x2x32xf32>, %m: tensor<2x6xi64>)
    -> (tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>) {
  // CHECK: %[[A:.+]] = bt.attention %[[Q]], %[[K]], %[[V]] scale 0.17677669529663687 : tensor<2x6x2x32xf32> -> tensor<2x6x2x32xf32>
  %a = bt.attention %q, %k, %v scale 0.17677669529663687
         : tensor<2x6x2x32xf32> -> tensor<2x6x2x32xf32>
  // CHECK: %[[B:.+]] = bt.attention %[[Q]], %[[K]], %[[V]] key_mask %[[M]] scale 0.17677669529663687 : tensor<2x6x2x32xf32>, tensor<2x6xi64> -> tensor<2x6x2x32xf32>
  %b = bt.attention %q, %k, %v key_mask %m scale 0.17677669529663687
         : tensor<2x6x2x32xf32>, tensor<2x6xi64> -> tensor<2x6x2x32xf32>
  // CHECK: return %[[A]], %[[B]]
  return %a, %b : tensor<2x6x2x32xf32>, tensor<2x6x2x32xf32>
}

// CHECK-LABEL: func.func @local_attention
// CHECK-SAME:  (%[[Q:[^:]+]]: tensor<2x6x5x2x32xf16>, %[[K:[^:]+]]: tensor<2x6x5x2x32xf16>, %[[V:[^:]+]]: tensor<2x6x5x2x32xf16>, %[[M:[^:]+]]: tensor<2x6x5xi1>)
func.func @local_attention(%q: tensor<2x6x5x2x32xf16>, %k: tensor<2x6x5x2x32xf16>,
                           %v: tensor<2x6x5x2x32xf16>, %m: tensor<2x6x5xi1>)
    -> (tensor<2x6x5x2x32xf16>, tensor<2x6x5x2x32xf16>) {
  // CHECK: %[[A:.+]] = bt.local_attention %[[Q]], %[[K]], %[[V]] scale 0.17677669529663687 : tensor<2x6x5x2x32xf16> -> tensor<2x6x5x2x32xf16>
  %a = bt.local_attention %q, %k, %v scale 0.17677669529663687
         : tensor<2x6x5x2x32xf16> -> tensor<2x6x5x2x32xf16>
  // CHECK: %[[B:.+]] = bt.local_attention %[[Q]], %[[K]], %[[V]] key_mask %[[M]] scale 0.17677669529663687 : tensor<2x6x5x2x32xf16>, tensor<2x6x5xi1> -> tensor<2x6x5x2x32xf16>
  %b = bt.local_attention %q, %k, %v key_mask %m scale 0.17677669529663687
         : tensor<2x6x5x2x32xf16>, tensor<2x6x5xi1> -> tensor<2x6x5x2x32xf16>
  // CHECK: return %[[A]], %[[B]]
  return %a, %b : tensor<2x6x5x2x32xf16>, tensor<2x6x5x2x32xf16>
}

// CHECK-LABEL: func.func @fused_local_attention
// CHECK-SAME:  (%[[QKV:[^:]+]]: tensor<2x6x5x192xf32>, %[[P:[^:]+]]: tensor<5xi64>, %[[PB:[^:]+]]: tensor<2x6x5xi32>, %[[M:[^:]+]]: tensor<2x6x5xi64>)
func.func @fused_local_attention(%qkv: tensor<2x6x5x192xf32>, %p: tensor<5xi64>,
                                 %pb: tensor<2x6x5xi32>, %m: tensor<2x6x5xi64>)
    -> (tensor<2x6x5x2x32xf32>, tensor<2x6x5x2x32xf32>) {
  // Positions [S], no mask.
  // CHECK:      %[[A:.+]] = bt.fused_local_attention %[[QKV]], %[[P]] heads 2 head_dim 32 rotary_dims 8 base 1.000000e+04 scale 0.17677669529663687
  // CHECK-SAME:   : tensor<2x6x5x192xf32>, tensor<5xi64> -> tensor<2x6x5x2x32xf32>
  %a = bt.fused_local_attention %qkv, %p heads 2 head_dim 32 rotary_dims 8
         base 10000.0 scale 0.17677669529663687
         : tensor<2x6x5x192xf32>, tensor<5xi64> -> tensor<2x6x5x2x32xf32>
  // Positions [B, N_blk, S] and a key mask.
  // CHECK:      %[[B:.+]] = bt.fused_local_attention %[[QKV]], %[[PB]] key_mask %[[M]] heads 2 head_dim 32 rotary_dims 8 base 1.000000e+04 scale 0.17677669529663687
  // CHECK-SAME:   : tensor<2x6x5x192xf32>, tensor<2x6x5xi32>, tensor<2x6x5xi64> -> tensor<2x6x5x2x32xf32>
  %b = bt.fused_local_attention %qkv, %pb key_mask %m heads 2 head_dim 32
         rotary_dims 8 base 10000.0 scale 0.17677669529663687
         : tensor<2x6x5x192xf32>, tensor<2x6x5xi32>, tensor<2x6x5xi64> -> tensor<2x6x5x2x32xf32>
  // CHECK: return %[[A]], %[[B]]
  return %a, %b : tensor<2x6x5x2x32xf32>, tensor<2x6x5x2x32xf32>
}

// -----

//===----------------------------------------------------------------------===//
// KV caches: alloc -> append -> attend / length -> release.
//===----------------------------------------------------------------------===//

!local = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>
!global = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, bf16>

// A local cache with static batch: the token decoder's P + L_B = 6 entries.
// CHECK-LABEL: func.func @kv_local
// CHECK-SAME:  (%[[K:[^:]+]]: tensor<2x5x2x32xf32>, %[[V:[^:]+]]: tensor<2x5x2x32xf32>, %[[M:[^:]+]]: tensor<2x1xi1>, %[[Q:[^:]+]]: tensor<2x1x2x32xf32>)
func.func @kv_local(%k: tensor<2x5x2x32xf32>, %v: tensor<2x5x2x32xf32>,
                    %m: tensor<2x1xi1>, %q: tensor<2x1x2x32xf32>)
    -> (tensor<2x1x2x32xf32>, index) {
  // CHECK: %[[C0:.+]] = bt.kv_alloc : !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>
  %c0 = bt.kv_alloc : !local
  // Without a key mask: all entries valid.
  // CHECK: %[[C1:.+]] = bt.kv_append %[[C0]][0], %[[K]], %[[V]] : !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>, tensor<2x5x2x32xf32>
  %c1 = bt.kv_append %c0[0], %k, %v : !local, tensor<2x5x2x32xf32>
  // With a key mask.
  // CHECK: %[[C2:.+]] = bt.kv_append %[[C1]][0], %[[Q]], %[[Q]] key_mask %[[M]] : !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>, tensor<2x1x2x32xf32>, tensor<2x1xi1>
  %c2 = bt.kv_append %c1[0], %q, %q key_mask %m : !local, tensor<2x1x2x32xf32>, tensor<2x1xi1>
  // CHECK: %[[O:.+]] = bt.kv_attend %[[Q]], %[[C2]][0] scale 0.17677669529663687 : tensor<2x1x2x32xf32>, !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32> -> tensor<2x1x2x32xf32>
  %o = bt.kv_attend %q, %c2[0] scale 0.17677669529663687
         : tensor<2x1x2x32xf32>, !local -> tensor<2x1x2x32xf32>
  // CHECK: %[[N:.+]] = bt.kv_length %[[C2]][0] : !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>
  %n = bt.kv_length %c2[0] : !local
  // CHECK: bt.kv_release %[[C2]] : !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, f32>
  bt.kv_release %c2 : !local
  // CHECK: return %[[O]], %[[N]]
  return %o, %n : tensor<2x1x2x32xf32>, index
}

// A bf16 cache of f32 activations (--dtype bf16 on the CUDA target): appends
// round, attention reads extend.
// CHECK-LABEL: func.func @kv_bf16_storage
func.func @kv_bf16_storage(%k: tensor<2x1x2x32xf32>) -> tensor<2x1x2x32xf32> {
  // CHECK: bt.kv_append %{{.+}}[0], %{{.+}}, %{{.+}} : !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, bf16>, tensor<2x1x2x32xf32>
  // CHECK: bt.kv_attend %{{.+}}, %{{.+}}[0] scale {{.+}} : tensor<2x1x2x32xf32>, !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, bf16> -> tensor<2x1x2x32xf32>
  %c0 = bt.kv_alloc : !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, bf16>
  %c1 = bt.kv_append %c0[0], %k, %k : !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, bf16>, tensor<2x1x2x32xf32>
  %o = bt.kv_attend %k, %c1[0] scale 0.125 : tensor<2x1x2x32xf32>, !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, bf16> -> tensor<2x1x2x32xf32>
  bt.kv_release %c1 : !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 32, bf16>
  return %o : tensor<2x1x2x32xf32>
}

// A global cache with dynamic batch, two layers, bf16.
// CHECK-LABEL: func.func @kv_global
// CHECK-SAME:  (%[[B:[^:]+]]: index, %[[K:[^:]+]]: tensor<?x1x2x32xbf16>, %[[M:[^:]+]]: tensor<?x1xi64>)
func.func @kv_global(%b: index, %k: tensor<?x1x2x32xbf16>, %m: tensor<?x1xi64>)
    -> (tensor<?x1x2x32xbf16>, index) {
  // CHECK: %[[C0:.+]] = bt.kv_alloc batch %[[B]] : !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, bf16>
  %c0 = bt.kv_alloc batch %b : !global
  // CHECK: %[[C1:.+]] = bt.kv_append %[[C0]][0], %[[K]], %[[K]] key_mask %[[M]] : !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, bf16>, tensor<?x1x2x32xbf16>, tensor<?x1xi64>
  %c1 = bt.kv_append %c0[0], %k, %k key_mask %m : !global, tensor<?x1x2x32xbf16>, tensor<?x1xi64>
  // CHECK: %[[C2:.+]] = bt.kv_append %[[C1]][1], %[[K]], %[[K]] : !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, bf16>, tensor<?x1x2x32xbf16>
  %c2 = bt.kv_append %c1[1], %k, %k : !global, tensor<?x1x2x32xbf16>
  // CHECK: %[[O:.+]] = bt.kv_attend %[[K]], %[[C2]][1] scale 1.250000e-01 : tensor<?x1x2x32xbf16>, !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, bf16> -> tensor<?x1x2x32xbf16>
  %o = bt.kv_attend %k, %c2[1] scale 0.125 : tensor<?x1x2x32xbf16>, !global -> tensor<?x1x2x32xbf16>
  // CHECK: %[[N:.+]] = bt.kv_length %[[C2]][1] : !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, bf16>
  %n = bt.kv_length %c2[1] : !global
  // CHECK: bt.kv_release %[[C2]] : !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 32, bf16>
  bt.kv_release %c2 : !global
  // CHECK: return %[[O]], %[[N]]
  return %o, %n : tensor<?x1x2x32xbf16>, index
}

// -----

//===----------------------------------------------------------------------===//
// Attributes and types on their own.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func private @types
// CHECK-SAME:  !bt.kv_cache<global, batch = 8, layers = 2, heads = 2, capacity = 512, head_dim = 32, f32>
// CHECK-SAME:  !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 512, head_dim = 32, bf16>
// CHECK-SAME:  !bt.kv_cache<local, batch = 8, layers = 2, heads = 2, capacity = 6, head_dim = 32, f16>
// CHECK-SAME:  !bt.kv_cache<local, batch = ?, layers = 3, heads = 3, capacity = 9, head_dim = 32, f32>
func.func private @types(
    !bt.kv_cache<global, batch = 8, layers = 2, heads = 2, capacity = 512, head_dim = 32, f32>,
    !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 512, head_dim = 32, bf16>,
    !bt.kv_cache<local, batch = 8, layers = 2, heads = 2, capacity = 6, head_dim = 32, f16>,
    !bt.kv_cache<local, batch = ?, layers = 3, heads = 3, capacity = 9, head_dim = 32, f32>)

// CHECK-LABEL: func.func private @attrs()
// The block_tiny block decoder and the block_tiny_b8 token decoder; rotary
// off (rotary_dims = 0) is a valid configuration.
// CHECK-SAME:  bd = #bt.neox<hidden = 64, layers = 2, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 1.000000e+04, eps = 1.000000e-05>
// CHECK-SAME:  norope = #bt.neox<hidden = 16, layers = 1, heads = 4, head_dim = 4, intermediate = 1, rotary_dims = 0, rotary_base = 5.000000e-01, eps = 9.9999999999999995E-7>
// CHECK-SAME:  p = #bt<strategy prefix>
// CHECK-SAME:  s = #bt<strategy summation>
// CHECK-SAME:  td = #bt.neox<hidden = 96, layers = 3, heads = 3, head_dim = 32, intermediate = 384, rotary_dims = 8, rotary_base = 1.000000e+04, eps = 1.000000e-05>
func.func private @attrs() attributes {
  bd = #bt.neox<hidden = 64, layers = 2, heads = 2, head_dim = 32, intermediate = 256,
                rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>,
  td = #bt.neox<hidden = 96, layers = 3, heads = 3, head_dim = 32, intermediate = 384,
                rotary_dims = 8, rotary_base = 1.0e+04, eps = 0.00001>,
  norope = #bt.neox<hidden = 16, layers = 1, heads = 4, head_dim = 4, intermediate = 1,
                    rotary_dims = 0, rotary_base = 0.5, eps = 1.0e-06>,
  p = #bt<strategy prefix>,
  s = #bt<strategy summation>
}
