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
//       CHECK:   %[[POS:.*]] = arith.maxsi %[[SPAN]], %{{.*}}
//       CHECK:   %[[LAST:.*]] = arith.subi %c2, %{{.*}}
//       CHECK:   %[[UP:.*]] = arith.addi %[[POS]], %[[LAST]]
//       CHECK:   %[[TRIPS:.*]] = arith.divui %[[UP]], %c2
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
// the work is 8 rows x max(16, 16 x ceil(%m / 2), 16 x %m) inner
// iterations (the chains j; j, l; j, l2), on the pool when >= 32768. The
// loop to %d, a bound defined inside the loop (the size of a subview of
// %m elements), counts the largest value of that bound, %m.
// CHECK-LABEL: func.func @dynamic_inner
//  CHECK-SAME:   (%[[A:.*]]: memref<8x16x?xf32>, %[[M:.*]]: index)
//       CHECK:   %[[SPAN:.*]] = arith.subi %[[M]], %c0
//       CHECK:   %[[POS:.*]] = arith.maxsi %[[SPAN]], %{{.*}}
//       CHECK:   %[[UP:.*]] = arith.addi %[[POS]], %{{.*}}
//       CHECK:   %[[T:.*]] = arith.divui %[[UP]], %c2
//       CHECK:   %[[SPAN2:.*]] = arith.subi %[[M]], %c0
//       CHECK:   %[[POS2:.*]] = arith.maxsi %[[SPAN2]], %{{.*}}
//       CHECK:   %[[UP2:.*]] = arith.addi %[[POS2]], %{{.*}}
//       CHECK:   %[[T2:.*]] = arith.divui %[[UP2]], %c1
//       CHECK:   %[[W:.*]] = arith.constant 16 : index
//       CHECK:   %[[F:.*]] = arith.constant 16 : index
//       CHECK:   %[[CHAIN:.*]] = arith.muli %[[F]], %[[T]]
//       CHECK:   %[[INNER:.*]] = arith.maxsi %[[W]], %[[CHAIN]]
//       CHECK:   %[[F2:.*]] = arith.constant 16 : index
//       CHECK:   %[[CHAIN2:.*]] = arith.muli %[[F2]], %[[T2]]
//       CHECK:   %[[INNER2:.*]] = arith.maxsi %[[INNER]], %[[CHAIN2]]
//       CHECK:   %[[TRIPS:.*]] = arith.divui %{{.*}}, %c1
//       CHECK:   %[[WORK:.*]] = arith.muli %[[TRIPS]], %[[INNER2]]
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

// -----

// The shape of LayerEmitter::attention's chunks of query rows: chunks of 64
// rows up to %s, each of min(64, %s - %r0) rows against the %r0 + rows keys
// the causal mask lets them see. The bounds derived for the inner loops: 64
// rows, %s keys; the work is 8 x ceil(%s / 64) x 64 x %s. A loop to a value
// loaded from memory has no bound and counts 1 (nothing of it in front).
// CHECK-LABEL: func.func @bounded_inner
//  CHECK-SAME:   (%[[A:.*]]: memref<8x?xf32>, %[[S:.*]]: index, %[[LENS:.*]]: memref<8xindex>)
//   CHECK-NOT:   memref.load
//       CHECK:   %[[KSPAN:.*]] = arith.subi %[[S]], %c0
//       CHECK:   %[[KT:.*]] = arith.divui %{{.*}}, %c1
//       CHECK:   %[[R64:.*]] = arith.constant 64 : index
//       CHECK:   %[[RSPAN:.*]] = arith.subi %[[R64]], %c0
//       CHECK:   %[[RT:.*]] = arith.divui %{{.*}}, %c1
//       CHECK:   %[[CSPAN:.*]] = arith.subi %[[S]], %c0
//       CHECK:   %[[CT:.*]] = arith.divui %{{.*}}, %c64
//       CHECK:   %[[P1:.*]] = arith.muli %{{.*}}, %[[KT]]
//       CHECK:   %[[P2:.*]] = arith.muli %[[P1]], %[[RT]]
//       CHECK:   %[[P3:.*]] = arith.muli %[[P2]], %[[CT]]
//       CHECK:   arith.maxsi %{{.*}}, %[[P3]]
//   CHECK-NOT:   memref.load
//       CHECK:   %[[BIG:.*]] = arith.cmpi sge, %{{.*}}, %c32768
//       CHECK:   omp.parallel if(%[[BIG]])
func.func @bounded_inner(%a: memref<8x?xf32>, %s: index, %lens: memref<8xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.for %r0 = %c0 to %s step %c64 {
      %rows = affine.min affine_map<(d0)[s0] -> (64, s0 - d0)>(%r0)[%s]
      %keys = arith.addi %r0, %rows : index
      scf.for %r = %c0 to %rows step %c1 {
        scf.for %t = %c0 to %keys step %c1 {
          %x = memref.load %a[%i, %t] : memref<8x?xf32>
          memref.store %x, %a[%i, %t] : memref<8x?xf32>
        }
      }
    }
    %n = memref.load %lens[%i] : memref<8xindex>
    scf.for %t = %c0 to %n step %c1 {
      %x = memref.load %a[%i, %t] : memref<8x?xf32>
      memref.store %x, %a[%i, %t] : memref<8x?xf32>
    }
    scf.reduce
  }
  return
}
