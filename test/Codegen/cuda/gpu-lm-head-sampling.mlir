// RUN: bt-opt %s -split-input-file -bt-gpu-lm-head-sampling | FileCheck %s

// The LM head's GEMM (bt-gemm-to-blas: logits = x · wᵀ, beta = 0) and the
// sampler of its logits become one runtime call at the sampler's place,
// with the per-tile maxima [M, ceil(N / 64)] as scratch; the GEMM's address
// arithmetic goes with it. A free of an unrelated buffer in between is
// allowed.

// CHECK-LABEL: func.func @fused(
// CHECK-SAME: %[[S:[^:]+]]: i64, %[[X:[^:]+]]: memref<4x64xbf16>, %[[W:[^:]+]]: memref<100x64xbf16>, %[[L:[^:]+]]: memref<4x100xbf16>, %[[T:[^:]+]]: memref<?xi64>, %[[O:[^:]+]]: memref<8xf32>
// CHECK-NOT: call @bt_gpu_gemm_bf16_out
// CHECK-NOT: extract_aligned_pointer_as_index
// CHECK: memref.dealloc %[[O]]
// CHECK-NOT: memref.cast
// CHECK-DAG: %[[C0:.+]] = arith.constant 0 : index
// CHECK-DAG: %[[C64:.+]] = arith.constant 64 : index
// CHECK-DAG: %[[M:.+]] = memref.dim %[[X]], %[[C0]] : memref<4x64xbf16>
// CHECK-DAG: %[[N:.+]] = memref.dim %[[W]], %[[C0]] : memref<100x64xbf16>
// CHECK: %[[NT:.+]] = arith.ceildivui %[[N]], %[[C64]] : index
// CHECK: %[[PV:.+]] = memref.alloc(%[[M]], %[[NT]]) : memref<?x?xf32>
// CHECK: %[[PI:.+]] = memref.alloc(%[[M]], %[[NT]]) : memref<?x?xi32>
// CHECK-DAG: %[[XC:.+]] = memref.cast %[[X]] : memref<4x64xbf16> to memref<?x?xbf16, strided<[?, ?], offset: ?>>
// CHECK-DAG: %[[WC:.+]] = memref.cast %[[W]] : memref<100x64xbf16> to memref<?x?xbf16, strided<[?, ?], offset: ?>>
// CHECK-DAG: %[[LC:.+]] = memref.cast %[[L]] : memref<4x100xbf16> to memref<?x?xbf16, strided<[?, ?], offset: ?>>
// CHECK-DAG: %[[TC:.+]] = memref.cast %[[T]] : memref<?xi64> to memref<?xi64, strided<[?], offset: ?>>
// CHECK-DAG: %[[PVC:.+]] = memref.cast %[[PV]] : memref<?x?xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK-DAG: %[[PIC:.+]] = memref.cast %[[PI]] : memref<?x?xi32> to memref<?x?xi32, strided<[?, ?], offset: ?>>
// CHECK: call @bt_gpu_lm_head_sample_bf16(%[[S]], %[[XC]], %[[WC]], %[[LC]], %[[TC]], %[[PVC]], %[[PIC]])
// CHECK-NEXT: memref.dealloc %[[PV]]
// CHECK-NEXT: memref.dealloc %[[PI]]
// CHECK-NOT: call @bt_rt_sample_bf16
// CHECK: return
// CHECK: func.func private @bt_gpu_lm_head_sample_bf16(i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64, strided<[?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xi32, strided<[?, ?], offset: ?>>) attributes {bt.weak_import, llvm.emit_c_interface}
func.func private @bt_gpu_gemm_bf16_out(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func private @bt_rt_sample_bf16(i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) attributes {llvm.emit_c_interface}
func.func @fused(%s: i64, %x: memref<4x64xbf16>, %w: memref<100x64xbf16>, %l: memref<4x100xbf16>, %tok: memref<?xi64>, %o: memref<8xf32>) {
  %c2 = arith.constant 2 : index
  %order = arith.constant 101 : i32
  %na = arith.constant 111 : i32
  %tb = arith.constant 112 : i32
  %m = arith.constant 4 : i32
  %n = arith.constant 100 : i32
  %k = arith.constant 64 : i32
  %alpha = arith.constant 1.0 : f32
  %beta = arith.constant 0.0 : f32
  %x_base, %x_off, %x_sz:2, %x_st:2 = memref.extract_strided_metadata %x : memref<4x64xbf16> -> memref<bf16>, index, index, index, index, index
  %x_al = memref.extract_aligned_pointer_as_index %x : memref<4x64xbf16> -> index
  %x_b = arith.muli %x_off, %c2 : index
  %x_a = arith.addi %x_al, %x_b : index
  %x_i = arith.index_cast %x_a : index to i64
  %x_p = llvm.inttoptr %x_i : i64 to !llvm.ptr
  %w_base, %w_off, %w_sz:2, %w_st:2 = memref.extract_strided_metadata %w : memref<100x64xbf16> -> memref<bf16>, index, index, index, index, index
  %w_al = memref.extract_aligned_pointer_as_index %w : memref<100x64xbf16> -> index
  %w_b = arith.muli %w_off, %c2 : index
  %w_a = arith.addi %w_al, %w_b : index
  %w_i = arith.index_cast %w_a : index to i64
  %w_p = llvm.inttoptr %w_i : i64 to !llvm.ptr
  %c_base, %c_off, %c_sz:2, %c_st:2 = memref.extract_strided_metadata %l : memref<4x100xbf16> -> memref<bf16>, index, index, index, index, index
  %c_al = memref.extract_aligned_pointer_as_index %l : memref<4x100xbf16> -> index
  %c_b = arith.muli %c_off, %c2 : index
  %c_a = arith.addi %c_al, %c_b : index
  %c_i = arith.index_cast %c_a : index to i64
  %c_p = llvm.inttoptr %c_i : i64 to !llvm.ptr
  call @bt_gpu_gemm_bf16_out(%order, %na, %tb, %m, %n, %k, %alpha, %x_p, %k, %w_p, %k, %beta, %c_p, %n) : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  memref.dealloc %o : memref<8xf32>
  %lc = memref.cast %l : memref<4x100xbf16> to memref<?x?xbf16, strided<[?, ?], offset: ?>>
  call @bt_rt_sample_bf16(%s, %lc, %tok) : (i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) -> ()
  return
}

// -----

// beta = 1: the GEMM adds to the logits, which the fused call would not.
// CHECK-LABEL: func.func @accumulates(
// CHECK: call @bt_gpu_gemm_bf16_out
// CHECK: call @bt_rt_sample_bf16
// CHECK-NOT: bt_gpu_lm_head_sample_bf16
func.func private @bt_gpu_gemm_bf16_out(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func private @bt_rt_sample_bf16(i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) attributes {llvm.emit_c_interface}
func.func @accumulates(%s: i64, %x: memref<4x64xbf16>, %w: memref<100x64xbf16>, %l: memref<4x100xbf16>, %tok: memref<?xi64>) {
  %c2 = arith.constant 2 : index
  %order = arith.constant 101 : i32
  %na = arith.constant 111 : i32
  %tb = arith.constant 112 : i32
  %m = arith.constant 4 : i32
  %n = arith.constant 100 : i32
  %k = arith.constant 64 : i32
  %alpha = arith.constant 1.0 : f32
  %beta = arith.constant 1.0 : f32
  %x_base, %x_off, %x_sz:2, %x_st:2 = memref.extract_strided_metadata %x : memref<4x64xbf16> -> memref<bf16>, index, index, index, index, index
  %x_al = memref.extract_aligned_pointer_as_index %x : memref<4x64xbf16> -> index
  %x_b = arith.muli %x_off, %c2 : index
  %x_a = arith.addi %x_al, %x_b : index
  %x_i = arith.index_cast %x_a : index to i64
  %x_p = llvm.inttoptr %x_i : i64 to !llvm.ptr
  %w_base, %w_off, %w_sz:2, %w_st:2 = memref.extract_strided_metadata %w : memref<100x64xbf16> -> memref<bf16>, index, index, index, index, index
  %w_al = memref.extract_aligned_pointer_as_index %w : memref<100x64xbf16> -> index
  %w_b = arith.muli %w_off, %c2 : index
  %w_a = arith.addi %w_al, %w_b : index
  %w_i = arith.index_cast %w_a : index to i64
  %w_p = llvm.inttoptr %w_i : i64 to !llvm.ptr
  %c_base, %c_off, %c_sz:2, %c_st:2 = memref.extract_strided_metadata %l : memref<4x100xbf16> -> memref<bf16>, index, index, index, index, index
  %c_al = memref.extract_aligned_pointer_as_index %l : memref<4x100xbf16> -> index
  %c_b = arith.muli %c_off, %c2 : index
  %c_a = arith.addi %c_al, %c_b : index
  %c_i = arith.index_cast %c_a : index to i64
  %c_p = llvm.inttoptr %c_i : i64 to !llvm.ptr
  call @bt_gpu_gemm_bf16_out(%order, %na, %tb, %m, %n, %k, %alpha, %x_p, %k, %w_p, %k, %beta, %c_p, %n) : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  %lc = memref.cast %l : memref<4x100xbf16> to memref<?x?xbf16, strided<[?, ?], offset: ?>>
  call @bt_rt_sample_bf16(%s, %lc, %tok) : (i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) -> ()
  return
}

// -----

// B not transposed: not x · wᵀ.
// CHECK-LABEL: func.func @not_transposed(
// CHECK: call @bt_gpu_gemm_bf16_out
// CHECK: call @bt_rt_sample_bf16
// CHECK-NOT: bt_gpu_lm_head_sample_bf16
func.func private @bt_gpu_gemm_bf16_out(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func private @bt_rt_sample_bf16(i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) attributes {llvm.emit_c_interface}
func.func @not_transposed(%s: i64, %x: memref<4x64xbf16>, %w: memref<100x64xbf16>, %l: memref<4x100xbf16>, %tok: memref<?xi64>) {
  %c2 = arith.constant 2 : index
  %order = arith.constant 101 : i32
  %na = arith.constant 111 : i32
  %tb = arith.constant 111 : i32
  %m = arith.constant 4 : i32
  %n = arith.constant 100 : i32
  %k = arith.constant 64 : i32
  %alpha = arith.constant 1.0 : f32
  %beta = arith.constant 0.0 : f32
  %x_base, %x_off, %x_sz:2, %x_st:2 = memref.extract_strided_metadata %x : memref<4x64xbf16> -> memref<bf16>, index, index, index, index, index
  %x_al = memref.extract_aligned_pointer_as_index %x : memref<4x64xbf16> -> index
  %x_b = arith.muli %x_off, %c2 : index
  %x_a = arith.addi %x_al, %x_b : index
  %x_i = arith.index_cast %x_a : index to i64
  %x_p = llvm.inttoptr %x_i : i64 to !llvm.ptr
  %w_base, %w_off, %w_sz:2, %w_st:2 = memref.extract_strided_metadata %w : memref<100x64xbf16> -> memref<bf16>, index, index, index, index, index
  %w_al = memref.extract_aligned_pointer_as_index %w : memref<100x64xbf16> -> index
  %w_b = arith.muli %w_off, %c2 : index
  %w_a = arith.addi %w_al, %w_b : index
  %w_i = arith.index_cast %w_a : index to i64
  %w_p = llvm.inttoptr %w_i : i64 to !llvm.ptr
  %c_base, %c_off, %c_sz:2, %c_st:2 = memref.extract_strided_metadata %l : memref<4x100xbf16> -> memref<bf16>, index, index, index, index, index
  %c_al = memref.extract_aligned_pointer_as_index %l : memref<4x100xbf16> -> index
  %c_b = arith.muli %c_off, %c2 : index
  %c_a = arith.addi %c_al, %c_b : index
  %c_i = arith.index_cast %c_a : index to i64
  %c_p = llvm.inttoptr %c_i : i64 to !llvm.ptr
  call @bt_gpu_gemm_bf16_out(%order, %na, %tb, %m, %n, %k, %alpha, %x_p, %k, %w_p, %k, %beta, %c_p, %n) : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  %lc = memref.cast %l : memref<4x100xbf16> to memref<?x?xbf16, strided<[?, ?], offset: ?>>
  call @bt_rt_sample_bf16(%s, %lc, %tok) : (i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) -> ()
  return
}

// -----

// Another call between them might read the logits or write x.
// CHECK-LABEL: func.func @call_between(
// CHECK: call @bt_gpu_gemm_bf16_out
// CHECK: call @bt_rt_sample_bf16
// CHECK-NOT: bt_gpu_lm_head_sample_bf16
func.func private @bt_gpu_gemm_bf16_out(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func private @bt_rt_sample_bf16(i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) attributes {llvm.emit_c_interface}
func.func private @other()
func.func @call_between(%s: i64, %x: memref<4x64xbf16>, %w: memref<100x64xbf16>, %l: memref<4x100xbf16>, %tok: memref<?xi64>) {
  %c2 = arith.constant 2 : index
  %order = arith.constant 101 : i32
  %na = arith.constant 111 : i32
  %tb = arith.constant 112 : i32
  %m = arith.constant 4 : i32
  %n = arith.constant 100 : i32
  %k = arith.constant 64 : i32
  %alpha = arith.constant 1.0 : f32
  %beta = arith.constant 0.0 : f32
  %x_base, %x_off, %x_sz:2, %x_st:2 = memref.extract_strided_metadata %x : memref<4x64xbf16> -> memref<bf16>, index, index, index, index, index
  %x_al = memref.extract_aligned_pointer_as_index %x : memref<4x64xbf16> -> index
  %x_b = arith.muli %x_off, %c2 : index
  %x_a = arith.addi %x_al, %x_b : index
  %x_i = arith.index_cast %x_a : index to i64
  %x_p = llvm.inttoptr %x_i : i64 to !llvm.ptr
  %w_base, %w_off, %w_sz:2, %w_st:2 = memref.extract_strided_metadata %w : memref<100x64xbf16> -> memref<bf16>, index, index, index, index, index
  %w_al = memref.extract_aligned_pointer_as_index %w : memref<100x64xbf16> -> index
  %w_b = arith.muli %w_off, %c2 : index
  %w_a = arith.addi %w_al, %w_b : index
  %w_i = arith.index_cast %w_a : index to i64
  %w_p = llvm.inttoptr %w_i : i64 to !llvm.ptr
  %c_base, %c_off, %c_sz:2, %c_st:2 = memref.extract_strided_metadata %l : memref<4x100xbf16> -> memref<bf16>, index, index, index, index, index
  %c_al = memref.extract_aligned_pointer_as_index %l : memref<4x100xbf16> -> index
  %c_b = arith.muli %c_off, %c2 : index
  %c_a = arith.addi %c_al, %c_b : index
  %c_i = arith.index_cast %c_a : index to i64
  %c_p = llvm.inttoptr %c_i : i64 to !llvm.ptr
  call @bt_gpu_gemm_bf16_out(%order, %na, %tb, %m, %n, %k, %alpha, %x_p, %k, %w_p, %k, %beta, %c_p, %n) : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  call @other() : () -> ()
  %lc = memref.cast %l : memref<4x100xbf16> to memref<?x?xbf16, strided<[?, ?], offset: ?>>
  call @bt_rt_sample_bf16(%s, %lc, %tok) : (i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) -> ()
  return
}

// -----

// x freed and a buffer allocated between the calls (as bufferization leaves
// the final LayerNorm's output and the tokens' buffer): the free moves after
// the fused call.
// CHECK-LABEL: func.func @frees_x(
// CHECK-SAME: %{{[^:]+}}: i64, %[[X:[^:]+]]: memref<4x64xbf16>
// CHECK-NOT: memref.dealloc %[[X]]
// CHECK: memref.alloc() : memref<8xi64>
// CHECK: call @bt_gpu_lm_head_sample_bf16(
// CHECK: memref.dealloc %[[X]]
// CHECK-NOT: call @bt_rt_sample_bf16
func.func private @bt_gpu_gemm_bf16_out(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func private @bt_rt_sample_bf16(i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) attributes {llvm.emit_c_interface}
func.func @frees_x(%s: i64, %x: memref<4x64xbf16>, %w: memref<100x64xbf16>, %l: memref<4x100xbf16>, %tok: memref<?xi64>) {
  %c2 = arith.constant 2 : index
  %order = arith.constant 101 : i32
  %na = arith.constant 111 : i32
  %tb = arith.constant 112 : i32
  %m = arith.constant 4 : i32
  %n = arith.constant 100 : i32
  %k = arith.constant 64 : i32
  %alpha = arith.constant 1.0 : f32
  %beta = arith.constant 0.0 : f32
  %x_base, %x_off, %x_sz:2, %x_st:2 = memref.extract_strided_metadata %x : memref<4x64xbf16> -> memref<bf16>, index, index, index, index, index
  %x_al = memref.extract_aligned_pointer_as_index %x : memref<4x64xbf16> -> index
  %x_b = arith.muli %x_off, %c2 : index
  %x_a = arith.addi %x_al, %x_b : index
  %x_i = arith.index_cast %x_a : index to i64
  %x_p = llvm.inttoptr %x_i : i64 to !llvm.ptr
  %w_base, %w_off, %w_sz:2, %w_st:2 = memref.extract_strided_metadata %w : memref<100x64xbf16> -> memref<bf16>, index, index, index, index, index
  %w_al = memref.extract_aligned_pointer_as_index %w : memref<100x64xbf16> -> index
  %w_b = arith.muli %w_off, %c2 : index
  %w_a = arith.addi %w_al, %w_b : index
  %w_i = arith.index_cast %w_a : index to i64
  %w_p = llvm.inttoptr %w_i : i64 to !llvm.ptr
  %c_base, %c_off, %c_sz:2, %c_st:2 = memref.extract_strided_metadata %l : memref<4x100xbf16> -> memref<bf16>, index, index, index, index, index
  %c_al = memref.extract_aligned_pointer_as_index %l : memref<4x100xbf16> -> index
  %c_b = arith.muli %c_off, %c2 : index
  %c_a = arith.addi %c_al, %c_b : index
  %c_i = arith.index_cast %c_a : index to i64
  %c_p = llvm.inttoptr %c_i : i64 to !llvm.ptr
  call @bt_gpu_gemm_bf16_out(%order, %na, %tb, %m, %n, %k, %alpha, %x_p, %k, %w_p, %k, %beta, %c_p, %n) : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  memref.dealloc %x : memref<4x64xbf16>
  %fresh = memref.alloc() : memref<8xi64>
  %lc = memref.cast %l : memref<4x100xbf16> to memref<?x?xbf16, strided<[?, ?], offset: ?>>
  call @bt_rt_sample_bf16(%s, %lc, %tok) : (i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) -> ()
  return
}

// -----

// The logits freed before the sampler reads them: left alone.
// CHECK-LABEL: func.func @frees_logits(
// CHECK: call @bt_gpu_gemm_bf16_out
// CHECK: call @bt_rt_sample_bf16
// CHECK-NOT: bt_gpu_lm_head_sample_bf16
func.func private @bt_gpu_gemm_bf16_out(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func private @bt_rt_sample_bf16(i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) attributes {llvm.emit_c_interface}
func.func @frees_logits(%s: i64, %x: memref<4x64xbf16>, %w: memref<100x64xbf16>, %l: memref<4x100xbf16>, %tok: memref<?xi64>) {
  %c2 = arith.constant 2 : index
  %order = arith.constant 101 : i32
  %na = arith.constant 111 : i32
  %tb = arith.constant 112 : i32
  %m = arith.constant 4 : i32
  %n = arith.constant 100 : i32
  %k = arith.constant 64 : i32
  %alpha = arith.constant 1.0 : f32
  %beta = arith.constant 0.0 : f32
  %x_base, %x_off, %x_sz:2, %x_st:2 = memref.extract_strided_metadata %x : memref<4x64xbf16> -> memref<bf16>, index, index, index, index, index
  %x_al = memref.extract_aligned_pointer_as_index %x : memref<4x64xbf16> -> index
  %x_b = arith.muli %x_off, %c2 : index
  %x_a = arith.addi %x_al, %x_b : index
  %x_i = arith.index_cast %x_a : index to i64
  %x_p = llvm.inttoptr %x_i : i64 to !llvm.ptr
  %w_base, %w_off, %w_sz:2, %w_st:2 = memref.extract_strided_metadata %w : memref<100x64xbf16> -> memref<bf16>, index, index, index, index, index
  %w_al = memref.extract_aligned_pointer_as_index %w : memref<100x64xbf16> -> index
  %w_b = arith.muli %w_off, %c2 : index
  %w_a = arith.addi %w_al, %w_b : index
  %w_i = arith.index_cast %w_a : index to i64
  %w_p = llvm.inttoptr %w_i : i64 to !llvm.ptr
  %c_base, %c_off, %c_sz:2, %c_st:2 = memref.extract_strided_metadata %l : memref<4x100xbf16> -> memref<bf16>, index, index, index, index, index
  %c_al = memref.extract_aligned_pointer_as_index %l : memref<4x100xbf16> -> index
  %c_b = arith.muli %c_off, %c2 : index
  %c_a = arith.addi %c_al, %c_b : index
  %c_i = arith.index_cast %c_a : index to i64
  %c_p = llvm.inttoptr %c_i : i64 to !llvm.ptr
  call @bt_gpu_gemm_bf16_out(%order, %na, %tb, %m, %n, %k, %alpha, %x_p, %k, %w_p, %k, %beta, %c_p, %n) : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  memref.dealloc %l : memref<4x100xbf16>
  %lc = memref.cast %l : memref<4x100xbf16> to memref<?x?xbf16, strided<[?, ?], offset: ?>>
  call @bt_rt_sample_bf16(%s, %lc, %tok) : (i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) -> ()
  return
}

// -----

// The sampler reads other logits than the GEMM writes.
// CHECK-LABEL: func.func @other_logits(
// CHECK: call @bt_gpu_gemm_bf16_out
// CHECK: call @bt_rt_sample_bf16
// CHECK-NOT: bt_gpu_lm_head_sample_bf16
func.func private @bt_gpu_gemm_bf16_out(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func private @bt_rt_sample_bf16(i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) attributes {llvm.emit_c_interface}
func.func @other_logits(%s: i64, %x: memref<4x64xbf16>, %w: memref<100x64xbf16>, %l: memref<4x100xbf16>, %tok: memref<?xi64>, %l2: memref<4x100xbf16>) {
  %c2 = arith.constant 2 : index
  %order = arith.constant 101 : i32
  %na = arith.constant 111 : i32
  %tb = arith.constant 112 : i32
  %m = arith.constant 4 : i32
  %n = arith.constant 100 : i32
  %k = arith.constant 64 : i32
  %alpha = arith.constant 1.0 : f32
  %beta = arith.constant 0.0 : f32
  %x_base, %x_off, %x_sz:2, %x_st:2 = memref.extract_strided_metadata %x : memref<4x64xbf16> -> memref<bf16>, index, index, index, index, index
  %x_al = memref.extract_aligned_pointer_as_index %x : memref<4x64xbf16> -> index
  %x_b = arith.muli %x_off, %c2 : index
  %x_a = arith.addi %x_al, %x_b : index
  %x_i = arith.index_cast %x_a : index to i64
  %x_p = llvm.inttoptr %x_i : i64 to !llvm.ptr
  %w_base, %w_off, %w_sz:2, %w_st:2 = memref.extract_strided_metadata %w : memref<100x64xbf16> -> memref<bf16>, index, index, index, index, index
  %w_al = memref.extract_aligned_pointer_as_index %w : memref<100x64xbf16> -> index
  %w_b = arith.muli %w_off, %c2 : index
  %w_a = arith.addi %w_al, %w_b : index
  %w_i = arith.index_cast %w_a : index to i64
  %w_p = llvm.inttoptr %w_i : i64 to !llvm.ptr
  %c_base, %c_off, %c_sz:2, %c_st:2 = memref.extract_strided_metadata %l : memref<4x100xbf16> -> memref<bf16>, index, index, index, index, index
  %c_al = memref.extract_aligned_pointer_as_index %l : memref<4x100xbf16> -> index
  %c_b = arith.muli %c_off, %c2 : index
  %c_a = arith.addi %c_al, %c_b : index
  %c_i = arith.index_cast %c_a : index to i64
  %c_p = llvm.inttoptr %c_i : i64 to !llvm.ptr
  call @bt_gpu_gemm_bf16_out(%order, %na, %tb, %m, %n, %k, %alpha, %x_p, %k, %w_p, %k, %beta, %c_p, %n) : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  %lc = memref.cast %l2 : memref<4x100xbf16> to memref<?x?xbf16, strided<[?, ?], offset: ?>>
  call @bt_rt_sample_bf16(%s, %lc, %tok) : (i64, memref<?x?xbf16, strided<[?, ?], offset: ?>>, memref<?xi64>) -> ()
  return
}
