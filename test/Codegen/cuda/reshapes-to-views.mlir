// RUN: bt-opt %s --bt-reshapes-to-views --split-input-file --verify-diagnostics --allow-unregistered-dialect | FileCheck %s

// The bufferized tensor.from_elements shape of a dynamic expansion: the
// view is built from the stored sizes, the shape buffer disappears.
// CHECK-LABEL: func.func @stored_shape
//  CHECK-SAME:   %[[SRC:.*]]: memref<?x192xf32>, %[[B:.*]]: index, %[[N:.*]]: index
//       CHECK:   %[[STRIDE:.*]] = arith.muli %{{.*}}, %[[N]] : index
//       CHECK:   %[[V:.*]] = memref.reinterpret_cast %[[SRC]] to offset: [0], sizes: [%[[B]], %[[N]], 192], strides: [%[[STRIDE]], 192, 1] : memref<?x192xf32> to memref<?x?x192xf32>
//       CHECK:   return %[[V]]
//   CHECK-NOT:   memref.alloc
//   CHECK-NOT:   memref.store
func.func @stored_shape(%src: memref<?x192xf32>, %b: index, %n: index) -> memref<?x?x192xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c192 = arith.constant 192 : index
  %shape = memref.alloc() : memref<3xindex>
  memref.store %b, %shape[%c0] : memref<3xindex>
  memref.store %n, %shape[%c1] : memref<3xindex>
  memref.store %c192, %shape[%c2] : memref<3xindex>
  %r = memref.reshape %src(%shape) : (memref<?x192xf32>, memref<3xindex>) -> memref<?x?x192xf32>
  return %r : memref<?x?x192xf32>
}

// -----

// A shape buffer filled by a copy (bufferization copies a shape tensor used
// twice), read by a reshape in a nested region.
// CHECK-LABEL: func.func @copied_shape
//       CHECK:   scf.if
//       CHECK:     memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [%{{.*}}, 4], strides: [4, 1]
//   CHECK-NOT:   memref.copy
//   CHECK-NOT:   memref.alloc
func.func @copied_shape(%src: memref<?xf32>, %m: index, %c: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %shape = memref.alloc() : memref<2xindex>
  memref.store %m, %shape[%c0] : memref<2xindex>
  memref.store %c4, %shape[%c1] : memref<2xindex>
  %copy = memref.alloc() : memref<2xindex>
  memref.copy %shape, %copy : memref<2xindex> to memref<2xindex>
  scf.if %c {
    %r = memref.reshape %src(%copy) : (memref<?xf32>, memref<2xindex>) -> memref<?x4xf32>
    "test.use"(%r) : (memref<?x4xf32>) -> ()
  }
  return
}

// -----

// A shape that is not known from stores (a function argument).
func.func @unknown_shape(%src: memref<?xf32>, %shape: memref<2xindex>) -> memref<?x?xf32> {
  // expected-error@+1 {{has a shape operand that is not a buffer whose elements are each stored once with a constant index before the reshape}}
  %r = memref.reshape %src(%shape) : (memref<?xf32>, memref<2xindex>) -> memref<?x?xf32>
  return %r : memref<?x?xf32>
}

// -----

// An element stored twice.
func.func @stored_twice(%src: memref<?xf32>, %a: index, %b: index) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %shape = memref.alloc() : memref<1xindex>
  memref.store %a, %shape[%c0] : memref<1xindex>
  memref.store %b, %shape[%c0] : memref<1xindex>
  // expected-error@+1 {{has a shape operand that is not a buffer}}
  %r = memref.reshape %src(%shape) : (memref<?xf32>, memref<1xindex>) -> memref<?xf32>
  return %r : memref<?xf32>
}
