// RUN: bt-opt %s --bt-generate-gradients | FileCheck %s
// RUN: bt-opt %s --bt-generate-gradients="from=eval_loss name=g2" | FileCheck %s --check-prefix=NAMED
// RUN: bt-opt %s --bt-generate-gradients="from=select name=gsel" | FileCheck %s --check-prefix=SELECT

// A small layer-level training graph (the shape of bt-decompose's output):
// embedding → layer_norm → linear → gelu → linear (Conv1d weight) → shared
// LM head used twice (summed gradients) → cross_entropy. `grad` gets the
// arguments of eval_loss and returns loss and one grad.<param> per parameter,
// in declaration order.

module {
  bt.param @"emb.weight" : tensor<32x8xf32>
  bt.param @"ln.weight" : tensor<8xf32>
  bt.param @"ln.bias" : tensor<8xf32>
  bt.param @"up.weight" : tensor<16x8xf32>
  bt.param @"up.bias" : tensor<16xf32>
  bt.param @"down.weight" : tensor<8x16x1xf32>
  bt.param @"head.weight" : tensor<32x8xf32>
  bt.param @"unused.weight" : tensor<4xf32>

  func.func @eval_loss(%ids: tensor<?x?xi64> {bt.name = "input_ids", bt.dims = ["B", "T"]},
                       %labels: tensor<?x?xi64> {bt.name = "labels", bt.dims = ["B", "T"]})
      -> (tensor<?x?x32xf32> {bt.name = "logits", bt.dims = ["B", "T", "V"]},
          tensor<f32> {bt.name = "loss", bt.dims = []}) {
    %emb = bt.param_ref @"emb.weight" : tensor<32x8xf32>
    %x = bt.embedding_lookup %ids, %emb : tensor<?x?xi64>, tensor<32x8xf32> -> tensor<?x?x8xf32>
    %lw = bt.param_ref @"ln.weight" : tensor<8xf32>
    %lb = bt.param_ref @"ln.bias" : tensor<8xf32>
    %h = bt.layer_norm %x, %lw, %lb eps 1.0e-05 : tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
    %uw = bt.param_ref @"up.weight" : tensor<16x8xf32>
    %ub = bt.param_ref @"up.bias" : tensor<16xf32>
    %u = bt.linear %h, %uw, %ub : tensor<?x?x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<?x?x16xf32>
    %g = bt.gelu %u : tensor<?x?x16xf32>
    %dw = bt.param_ref @"down.weight" : tensor<8x16x1xf32>
    %d = bt.linear %g, %dw : tensor<?x?x16xf32>, tensor<8x16x1xf32> -> tensor<?x?x8xf32>
    %r = arith.addf %d, %x : tensor<?x?x8xf32>
    %hw = bt.param_ref @"head.weight" : tensor<32x8xf32>
    %l1 = bt.linear %r, %hw : tensor<?x?x8xf32>, tensor<32x8xf32> -> tensor<?x?x32xf32>
    %hw2 = bt.param_ref @"head.weight" : tensor<32x8xf32>
    %l2 = bt.linear %h, %hw2 : tensor<?x?x8xf32>, tensor<32x8xf32> -> tensor<?x?x32xf32>
    %logits = arith.addf %l1, %l2 : tensor<?x?x32xf32>
    %loss = bt.cross_entropy %logits, %labels : tensor<?x?x32xf32>, tensor<?x?xi64> -> tensor<f32>
    return %logits, %loss : tensor<?x?x32xf32>, tensor<f32>
  }

  // arith.select with an elementwise condition (from integer ids): the
  // gradient goes to the chosen side, zero to the other.
  func.func @select(%ids: tensor<4xi64>, %labels: tensor<4xi64>) -> (tensor<f32> {bt.name = "loss"}) {
    %emb = bt.param_ref @"emb.weight" : tensor<32x8xf32>
    %x = bt.embedding_lookup %ids, %emb : tensor<4xi64>, tensor<32x8xf32> -> tensor<4x8xf32>
    %hw = bt.param_ref @"head.weight" : tensor<32x8xf32>
    %l = bt.linear %x, %hw : tensor<4x8xf32>, tensor<32x8xf32> -> tensor<4x32xf32>
    %z = arith.constant dense<0.0> : tensor<4x32xf32>
    %c0 = arith.constant dense<0> : tensor<4x32xi64>
    %c = arith.constant dense<3> : tensor<4x32xi64>
    %cond = arith.cmpi sgt, %c, %c0 : tensor<4x32xi64>
    %s = arith.select %cond, %l, %z : tensor<4x32xi1>, tensor<4x32xf32>
    %loss = bt.cross_entropy %s, %labels : tensor<4x32xf32>, tensor<4xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// The forward is kept as it was.
// CHECK-LABEL: func.func @eval_loss(
// CHECK-NOT: bt.cross_entropy_grad
// CHECK: return

// CHECK-LABEL: func.func @grad(
// CHECK-SAME: %{{.*}}: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "input_ids"}
// CHECK-SAME: %{{.*}}: tensor<?x?xi64> {bt.dims = ["B", "T"], bt.name = "labels"}
// CHECK-SAME: -> (tensor<f32> {bt.dims = [], bt.name = "loss"},
// CHECK-SAME: tensor<32x8xf32> {bt.dims = ["", ""], bt.name = "grad.emb.weight"},
// CHECK-SAME: tensor<8xf32> {bt.dims = [""], bt.name = "grad.ln.weight"},
// CHECK-SAME: tensor<8xf32> {bt.dims = [""], bt.name = "grad.ln.bias"},
// CHECK-SAME: tensor<16x8xf32> {bt.dims = ["", ""], bt.name = "grad.up.weight"},
// CHECK-SAME: tensor<16xf32> {bt.dims = [""], bt.name = "grad.up.bias"},
// CHECK-SAME: tensor<8x16x1xf32> {bt.dims = ["", "", ""], bt.name = "grad.down.weight"},
// CHECK-SAME: tensor<32x8xf32> {bt.dims = ["", ""], bt.name = "grad.head.weight"})
// CHECK: %[[LOSS:.*]] = bt.cross_entropy
// CHECK: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DLOGITS:.*]] = bt.cross_entropy_grad %{{.*}}, %{{.*}}, %[[ONE]]
// The two uses of the LM head: dW = dyᵀ · x per use, summed.
// CHECK: %[[DW2:.*]] = linalg.matmul_transpose_a
// CHECK: %[[DW1:.*]] = linalg.matmul_transpose_a
// CHECK: %[[DHEAD:.*]] = arith.addf %[[DW2]], %[[DW1]] : tensor<32x8xf32>
// The Conv1d weight gradient is expanded back to [N, K, 1].
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2]] output_shape [8, 16, 1] : tensor<8x16xf32> into tensor<8x16x1xf32>
// CHECK: linalg.generic
// CHECK: math.erf
// CHECK: bt.layer_norm_grad
// CHECK: bt.embedding_grad %{{.*}}, %{{.*}} : tensor<?x?xi64>, tensor<?x?x8xf32> -> tensor<32x8xf32>
// CHECK: return %[[LOSS]], {{.*}}, %[[DHEAD]] : tensor<f32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<16xf32>, tensor<8x16x1xf32>, tensor<32x8xf32>

// NAMED-LABEL: func.func @g2(

// SELECT-LABEL: func.func @gsel(
//       SELECT:   %[[COND:.*]] = arith.cmpi sgt
//       SELECT:   %[[DS:.*]] = bt.cross_entropy_grad
//       SELECT:   %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4x32xf32>)
//       SELECT:   %[[DL:.*]] = arith.select %[[COND]], %[[DS]], %[[ZERO]] : tensor<4x32xi1>, tensor<4x32xf32>
//       SELECT:   linalg.matmul_transpose_a ins(%[[DL]], %{{.*}} :
