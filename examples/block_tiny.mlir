// A Block Transformer with the architecture of the official block_tiny fixture
// (L_B = 4, P = 2, D = T = 64, 2 + 2 layers, V = 512): every parameter under its
// official checkpoint name, the eval forward (paper §2) and a generation skeleton
// with explicit KV-cache lifetimes (docs/design.md §3).
//
//   bt-opt examples/block_tiny.mlir --bt-verify-kv-lifetimes

#block = #bt.neox<hidden = 64, layers = 2, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
#token = #bt.neox<hidden = 64, layers = 2, heads = 2, head_dim = 32, intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, eps = 1.0e-05>
!global = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 512, head_dim = 32, f32>
!local = !bt.kv_cache<local, batch = ?, layers = 2, heads = 2, capacity = 5, head_dim = 32, f32>

module {
  bt.param @"block_decoder.gpt_neox.final_layer_norm.bias" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.final_layer_norm.weight" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.dense.bias" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.dense.weight" : tensor<64x64xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<192xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<192x64xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.input_layernorm.bias" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<64x256xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<256xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<256x64xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.attention.dense.bias" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.attention.dense.weight" : tensor<64x64xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.attention.query_key_value.bias" : tensor<192xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.attention.query_key_value.weight" : tensor<192x64xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.input_layernorm.bias" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.input_layernorm.weight" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.mlp.dense_4h_to_h.bias" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.mlp.dense_4h_to_h.weight" : tensor<64x256xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.mlp.dense_h_to_4h.bias" : tensor<256xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.mlp.dense_h_to_4h.weight" : tensor<256x64xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.post_attention_layernorm.bias" : tensor<64xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.post_attention_layernorm.weight" : tensor<64xf32>
  bt.param @"embedder.embeddings.weight" : tensor<512x16xf32>
  bt.param @"token_decoder.embed_out.weight" : tensor<512x64xf32>
  bt.param @"token_decoder.expansion_layer.bias" : tensor<128xf32>
  bt.param @"token_decoder.expansion_layer.weight" : tensor<128x64x1xf32>
  bt.param @"token_decoder.gpt_neox.embed_in.weight" : tensor<512x64xf32>
  bt.param @"token_decoder.gpt_neox.final_layer_norm.bias" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.final_layer_norm.weight" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.attention.dense.bias" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.attention.dense.weight" : tensor<64x64xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<192xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<192x64xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.input_layernorm.bias" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<64x256xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<256xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<256x64xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.attention.dense.bias" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.attention.dense.weight" : tensor<64x64xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.attention.query_key_value.bias" : tensor<192xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.attention.query_key_value.weight" : tensor<192x64xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.input_layernorm.bias" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.input_layernorm.weight" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.mlp.dense_4h_to_h.bias" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.mlp.dense_4h_to_h.weight" : tensor<64x256xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.mlp.dense_h_to_4h.bias" : tensor<256xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.mlp.dense_h_to_4h.weight" : tensor<256x64xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.post_attention_layernorm.bias" : tensor<64xf32>
  bt.param @"token_decoder.gpt_neox.layers.1.post_attention_layernorm.weight" : tensor<64xf32>

  // Eval forward (official BlockTransformer.forward): logits for blocks 1..N-1
  // and the token-decoding loss.
  func.func @eval(%ids: tensor<2x6x4xi64>, %mask: tensor<2x6x4xi64>,
                  %block_mask: tensor<2x6xi64>, %ctx_ids: tensor<2x5x4xi64>,
                  %ctx_mask: tensor<2x5x4xi64>, %labels: tensor<2x5x4xi64>)
      -> (tensor<2x5x4x512xf32>, tensor<f32>) {
    %emb = bt.embedder %ids table @"embedder.embeddings.weight"
        : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
    %ctx = bt.block_decoder %emb mask %block_mask params "block_decoder.gpt_neox"
        config #block : tensor<2x6x64xf32>, tensor<2x6xi64> -> tensor<2x6x64xf32>
    %prev = tensor.extract_slice %ctx[0, 0, 0] [2, 5, 64] [1, 1, 1]
        : tensor<2x6x64xf32> to tensor<2x5x64xf32>
    %h = bt.token_decoder %prev, %ctx_ids mask %ctx_mask params "token_decoder"
        config #token strategy prefix prefix_length 2
        : tensor<2x5x64xf32>, tensor<2x5x4xi64>, tensor<2x5x4xi64> -> tensor<2x5x4x64xf32>
    %logits = bt.lm_head %h weight @"token_decoder.embed_out.weight"
        : tensor<2x5x4x64xf32> -> tensor<2x5x4x512xf32>
    %loss = bt.cross_entropy %logits, %labels
        : tensor<2x5x4x512xf32>, tensor<2x5x4xi64> -> tensor<f32>
    return %logits, %loss : tensor<2x5x4x512xf32>, tensor<f32>
  }

  // Generation skeleton: prefill the global (per-block) cache with the prompt
  // blocks, then decode one block per step; each step's token decoder owns a
  // local cache of P + L_B - 1 entries (its inputs) that lives for that block
  // only.
  func.func @generate(%prompt: tensor<?x3x64xf32>, %next: tensor<?x1x64xf32>,
                      %q: tensor<?x1x2x32xf32>, %kv: tensor<?x1x2x32xf32>,
                      %steps: index) -> tensor<?x1x64xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %b = tensor.dim %prompt, %c0 : tensor<?x3x64xf32>
    %g0 = bt.kv_alloc batch %b : !global
    %ctx0, %g1 = bt.block_decoder %prompt cache %g0 params "block_decoder.gpt_neox"
        config #block : tensor<?x3x64xf32>, !global -> tensor<?x3x64xf32>, !global
    %last, %gN = scf.for %i = %c0 to %steps step %c1
        iter_args(%x = %next, %g = %g1) -> (tensor<?x1x64xf32>, !global) {
      %y, %g2 = bt.block_decoder %x cache %g params "block_decoder.gpt_neox"
          config #block : tensor<?x1x64xf32>, !global -> tensor<?x1x64xf32>, !global
      %l0 = bt.kv_alloc batch %b : !local
      %l1 = bt.kv_append %l0[0], %kv, %kv : !local, tensor<?x1x2x32xf32>
      %o = bt.kv_attend %q, %l1[0] scale 0.17677669529663687
          : tensor<?x1x2x32xf32>, !local -> tensor<?x1x2x32xf32>
      bt.kv_release %l1 : !local
      scf.yield %y, %g2 : tensor<?x1x64xf32>, !global
    }
    bt.kv_release %gN : !global
    return %last : tensor<?x1x64xf32>
  }
}
