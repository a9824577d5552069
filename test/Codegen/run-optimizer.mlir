// REQUIRES: cpu-runner
// RUN: bt-opt %s --bt-cpu-pipeline="internalize=false" \
// RUN: | mlir-cpu-runner -e main -entry-point-result=void \
// RUN:     -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils,%libomp,%openblas \
// RUN: | FileCheck %s

// The optimizer ops through the CPU pipeline with the JIT.

// LR schedule, peak 1, warmup 4, total 12, steps 1 .. 14 (DeepSpeed
// WarmupCosineLR driven by the engine: step k uses iteration k - 2):
// step 1 at the peak (initial_ratio 1), then i / 4 for i = 0 .. 3, then
// 0.1 + 0.9 (1 + cos(pi (i - 3) / 8)) / 2 for i = 4 .. 11, then the floor.
// CHECK: sizes = [14]
// CHECK-NEXT: [1, 0, 0.25, 0.5, 0.75, 0.965746, 0.868198, 0.72220{{[78]}}, 0.55, 0.377792, 0.231802, 0.134254, 0.1, 0.1]
// Warmup 0 is warmup max(2, 0) = 2 steps; initial_ratio 0 (DeepSpeed >=
// 0.15.3); total 5: p = (i - 1) / 3.
// CHECK: sizes = [6]
// CHECK-NEXT: [0, 0, 0.5, 0.775, 0.325, 0.1]
func.func @lr(%step: tensor<i64>, %warm: tensor<i64>, %total: tensor<i64>) -> (tensor<f32>, tensor<f32>) {
  %peak = arith.constant dense<1.0> : tensor<f32>
  %lr = bt.lr_schedule %step, %peak, %warm, %total
  %lr0 = bt.lr_schedule %step, %peak, %warm, %total {initial_ratio = 0.0 : f64}
  return %lr, %lr0 : tensor<f32>, tensor<f32>
}

// Global norm of [3, 4] and [[12]] = 13; clip coefficient 1 / (13 + 1e-6),
// and 1 for a norm below max_norm.
// CHECK: sizes = []
// CHECK-NEXT: [13]
// CHECK: sizes = []
// CHECK-NEXT: [0.0769231]
// CHECK: sizes = []
// CHECK-NEXT: [1]
func.func @norm(%a: tensor<2xf32>, %b: tensor<1x1xbf16>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %n = bt.global_norm %a, %b : tensor<2xf32>, tensor<1x1xbf16>
  %c = bt.clip_coefficient %n max_norm 1.0
  %c2 = bt.clip_coefficient %n max_norm 20.0
  return %n, %c, %c2 : tensor<f32>, tensor<f32>, tensor<f32>
}

// One AdamW step (lr 1e-3, step 1, clip 1): p = 1, g = 0.5, m = v = 0 gives
// p·(1 − 1e-4) − 0.01 · 0.05 / (sqrt(0.0125) / sqrt(0.05) + 1e-8) = 0.9989,
// m = 0.05, v = 0.0125; a zero gradient (p = 2) gets weight decay only:
// 1.9998. Step 2 from there with g = 0.5: m = 0.095, v = 0.024375,
// p = 0.9989·0.9999 − 1e-3/0.19 · 0.095 / (sqrt(0.024375)/sqrt(0.0975) + 1e-8).
// CHECK: sizes = [2]
// CHECK-NEXT: [0.9989, 1.9998]
// CHECK: sizes = [2]
// CHECK-NEXT: [0.05, 0]
// CHECK: sizes = [2]
// CHECK-NEXT: [0.0125, 0]
// CHECK: sizes = [2]
// CHECK-NEXT: [0.9978, 1.9996]
func.func @adamw(%p: tensor<2xf32>, %g: tensor<2xf32>, %m: tensor<2xf32>, %v: tensor<2xf32>,
                 %step: tensor<i64>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %lr = arith.constant dense<1.0e-3> : tensor<f32>
  %clip = arith.constant dense<1.0> : tensor<f32>
  %p1, %m1, %v1 = bt.adamw %p, %g, %m, %v lr %lr step %step clip %clip
      beta1 0.9 beta2 0.95 eps 1.0e-8 weight_decay 0.1 : tensor<2xf32>, tensor<2xf32>
  return %p1, %m1, %v1 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

func.func private @printMemrefF32(tensor<*xf32>) attributes {llvm.emit_c_interface}

func.func @print(%t: tensor<f32>) {
  %u = tensor.cast %t : tensor<f32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}
func.func @print1(%t: tensor<?xf32>) {
  %u = tensor.cast %t : tensor<?xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}

func.func private @schedule(%n: index, %warm: tensor<i64>, %total: tensor<i64>, %which: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %e) -> tensor<?xf32> {
    %k = arith.addi %i, %c1 : index
    %k64 = arith.index_cast %k : index to i64
    %s = tensor.from_elements %k64 : tensor<i64>
    %lr, %lr0 = func.call @lr(%s, %warm, %total) : (tensor<i64>, tensor<i64>, tensor<i64>) -> (tensor<f32>, tensor<f32>)
    %sel = arith.cmpi eq, %which, %c0 : index
    %x = scf.if %sel -> f32 {
      %v = tensor.extract %lr[] : tensor<f32>
      scf.yield %v : f32
    } else {
      %v = tensor.extract %lr0[] : tensor<f32>
      scf.yield %v : f32
    }
    %acc2 = tensor.insert %x into %acc[%i] : tensor<?xf32>
    scf.yield %acc2 : tensor<?xf32>
  }
  call @print1(%r) : (tensor<?xf32>) -> ()
  return
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c14 = arith.constant 14 : index
  %w4 = arith.constant dense<4> : tensor<i64>
  %t12 = arith.constant dense<12> : tensor<i64>
  call @schedule(%c14, %w4, %t12, %c0) : (index, tensor<i64>, tensor<i64>, index) -> ()
  %w0 = arith.constant dense<0> : tensor<i64>
  %t5 = arith.constant dense<5> : tensor<i64>
  call @schedule(%c6, %w0, %t5, %c1) : (index, tensor<i64>, tensor<i64>, index) -> ()

  %a = arith.constant dense<[3.0, 4.0]> : tensor<2xf32>
  %b = arith.constant dense<12.0> : tensor<1x1xbf16>
  %n, %c, %c2 = call @norm(%a, %b) : (tensor<2xf32>, tensor<1x1xbf16>) -> (tensor<f32>, tensor<f32>, tensor<f32>)
  call @print(%n) : (tensor<f32>) -> ()
  call @print(%c) : (tensor<f32>) -> ()
  call @print(%c2) : (tensor<f32>) -> ()

  %p = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %g = arith.constant dense<[0.5, 0.0]> : tensor<2xf32>
  %z = arith.constant dense<0.0> : tensor<2xf32>
  %s1 = arith.constant dense<1> : tensor<i64>
  %p1, %m1, %v1 = call @adamw(%p, %g, %z, %z, %s1) : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<i64>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
  %pc = tensor.cast %p1 : tensor<2xf32> to tensor<?xf32>
  %mc = tensor.cast %m1 : tensor<2xf32> to tensor<?xf32>
  %vc = tensor.cast %v1 : tensor<2xf32> to tensor<?xf32>
  call @print1(%pc) : (tensor<?xf32>) -> ()
  call @print1(%mc) : (tensor<?xf32>) -> ()
  call @print1(%vc) : (tensor<?xf32>) -> ()
  %s2 = arith.constant dense<2> : tensor<i64>
  %p2, %m2, %v2 = call @adamw(%p1, %g, %m1, %v1, %s2) : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<i64>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
  %p2c = tensor.cast %p2 : tensor<2xf32> to tensor<?xf32>
  call @print1(%p2c) : (tensor<?xf32>) -> ()
  return
}
