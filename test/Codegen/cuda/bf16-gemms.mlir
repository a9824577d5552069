// RUN: bt-opt %s --split-input-file --bt-bf16-gemms | FileCheck %s
// RUN: bt-opt %s --split-input-file --bt-bf16-gemms --bt-fuse-elementwise | FileCheck %s --check-prefix=FUSE

// A parameter used only as the weight of f32 GEMMs (in every function)
// becomes a bf16 argument; each GEMM's activation is rounded to bf16 by a
// generic (round to nearest even in integer ops, NaN → quiet NaN), and the
// GEMM keeps its f32 init and result.
// CHECK-LABEL: func.func @linear
//  CHECK-SAME:   %[[W:.*]]: tensor<8x4xbf16> {bt.param = "w"}
//  CHECK-SAME:   %[[X:.*]]: tensor<?x4xf32>
//       CHECK:   %[[XB:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<?x4xf32>) outs(%{{.*}} : tensor<?x4xbf16>)
//       CHECK:     arith.bitcast %{{.*}} : f32 to i32
//       CHECK:     arith.constant 32767 : i32
//       CHECK:     arith.cmpf uno
//       CHECK:     arith.trunci %{{.*}} : i32 to i16
//       CHECK:     arith.bitcast %{{.*}} : i16 to bf16
//       CHECK:   linalg.matmul_transpose_b ins(%[[XB]], %[[W]] : tensor<?x4xbf16>, tensor<8x4xbf16>) outs(%{{.*}} : tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-LABEL: func.func @other
//  CHECK-SAME:   tensor<8x4xbf16> {bt.param = "w"}
//       CHECK:   linalg.matmul_transpose_b ins(%{{.*}}, %{{.*}} : tensor<2x4xbf16>, tensor<8x4xbf16>)
func.func @linear(%w: tensor<8x4xf32> {bt.param = "w"}, %x: tensor<?x4xf32>, %init: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %y = linalg.matmul_transpose_b ins(%x, %w : tensor<?x4xf32>, tensor<8x4xf32>) outs(%init : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
func.func @other(%w: tensor<8x4xf32> {bt.param = "w"}, %x: tensor<2x4xf32>, %init: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %y = linalg.matmul_transpose_b ins(%x, %w : tensor<2x4xf32>, tensor<8x4xf32>) outs(%init : tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// A parameter with any other use, in any function, stays f32 everywhere
// (here: an elementwise use in @update, as a training step's optimizer
// would make); so do vectors (biases) and the GEMMs on it.
// CHECK-LABEL: func.func @linear
//  CHECK-SAME:   tensor<8x4xf32> {bt.param = "w"}
//  CHECK-SAME:   tensor<8xf32> {bt.param = "b"}
//   CHECK-NOT:   bf16
// CHECK-LABEL: func.func @update
//   CHECK-NOT:   bf16
func.func @linear(%w: tensor<8x4xf32> {bt.param = "w"}, %b: tensor<8xf32> {bt.param = "b"}, %x: tensor<?x4xf32>, %init: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %y = linalg.matmul_transpose_b ins(%x, %w : tensor<?x4xf32>, tensor<8x4xf32>) outs(%init : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
func.func @update(%w: tensor<8x4xf32> {bt.param = "w"}) -> tensor<8x4xf32> {
  %z = arith.addf %w, %w : tensor<8x4xf32>
  return %z : tensor<8x4xf32>
}

// -----

// The weight as the first input (x · W with W as A) is no weight use.
// CHECK-LABEL: func.func @first
//  CHECK-SAME:   tensor<4x4xf32> {bt.param = "w"}
//   CHECK-NOT:   bf16
func.func @first(%w: tensor<4x4xf32> {bt.param = "w"}, %x: tensor<4x4xf32>, %init: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %y = linalg.matmul ins(%w, %x : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// The activation comes from a dedicated kernel (a gpu.launch that only
// stores into the buffer behind a bufferization.to_tensor, as the LayerNorm
// and attention kernels are emitted): the rounding moves into the kernel's
// stores and the buffer becomes bf16, so no rounding kernel remains.
// CHECK-LABEL: func.func @kernel_output
//       CHECK:   %[[BUF:.*]] = memref.alloc(%{{.*}}) : memref<?x1x4xbf16>
//       CHECK:   gpu.launch
//       CHECK:     arith.cmpf uno
//       CHECK:     %[[R:.*]] = arith.bitcast %{{.*}} : i16 to bf16
//       CHECK:     memref.store %[[R]], %[[BUF]]
//       CHECK:   %[[T:.*]] = bufferization.to_tensor %[[BUF]] restrict writable : memref<?x1x4xbf16>
//       CHECK:   %[[C:.*]] = tensor.collapse_shape %[[T]] {{.*}} into tensor<?x4xbf16>
//   CHECK-NOT:   linalg.generic
//       CHECK:   linalg.matmul_transpose_b ins(%[[C]], %{{.*}} : tensor<?x4xbf16>, tensor<8x4xbf16>)
func.func @kernel_output(%w: tensor<8x4xf32> {bt.param = "w"}, %n: index, %init: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %c1 = arith.constant 1 : index
  %buf = memref.alloc(%n) : memref<?x1x4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %c0 = arith.constant 0 : index
    %v = arith.constant 1.5 : f32
    memref.store %v, %buf[%bx, %c0, %c0] : memref<?x1x4xf32>
    gpu.terminator
  }
  %t = bufferization.to_tensor %buf restrict writable : memref<?x1x4xf32>
  %x = tensor.collapse_shape %t [[0, 1], [2]] : tensor<?x1x4xf32> into tensor<?x4xf32>
  %y = linalg.matmul_transpose_b ins(%x, %w : tensor<?x4xf32>, tensor<8x4xf32>) outs(%init : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// A kernel output with another user (here returned too) keeps its f32
// buffer; the rounding stays a generic.
// CHECK-LABEL: func.func @kernel_output_used_twice
//       CHECK:   memref.alloc(%{{.*}}) : memref<?x4xf32>
//       CHECK:   linalg.generic
//       CHECK:   linalg.matmul_transpose_b
func.func @kernel_output_used_twice(%w: tensor<8x4xf32> {bt.param = "w"}, %n: index, %init: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x4xf32>) {
  %c1 = arith.constant 1 : index
  %buf = memref.alloc(%n) : memref<?x4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %c0 = arith.constant 0 : index
    %v = arith.constant 1.5 : f32
    memref.store %v, %buf[%bx, %c0] : memref<?x4xf32>
    gpu.terminator
  }
  %t = bufferization.to_tensor %buf restrict writable : memref<?x4xf32>
  %y = linalg.matmul_transpose_b ins(%t, %w : tensor<?x4xf32>, tensor<8x4xf32>) outs(%init : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y, %t : tensor<?x8xf32>, tensor<?x4xf32>
}

// -----

// An activation collapsed to [M, K] (the token decoder's [B, 1, T]) is
// rounded in its producer's shape, before the collapse, so that
// bt-fuse-elementwise merges the rounding into the elementwise producer
// (here a bias add): one kernel writes the bf16 activation.
// CHECK-LABEL: func.func @collapsed_elementwise_output
//       CHECK:   %[[Y:.*]] = linalg.generic
//       CHECK:   } -> tensor<?x1x4xf32>
//       CHECK:   %[[R:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<?x1x4xf32>) outs(%{{.*}} : tensor<?x1x4xbf16>)
//       CHECK:   %[[C:.*]] = tensor.collapse_shape %[[R]] {{.*}} into tensor<?x4xbf16>
//       CHECK:   linalg.matmul_transpose_b ins(%[[C]], %{{.*}} : tensor<?x4xbf16>, tensor<8x4xbf16>)
// FUSE-LABEL: func.func @collapsed_elementwise_output
//       FUSE:   %[[R:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<?x1x4xbf16>)
//       FUSE:     arith.addf
//       FUSE:     arith.bitcast %{{.*}} : i16 to bf16
//  FUSE-NEXT:     linalg.yield
//  FUSE-NEXT:   } -> tensor<?x1x4xbf16>
//   FUSE-NOT:   linalg.generic
//       FUSE:   %[[C:.*]] = tensor.collapse_shape %[[R]]
//       FUSE:   linalg.matmul_transpose_b ins(%[[C]], %{{.*}} : tensor<?x4xbf16>, tensor<8x4xbf16>)
func.func @collapsed_elementwise_output(%w: tensor<8x4xf32> {bt.param = "w"}, %x: tensor<?x1x4xf32>, %bias: tensor<4xf32>, %init: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x1x4xf32>
  %e = tensor.empty(%n) : tensor<?x1x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(b, s, k) -> (b, s, k)>, affine_map<(b, s, k) -> (k)>, affine_map<(b, s, k) -> (b, s, k)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %bias : tensor<?x1x4xf32>, tensor<4xf32>) outs(%e : tensor<?x1x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x1x4xf32>
  %c = tensor.collapse_shape %y [[0, 1], [2]] : tensor<?x1x4xf32> into tensor<?x4xf32>
  %r = linalg.matmul_transpose_b ins(%c, %w : tensor<?x4xf32>, tensor<8x4xf32>) outs(%init : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
