// RUN: bt-opt %s --finalize-memref-to-llvm --convert-arith-to-llvm --convert-func-to-llvm --bt-gpu-host-to-runtime --reconcile-unrealized-casts --canonicalize | FileCheck %s

// The host side of a launch: the parameters in the NVVM kernel order (a
// memref<?x4xf32> as allocated, aligned, offset, size 0, size 1, stride 0,
// stride 1; an index as i64), stored into one stack struct allocated at the
// function entry, pointers to them in an array, then bt_gpu_launch with the
// kernel's name. gpu.alloc / gpu.dealloc call the runtime's pool; the
// sampler callbacks (f32 and bf16 logits) get their GPU variants' names.
// CHECK-DAG: llvm.mlir.global internal constant @bt_kernel_name_k("k\00")
// CHECK-DAG: llvm.func @bt_gpu_alloc(i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @bt_gpu_launch(!llvm.ptr, i64, i64, i64, i64, i64, i64, i32, !llvm.ptr, i32)
// CHECK-DAG: llvm.func @bt_gpu_free(!llvm.ptr)
// CHECK-LABEL: llvm.func @main
//  CHECK-SAME:   (%[[N:.*]]: i64, %{{.*}}: i64)
//   CHECK-DAG:   %[[NPARAMS:.*]] = llvm.mlir.constant(8 : i32) : i32
//   CHECK-DAG:   %[[SMEM:.*]] = llvm.mlir.constant(0 : i32) : i32
//   CHECK-DAG:   %[[NAMEG:.*]] = llvm.mlir.addressof @bt_kernel_name_k
//   CHECK-DAG:   %[[C4:.*]] = llvm.mlir.constant(4 : index) : i64
//   CHECK-DAG:   %[[C1:.*]] = llvm.mlir.constant(1 : index) : i64
//   CHECK-DAG:   %[[C0:.*]] = llvm.mlir.constant(0 : index) : i64
//       CHECK:   %[[STORAGE:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, ptr, i64, i64, i64, i64, i64, i64)> {alignment = 8 : i64}
//       CHECK:   %[[PARAMS:.*]] = llvm.alloca %{{.*}} x !llvm.array<8 x ptr> {alignment = 8 : i64}
//       CHECK:   scf.for
//       CHECK:     %[[P:.*]] = llvm.call @bt_gpu_alloc(%{{.*}}) : (i64) -> !llvm.ptr
//       CHECK:     %[[S0:.*]] = llvm.getelementptr %[[STORAGE]][0, 0]
//       CHECK:     llvm.store %[[P]], %[[S0]] : !llvm.ptr, !llvm.ptr
//       CHECK:     llvm.store %[[S0]], %[[PARAMS]]
//       CHECK:     %[[S1:.*]] = llvm.getelementptr %[[STORAGE]][0, 1]
//       CHECK:     llvm.store %[[P]], %[[S1]] : !llvm.ptr, !llvm.ptr
//       CHECK:     %[[E1:.*]] = llvm.getelementptr %[[PARAMS]][1]
//       CHECK:     llvm.store %[[S1]], %[[E1]]
//       CHECK:     %[[S2:.*]] = llvm.getelementptr %[[STORAGE]][0, 2]
//       CHECK:     llvm.store %[[C0]], %[[S2]] : i64, !llvm.ptr
//       CHECK:     %[[S3:.*]] = llvm.getelementptr %[[STORAGE]][0, 3]
//       CHECK:     llvm.store %[[N]], %[[S3]] : i64, !llvm.ptr
//       CHECK:     %[[S4:.*]] = llvm.getelementptr %[[STORAGE]][0, 4]
//       CHECK:     llvm.store %[[C4]], %[[S4]] : i64, !llvm.ptr
//       CHECK:     %[[S5:.*]] = llvm.getelementptr %[[STORAGE]][0, 5]
//       CHECK:     llvm.store %[[C4]], %[[S5]] : i64, !llvm.ptr
//       CHECK:     %[[S6:.*]] = llvm.getelementptr %[[STORAGE]][0, 6]
//       CHECK:     llvm.store %[[C1]], %[[S6]] : i64, !llvm.ptr
//       CHECK:     %[[S7:.*]] = llvm.getelementptr %[[STORAGE]][0, 7]
//       CHECK:     llvm.store %[[N]], %[[S7]] : i64, !llvm.ptr
//       CHECK:     %[[E7:.*]] = llvm.getelementptr %[[PARAMS]][7]
//       CHECK:     llvm.store %[[S7]], %[[E7]]
//       CHECK:     %[[NAME:.*]] = llvm.getelementptr %[[NAMEG]][0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.array<2 x i8>
//       CHECK:     llvm.call @bt_gpu_launch(%[[NAME]], %[[N]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[SMEM]], %[[PARAMS]], %[[NPARAMS]])
//       CHECK:     llvm.call @bt_gpu_free(%[[P]]) : (!llvm.ptr) -> ()
//   CHECK-NOT:   gpu.launch_func
//   CHECK-NOT:   gpu.alloc
//   CHECK-NOT: _mlir_ciface_bt_rt_sample
//   CHECK-DAG: llvm.call @_mlir_ciface_bt_gpu_sample(
//   CHECK-DAG: llvm.func @_mlir_ciface_bt_gpu_sample(i64, !llvm.ptr, !llvm.ptr)
//   CHECK-DAG: llvm.call @_mlir_ciface_bt_gpu_sample_bf16(
//   CHECK-DAG: llvm.func @_mlir_ciface_bt_gpu_sample_bf16(i64, !llvm.ptr, !llvm.ptr)
//   CHECK-NOT: _mlir_ciface_bt_rt_sample
module attributes {gpu.container_module} {
  func.func @main(%n: index, %steps: index) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %steps step %c1 {
      %m = gpu.alloc (%n) : memref<?x4xf32>
      gpu.launch_func @bt_kernels::@k blocks in (%n, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<?x4xf32>, %n : index)
      gpu.dealloc %m : memref<?x4xf32>
    }
    return
  }
  func.func private @bt_rt_sample(i64, memref<?x?xf32>, memref<?xi64>) attributes {llvm.emit_c_interface}
  func.func private @bt_rt_sample_bf16(i64, memref<?x?xbf16>, memref<?xi64>) attributes {llvm.emit_c_interface}
  gpu.module @bt_kernels {
    gpu.func @k(%m: memref<?x4xf32>, %n: index) kernel {
      gpu.return
    }
  }
}
