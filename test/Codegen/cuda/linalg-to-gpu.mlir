// RUN: bt-opt %s --bt-linalg-to-gpu --split-input-file | FileCheck %s
// RUN: bt-opt %s --bt-linalg-to-gpu=block-size=128 --split-input-file | FileCheck %s --check-prefix=BLOCK128

// Elementwise: one thread per element of the parallel space [?, 64]
// (points = d0 · 64), the last dim fastest; no launch for an empty space.
// CHECK-LABEL: func.func @elementwise
//  CHECK-SAME:   %[[X:.*]]: memref<?x64xf32>, %[[Y:.*]]: memref<?x64xf32>
//       CHECK:   %[[D0:.*]] = memref.dim %[[X]], %{{.*}}
//       CHECK:   %[[C1:.*]] = arith.constant 1 : index
//       CHECK:   %[[BS:.*]] = arith.constant 256 : index
//       CHECK:   %[[P0:.*]] = arith.muli %[[C1]], %[[D0]]
//       CHECK:   %[[C64:.*]] = arith.constant 64 : index
//       CHECK:   %[[P:.*]] = arith.muli %[[P0]], %[[C64]]
//       CHECK:   %[[NONEMPTY:.*]] = arith.cmpi sgt, %[[P]], %{{.*}}
//       CHECK:   scf.if %[[NONEMPTY]] {
//       CHECK:     %[[GRID:.*]] = arith.ceildivui %[[P]], %[[BS]]
//       CHECK:     %[[THREADS:.*]] = arith.minui %[[P]], %[[BS]]
//       CHECK:     gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[GRID]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[THREADS]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]])
//       CHECK:       %[[B:.*]] = arith.muli %[[BX]], %[[BS]]
//       CHECK:       %[[ID:.*]] = arith.addi %[[B]], %[[TX]]
//       CHECK:       %[[IN:.*]] = arith.cmpi ult, %[[ID]], %[[P]]
//       CHECK:       scf.if %[[IN]] {
//       CHECK:         %[[J:.*]] = arith.remui %[[ID]], %[[C64]]
//       CHECK:         %[[I:.*]] = arith.divui %[[ID]], %[[C64]]
//       CHECK:         %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]]
//       CHECK:         %[[E:.*]] = math.erf %[[V]]
//       CHECK:         memref.store %[[E]], %[[Y]][%[[I]], %[[J]]]
//       CHECK:       }
//       CHECK:       gpu.terminator
//   CHECK-NOT:   linalg.generic
// BLOCK128-LABEL: func.func @elementwise
//       BLOCK128:   arith.constant 128 : index
func.func @elementwise(%x: memref<?x64xf32>, %y: memref<?x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x64xf32>) outs(%y : memref<?x64xf32>) {
  ^bb0(%a: f32, %b: f32):
    %e = math.erf %a : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A row reduction (the reduced dim innermost, dynamic extent, a
// reassociable add): one block of 256 threads per row, each thread folding
// k = tid, tid + 256, ... into a register from the neutral element, a tree
// over 1024 bytes of dynamic shared memory (256 f32), thread 0 adding the
// init and storing.
// CHECK-LABEL: func.func @row_sum
//  CHECK-SAME:   %[[X:.*]]: memref<?x?xf32>, %[[S:.*]]: memref<?xf32>
//       CHECK:   %[[ROWS:.*]] = memref.dim %[[X]], %{{.*}}
//       CHECK:   %[[K:.*]] = memref.dim %[[X]], %{{.*}}
//       CHECK:   %[[P:.*]] = arith.muli %{{.*}}, %[[ROWS]]
//       CHECK:   %[[BS:.*]] = arith.constant 256 : index
//  CHECK-NEXT:   %[[SMEM:.*]] = arith.constant 1024 : i32
//       CHECK:   scf.if
//       CHECK:     gpu.launch blocks(%[[ROW:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[P]], %{{.*}}, %{{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[BS]], %{{.*}}, %{{.*}}) dynamic_shared_memory_size %[[SMEM]]
//       CHECK:       %[[RAW:.*]] = gpu.dynamic_shared_memory
//       CHECK:       %[[SH:.*]] = memref.view %[[RAW]]{{.*}} to memref<256xf32, #gpu.address_space<workgroup>>
//       CHECK:       %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
//       CHECK:       %[[R:.*]] = scf.for %[[I:.*]] = %[[T]] to %[[K]] step %[[BS]] iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f32) {
//       CHECK:         %[[V:.*]] = memref.load %[[X]][%[[ROW]], %[[I]]]
//       CHECK:         %[[SUM:.*]] = arith.addf %[[ACC]], %[[V]] fastmath<reassoc>
//       CHECK:         scf.yield %[[SUM]]
//       CHECK:       memref.store %[[R]], %[[SH]][%[[T]]]
//       CHECK:       gpu.barrier
// 8 halving steps (128 ... 1), each followed by a barrier.
// CHECK-COUNT-8:     arith.addf %{{.*}}, %{{.*}} fastmath<reassoc>
//       CHECK:       gpu.barrier
//       CHECK:       %[[LEAD:.*]] = arith.cmpi eq, %[[T]], %{{.*}}
//       CHECK:       scf.if %[[LEAD]] {
//       CHECK:         %[[INIT:.*]] = memref.load %[[S]][%[[ROW]]]
//       CHECK:         %[[TOT:.*]] = memref.load %[[SH]][%{{.*}}]
//       CHECK:         %[[OUT:.*]] = arith.addf %[[INIT]], %[[TOT]] fastmath<reassoc>
//       CHECK:         memref.store %[[OUT]], %[[S]][%[[ROW]]]
func.func @row_sum(%x: memref<?x?xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a fastmath<reassoc> : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A max over the innermost dim: the tree combines with maximumf from -inf.
// CHECK-LABEL: func.func @row_max
//       CHECK:   gpu.launch
//       CHECK:     arith.constant 0xFF800000 : f32
//       CHECK:     scf.for
//       CHECK:       arith.maximumf
//       CHECK:     gpu.barrier
//       CHECK:     arith.maximumf
func.func @row_max(%x: memref<?x300xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x300xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %a, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Row reductions a block does not share: an add without reassoc (the CPU
// order is kept), a reduced dim of static extent below 64, and a reduced
// dim that is not the innermost of the input (threads would not read
// consecutive elements): one thread per output point, a sequential loop.
// CHECK-LABEL: func.func @sequential
//   CHECK-NOT:   gpu.barrier
//   CHECK-NOT:   dynamic_shared_memory
//       CHECK:   return
func.func @sequential(%x: memref<?x?xf32>, %s: memref<?xf32>, %y: memref<?x8xf32>, %t: memref<?xf32>, %c: memref<?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<?x8xf32>) outs(%t : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a fastmath<reassoc> : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(j, k) -> (k, j)>, affine_map<(j, k) -> (j)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x?xf32>) outs(%c : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a fastmath<reassoc> : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A total (all dims reductions, 0-d output): a single thread. linalg.index
// becomes the loop iv.
// CHECK-LABEL: func.func @total
//       CHECK:   %[[C1:.*]] = arith.constant 1 : index
//       CHECK:   arith.cmpi sgt, %[[C1]], %{{.*}}
//       CHECK:   gpu.launch
//       CHECK:     memref.load %{{.*}}[] : memref<f64>
//       CHECK:     scf.for %[[I:[a-z0-9_]+]] =
//       CHECK:       arith.index_cast %[[I]] : index to i64
func.func @total(%x: memref<?xf64>, %t: memref<f64>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%x : memref<?xf64>) outs(%t : memref<f64>) {
  ^bb0(%a: f64, %acc: f64):
    %i = linalg.index 0 : index
    %i64 = arith.index_cast %i : index to i64
    %f = arith.sitofp %i64 : i64 to f64
    %m = arith.mulf %a, %f : f64
    %r = arith.addf %acc, %m : f64
    linalg.yield %r : f64
  }
  return
}

// -----

// A gather with a range check: the table is read in the kernel, the
// cf.assert becomes printf + trap.
// CHECK-LABEL: func.func @gather
//       CHECK:   gpu.launch
//       CHECK:     %[[ROW:.*]] = arith.index_cast %{{.*}} : i64 to index
//       CHECK:     %[[BAD:.*]] = arith.xori %{{.*}}, %true
//       CHECK:     scf.if %[[BAD]] {
//       CHECK:       gpu.printf "bt kernel: id out of range [0, V)\0A"
//       CHECK:       llvm.intr.trap
//       CHECK:     }
//       CHECK:     memref.load %{{.*}}[%[[ROW]], %{{.*}}] : memref<512x16xf32>
//   CHECK-NOT:   cf.assert
func.func @gather(%ids: memref<?xi64>, %table: memref<512x16xf32>, %out: memref<?x16xf32>) {
  %c0 = arith.constant 0 : index
  %c512 = arith.constant 512 : index
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%ids : memref<?xi64>) outs(%out : memref<?x16xf32>) {
  ^bb0(%id: i64, %o: f32):
    %row = arith.index_cast %id : i64 to index
    %ge = arith.cmpi sge, %row, %c0 : index
    %lt = arith.cmpi slt, %row, %c512 : index
    %ok = arith.andi %ge, %lt : i1
    cf.assert %ok, "id out of range [0, V)"
    %j = linalg.index 1 : index
    %v = memref.load %table[%row, %j] : memref<512x16xf32>
    linalg.yield %v : f32
  }
  return
}

// -----

// Named ops (fill: a scalar input; matmul: a reduction) and a constant
// global, which is read inside the kernel.
// CHECK-LABEL: func.func @named
//       CHECK:   gpu.launch
//       CHECK:     memref.store %{{.*}}, %{{.*}} : memref<4x8xf32>
//       CHECK:   gpu.launch
//       CHECK:     %[[G:.*]] = memref.get_global @cst : memref<8xf32>
//       CHECK:     memref.load %[[G]]
//       CHECK:   gpu.launch
//       CHECK:     scf.for
//       CHECK:       arith.mulf
//   CHECK-NOT:   linalg.
memref.global "private" constant @cst : memref<8xf32> = dense<1.0>
func.func @named(%a: memref<4x3xf32>, %b: memref<3x8xf32>, %c: memref<4x8xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<4x8xf32>)
  %g = memref.get_global @cst : memref<8xf32>
  linalg.broadcast ins(%g : memref<8xf32>) outs(%c : memref<4x8xf32>) dimensions = [0]
  linalg.matmul ins(%a, %b : memref<4x3xf32>, memref<3x8xf32>) outs(%c : memref<4x8xf32>)
  return
}

// -----

// Ops already inside kernels are left alone.
// CHECK-LABEL: func.func @inside
//       CHECK:   gpu.launch
//       CHECK:     linalg.fill
func.func @inside(%c: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    linalg.fill ins(%z : f32) outs(%c : memref<4xf32>)
    gpu.terminator
  }
  return
}

// -----

// A cf.assert in a kernel emitted before bufferization (the CUDA target's
// embedding gradient) becomes the device's printf + trap.
// CHECK-LABEL: func.func @assert_in_kernel
//       CHECK:   gpu.launch
//       CHECK:     %[[NOT:.*]] = arith.xori %arg0, %{{.*}} : i1
//       CHECK:     scf.if %[[NOT]] {
//       CHECK:       gpu.printf "bt kernel: id out of range\0A"
//       CHECK:       llvm.intr.trap
//   CHECK-NOT:   cf.assert
func.func @assert_in_kernel(%ok: i1) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%a = %c1, %b = %c1, %c = %c1) {
    cf.assert %ok, "id out of range"
    gpu.terminator
  }
  return
}
