// RUN: bt-opt %s -split-input-file -bt-constant-globals | FileCheck %s
// RUN: bt-opt %s -split-input-file -bt-constant-globals -one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF

// The globals of the tensor constants, in the module's walk order (each is
// inserted at the module's start, so the last one created comes first),
// one per distinct value and type; the constants stay. One-Shot Bufferize
// then reuses them instead of creating its own.

// CHECK-LABEL: module
// CHECK-NEXT: memref.global "private" constant @__constant_2xi64_0 : memref<2xi64> = dense<[2, 3]> {alignment = 64 : i64}
// CHECK-NEXT: memref.global "private" constant @__constant_3xf32 : memref<3xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> {alignment = 64 : i64}
// CHECK-NEXT: memref.global "private" constant @__constant_2xi64 : memref<2xi64> = dense<[0, 1]> {alignment = 64 : i64}
// CHECK-NOT: memref.global
// CHECK: func.func @first
// CHECK: arith.constant dense<[0, 1]> : tensor<2xi64>
// BUF-LABEL: module
// BUF-COUNT-3: memref.global
// BUF-NOT: memref.global
// BUF: func.func @first
// BUF: memref.get_global @__constant_2xi64 : memref<2xi64>
// BUF: func.func @second
// BUF: memref.get_global @__constant_3xf32 : memref<3xf32>
// BUF: memref.get_global @__constant_2xi64_0 : memref<2xi64>
// BUF: memref.get_global @__constant_2xi64 : memref<2xi64>
module {
  func.func @first() -> tensor<2xi64> {
    %c = arith.constant dense<[0, 1]> : tensor<2xi64>
    return %c : tensor<2xi64>
  }
  func.func @second() -> (tensor<3xf32>, tensor<2xi64>, tensor<2xi64>) {
    %a = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
    %b = arith.constant dense<[2, 3]> : tensor<2xi64>
    %c = arith.constant dense<[0, 1]> : tensor<2xi64>
    return %a, %b, %c : tensor<3xf32>, tensor<2xi64>, tensor<2xi64>
  }
}

// -----

// Scalar constants have no global; a module without tensor constants is
// unchanged.
// CHECK-LABEL: module
// CHECK-NOT: memref.global
// CHECK: arith.constant 1.000000e+00 : f32
func.func @scalar() -> f32 {
  %c = arith.constant 1.0 : f32
  return %c : f32
}

// -----

// The alignment option (One-Shot Bufferize's bufferAlignment).
// RUN: bt-opt %s -split-input-file -bt-constant-globals=alignment=128 | FileCheck %s --check-prefix=ALIGN
// ALIGN: memref.global "private" constant @__constant_1xf32 : memref<1xf32> = dense<5.000000e+00> {alignment = 128 : i64}
func.func @aligned() -> tensor<1xf32> {
  %c = arith.constant dense<5.0> : tensor<1xf32>
  return %c : tensor<1xf32>
}
