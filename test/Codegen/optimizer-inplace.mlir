// RUN: bt-opt %s --bt-lower-to-linalg --bt-mark-entry-points --convert-elementwise-to-linalg \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   --bt-drop-inout-results --canonicalize --cse --canonicalize | FileCheck %s
// RUN: bt-opt %s --bt-cpu-pipeline | FileCheck %s --check-prefix=LLVM

// The shape of train_step (bt-generate-train-step): parameters are in-out
// arguments that a forward and a backward read, then bt.adamw updates them
// and their moments. Bufferization writes the new values straight into the
// argument buffers (one linalg.generic per parameter with the three
// arguments as outs), never copies a parameter or a moment, and
// bt-drop-inout-results removes their results.

// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[X:[^:]*]]: memref<4x8xf32> {bt.name = "x"},
// CHECK-SAME:    %[[S:[^:]*]]: memref<i64> {bt.name = "step"}, %[[LR0:[^:]*]]: memref<f32> {bt.name = "peak_lr"},
// CHECK-SAME:    %[[WU:[^:]*]]: memref<i64> {bt.name = "warmup_steps"}, %[[T:[^:]*]]: memref<i64> {bt.name = "total_steps"},
// CHECK-SAME:    %[[W:[^:]*]]: memref<8x8xf32> {bt.inout, bt.name = "param.w"},
// CHECK-SAME:    %[[B:[^:]*]]: memref<8xf32> {bt.inout, bt.name = "param.b"},
// CHECK-SAME:    %[[MW:[^:]*]]: memref<8x8xf32> {bt.inout, bt.name = "adam_m.w"},
// CHECK-SAME:    %[[MB:[^:]*]]: memref<8xf32> {bt.inout, bt.name = "adam_m.b"},
// CHECK-SAME:    %[[VW:[^:]*]]: memref<8x8xf32> {bt.inout, bt.name = "adam_v.w"},
// CHECK-SAME:    %[[VB:[^:]*]]: memref<8xf32> {bt.inout, bt.name = "adam_v.b"})
// CHECK-SAME:    -> (memref<4x8xf32> {bt.name = "y"}, memref<f32> {bt.name = "grad_norm"}, memref<f32> {bt.name = "lr"})
// CHECK-NOT:     memref.copy
// The forward reads the parameters.
// CHECK:         linalg.matmul_transpose_b ins(%[[X]], %[[W]] : memref<4x8xf32>, memref<8x8xf32>)
// The gradient of w: a temporary.
// CHECK:         %[[GW:.*]] = memref.alloc() {{.*}} : memref<8x8xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[W]], %[[W]] : memref<8x8xf32>, memref<8x8xf32>) outs(%[[GW]] : memref<8x8xf32>)
// The global norm: [8, 8] as [8, 8] rows (K = 8), then the rows.
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK:         math.powf
// The updates, in place.
// CHECK:         linalg.generic {{.*}} ins(%[[GW]] : memref<8x8xf32>) outs(%[[W]], %[[MW]], %[[VW]] : memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>)
// CHECK:         linalg.generic {{.*}} ins(%{{.*}} : memref<8xf32>) outs(%[[B]], %[[MB]], %[[VB]] : memref<8xf32>, memref<8xf32>, memref<8xf32>)
// CHECK-NOT:     memref.copy
// CHECK:         return %{{.*}}, %{{.*}}, %{{.*}} : memref<4x8xf32>, memref<f32>, memref<f32>

// Through the whole pipeline: the C interface takes the result struct (y,
// grad_norm, lr), then the 5 inputs and the 6 in-out buffers: 12 pointers.
// LLVM-LABEL: llvm.func @bt_entry_step(
// LLVM:       llvm.call @_mlir_ciface_step({{(%[0-9]+, ){11}%[0-9]+}}) : ({{(!llvm.ptr, ){11}!llvm.ptr}}) -> ()
func.func @step(%x: tensor<4x8xf32> {bt.name = "x"},
                %step: tensor<i64> {bt.name = "step"}, %peak: tensor<f32> {bt.name = "peak_lr"},
                %warm: tensor<i64> {bt.name = "warmup_steps"}, %total: tensor<i64> {bt.name = "total_steps"},
                %w: tensor<8x8xf32> {bt.inout, bt.name = "param.w"},
                %b: tensor<8xf32> {bt.inout, bt.name = "param.b"},
                %mw: tensor<8x8xf32> {bt.inout, bt.name = "adam_m.w"},
                %mb: tensor<8xf32> {bt.inout, bt.name = "adam_m.b"},
                %vw: tensor<8x8xf32> {bt.inout, bt.name = "adam_v.w"},
                %vb: tensor<8xf32> {bt.inout, bt.name = "adam_v.b"})
    -> (tensor<4x8xf32> {bt.name = "y"}, tensor<f32> {bt.name = "grad_norm"}, tensor<f32> {bt.name = "lr"},
        tensor<8x8xf32> {bt.inout_arg = "param.w", bt.name = "param.w"},
        tensor<8xf32> {bt.inout_arg = "param.b", bt.name = "param.b"},
        tensor<8x8xf32> {bt.inout_arg = "adam_m.w", bt.name = "adam_m.w"},
        tensor<8xf32> {bt.inout_arg = "adam_m.b", bt.name = "adam_m.b"},
        tensor<8x8xf32> {bt.inout_arg = "adam_v.w", bt.name = "adam_v.w"},
        tensor<8xf32> {bt.inout_arg = "adam_v.b", bt.name = "adam_v.b"}) {
  %y = bt.linear %x, %w, %b : tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %gw = arith.mulf %w, %w : tensor<8x8xf32>
  %gb = arith.addf %b, %b : tensor<8xf32>
  %n = bt.global_norm %gw, %gb : tensor<8x8xf32>, tensor<8xf32>
  %c = bt.clip_coefficient %n max_norm 1.0
  %lr = bt.lr_schedule %step, %peak, %warm, %total
  %w1, %mw1, %vw1 = bt.adamw %w, %gw, %mw, %vw lr %lr step %step clip %c
      beta1 0.9 beta2 0.95 eps 1.0e-8 weight_decay 0.1 : tensor<8x8xf32>, tensor<8x8xf32>
  %b1, %mb1, %vb1 = bt.adamw %b, %gb, %mb, %vb lr %lr step %step clip %c
      beta1 0.9 beta2 0.95 eps 1.0e-8 weight_decay 0.1 : tensor<8xf32>, tensor<8xf32>
  return %y, %n, %lr, %w1, %b1, %mw1, %mb1, %vw1, %vb1
      : tensor<4x8xf32>, tensor<f32>, tensor<f32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8xf32>
}
