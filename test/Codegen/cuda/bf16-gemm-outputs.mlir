// RUN: bt-opt %s --split-input-file --bt-bf16-gemm-outputs | FileCheck %s

// A bf16 GEMM into a zero fill whose product only elementwise generics read
// (here the MLP's bias + GELU through an expand_shape, as the CUDA lowering
// of bt.linear leaves it): the product is rounded to bf16 once right after
// the GEMM (marked bt.bf16_gemm_output, round to nearest even in integer
// ops), the reshape becomes bf16, and the reader's input is bf16, extended
// exactly (the bits shifted into the high half) before the f32 bias add.
// CHECK-LABEL: func.func @mlp
//       CHECK:   %[[P:.*]] = linalg.matmul_transpose_b ins({{.*}} : tensor<?x16xbf16>, tensor<32x16xbf16>) outs(%{{.*}} : tensor<?x32xf32>)
//       CHECK:   %[[R:.*]] = linalg.generic {{.*}} ins(%[[P]] : tensor<?x32xf32>) outs(%{{.*}} : tensor<?x32xbf16>) attrs = {bt.bf16_gemm_output}
//       CHECK:     arith.cmpf uno
//       CHECK:     arith.bitcast %{{.*}} : i16 to bf16
//       CHECK:   %[[E:.*]] = tensor.expand_shape %[[R]] {{.*}} : tensor<?x32xbf16> into tensor<?x1x32xbf16>
//       CHECK:   linalg.generic {{.*}} ins(%[[E]], %{{.*}} : tensor<?x1x32xbf16>, tensor<32xf32>)
//  CHECK-NEXT:   ^bb0(%[[IN:.*]]: bf16, %[[B:.*]]: f32, %{{.*}}: f32):
//  CHECK-NEXT:     %[[BITS:.*]] = arith.bitcast %[[IN]] : bf16 to i16
//  CHECK-NEXT:     %[[WIDE:.*]] = arith.extui %[[BITS]] : i16 to i32
//  CHECK-NEXT:     %[[C16:.*]] = arith.constant 16 : i32
//  CHECK-NEXT:     %[[HIGH:.*]] = arith.shli %[[WIDE]], %[[C16]] : i32
//  CHECK-NEXT:     %[[X:.*]] = arith.bitcast %[[HIGH]] : i32 to f32
//  CHECK-NEXT:     %[[S:.*]] = arith.addf %[[X]], %[[B]] : f32
//  CHECK-NEXT:     math.erf %[[S]]
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#bias = affine_map<(d0, d1, d2) -> (d2)>
func.func @mlp(%x: tensor<?x16xbf16>, %w: tensor<32x16xbf16>, %b: tensor<32xf32>) -> tensor<?x1x32xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x16xbf16>
  %e = tensor.empty(%m) : tensor<?x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x32xf32>) -> tensor<?x32xf32>
  %p = linalg.matmul_transpose_b ins(%x, %w : tensor<?x16xbf16>, tensor<32x16xbf16>) outs(%f : tensor<?x32xf32>) -> tensor<?x32xf32>
  %pe = tensor.expand_shape %p [[0, 1], [2]] output_shape [%m, 1, 32] : tensor<?x32xf32> into tensor<?x1x32xf32>
  %o = tensor.empty(%m) : tensor<?x1x32xf32>
  %g = linalg.generic {indexing_maps = [#map, #bias, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%pe, %b : tensor<?x1x32xf32>, tensor<32xf32>) outs(%o : tensor<?x1x32xf32>) {
  ^bb0(%in: f32, %bi: f32, %out: f32):
    %s = arith.addf %in, %bi : f32
    %y = math.erf %s : f32
    linalg.yield %y : f32
  }  -> tensor<?x1x32xf32>
  // A later kernel: what the function returns comes from the reader's result
  // (a reader whose result is returned would make this the logits' case).
  %o2 = tensor.empty(%m) : tensor<?x1x32xf32>
  %n = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%g : tensor<?x1x32xf32>) outs(%o2 : tensor<?x1x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %z = arith.negf %in : f32
    linalg.yield %z : f32
  }  -> tensor<?x1x32xf32>
  return %n : tensor<?x1x32xf32>
}

// -----

// Two readers through a reshape to two dynamic dims (tensor.reshape) and
// slices of it (as the QKV split reads a product): all narrowed.
// CHECK-LABEL: func.func @slices
//       CHECK:   %[[R:.*]] = linalg.generic {{.*}} attrs = {bt.bf16_gemm_output}
//       CHECK:   %[[V:.*]] = tensor.reshape %[[R]](%{{.*}}) : (tensor<?x8xbf16>, tensor<3xindex>) -> tensor<?x?x8xbf16>
//       CHECK:   %[[S0:.*]] = tensor.extract_slice %[[V]]{{.*}} to tensor<?x?x4xbf16>
//       CHECK:   %[[S1:.*]] = tensor.extract_slice %[[V]]{{.*}} to tensor<?x?x4xbf16>
//       CHECK:   linalg.generic {{.*}} ins(%[[S0]], %[[S1]] : tensor<?x?x4xbf16>, tensor<?x?x4xbf16>)
//  CHECK-NEXT:   ^bb0(%{{.*}}: bf16, %{{.*}}: bf16, %{{.*}}: f32):
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @slices(%x: tensor<?x16xbf16>, %w: tensor<8x16xbf16>, %shape: tensor<3xindex>, %a: index, %s: index) -> tensor<?x?x4xf32> {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x16xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %p = linalg.matmul_transpose_b ins(%x, %w : tensor<?x16xbf16>, tensor<8x16xbf16>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  %v = tensor.reshape %p(%shape) : (tensor<?x8xf32>, tensor<3xindex>) -> tensor<?x?x8xf32>
  %s0 = tensor.extract_slice %v[0, 0, 0] [%a, %s, 4] [1, 1, 1] : tensor<?x?x8xf32> to tensor<?x?x4xf32>
  %s1 = tensor.extract_slice %v[0, 0, 4] [%a, %s, 4] [1, 1, 1] : tensor<?x?x8xf32> to tensor<?x?x4xf32>
  %o = tensor.empty(%a, %s) : tensor<?x?x4xf32>
  %g = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0, %s1 : tensor<?x?x4xf32>, tensor<?x?x4xf32>) outs(%o : tensor<?x?x4xf32>) {
  ^bb0(%i0: f32, %i1: f32, %out: f32):
    %y = arith.mulf %i0, %i1 : f32
    linalg.yield %y : f32
  }  -> tensor<?x?x4xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%g : tensor<?x?x4xf32>) outs(%o : tensor<?x?x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %z = arith.negf %in : f32
    linalg.yield %z : f32
  }  -> tensor<?x?x4xf32>
  return %n : tensor<?x?x4xf32>
}

// -----

// The bias as the GEMM's init (beta = 1: the QKV projection), read through
// slices by a generic and by a kernel's tensor.extract (the attention
// kernels read q, k, v so): the broadcast becomes a generic marked
// bt.bf16_gemm_init that broadcasts the bias rounded to bf16 (extended back
// to f32 exactly), the product is rounded once, and the extracted element is
// extended after the extract.
// CHECK-LABEL: func.func @qkv
//       CHECK:   %[[INIT:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<8xf32>) outs(%{{.*}} : tensor<4x8xf32>) attrs = {bt.bf16_gemm_init}
//       CHECK:     arith.cmpf uno
//       CHECK:     arith.bitcast %{{.*}} : i16 to bf16
//       CHECK:     arith.shli
//       CHECK:     linalg.yield %{{.*}} : f32
//       CHECK:   %[[P:.*]] = linalg.matmul_transpose_b ins({{.*}}) outs(%[[INIT]] : tensor<4x8xf32>)
//       CHECK:   %[[R:.*]] = linalg.generic {{.*}} ins(%[[P]] : tensor<4x8xf32>) {{.*}} attrs = {bt.bf16_gemm_output}
//       CHECK:   %[[S:.*]] = tensor.extract_slice %[[R]][0, 4] [4, 4] [1, 1] : tensor<4x8xbf16> to tensor<4x4xbf16>
//       CHECK:   %[[E:.*]] = tensor.extract %[[S]][%{{.*}}, %{{.*}}] : tensor<4x4xbf16>
//  CHECK-NEXT:   arith.bitcast %[[E]] : bf16 to i16
//   CHECK-NOT:   linalg.broadcast
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @qkv(%x: tensor<4x16xbf16>, %w: tensor<8x16xbf16>, %b: tensor<8xf32>, %i: index, %j: index) -> (tensor<4x4xf32>, f32) {
  %e = tensor.empty() : tensor<4x8xf32>
  %bb = linalg.broadcast ins(%b : tensor<8xf32>) outs(%e : tensor<4x8xf32>) dimensions = [0]
  %qkv = linalg.matmul_transpose_b ins(%x, %w : tensor<4x16xbf16>, tensor<8x16xbf16>) outs(%bb : tensor<4x8xf32>) -> tensor<4x8xf32>
  %q = tensor.extract_slice %qkv[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %v = tensor.extract_slice %qkv[0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %o = tensor.empty() : tensor<4x4xf32>
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%q : tensor<4x4xf32>) outs(%o : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %in : f32
    linalg.yield %y : f32
  } -> tensor<4x4xf32>
  %ve0 = tensor.extract %v[%i, %j] : tensor<4x4xf32>
  %ve = arith.negf %ve0 : f32
  %n = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%r : tensor<4x4xf32>) outs(%o : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %z = arith.negf %in : f32
    linalg.yield %z : f32
  } -> tensor<4x4xf32>
  return %n, %ve : tensor<4x4xf32>, f32
}

// -----

// One broadcast shared by two GEMMs with the same bias and shape (CSE's
// doing: the token decoder's prefix step and its later steps when P = 1)
// and by an op that is no GEMM: each narrowed GEMM gets its own rounded
// bias; the other user keeps the f32 broadcast.
// CHECK-LABEL: func.func @shared_bias
//       CHECK:   %[[I0:.*]] = linalg.generic {{.*}} attrs = {bt.bf16_gemm_init}
//       CHECK:   %[[I1:.*]] = linalg.generic {{.*}} attrs = {bt.bf16_gemm_init}
//       CHECK:   %[[B:.*]] = linalg.broadcast
//       CHECK:   linalg.matmul_transpose_b ins({{.*}}) outs(%[[I0]] :
//       CHECK:   linalg.matmul_transpose_b ins({{.*}}) outs(%[[I1]] :
//       CHECK:   return {{.*}}%[[B]]
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @shared_bias(%x: tensor<4x16xbf16>, %y: tensor<4x16xbf16>, %w: tensor<8x16xbf16>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %bb = linalg.broadcast ins(%b : tensor<8xf32>) outs(%e : tensor<4x8xf32>) dimensions = [0]
  %p0 = linalg.matmul_transpose_b ins(%x, %w : tensor<4x16xbf16>, tensor<8x16xbf16>) outs(%bb : tensor<4x8xf32>) -> tensor<4x8xf32>
  %p1 = linalg.matmul_transpose_b ins(%y, %w : tensor<4x16xbf16>, tensor<8x16xbf16>) outs(%bb : tensor<4x8xf32>) -> tensor<4x8xf32>
  %g0 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%p0 : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %g1 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%p1 : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %n = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%g0, %g1 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %out: f32):
    %z = arith.addf %a, %c : f32
    linalg.yield %z : f32
  } -> tensor<4x8xf32>
  return %n, %bb : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Products that keep f32: a product the function returns unsampled
// (prefill's logits), one read by a generic whose result the function
// returns (eval's logits, written by a masking generic from the LM head's
// product), a product a named op reads, and an f32 GEMM.
// CHECK-LABEL: func.func @kept
//   CHECK-NOT:   bt.bf16_gemm
//   CHECK-NOT:   xbf16> into
//       CHECK:   return
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @kept(%x: tensor<4x16xbf16>, %w: tensor<8x16xbf16>, %xf: tensor<4x16xf32>, %wf: tensor<8x16xf32>, %w2: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  // Returned.
  %logits = linalg.matmul_transpose_b ins(%x, %w : tensor<4x16xbf16>, tensor<8x16xbf16>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  // Read by a generic whose result is returned.
  %l2 = linalg.matmul_transpose_b ins(%x, %w : tensor<4x16xbf16>, tensor<8x16xbf16>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %masked = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%l2 : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %in : f32
    linalg.yield %y : f32
  } -> tensor<4x8xf32>
  // Read by a generic and a named op.
  %h = linalg.matmul_transpose_b ins(%x, %w : tensor<4x16xbf16>, tensor<8x16xbf16>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h2 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%h : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %in : f32
    linalg.yield %y : f32
  } -> tensor<4x8xf32>
  %h3 = linalg.matmul ins(%h, %w2 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%h2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  // f32 GEMM.
  %pf = linalg.matmul_transpose_b ins(%xf, %wf : tensor<4x16xf32>, tensor<8x16xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%pf : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %in : f32
    linalg.yield %y : f32
  } -> tensor<4x8xf32>
  return %logits, %masked, %h3, %g : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A product read as a generic's init (accumulated into) is not narrowed.
// CHECK-LABEL: func.func @init_use
//   CHECK-NOT:   bt.bf16_gemm_output
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @init_use(%x: tensor<4x16xbf16>, %w: tensor<8x16xbf16>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %p = linalg.matmul_transpose_b ins(%x, %w : tensor<4x16xbf16>, tensor<8x16xbf16>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<4x8xf32>) outs(%p : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// decode_tokens' sampled logits: the LM head's product of each step is read
// by bt.sample and inserted into step_logits [B, L_B, V] (a tensor.empty
// carried through the loop's iter_args and returned). Each product is
// rounded to bf16 once (marked for cuBLAS's bf16 C), the sampler reads the
// bf16 product, and step_logits, the loop's iter_arg and result and the
// function's result become bf16.
// CHECK-LABEL: func.func @decode_tokens
//  CHECK-SAME:   -> (tensor<?x4xi64>, tensor<?x4x8xbf16>)
//       CHECK:   %[[SL:.*]] = tensor.empty(%{{.*}}) : tensor<?x4x8xbf16>
//       CHECK:   %[[P:.*]] = linalg.matmul_transpose_b {{.*}} -> tensor<?x8xf32>
//       CHECK:   %[[R:.*]] = linalg.generic {{.*}} ins(%[[P]] : tensor<?x8xf32>) outs(%{{.*}} : tensor<?x8xbf16>) attrs = {bt.bf16_gemm_output}
//       CHECK:   bt.sample %[[R]], %{{.*}} : tensor<?x8xbf16> -> tensor<?xi64>
//       CHECK:   %[[I:.*]] = tensor.insert_slice %[[R]] into %[[SL]]{{.*}} : tensor<?x8xbf16> into tensor<?x4x8xbf16>
//       CHECK:   scf.for {{.*}} iter_args(%[[A:.*]] = %[[I]], %{{.*}} = %{{.*}}) -> (tensor<?x4x8xbf16>, tensor<?x4xi64>)
//       CHECK:     %[[P2:.*]] = linalg.matmul_transpose_b {{.*}} -> tensor<?x8xf32>
//       CHECK:     %[[R2:.*]] = linalg.generic {{.*}} ins(%[[P2]] : tensor<?x8xf32>) {{.*}} attrs = {bt.bf16_gemm_output}
//       CHECK:     bt.sample %[[R2]], %{{.*}} : tensor<?x8xbf16>
//       CHECK:     tensor.insert_slice %[[R2]] into %[[A]]{{.*}} : tensor<?x8xbf16> into tensor<?x4x8xbf16>
//       CHECK:     scf.yield {{.*}} : tensor<?x4x8xbf16>, tensor<?x4xi64>
//       CHECK:   return {{.*}} : tensor<?x4xi64>, tensor<?x4x8xbf16>
func.func @decode_tokens(%x: tensor<?x16xbf16>, %w: tensor<8x16xbf16>, %s: i64) -> (tensor<?x4xi64>, tensor<?x4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x16xbf16>
  %steps = tensor.empty(%m) : tensor<?x4x8xf32>
  %toks = tensor.empty(%m) : tensor<?x4xi64>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %p = linalg.matmul_transpose_b ins(%x, %w : tensor<?x16xbf16>, tensor<8x16xbf16>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  %t = bt.sample %p, %s : tensor<?x8xf32> -> tensor<?xi64>
  %sl = tensor.insert_slice %p into %steps[0, 0, 0] [%m, 1, 8] [1, 1, 1] : tensor<?x8xf32> into tensor<?x4x8xf32>
  %tl = tensor.insert_slice %t into %toks[0, 0] [%m, 1] [1, 1] : tensor<?xi64> into tensor<?x4xi64>
  %r:2 = scf.for %k = %c1 to %c4 step %c1 iter_args(%a = %sl, %b = %tl) -> (tensor<?x4x8xf32>, tensor<?x4xi64>) {
    %e2 = tensor.empty(%m) : tensor<?x8xf32>
    %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x8xf32>) -> tensor<?x8xf32>
    %p2 = linalg.matmul_transpose_b ins(%x, %w : tensor<?x16xbf16>, tensor<8x16xbf16>) outs(%f2 : tensor<?x8xf32>) -> tensor<?x8xf32>
    %t2 = bt.sample %p2, %s : tensor<?x8xf32> -> tensor<?xi64>
    %a2 = tensor.insert_slice %p2 into %a[0, %k, 0] [%m, 1, 8] [1, 1, 1] : tensor<?x8xf32> into tensor<?x4x8xf32>
    %b2 = tensor.insert_slice %t2 into %b[0, %k] [%m, 1] [1, 1] : tensor<?xi64> into tensor<?x4xi64>
    scf.yield %a2, %b2 : tensor<?x4x8xf32>, tensor<?x4xi64>
  }
  return %r#1, %r#0 : tensor<?x4xi64>, tensor<?x4x8xf32>
}

// -----

// A vanilla decode_step: the product is sampled and returned as it is; it
// and the function's result become bf16.
// CHECK-LABEL: func.func @decode_step
//  CHECK-SAME:   -> (tensor<?xi64>, tensor<?x8xbf16>)
//       CHECK:   %[[R:.*]] = linalg.generic {{.*}} attrs = {bt.bf16_gemm_output}
//       CHECK:   %[[T:.*]] = bt.sample %[[R]], %{{.*}} : tensor<?x8xbf16>
//       CHECK:   return %[[T]], %[[R]] : tensor<?xi64>, tensor<?x8xbf16>
func.func @decode_step(%x: tensor<?x16xbf16>, %w: tensor<8x16xbf16>, %s: i64) -> (tensor<?xi64>, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x16xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %p = linalg.matmul_transpose_b ins(%x, %w : tensor<?x16xbf16>, tensor<8x16xbf16>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  %t = bt.sample %p, %s : tensor<?x8xf32> -> tensor<?xi64>
  return %t, %p : tensor<?xi64>, tensor<?x8xf32>
}

// -----

// Sampled logits that keep f32: the container of step_logits is read
// otherwise too (an extract_slice), a product whose init is a bias
// broadcast, and logits nobody samples (returned: the case @kept).
// CHECK-LABEL: func.func @sampled_kept
//   CHECK-NOT:   bf16_gemm_output
//   CHECK-NOT:   x8xbf16>
//       CHECK:   return
func.func @sampled_kept(%x: tensor<?x16xbf16>, %w: tensor<8x16xbf16>, %bias: tensor<8xf32>, %s: i64) -> (tensor<?xi64>, tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<?xi64>, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x16xbf16>
  %steps = tensor.empty(%m) : tensor<?x2x8xf32>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %p = linalg.matmul_transpose_b ins(%x, %w : tensor<?x16xbf16>, tensor<8x16xbf16>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  %t = bt.sample %p, %s : tensor<?x8xf32> -> tensor<?xi64>
  %sl = tensor.insert_slice %p into %steps[0, 0, 0] [%m, 1, 8] [1, 1, 1] : tensor<?x8xf32> into tensor<?x2x8xf32>
  %row = tensor.extract_slice %sl[0, 0, 0] [%m, 1, 8] [1, 1, 1] : tensor<?x2x8xf32> to tensor<?x8xf32>
  %bb = linalg.broadcast ins(%bias : tensor<8xf32>) outs(%e : tensor<?x8xf32>) dimensions = [0]
  %q = linalg.matmul_transpose_b ins(%x, %w : tensor<?x16xbf16>, tensor<8x16xbf16>) outs(%bb : tensor<?x8xf32>) -> tensor<?x8xf32>
  %u = bt.sample %q, %s : tensor<?x8xf32> -> tensor<?xi64>
  return %t, %sl, %row, %u, %q : tensor<?xi64>, tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<?xi64>, tensor<?x8xf32>
}

// -----

// Sampled logits returned by a function that is called keep f32: its
// callers expect its result types.
// CHECK-LABEL: func.func private @step
//   CHECK-NOT:   bf16_gemm_output
//       CHECK:   return {{.*}} : tensor<?xi64>, tensor<?x8xf32>
func.func private @step(%x: tensor<?x16xbf16>, %w: tensor<8x16xbf16>, %s: i64) -> (tensor<?xi64>, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x16xbf16>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %p = linalg.matmul_transpose_b ins(%x, %w : tensor<?x16xbf16>, tensor<8x16xbf16>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  %t = bt.sample %p, %s : tensor<?x8xf32> -> tensor<?xi64>
  return %t, %p : tensor<?xi64>, tensor<?x8xf32>
}
func.func @caller(%x: tensor<?x16xbf16>, %w: tensor<8x16xbf16>, %s: i64) -> tensor<?x8xf32> {
  %t, %l = func.call @step(%x, %w, %s) : (tensor<?x16xbf16>, tensor<8x16xbf16>, i64) -> (tensor<?xi64>, tensor<?x8xf32>)
  return %l : tensor<?x8xf32>
}

// -----

// A bias parameter that, in every function, only narrowed GEMMs' bias inits
// read becomes a bf16 argument (the runtime rounds it at upload, as it does
// the weights; bt-gemm-to-blas can then hand it to cuBLASLt's bias
// epilogue): each init broadcasts the bf16 bias extended exactly, the
// values it broadcast before. A bias that another op reads as well (here
// an elementwise add in @other) keeps f32 in every function.
// CHECK-LABEL: func.func @qkv_a
//  CHECK-SAME:   %{{.*}}: tensor<8xbf16> {bt.param = "qkv.bias"}
//  CHECK-SAME:   %{{.*}}: tensor<8xf32> {bt.param = "shared.bias"}
//       CHECK:   linalg.generic {{.*}} ins(%{{.*}} : tensor<8xbf16>) outs(%{{.*}} : tensor<4x8xf32>) attrs = {bt.bf16_gemm_init}
//  CHECK-NEXT:   ^bb0(%[[B:.*]]: bf16, %{{.*}}: f32):
//  CHECK-NEXT:     arith.bitcast %[[B]] : bf16 to i16
//       CHECK:   linalg.generic {{.*}} ins(%{{.*}} : tensor<8xf32>) outs(%{{.*}} : tensor<4x8xf32>) attrs = {bt.bf16_gemm_init}
//  CHECK-NEXT:   ^bb0(%{{.*}}: f32, %{{.*}}: f32):
//  CHECK-NEXT:     arith.bitcast %{{.*}} : f32 to i32
// CHECK-LABEL: func.func @qkv_b
//  CHECK-SAME:   %{{.*}}: tensor<8xbf16> {bt.param = "qkv.bias"}
// CHECK-LABEL: func.func @other
//  CHECK-SAME:   %{{.*}}: tensor<8xf32> {bt.param = "shared.bias"}
#idp = affine_map<(d0, d1) -> (d0, d1)>
#rowp = affine_map<(d0, d1) -> (d1)>
func.func @qkv_a(%x: tensor<4x16xbf16>, %w: tensor<8x16xbf16>, %b: tensor<8xf32> {bt.param = "qkv.bias"}, %s: tensor<8xf32> {bt.param = "shared.bias"}) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %bb = linalg.broadcast ins(%b : tensor<8xf32>) outs(%e : tensor<4x8xf32>) dimensions = [0]
  %p = linalg.matmul_transpose_b ins(%x, %w : tensor<4x16xbf16>, tensor<8x16xbf16>) outs(%bb : tensor<4x8xf32>) -> tensor<4x8xf32>
  %sb = linalg.broadcast ins(%s : tensor<8xf32>) outs(%e : tensor<4x8xf32>) dimensions = [0]
  %q = linalg.matmul_transpose_b ins(%x, %w : tensor<4x16xbf16>, tensor<8x16xbf16>) outs(%sb : tensor<4x8xf32>) -> tensor<4x8xf32>
  %o = tensor.empty() : tensor<4x8xf32>
  %r:2 = linalg.generic {indexing_maps = [#idp, #idp, #idp, #idp], iterator_types = ["parallel", "parallel"]} ins(%p, %q : tensor<4x8xf32>, tensor<4x8xf32>) outs(%o, %o : tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32, %out2: f32):
    %y = arith.mulf %in, %in : f32
    %z = arith.mulf %in2, %in2 : f32
    linalg.yield %y, %z : f32, f32
  } -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %n:2 = linalg.generic {indexing_maps = [#idp, #idp, #idp, #idp], iterator_types = ["parallel", "parallel"]} ins(%r#0, %r#1 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%o, %o : tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32, %out2: f32):
    %y = arith.negf %in : f32
    %z = arith.negf %in2 : f32
    linalg.yield %y, %z : f32, f32
  } -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return %n#0, %n#1 : tensor<4x8xf32>, tensor<4x8xf32>
}
func.func @qkv_b(%x: tensor<4x16xbf16>, %w: tensor<8x16xbf16>, %b: tensor<8xf32> {bt.param = "qkv.bias"}) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %bb = linalg.broadcast ins(%b : tensor<8xf32>) outs(%e : tensor<4x8xf32>) dimensions = [0]
  %p = linalg.matmul_transpose_b ins(%x, %w : tensor<4x16xbf16>, tensor<8x16xbf16>) outs(%bb : tensor<4x8xf32>) -> tensor<4x8xf32>
  %o = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#idp, #idp], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.negf %in : f32
    linalg.yield %y : f32
  } -> tensor<4x8xf32>
  %n = linalg.generic {indexing_maps = [#idp, #idp], iterator_types = ["parallel", "parallel"]} ins(%r : tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.negf %in : f32
    linalg.yield %y : f32
  } -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}
func.func @other(%x: tensor<4x8xf32>, %s: tensor<8xf32> {bt.param = "shared.bias"}) -> tensor<4x8xf32> {
  %o = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#idp, #rowp, #idp], iterator_types = ["parallel", "parallel"]} ins(%x, %s : tensor<4x8xf32>, tensor<8xf32>) outs(%o : tensor<4x8xf32>) {
  ^bb0(%in: f32, %bi: f32, %out: f32):
    %y = arith.addf %in, %bi : f32
    linalg.yield %y : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
