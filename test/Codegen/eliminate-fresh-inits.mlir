// RUN: bt-opt %s -split-input-file --bt-eliminate-fresh-inits | FileCheck %s
// RUN: bt-opt %s -split-input-file --bt-eliminate-fresh-inits \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   --canonicalize --cse --canonicalize | FileCheck %s --check-prefix=BUF

// decode_tokens' steps: the LM head's init is a slice of step_logits
// [B, L_B, V] at step k, so the GEMM writes there, the sampler reads the
// strided slice, and bufferization leaves no copy of the logits.

// CHECK-LABEL: func.func @steps(
// CHECK:         scf.for %[[K:.*]] = {{.*}} iter_args(%{{.*}} = %{{.*}}, %[[LG:.*]] = %{{.*}})
// CHECK-NOT:       bufferization.alloc_tensor
// CHECK:           %[[S:.*]] = tensor.extract_slice %[[LG]][0, %[[K]], 0] [%{{.*}}, 1, 16] [1, 1, 1]
// CHECK:           %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[S]] : tensor<?x16xf32>)
// CHECK:           %[[M:.*]] = linalg.matmul_transpose_b {{.*}} outs(%[[F]] : tensor<?x16xf32>)
// CHECK:           bt.sample %[[M]]
// CHECK:           tensor.insert_slice %[[M]] into %[[LG]][0, %[[K]], 0]

// BUF-LABEL:   func.func @steps(
// BUF:           %[[LG:.*]] = memref.alloc(%{{.*}}) {{.*}} : memref<?x4x16xf32>
// BUF:           scf.for %[[K:[^ ]*]] =
// BUF:             %[[S:.*]] = memref.subview %[[LG]][0, %[[K]], 0] [%{{.*}}, 1, 16] [1, 1, 1]
// BUF-NEXT:        linalg.fill ins(%{{.*}} : f32) outs(%[[S]] : memref<?x16xf32, strided<[64, 1], offset: ?>>)
// BUF-NEXT:        linalg.matmul_transpose_b {{.*}} outs(%[[S]] : memref<?x16xf32, strided<[64, 1], offset: ?>>)
// BUF-NEXT:        %[[C:.*]] = memref.cast %[[S]]
// BUF-NOT:         memref.copy {{.*}} : memref<?x16xf32
// BUF:             call @bt_rt_sample(%{{.*}}, %[[C]], %{{.*}})
// BUF-NOT:         memref.copy {{.*}} : memref<?x16xf32
// BUF:           return
func.func @steps(%h: tensor<?x8xf32>, %w: tensor<16x8xf32>, %sampler: tensor<i64>) -> (tensor<?x4xi64>, tensor<?x4x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %b = tensor.dim %h, %c0 : tensor<?x8xf32>
  %s = tensor.extract %sampler[] : tensor<i64>
  %tok0 = tensor.empty(%b) : tensor<?x4xi64>
  %lg0 = tensor.empty(%b) : tensor<?x4x16xf32>
  %r:2 = scf.for %k = %c0 to %c4 step %c1 iter_args(%tok = %tok0, %lg = %lg0) -> (tensor<?x4xi64>, tensor<?x4x16xf32>) {
    %init = bufferization.alloc_tensor(%b) : tensor<?x16xf32>
    %f = linalg.fill ins(%zero : f32) outs(%init : tensor<?x16xf32>) -> tensor<?x16xf32>
    %logits = linalg.matmul_transpose_b ins(%h, %w : tensor<?x8xf32>, tensor<16x8xf32>) outs(%f : tensor<?x16xf32>) -> tensor<?x16xf32>
    %t = bt.sample %logits, %s : tensor<?x16xf32> -> tensor<?xi64>
    %lg1 = tensor.insert_slice %logits into %lg[0, %k, 0] [%b, 1, 16] [1, 1, 1] : tensor<?x16xf32> into tensor<?x4x16xf32>
    %tok1 = tensor.insert_slice %t into %tok[0, %k] [%b, 1] [1, 1] : tensor<?xi64> into tensor<?x4xi64>
    scf.yield %tok1, %lg1 : tensor<?x4xi64>, tensor<?x4x16xf32>
  }
  return %r#0, %r#1 : tensor<?x4xi64>, tensor<?x4x16xf32>
}

// -----

// Inits that no insertion consumes become tensor.empty and bufferize to an
// allocation as before; an alloc_tensor with a copy operand is not an init
// and stays.

// CHECK-LABEL: func.func @not_inserted(
// CHECK:         %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x16xf32>
// CHECK:         linalg.generic {{.*}} outs(%[[E]] : tensor<?x16xf32>)
// CHECK:         bufferization.alloc_tensor() copy(%{{.*}}) : tensor<?x16xf32>

// BUF-LABEL:   func.func @not_inserted(
// BUF:           memref.alloc(%{{.*}}) {{.*}} : memref<?x16xf32>
// BUF:           linalg.generic
// BUF:           memref.alloc(%{{.*}}) {{.*}} : memref<?x16xf32>
// BUF:           memref.copy
func.func @not_inserted(%h: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %c0 = arith.constant 0 : index
  %b = tensor.dim %h, %c0 : tensor<?x16xf32>
  %init = bufferization.alloc_tensor(%b) : tensor<?x16xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%h : tensor<?x16xf32>) outs(%init : tensor<?x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.exp %x : f32
    linalg.yield %y : f32
  } -> tensor<?x16xf32>
  %copy = bufferization.alloc_tensor() copy(%h) : tensor<?x16xf32>
  return %e, %copy : tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// The destination is still needed unchanged after the insertion: the
// insertion cannot be in place, and bufferization writes into a copy of
// %dst, which is returned intact (what One-Shot Analysis guarantees after
// the elimination, as for upstream's tensor.empty).

// BUF-LABEL:   func.func @dest_read_later(
// BUF-SAME:      %{{[^:]*}}: memref<?x16xf32>, %[[DST:[^:]*]]: memref<?x4x16xf32>
// BUF-NOT:       subview %[[DST]]
// BUF:           %[[NEW:.*]] = memref.alloc(%{{.*}}) {{.*}} : memref<?x4x16xf32>
// BUF:           memref.copy %[[DST]], %[[NEW]]
// BUF-NOT:       subview %[[DST]]
// BUF:           return %[[NEW]], %[[DST]]
func.func @dest_read_later(%h: tensor<?x16xf32>, %dst: tensor<?x4x16xf32>) -> (tensor<?x4x16xf32>, tensor<?x4x16xf32>) {
  %c0 = arith.constant 0 : index
  %k = arith.constant 1 : index
  %b = tensor.dim %h, %c0 : tensor<?x16xf32>
  %init = bufferization.alloc_tensor(%b) : tensor<?x16xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%h : tensor<?x16xf32>) outs(%init : tensor<?x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.exp %x : f32
    linalg.yield %y : f32
  } -> tensor<?x16xf32>
  %r = tensor.insert_slice %e into %dst[0, %k, 0] [%b, 1, 16] [1, 1, 1] : tensor<?x16xf32> into tensor<?x4x16xf32>
  return %r, %dst : tensor<?x4x16xf32>, tensor<?x4x16xf32>
}

// -----

// A KV append of a key and a value whose inits CSE merged into one
// tensor.empty: each gets its own, so each op writes its own slot of the
// cache [B, 2, H, C, hd] (keys at [:, 0], values at [:, 1], entry %len).

// CHECK-LABEL: func.func @append_kv(
// CHECK-SAME:    %[[K:[^:]*]]: tensor<?x2x8xf32>, %[[V:[^:]*]]: tensor<?x2x8xf32>, %[[C:[^:]*]]: tensor<?x2x2x4x8xf32>
// CHECK:         %[[KS:.*]] = tensor.extract_slice %[[C]][0, 0, 0, %{{.*}}, 0] [%{{.*}}, 1, 2, 1, 8]
// CHECK:         %[[KN:.*]] = linalg.generic {{.*}} ins(%[[K]] : tensor<?x2x8xf32>) outs(%[[KS]] : tensor<?x2x8xf32>)
// CHECK:         %[[C1:.*]] = tensor.insert_slice %[[KN]] into %[[C]][0, 0, 0, %{{.*}}, 0]
// CHECK:         %[[VS:.*]] = tensor.extract_slice %[[C1]][0, 1, 0, %{{.*}}, 0] [%{{.*}}, 1, 2, 1, 8]
// CHECK:         %[[VN:.*]] = linalg.generic {{.*}} ins(%[[V]] : tensor<?x2x8xf32>) outs(%[[VS]] : tensor<?x2x8xf32>)
// CHECK:         tensor.insert_slice %[[VN]] into %[[C1]][0, 1, 0, %{{.*}}, 0]

// BUF-LABEL:   func.func @append_kv(
// BUF-SAME:      %[[K:[^:]*]]: memref<?x2x8xf32>, %[[V:[^:]*]]: memref<?x2x8xf32>, %[[C:[^:]*]]: memref<?x2x2x4x8xf32>
// BUF-NOT:       memref.alloc
// BUF-NOT:       memref.copy
// BUF:           %[[KS:.*]] = memref.subview %[[C]][0, 0, 0, 3, 0]
// BUF:           linalg.generic {{.*}} ins(%[[K]] : memref<?x2x8xf32>) outs(%[[KS]] :
// BUF:           %[[VS:.*]] = memref.subview %[[C]][0, 1, 0, 3, 0]
// BUF:           linalg.generic {{.*}} ins(%[[V]] : memref<?x2x8xf32>) outs(%[[VS]] :
// BUF-NOT:       memref.copy
// BUF:           return
func.func @append_kv(%k: tensor<?x2x8xf32>, %v: tensor<?x2x8xf32>, %cache: tensor<?x2x2x4x8xf32> {bufferization.writable = true}) -> tensor<?x2x2x4x8xf32> {
  %c0 = arith.constant 0 : index
  %len = arith.constant 3 : index
  %b = tensor.dim %k, %c0 : tensor<?x2x8xf32>
  %init = tensor.empty(%b) : tensor<?x2x8xf32>
  %kn = linalg.generic {indexing_maps = [affine_map<(i, j, d) -> (i, j, d)>, affine_map<(i, j, d) -> (i, j, d)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k : tensor<?x2x8xf32>) outs(%init : tensor<?x2x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.negf %x : f32
    linalg.yield %y : f32
  } -> tensor<?x2x8xf32>
  %c1 = tensor.insert_slice %kn into %cache[0, 0, 0, %len, 0] [%b, 1, 2, 1, 8] [1, 1, 1, 1, 1] : tensor<?x2x8xf32> into tensor<?x2x2x4x8xf32>
  %vn = linalg.generic {indexing_maps = [affine_map<(i, j, d) -> (i, j, d)>, affine_map<(i, j, d) -> (i, j, d)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%v : tensor<?x2x8xf32>) outs(%init : tensor<?x2x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<?x2x8xf32>
  %c2 = tensor.insert_slice %vn into %c1[0, 1, 0, %len, 0] [%b, 1, 2, 1, 8] [1, 1, 1, 1, 1] : tensor<?x2x8xf32> into tensor<?x2x2x4x8xf32>
  return %c2 : tensor<?x2x2x4x8xf32>
}

// -----

// One zero fill shared (after CSE) by two reductions that write into it and
// an op that reads it: each reduction gets a fill of its own and the reader
// keeps the original, so bufferization fills three buffers and copies none
// (before: two copies of the filled buffer).

// CHECK-LABEL: func.func @shared_fill(
// CHECK-COUNT-3: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<?xf32>)
// CHECK-NOT:     linalg.fill
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<?x16xf32>) outs(%[[FS:.*]] : tensor<?xf32>)
// CHECK:         %[[Q:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<?x16xf32>) outs(%[[FQ:.*]] : tensor<?xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[S]], %[[FR:.*]] : tensor<?xf32>, tensor<?xf32>) outs(%{{.*}} : tensor<?xf32>)

// BUF-LABEL:   func.func @shared_fill(
// BUF-COUNT-3:   linalg.fill
// BUF-NOT:       memref.copy
// BUF:           return
func.func @shared_fill(%h: tensor<?x16xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %b = tensor.dim %h, %c0 : tensor<?x16xf32>
  %e = tensor.empty(%b) : tensor<?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%h : tensor<?x16xf32>) outs(%f : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %o : f32
    linalg.yield %y : f32
  } -> tensor<?xf32>
  %sq = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%h : tensor<?x16xf32>) outs(%f : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %x2 = arith.mulf %x, %x : f32
    %y = arith.addf %x2, %o : f32
    linalg.yield %y : f32
  } -> tensor<?xf32>
  %e2 = tensor.empty(%b) : tensor<?xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%sum, %f : tensor<?xf32>, tensor<?xf32>) outs(%e2 : tensor<?xf32>) {
  ^bb0(%x: f32, %z: f32, %o: f32):
    %y = arith.subf %x, %z : f32
    linalg.yield %y : f32
  } -> tensor<?xf32>
  return %sum, %sq, %d : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
}
