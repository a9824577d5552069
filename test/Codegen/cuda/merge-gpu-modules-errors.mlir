// RUN: bt-opt %s --bt-merge-gpu-modules --split-input-file --verify-diagnostics


module attributes {gpu.container_module} {
  // expected-error@+1 {{uses the name 'bt_kernels' of the merged gpu.module}}
  func.func @bt_kernels() {
    return
  }
  gpu.module @m1 {
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @m1 [#nvvm.target<chip = "sm_90">] {
  }
  // expected-error@+1 {{has other targets than the first gpu.module; bt-merge-gpu-modules merges modules of one target}}
  gpu.module @m2 {
  }
}
