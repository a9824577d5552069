// RUN: bt-opt %s --bt-cpu-pipeline | FileCheck %s
// RUN: bt-opt %s --bt-cpu-pipeline="parallel=false" | FileCheck %s --check-prefix=SERIAL

// bt.attention's loop over the B·H heads (bt.independent_iterations) is the
// kernel's one OpenMP parallel loop: each thread runs whole heads, their
// scores, softmax and products as sequential loops (no parallel region
// nested inside). Its `if` clause compares the head count with 32768
// iterations over the deepest inner chain (7 x 7 x 8 = 392 for q·kᵀ): on the
// pool from 84 heads (bt-parallel-work-threshold).
// Without `parallel` it stays a loop.

// CHECK-LABEL: llvm.func internal @attention
//       CHECK:   %[[BIG:.*]] = llvm.icmp "sge"
//       CHECK:   omp.parallel if(%[[BIG]]) {
//       CHECK:     llvm.call @omp_get_thread_num()
//       CHECK:     llvm.call @omp_get_num_threads()
//   CHECK-NOT:     omp.parallel
//       CHECK:     llvm.intr.exp
//   CHECK-NOT:     omp.parallel
//       CHECK:     omp.terminator
//   CHECK-NOT:   omp.parallel
//       CHECK:   llvm.return

// SERIAL-LABEL: llvm.func internal @attention
//   SERIAL-NOT:   omp.
//       SERIAL:   llvm.return

func.func @attention(%q: tensor<?x7x2x8xf32>, %k: tensor<?x7x2x8xf32>, %v: tensor<?x7x2x8xf32>, %m: tensor<?x7xi64>) -> tensor<?x7x2x8xf32> {
  %o = bt.attention %q, %k, %v key_mask %m scale 0.35355339059327373 : tensor<?x7x2x8xf32>, tensor<?x7xi64> -> tensor<?x7x2x8xf32>
  return %o : tensor<?x7x2x8xf32>
}
