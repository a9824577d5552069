// RUN: bt-opt %s --pass-pipeline='builtin.module(gpu.module(bt-nvvm-to-host))' --split-input-file --verify-diagnostics

gpu.module @kernels {
  llvm.func @k() attributes {gpu.kernel, nvvm.kernel} {
    // expected-error@+1 {{'nvvm.read.ptx.sreg.clock' op has no host lowering in bt-nvvm-to-host}}
    %0 = nvvm.read.ptx.sreg.clock : i32
    llvm.return
  }
}

// -----

gpu.module @kernels {
  llvm.func @__nv_tgammaf(f32) -> f32
  llvm.func @k(%arg0: f32) attributes {gpu.kernel, nvvm.kernel} {
    // expected-error@+1 {{calls libdevice's '__nv_tgammaf', which has no host binding in bt-nvvm-to-host}}
    %0 = llvm.call @__nv_tgammaf(%arg0) : (f32) -> f32
    llvm.return
  }
}

// -----

gpu.module @kernels {
  llvm.func @helper(i32) -> i32
  llvm.func @k(%arg0: i32) attributes {gpu.kernel, nvvm.kernel} {
    // expected-error@+1 {{calls the external function 'helper', which has no host binding in bt-nvvm-to-host}}
    %0 = llvm.call @helper(%arg0) : (i32) -> i32
    llvm.return
  }
}

// -----

gpu.module @kernels {
  llvm.func @k(%arg0: !llvm.ptr, %arg1: i32) attributes {gpu.kernel, nvvm.kernel} {
    // expected-error@+1 {{is an indirect call, which the CUDA emulator does not support}}
    %0 = llvm.call %arg0(%arg1) : !llvm.ptr, (i32) -> i32
    llvm.return
  }
}

// -----

gpu.module @kernels {
  llvm.func @k(%arg0: !llvm.ptr<1>, %arg1: i32) attributes {gpu.kernel, nvvm.kernel} {
    // expected-error@+1 {{'llvm.atomicrmw' op is not supported by the CUDA emulator (bt-nvvm-to-host)}}
    %0 = llvm.atomicrmw add %arg0, %arg1 monotonic : !llvm.ptr<1>, i32
    llvm.return
  }
}

// -----

gpu.module @kernels {
  // expected-error@+1 {{is static shared memory, which the CUDA emulator does not support}}
  llvm.mlir.global internal @tile() {addr_space = 3 : i32} : !llvm.array<16 x f32>
  llvm.func @k() attributes {gpu.kernel, nvvm.kernel} {
    llvm.return
  }
}

// -----

gpu.module @kernels {
  llvm.func @k(%arg0: !llvm.ptr<1>) attributes {gpu.kernel, nvvm.kernel} {
    // expected-error@+1 {{loads a '!llvm.struct<(i32, f32)>', which the CUDA emulator cannot check}}
    %0 = llvm.load %arg0 : !llvm.ptr<1> -> !llvm.struct<(i32, f32)>
    llvm.return
  }
}

// -----

gpu.module @kernels {
  // expected-error@+1 {{'llvm.func' op parameter 1 has type 'vector<4xf32>', which the emulator cannot copy into a captured launch (expected a pointer, integer or float)}}
  llvm.func @k(%arg0: !llvm.ptr<1>, %arg1: vector<4xf32>) attributes {gpu.kernel, nvvm.kernel} {
    llvm.return
  }
}

// -----

gpu.module @kernels {
  llvm.func @k(%arg0: f32) attributes {gpu.kernel, nvvm.kernel} {
    // expected-error@+1 {{'llvm.call_intrinsic' op calls the intrinsic 'llvm.nvvm.fabs.ftz.f', which the CUDA emulator does not run (it runs llvm.nvvm.mma.m16n8k16.row.col.bf16)}}
    %0 = llvm.call_intrinsic "llvm.nvvm.fabs.ftz.f"(%arg0) : (f32) -> f32
    llvm.return
  }
}

// -----

gpu.module @kernels {
  llvm.func @k(%a: i32, %c: f32) attributes {gpu.kernel, nvvm.kernel} {
    // expected-error@+1 {{calls llvm.nvvm.mma.m16n8k16.row.col.bf16 with operands or a result other than (4 x i32, 2 x i32, 4 x f32) -> !llvm.struct<(f32, f32, f32, f32)>}}
    %0 = llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"(%a, %a, %a, %a, %a, %a, %a, %a, %a, %a) : (i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> !llvm.struct<(i32, i32, i32, i32)>
    llvm.return
  }
}
