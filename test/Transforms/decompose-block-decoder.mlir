// RUN: bt-opt %s --bt-decompose | FileCheck %s
// RUN: bt-opt %s --bt-decompose | FileCheck %s --check-prefix=NOMODEL

// bt-decompose on bt.block_decoder without a cache: a GPT-NeoX stack of
// layer-level ops over the blocks (HF GPTNeoXLayer, parallel residual), RoPE
// positions = block index, the block mask as key mask, final LayerNorm.

// NOMODEL-NOT: bt.block_decoder

#bd = #bt.neox<hidden = 8, layers = 2, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
#norope = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 0, rotary_base = 10000.0, eps = 1.0e-05>

module {
  bt.param @"norope.layers.0.input_layernorm.weight" : tensor<8xf32>
  bt.param @"norope.layers.0.input_layernorm.bias" : tensor<8xf32>
  bt.param @"norope.layers.0.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"norope.layers.0.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"norope.layers.0.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"norope.layers.0.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"norope.layers.0.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"norope.layers.0.attention.dense.bias" : tensor<8xf32>
  bt.param @"norope.layers.0.mlp.dense_h_to_4h.weight" : tensor<16x8xf32>
  bt.param @"norope.layers.0.mlp.dense_h_to_4h.bias" : tensor<16xf32>
  bt.param @"norope.layers.0.mlp.dense_4h_to_h.weight" : tensor<8x16xf32>
  bt.param @"norope.layers.0.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"norope.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"norope.final_layer_norm.bias" : tensor<8xf32>
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
  bt.param @"block_decoder.gpt_neox.layers.1.input_layernorm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.input_layernorm.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.attention.dense.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.mlp.dense_h_to_4h.weight" : tensor<16x8xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.mlp.dense_h_to_4h.bias" : tensor<16xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.mlp.dense_4h_to_h.weight" : tensor<8x16xf32>
  bt.param @"block_decoder.gpt_neox.layers.1.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"block_decoder.gpt_neox.final_layer_norm.bias" : tensor<8xf32>

// Every op of the first layer, in order, with the official parameter names.
// CHECK-LABEL: func.func @no_mask
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x8xf32>)
// CHECK:         %[[POS:.*]] = arith.constant dense<[0, 1, 2]> : tensor<3xi64>
// CHECK:         %[[LN1W:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.0.input_layernorm.weight : tensor<8xf32>
// CHECK:         %[[LN1B:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.0.input_layernorm.bias : tensor<8xf32>
// CHECK:         %[[LN2W:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.0.post_attention_layernorm.weight : tensor<8xf32>
// CHECK:         %[[LN2B:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.0.post_attention_layernorm.bias : tensor<8xf32>
// CHECK:         %[[QKVW:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.0.attention.query_key_value.weight : tensor<24x8xf32>
// CHECK:         %[[QKVB:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.0.attention.query_key_value.bias : tensor<24xf32>
// CHECK:         %[[DW:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.0.attention.dense.weight : tensor<8x8xf32>
// CHECK:         %[[DB:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.0.attention.dense.bias : tensor<8xf32>
// CHECK:         %[[UPW:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight : tensor<16x8xf32>
// CHECK:         %[[UPB:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias : tensor<16xf32>
// CHECK:         %[[DNW:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight : tensor<8x16xf32>
// CHECK:         %[[DNB:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.bias : tensor<8xf32>
// CHECK:         %[[H1:.*]] = bt.layer_norm %[[X]], %[[LN1W]], %[[LN1B]] eps 1.000000e-05 : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
// CHECK:         %[[QKV:.*]] = bt.linear %[[H1]], %[[QKVW]], %[[QKVB]] : tensor<2x3x8xf32>, tensor<24x8xf32>, tensor<24xf32> -> tensor<2x3x24xf32>
// CHECK:         %[[Q:.*]], %[[K:.*]], %[[V:.*]] = bt.split_qkv %[[QKV]] heads 2 head_dim 4 : tensor<2x3x24xf32> -> tensor<2x3x2x4xf32>, tensor<2x3x2x4xf32>, tensor<2x3x2x4xf32>
// CHECK:         %[[RQ:.*]] = bt.rotary %[[Q]], %[[POS]] rotary_dims 2 base 1.000000e+04 : tensor<2x3x2x4xf32>, tensor<3xi64> -> tensor<2x3x2x4xf32>
// CHECK:         %[[RK:.*]] = bt.rotary %[[K]], %[[POS]] rotary_dims 2 base 1.000000e+04
// CHECK:         %[[ATT:.*]] = bt.attention %[[RQ]], %[[RK]], %[[V]] scale 5.000000e-01 : tensor<2x3x2x4xf32> -> tensor<2x3x2x4xf32>
// CHECK:         %[[MERGED:.*]] = tensor.collapse_shape %[[ATT]] {{\[}}[0], [1], [2, 3]] : tensor<2x3x2x4xf32> into tensor<2x3x8xf32>
// CHECK:         %[[A:.*]] = bt.linear %[[MERGED]], %[[DW]], %[[DB]] : tensor<2x3x8xf32>, tensor<8x8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
// CHECK:         %[[H2:.*]] = bt.layer_norm %[[X]], %[[LN2W]], %[[LN2B]] eps 1.000000e-05
// CHECK:         %[[UP:.*]] = bt.linear %[[H2]], %[[UPW]], %[[UPB]] : tensor<2x3x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<2x3x16xf32>
// CHECK:         %[[ACT:.*]] = bt.gelu %[[UP]] : tensor<2x3x16xf32>
// CHECK:         %[[M:.*]] = bt.linear %[[ACT]], %[[DNW]], %[[DNB]] : tensor<2x3x16xf32>, tensor<8x16xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
// HF order: (mlp_output + attn_output) + hidden_states.
// CHECK:         %[[MA:.*]] = arith.addf %[[M]], %[[A]] : tensor<2x3x8xf32>
// CHECK:         %[[X1:.*]] = arith.addf %[[MA]], %[[X]] : tensor<2x3x8xf32>
// The second layer reads the first one's output, with its own parameters.
// CHECK:         %[[LN1W1:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.1.input_layernorm.weight
// CHECK:         %[[LN2W1:.*]] = bt.param_ref @block_decoder.gpt_neox.layers.1.post_attention_layernorm.weight
// CHECK:         bt.layer_norm %[[X1]], %[[LN1W1]]
// CHECK:         bt.rotary %{{.*}}, %[[POS]]
// CHECK:         bt.rotary %{{.*}}, %[[POS]]
// CHECK:         bt.attention
// CHECK:         %[[A1:.*]] = bt.linear %{{.*}} -> tensor<2x3x8xf32>
// CHECK:         bt.layer_norm %[[X1]], %[[LN2W1]]
// CHECK:         %[[M1:.*]] = bt.linear %{{.*}} : tensor<2x3x16xf32>, tensor<8x16xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
// CHECK:         %[[MA1:.*]] = arith.addf %[[M1]], %[[A1]]
// CHECK:         %[[X2:.*]] = arith.addf %[[MA1]], %[[X1]]
// CHECK:         %[[FW:.*]] = bt.param_ref @block_decoder.gpt_neox.final_layer_norm.weight
// CHECK:         %[[FB:.*]] = bt.param_ref @block_decoder.gpt_neox.final_layer_norm.bias
// CHECK:         %[[OUT:.*]] = bt.layer_norm %[[X2]], %[[FW]], %[[FB]] eps 1.000000e-05
// CHECK-NOT:     layers.2
// CHECK:         return %[[OUT]] : tensor<2x3x8xf32>
  func.func @no_mask(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
    %y = bt.block_decoder %x params "block_decoder.gpt_neox" config #bd
        : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
    return %y : tensor<2x3x8xf32>
  }

// The block mask is the key mask of every layer's attention.
// CHECK-LABEL: func.func @with_mask
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x8xf32>, %[[MASK:.*]]: tensor<2x3xi64>)
// CHECK:         bt.attention %{{.*}}, %{{.*}}, %{{.*}} key_mask %[[MASK]] scale 5.000000e-01 : tensor<2x3x2x4xf32>, tensor<2x3xi64> -> tensor<2x3x2x4xf32>
// CHECK:         bt.attention %{{.*}}, %{{.*}}, %{{.*}} key_mask %[[MASK]] scale 5.000000e-01
// CHECK-NOT:     bt.attention
// CHECK:         return
  func.func @with_mask(%x: tensor<2x3x8xf32>, %m: tensor<2x3xi64>) -> tensor<2x3x8xf32> {
    %y = bt.block_decoder %x mask %m params "block_decoder.gpt_neox" config #bd
        : tensor<2x3x8xf32>, tensor<2x3xi64> -> tensor<2x3x8xf32>
    return %y : tensor<2x3x8xf32>
  }

// Dynamic B and N: positions 0 .. N-1 from a tensor.generate over dim 1 of
// the input; shapes stay dynamic throughout.
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME:    (%[[X:.*]]: tensor<?x?x8xf32>, %[[MASK:.*]]: tensor<?x?xi1>)
// CHECK:         %[[C1:.*]] = arith.constant 1 : index
// CHECK:         %[[N:.*]] = tensor.dim %[[X]], %[[C1]] : tensor<?x?x8xf32>
// CHECK:         %[[POS:.*]] = tensor.generate %[[N]] {
// CHECK-NEXT:    ^bb0(%[[I:.*]]: index):
// CHECK-NEXT:      %[[P:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK-NEXT:      tensor.yield %[[P]] : i64
// CHECK-NEXT:    } : tensor<?xi64>
// CHECK:         bt.linear %{{.*}} : tensor<?x?x8xf32>, tensor<24x8xf32>, tensor<24xf32> -> tensor<?x?x24xf32>
// CHECK:         bt.rotary %{{.*}}, %[[POS]] rotary_dims 2 base 1.000000e+04 : tensor<?x?x2x4xf32>, tensor<?xi64> -> tensor<?x?x2x4xf32>
// CHECK:         bt.attention %{{.*}} key_mask %[[MASK]] scale 5.000000e-01 : tensor<?x?x2x4xf32>, tensor<?x?xi1> -> tensor<?x?x2x4xf32>
// CHECK:         tensor.collapse_shape %{{.*}} {{\[}}[0], [1], [2, 3]] : tensor<?x?x2x4xf32> into tensor<?x?x8xf32>
// CHECK:         arith.addf %{{.*}}, %[[X]] : tensor<?x?x8xf32>
// CHECK:         bt.param_ref @block_decoder.gpt_neox.final_layer_norm.bias
// CHECK-NEXT:    %[[OUT:.*]] = bt.layer_norm {{.*}} -> tensor<?x?x8xf32>
// CHECK:         return %[[OUT]] : tensor<?x?x8xf32>
  func.func @dynamic(%x: tensor<?x?x8xf32>, %m: tensor<?x?xi1>) -> tensor<?x?x8xf32> {
    %y = bt.block_decoder %x mask %m params "block_decoder.gpt_neox" config #bd
        : tensor<?x?x8xf32>, tensor<?x?xi1> -> tensor<?x?x8xf32>
    return %y : tensor<?x?x8xf32>
  }

// rotary_dims = 0: no bt.rotary and no positions; q and k go straight from
// bt.split_qkv to the attention.
// CHECK-LABEL: func.func @no_rotary
// CHECK-NOT:     arith.constant
// CHECK-NOT:     tensor.generate
// CHECK:         %[[Q:.*]], %[[K:.*]], %[[V:.*]] = bt.split_qkv
// CHECK-NEXT:    bt.attention %[[Q]], %[[K]], %[[V]] scale
// CHECK-NOT:     bt.rotary
// CHECK:         return
  func.func @no_rotary(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
    %y = bt.block_decoder %x params "norope" config #norope
        : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
    return %y : tensor<2x3x8xf32>
  }
}
