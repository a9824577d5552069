// RUN: bt-opt %s --bt-lower-to-linalg --bt-mark-entry-points \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   | FileCheck %s
// RUN: bt-opt %s --bt-cpu-pipeline | FileCheck %s --check-prefix=LLVM

// bt.sample is left alone by bt-lower-to-linalg and bufferized into a call of
// the runtime's sampler bt_rt_sample (llvm.emit_c_interface, no body):
// `_mlir_ciface_bt_rt_sample(int64_t, StridedMemRefType<float,2> *,
// StridedMemRefType<int64_t,1> *)` stays undefined in the kernel library, as
// a weak symbol: a call checks its address and aborts with a message when the
// process does not define it (bt-emit-entry-wrappers, bt.weak_import).

// CHECK-LABEL: func.func @pick(
// CHECK-SAME:    %[[L:[^:]*]]: memref<?x16xf32>, %[[S:[^:]*]]: memref<i64>) -> memref<?xi64>
// CHECK:         %[[H:.*]] = memref.load %[[S]][] : memref<i64>
// CHECK:         %[[B:.*]] = memref.dim %[[L]], %{{.*}} : memref<?x16xf32>
// CHECK:         %[[LC:.*]] = memref.cast %[[L]] : memref<?x16xf32> to memref<?x?xf32>
// CHECK:         %[[T:.*]] = memref.alloc(%[[B]]) {{.*}} : memref<?xi64>
// CHECK:         call @bt_rt_sample(%[[H]], %[[LC]], %[[T]]) : (i64, memref<?x?xf32>, memref<?xi64>) -> ()
// CHECK:         return %[[T]] : memref<?xi64>
// CHECK:       func.func private @bt_rt_sample(i64, memref<?x?xf32>, memref<?xi64>) attributes {bt.weak_import, llvm.emit_c_interface}

// LLVM-LABEL:  llvm.func internal @bt_rt_sample(
// LLVM:          %[[ADDR:.*]] = llvm.mlir.addressof @_mlir_ciface_bt_rt_sample : !llvm.ptr
// LLVM:          %[[MISSING:.*]] = llvm.icmp "eq" %[[ADDR]], %{{.*}} : !llvm.ptr
// LLVM:          llvm.cond_br %[[MISSING]], ^[[FAIL:.*]], ^[[CALL:.*]]
// LLVM:        ^[[FAIL]]:
// LLVM:          llvm.call @puts(
// LLVM:          llvm.call @abort()
// LLVM:          llvm.unreachable
// LLVM:        ^[[CALL]]:
// LLVM:          llvm.call @_mlir_ciface_bt_rt_sample(%{{.*}}, %{{.*}}, %{{.*}}) : (i64, !llvm.ptr, !llvm.ptr) -> ()
// LLVM:        llvm.func extern_weak @_mlir_ciface_bt_rt_sample(i64, !llvm.ptr, !llvm.ptr)
func.func @pick(%logits: tensor<?x16xf32>, %sampler: tensor<i64>) -> tensor<?xi64> {
  %s = tensor.extract %sampler[] : tensor<i64>
  %t = bt.sample %logits, %s : tensor<?x16xf32> -> tensor<?xi64>
  return %t : tensor<?xi64>
}
