// RUN: bt-opt %bt_src_root/examples/block_tiny.mlir --bt-plan-kv-memory="prompt-tokens=2048 gen-tokens=128 memory=80GiB batch=4" | FileCheck %s --check-prefix=LIFETIMES
// RUN: bt-opt %s --split-input-file --verify-diagnostics --bt-plan-kv-memory="prompt-tokens=10 gen-tokens=12 memory=1MiB" | FileCheck %s
// RUN: not bt-opt %s --split-input-file --bt-plan-kv-memory="memory=lots" 2>&1 | FileCheck %s --check-prefix=BADMEM
// BADMEM: error: bt-plan-kv-memory: cannot parse memory='lots'

// bt-plan-kv-memory attaches the KV-cache memory plan as `bt.kv_plan`.

// From the lifetimes of the caches of examples/block_tiny.mlir (@generate: a
// global cache of 2 layers x 2 heads x 32, f32; a local cache of P + L_B - 1 = 5 entries):
//   global per block   = 2 layers * 2 * 2 heads * 32 * 4 B        = 1024
//   C                  = 2048/4 + 128/4                            = 544
//   global per seq     = 544 * 1024                                = 557056
//   local per seq      = 2 * 2 layers * 2 heads * 5 * 32 * 4 B     = 5120
//   weights            = 282240 parameters * 4 B                   = 1128960
//   max batch          = (80 GiB - 1128960) / (557056 + 5120)      = 152795
//   batch 4            = 1128960 + 4 * 562176                      = 3377664
// LIFETIMES: module attributes {bt.kv_plan = {batch = 4 : i64, batch_bytes = 3377664 : i64, block_length = 4 : i64, bytes_per_sequence = 562176 : i64, element_bytes = 4 : i64, gen_tokens = 128 : i64, global_blocks = 544 : i64, global_bytes_per_block = 1024 : i64, global_bytes_per_sequence = 557056 : i64, global_head_dim = 32 : i64, global_heads = 2 : i64, global_layers = 2 : i64, local_bytes_per_sequence = 5120 : i64, local_capacity = 5 : i64, local_head_dim = 32 : i64, local_heads = 2 : i64, local_layers = 2 : i64, max_batch = 152795 : i64, memory_bytes = 85899345920 : i64, prefix_length = 2 : i64, prompt_tokens = 2048 : i64, source = "kv-cache lifetimes", weight_bytes = 1128960 : i64}}

// Without caches, from the model-level ops' configs: L_B = 4, P = 2, a block
// decoder of 1 layer x 2 heads x 8 and a token decoder of 1 layer x 2 heads x
// 8; 10 + 12 tokens = 3 + 3 blocks. The local cache holds the token
// decoder's P + L_B - 1 = 5 inputs (t_{L_B-1} never is one), as
// decode_tokens allocates it.
//   global = 6 * 1 * 2 * 2 * 8 * 4 = 768;  local = 2 * 1 * 2 * 5 * 8 * 4 = 640
//   weights = 6208 parameters * 4 = 24832 (embedder 128, block decoder 2256,
//             token decoder 512 + 2256 + expansion 544, LM head 512)
//   max batch = (1 MiB - 24832) / 1408 = 727
// CHECK: module attributes {bt.kv_plan = {block_length = 4 : i64, bytes_per_sequence = 1408 : i64, element_bytes = 4 : i64, gen_tokens = 12 : i64, global_blocks = 6 : i64, global_bytes_per_block = 128 : i64, global_bytes_per_sequence = 768 : i64, global_head_dim = 8 : i64, global_heads = 2 : i64, global_layers = 1 : i64, local_bytes_per_sequence = 640 : i64, local_capacity = 5 : i64, local_head_dim = 8 : i64, local_heads = 2 : i64, local_layers = 1 : i64, max_batch = 727 : i64, memory_bytes = 1048576 : i64, prefix_length = 2 : i64, prompt_tokens = 10 : i64, source = "model ops", weight_bytes = 24832 : i64}}
#neox = #bt.neox<hidden = 16, layers = 1, heads = 2, head_dim = 8, intermediate = 32, rotary_dims = 4, rotary_base = 10000.0, eps = 1.0e-05>
module {
  bt.param @"emb4.weight" : tensor<32x4xf32>
  bt.param @"bd.layers.0.input_layernorm.weight" : tensor<16xf32>
  bt.param @"bd.layers.0.input_layernorm.bias" : tensor<16xf32>
  bt.param @"bd.layers.0.post_attention_layernorm.weight" : tensor<16xf32>
  bt.param @"bd.layers.0.post_attention_layernorm.bias" : tensor<16xf32>
  bt.param @"bd.layers.0.attention.query_key_value.weight" : tensor<48x16xf32>
  bt.param @"bd.layers.0.attention.query_key_value.bias" : tensor<48xf32>
  bt.param @"bd.layers.0.attention.dense.weight" : tensor<16x16xf32>
  bt.param @"bd.layers.0.attention.dense.bias" : tensor<16xf32>
  bt.param @"bd.layers.0.mlp.dense_h_to_4h.weight" : tensor<32x16xf32>
  bt.param @"bd.layers.0.mlp.dense_h_to_4h.bias" : tensor<32xf32>
  bt.param @"bd.layers.0.mlp.dense_4h_to_h.weight" : tensor<16x32xf32>
  bt.param @"bd.layers.0.mlp.dense_4h_to_h.bias" : tensor<16xf32>
  bt.param @"bd.final_layer_norm.weight" : tensor<16xf32>
  bt.param @"bd.final_layer_norm.bias" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.embed_in.weight" : tensor<32x16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.input_layernorm.weight" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.input_layernorm.bias" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<48x16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<48xf32>
  bt.param @"td_p2.gpt_neox.layers.0.attention.dense.weight" : tensor<16x16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.attention.dense.bias" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<32x16xf32>
  bt.param @"td_p2.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<32xf32>
  bt.param @"td_p2.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<16x32xf32>
  bt.param @"td_p2.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.final_layer_norm.weight" : tensor<16xf32>
  bt.param @"td_p2.gpt_neox.final_layer_norm.bias" : tensor<16xf32>
  bt.param @"td_p2.expansion_layer.weight" : tensor<32x16x1xf32>
  bt.param @"td_p2.expansion_layer.bias" : tensor<32xf32>
  bt.param @"td_p2.embed_out.weight" : tensor<32x16xf32>
  func.func @eval(%ids: tensor<?x?x4xi64>, %dec: tensor<?x?x4xi64>) -> tensor<?x?x4x32xf32> {
    %emb = bt.embedder %ids table @"emb4.weight" : tensor<?x?x4xi64> -> tensor<?x?x16xf32>
    %ctx = bt.block_decoder %emb config #neox params "bd" : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
    %h = bt.token_decoder %ctx, %dec params "td_p2" config #neox strategy prefix prefix_length 2
        : tensor<?x?x16xf32>, tensor<?x?x4xi64> -> tensor<?x?x4x16xf32>
    %logits = bt.lm_head %h weight @"td_p2.embed_out.weight" : tensor<?x?x4x16xf32> -> tensor<?x?x4x32xf32>
    return %logits : tensor<?x?x4x32xf32>
  }
}

// -----

// expected-error @below {{bt-plan-kv-memory: no bt.embedder or bt.token_decoder gives the block length L_B}}
module {
  func.func @nothing() {
    return
  }
}

// -----

// expected-error @below {{bt-plan-kv-memory: the module has no global KV cache and no bt.block_decoder}}
module {
  bt.param @w : tensor<32x4xf32>
  func.func @embed_only(%ids: tensor<?x?x4xi64>) -> tensor<?x?x16xf32> {
    %x = bt.embedder %ids table @w : tensor<?x?x4xi64> -> tensor<?x?x16xf32>
    return %x : tensor<?x?x16xf32>
  }
}
