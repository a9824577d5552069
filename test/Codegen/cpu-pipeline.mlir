// RUN: bt-opt %s --bt-cpu-pipeline | FileCheck %s
// RUN: bt-opt %s --bt-cpu-pipeline | FileCheck %s --check-prefix=NOERF
// RUN: bt-opt %s --bt-cpu-pipeline="approximate-math=false" | FileCheck %s --check-prefix=LIBMERF
// RUN: bt-opt %s --bt-cpu-pipeline | FileCheck %s --check-prefix=PARTITION
// RUN: bt-opt %s --bt-cpu-pipeline="blas=false" | FileCheck %s --check-prefix=LOOPS
// RUN: bt-opt %s --bt-cpu-pipeline="approximate-math=false parallel=false" | FileCheck %s --check-prefix=SERIAL

// The pipeline from layer-level bt IR (with parameters) to the LLVM dialect
// with the kernel ABI: parameters are leading arguments (bt.params), the GEMM
// calls OpenBLAS, erf is a polynomial (bt-math-approximation; libm's erff with
// approximate-math=false), the loops run
// on OpenMP threads (omp.parallel, __kmpc_fork_call in LLVM IR), buffers come from malloc/free, and
// only bt_entry_<name> / bt_kernel_abi_version are external definitions.

// CHECK-NOT: bt.param_ref
// CHECK-NOT: memrefCopy
// CHECK-DAG: llvm.func @malloc(i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @free(!llvm.ptr)
// NOERF-NOT: erff
// LIBMERF: llvm.func @erff(f32) -> f32
// CHECK-DAG: omp.parallel
// Each thread takes its share of the rows itself (bt-omp-static-partition):
// no worksharing loop, no __kmpc_for_static_init.
// PARTITION-NOT: omp.wsloop
// CHECK-DAG: llvm.call @omp_get_thread_num() : () -> i32
// CHECK-DAG: llvm.call @omp_get_num_threads() : () -> i32
// CHECK-DAG: llvm.func @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
// CHECK-DAG: llvm.func internal @mlp(
// CHECK-DAG: llvm.func internal @_mlir_ciface_mlp(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr {bt.param = "w"}, %{{.*}}: !llvm.ptr {bt.param = "b"}, %{{.*}}: !llvm.ptr) attributes {bt.params = ["w", "b"], llvm.emit_c_interface}
// CHECK-DAG: llvm.func @bt_entry_mlp(%{{.*}}: !llvm.ptr)
// CHECK-DAG: llvm.func @bt_kernel_abi_version() -> i32

// LOOPS-NOT: cblas_sgemm
// SERIAL-NOT: omp.parallel
// SERIAL-DAG: llvm.func @erff(f32) -> f32
// SERIAL-DAG: llvm.func @bt_entry_mlp
// LOOPS: llvm.func @bt_entry_mlp
bt.param @"w" : tensor<64x32xf32>
bt.param @"b" : tensor<64xf32>
func.func @mlp(%x: tensor<?x?x32xf32>) -> tensor<?x?x64xf32> {
  %w = bt.param_ref @"w" : tensor<64x32xf32>
  %b = bt.param_ref @"b" : tensor<64xf32>
  %y = bt.linear %x, %w, %b : tensor<?x?x32xf32>, tensor<64x32xf32>, tensor<64xf32> -> tensor<?x?x64xf32>
  %g = bt.gelu %y : tensor<?x?x64xf32>
  return %g : tensor<?x?x64xf32>
}
