// RUN: bt-opt %s --bt-cuda-pipeline="binary=false" --split-input-file -o %t
// RUN: FileCheck %s --input-file %t
// RUN: FileCheck %s --input-file %t --check-prefix=KERNEL

// The CUDA pipeline on layer-level bt IR: the GEMM calls the runtime's cuBLAS
// wrapper with cblas_sgemm's ABI, every other op is a kernel of the one
// gpu.module (NVVM dialect: thread/block ids from PTX special registers, erf
// from libdevice), and the host code only calls the runtime's GPU ABI.

// Host side.
// CHECK-DAG: llvm.func @bt_gpu_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
// CHECK-DAG: llvm.func @bt_gpu_launch(!llvm.ptr, i64, i64, i64, i64, i64, i64, i32, !llvm.ptr, i32)
// CHECK-DAG: llvm.func @bt_gpu_alloc(i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @bt_entry_mlp(%{{.*}}: !llvm.ptr)
// CHECK-DAG: llvm.func @bt_kernel_abi_version() -> i32
// CHECK-DAG: llvm.func internal @_mlir_ciface_mlp(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr {bt.param = "w"}, %{{.*}}: !llvm.ptr {bt.param = "b"}, %{{.*}}: !llvm.ptr) attributes {bt.params = ["w", "b"], llvm.emit_c_interface}
// CHECK-NOT: llvm.func @malloc
// CHECK-NOT: llvm.func @cblas_sgemm
// CHECK-NOT: gpu.launch_func
// Kernels.
// KERNEL: gpu.module @bt_kernels [#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">]
// One kernel after the GEMM (cuBLAS beta = 0): the bias add, which the CUDA
// target's bt.linear emits on its own when an elementwise op consumes it,
// fused with the GELU by bt-fuse-elementwise ([M, 64] points).
// KERNEL: llvm.func @__nv_erff(f32) -> f32
// KERNEL: llvm.func @mlp_kernel(%{{.*}}) attributes {gpu.kernel, {{.*}}nvvm.kernel}
// KERNEL:   nvvm.read.ptx.sreg.ctaid.x
// KERNEL:   nvvm.read.ptx.sreg.tid.x
// KERNEL:   llvm.load
// KERNEL:   llvm.load
// KERNEL:   llvm.fadd
// KERNEL:   llvm.call @__nv_erff
// KERNEL:   llvm.store
// KERNEL-NOT: llvm.func @mlp_kernel_0(
// KERNEL-NOT: gpu.func
// KERNEL: gpu.module @bt_kernels
bt.param @"w" : tensor<64x32xf32>
bt.param @"b" : tensor<64xf32>
func.func @mlp(%x: tensor<?x?x32xf32>) -> tensor<?x?x64xf32> {
  %w = bt.param_ref @"w" : tensor<64x32xf32>
  %b = bt.param_ref @"b" : tensor<64xf32>
  %y = bt.linear %x, %w, %b : tensor<?x?x32xf32>, tensor<64x32xf32>, tensor<64xf32> -> tensor<?x?x64xf32>
  %g = bt.gelu %y : tensor<?x?x64xf32>
  return %g : tensor<?x?x64xf32>
}

// -----

// A decode step on an in-out KV cache: the fill length steers the host (the
// views of the cache); it is passed by value (bt.host_scalar), so the host
// code loads it in place, with no copy from device memory; the cache is
// updated in place by kernels.
// CHECK-LABEL: llvm.func internal @decode(
//   CHECK-NOT:   bt_gpu_memcpy_dtoh
//       CHECK:   llvm.call @bt_gpu_launch(
// CHECK: gpu.module @bt_kernels
!g = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = ?, head_dim = 4, f32>
func.func @decode(%k: tensor<?x1x2x4xf32>, %v: tensor<?x1x2x4xf32>, %q: tensor<?x1x2x4xf32>,
                  %c: !g {bt.inout, bt.name = "kv_cache"})
    -> (tensor<?x1x2x4xf32> {bt.name = "out"}, !g {bt.inout_arg = "kv_cache", bt.name = "kv_cache"}) {
  %c1 = bt.kv_append %c[0], %k, %v : !g, tensor<?x1x2x4xf32>
  %o = bt.kv_attend %q, %c1[0] scale 5.000000e-01 : tensor<?x1x2x4xf32>, !g -> tensor<?x1x2x4xf32>
  %c2 = bt.kv_append %c1[1], %k, %v : !g, tensor<?x1x2x4xf32>
  %o2 = bt.kv_attend %o, %c2[1] scale 5.000000e-01 : tensor<?x1x2x4xf32>, !g -> tensor<?x1x2x4xf32>
  return %o2, %c2 : tensor<?x1x2x4xf32>, !g
}
