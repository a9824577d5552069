// RUN: bt-opt %s -split-input-file --bt-early-dealloc | FileCheck %s

// Each dealloc moves to just after the last op that uses its buffer or a
// view of it: %a after the copy that reads its reshaped view, %b after the
// region op that reads it, %c (unused) right after its alloc.
// CHECK-LABEL: func.func @chain
//       CHECK:   %[[A:.*]] = memref.alloc
//       CHECK:   %[[C:.*]] = memref.alloc
//  CHECK-NEXT:   memref.dealloc %[[C]]
//       CHECK:   linalg.fill ins(%{{.*}} : f32) outs(%[[A]]
//       CHECK:   %[[V:.*]] = memref.collapse_shape %[[A]]
//       CHECK:   %[[B:.*]] = memref.alloc
//       CHECK:   memref.copy %[[V]], %[[B]]
//  CHECK-NEXT:   memref.dealloc %[[A]]
//       CHECK:   scf.for
//       CHECK:     memref.load %[[B]]
//       CHECK:   }
//  CHECK-NEXT:   memref.dealloc %[[B]]
//       CHECK:   memref.store
//  CHECK-NEXT:   return
func.func @chain(%out: memref<f32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<2x4xf32>
  %c = memref.alloc() : memref<16xf32>
  linalg.fill ins(%z : f32) outs(%a : memref<2x4xf32>)
  %v = memref.collapse_shape %a [[0, 1]] : memref<2x4xf32> into memref<8xf32>
  %b = memref.alloc() : memref<8xf32>
  memref.copy %v, %b : memref<8xf32> to memref<8xf32>
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> (f32) {
    %x = memref.load %b[%c0] : memref<8xf32>
    %y = arith.addf %acc, %x : f32
    scf.yield %y : f32
  }
  memref.store %s, %out[] : memref<f32>
  memref.dealloc %a : memref<2x4xf32>
  memref.dealloc %b : memref<8xf32>
  memref.dealloc %c : memref<16xf32>
  return
}

// -----

// Left in place: a buffer whose raw address leaves SSA (its dealloc stays
// last, not after the call), and a buffer whose view is returned (no
// dealloc to move; the function's result owns it).
// CHECK-LABEL: func.func @kept
//       CHECK:   %[[A:.*]] = memref.alloc
//       CHECK:   memref.extract_aligned_pointer_as_index %[[A]]
//       CHECK:   call @use
//       CHECK:   memref.cast
//  CHECK-NEXT:   memref.dealloc %[[A]]
//  CHECK-NEXT:   return
func.func private @use(index)
func.func @kept() -> memref<4xf32> {
  %a = memref.alloc() : memref<4xf32>
  %p = memref.extract_aligned_pointer_as_index %a : memref<4xf32> -> index
  call @use(%p) : (index) -> ()
  %r = memref.alloc() : memref<8xf32>
  %v = memref.subview %r[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %w = memref.cast %v : memref<4xf32, strided<[1]>> to memref<4xf32>
  memref.dealloc %a : memref<4xf32>
  return %w : memref<4xf32>
}

// -----

// A buffer yielded out of a region: the region op's result counts as an
// alias, so both deallocs go after the last use of that result (the load),
// not after the region op.
// CHECK-LABEL: func.func @yielded
//       CHECK:   scf.if
//       CHECK:   memref.load
//  CHECK-NEXT:   memref.dealloc
//  CHECK-NEXT:   memref.dealloc
//  CHECK-NEXT:   arith.addf
func.func @yielded(%c: i1) -> f32 {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  %r = scf.if %c -> memref<4xf32> {
    scf.yield %a : memref<4xf32>
  } else {
    scf.yield %b : memref<4xf32>
  }
  %x = memref.load %r[%c0] : memref<4xf32>
  %y = arith.addf %x, %x : f32
  memref.dealloc %a : memref<4xf32>
  memref.dealloc %b : memref<4xf32>
  return %y : f32
}
