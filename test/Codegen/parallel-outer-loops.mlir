// RUN: bt-opt %s --split-input-file --bt-parallel-outer-loops | FileCheck %s

// A [B, S, D] nest: (B, S) stay one parallel loop, D (the contiguous dim)
// becomes a scf.for inside it.
// CHECK-LABEL: func.func @three_dims
//       CHECK:   scf.parallel (%[[B:.*]], %[[S:.*]]) = (%c0, %c0) to (%c2, %c3) step (%c1, %c1) {
//       CHECK:     scf.for %[[D:.*]] = %c0 to %c4 step %c1 {
//       CHECK:       memref.load %{{.*}}[%[[B]], %[[S]], %[[D]]]
//       CHECK:       memref.store
//       CHECK:     }
//       CHECK:     scf.reduce
//   CHECK-NOT:   scf.parallel
func.func @three_dims(%a: memref<2x3x4xf32>, %o: memref<2x3x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%b, %s, %d) = (%c0, %c0, %c0) to (%c2, %c3, %c4) step (%c1, %c1, %c1) {
    %x = memref.load %a[%b, %s, %d] : memref<2x3x4xf32>
    memref.store %x, %o[%b, %s, %d] : memref<2x3x4xf32>
    scf.reduce
  }
  return
}

// -----

// A parallel loop inside another becomes a sequential loop nest; a 1-dim
// outer loop stays parallel.
// CHECK-LABEL: func.func @nested
//       CHECK:   scf.parallel (%[[I:.*]]) = (%c0) to (%c2) step (%c1) {
//       CHECK:     scf.for %[[J:.*]] = %c0 to %c3 step %c1 {
//       CHECK:       scf.for %[[K:.*]] = %c0 to %c4 step %c1 {
//       CHECK:         memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]], %[[K]]]
//   CHECK-NOT:   scf.parallel
func.func @nested(%o: memref<2x3x4xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.parallel (%j, %k) = (%c0, %c0) to (%c3, %c4) step (%c1, %c1) {
      memref.store %v, %o[%i, %j, %k] : memref<2x3x4xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

// A loop with a reduction is left to convert-scf-to-openmp as it is.
// CHECK-LABEL: func.func @reduction
//       CHECK:   scf.parallel (%{{.*}}, %{{.*}}) = {{.*}} init (%{{.*}}) -> f32
func.func @reduction(%a: memref<3x4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %r = scf.parallel (%i, %j) = (%c0, %c0) to (%c3, %c4) step (%c1, %c1) init (%zero) -> f32 {
    %x = memref.load %a[%i, %j] : memref<3x4xf32>
    scf.reduce(%x : f32) {
    ^bb0(%l: f32, %r: f32):
      %s = arith.addf %l, %r : f32
      scf.reduce.return %s : f32
    }
  }
  return %r : f32
}

// -----

// A loop the lowering marked independent (attention's loop over heads, once
// bufferized: no iter_args) becomes a 1-dim scf.parallel; the parallel
// loops of its body become sequential nests.
// CHECK-LABEL: func.func @independent
//       CHECK:   scf.parallel (%[[H:.*]]) = (%c0) to (%[[N:.*]]) step (%c1) {
//       CHECK:     scf.for %[[J:.*]] = %c0 to %c4 step %c1 {
//       CHECK:       memref.store %{{.*}}, %{{.*}}[%[[H]], %[[J]]]
//       CHECK:     }
//       CHECK:     scf.reduce
//   CHECK-NOT:   scf.parallel
//   CHECK-NOT:   bt.independent_iterations
func.func @independent(%o: memref<?x4xf32>, %n: index, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %h = %c0 to %n step %c1 {
    scf.parallel (%j) = (%c0) to (%c4) step (%c1) {
      memref.store %v, %o[%h, %j] : memref<?x4xf32>
      scf.reduce
    }
  } {bt.independent_iterations}
  return
}

// -----

// Left as loops: a marked loop that still carries values (not bufferized
// in place), one inside a parallel loop, and an unmarked one.
// CHECK-LABEL: func.func @not_independent
//       CHECK:   scf.for {{.*}} iter_args
//       CHECK:   } {bt.independent_iterations}
//       CHECK:   scf.parallel (%[[I:.*]]) = (%c0) to (%c2) step (%c1) {
//       CHECK:     scf.for
//       CHECK:     } {bt.independent_iterations}
//       CHECK:     scf.reduce
//       CHECK:   scf.for %{{.*}} = %c0 to %c2 step %c1 {
//   CHECK-NOT:   scf.parallel
func.func @not_independent(%o: memref<2x4xf32>, %v: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %s = scf.for %h = %c0 to %c2 step %c1 iter_args(%acc = %v) -> (f32) {
    %a = arith.addf %acc, %v : f32
    scf.yield %a : f32
  } {bt.independent_iterations}
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      memref.store %v, %o[%i, %j] : memref<2x4xf32>
    } {bt.independent_iterations}
    scf.reduce
  }
  scf.for %i = %c0 to %c2 step %c1 {
    memref.store %v, %o[%i, %c0] : memref<2x4xf32>
  }
  return %s : f32
}
