// RUN: bt-opt %s --bt-gpu-host-accesses --split-input-file --verify-diagnostics | FileCheck %s

// A scalar of device memory that steers the host (a KV cache's fill length)
// is copied to a host temporary first; device buffers are freed with
// gpu.dealloc, host ones (the pointer arrays of the deallocation code) with
// memref.dealloc.
// CHECK-LABEL: func.func @accesses
//  CHECK-SAME:   %[[LEN:.*]]: memref<i64>, %[[N:.*]]: index
//       CHECK:   %[[TMP:.*]] = memref.alloca() : memref<i64>
//       CHECK:   %[[HOST:.*]] = memref.alloc() : memref<2xindex>
//       CHECK:   %[[DEV:.*]] = gpu.alloc (%[[N]]) : memref<?xf32>
//       CHECK:   %[[BASE:.*]], %[[OFF:.*]] = memref.extract_strided_metadata %[[LEN]]
//       CHECK:   %[[SRC:.*]] = memref.extract_aligned_pointer_as_index %[[LEN]]
//       CHECK:   %[[DST:.*]] = memref.extract_aligned_pointer_as_index %[[TMP]]
//       CHECK:   call @bt_gpu_memcpy_dtoh(%{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, i64) -> ()
//       CHECK:   %[[V:.*]] = memref.load %[[TMP]][] : memref<i64>
//       CHECK:   memref.dealloc %[[HOST]] : memref<2xindex>
//       CHECK:   gpu.dealloc %[[DEV]] : memref<?xf32>
//       CHECK:   return %[[V]]
// CHECK: func.func private @bt_gpu_memcpy_dtoh(!llvm.ptr, !llvm.ptr, i64)
func.func @accesses(%len: memref<i64>, %n: index) -> i64 {
  %host = memref.alloc() : memref<2xindex>
  %dev = gpu.alloc (%n) : memref<?xf32>
  %v = memref.load %len[] : memref<i64>
  memref.dealloc %host : memref<2xindex>
  memref.dealloc %dev : memref<?xf32>
  return %v : i64
}

// -----

// The address of an element: aligned pointer + (offset + Σ index·stride) ·
// element size.
// CHECK-LABEL: func.func @element
//       CHECK:   %[[BASE:.*]], %[[OFF:.*]], %{{.*}}:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata
//       CHECK:   %[[M0:.*]] = arith.muli %{{.*}}, %[[STRIDES]]#0
//       CHECK:   %[[A0:.*]] = arith.addi %[[OFF]], %[[M0]]
//       CHECK:   %[[M1:.*]] = arith.muli %{{.*}}, %[[STRIDES]]#1
//       CHECK:   %[[A1:.*]] = arith.addi %[[A0]], %[[M1]]
//       CHECK:   %[[W:.*]] = arith.constant 4 : index
//       CHECK:   %[[P:.*]] = memref.extract_aligned_pointer_as_index
//       CHECK:   %[[BYTES:.*]] = arith.muli %[[A1]], %[[W]]
//       CHECK:   arith.addi %[[P]], %[[BYTES]]
//       CHECK:   %[[N:.*]] = arith.constant 4 : i64
//       CHECK:   call @bt_gpu_memcpy_dtoh(%{{.*}}, %{{.*}}, %[[N]])
func.func @element(%m: memref<?x?xi32, strided<[?, 1], offset: ?>>, %i: index, %j: index) -> i32 {
  %v = memref.load %m[%i, %j] : memref<?x?xi32, strided<[?, 1], offset: ?>>
  return %v : i32
}

// -----

func.func @host_store(%m: memref<i64>, %v: i64) {
  // expected-error@+1 {{stores to device memory in host code}}
  memref.store %v, %m[] : memref<i64>
  return
}

// -----

func.func @host_copy(%a: memref<4xf32>, %b: memref<4xf32>) {
  // expected-error@+1 {{in host code of the CUDA target (copies are kernels}}
  memref.copy %a, %b : memref<4xf32> to memref<4xf32>
  return
}

// -----

// A scalar argument passed by value (bt.host_scalar, bt-scalars-to-kernels)
// is host memory: a plain load, no copy.
// CHECK-LABEL: func.func @by_value
//   CHECK-NOT:   bt_gpu_memcpy_dtoh
//       CHECK:   %[[V:.*]] = memref.load %{{.*}}[] : memref<i64>
//       CHECK:   return %[[V]]
func.func @by_value(%len: memref<i64> {bt.host_scalar}) -> i64 {
  %v = memref.load %len[] : memref<i64>
  return %v : i64
}
