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
// CHECK:         %[[LC:.*]] = memref.cast %[[L]] : memref<?x16xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK:         %[[T:.*]] = memref.alloc(%[[B]]) {{.*}} : memref<?xi64>
// CHECK:         call @bt_rt_sample(%[[H]], %[[LC]], %[[T]]) : (i64, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?xi64>) -> ()
// CHECK:         return %[[T]] : memref<?xi64>

// Logits that are a strided slice (one step's row of step_logits [B, L_B, V])
// are passed with their offset and strides, not copied to a dense buffer.
// CHECK-LABEL: func.func @pick_step(
// CHECK-SAME:    %[[L:[^:]*]]: memref<?x4x16xf32>, %[[S:[^:]*]]: memref<i64>) -> memref<?xi64>
// CHECK:         %[[ROW:.*]] = memref.subview %[[L]][0, %{{.*}}, 0] [%{{.*}}, 1, 16] [1, 1, 1] : memref<?x4x16xf32> to memref<?x16xf32, strided<[64, 1], offset: ?>>
// CHECK-NOT:     memref.copy
// CHECK:         %[[LC:.*]] = memref.cast %[[ROW]] : memref<?x16xf32, strided<[64, 1], offset: ?>> to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK-NOT:     memref.copy
// CHECK:         call @bt_rt_sample(%{{.*}}, %[[LC]], %{{.*}})
// bf16 logits (the CUDA target's --dtype bf16 decode entries) call the
// runtime's sampler of bf16 logits, bt_rt_sample_bf16, with a bf16 strided
// memref (the callee extends each logit exactly).
// CHECK-LABEL: func.func @pick_bf16(
// CHECK-SAME:    %[[L:[^:]*]]: memref<?x16xbf16>, %{{[^:]*}}: memref<i64>) -> memref<?xi64>
// CHECK:         %[[LC:.*]] = memref.cast %[[L]] : memref<?x16xbf16> to memref<?x?xbf16, strided<[?, ?], offset: ?>>
// CHECK:         call @bt_rt_sample_bf16(%{{.*}}, %[[LC]], %{{.*}}) : (i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) -> ()
// CHECK-DAG:   func.func private @bt_rt_sample(i64, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?xi64>) attributes {bt.weak_import, llvm.emit_c_interface}
// CHECK-DAG:   func.func private @bt_rt_sample_bf16(i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) attributes {bt.weak_import, llvm.emit_c_interface}

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
// LLVM-DAG:    llvm.func extern_weak @_mlir_ciface_bt_rt_sample(i64, !llvm.ptr, !llvm.ptr)
// LLVM-DAG:    llvm.func extern_weak @_mlir_ciface_bt_rt_sample_bf16(i64, !llvm.ptr, !llvm.ptr)
func.func @pick(%logits: tensor<?x16xf32>, %sampler: tensor<i64>) -> tensor<?xi64> {
  %s = tensor.extract %sampler[] : tensor<i64>
  %t = bt.sample %logits, %s : tensor<?x16xf32> -> tensor<?xi64>
  return %t : tensor<?xi64>
}

func.func @pick_step(%logits: tensor<?x4x16xf32>, %sampler: tensor<i64>) -> tensor<?xi64> {
  %c0 = arith.constant 0 : index
  %k = arith.constant 2 : index
  %b = tensor.dim %logits, %c0 : tensor<?x4x16xf32>
  %row = tensor.extract_slice %logits[0, %k, 0] [%b, 1, 16] [1, 1, 1] : tensor<?x4x16xf32> to tensor<?x16xf32>
  %s = tensor.extract %sampler[] : tensor<i64>
  %t = bt.sample %row, %s : tensor<?x16xf32> -> tensor<?xi64>
  return %t : tensor<?xi64>
}

func.func @pick_bf16(%logits: tensor<?x16xbf16>, %sampler: tensor<i64>) -> tensor<?xi64> {
  %s = tensor.extract %sampler[] : tensor<i64>
  %t = bt.sample %logits, %s : tensor<?x16xbf16> -> tensor<?xi64>
  return %t : tensor<?xi64>
}
