// RUN: bt-opt %s --bt-decompose | FileCheck %s
// RUN: bt-opt %s --bt-decompose | FileCheck %s --check-prefix=NOMODEL

// bt-decompose on bt.token_decoder (official BaseTokenDecoder.forward with
// discard_redundant_tokens): the context embedding is projected into P
// vectors, prefixed (prefix strategy) or added (summation) to the embeddings
// of t_0 .. t_{L_B-2}; a block-local GPT-NeoX stack (bt.local_attention)
// with positions 0 .. S-1; the key mask never masks the projected/BOS
// positions; the prefix strategy keeps outputs P-1 .. P+L_B-2.

// NOMODEL-NOT: bt.token_decoder

#td = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>

module {
  bt.param @"token_decoder.gpt_neox.embed_in.weight" : tensor<16x8xf32>
  bt.param @"token_decoder.expansion_layer.weight" : tensor<16x12x1xf32>
  bt.param @"token_decoder.expansion_layer.bias" : tensor<16xf32>
  bt.param @"sum_decoder.gpt_neox.embed_in.weight" : tensor<16x8xf32>
  bt.param @"sum_decoder.expansion_layer.weight" : tensor<32x12x1xf32>
  bt.param @"sum_decoder.expansion_layer.bias" : tensor<32xf32>
  bt.param @"one_decoder.gpt_neox.embed_in.weight" : tensor<16x8xf32>
  bt.param @"one_decoder.expansion_layer.weight" : tensor<24x12x1xf32>
  bt.param @"one_decoder.expansion_layer.bias" : tensor<24xf32>
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
  bt.param @"sum_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<8xf32>
  bt.param @"sum_decoder.gpt_neox.layers.0.input_layernorm.bias" : tensor<8xf32>
  bt.param @"sum_decoder.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"sum_decoder.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"sum_decoder.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"sum_decoder.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"sum_decoder.gpt_neox.layers.0.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"sum_decoder.gpt_neox.layers.0.attention.dense.bias" : tensor<8xf32>
  bt.param @"sum_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<16x8xf32>
  bt.param @"sum_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<16xf32>
  bt.param @"sum_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<8x16xf32>
  bt.param @"sum_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"sum_decoder.gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"sum_decoder.gpt_neox.final_layer_norm.bias" : tensor<8xf32>
  bt.param @"one_decoder.gpt_neox.layers.0.input_layernorm.weight" : tensor<8xf32>
  bt.param @"one_decoder.gpt_neox.layers.0.input_layernorm.bias" : tensor<8xf32>
  bt.param @"one_decoder.gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"one_decoder.gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"one_decoder.gpt_neox.layers.0.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"one_decoder.gpt_neox.layers.0.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"one_decoder.gpt_neox.layers.0.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"one_decoder.gpt_neox.layers.0.attention.dense.bias" : tensor<8xf32>
  bt.param @"one_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<16x8xf32>
  bt.param @"one_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<16xf32>
  bt.param @"one_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<8x16xf32>
  bt.param @"one_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"one_decoder.gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"one_decoder.gpt_neox.final_layer_norm.bias" : tensor<8xf32>

// Prefix strategy, P = 2, L_B = 4: S = P + L_B - 1 = 5.
// CHECK-LABEL: func.func @prefix
// CHECK-SAME:    (%[[CTX:.*]]: tensor<2x3x12xf32>, %[[IDS:.*]]: tensor<2x3x4xi64>, %[[MASK:.*]]: tensor<2x3x4xi64>)
// CHECK:         %[[EW:.*]] = bt.param_ref @token_decoder.expansion_layer.weight : tensor<16x12x1xf32>
// CHECK:         %[[EB:.*]] = bt.param_ref @token_decoder.expansion_layer.bias : tensor<16xf32>
// CHECK:         %[[TABLE:.*]] = bt.param_ref @token_decoder.gpt_neox.embed_in.weight : tensor<16x8xf32>
// CHECK:         %[[PREFIX:.*]] = bt.prefix_projection %[[CTX]], %[[EW]], %[[EB]] prefix_length 2 : tensor<2x3x12xf32>, tensor<16x12x1xf32>, tensor<16xf32> -> tensor<2x3x2x8xf32>
// t_0 .. t_{L_B-2}: the last id of each block is not an input.
// CHECK:         %[[IN_IDS:.*]] = tensor.extract_slice %[[IDS]][0, 0, 0] [2, 3, 3] [1, 1, 1] : tensor<2x3x4xi64> to tensor<2x3x3xi64>
// CHECK:         %[[TOK:.*]] = bt.embedding_lookup %[[IN_IDS]], %[[TABLE]] : tensor<2x3x3xi64>, tensor<16x8xf32> -> tensor<2x3x3x8xf32>
// The prefix comes first.
// CHECK:         %[[IN:.*]] = tensor.concat dim(2) %[[PREFIX]], %[[TOK]] : (tensor<2x3x2x8xf32>, tensor<2x3x3x8xf32>) -> tensor<2x3x5x8xf32>
// Key mask: ones for the P prefix positions, then mask[..., 0 : L_B-1].
// CHECK:         %[[ONES:.*]] = arith.constant dense<1> : tensor<2x3x2xi64>
// CHECK:         %[[IN_MASK:.*]] = tensor.extract_slice %[[MASK]][0, 0, 0] [2, 3, 3] [1, 1, 1] : tensor<2x3x4xi64> to tensor<2x3x3xi64>
// CHECK:         %[[KEYMASK:.*]] = tensor.concat dim(2) %[[ONES]], %[[IN_MASK]] : (tensor<2x3x2xi64>, tensor<2x3x3xi64>) -> tensor<2x3x5xi64>
// CHECK:         %[[POS:.*]] = arith.constant dense<[0, 1, 2, 3, 4]> : tensor<5xi64>
// CHECK:         bt.param_ref @token_decoder.gpt_neox.layers.0.input_layernorm.weight
// CHECK:         %[[H1:.*]] = bt.layer_norm %[[IN]], {{.*}} -> tensor<2x3x5x8xf32>
// CHECK:         %[[QKV:.*]] = bt.linear %[[H1]], {{.*}} -> tensor<2x3x5x24xf32>
// CHECK:         %[[Q:.*]], %[[K:.*]], %[[V:.*]] = bt.split_qkv %[[QKV]] heads 2 head_dim 4 : tensor<2x3x5x24xf32> -> tensor<2x3x5x2x4xf32>, tensor<2x3x5x2x4xf32>, tensor<2x3x5x2x4xf32>
// CHECK:         %[[RQ:.*]] = bt.rotary %[[Q]], %[[POS]] rotary_dims 2 base 1.000000e+04 : tensor<2x3x5x2x4xf32>, tensor<5xi64> -> tensor<2x3x5x2x4xf32>
// CHECK:         %[[RK:.*]] = bt.rotary %[[K]], %[[POS]]
// CHECK:         %[[ATT:.*]] = bt.local_attention %[[RQ]], %[[RK]], %[[V]] key_mask %[[KEYMASK]] scale 5.000000e-01 : tensor<2x3x5x2x4xf32>, tensor<2x3x5xi64> -> tensor<2x3x5x2x4xf32>
// CHECK:         %[[MERGED:.*]] = tensor.collapse_shape %[[ATT]] {{\[}}[0], [1], [2], [3, 4]] : tensor<2x3x5x2x4xf32> into tensor<2x3x5x8xf32>
// CHECK:         %[[A:.*]] = bt.linear %[[MERGED]]
// CHECK:         bt.layer_norm %[[IN]]
// CHECK:         bt.gelu {{.*}} : tensor<2x3x5x16xf32>
// CHECK:         %[[M:.*]] = bt.linear
// CHECK:         %[[MA:.*]] = arith.addf %[[M]], %[[A]] : tensor<2x3x5x8xf32>
// CHECK:         %[[X1:.*]] = arith.addf %[[MA]], %[[IN]] : tensor<2x3x5x8xf32>
// CHECK:         bt.param_ref @token_decoder.gpt_neox.final_layer_norm.weight
// CHECK:         bt.param_ref @token_decoder.gpt_neox.final_layer_norm.bias
// CHECK:         %[[HID:.*]] = bt.layer_norm %[[X1]]
// Outputs at positions P-1 .. P+L_B-2 = 1 .. 4.
// CHECK:         %[[OUT:.*]] = tensor.extract_slice %[[HID]][0, 0, 1, 0] [2, 3, 4, 8] [1, 1, 1, 1] : tensor<2x3x5x8xf32> to tensor<2x3x4x8xf32>
// CHECK:         return %[[OUT]] : tensor<2x3x4x8xf32>
  func.func @prefix(%ctx: tensor<2x3x12xf32>, %ids: tensor<2x3x4xi64>, %m: tensor<2x3x4xi64>) -> tensor<2x3x4x8xf32> {
    %h = bt.token_decoder %ctx, %ids mask %m params "token_decoder" config #td strategy prefix prefix_length 2
        : tensor<2x3x12xf32>, tensor<2x3x4xi64>, tensor<2x3x4xi64> -> tensor<2x3x4x8xf32>
    return %h : tensor<2x3x4x8xf32>
  }

// Without a mask there is no key mask.
// CHECK-LABEL: func.func @prefix_no_mask
// CHECK:         bt.local_attention %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}} scale 5.000000e-01 : tensor<2x3x5x2x4xf32> -> tensor<2x3x5x2x4xf32>
  func.func @prefix_no_mask(%ctx: tensor<2x3x12xf32>, %ids: tensor<2x3x4xi64>) -> tensor<2x3x4x8xf32> {
    %h = bt.token_decoder %ctx, %ids params "token_decoder" config #td strategy prefix prefix_length 2
        : tensor<2x3x12xf32>, tensor<2x3x4xi64> -> tensor<2x3x4x8xf32>
    return %h : tensor<2x3x4x8xf32>
  }

// Dynamic B and N (and an i1 mask): slices and the ones use tensor.dim;
// S stays static.
// CHECK-LABEL: func.func @prefix_dynamic
// CHECK-SAME:    (%[[CTX:.*]]: tensor<?x?x12xf32>, %[[IDS:.*]]: tensor<?x?x4xi64>, %[[MASK:.*]]: tensor<?x?x4xi1>)
// CHECK:         %[[PREFIX:.*]] = bt.prefix_projection %[[CTX]], {{.*}} -> tensor<?x?x2x8xf32>
// CHECK:         %[[B:.*]] = tensor.dim %[[IDS]], %{{.*}}
// CHECK:         %[[N:.*]] = tensor.dim %[[IDS]], %{{.*}}
// CHECK:         %[[IN_IDS:.*]] = tensor.extract_slice %[[IDS]][0, 0, 0] [%[[B]], %[[N]], 3] [1, 1, 1] : tensor<?x?x4xi64> to tensor<?x?x3xi64>
// CHECK:         %[[TOK:.*]] = bt.embedding_lookup %[[IN_IDS]]
// CHECK:         %[[IN:.*]] = tensor.concat dim(2) %[[PREFIX]], %[[TOK]] : (tensor<?x?x2x8xf32>, tensor<?x?x3x8xf32>) -> tensor<?x?x5x8xf32>
// CHECK:         %[[TRUE:.*]] = arith.constant true
// CHECK:         %[[MB:.*]] = tensor.dim %[[MASK]], %{{.*}}
// CHECK:         %[[MN:.*]] = tensor.dim %[[MASK]], %{{.*}}
// CHECK:         %[[ONES:.*]] = tensor.splat %[[TRUE]][%[[MB]], %[[MN]]] : tensor<?x?x2xi1>
// CHECK:         %[[IN_MASK:.*]] = tensor.extract_slice %[[MASK]][0, 0, 0] [%{{.*}}, %{{.*}}, 3] [1, 1, 1] : tensor<?x?x4xi1> to tensor<?x?x3xi1>
// CHECK:         %[[KEYMASK:.*]] = tensor.concat dim(2) %[[ONES]], %[[IN_MASK]] : (tensor<?x?x2xi1>, tensor<?x?x3xi1>) -> tensor<?x?x5xi1>
// CHECK:         arith.constant dense<[0, 1, 2, 3, 4]> : tensor<5xi64>
// CHECK:         bt.local_attention {{.*}} key_mask %[[KEYMASK]] {{.*}} : tensor<?x?x5x2x4xf32>, tensor<?x?x5xi1> -> tensor<?x?x5x2x4xf32>
// CHECK:         bt.param_ref @token_decoder.gpt_neox.final_layer_norm.bias
// CHECK-NEXT:    %[[HID:.*]] = bt.layer_norm {{.*}} -> tensor<?x?x5x8xf32>
// CHECK:         %[[OUT:.*]] = tensor.extract_slice %[[HID]][0, 0, 1, 0] [%{{.*}}, %{{.*}}, 4, 8] [1, 1, 1, 1] : tensor<?x?x5x8xf32> to tensor<?x?x4x8xf32>
// CHECK:         return %[[OUT]]
  func.func @prefix_dynamic(%ctx: tensor<?x?x12xf32>, %ids: tensor<?x?x4xi64>, %m: tensor<?x?x4xi1>) -> tensor<?x?x4x8xf32> {
    %h = bt.token_decoder %ctx, %ids mask %m params "token_decoder" config #td strategy prefix prefix_length 2
        : tensor<?x?x12xf32>, tensor<?x?x4xi64>, tensor<?x?x4xi1> -> tensor<?x?x4x8xf32>
    return %h : tensor<?x?x4x8xf32>
  }

// Summation (MEGABYTE), L_B = 4: the projection gives L_B vectors added to
// [E(bos), E(t_0) .. E(t_2)]; S = L_B; all L_B outputs are the result.
// CHECK-LABEL: func.func @summation
// CHECK-SAME:    (%[[CTX:.*]]: tensor<2x3x12xf32>, %[[IDS:.*]]: tensor<2x3x4xi32>, %[[MASK:.*]]: tensor<2x3x4xi32>)
// CHECK:         %[[EW:.*]] = bt.param_ref @sum_decoder.expansion_layer.weight : tensor<32x12x1xf32>
// CHECK:         %[[EB:.*]] = bt.param_ref @sum_decoder.expansion_layer.bias : tensor<32xf32>
// CHECK:         %[[TABLE:.*]] = bt.param_ref @sum_decoder.gpt_neox.embed_in.weight : tensor<16x8xf32>
// CHECK:         %[[E:.*]] = bt.prefix_projection %[[CTX]], %[[EW]], %[[EB]] prefix_length 4 : tensor<2x3x12xf32>, tensor<32x12x1xf32>, tensor<32xf32> -> tensor<2x3x4x8xf32>
// CHECK:         %[[TAIL:.*]] = tensor.extract_slice %[[IDS]][0, 0, 0] [2, 3, 3] [1, 1, 1] : tensor<2x3x4xi32> to tensor<2x3x3xi32>
// CHECK:         %[[BOS:.*]] = arith.constant dense<7> : tensor<2x3x1xi32>
// CHECK:         %[[IN_IDS:.*]] = tensor.concat dim(2) %[[BOS]], %[[TAIL]] : (tensor<2x3x1xi32>, tensor<2x3x3xi32>) -> tensor<2x3x4xi32>
// CHECK:         %[[TOK:.*]] = bt.embedding_lookup %[[IN_IDS]], %[[TABLE]] : tensor<2x3x4xi32>, tensor<16x8xf32> -> tensor<2x3x4x8xf32>
// CHECK:         %[[IN:.*]] = arith.addf %[[TOK]], %[[E]] : tensor<2x3x4x8xf32>
// CHECK:         %[[ONE:.*]] = arith.constant dense<1> : tensor<2x3x1xi32>
// CHECK:         %[[IN_MASK:.*]] = tensor.extract_slice %[[MASK]][0, 0, 0] [2, 3, 3] [1, 1, 1] : tensor<2x3x4xi32> to tensor<2x3x3xi32>
// CHECK:         %[[KEYMASK:.*]] = tensor.concat dim(2) %[[ONE]], %[[IN_MASK]] : (tensor<2x3x1xi32>, tensor<2x3x3xi32>) -> tensor<2x3x4xi32>
// CHECK:         %[[POS:.*]] = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
// CHECK:         bt.layer_norm %[[IN]]
// CHECK:         bt.rotary %{{.*}}, %[[POS]] {{.*}} : tensor<2x3x4x2x4xf32>, tensor<4xi64>
// CHECK:         bt.local_attention {{.*}} key_mask %[[KEYMASK]]
// CHECK:         arith.addf %{{.*}}, %[[IN]] : tensor<2x3x4x8xf32>
// CHECK:         bt.param_ref @sum_decoder.gpt_neox.final_layer_norm.bias
// CHECK-NEXT:    %[[HID:.*]] = bt.layer_norm {{.*}} -> tensor<2x3x4x8xf32>
// CHECK-NEXT:    return %[[HID]] : tensor<2x3x4x8xf32>
  func.func @summation(%ctx: tensor<2x3x12xf32>, %ids: tensor<2x3x4xi32>, %m: tensor<2x3x4xi32>) -> tensor<2x3x4x8xf32> {
    %h = bt.token_decoder %ctx, %ids mask %m params "sum_decoder" config #td strategy summation prefix_length 4 {bos_token_id = 7 : i64}
        : tensor<2x3x12xf32>, tensor<2x3x4xi32>, tensor<2x3x4xi32> -> tensor<2x3x4x8xf32>
    return %h : tensor<2x3x4x8xf32>
  }

// L_B = 1 (prefix strategy, P = 3): no token inputs at all; the input is the
// prefix alone (S = P), the mask has nothing to contribute, and the output
// is position P-1.
// CHECK-LABEL: func.func @prefix_block_length_one
// CHECK-NOT:     bt.embedding_lookup
// CHECK-NOT:     tensor.concat
// CHECK:         %[[PREFIX:.*]] = bt.prefix_projection {{.*}} -> tensor<2x3x3x8xf32>
// CHECK:         %[[POS:.*]] = arith.constant dense<[0, 1, 2]> : tensor<3xi64>
// CHECK:         bt.layer_norm %[[PREFIX]]
// CHECK:         bt.local_attention %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}} scale
// CHECK:         bt.param_ref @one_decoder.gpt_neox.final_layer_norm.bias
// CHECK-NEXT:    %[[HID:.*]] = bt.layer_norm {{.*}} -> tensor<2x3x3x8xf32>
// CHECK:         tensor.extract_slice %[[HID]][0, 0, 2, 0] [2, 3, 1, 8] [1, 1, 1, 1] : tensor<2x3x3x8xf32> to tensor<2x3x1x8xf32>
  func.func @prefix_block_length_one(%ctx: tensor<2x3x12xf32>, %ids: tensor<2x3x1xi64>, %m: tensor<2x3x1xi64>) -> tensor<2x3x1x8xf32> {
    %h = bt.token_decoder %ctx, %ids mask %m params "one_decoder" config #td strategy prefix prefix_length 3
        : tensor<2x3x12xf32>, tensor<2x3x1xi64>, tensor<2x3x1xi64> -> tensor<2x3x1x8xf32>
    return %h : tensor<2x3x1x8xf32>
  }
}
