// RUN: bt-opt %s --bt-cpu-pipeline --mlir-print-ir-after=bt-lower-to-linalg -o /dev/null 2>&1 | FileCheck %s --check-prefix=ON
// RUN: bt-opt %s --bt-cpu-pipeline="fuse-local-attention=false" --mlir-print-ir-after=bt-lower-to-linalg -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFF

// bt-cpu-pipeline option fuse-local-attention (default on): the token
// decoder's split_qkv → rotary → local_attention chain becomes one
// bt.fused_local_attention, lowered to one kernel (stack buffers, no rotated
// q/k tensors); off, the chain is lowered op by op.

// ON-LABEL: IR Dump After BTLowerToLinalg
//      ON: memref.alloca() {{.*}} : memref<5x8xf32>
//      ON: scf.for
//      ON:   bufferization.to_tensor
//      ON:   linalg.copy
//      ON:   linalg.matmul_transpose_b
// ON-NOT: scf.for

// OFF-LABEL: IR Dump After BTLowerToLinalg
//   OFF-NOT: memref.alloca
//   OFF-NOT: bufferization.to_tensor
//       OFF: scf.for
//       OFF:   linalg.matmul_transpose_b

func.func @attention(%qkv: tensor<2x3x5x48xf32>, %p: tensor<5xi64>) -> tensor<2x3x5x2x8xf32> {
  %q, %k, %v = bt.split_qkv %qkv heads 2 head_dim 8 : tensor<2x3x5x48xf32> -> tensor<2x3x5x2x8xf32>, tensor<2x3x5x2x8xf32>, tensor<2x3x5x2x8xf32>
  %qr = bt.rotary %q, %p rotary_dims 4 base 10000.0 : tensor<2x3x5x2x8xf32>, tensor<5xi64> -> tensor<2x3x5x2x8xf32>
  %kr = bt.rotary %k, %p rotary_dims 4 base 10000.0 : tensor<2x3x5x2x8xf32>, tensor<5xi64> -> tensor<2x3x5x2x8xf32>
  %o = bt.local_attention %qr, %kr, %v scale 0.35355339059327373 : tensor<2x3x5x2x8xf32> -> tensor<2x3x5x2x8xf32>
  return %o : tensor<2x3x5x2x8xf32>
}
