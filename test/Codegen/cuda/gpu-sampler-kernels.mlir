// RUN: bt-opt %s -split-input-file --bt-gpu-sampler-kernels --bt-merge-gpu-modules | FileCheck %s
// RUN: bt-opt %s -split-input-file \
// RUN:   --pass-pipeline="builtin.module(bt-gpu-sampler-kernels,bt-merge-gpu-modules,gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,reconcile-unrealized-casts))" \
// RUN:   | FileCheck %s --check-prefix=NVVM

// A module whose host code calls the runtime's sampler gets the greedy and
// the drawing sampling kernels, merged into the one gpu.module with the other kernels.
// CHECK:       gpu.module @bt_kernels
// CHECK-DAG:     gpu.func @k
// CHECK-DAG:     gpu.func @bt_sample_greedy(%{{.*}}: memref<?x?xf32, strided<[?, ?], offset: ?>>, %{{.*}}: memref<?xi64, strided<[?], offset: ?>>, %{{.*}}: memref<?x2xi64>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64) kernel
// CHECK-DAG:     gpu.func @bt_sample(%{{.*}}: memref<?x?xf32, strided<[?, ?], offset: ?>>, %{{.*}}: memref<?xi64, strided<[?], offset: ?>>, %{{.*}}: memref<?x2xi64>, %{{.*}}: memref<?xi64>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: f64, %{{.*}}: i64, %{{.*}}: f64) kernel
// CHECK-NOT:   gpu.module
// The kernel's parameters in the NVVM order the runtime packs them
// (runtime/device/cuda/cuda_call.cc SampleOnDevice): 7 + 5 + 7 words of the
// three memref descriptors, then step, first, eos, pad.
// NVVM:        llvm.func @bt_sample_greedy(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64) attributes {gpu.kernel, nvvm.kernel}
// bt_sample: the same three descriptors, the stream states' (5 words), then
// step, first, eos, pad, inv_t (f64), top_k, top_p (f64).
// NVVM:        llvm.func @bt_sample(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: f64, %{{.*}}: i64, %{{.*}}: f64) attributes {gpu.kernel, nvvm.kernel}
module attributes {gpu.container_module} {
  gpu.module @k_module {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  func.func private @bt_rt_sample(i64, memref<?x?xf32>, memref<?xi64>)
}

// -----

// No sampler call: nothing is added.
// CHECK-LABEL: // -----
// CHECK-NOT:   bt_sample
// NVVM-LABEL:  // -----
// NVVM-NOT:    bt_sample_greedy
module {
  func.func @f() {
    return
  }
}

// -----

// A module whose host code samples bf16 logits (--dtype bf16) gets the bf16
// variants only: the logits memref is bf16, and each logit read is extended
// exactly to f32 (bits << 16) before the f32 kernel's comparisons.
// CHECK-LABEL: // -----
// CHECK:       gpu.module @bt_kernels
// CHECK-NOT:     gpu.func @bt_sample_greedy(
// CHECK:         gpu.func @bt_sample_greedy_bf16(%[[L:.*]]: memref<?x?xbf16, strided<[?, ?], offset: ?>>, %{{.*}}: memref<?xi64, strided<[?], offset: ?>>, %{{.*}}: memref<?x2xi64>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64) kernel
// CHECK:           %[[H:.*]] = memref.load %[[L]][%{{.*}}, %{{.*}}] : memref<?x?xbf16, strided<[?, ?], offset: ?>>
// CHECK-NEXT:      %[[I:.*]] = arith.bitcast %[[H]] : bf16 to i16
// CHECK-NEXT:      %[[W:.*]] = arith.extui %[[I]] : i16 to i32
// CHECK-NEXT:      %[[C:.*]] = arith.constant 16 : i32
// CHECK-NEXT:      %[[S:.*]] = arith.shli %[[W]], %[[C]] : i32
// CHECK-NEXT:      %[[X:.*]] = arith.bitcast %[[S]] : i32 to f32
// CHECK-NEXT:      arith.cmpf uno, %[[X]], %[[X]] : f32
// CHECK:         gpu.func @bt_sample_bf16(%{{.*}}: memref<?x?xbf16, strided<[?, ?], offset: ?>>, %{{.*}}: memref<?xi64, strided<[?], offset: ?>>, %{{.*}}: memref<?x2xi64>, %{{.*}}: memref<?xi64>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: f64, %{{.*}}: i64, %{{.*}}: f64) kernel
// CHECK-NOT:     memref<?x?xf32, strided
// CHECK:       }
// NVVM-LABEL:  // -----
// NVVM:        llvm.func @bt_sample_greedy_bf16(
// NVVM:        llvm.func @bt_sample_bf16(
module {
  func.func private @bt_rt_sample_bf16(i64, memref<?x?xbf16>, memref<?xi64>)
}
