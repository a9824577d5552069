// RUN: bt-opt %s --split-input-file --bt-lower-kv-caches=device-cache-length=true | FileCheck %s
// RUN: bt-opt %s --split-input-file --bt-lower-kv-caches="target=cuda device-cache-length=true" | FileCheck %s --check-prefix=CUDA

// bt-lower-kv-caches with device-cache-length (the CUDA target's default):
// a cache argument's length is a 0-d tensor the function reads only where
// entries are placed or counted, and returns updated in place; the pass
// tracks the entries appended (constants here). No capacity check (it
// would read the length on the host).

!g = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = ?, head_dim = 4, f32>

// CHECK-LABEL: func.func @decode(
// CHECK-SAME:    %[[K:[^:]*]]: tensor<?x1x2x4xf32>, %[[V:[^:]*]]: tensor<?x1x2x4xf32>, %[[Q:[^:]*]]: tensor<?x1x2x4xf32>,
// CHECK-SAME:    %[[KV:[^:]*]]: tensor<?x2x2x2x?x4xf32> {bt.dims = ["B", "Ly", "", "H", "C", "hd"], bt.inout, bt.name = "kv_cache"},
// CHECK-SAME:    %[[VALID:[^:]*]]: tensor<?x?xi64> {bt.dims = ["B", "C"], bt.inout, bt.name = "kv_valid"},
// CHECK-SAME:    %[[LEN:[^:]*]]: tensor<i64> {bt.dims = [], bt.inout, bt.name = "cache_length"})
// CHECK-SAME:    -> (tensor<?x1x2x4xf32> {bt.name = "out"}, index,
// CHECK-SAME:        tensor<?x2x2x2x?x4xf32> {bt.dims = ["B", "Ly", "", "H", "C", "hd"], bt.inout_arg = "kv_cache", bt.name = "kv_cache"},
// CHECK-SAME:        tensor<?x?xi64> {bt.dims = ["B", "C"], bt.inout_arg = "kv_valid", bt.name = "kv_valid"},
// CHECK-SAME:        tensor<i64> {bt.dims = [], bt.inout_arg = "cache_length", bt.name = "cache_length"})
// CHECK-NOT:     cf.assert
// Layer 0 appends at the length read from the tensor.
// CHECK:         %[[L64:.*]] = tensor.extract %[[LEN]][] : tensor<i64>
// CHECK:         %[[L:.*]] = arith.index_cast %[[L64]] : i64 to index
// CHECK:         %[[KV1:.*]] = tensor.insert_slice %{{.*}} into %[[KV]][0, 0, 0, 0, %[[L]], 0] [%{{.*}}, 1, 1, 2, 1, 4]
// CHECK:         %[[KV2:.*]] = tensor.insert_slice %{{.*}} into %[[KV1]][0, 0, 1, 0, %[[L]], 0]
// CHECK:         %[[VALID1:.*]] = tensor.insert_slice %{{.*}} into %[[VALID]][0, %[[L]]] [%{{.*}}, 1] [1, 1]
// The attention reads the length + 1 filled entries.
// CHECK:         %[[A64:.*]] = tensor.extract %[[LEN]][] : tensor<i64>
// CHECK:         %[[A:.*]] = arith.index_cast %[[A64]] : i64 to index
// CHECK:         %[[AEND:.*]] = arith.addi %[[A]], %c1{{.*}} : index
// CHECK:         tensor.extract_slice %[[KV2]][0, 0, 0, 0, 0, 0] [%{{.*}}, 1, 1, 2, %[[AEND]], 4]
// CHECK:         %[[O:.*]] = scf.for
// Layer 1 appends at the same place (0 appended to it so far).
// CHECK:         %[[B64:.*]] = tensor.extract %[[LEN]][] : tensor<i64>
// CHECK:         %[[B:.*]] = arith.index_cast %[[B64]] : i64 to index
// CHECK:         %[[KV3:.*]] = tensor.insert_slice %{{.*}} into %[[KV2]][0, 1, 0, 0, %[[B]], 0]
// CHECK:         %[[KV4:.*]] = tensor.insert_slice %{{.*}} into %[[KV3]][0, 1, 1, 0, %[[B]], 0]
// bt.kv_length of layer 1: the length + 1.
// CHECK:         %[[N64:.*]] = tensor.extract %[[LEN]][] : tensor<i64>
// CHECK:         %[[N0:.*]] = arith.index_cast %[[N64]] : i64 to index
// CHECK:         %[[N:.*]] = arith.addi %[[N0]], %c1{{.*}} : index
// The updated length, written in place: length + 1.
// CHECK:         %[[ONE:.*]] = arith.index_cast %c1{{.*}} : index to i64
// CHECK:         %[[NEWLEN:.*]] = linalg.generic {{{.*}}iterator_types = []} outs(%[[LEN]] : tensor<i64>)
// CHECK-NEXT:    ^bb0(%[[OLD:.*]]: i64):
// CHECK-NEXT:      %[[SUM:.*]] = arith.addi %[[OLD]], %[[ONE]] : i64
// CHECK-NEXT:      linalg.yield %[[SUM]] : i64
// CHECK:         return %[[O]], %[[N]], %[[KV4]], %[[VALID1]], %[[NEWLEN]]

// The CUDA target's attention views the whole capacity and reads the
// length + 1 in its kernels; the grids and the split-K choice follow the
// capacity (and the grid's size: B·H ≥ 8192 blocks attend in one split).
// CUDA-LABEL: func.func @decode(
// CUDA-SAME:    %[[KV:[^:]*]]: tensor<?x2x2x2x?x4xf32> {{.*}}, %[[VALID:[^:]*]]: tensor<?x?xi64> {{.*}}, %[[LEN:[^:]*]]: tensor<i64>
// CUDA:         %[[CAP:.*]] = tensor.dim %[[KV]], %c4
// CUDA:         %[[KEYS:.*]] = tensor.extract_slice %{{.*}}[0, 0, 0, 0, 0, 0] [%{{.*}}, 1, 1, 2, %[[CAP]], 4]
// CUDA:         %[[HK:.*]] = tensor.dim %[[KEYS]], %c2{{.*}} : tensor<?x2x?x4xf32>
// CUDA:         %[[N:.*]] = bufferization.to_memref %[[LEN]] read_only : memref<i64, strided<[], offset: ?>>
// CUDA:         %[[FEW:.*]] = arith.cmpi ule, %[[HK]], %c128 : index
// CUDA:         %[[WIDE:.*]] = arith.cmpi uge, %{{.*}}, %c8192 : index
// CUDA:         %[[ONE:.*]] = arith.ori %[[FEW]], %[[WIDE]] : i1
// CUDA:         scf.if %[[ONE]] {
// CUDA:           gpu.launch
// CUDA:             %[[NK:.*]] = memref.load %[[N]][] : memref<i64, strided<[], offset: ?>>
// CUDA:             %[[NKI:.*]] = arith.index_cast %[[NK]] : i64 to index
// CUDA:             arith.addi %[[NKI]], %c1{{.*}} : index
// CUDA:         } else {
// CUDA:           %[[SPLITS:.*]] = arith.ceildivui %[[HK]], %c128
// CUDA:           gpu.launch blocks({{.*}}) in ({{.*}}, %{{.*}} = %[[SPLITS]])
// CUDA:             memref.load %[[N]][]
// CUDA:           gpu.launch
// CUDA:             memref.load %[[N]][]
// CUDA:         }
func.func @decode(%k: tensor<?x1x2x4xf32>, %v: tensor<?x1x2x4xf32>, %q: tensor<?x1x2x4xf32>,
                  %c: !g {bt.inout, bt.name = "kv_cache"})
    -> (tensor<?x1x2x4xf32> {bt.name = "out"}, index, !g {bt.inout_arg = "kv_cache", bt.name = "kv_cache"}) {
  %c1 = bt.kv_append %c[0], %k, %v : !g, tensor<?x1x2x4xf32>
  %o = bt.kv_attend %q, %c1[0] scale 5.000000e-01 : tensor<?x1x2x4xf32>, !g -> tensor<?x1x2x4xf32>
  %c2 = bt.kv_append %c1[1], %k, %v : !g, tensor<?x1x2x4xf32>
  %n = bt.kv_length %c2[1] : !g
  return %o, %n, %c2 : tensor<?x1x2x4xf32>, index, !g
}

// -----

// A loop over an argument cache carries the entries appended so far (from
// 0); the returned length adds the loop's count to the argument's.
!a = !bt.kv_cache<global, batch = 2, layers = 1, heads = 2, capacity = ?, head_dim = 4, f32>

// CHECK-LABEL: func.func @loop(
// CHECK-SAME:    %[[LEN:[^:]*]]: tensor<i64> {bt.dims = [], bt.inout, bt.name = "cache_length"}
// CHECK:         %[[R:.*]]:3 = scf.for %{{.*}} = %c0 to %c3 step %c1 iter_args(%[[KV:.*]] = %{{.*}}, %[[F:.*]] = %{{.*}}, %[[D:.*]] = %c0{{.*}}) -> (tensor<2x1x2x2x?x4xf32>, tensor<2x?xi64>, index)
// CHECK:           %[[D1:.*]] = arith.addi %[[D]], %c1{{.*}} : index
// CHECK:           %[[L64:.*]] = tensor.extract %[[LEN]][] : tensor<i64>
// CHECK:           %[[L:.*]] = arith.index_cast %[[L64]] : i64 to index
// CHECK:           %[[AT:.*]] = arith.addi %[[L]], %[[D]] : index
// CHECK:           tensor.insert_slice %{{.*}} into %[[KV]][0, 0, 0, 0, %[[AT]], 0]
// CHECK:           scf.yield %{{.*}}, %{{.*}}, %[[D1]]
// CHECK:         %[[DN:.*]] = arith.index_cast %[[R]]#2 : index to i64
// CHECK:         %[[NEWLEN:.*]] = linalg.generic {{.*}} outs(%[[LEN]] : tensor<i64>)
// CHECK:           arith.addi %{{.*}}, %[[DN]] : i64
// CHECK:         return %[[R]]#0, %[[R]]#1, %[[NEWLEN]]
func.func @loop(%x: tensor<2x1x2x4xf32>, %c: !a {bt.inout, bt.name = "kv_cache"})
    -> (!a {bt.inout_arg = "kv_cache", bt.name = "kv_cache"}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%cc = %c) -> (!a) {
    %cn = bt.kv_append %cc[0], %x, %x : !a, tensor<2x1x2x4xf32>
    scf.yield %cn : !a
  }
  return %r : !a
}

// -----

// A cache the function allocates keeps host lengths (constants here).
!l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 5, head_dim = 4, f32>

// CHECK-LABEL: func.func @local(
// CHECK-NOT:     tensor.extract {{.*}} : tensor<i64>
// CHECK:         tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 0, 0, 0, 0] [2, 1, 1, 2, 1, 4]
func.func @local(%x: tensor<2x1x2x4xf32>) -> tensor<2x1x2x4xf32> {
  %c0 = bt.kv_alloc : !l
  %c1 = bt.kv_append %c0[0], %x, %x : !l, tensor<2x1x2x4xf32>
  %o = bt.kv_attend %x, %c1[0] scale 5.000000e-01 : tensor<2x1x2x4xf32>, !l -> tensor<2x1x2x4xf32>
  bt.kv_release %c1 : !l
  return %o : tensor<2x1x2x4xf32>
}
