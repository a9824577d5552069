// RUN: bt-opt %s --bt-decompose --bt-verify-kv-lifetimes | FileCheck %s
// RUN: bt-opt %s --bt-decompose | FileCheck %s --check-prefix=NOMODEL

// bt-decompose on bt.block_decoder with a global KV cache (prefill and
// decode-block forms of generation): positions continue after the cached
// blocks (kv_length of the cache before the append), each layer appends its
// keys/values (with the block mask as key-padding flags) and attends over its
// layer of the cache; the op's cache result is the last append's result. The
// result must keep linear, complete cache lifetimes (--bt-verify-kv-lifetimes).

// NOMODEL-NOT: bt.block_decoder

#bd = #bt.neox<hidden = 8, layers = 2, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>
!g = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 4, f32>

module {
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

// CHECK-LABEL: func.func @prefill_then_decode
// CHECK-SAME:    (%[[PROMPT:.*]]: tensor<?x3x8xf32>, %[[PMASK:.*]]: tensor<?x3xi64>, %[[NEXT:.*]]: tensor<?x1x8xf32>)
// CHECK:         %[[G0:.*]] = bt.kv_alloc batch
//
// Prefill (3 blocks, masked): positions = kv_length(G0) + 0..2.
// CHECK:         %[[LEN0:.*]] = bt.kv_length %[[G0]][0]
// CHECK:         %[[POS0:.*]] = tensor.generate  {
// CHECK-NEXT:    ^bb0(%[[I:.*]]: index):
// CHECK-NEXT:      %[[S:.*]] = arith.addi %[[LEN0]], %[[I]] : index
// CHECK-NEXT:      %[[P:.*]] = arith.index_cast %[[S]] : index to i64
// CHECK-NEXT:      tensor.yield %[[P]] : i64
// CHECK-NEXT:    } : tensor<3xi64>
// CHECK:         bt.layer_norm %[[PROMPT]]
// CHECK:         %[[Q:.*]], %[[K:.*]], %[[V:.*]] = bt.split_qkv
// CHECK:         %[[RQ:.*]] = bt.rotary %[[Q]], %[[POS0]]
// CHECK:         %[[RK:.*]] = bt.rotary %[[K]], %[[POS0]]
// CHECK:         %[[G1:.*]] = bt.kv_append %[[G0]][0], %[[RK]], %[[V]] key_mask %[[PMASK]] : !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 16, head_dim = 4, f32>, tensor<?x3x2x4xf32>, tensor<?x3xi64>
// CHECK:         %[[O:.*]] = bt.kv_attend %[[RQ]], %[[G1]][0] scale 5.000000e-01 : tensor<?x3x2x4xf32>, !bt.kv_cache<{{.*}}> -> tensor<?x3x2x4xf32>
// CHECK:         tensor.collapse_shape %[[O]] {{\[}}[0], [1], [2, 3]] : tensor<?x3x2x4xf32> into tensor<?x3x8xf32>
// CHECK:         %[[Q1:.*]], %[[K1:.*]], %[[V1:.*]] = bt.split_qkv
// CHECK:         %[[RQ1:.*]] = bt.rotary %[[Q1]], %[[POS0]]
// CHECK:         %[[RK1:.*]] = bt.rotary %[[K1]], %[[POS0]]
// CHECK:         %[[G2:.*]] = bt.kv_append %[[G1]][1], %[[RK1]], %[[V1]] key_mask %[[PMASK]]
// CHECK:         bt.kv_attend %[[RQ1]], %[[G2]][1] scale 5.000000e-01
// CHECK:         bt.param_ref @block_decoder.gpt_neox.final_layer_norm.bias
// CHECK-NEXT:    %[[CTX:.*]] = bt.layer_norm
//
// Decode one block (no mask) on the prefilled cache: positions continue at
// kv_length(G2).
// CHECK:         %[[LEN1:.*]] = bt.kv_length %[[G2]][0]
// CHECK:         %[[POS1:.*]] = tensor.generate  {
// CHECK:           arith.addi %[[LEN1]], %{{.*}} : index
// CHECK:         } : tensor<1xi64>
// CHECK:         bt.layer_norm %[[NEXT]]
// CHECK:         %[[RQ2:.*]] = bt.rotary %{{.*}}, %[[POS1]]
// CHECK:         %[[RK2:.*]] = bt.rotary %{{.*}}, %[[POS1]]
// CHECK:         %[[G3:.*]] = bt.kv_append %[[G2]][0], %[[RK2]], %{{[^ ]*}} : !bt.kv_cache
// CHECK:         bt.kv_attend %[[RQ2]], %[[G3]][0]
// CHECK:         %[[G4:.*]] = bt.kv_append %[[G3]][1], %{{[^ ]*}}, %{{[^ ]*}} : !bt.kv_cache
// CHECK:         bt.kv_attend %{{.*}}, %[[G4]][1]
// CHECK:         bt.param_ref @block_decoder.gpt_neox.final_layer_norm.bias
// CHECK-NEXT:    %[[Y:.*]] = bt.layer_norm
// CHECK:         bt.kv_release %[[G4]]
// CHECK-NEXT:    return %[[CTX]], %[[Y]]
  func.func @prefill_then_decode(%prompt: tensor<?x3x8xf32>, %pm: tensor<?x3xi64>, %next: tensor<?x1x8xf32>)
      -> (tensor<?x3x8xf32>, tensor<?x1x8xf32>) {
    %c0 = arith.constant 0 : index
    %b = tensor.dim %prompt, %c0 : tensor<?x3x8xf32>
    %g0 = bt.kv_alloc batch %b : !g
    %ctx, %g1 = bt.block_decoder %prompt mask %pm cache %g0 params "block_decoder.gpt_neox" config #bd
        : tensor<?x3x8xf32>, tensor<?x3xi64>, !g -> tensor<?x3x8xf32>, !g
    %y, %g2 = bt.block_decoder %next cache %g1 params "block_decoder.gpt_neox" config #bd
        : tensor<?x1x8xf32>, !g -> tensor<?x1x8xf32>, !g
    bt.kv_release %g2 : !g
    return %ctx, %y : tensor<?x3x8xf32>, tensor<?x1x8xf32>
  }

// Decode steps in a loop: the cache is carried as an iter_arg; the decomposed
// body yields the last append's result. Dynamic N: positions over dim 1.
// CHECK-LABEL: func.func @decode_loop
// CHECK:         scf.for {{.*}} iter_args(%[[X:.*]] = %{{.*}}, %[[C:.*]] = %{{.*}})
// CHECK:           %[[LEN:.*]] = bt.kv_length %[[C]][0]
// CHECK:           %[[N:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<2x?x8xf32>
// CHECK:           tensor.generate %[[N]] {
// CHECK:             arith.addi %[[LEN]], %{{.*}} : index
// CHECK:           } : tensor<?xi64>
// CHECK:           %[[C1:.*]] = bt.kv_append %[[C]][0], {{.*}} key_mask %{{.*}} : {{.*}}, tensor<2x?x2x4xf32>, tensor<2x?xi64>
// CHECK:           %[[C2:.*]] = bt.kv_append %[[C1]][1]
// CHECK:           scf.yield %{{.*}}, %[[C2]]
// CHECK-NOT:     bt.block_decoder
  func.func @decode_loop(%x0: tensor<2x?x8xf32>, %m: tensor<2x?xi64>, %steps: index) -> tensor<2x?x8xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %g0 = bt.kv_alloc batch %c2 : !g
    %r:2 = scf.for %i = %c0 to %steps step %c1 iter_args(%x = %x0, %c = %g0) -> (tensor<2x?x8xf32>, !g) {
      %y, %c_next = bt.block_decoder %x mask %m cache %c params "block_decoder.gpt_neox" config #bd
          : tensor<2x?x8xf32>, tensor<2x?xi64>, !g -> tensor<2x?x8xf32>, !g
      scf.yield %y, %c_next : tensor<2x?x8xf32>, !g
    }
    bt.kv_release %r#1 : !g
    return %r#0 : tensor<2x?x8xf32>
  }
}
