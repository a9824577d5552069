// RUN: bt-opt %s --split-input-file --bt-omp-static-partition | FileCheck %s

// A 2-dim collapsed nest: thread t of T runs the linear iterations
// [t ceil(N / T), min((t + 1) ceil(N / T), N)), N = trips(i) x trips(j),
// delinearized row-major (j fastest); the parallel region keeps its if
// clause and its terminator.
// CHECK-LABEL: func.func @two_dims
//       CHECK:   omp.parallel if(%{{.*}}) {
//   CHECK-NOT:     omp.wsloop
//       CHECK:     %[[TID32:.*]] = func.call @omp_get_thread_num() : () -> i32
//       CHECK:     %[[TID:.*]] = arith.index_cast %[[TID32]] : i32 to index
//       CHECK:     %[[NT32:.*]] = func.call @omp_get_num_threads() : () -> i32
//       CHECK:     %[[NT:.*]] = arith.index_cast %[[NT32]] : i32 to index
// Trips: max(ub - lb, 0) ceil-divided by the step.
//       CHECK:     %[[SPANI:.*]] = arith.subi %[[N:.*]], %[[C0:.*]] : index
//       CHECK:     %[[POSI:.*]] = arith.maxsi %[[SPANI]], %{{.*}} : index
//       CHECK:     %[[TRIPI:.*]] = arith.divui
//       CHECK:     %[[TOT0:.*]] = arith.muli %{{.*}}, %[[TRIPI]] : index
//       CHECK:     %[[SPANJ:.*]] = arith.subi %[[M:.*]], %[[C0]] : index
//       CHECK:     %[[TRIPJ:.*]] = arith.divui
//       CHECK:     %[[TOT:.*]] = arith.muli %[[TOT0]], %[[TRIPJ]] : index
//       CHECK:     %[[CHUNK:.*]] = arith.divui %{{.*}}, %[[NT]] : index
//       CHECK:     %[[B0:.*]] = arith.muli %[[TID]], %[[CHUNK]] : index
//       CHECK:     %[[BEGIN:.*]] = arith.minui %[[B0]], %[[TOT]] : index
//       CHECK:     %[[E0:.*]] = arith.addi %[[BEGIN]], %[[CHUNK]] : index
//       CHECK:     %[[END:.*]] = arith.minui %[[E0]], %[[TOT]] : index
//       CHECK:     scf.for %[[L:.*]] = %[[BEGIN]] to %[[END]] step %{{.*}} {
//       CHECK:       %[[JI:.*]] = arith.remui %[[L]], %[[TRIPJ]] : index
//       CHECK:       %[[II:.*]] = arith.divui %[[L]], %[[TRIPJ]] : index
//       CHECK:       %[[JS:.*]] = arith.muli %[[JI]], %{{.*}} : index
//       CHECK:       %[[J:.*]] = arith.addi %[[C0]], %[[JS]] : index
//       CHECK:       %[[IS:.*]] = arith.muli %[[II]], %{{.*}} : index
//       CHECK:       %[[I:.*]] = arith.addi %[[C0]], %[[IS]] : index
//       CHECK:       scf.for %[[K:.*]] =
//       CHECK:         memref.load %{{.*}}[%[[I]], %[[J]], %[[K]]]
//       CHECK:     omp.terminator
//       CHECK: func.func private @omp_get_thread_num() -> i32
//       CHECK: func.func private @omp_get_num_threads() -> i32
func.func @two_dims(%a: memref<?x?x64xf32>, %big: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %a, %c0 : memref<?x?x64xf32>
  %m = memref.dim %a, %c1 : memref<?x?x64xf32>
  omp.parallel if(%big) {
    omp.wsloop {
      omp.loop_nest (%i, %j) : index = (%c0, %c0) to (%n, %m) step (%c1, %c1) {
        scf.for %k = %c0 to %c64 step %c1 {
          %x = memref.load %a[%i, %j, %k] : memref<?x?x64xf32>
          memref.store %x, %a[%i, %j, %k] : memref<?x?x64xf32>
        }
        omp.yield
      }
      omp.terminator
    }
    omp.terminator
  }
  return
}

// -----

// A lower bound and a step other than 0 and 1: iv = lb + index x step.
// CHECK-LABEL: func.func @strided
//       CHECK:   scf.for %[[L:.*]] =
//       CHECK:     %[[S:.*]] = arith.muli %[[L]], %[[C3:.*]] : index
//       CHECK:     %[[IV:.*]] = arith.addi %[[C5:.*]], %[[S]] : index
//       CHECK:     memref.store %{{.*}}, %{{.*}}[%[[IV]]]
func.func @strided(%a: memref<100xf32>, %v: f32) {
  %c5 = arith.constant 5 : index
  %c3 = arith.constant 3 : index
  %c100 = arith.constant 100 : index
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c5) to (%c100) step (%c3) {
        memref.store %v, %a[%i] : memref<100xf32>
        omp.yield
      }
      omp.terminator
    }
    omp.terminator
  }
  return
}

// -----

// Left to libomp: a worksharing loop followed by other work in the region
// (its barrier orders them), and a dynamic schedule. Nothing is declared.
// CHECK-LABEL: func.func @kept
//       CHECK:   omp.wsloop {
//       CHECK:   omp.barrier
//       CHECK:   omp.wsloop schedule(dynamic)
//   CHECK-NOT: omp_get_thread_num
func.func @kept(%a: memref<100xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c100 = arith.constant 100 : index
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c100) step (%c1) {
        memref.store %v, %a[%i] : memref<100xf32>
        omp.yield
      }
      omp.terminator
    }
    omp.barrier
    omp.terminator
  }
  omp.parallel {
    omp.wsloop schedule(dynamic) {
      omp.loop_nest (%i) : index = (%c0) to (%c100) step (%c1) {
        memref.store %v, %a[%i] : memref<100xf32>
        omp.yield
      }
      omp.terminator
    }
    omp.terminator
  }
  return
}
