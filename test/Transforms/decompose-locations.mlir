// RUN: bt-opt %s --bt-decompose -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s

// Every op created by bt-decompose is located at NameLoc("<official module
// path>", <location of the model-level op>), so that diagnostics and profiles
// name the layer they come from.

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>

// CHECK-LABEL: func.func @located
// CHECK:         bt.embedding_lookup {{.*}} loc("embedder.embeddings"("model.py":1:1))
// CHECK:         tensor.collapse_shape {{.*}} loc("embedder.embeddings"("model.py":1:1))
// CHECK:         arith.constant dense<[0, 1, 2]> {{.*}} loc("block_decoder.gpt_neox"("model.py":2:2))
// CHECK:         bt.param_ref @block_decoder.gpt_neox.layers.0.attention.query_key_value.weight {{.*}} loc("block_decoder.gpt_neox.layers.0.attention.query_key_value"("model.py":2:2))
// CHECK:         bt.layer_norm {{.*}} loc("block_decoder.gpt_neox.layers.0.input_layernorm"("model.py":2:2))
// CHECK:         bt.linear {{.*}} loc("block_decoder.gpt_neox.layers.0.attention.query_key_value"("model.py":2:2))
// CHECK:         bt.split_qkv {{.*}} loc("block_decoder.gpt_neox.layers.0.attention"("model.py":2:2))
// CHECK:         bt.rotary {{.*}} loc("block_decoder.gpt_neox.layers.0.attention"("model.py":2:2))
// CHECK:         bt.attention {{.*}} loc("block_decoder.gpt_neox.layers.0.attention"("model.py":2:2))
// CHECK:         bt.linear {{.*}} loc("block_decoder.gpt_neox.layers.0.attention.dense"("model.py":2:2))
// CHECK:         bt.layer_norm {{.*}} loc("block_decoder.gpt_neox.layers.0.post_attention_layernorm"("model.py":2:2))
// CHECK:         bt.linear {{.*}} loc("block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h"("model.py":2:2))
// CHECK:         bt.gelu {{.*}} loc("block_decoder.gpt_neox.layers.0.mlp.act"("model.py":2:2))
// CHECK:         bt.linear {{.*}} loc("block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h"("model.py":2:2))
// CHECK:         arith.addf {{.*}} loc("block_decoder.gpt_neox.layers.0"("model.py":2:2))
// CHECK:         arith.addf {{.*}} loc("block_decoder.gpt_neox.layers.0"("model.py":2:2))
// CHECK:         bt.layer_norm {{.*}} loc("block_decoder.gpt_neox.final_layer_norm"("model.py":2:2))
// CHECK:         bt.linear {{.*}} loc("embed_out"("model.py":3:3))
module {
  bt.param @"embedder.embeddings.weight" : tensor<16x2xf32>
  bt.param @"embed_out.weight" : tensor<16x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.input_layernorm.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.attention.dense.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<16x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<16xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<8x16xf32>
  bt.param @"block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.final_layer_norm.bias" : tensor<8xf32>

  func.func @located(%ids: tensor<2x3x4xi64>) -> tensor<2x3x16xf32> {
    %x = bt.embedder %ids table @"embedder.embeddings.weight" : tensor<2x3x4xi64> -> tensor<2x3x8xf32> loc("model.py":1:1)
    %h = bt.block_decoder %x params "block_decoder.gpt_neox" config #cfg : tensor<2x3x8xf32> -> tensor<2x3x8xf32> loc("model.py":2:2)
    %l = bt.lm_head %h weight @"embed_out.weight" : tensor<2x3x8xf32> -> tensor<2x3x16xf32> loc("model.py":3:3)
    return %l : tensor<2x3x16xf32>
  }
}
