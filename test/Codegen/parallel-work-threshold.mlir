// RUN: bt-opt %s --split-input-file --convert-scf-to-openmp --bt-parallel-work-threshold | FileCheck %s
// RUN: bt-opt %s --split-input-file --convert-scf-to-openmp --bt-parallel-work-threshold=min-work=1024 | FileCheck %s --check-prefix=LOW

// 8 rows x 256 inner iterations = 2048 < 32768: serialized; with
// min-work=1024 the loop is large enough and keeps no clause.
// CHECK-LABEL: func.func @small_static
//       CHECK:   %[[NO:.*]] = arith.constant false
//       CHECK:   omp.parallel if(%[[NO]])
// LOW-LABEL: func.func @small_static
//   LOW-NOT:   if(
//       LOW:   omp.parallel {
func.func @small_static(%a: memref<8x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c256 = arith.constant 256 : index
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.for %j = %c0 to %c256 step %c1 {
      %x = memref.load %a[%i, %j] : memref<8x256xf32>
      memref.store %x, %a[%i, %j] : memref<8x256xf32>
    }
    scf.reduce
  }
  return
}

// -----

// 512 x 64 = 32768 iterations: large enough, no clause.
// CHECK-LABEL: func.func @large_static
//   CHECK-NOT:   if(
//       CHECK:   omp.parallel {
func.func @large_static(%a: memref<512x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c512 = arith.constant 512 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i) = (%c0) to (%c512) step (%c1) {
    scf.for %j = %c0 to %c64 step %c1 {
      %x = memref.load %a[%i, %j] : memref<512x64xf32>
      memref.store %x, %a[%i, %j] : memref<512x64xf32>
    }
    scf.reduce
  }
  return
}

// -----

// Dynamic rows %n (step 2) x the deepest chain of constant inner loops
// (16 x 8 = 128; the sibling loop of 4 does not add): on the pool when
// ceil(%n / 2) >= ceil(32768 / 128) = 256.
// CHECK-LABEL: func.func @dynamic_rows
//  CHECK-SAME:   (%[[A:.*]]: memref<?x16x8xf32>, %[[N:.*]]: index)
//       CHECK:   %[[SPAN:.*]] = arith.subi %[[N]], %c0
//       CHECK:   %[[TRIPS:.*]] = arith.ceildivsi %[[SPAN]], %c2
//       CHECK:   %[[NEED:.*]] = arith.constant 256 : index
//       CHECK:   %[[BIG:.*]] = arith.cmpi sge, %[[TRIPS]], %[[NEED]]
//       CHECK:   omp.parallel if(%[[BIG]])
func.func @dynamic_rows(%a: memref<?x16x8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c2) {
    scf.for %j = %c0 to %c16 step %c1 {
      scf.for %k = %c0 to %c8 step %c1 {
        %x = memref.load %a[%i, %j, %k] : memref<?x16x8xf32>
        memref.store %x, %a[%i, %j, %k] : memref<?x16x8xf32>
      }
    }
    scf.for %j = %c0 to %c4 step %c1 {
      %x = memref.load %a[%i, %j, %c0] : memref<?x16x8xf32>
      memref.store %x, %a[%i, %j, %c0] : memref<?x16x8xf32>
    }
    scf.reduce
  }
  return
}

// -----

// An inner loop whose bounds are defined in front of the loop (%m, as the
// key count of attention's loop over heads) counts its run-time trip count:
// the work is 8 rows x max(16, 16 x ceil(%m / 2)) inner iterations (the
// chain j, and the chain j, l), on the pool when >= 32768. A bound defined
// inside the loop (%d) counts 1.
// CHECK-LABEL: func.func @dynamic_inner
//  CHECK-SAME:   (%[[A:.*]]: memref<8x16x?xf32>, %[[M:.*]]: index)
//       CHECK:   arith.constant 16 : index
//       CHECK:   %[[ZERO:.*]] = arith.constant 0 : index
//       CHECK:   %[[W:.*]] = arith.constant 16 : index
//       CHECK:   %[[F:.*]] = arith.constant 16 : index
//       CHECK:   %[[SPAN:.*]] = arith.subi %[[M]], %c0
//       CHECK:   %[[T:.*]] = arith.ceildivsi %[[SPAN]], %c2
//       CHECK:   %[[T0:.*]] = arith.maxsi %[[T]], %[[ZERO]]
//       CHECK:   %[[CHAIN:.*]] = arith.muli %[[F]], %[[T0]]
//       CHECK:   %[[INNER:.*]] = arith.maxsi %[[W]], %[[CHAIN]]
//       CHECK:   %[[TRIPS:.*]] = arith.ceildivsi %{{.*}}, %c1
//       CHECK:   %[[WORK:.*]] = arith.muli %[[TRIPS]], %[[INNER]]
//       CHECK:   %[[MIN:.*]] = arith.constant 32768 : index
//       CHECK:   %[[BIG:.*]] = arith.cmpi sge, %[[WORK]], %[[MIN]]
//       CHECK:   omp.parallel if(%[[BIG]])
// LOW-LABEL: func.func @dynamic_inner
//       LOW:   arith.constant 1024 : index
//       LOW:   omp.parallel if(
func.func @dynamic_inner(%a: memref<8x16x?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.for %j = %c0 to %c16 step %c1 {
      scf.for %l = %c0 to %m step %c2 {
        %x = memref.load %a[%i, %j, %l] : memref<8x16x?xf32>
        memref.store %x, %a[%i, %j, %l] : memref<8x16x?xf32>
      }
      %row = memref.subview %a[%i, %j, 0] [1, 1, %m] [1, 1, 1] : memref<8x16x?xf32> to memref<?xf32, strided<[1], offset: ?>>
      %d = memref.dim %row, %c0 : memref<?xf32, strided<[1], offset: ?>>
      scf.for %l = %c0 to %d step %c1 {
        %x = memref.load %row[%l] : memref<?xf32, strided<[1], offset: ?>>
        memref.store %x, %row[%l] : memref<?xf32, strided<[1], offset: ?>>
      }
    }
    scf.reduce
  }
  return
}
