// RUN: bt-opt %s --bt-lower-kv-caches --bt-lower-to-linalg --bt-mark-entry-points \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   --bt-drop-inout-results --canonicalize --cse --canonicalize | FileCheck %s
// RUN: bt-opt %s --bt-cpu-pipeline | FileCheck %s --check-prefix=LLVM

// A decode step on an in-out KV cache bufferizes in place (docs/generation.md):
// the cache and flag arguments are writable, each append writes the new
// entries into subviews of the argument buffers (O(new entries) writes), the
// attention reads subviews of the filled part, the cache is never copied or
// reallocated, and the cache results are dropped (bt-drop-inout-results).

!g = !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = ?, head_dim = 4, f32>

// CHECK-LABEL: func.func @decode(
// CHECK-SAME:    %[[K:[^:]*]]: memref<?x1x2x4xf32>, %[[V:[^:]*]]: memref<?x1x2x4xf32>, %[[Q:[^:]*]]: memref<?x1x2x4xf32>,
// CHECK-SAME:    %[[KV:[^:]*]]: memref<?x2x2x2x?x4xf32> {{{.*}}bt.inout, bt.name = "kv_cache"},
// CHECK-SAME:    %[[VALID:[^:]*]]: memref<?x?xi64> {{{.*}}bt.inout, bt.name = "kv_valid"},
// CHECK-SAME:    %[[LEN:[^:]*]]: memref<i64> {{{.*}}bt.name = "cache_length"})
// CHECK-SAME:    -> (memref<?x1x2x4xf32> {bt.name = "out"})
// CHECK-NOT:     memref.copy
// CHECK-NOT:     memref.alloc({{.*}}) {{.*}} : memref<?x2x2x2x?x4xf32>
// CHECK:         %[[L:.*]] = memref.load %[[LEN]][]
// Layer 0: keys (rotated by the producer, here the argument) written straight
// into the cache at L.
// CHECK:         %[[SK:.*]] = memref.subview %[[KV]][0, 0, 0, 0, %[[I:.*]], 0] [%{{.*}}, 1, 1, 2, 1, 4]
// CHECK:         linalg.generic {{.*}} ins(%[[K]] : memref<?x1x2x4xf32>) outs(%[[SK]] : memref<?x2x1x4xf32, strided<[?, ?, 4, 1], offset: ?>>)
// CHECK:         %[[SV:.*]] = memref.subview %[[KV]][0, 0, 1, 0, %[[I]], 0] [%{{.*}}, 1, 1, 2, 1, 4]
// CHECK:         linalg.generic {{.*}} ins(%[[V]] : memref<?x1x2x4xf32>) outs(%[[SV]]
// CHECK:         %[[SF:.*]] = memref.subview %[[VALID]][0, %[[I]]] [%{{.*}}, 1] [1, 1]
// CHECK:         linalg.fill ins(%c1_i64 : i64) outs(%[[SF]]
// The attention reads views of the filled entries.
// CHECK:         %[[KEYS:.*]] = memref.subview %[[KV]][0, 0, 0, 0, 0, 0] [%{{.*}}, 1, 1, 2, %[[N:.*]], 4]
// CHECK:         %[[VALS:.*]] = memref.subview %[[KV]][0, 0, 1, 0, 0, 0] [%{{.*}}, 1, 1, 2, %[[N]], 4]
// CHECK:         %[[FL:.*]] = memref.subview %[[VALID]][0, 0] [%{{.*}}, %[[N]]]
// CHECK:         scf.for
// CHECK:           memref.subview %[[KEYS]]
// CHECK:           linalg.matmul_transpose_b
// Layer 1.
// CHECK:         memref.subview %[[KV]][0, 1, 0, 0, %[[I]], 0]
// CHECK:         memref.subview %[[KV]][0, 1, 1, 0, %[[I]], 0]
// CHECK:         scf.for
// CHECK-NOT:     memref.copy
// CHECK:         return %{{.*}} : memref<?x1x2x4xf32>

// Through the whole pipeline: argv = the result block (the attention output
// only), then k, v, q, kv_cache, kv_valid, cache_length.
// LLVM-LABEL: llvm.func @bt_entry_decode(
// LLVM:       llvm.call @_mlir_ciface_decode(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
func.func @decode(%k: tensor<?x1x2x4xf32>, %v: tensor<?x1x2x4xf32>, %q: tensor<?x1x2x4xf32>,
                  %c: !g {bt.inout, bt.name = "kv_cache"})
    -> (tensor<?x1x2x4xf32> {bt.name = "out"}, !g {bt.inout_arg = "kv_cache", bt.name = "kv_cache"}) {
  %c1 = bt.kv_append %c[0], %k, %v : !g, tensor<?x1x2x4xf32>
  %o = bt.kv_attend %q, %c1[0] scale 5.000000e-01 : tensor<?x1x2x4xf32>, !g -> tensor<?x1x2x4xf32>
  %c2 = bt.kv_append %c1[1], %k, %v : !g, tensor<?x1x2x4xf32>
  %o2 = bt.kv_attend %o, %c2[1] scale 5.000000e-01 : tensor<?x1x2x4xf32>, !g -> tensor<?x1x2x4xf32>
  return %o2, %c2 : tensor<?x1x2x4xf32>, !g
}
