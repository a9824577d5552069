// REQUIRES: libdevice
// RUN: bt-opt %s --bt-cuda-pipeline="cuda-path=%cuda_path" | FileCheck %s
// gpu-module-to-binary reports a missing toolkit (and leaves the gpu.module;
// bt-run's runCUDAPipeline / takePTX turn that into a failure,
// test/bt-run/cuda-errors.test).
// RUN: bt-opt %s --bt-cuda-pipeline="cuda-path=%t.no-such-toolkit" 2>&1 | FileCheck %s --check-prefix=NOCUDA

// With binary=true (the default) the kernels are one gpu.binary holding PTX
// for sm_90 (PTX ISA 8.0); libdevice's erff is linked into the kernel (no
// external __nv_ call is left for ptxas to reject).
// CHECK: gpu.binary @bt_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">, properties = {O = 3 : i32}, assembly = "
// CHECK-SAME: .version 8.0
// CHECK-SAME: .target sm_90
// CHECK-SAME: .visible .entry gelu_kernel(
// CHECK-NOT: __nv_erff
// CHECK: llvm.func @bt_entry_gelu

// NOCUDA: error: CUDA path: {{.*}}no-such-toolkit does not exist or is not a directory
func.func @gelu(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %g = bt.gelu %x : tensor<?x64xf32>
  return %g : tensor<?x64xf32>
}
