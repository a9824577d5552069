// RUN: bt-opt %s --split-input-file --bt-bf16-activations | FileCheck %s

// The residual add of a layer (a bf16 GEMM's epilogue: it reads the rounded
// products of dense and dense_4h_to_h, marked bt.bf16_gemm_output), whose
// output only the next layer's LayerNorm kernel (an element read) and its
// residual add read: written in bf16 (its f32 sum rounded to nearest even
// at the end of the body, in integer ops), and both readers load bf16 and
// extend it exactly.
// CHECK-LABEL: func.func @residual
//       CHECK:   attrs = {bt.bf16_gemm_output}
//       CHECK:   %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x8xbf16>
//       CHECK:   %[[X:.*]] = linalg.generic {{.*}} outs(%[[E]] : tensor<?x8xbf16>)
//       CHECK:   ^bb0(%{{.*}}: bf16, %{{.*}}: bf16, %{{.*}}: f32, %{{.*}}: bf16):
//       CHECK:     %[[S0:.*]] = arith.addf
//       CHECK:     %[[S:.*]] = arith.addf %[[S0]]
//       CHECK:     arith.cmpf uno, %[[S]], %[[S]] : f32
//       CHECK:     %[[R:.*]] = arith.bitcast %{{.*}} : i16 to bf16
//       CHECK:     linalg.yield %[[R]] : bf16
//       CHECK:   } -> tensor<?x8xbf16>
//       CHECK:   %[[V:.*]] = tensor.extract %[[X]][%{{.*}}, %{{.*}}] : tensor<?x8xbf16>
//  CHECK-NEXT:   %[[VB:.*]] = arith.bitcast %[[V]] : bf16 to i16
//  CHECK-NEXT:   %[[VW:.*]] = arith.extui %[[VB]] : i16 to i32
//       CHECK:   %[[VF:.*]] = arith.bitcast %{{.*}} : i32 to f32
//       CHECK:   linalg.generic {{.*}} ins(%[[X]], %{{.*}} : tensor<?x8xbf16>, tensor<?x8xbf16>) outs(%{{.*}} : tensor<?x8xf32>)
//  CHECK-NEXT:   ^bb0(%[[IN:.*]]: bf16, %{{.*}}: bf16, %{{.*}}: f32):
//  CHECK-NEXT:     %[[INB:.*]] = arith.bitcast %[[IN]] : bf16 to i16
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @residual(%a: tensor<?x8xbf16>, %m: tensor<?x8xbf16>, %x: tensor<?x8xf32>, %i: index, %j: index) -> (f32, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x8xf32>
  // The products as bt-bf16-gemm-outputs leaves them.
  %ea = tensor.empty(%n) : tensor<?x8xbf16>
  %ra = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<?x8xbf16>) outs(%ea : tensor<?x8xbf16>) attrs = {bt.bf16_gemm_output} {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  } -> tensor<?x8xbf16>
  %e = tensor.empty(%n) : tensor<?x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%ra, %m, %x : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) {
  ^bb0(%p: bf16, %q: bf16, %r: f32, %out: f32):
    %pf = arith.extf %p : bf16 to f32
    %qf = arith.extf %q : bf16 to f32
    %s0 = arith.addf %pf, %qf : f32
    %s = arith.addf %s0, %r : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  // The next layer: its LayerNorm kernel reads elements, its residual add
  // the whole tensor (with another rounded product).
  %v = tensor.extract %sum[%i, %j] : tensor<?x8xf32>
  %e2 = tensor.empty(%n) : tensor<?x8xf32>
  %next = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%sum, %ra : tensor<?x8xf32>, tensor<?x8xbf16>) outs(%e2 : tensor<?x8xf32>) {
  ^bb0(%p: f32, %q: bf16, %out: f32):
    %qf = arith.extf %q : bf16 to f32
    %s = arith.addf %p, %qf : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  // What the function returns keeps f32 (eval's results): %next's readers
  // compute the result.
  %e3 = tensor.empty(%n) : tensor<?x8xf32>
  %out = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%next : tensor<?x8xf32>) outs(%e3 : tensor<?x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %z = arith.negf %p : f32
    linalg.yield %z : f32
  } -> tensor<?x8xf32>
  %vn = arith.negf %v : f32
  return %vn, %out : f32, tensor<?x8xf32>
}

// -----

// What keeps f32: a generic that is no bf16 GEMM's epilogue (the rotary
// tables, an embedding: no input is a rounded product), an output a named op
// reads (a GEMM's input), an output whose reader computes a function result,
// an output into an init the body reads, and a reduction.
// CHECK-LABEL: func.func @kept
//       CHECK:   attrs = {bt.bf16_gemm_output}
//       CHECK:   } -> tensor<?x8xbf16>
//   CHECK-NOT:   -> tensor<?x8xbf16>
//   CHECK-NOT:   -> tensor<?xbf16>
//       CHECK:   return
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @kept(%x: tensor<?x8xf32>, %p: tensor<?x8xbf16>, %w: tensor<8x8xf32>, %i: index) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xf32>, f32, f32) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x8xf32>
  %ep = tensor.empty(%n) : tensor<?x8xbf16>
  %rp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<?x8xbf16>) outs(%ep : tensor<?x8xbf16>) attrs = {bt.bf16_gemm_output} {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  } -> tensor<?x8xbf16>
  // Not an epilogue: read only by an element read, still f32.
  %e0 = tensor.empty(%n) : tensor<?x8xf32>
  %table = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<?x8xf32>) outs(%e0 : tensor<?x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c = math.cos %in : f32
    linalg.yield %c : f32
  } -> tensor<?x8xf32>
  %t = tensor.extract %table[%i, %c0] : tensor<?x8xf32>
  // An epilogue whose output a GEMM reads.
  %e1 = tensor.empty(%n) : tensor<?x8xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%rp : tensor<?x8xbf16>) outs(%e1 : tensor<?x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %f = arith.extf %in : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<?x8xf32>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty(%n) : tensor<?x8xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x8xf32>) -> tensor<?x8xf32>
  %mm = linalg.matmul ins(%g, %w : tensor<?x8xf32>, tensor<8x8xf32>) outs(%fill : tensor<?x8xf32>) -> tensor<?x8xf32>
  // An epilogue whose reader's result is returned.
  %e3 = tensor.empty(%n) : tensor<?x8xf32>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%rp : tensor<?x8xbf16>) outs(%e3 : tensor<?x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %f = arith.extf %in : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<?x8xf32>
  %e4 = tensor.empty(%n) : tensor<?x8xf32>
  %ret = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%h : tensor<?x8xf32>) outs(%e4 : tensor<?x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %z = arith.negf %in : f32
    linalg.yield %z : f32
  } -> tensor<?x8xf32>
  // An epilogue accumulating into its init (the body reads it).
  %acc = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%rp : tensor<?x8xbf16>) outs(%x : tensor<?x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %f = arith.extf %in : bf16 to f32
    %s = arith.addf %f, %out : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  %a = tensor.extract %acc[%i, %c0] : tensor<?x8xf32>
  // A reduction of an epilogue's operand.
  %e5 = tensor.empty(%n) : tensor<?xf32>
  %red = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%rp : tensor<?x8xbf16>) outs(%e5 : tensor<?xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %f = arith.extf %in : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<?xf32>
  %tn = arith.negf %t : f32
  %an = arith.negf %a : f32
  return %mm, %ret, %red, %tn, %an : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xf32>, f32, f32
}
