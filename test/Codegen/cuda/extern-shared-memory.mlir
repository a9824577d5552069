// RUN: bt-opt %s --pass-pipeline='builtin.module(gpu.module(bt-gpu-extern-shared-memory))' --split-input-file --verify-diagnostics | FileCheck %s

// The zero-length internal global that convert-gpu-to-nvvm gives
// gpu.dynamic_shared_memory becomes an external declaration with its
// alignment (`.extern .shared .align 16 .b8 __dynamic_shmem__0[]`); other
// globals keep their linkage.
// CHECK-LABEL: gpu.module @kernels
// CHECK: llvm.mlir.global external @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK: llvm.mlir.global internal constant @table
// CHECK: llvm.mlir.global internal @tile() {addr_space = 3 : i32} : !llvm.array<4 x f32>
gpu.module @kernels {
  llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
  llvm.mlir.global internal constant @table(dense<1.0> : tensor<4xf32>) {addr_space = 0 : i32} : !llvm.array<4 x f32>
  llvm.mlir.global internal @tile() {addr_space = 3 : i32} : !llvm.array<4 x f32>
}

// -----

gpu.module @kernels {
  // expected-error@+1 {{is zero-length shared memory with an initializer}}
  llvm.mlir.global internal @__dynamic_shmem__0(dense<> : tensor<0xi8>) {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
}
