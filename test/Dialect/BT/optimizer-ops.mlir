// RUN: bt-opt %s | bt-opt | FileCheck %s
// RUN: bt-opt %s --mlir-print-op-generic | bt-opt | FileCheck %s

// The optimizer ops (BTOptimizerOps.td) round-trip; default-valued
// attributes are not printed.

// CHECK-LABEL: func.func @step(
// CHECK:   %[[N:.*]] = bt.global_norm %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<2x3xbf16>
// CHECK:   %[[C:.*]] = bt.clip_coefficient %[[N]] max_norm 1.000000e+00
// CHECK-NOT: eps
// CHECK:   %[[C2:.*]] = bt.clip_coefficient %[[N]] max_norm 5.000000e-01 {eps = 0.000000e+00 : f64}
// CHECK:   %[[LR:.*]] = bt.lr_schedule %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}{{$}}
// CHECK:   bt.lr_schedule %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {cos_min_ratio = 0.000000e+00 : f64, initial_ratio = 0.000000e+00 : f64, warmup_min_ratio = 1.000000e-01 : f64}
// CHECK:   %{{.*}}, %{{.*}}, %{{.*}} = bt.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr %[[LR]] step %{{.*}} clip %[[C]] beta1 9.000000e-01 beta2 0.94999999999999996 eps 1.000000e-08 weight_decay 1.000000e-01 : tensor<4xf32>, tensor<4xf32>
// CHECK:   bt.adamw %{{.*}} : tensor<2x3xf32>, tensor<2x3xbf16>
func.func @step(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>,
                %v: tensor<4xf32>, %q: tensor<2x3xf32>, %h: tensor<2x3xbf16>,
                %step: tensor<i64>, %peak: tensor<f32>, %warm: tensor<i64>,
                %total: tensor<i64>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<f32>) {
  %n = bt.global_norm %g, %h : tensor<4xf32>, tensor<2x3xbf16>
  %c = bt.clip_coefficient %n max_norm 1.0
  %c2 = bt.clip_coefficient %n max_norm 0.5 {eps = 0.0 : f64}
  %lr = bt.lr_schedule %step, %peak, %warm, %total
  %lr0 = bt.lr_schedule %step, %peak, %warm, %total {cos_min_ratio = 0.0 : f64, warmup_min_ratio = 0.1 : f64, initial_ratio = 0.0 : f64}
  %p1, %m1, %v1 = bt.adamw %p, %g, %m, %v lr %lr step %step clip %c
      beta1 0.9 beta2 0.95 eps 1.0e-8 weight_decay 0.1 : tensor<4xf32>, tensor<4xf32>
  %q1, %qm, %qv = bt.adamw %q, %h, %q, %q lr %lr0 step %step clip %c2
      beta1 0.0 beta2 0.0 eps 0.0 weight_decay 0.0 : tensor<2x3xf32>, tensor<2x3xbf16>
  return %p1, %m1, %v1, %q1, %n : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<f32>
}
