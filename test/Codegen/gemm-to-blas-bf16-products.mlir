// RUN: bt-opt %s --split-input-file --bt-gemm-to-blas="min-mnk=0 callee=bt_gpu_sgemm bf16-callee=bt_gpu_gemm_bf16 bf16-out-callee=bt_gpu_gemm_bf16_out" | FileCheck %s
// RUN: bt-opt %s --split-input-file --bt-gemm-to-blas="min-mnk=0 callee=bt_gpu_sgemm bf16-callee=bt_gpu_gemm_bf16" | FileCheck %s --check-prefix=NOOUT
// RUN: bt-opt %s --split-input-file --bt-gemm-to-blas="min-mnk=0 callee=bt_gpu_sgemm bf16-callee=bt_gpu_gemm_bf16 bf16-out-callee=bt_gpu_gemm_bf16_out bf16-bias-out-callee=bt_gpu_gemm_bf16_bias_out" | FileCheck %s --check-prefix=BIAS

// A bf16 GEMM into a zero-filled fresh f32 buffer that only the rounding of
// bt-bf16-gemm-outputs (bt.bf16_gemm_output) reads: cuBLAS writes the bf16
// product into the rounding's buffer (bt_gpu_gemm_bf16_out, beta = 0, C
// offset in 2-byte elements); the f32 buffer, its fill, its dealloc and the
// rounding are gone, and the bf16 buffer's allocation moves in front of the
// call. Without bf16-out-callee the rounding stays a generic after an f32
// product.
// CHECK-LABEL: func.func @product
//   CHECK-NOT:   memref<?x8xf32>
//       CHECK:   %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<?x8xbf16>
//   CHECK-NOT:   linalg.fill
//       CHECK:   memref.extract_aligned_pointer_as_index %[[OUT]]
//       CHECK:   arith.constant 1.000000e+00 : f32
//  CHECK-NEXT:   %[[BETA:.*]] = arith.constant 0.000000e+00 : f32
//       CHECK:   call @bt_gpu_gemm_bf16_out(%{{.*}}, %[[BETA]], %{{.*}}, %{{.*}})
//   CHECK-NOT:   linalg.generic
//   CHECK-NOT:   memref.dealloc
//       CHECK:   return %[[OUT]]
// NOOUT-LABEL: func.func @product
//       NOOUT:   call @bt_gpu_gemm_bf16(
//       NOOUT:   linalg.generic {{.*}} ins(%{{.*}} : memref<?x8xf32>) outs(%{{.*}} : memref<?x8xbf16>) attrs = {bt.bf16_gemm_output}
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @product(%a: memref<?x16xbf16>, %b: memref<8x16xbf16>) -> memref<?x8xbf16> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = memref.dim %a, %c0 : memref<?x16xbf16>
  %t = memref.alloc(%m) : memref<?x8xf32>
  linalg.fill ins(%zero : f32) outs(%t : memref<?x8xf32>)
  linalg.matmul_transpose_b ins(%a, %b : memref<?x16xbf16>, memref<8x16xbf16>) outs(%t : memref<?x8xf32>)
  %r = memref.alloc(%m) : memref<?x8xbf16>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : memref<?x8xf32>) outs(%r : memref<?x8xbf16>) attrs = {bt.bf16_gemm_output} {
  ^bb0(%x: f32, %o: bf16):
    %y = arith.truncf %x : f32 to bf16
    linalg.yield %y : bf16
  }
  memref.dealloc %t : memref<?x8xf32>
  return %r : memref<?x8xbf16>
}

// -----

// The f32 product has another reader (here a copy): it must exist, so the
// GEMM writes it in f32 (beta = 0 for the fill) and the rounding stays.
// CHECK-LABEL: func.func @product_read_twice
//       CHECK:   %[[T:.*]] = memref.alloc() : memref<4x8xf32>
//       CHECK:   call @bt_gpu_gemm_bf16(
//       CHECK:   linalg.generic {{.*}} ins(%[[T]] : memref<4x8xf32>) {{.*}} attrs = {bt.bf16_gemm_output}
//       CHECK:   memref.copy %[[T]]
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @product_read_twice(%a: memref<4x16xbf16>, %b: memref<8x16xbf16>, %r: memref<4x8xbf16>, %s: memref<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%zero : f32) outs(%t : memref<4x8xf32>)
  linalg.matmul_transpose_b ins(%a, %b : memref<4x16xbf16>, memref<8x16xbf16>) outs(%t : memref<4x8xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : memref<4x8xf32>) outs(%r : memref<4x8xbf16>) attrs = {bt.bf16_gemm_output} {
  ^bb0(%x: f32, %o: bf16):
    %y = arith.truncf %x : f32 to bf16
    linalg.yield %y : bf16
  }
  memref.copy %t, %s : memref<4x8xf32> to memref<4x8xf32>
  memref.dealloc %t : memref<4x8xf32>
  return
}

// -----

// An init that is neither a zero fill nor the marked bf16 bias broadcast
// (here a copy of f32 values) is part of the product (beta = 1): cuBLAS
// would read C in bf16, so the f32 product stays.
// CHECK-LABEL: func.func @product_with_init
//       CHECK:   call @bt_gpu_gemm_bf16(
//       CHECK:   linalg.generic {{.*}} attrs = {bt.bf16_gemm_output}
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @product_with_init(%a: memref<4x16xbf16>, %b: memref<8x16xbf16>, %init: memref<4x8xf32>, %r: memref<4x8xbf16>) {
  %t = memref.alloc() : memref<4x8xf32>
  memref.copy %init, %t : memref<4x8xf32> to memref<4x8xf32>
  linalg.matmul_transpose_b ins(%a, %b : memref<4x16xbf16>, memref<8x16xbf16>) outs(%t : memref<4x8xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : memref<4x8xf32>) outs(%r : memref<4x8xbf16>) attrs = {bt.bf16_gemm_output} {
  ^bb0(%x: f32, %o: bf16):
    %y = arith.truncf %x : f32 to bf16
    linalg.yield %y : bf16
  }
  memref.dealloc %t : memref<4x8xf32>
  return
}

// -----

// A generic that reads the f32 product without the marker (any other
// computation, even one of the same shape) is not folded.
// CHECK-LABEL: func.func @unmarked
//       CHECK:   call @bt_gpu_gemm_bf16(
//       CHECK:   linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @unmarked(%a: memref<4x16xbf16>, %b: memref<8x16xbf16>, %r: memref<4x8xbf16>) {
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%zero : f32) outs(%t : memref<4x8xf32>)
  linalg.matmul_transpose_b ins(%a, %b : memref<4x16xbf16>, memref<8x16xbf16>) outs(%t : memref<4x8xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : memref<4x8xf32>) outs(%r : memref<4x8xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %y = arith.truncf %x : f32 to bf16
    linalg.yield %y : bf16
  }
  memref.dealloc %t : memref<4x8xf32>
  return
}

// -----

// The bf16 buffer is read between the GEMM and the rounding (its old
// contents): writing the product there at the GEMM would change what that
// read sees, so the rounding stays.
// CHECK-LABEL: func.func @out_read_between
//       CHECK:   call @bt_gpu_gemm_bf16(
//       CHECK:   memref.copy
//       CHECK:   linalg.generic {{.*}} attrs = {bt.bf16_gemm_output}
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @out_read_between(%a: memref<4x16xbf16>, %b: memref<8x16xbf16>, %r: memref<4x8xbf16>, %old: memref<4x8xbf16>) {
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%zero : f32) outs(%t : memref<4x8xf32>)
  linalg.matmul_transpose_b ins(%a, %b : memref<4x16xbf16>, memref<8x16xbf16>) outs(%t : memref<4x8xf32>)
  memref.copy %r, %old : memref<4x8xbf16> to memref<4x8xbf16>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : memref<4x8xf32>) outs(%r : memref<4x8xbf16>) attrs = {bt.bf16_gemm_output} {
  ^bb0(%x: f32, %o: bf16):
    %y = arith.truncf %x : f32 to bf16
    linalg.yield %y : bf16
  }
  memref.dealloc %t : memref<4x8xf32>
  return
}

// -----

// The bias as C (beta = 1; bt-bf16-gemm-outputs' marked init broadcasts the
// bias rounded to bf16): the init writes the bf16 buffer directly (rounding
// the bias, exact for these values) and cuBLAS adds it and writes the
// rounded product there, beta = 1; the bf16 buffer's allocation moves in
// front of the init, the f32 buffer and the rounding go.
// CHECK-LABEL: func.func @bias_product
//       CHECK:   %[[OUT:.*]] = memref.alloc() : memref<4x8xbf16>
//   CHECK-NOT:   memref<4x8xf32>
//       CHECK:   linalg.generic {{.*}} ins(%{{.*}} : memref<8xf32>) outs(%[[OUT]] : memref<4x8xbf16>) {
//       CHECK:     arith.cmpf uno
//       CHECK:     linalg.yield %{{.*}} : bf16
//       CHECK:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
//       CHECK:   call @bt_gpu_gemm_bf16_out(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}}, %{{.*}})
//   CHECK-NOT:   bt.bf16_gemm
//       CHECK:   return %[[OUT]]
// NOOUT-LABEL: func.func @bias_product
//       NOOUT:   attrs = {bt.bf16_gemm_init}
// With bf16-bias-out-callee too, an f32 bias (not a bf16 parameter) keeps
// the broadcast C: cuBLASLt's bias has the output's type.
// BIAS-LABEL: func.func @bias_product
//       BIAS:   linalg.generic {{.*}} ins(%{{.*}} : memref<8xf32>) outs(%{{.*}} : memref<4x8xbf16>) {
//       BIAS:   call @bt_gpu_gemm_bf16_out(
//   BIAS-NOT:   call @bt_gpu_gemm_bf16_bias_out
//       NOOUT:   call @bt_gpu_gemm_bf16(
//       NOOUT:   attrs = {bt.bf16_gemm_output}
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @bias_product(%a: memref<4x16xbf16>, %b: memref<8x16xbf16>, %bias: memref<8xf32>) -> memref<4x8xbf16> {
  %t = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%bias : memref<8xf32>) outs(%t : memref<4x8xf32>) attrs = {bt.bf16_gemm_init} {
  ^bb0(%x: f32, %o: f32):
    %y = arith.truncf %x : f32 to bf16
    %z = arith.extf %y : bf16 to f32
    linalg.yield %z : f32
  }
  linalg.matmul_transpose_b ins(%a, %b : memref<4x16xbf16>, memref<8x16xbf16>) outs(%t : memref<4x8xf32>)
  %r = memref.alloc() : memref<4x8xbf16>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : memref<4x8xf32>) outs(%r : memref<4x8xbf16>) attrs = {bt.bf16_gemm_output} {
  ^bb0(%x: f32, %o: bf16):
    %y = arith.truncf %x : f32 to bf16
    linalg.yield %y : bf16
  }
  memref.dealloc %t : memref<4x8xf32>
  return %r : memref<4x8xbf16>
}

// -----

// A bf16 bias (a parameter bt-bf16-gemm-outputs made bf16; its init
// broadcasts it extended exactly). With bf16-bias-out-callee the epilogue
// adds it: the init goes, beta = 0 and the bias vector's address (its
// offset in 2-byte elements) is the 15th argument, so the broadcast [M, N]
// is neither written nor read. Without it the init writes the bf16 C as
// the bias's bits, unrounded (beta = 1).
// BIAS-LABEL: func.func @bf16_bias_product
//   BIAS-NOT:   linalg.generic
//       BIAS:   %[[OUT:.*]] = memref.alloc() : memref<4x8xbf16>
//       BIAS:   memref.extract_aligned_pointer_as_index %[[OUT]]
//       BIAS:   %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
//       BIAS:   %{{.*}}, %[[OFF:[a-z_0-9]*]], %{{.*}}, %{{.*}} = memref.extract_strided_metadata %[[V:[a-z_0-9]*]] : memref<8xbf16, strided<[1], offset: 8>>
//       BIAS:   %[[BP:.*]] = memref.extract_aligned_pointer_as_index %[[V]]
//       BIAS:   %[[TWO:.*]] = arith.constant 2 : index
//       BIAS:   %[[BOFF:.*]] = arith.muli %[[OFF]], %[[TWO]]
//       BIAS:   %[[BADDR:.*]] = arith.addi %[[BP]], %[[BOFF]]
//       BIAS:   %[[BI:.*]] = arith.index_cast %[[BADDR]] : index to i64
//       BIAS:   %[[PTR:.*]] = llvm.inttoptr %[[BI]]
//       BIAS:   call @bt_gpu_gemm_bf16_bias_out(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ZERO]], %{{.*}}, %{{.*}}, %[[PTR]])
//   BIAS-NOT:   linalg.generic
//       BIAS:   return %[[OUT]]
// CHECK-LABEL: func.func @bf16_bias_product
//       CHECK:   %[[OUT:.*]] = memref.alloc() : memref<4x8xbf16>
//       CHECK:   linalg.generic {{.*}} ins(%{{.*}} : memref<8xbf16, strided<[1], offset: 8>>) outs(%[[OUT]] : memref<4x8xbf16>) {
//  CHECK-NEXT:   ^bb0(%[[X:.*]]: bf16, %{{.*}}: bf16):
//  CHECK-NEXT:     linalg.yield %[[X]] : bf16
//       CHECK:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
//       CHECK:   call @bt_gpu_gemm_bf16_out(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}}, %{{.*}})
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @bf16_bias_product(%a: memref<4x16xbf16>, %b: memref<8x16xbf16>, %biases: memref<16xbf16>) -> memref<4x8xbf16> {
  %t = memref.alloc() : memref<4x8xf32>
  // The second half of a bias parameter (a view with an offset).
  %bias = memref.subview %biases[8] [8] [1] : memref<16xbf16> to memref<8xbf16, strided<[1], offset: 8>>
  linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%bias : memref<8xbf16, strided<[1], offset: 8>>) outs(%t : memref<4x8xf32>) attrs = {bt.bf16_gemm_init} {
  ^bb0(%x: bf16, %o: f32):
    %z = arith.extf %x : bf16 to f32
    linalg.yield %z : f32
  }
  linalg.matmul_transpose_b ins(%a, %b : memref<4x16xbf16>, memref<8x16xbf16>) outs(%t : memref<4x8xf32>)
  %r = memref.alloc() : memref<4x8xbf16>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : memref<4x8xf32>) outs(%r : memref<4x8xbf16>) attrs = {bt.bf16_gemm_output} {
  ^bb0(%x: f32, %o: bf16):
    %y = arith.truncf %x : f32 to bf16
    linalg.yield %y : bf16
  }
  memref.dealloc %t : memref<4x8xf32>
  return %r : memref<4x8xbf16>
}

// -----

// A decode entry's sampled logits (bt-bf16-gemm-outputs): the rounding
// writes a row of step_logits [B, L_B, V], a subview made after the GEMM.
// The subview moves in front of the call and cuBLAS writes the bf16 logits
// there, with the row stride of step_logits as ldc (L_B * V = 32).
// CHECK-LABEL: func.func @step_logits_row
//       CHECK:   %[[ROW:.*]] = memref.subview %{{.*}}[0, 1, 0] [%{{.*}}, 1, 8] [1, 1, 1] : memref<?x4x8xbf16> to memref<?x8xbf16, strided<[32, 1], offset: 8>>
//       CHECK:   memref.extract_strided_metadata %[[ROW]]
//       CHECK:   memref.extract_aligned_pointer_as_index %[[ROW]]
//       CHECK:   call @bt_gpu_gemm_bf16_out(
//   CHECK-NOT:   linalg.generic
//       CHECK:   return %[[ROW]]
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @step_logits_row(%a: memref<?x16xbf16>, %b: memref<8x16xbf16>, %steps: memref<?x4x8xbf16>) -> memref<?x8xbf16, strided<[32, 1], offset: 8>> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = memref.dim %a, %c0 : memref<?x16xbf16>
  %t = memref.alloc(%m) : memref<?x8xf32>
  linalg.fill ins(%zero : f32) outs(%t : memref<?x8xf32>)
  linalg.matmul_transpose_b ins(%a, %b : memref<?x16xbf16>, memref<8x16xbf16>) outs(%t : memref<?x8xf32>)
  %row = memref.subview %steps[0, 1, 0] [%m, 1, 8] [1, 1, 1] : memref<?x4x8xbf16> to memref<?x8xbf16, strided<[32, 1], offset: 8>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : memref<?x8xf32>) outs(%row : memref<?x8xbf16, strided<[32, 1], offset: 8>>) attrs = {bt.bf16_gemm_output} {
  ^bb0(%x: f32, %o: bf16):
    %y = arith.truncf %x : f32 to bf16
    linalg.yield %y : bf16
  }
  memref.dealloc %t : memref<?x8xf32>
  return %row : memref<?x8xbf16, strided<[32, 1], offset: 8>>
}
