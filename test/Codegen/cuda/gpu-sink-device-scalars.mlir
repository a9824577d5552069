// RUN: bt-opt %s --bt-gpu-sink-device-scalars --split-input-file | FileCheck %s

// A KV-cache append at a length held in device memory (bt-lower-kv-caches
// device-cache-length): the host's load of the length, its index arithmetic
// and the subview at that offset move into the copy kernel, which then
// captures the cache and the length argument; the host code reads nothing.
// CHECK-LABEL: func.func @append
//  CHECK-SAME:   %[[KV:[^:]*]]: memref<?x8x4xf32>, %[[LEN:[^:]*]]: memref<i64>, %[[X:[^:]*]]: memref<?x4xf32>
//   CHECK-NOT:   memref.load
//   CHECK-NOT:   memref.subview
//       CHECK:   gpu.launch
//  CHECK-NEXT:     %[[L:.*]] = memref.load %[[LEN]][] : memref<i64>
//  CHECK-NEXT:     %[[I:.*]] = arith.index_cast %[[L]] : i64 to index
//  CHECK-NEXT:     %[[AT:.*]] = arith.addi %[[I]], %{{.*}} : index
//  CHECK-NEXT:     %[[SV:.*]] = memref.subview %[[KV]][0, %[[AT]], 0]
//       CHECK:     memref.store %{{.*}}, %[[SV]][%{{.*}}, %{{.*}}]
//       CHECK:     gpu.terminator
func.func @append(%kv: memref<?x8x4xf32>, %len: memref<i64>, %x: memref<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = memref.dim %kv, %c0 : memref<?x8x4xf32>
  %l = memref.load %len[] : memref<i64>
  %li = arith.index_cast %l : i64 to index
  %at = arith.addi %li, %c1 : index
  %dst = memref.subview %kv[0, %at, 0] [%b, 1, 4] [1, 1, 1] : memref<?x8x4xf32> to memref<?x4xf32, strided<[32, 1], offset: ?>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %b, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%bx, %tx] : memref<?x4xf32>
    memref.store %v, %dst[%bx, %tx] : memref<?x4xf32, strided<[32, 1], offset: ?>>
    gpu.terminator
  }
  return
}

// -----

// A use by the host itself (here a grid size) keeps the load on the host
// (bt-gpu-host-accesses copies it), while the kernel's use of the same
// value is recomputed in the kernel.
// CHECK-LABEL: func.func @host_use
//  CHECK-SAME:   %[[LEN:[^:]*]]: memref<i64>
//       CHECK:   %[[L:.*]] = memref.load %[[LEN]][] : memref<i64>
//       CHECK:   %[[N:.*]] = arith.index_cast %[[L]] : i64 to index
//       CHECK:   gpu.launch blocks({{.*}}) in (%{{.*}} = %[[N]],
//  CHECK-NEXT:     %[[KL:.*]] = memref.load %[[LEN]][] : memref<i64>
//  CHECK-NEXT:     %[[KN:.*]] = arith.index_cast %[[KL]] : i64 to index
//  CHECK-NEXT:     memref.store %{{.*}}, %{{.*}}[%[[KN]]]
func.func @host_use(%len: memref<i64>, %out: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  %l = memref.load %len[] : memref<i64>
  %n = arith.index_cast %l : i64 to index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %f, %out[%n] : memref<?xf32>
    gpu.terminator
  }
  return
}

// -----

// A kernel that writes the argument (the in-place length update at the end
// of decode_block) orders the reads: a load before it moves into the
// kernels before it, not into the writer itself nor into a kernel after
// it; the load that stays is the host's.
// CHECK-LABEL: func.func @writer
//  CHECK-SAME:   %[[LEN:[^:]*]]: memref<i64>
//       CHECK:   %[[L:.*]] = memref.load %[[LEN]][] : memref<i64>
// The kernel before the write reads the length itself.
//       CHECK:   gpu.launch
//  CHECK-NEXT:     %[[K0:.*]] = memref.load %[[LEN]][] : memref<i64>
//  CHECK-NEXT:     memref.store %[[K0]], %{{.*}}[%{{.*}}] : memref<?xi64>
// The writer: the captured host value.
//       CHECK:   gpu.launch
//  CHECK-NEXT:     %[[OLD:.*]] = memref.load %[[LEN]][] : memref<i64>
//  CHECK-NEXT:     %[[NEW:.*]] = arith.addi %[[OLD]], %[[L]] : i64
//  CHECK-NEXT:     memref.store %[[NEW]], %[[LEN]][] : memref<i64>
// After the write: the captured host value.
//       CHECK:   gpu.launch
//  CHECK-NEXT:     memref.store %[[L]], %{{.*}}[%{{.*}}] : memref<?xi64>
func.func @writer(%len: memref<i64>, %out: memref<?xi64>) {
  %c1 = arith.constant 1 : index
  %l = memref.load %len[] : memref<i64>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %l, %out[%tx] : memref<?xi64>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %old = memref.load %len[] : memref<i64>
    %new = arith.addi %old, %l : i64
    memref.store %new, %len[] : memref<i64>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %l, %out[%bx] : memref<?xi64>
    gpu.terminator
  }
  return
}

// -----

// A scalar passed by value (bt.host_scalar) is host memory: left alone.
// CHECK-LABEL: func.func @by_value
//  CHECK-SAME:   %[[LEN:[^:]*]]: memref<i64> {bt.host_scalar}
//       CHECK:   %[[L:.*]] = memref.load %[[LEN]][] : memref<i64>
//       CHECK:   gpu.launch
//  CHECK-NEXT:     memref.store %[[L]]
func.func @by_value(%len: memref<i64> {bt.host_scalar}, %out: memref<?xi64>) {
  %c1 = arith.constant 1 : index
  %l = memref.load %len[] : memref<i64>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %l, %out[%tx] : memref<?xi64>
    gpu.terminator
  }
  return
}
