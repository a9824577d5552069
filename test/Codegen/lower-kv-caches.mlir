// RUN: bt-opt %s --split-input-file --bt-lower-kv-caches | FileCheck %s

// bt-lower-kv-caches: !bt.kv_cache values become destination-passing tensors
// (docs/generation.md): storage [B, layers, 2, H, C, hd], key-valid flags
// [B, C] i64, fill lengths as index values. A cache argument becomes three
// arguments (storage, flags, cache_length), a returned cache two results tied
// to the arguments by name.

!g = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = ?, head_dim = 4, f32>

// CHECK-LABEL: func.func @decode(
// CHECK-SAME:    %[[K:[^:]*]]: tensor<?x1x2x4xf32>, %[[V:[^:]*]]: tensor<?x1x2x4xf32>, %[[Q:[^:]*]]: tensor<?x1x2x4xf32>, %[[M:[^:]*]]: tensor<?x1xi1>,
// CHECK-SAME:    %[[KV:[^:]*]]: tensor<?x2x2x2x?x4xf32> {bt.dims = ["B", "Ly", "", "H", "C", "hd"], bt.inout, bt.name = "kv_cache"},
// CHECK-SAME:    %[[VALID:[^:]*]]: tensor<?x?xi64> {bt.dims = ["B", "C"], bt.inout, bt.name = "kv_valid"},
// CHECK-SAME:    %[[LEN:[^:]*]]: tensor<i64> {bt.dims = [], bt.name = "cache_length"})
// CHECK-SAME:    -> (tensor<?x1x2x4xf32> {bt.name = "out"}, index,
// CHECK-SAME:        tensor<?x2x2x2x?x4xf32> {bt.dims = ["B", "Ly", "", "H", "C", "hd"], bt.inout_arg = "kv_cache", bt.name = "kv_cache"},
// CHECK-SAME:        tensor<?x?xi64> {bt.dims = ["B", "C"], bt.inout_arg = "kv_valid", bt.name = "kv_valid"})
// CHECK:         %[[L64:.*]] = tensor.extract %[[LEN]][] : tensor<i64>
// CHECK:         %[[L:.*]] = arith.index_cast %[[L64]] : i64 to index
// CHECK:         %[[B:.*]] = tensor.dim %[[KV]], %c0
// CHECK:         %[[C:.*]] = tensor.dim %[[KV]], %c4
// Layer 0: capacity check, keys then values written at [.., 0, k|v, .., L : L+1, ..].
// CHECK:         %[[END:.*]] = arith.addi %[[L]], %c1 : index
// CHECK:         %[[FITS:.*]] = arith.cmpi ule, %[[END]], %[[C]] : index
// CHECK:         cf.assert %[[FITS]], "bt.kv_append: the KV cache capacity is exceeded"
// CHECK:         %[[DK:.*]] = tensor.extract_slice %[[KV]][0, 0, 0, 0, %[[L]], 0] [%[[B]], 1, 1, 2, 1, 4] [1, 1, 1, 1, 1, 1] : tensor<?x2x2x2x?x4xf32> to tensor<?x2x1x4xf32>
// CHECK:         %[[TK:.*]] = linalg.generic {{.*}} ins(%[[K]] : tensor<?x1x2x4xf32>) outs(%[[DK]] : tensor<?x2x1x4xf32>)
// CHECK:         %[[KV1:.*]] = tensor.insert_slice %[[TK]] into %[[KV]][0, 0, 0, 0, %[[L]], 0] [%[[B]], 1, 1, 2, 1, 4]
// CHECK:         %[[DV:.*]] = tensor.extract_slice %[[KV1]][0, 0, 1, 0, %[[L]], 0]
// CHECK:         %[[TV:.*]] = linalg.generic {{.*}} ins(%[[V]] : tensor<?x1x2x4xf32>) outs(%[[DV]] : tensor<?x2x1x4xf32>)
// CHECK:         %[[KV2:.*]] = tensor.insert_slice %[[TV]] into %[[KV1]][0, 0, 1, 0, %[[L]], 0]
// The flags of the new entries: the key mask as i64.
// CHECK:         %[[DF:.*]] = tensor.extract_slice %[[VALID]][0, %[[L]]] [%[[B]], 1] [1, 1] : tensor<?x?xi64> to tensor<?x1xi64>
// CHECK:         %[[F:.*]] = linalg.generic {{.*}} ins(%[[M]] : tensor<?x1xi1>) outs(%[[DF]] : tensor<?x1xi64>)
// CHECK:           arith.extui
// CHECK:         %[[VALID1:.*]] = tensor.insert_slice %[[F]] into %[[VALID]][0, %[[L]]] [%[[B]], 1] [1, 1]
// Attention over the filled part: views of keys, values and flags [0 : L+1].
// CHECK:         %[[KEYS:.*]] = tensor.extract_slice %[[KV2]][0, 0, 0, 0, 0, 0] [%[[B]], 1, 1, 2, %[[END]], 4] [1, 1, 1, 1, 1, 1] : tensor<?x2x2x2x?x4xf32> to tensor<?x2x?x4xf32>
// CHECK:         %[[VALS:.*]] = tensor.extract_slice %[[KV2]][0, 0, 1, 0, 0, 0] [%[[B]], 1, 1, 2, %[[END]], 4]
// CHECK:         %[[FL:.*]] = tensor.extract_slice %[[VALID1]][0, 0] [%[[B]], %[[END]]] [1, 1] : tensor<?x?xi64> to tensor<?x?xi64>
// CHECK:         %[[O:.*]] = scf.for
// CHECK:           tensor.extract_slice %[[KEYS]]
// CHECK:           tensor.extract_slice %[[VALS]]
// CHECK:           linalg.matmul_transpose_b
// CHECK:           tensor.extract_slice %[[FL]]
// Query s sits at Sk - S + s (causal offset).
// CHECK:           arith.addi %{{.*}}, %{{.*}} : index
// CHECK:           arith.cmpi ule
// CHECK:           linalg.matmul
// Layer 1 writes at its own fill length L; the flags are written once;
// bt.kv_length of layer 1 is then L + 1.
// CHECK:         %[[LEN1:.*]] = arith.addi %[[L]], %c1
// CHECK:         cf.assert
// CHECK:         %[[KV3:.*]] = tensor.insert_slice %{{.*}} into %[[KV2]][0, 1, 0, 0, %[[L]], 0]
// CHECK:         %[[KV4:.*]] = tensor.insert_slice %{{.*}} into %[[KV3]][0, 1, 1, 0, %[[L]], 0]
// CHECK-NOT:     tensor.insert_slice %{{.*}} into %[[VALID1]]
// CHECK:         return %[[O]], %[[LEN1]], %[[KV4]], %[[VALID1]]
func.func @decode(%k: tensor<?x1x2x4xf32>, %v: tensor<?x1x2x4xf32>, %q: tensor<?x1x2x4xf32>, %m: tensor<?x1xi1>,
                  %c: !g {bt.inout, bt.name = "kv_cache"})
    -> (tensor<?x1x2x4xf32> {bt.name = "out"}, index, !g {bt.inout_arg = "kv_cache", bt.name = "kv_cache"}) {
  %c1 = bt.kv_append %c[0], %k, %v key_mask %m : !g, tensor<?x1x2x4xf32>, tensor<?x1xi1>
  %o = bt.kv_attend %q, %c1[0] scale 5.000000e-01 : tensor<?x1x2x4xf32>, !g -> tensor<?x1x2x4xf32>
  %c2 = bt.kv_append %c1[1], %k, %v key_mask %m : !g, tensor<?x1x2x4xf32>, tensor<?x1xi1>
  %n = bt.kv_length %c2[1] : !g
  return %o, %n, %c2 : tensor<?x1x2x4xf32>, index, !g
}

// -----

// A local cache: tensor.empty storage, zero flags, static fill lengths; an
// append without key mask flags its entries valid; the release disappears.
!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 3, head_dim = 4, f32>

// CHECK-LABEL: func.func @local(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x2x2x4xf32>, %[[Y:[^:]*]]: tensor<2x1x2x4xf32>) -> tensor<2x1x2x4xf32>
// CHECK:         %[[KV:.*]] = tensor.empty() : tensor<2x1x2x2x3x4xf32>
// CHECK:         %[[F0:.*]] = tensor.empty() : tensor<2x3xi64>
// CHECK:         %[[VALID:.*]] = linalg.fill ins(%c0_i64 : i64) outs(%[[F0]] : tensor<2x3xi64>)
// CHECK-NOT:     cf.assert
// CHECK:         tensor.extract_slice %[[KV]][0, 0, 0, 0, 0, 0] [2, 1, 1, 2, 2, 4]
// CHECK:         %[[ONES:.*]] = linalg.fill ins(%c1_i64 : i64) outs(%{{.*}} : tensor<2x2xi64>)
// CHECK:         %[[V1:.*]] = tensor.insert_slice %[[ONES]] into %[[VALID]][0, 0] [2, 2] [1, 1]
// CHECK:         tensor.extract_slice %{{.*}}[0, 0, 0, 0, 2, 0] [2, 1, 1, 2, 1, 4]
// CHECK:         tensor.insert_slice %{{.*}} into %[[V1]][0, 2] [2, 1] [1, 1]
// CHECK:         tensor.extract_slice %{{.*}}[0, 0, 0, 0, 0, 0] [2, 1, 1, 2, 3, 4] [1, 1, 1, 1, 1, 1] : tensor<2x1x2x2x3x4xf32> to tensor<2x2x3x4xf32>
// CHECK:         %[[O:.*]] = scf.for
// CHECK-NOT:     {{= bt\.|^ *bt\.}}
// CHECK:         } {bt.independent_iterations}
// CHECK-NOT:     {{= bt\.|^ *bt\.}}
// CHECK:         return %[[O]]
func.func @local(%x: tensor<2x2x2x4xf32>, %y: tensor<2x1x2x4xf32>) -> tensor<2x1x2x4xf32> {
  %c0 = bt.kv_alloc : !l
  %c1 = bt.kv_append %c0[0], %x, %x : !l, tensor<2x2x2x4xf32>
  %c2 = bt.kv_append %c1[0], %y, %y : !l, tensor<2x1x2x4xf32>
  %o = bt.kv_attend %y, %c2[0] scale 5.000000e-01 : tensor<2x1x2x4xf32>, !l -> tensor<2x1x2x4xf32>
  bt.kv_release %c2 : !l
  return %o : tensor<2x1x2x4xf32>
}

// -----

// A global cache allocated with a dynamic capacity.
!g = !bt.kv_cache<global, batch = ?, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>

// CHECK-LABEL: func.func @alloc_dynamic(
// CHECK-SAME:    %[[B:[^:]*]]: index, %[[C:[^:]*]]: index
// CHECK:         tensor.empty(%[[B]], %[[C]]) : tensor<?x1x2x2x?x4xf32>
// CHECK:         tensor.empty(%[[B]], %[[C]]) : tensor<?x?xi64>
func.func @alloc_dynamic(%b: index, %c: index, %k: tensor<?x1x2x4xf32>) -> tensor<?x1x2x4xf32> {
  %g0 = bt.kv_alloc batch %b capacity %c : !g
  %g1 = bt.kv_append %g0[0], %k, %k : !g, tensor<?x1x2x4xf32>
  %o = bt.kv_attend %k, %g1[0] scale 5.000000e-01 : tensor<?x1x2x4xf32>, !g -> tensor<?x1x2x4xf32>
  bt.kv_release %g1 : !g
  return %o : tensor<?x1x2x4xf32>
}

// -----

// A cache carried through scf.for (decode_tokens' steps): the loop carries the
// storage, the flags and one fill length per layer; the body appends at the
// carried length and yields the updated values.
!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>

// CHECK-LABEL: func.func @loop(
// CHECK:         %[[KV0:.*]] = tensor.empty() : tensor<2x1x2x2x5x4xf32>
// CHECK:         %[[KV1:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 1, 0, 0, 0] [2, 1, 1, 2, 2, 4]
// CHECK:         %[[F1:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 0] [2, 2] [1, 1]
// CHECK:         %[[R:.*]]:4 = scf.for %{{.*}} = %c1 to %c4 step %c1 iter_args(%[[KV:.*]] = %[[KV1]], %[[F:.*]] = %[[F1]], %[[LEN:.*]] = %c2, %[[ACC:.*]] = %{{.*}}) -> (tensor<2x1x2x2x5x4xf32>, tensor<2x5xi64>, index, tensor<2x1x2x4xf32>)
// CHECK:           %[[END:.*]] = arith.addi %[[LEN]], %c1{{.*}} : index
// CHECK:           cf.assert
// CHECK:           %[[KVA:.*]] = tensor.insert_slice %{{.*}} into %[[KV]][0, 0, 0, 0, %[[LEN]], 0] [2, 1, 1, 2, 1, 4]
// CHECK:           %[[KVB:.*]] = tensor.insert_slice %{{.*}} into %[[KVA]][0, 0, 1, 0, %[[LEN]], 0] [2, 1, 1, 2, 1, 4]
// CHECK:           %[[FA:.*]] = tensor.insert_slice %{{.*}} into %[[F]][0, %[[LEN]]] [2, 1] [1, 1]
// CHECK:           tensor.extract_slice %[[KVB]][0, 0, 0, 0, 0, 0] [2, 1, 1, 2, %[[END]], 4] [1, 1, 1, 1, 1, 1] : tensor<2x1x2x2x5x4xf32> to tensor<2x2x?x4xf32>
// CHECK:           %[[O:.*]] = scf.for
// CHECK:           scf.yield %[[KVB]], %[[FA]], %[[END]], %[[O]] : tensor<2x1x2x2x5x4xf32>, tensor<2x5xi64>, index, tensor<2x1x2x4xf32>
// CHECK:         return %[[R]]#3
func.func @loop(%x: tensor<2x2x2x4xf32>, %y: tensor<2x1x2x4xf32>) -> tensor<2x1x2x4xf32> {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c0 = bt.kv_alloc : !l
  %c0a = bt.kv_append %c0[0], %x, %x : !l, tensor<2x2x2x4xf32>
  %r:2 = scf.for %i = %c1 to %c4 step %c1 iter_args(%c = %c0a, %acc = %y) -> (!l, tensor<2x1x2x4xf32>) {
    %cn = bt.kv_append %c[0], %acc, %acc : !l, tensor<2x1x2x4xf32>
    %o = bt.kv_attend %acc, %cn[0] scale 5.000000e-01 : tensor<2x1x2x4xf32>, !l -> tensor<2x1x2x4xf32>
    scf.yield %cn, %o : !l, tensor<2x1x2x4xf32>
  }
  bt.kv_release %r#0 : !l
  return %r#1 : tensor<2x1x2x4xf32>
}

