// RUN: bt-opt %s --bt-merge-gpu-modules  --split-input-file | FileCheck %s
// RUN: bt-opt %s --bt-merge-gpu-modules=module-name=kernels  --split-input-file | FileCheck %s --check-prefix=NAMED

// Two outlined modules with a kernel of the same name and the same constant
// global: one module, the second kernel renamed (its launch retargeted),
// one copy of the identical global.
// CHECK-LABEL: func.func @main
//       CHECK:   gpu.launch_func @bt_kernels::@k blocks
//       CHECK:   gpu.launch_func @bt_kernels::@k_0 blocks
//       CHECK:   gpu.launch_func @bt_kernels::@other blocks
//       CHECK: gpu.module @bt_kernels {
//       CHECK:   memref.global "private" constant @cst
//   CHECK-NOT:   memref.global
//       CHECK:   gpu.func @k(
//   CHECK-NOT:   memref.global
//       CHECK:   gpu.func @k_0(
//       CHECK:   gpu.func @other(
//   CHECK-NOT: gpu.module
// NAMED: gpu.launch_func @kernels::@k blocks
// NAMED: gpu.module @kernels
module attributes {gpu.container_module} {
  func.func @main(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @m1::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @m2::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @m2::@other blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
  gpu.module @m1 {
    memref.global "private" constant @cst : memref<4xf32> = dense<1.0>
    gpu.func @k(%a: memref<4xf32>) kernel {
      %g = memref.get_global @cst : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @m2 {
    memref.global "private" constant @cst : memref<4xf32> = dense<1.0>
    gpu.func @k(%a: memref<4xf32>) kernel {
      %g = memref.get_global @cst : memref<4xf32>
      gpu.return
    }
    gpu.func @other() kernel {
      gpu.return
    }
  }
}

// -----

// Different definitions under one name: the later one is renamed with its
// uses.
// CHECK-LABEL: func.func @clash
//       CHECK: gpu.module @bt_kernels {
//       CHECK:   memref.global "private" constant @cst : memref<4xf32> = dense<1.000000e+00>
//       CHECK:   gpu.func @k(
//       CHECK:     memref.get_global @cst :
//       CHECK:   memref.global "private" constant @cst_0 : memref<4xf32> = dense<2.000000e+00>
//       CHECK:   gpu.func @k_0(
//       CHECK:     memref.get_global @cst_0 :
module attributes {gpu.container_module} {
  func.func @clash(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @m1::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @m2::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    return
  }
  gpu.module @m1 {
    memref.global "private" constant @cst : memref<4xf32> = dense<1.0>
    gpu.func @k(%a: memref<4xf32>) kernel {
      %g = memref.get_global @cst : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @m2 {
    memref.global "private" constant @cst : memref<4xf32> = dense<2.0>
    gpu.func @k(%a: memref<4xf32>) kernel {
      %g = memref.get_global @cst : memref<4xf32>
      gpu.return
    }
  }
}
