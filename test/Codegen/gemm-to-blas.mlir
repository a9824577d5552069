// RUN: bt-opt %s --bt-gemm-to-blas=min-mnk=0 | FileCheck %s
// RUN: bt-opt %s --bt-gemm-to-blas | FileCheck %s --check-prefix=THRESHOLD
// RUN: bt-opt %s --bt-gemm-to-blas="min-mnk=0 callee=bt_gpu_sgemm" | FileCheck %s --check-prefix=CALLEE

// CALLEE is the CUDA pipeline's form: the same call ABI, another function
// (the runtime's cuBLAS wrapper on device pointers).
// CALLEE: func.func private @bt_gpu_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
// CALLEE-LABEL: func.func @matmul_transpose_b
//       CALLEE:   call @bt_gpu_sgemm(%c101_i32, %c111_i32, %c112_i32,
// CALLEE-NOT: cblas_sgemm

// THRESHOLD is the default min-mnk = 4096: static GEMMs with M·N·K below it
// (local attention sizes) stay loops, dynamic ones always call BLAS.

// CHECK: func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)

// C += A · Bᵀ: row-major (101), A not transposed (111), B transposed (112),
// alpha = beta = 1; pointers are aligned pointer + 4·offset; ld = max(row
// stride, row length, 1).
// CHECK-LABEL: func.func @matmul_transpose_b
//  CHECK-SAME:   %[[A:.*]]: memref<?x37xf32>, %[[B:.*]]: memref<29x37xf32>, %[[C:.*]]: memref<?x29xf32>
//   CHECK-DAG:   %[[ALPHA:.*]] = arith.constant 1.000000e+00 : f32
//   CHECK-DAG:   %[[ROWMAJOR:.*]] = arith.constant 101 : i32
//   CHECK-DAG:   %[[NOTRANS:.*]] = arith.constant 111 : i32
//   CHECK-DAG:   %[[TRANS:.*]] = arith.constant 112 : i32
//   CHECK-DAG:   %{{.*}}, %[[AOFF:.*]], %[[ASZ:.*]]:2, %[[AST:.*]]:2 = memref.extract_strided_metadata %[[A]]
//   CHECK-DAG:   %[[APTR:.*]] = memref.extract_aligned_pointer_as_index %[[A]]
//       CHECK:   %[[AI:.*]] = arith.index_cast %{{.*}} : index to i64
//       CHECK:   %[[AP:.*]] = llvm.inttoptr %[[AI]] : i64 to !llvm.ptr
//       CHECK:   call @cblas_sgemm(%[[ROWMAJOR]], %[[NOTRANS]], %[[TRANS]], %{{.*}}, %{{.*}}, %{{.*}}, %[[ALPHA]], %[[AP]], %{{.*}}, %{{.*}}, %{{.*}}, %[[ALPHA]], %{{.*}}, %{{.*}})
//   CHECK-NOT:   linalg.matmul
// THRESHOLD-LABEL: func.func @matmul_transpose_b
//       THRESHOLD:   call @cblas_sgemm
func.func @matmul_transpose_b(%a: memref<?x37xf32>, %b: memref<29x37xf32>, %c: memref<?x29xf32>) {
  linalg.matmul_transpose_b ins(%a, %b : memref<?x37xf32>, memref<29x37xf32>) outs(%c : memref<?x29xf32>)
  return
}

// Plain matmul: B not transposed. A strided view with unit inner stride is
// fine (its offset and row stride come from the metadata).
// CHECK-LABEL: func.func @matmul_strided
//       CHECK:   memref.extract_strided_metadata
//       CHECK:   call @cblas_sgemm(%c101_i32{{.*}}, %c111_i32{{.*}}, %c111_i32{{.*}}, 
// THRESHOLD-LABEL: func.func @matmul_strided
//       THRESHOLD:   linalg.matmul
func.func @matmul_strided(%a: memref<8x16xf32, strided<[32, 1], offset: 4>>, %b: memref<16x8xf32>, %c: memref<8x8xf32>) {
  linalg.matmul ins(%a, %b : memref<8x16xf32, strided<[32, 1], offset: 4>>, memref<16x8xf32>) outs(%c : memref<8x8xf32>)
  return
}

// Batched forms loop over the batch, advancing each pointer by its batch
// stride (in bytes).
// CHECK-LABEL: func.func @batch_matmul
//       CHECK:   scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
//       CHECK:     arith.muli %[[I]]
//       CHECK:     call @cblas_sgemm
//       CHECK:   }
// THRESHOLD-LABEL: func.func @batch_matmul
//       THRESHOLD:   linalg.batch_matmul
func.func @batch_matmul(%a: memref<?x7x7xf32>, %b: memref<?x7x8xf32>, %c: memref<?x7x8xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<?x7x7xf32>, memref<?x7x8xf32>) outs(%c : memref<?x7x8xf32>)
  return
}

// CHECK-LABEL: func.func @batch_matmul_transpose_b
//       CHECK:   scf.for
//       CHECK:     call @cblas_sgemm(%c101_i32{{.*}}, %c111_i32{{.*}}, %c112_i32{{.*}}, 
func.func @batch_matmul_transpose_b(%a: memref<?x7x8xf32>, %b: memref<?x7x8xf32>, %c: memref<?x7x7xf32>) {
  linalg.batch_matmul_transpose_b ins(%a, %b : memref<?x7x8xf32>, memref<?x7x8xf32>) outs(%c : memref<?x7x7xf32>)
  return
}

// Left alone: a non-unit innermost stride, a non-f32 GEMM, tensors.
// CHECK-LABEL: func.func @not_blas
//       CHECK:   linalg.matmul ins(%{{.*}}, %{{.*}} : memref<8x16xf32, strided<[1, 8]>>
//       CHECK:   linalg.matmul ins(%{{.*}}, %{{.*}} : memref<8x16xf16>
//       CHECK:   linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x16xf32>
func.func @not_blas(%a: memref<8x16xf32, strided<[1, 8]>>, %b: memref<16x8xf32>, %c: memref<8x8xf32>,
                    %a16: memref<8x16xf16>, %b16: memref<16x8xf16>, %c16: memref<8x8xf16>,
                    %ta: tensor<8x16xf32>, %tb: tensor<16x8xf32>, %tc: tensor<8x8xf32>) -> tensor<8x8xf32> {
  linalg.matmul ins(%a, %b : memref<8x16xf32, strided<[1, 8]>>, memref<16x8xf32>) outs(%c : memref<8x8xf32>)
  linalg.matmul ins(%a16, %b16 : memref<8x16xf16>, memref<16x8xf16>) outs(%c16 : memref<8x8xf16>)
  %r = linalg.matmul ins(%ta, %tb : tensor<8x16xf32>, tensor<16x8xf32>) outs(%tc : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// A zero fill of a fresh buffer right before the GEMM becomes beta = 0.
// CHECK-LABEL: func.func @zero_init
//   CHECK-NOT:   linalg.fill
//       CHECK:   %[[ALPHA:.*]] = arith.constant 1.000000e+00 : f32
//  CHECK-NEXT:   %[[BETA0:.*]] = arith.constant 0.000000e+00 : f32
//       CHECK:   call @cblas_sgemm({{.*}}, %[[ALPHA]], {{.*}}, %[[BETA0]], %{{.*}}, %{{.*}})
func.func @zero_init(%a: memref<?x37xf32>, %b: memref<29x37xf32>, %n: index) -> memref<?x29xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc(%n) : memref<?x29xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x29xf32>)
  linalg.matmul_transpose_b ins(%a, %b : memref<?x37xf32>, memref<29x37xf32>) outs(%c : memref<?x29xf32>)
  return %c : memref<?x29xf32>
}

// Not when the output is an argument (an input could alias it) or the fill
// is not zero.
// CHECK-LABEL: func.func @keep_fill
//       CHECK:   linalg.fill
//       CHECK:   call @cblas_sgemm
//       CHECK:   linalg.fill
//       CHECK:   call @cblas_sgemm
func.func @keep_fill(%a: memref<?x37xf32>, %b: memref<29x37xf32>, %c: memref<?x29xf32>, %n: index) -> memref<?x29xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<?x29xf32>)
  linalg.matmul_transpose_b ins(%a, %b : memref<?x37xf32>, memref<29x37xf32>) outs(%c : memref<?x29xf32>)
  %d = memref.alloc(%n) : memref<?x29xf32>
  linalg.fill ins(%one : f32) outs(%d : memref<?x29xf32>)
  linalg.matmul_transpose_b ins(%a, %b : memref<?x37xf32>, memref<29x37xf32>) outs(%d : memref<?x29xf32>)
  return %d : memref<?x29xf32>
}

// Ops on other buffers may lie between the fill and the GEMM (with --dtype
// bf16, the kernel that rounds the GEMM's input); an op on a view of the
// output may not.
// CHECK-LABEL: func.func @zero_init_across_kernels
//   CHECK-NOT:   linalg.fill
//       CHECK:   linalg.generic
//       CHECK:   memref.dealloc
//       CHECK:   %[[ALPHA:.*]] = arith.constant 1.000000e+00 : f32
//  CHECK-NEXT:   %[[BETA0:.*]] = arith.constant 0.000000e+00 : f32
//       CHECK:   call @cblas_sgemm({{.*}}, %[[ALPHA]], {{.*}}, %[[BETA0]], %{{.*}}, %{{.*}})
// CHECK-LABEL: func.func @keep_fill_read_between
//       CHECK:   linalg.fill
//       CHECK:   linalg.generic
//       CHECK:   call @cblas_sgemm
func.func @zero_init_across_kernels(%x: memref<?x37xf32>, %b: memref<29x37xf32>, %n: index) -> memref<?x29xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc(%n) : memref<?x29xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x29xf32>)
  %a = memref.alloc(%n) : memref<?x37xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<?x37xf32>) outs(%a : memref<?x37xf32>) {
  ^bb0(%v: f32, %o: f32):
    %e = math.exp %v : f32
    linalg.yield %e : f32
  }
  %t = memref.alloc(%n) : memref<?x37xf32>
  memref.dealloc %t : memref<?x37xf32>
  linalg.matmul_transpose_b ins(%a, %b : memref<?x37xf32>, memref<29x37xf32>) outs(%c : memref<?x29xf32>)
  memref.dealloc %a : memref<?x37xf32>
  return %c : memref<?x29xf32>
}
func.func @keep_fill_read_between(%a: memref<?x37xf32>, %b: memref<29x37xf32>, %n: index, %out: memref<?x29xf32>) -> memref<?x29xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc(%n) : memref<?x29xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x29xf32>)
  %row = memref.subview %c[0, 0] [%n, 29] [1, 1] : memref<?x29xf32> to memref<?x29xf32, strided<[29, 1]>>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%row : memref<?x29xf32, strided<[29, 1]>>) outs(%out : memref<?x29xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  linalg.matmul_transpose_b ins(%a, %b : memref<?x37xf32>, memref<29x37xf32>) outs(%c : memref<?x29xf32>)
  return %c : memref<?x29xf32>
}

// C += Aᵀ · B (linalg.matmul_transpose_a, the weight gradients of the backward
// sweep: A is [K, M]): A transposed (112), B not (111); M and N are C's sizes,
// K is A's row count and lda = max(A's row stride, M, 1).
// CHECK-LABEL: func.func @matmul_transpose_a
//  CHECK-SAME:   %[[A:.*]]: memref<?x29xf32>, %[[B:.*]]: memref<?x37xf32>, %[[C:.*]]: memref<29x37xf32>
//       CHECK:   %{{.*}}, %{{.*}}, %[[ASZ:.*]]:2, %[[AST:.*]]:2 = memref.extract_strided_metadata %[[A]]
//       CHECK:   %{{.*}}, %{{.*}}, %[[CSZ:.*]]:2, %{{.*}}:2 = memref.extract_strided_metadata %[[C]]
//       CHECK:   %[[LDMIN:.*]] = arith.maxsi %[[CSZ]]#0, %{{.*}} : index
//       CHECK:   %[[LDA:.*]] = arith.maxsi %[[AST]]#0, %[[LDMIN]] : index
//       CHECK:   %[[LDA32:.*]] = arith.index_cast %[[LDA]] : index to i32
//       CHECK:   %[[M32:.*]] = arith.index_cast %[[CSZ]]#0 : index to i32
//       CHECK:   %[[N32:.*]] = arith.index_cast %[[CSZ]]#1 : index to i32
//       CHECK:   %[[K32:.*]] = arith.index_cast %[[ASZ]]#0 : index to i32
//       CHECK:   call @cblas_sgemm(%c101_i32{{.*}}, %c112_i32{{.*}}, %c111_i32{{.*}}, %[[M32]], %[[N32]], %[[K32]], %{{.*}}, %{{.*}}, %[[LDA32]],
//   CHECK-NOT:   linalg.matmul_transpose_a
func.func @matmul_transpose_a(%a: memref<?x29xf32>, %b: memref<?x37xf32>, %c: memref<29x37xf32>) {
  linalg.matmul_transpose_a ins(%a, %b : memref<?x29xf32>, memref<?x37xf32>) outs(%c : memref<29x37xf32>)
  return
}

// -----

// With bf16-callee (the CUDA pipeline's bt_gpu_gemm_bf16), a GEMM with bf16
// inputs and an f32 output calls it; its A and B offsets are in 2-byte
// elements. Without it, such a GEMM stays a loop.
// RUN: bt-opt %s --split-input-file --bt-gemm-to-blas="min-mnk=0 callee=bt_gpu_sgemm bf16-callee=bt_gpu_gemm_bf16" | FileCheck %s --check-prefix=BF16
// BF16-LABEL: func.func @bf16_inputs
//   BF16-DAG:   %[[TWO:.*]] = arith.constant 2 : index
//   BF16-DAG:   %[[FOUR:.*]] = arith.constant 4 : index
//       BF16:   call @bt_gpu_gemm_bf16(
//   BF16-NOT:   call @bt_gpu_sgemm
func.func @bf16_inputs(%a: memref<?x16xbf16>, %b: memref<8x16xbf16>, %c: memref<?x8xf32>) {
  linalg.matmul_transpose_b ins(%a, %b : memref<?x16xbf16>, memref<8x16xbf16>) outs(%c : memref<?x8xf32>)
  return
}
