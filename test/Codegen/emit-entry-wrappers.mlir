// RUN: bt-opt %s --split-input-file --convert-func-to-llvm --bt-emit-entry-wrappers --verify-diagnostics | FileCheck %s
// RUN: bt-opt %s --split-input-file --convert-func-to-llvm --bt-emit-entry-wrappers=internalize=false --verify-diagnostics | FileCheck %s --check-prefix=EXTERN

// void bt_entry_f(void **argv): argv[0] is the result block (the descriptors
// of both results), argv[1..] the argument descriptors, passed on to the C
// interface wrapper.
// CHECK-LABEL: llvm.func internal @f(
// CHECK-LABEL: llvm.func internal @_mlir_ciface_f(
// CHECK-LABEL: llvm.func @bt_entry_f(
//  CHECK-SAME:     %[[ARGV:.*]]: !llvm.ptr) {
//       CHECK:   %[[S0:.*]] = llvm.getelementptr %[[ARGV]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
//       CHECK:   %[[P0:.*]] = llvm.load %[[S0]] : !llvm.ptr -> !llvm.ptr
//       CHECK:   %[[S1:.*]] = llvm.getelementptr %[[ARGV]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
//       CHECK:   %[[P1:.*]] = llvm.load %[[S1]] : !llvm.ptr -> !llvm.ptr
//       CHECK:   %[[S2:.*]] = llvm.getelementptr %[[ARGV]][2] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
//       CHECK:   %[[P2:.*]] = llvm.load %[[S2]] : !llvm.ptr -> !llvm.ptr
//       CHECK:   llvm.call @_mlir_ciface_f(%[[P0]], %[[P1]], %[[P2]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
//       CHECK:   llvm.return
// No results: argv holds only the argument descriptors.
// CHECK-LABEL: llvm.func @bt_entry_g(
//       CHECK:   llvm.getelementptr %{{.*}}[0]
//       CHECK:   llvm.call @_mlir_ciface_g(%{{.*}}) : (!llvm.ptr) -> ()
// CHECK-LABEL: llvm.func @bt_kernel_abi_version() -> i32 {
//       CHECK:   %[[V:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   llvm.return %[[V]] : i32
// CHECK-NOT: bt_entry_helper
// EXTERN-LABEL: llvm.func @f(
// EXTERN-LABEL: llvm.func @_mlir_ciface_f(
func.func @f(%x: memref<?x4xf32>, %y: memref<f32>) -> (memref<?x4xf32>, memref<f32>) attributes {llvm.emit_c_interface} {
  return %x, %y : memref<?x4xf32>, memref<f32>
}
func.func @g(%x: memref<4xf32>) attributes {llvm.emit_c_interface} {
  return
}
func.func private @helper(%x: memref<4xf32>) {
  return
}

// -----

// expected-error @below {{takes a 'i64' argument; the kernel ABI only passes memref descriptors}}
func.func @scalar(%n: index, %x: memref<4xf32>) -> memref<4xf32> attributes {llvm.emit_c_interface} {
  return %x : memref<4xf32>
}
