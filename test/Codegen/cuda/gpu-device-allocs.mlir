// RUN: bt-opt %s --bt-gpu-device-allocs --split-input-file --verify-diagnostics | FileCheck %s

// Every buffer of the host code becomes a device allocation; a clone becomes
// a device allocation and a copy (a kernel later). A clone with a static
// strided layout gets 1 + offset + Σ (size − 1)·stride elements viewed with
// that layout.
// CHECK-LABEL: func.func @buffers
//  CHECK-SAME:   %[[X:.*]]: memref<?x8xf32, strided<[16, 1]>>, %[[N:.*]]: index
//       CHECK:   %[[A:.*]] = gpu.alloc (%[[N]]) : memref<?x8xf32>
//       CHECK:   %[[D:.*]] = memref.dim %[[X]], %{{.*}}
//       CHECK:   %[[LAST:.*]] = arith.subi %[[D]], %{{.*}}
//       CHECK:   arith.muli %[[LAST]], %{{.*}}
//       CHECK:   arith.addi
//       CHECK:   %[[EXTENT:.*]] = arith.addi
//       CHECK:   %[[FLAT:.*]] = gpu.alloc (%[[EXTENT]]) : memref<?xf32>
//       CHECK:   %[[B:.*]] = memref.reinterpret_cast %[[FLAT]] to offset: [0], sizes: [%[[D]], %{{.*}}], strides: [16, 1] : memref<?xf32> to memref<?x8xf32, strided<[16, 1]>>
//       CHECK:   memref.copy %[[X]], %[[B]]
//       CHECK:   gpu.dealloc %[[A]] : memref<?x8xf32>
//       CHECK:   return %[[B]]
//   CHECK-NOT:   memref.alloc
func.func @buffers(%x: memref<?x8xf32, strided<[16, 1]>>, %n: index) -> memref<?x8xf32, strided<[16, 1]>> {
  %a = memref.alloc(%n) {alignment = 64 : i64} : memref<?x8xf32>
  %b = bufferization.clone %x : memref<?x8xf32, strided<[16, 1]>> to memref<?x8xf32, strided<[16, 1]>>
  memref.dealloc %a : memref<?x8xf32>
  return %b : memref<?x8xf32, strided<[16, 1]>>
}

// -----

// A clone of a row-major buffer: a row-major device buffer.
// CHECK-LABEL: func.func @dense_clone
//       CHECK:   %[[B:.*]] = gpu.alloc (%{{.*}}) : memref<?xf32>
//       CHECK:   memref.copy %{{.*}}, %[[B]]
//       CHECK:   return %[[B]]
func.func @dense_clone(%x: memref<?xf32>) -> memref<?xf32> {
  %b = bufferization.clone %x : memref<?xf32> to memref<?xf32>
  return %b : memref<?xf32>
}

// -----

// Allocations inside kernels are left alone.
// CHECK-LABEL: func.func @in_kernel
//       CHECK:   gpu.launch
//       CHECK:     memref.alloca
func.func @in_kernel() {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %s = memref.alloca() : memref<4xf32>
    gpu.terminator
  }
  return
}

// -----

func.func @host_alloca() {
  // expected-error@+1 {{in host code of the CUDA target: buffers must be device allocations (memref.alloc)}}
  %s = memref.alloca() : memref<4xf32>
  return
}

// -----

func.func @layout(%n: index) {
  // expected-error@+1 {{has a layout or memory space; device buffers are plain row-major memrefs}}
  %a = memref.alloc() : memref<4xf32, strided<[2]>>
  return
}
