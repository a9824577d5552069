// REQUIRES: cpu-runner
// RUN: bt-opt %s --bt-cpu-pipeline="internalize=false blas-min-mnk=0" \
// RUN: | mlir-cpu-runner -e main -entry-point-result=void \
// RUN:     -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils,%libomp,%openblas \
// RUN: | FileCheck %s
// RUN: bt-opt %s --bt-cpu-pipeline="internalize=false blas=false" \
// RUN: | mlir-cpu-runner -e main -entry-point-result=void \
// RUN:     -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils,%libomp \
// RUN: | FileCheck %s

// Smoke test of the whole CPU pipeline with the JIT: linear (OpenBLAS or
// loops) + exact GELU, layer norm, and the loss with an ignored label.

// x·Wᵀ + b = 0.5·0.25·8 − 0.5 = 0.5 everywhere; gelu(0.5) = 0.345731.
// CHECK: sizes = [2, 3, 16]
// CHECK-NEXT: 0.345731, 0.345731, 0.345731, 0.345731, 0.345731, 0.345731, 0.345731, 0.345731, 0.345731, 0.345731, 0.345731, 0.345731, 0.345731, 0.345731, 0.345731, 0.345731]
func.func @block(%x: tensor<2x3x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<2x3x16xf32> {
  %y = bt.linear %x, %w, %b : tensor<2x3x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<2x3x16xf32>
  %g = bt.gelu %y : tensor<2x3x16xf32>
  return %g : tensor<2x3x16xf32>
}

// LayerNorm of [1, 2, 3, 4] (weight 1, bias 0): (x − 2.5) / sqrt(1.25 + 1e-5).
// CHECK: sizes = [1, 4]
// CHECK-NEXT: [-1.34164, -0.447212, 0.447212, 1.34164]]
func.func @ln(%x: tensor<1x4xf32>, %w: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<1x4xf32> {
  %y = bt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<1x4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}

// Uniform logits over 4 classes: loss = ln 4 = 1.38629 for each counted label.
// CHECK: sizes = []
// CHECK-NEXT: [1.38629]
func.func @ce(%l: tensor<3x4xf32>, %y: tensor<3xi64>) -> tensor<f32> {
  %loss = bt.cross_entropy %l, %y : tensor<3x4xf32>, tensor<3xi64> -> tensor<f32>
  return %loss : tensor<f32>
}

func.func private @printMemrefF32(tensor<*xf32>) attributes {llvm.emit_c_interface}

func.func @main() {
  %x = arith.constant dense<0.5> : tensor<2x3x8xf32>
  %w = arith.constant dense<0.25> : tensor<16x8xf32>
  %b = arith.constant dense<-0.5> : tensor<16xf32>
  %y = call @block(%x, %w, %b) : (tensor<2x3x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x3x16xf32>
  %u = tensor.cast %y : tensor<2x3x16xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()

  %lx = arith.constant dense<[[1.0, 2.0, 3.0, 4.0]]> : tensor<1x4xf32>
  %lw = arith.constant dense<1.0> : tensor<4xf32>
  %lb = arith.constant dense<0.0> : tensor<4xf32>
  %ly = call @ln(%lx, %lw, %lb) : (tensor<1x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
  %lu = tensor.cast %ly : tensor<1x4xf32> to tensor<*xf32>
  call @printMemrefF32(%lu) : (tensor<*xf32>) -> ()

  %cl = arith.constant dense<0.25> : tensor<3x4xf32>
  %cy = arith.constant dense<[1, -100, 3]> : tensor<3xi64>
  %loss = call @ce(%cl, %cy) : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<f32>
  %cu = tensor.cast %loss : tensor<f32> to tensor<*xf32>
  call @printMemrefF32(%cu) : (tensor<*xf32>) -> ()
  return
}
