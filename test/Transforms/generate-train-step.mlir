// RUN: bt-opt %s --bt-generate-train-step="train-step=false" | FileCheck %s
// RUN: bt-opt %s --bt-generate-train-step="train-step=false beta1=0.8 beta2=0.99 eps=1e-6 weight-decay=0.01 max-grad-norm=0.5 cos-min-ratio=0.2 warmup-min-ratio=0.05 initial-lr-ratio=0" | FileCheck %s --check-prefix=OPTS
// RUN: bt-opt %s --bt-generate-train-step | FileCheck %s --check-prefix=TRAIN
// RUN: bt-opt %s --bt-generate-train-step --bt-decompose --bt-cpu-pipeline > /dev/null

// bt-generate-train-step builds apply_gradients from eval_loss: one gradient
// input, and in-out param / adam_m / adam_v, per parameter the loss reads
// (declaration order; @unused is not read and not trained), the schedule
// scalars, and the optimizer: global norm → clip coefficient → schedule →
// one bt.adamw per parameter, whose results are returned as the in-out
// arguments' new values. The forward is unchanged. train_step: the forward
// on the batch (decomposed, the weights read from the in-out parameters),
// the reverse sweep (bt::buildParamGradients), then the same optimizer on
// the computed gradients. Both go through the CPU pipeline, whose
// bt-drop-inout-results fails if bufferization copied a parameter or moment.

#cfg = #bt.neox<hidden = 8, layers = 1, heads = 2, head_dim = 4, intermediate = 16, rotary_dims = 2, rotary_base = 10000.0, eps = 1.0e-05>

module {
  bt.param @"gpt_neox.embed_in.weight" : tensor<16x8xf32>
  bt.param @unused : tensor<3xf32>
  bt.param @"gpt_neox.layers.0.input_layernorm.weight" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.input_layernorm.bias" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.attention.query_key_value.weight" : tensor<24x8xf32>
  bt.param @"gpt_neox.layers.0.attention.query_key_value.bias" : tensor<24xf32>
  bt.param @"gpt_neox.layers.0.attention.dense.weight" : tensor<8x8xf32>
  bt.param @"gpt_neox.layers.0.attention.dense.bias" : tensor<8xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<16x8xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<16xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<8x16xf32>
  bt.param @"gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<8xf32>
  bt.param @"gpt_neox.final_layer_norm.weight" : tensor<8xf32>
  bt.param @"gpt_neox.final_layer_norm.bias" : tensor<8xf32>
  bt.param @"embed_out.weight" : tensor<16x8xf32>

  func.func @eval_loss(%ids: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "input_ids"},
                       %mask: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "attention_mask"},
                       %labels: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "labels"})
      -> (tensor<?x?x16xf32> {bt.dims = ["B", "T", "V"], bt.name = "logits"},
          tensor<f32> {bt.dims = [], bt.name = "loss"}) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %b = tensor.dim %ids, %c0 : tensor<?x?xi64>
    %t = tensor.dim %ids, %c1 : tensor<?x?xi64>
    %ids3 = tensor.expand_shape %ids [[0], [1, 2]] output_shape [%b, %t, 1] : tensor<?x?xi64> into tensor<?x?x1xi64>
    %x = bt.embedder %ids3 table @"gpt_neox.embed_in.weight" : tensor<?x?x1xi64> -> tensor<?x?x8xf32>
    %h = bt.block_decoder %x mask %mask params "gpt_neox" config #cfg : tensor<?x?x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
    %logits = bt.lm_head %h weight @"embed_out.weight" : tensor<?x?x8xf32> -> tensor<?x?x16xf32>
    %loss = bt.cross_entropy %logits, %labels : tensor<?x?x16xf32>, tensor<?x?xi64> -> tensor<f32>
    return %logits, %loss : tensor<?x?x16xf32>, tensor<f32>
  }
}

// CHECK-LABEL: func.func @eval_loss(
// CHECK:         bt.block_decoder
// CHECK-NOT:     bt.adamw
// CHECK:         return

// CHECK-LABEL: func.func @apply_gradients(
// CHECK-SAME:    %[[G0:[^:]*]]: tensor<16x8xf32> {bt.name = "grad.gpt_neox.embed_in.weight"},
// CHECK-NOT:     grad.unused
// CHECK-SAME:    %[[G1:[^:]*]]: tensor<8xf32> {bt.name = "grad.gpt_neox.layers.0.input_layernorm.weight"},
// CHECK-SAME:    {bt.name = "grad.embed_out.weight"},
// CHECK-SAME:    %[[STEP:[^:]*]]: tensor<i64> {bt.name = "step"},
// CHECK-SAME:    %[[PEAK:[^:]*]]: tensor<f32> {bt.name = "peak_lr"},
// CHECK-SAME:    %[[WARM:[^:]*]]: tensor<i64> {bt.name = "warmup_steps"},
// CHECK-SAME:    %[[TOTAL:[^:]*]]: tensor<i64> {bt.name = "total_steps"},
// CHECK-SAME:    %[[P0:[^:]*]]: tensor<16x8xf32> {bt.inout, bt.name = "param.gpt_neox.embed_in.weight"},
// CHECK-SAME:    %[[P1:[^:]*]]: tensor<8xf32> {bt.inout, bt.name = "param.gpt_neox.layers.0.input_layernorm.weight"},
// CHECK-SAME:    {bt.inout, bt.name = "param.embed_out.weight"},
// CHECK-SAME:    %[[M0:[^:]*]]: tensor<16x8xf32> {bt.inout, bt.name = "adam_m.gpt_neox.embed_in.weight"},
// CHECK-SAME:    {bt.inout, bt.name = "adam_m.embed_out.weight"},
// CHECK-SAME:    %[[V0:[^:]*]]: tensor<16x8xf32> {bt.inout, bt.name = "adam_v.gpt_neox.embed_in.weight"},
// CHECK-SAME:    {bt.inout, bt.name = "adam_v.embed_out.weight"})
// CHECK-SAME:    -> (tensor<f32> {bt.name = "grad_norm"}, tensor<f32> {bt.name = "lr"},
// CHECK-SAME:    tensor<16x8xf32> {bt.inout_arg = "param.gpt_neox.embed_in.weight", bt.name = "param.gpt_neox.embed_in.weight"},
// CHECK-SAME:    tensor<16x8xf32> {bt.inout_arg = "adam_m.gpt_neox.embed_in.weight", bt.name = "adam_m.gpt_neox.embed_in.weight"},
// CHECK-SAME:    tensor<16x8xf32> {bt.inout_arg = "adam_v.embed_out.weight", bt.name = "adam_v.embed_out.weight"})
// CHECK-NOT:     unused
// CHECK:         %[[N:.*]] = bt.global_norm %[[G0]], %[[G1]], {{.*}} : tensor<16x8xf32>, tensor<8xf32>,
// CHECK:         %[[C:.*]] = bt.clip_coefficient %[[N]] max_norm 1.000000e+00{{$}}
// CHECK:         %[[LR:.*]] = bt.lr_schedule %[[STEP]], %[[PEAK]], %[[WARM]], %[[TOTAL]]{{$}}
// CHECK:         %[[P0N:[^,]*]], %[[M0N:[^,]*]], %[[V0N:[^ ]*]] = bt.adamw %[[P0]], %[[G0]], %[[M0]], %[[V0]] lr %[[LR]] step %[[STEP]] clip %[[C]] beta1 9.000000e-01 beta2 0.94999999999999996 eps 1.000000e-08 weight_decay 1.000000e-01 : tensor<16x8xf32>, tensor<16x8xf32>
// CHECK:         %[[P1N:[^,]*]], %[[M1N:[^,]*]], %[[V1N:[^ ]*]] = bt.adamw %[[P1]], %[[G1]]
// CHECK-COUNT-14: bt.adamw
// CHECK-NOT:     bt.adamw
// CHECK:         return %[[N]], %[[LR]], %[[P0N]], %[[P1N]], {{.*}}, %[[M0N]], %[[M1N]], {{.*}}, %[[V0N]], %[[V1N]],

// OPTS-LABEL: func.func @apply_gradients(
// OPTS:         bt.clip_coefficient %{{.*}} max_norm 5.000000e-01{{$}}
// OPTS:         bt.lr_schedule %{{.*}} {cos_min_ratio = 2.000000e-01 : f64, initial_ratio = 0.000000e+00 : f64, warmup_min_ratio = 5.000000e-02 : f64}
// OPTS:         bt.adamw {{.*}} beta1 8.000000e-01 beta2 0.98999999999999999 eps 9.9999999999999995E-7 weight_decay 1.000000e-02

// TRAIN-LABEL: func.func @train_step(
// TRAIN-SAME:    %[[IDS:[^:]*]]: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "input_ids"},
// TRAIN-SAME:    %{{[^:]*}}: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "attention_mask"},
// TRAIN-SAME:    %[[LABELS:[^:]*]]: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "labels"},
// TRAIN-SAME:    %[[STEP:[^:]*]]: tensor<i64> {bt.name = "step"},
// TRAIN-SAME:    %[[PEAK:[^:]*]]: tensor<f32> {bt.name = "peak_lr"},
// TRAIN-SAME:    %[[WARM:[^:]*]]: tensor<i64> {bt.name = "warmup_steps"},
// TRAIN-SAME:    %[[TOTAL:[^:]*]]: tensor<i64> {bt.name = "total_steps"},
// TRAIN-SAME:    %[[EMB:[^:]*]]: tensor<16x8xf32> {bt.inout, bt.name = "param.gpt_neox.embed_in.weight"},
// TRAIN-NOT:     unused
// TRAIN-SAME:    %[[HEAD:[^:]*]]: tensor<16x8xf32> {bt.inout, bt.name = "param.embed_out.weight"},
// TRAIN-SAME:    %[[MEMB:[^:]*]]: tensor<16x8xf32> {bt.inout, bt.name = "adam_m.gpt_neox.embed_in.weight"},
// TRAIN-SAME:    %[[VEMB:[^:]*]]: tensor<16x8xf32> {bt.inout, bt.name = "adam_v.gpt_neox.embed_in.weight"},
// TRAIN-SAME:    -> (tensor<f32> {bt.dims = [], bt.name = "loss"}, tensor<f32> {bt.name = "grad_norm"}, tensor<f32> {bt.name = "lr"},
// TRAIN-SAME:    tensor<16x8xf32> {bt.inout_arg = "param.gpt_neox.embed_in.weight", bt.name = "param.gpt_neox.embed_in.weight"},
// TRAIN-NOT:     bt.param_ref
// TRAIN:         bt.embedding_lookup %{{.*}}, %[[EMB]]
// TRAIN:         bt.linear %{{.*}}, %[[HEAD]] :
// TRAIN:         %[[LOSS:.*]] = bt.cross_entropy %{{.*}}, %[[LABELS]]
// TRAIN:         bt.cross_entropy_grad
// TRAIN:         %[[GEMB:.*]] = bt.embedding_grad
// TRAIN:         %[[N:.*]] = bt.global_norm %[[GEMB]], {{.*}} : tensor<16x8xf32>, tensor<8xf32>,
// TRAIN:         %[[C:.*]] = bt.clip_coefficient %[[N]] max_norm 1.000000e+00{{$}}
// TRAIN:         %[[LR:.*]] = bt.lr_schedule %[[STEP]], %[[PEAK]], %[[WARM]], %[[TOTAL]]{{$}}
// TRAIN:         %[[P0:[^,]*]], %[[M0:[^,]*]], %[[V0:[^ ]*]] = bt.adamw %[[EMB]], %[[GEMB]], %[[MEMB]], %[[VEMB]] lr %[[LR]] step %[[STEP]] clip %[[C]]
// TRAIN-COUNT-15: bt.adamw
// TRAIN-NOT:     bt.adamw
// TRAIN-NOT:     bt.param_ref
// TRAIN:         return %[[LOSS]], %[[N]], %[[LR]], %[[P0]], {{.*}}, %[[M0]], {{.*}}, %[[V0]],
