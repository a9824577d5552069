// RUN: bt-opt %s --pass-pipeline='builtin.module(gpu.module(bt-nvvm-to-host))' --split-input-file | FileCheck %s

// A kernel as convert-gpu-to-nvvm leaves it: special registers, the dynamic
// shared memory symbol, a barrier, a shuffle, libdevice, and global and
// shared accesses become host LLVM IR over the emulator ABI
// (runtime/device/cuda_emu/bt_emu_abi.h).

// CHECK-LABEL: gpu.module @kernels
// CHECK-NOT: __dynamic_shmem__
// CHECK-DAG: llvm.func @expf(f32) -> f32
// CHECK-DAG: llvm.func @bt_emu_thread() -> !llvm.ptr
// CHECK-DAG: llvm.func @bt_emu_barrier(!llvm.ptr, i32)
// CHECK-DAG: llvm.func @bt_emu_shfl(!llvm.ptr, i32, i32, i32, i32, i32, i32, !llvm.ptr) -> i32
// CHECK-DAG: llvm.func @bt_emu_load(!llvm.ptr, !llvm.ptr, i32, i32) -> !llvm.ptr
// CHECK-DAG: llvm.func @bt_emu_store(!llvm.ptr, !llvm.ptr, i32, i32) -> !llvm.ptr

// The body: address spaces collapse to 0; no NVVM op is left.
// CHECK: llvm.func internal @k.bt_emu_body(%[[OUT:.*]]: !llvm.ptr, %[[I:.*]]: i64, %[[X:.*]]: f32)
// CHECK-NOT: nvvm.
// CHECK: %[[T:.*]] = llvm.call @bt_emu_thread()
//   tid.x: sreg[0]; ntid.x: sreg[3]; ctaid.y: sreg[7]; laneid: sreg[12].
// CHECK: %[[TIDP:.*]] = llvm.getelementptr %[[T]][0] : (!llvm.ptr) -> !llvm.ptr, i32
// CHECK: %[[TID:.*]] = llvm.load %[[TIDP]] : !llvm.ptr -> i32
// CHECK: llvm.getelementptr %[[T]][3] : (!llvm.ptr) -> !llvm.ptr, i32
// CHECK: llvm.getelementptr %[[T]][7] : (!llvm.ptr) -> !llvm.ptr, i32
// CHECK: llvm.getelementptr %[[T]][12] : (!llvm.ptr) -> !llvm.ptr, i32
//   The dynamic shared memory: the block's buffer at byte 64 of the thread.
// CHECK: %[[SMEMP:.*]] = llvm.getelementptr %[[T]][64] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK: %[[SMEM:.*]] = llvm.load %[[SMEMP]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[P:.*]] = llvm.getelementptr %[[SMEM]][%[[TID]]] : (!llvm.ptr, i32) -> !llvm.ptr, f32
//   A store of 4 bytes at site 0, through the address bt_emu_store returns.
// CHECK: %[[FOUR:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK: %[[SITE0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[A:.*]] = llvm.call @bt_emu_store(%[[T]], %[[P]], %[[FOUR]], %[[SITE0]])
// CHECK: llvm.store %[[X]], %[[A]] : f32, !llvm.ptr
// CHECK: %[[SITE1:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: llvm.call @bt_emu_barrier(%[[T]], %[[SITE1]])
// CHECK: %[[L:.*]] = llvm.call @bt_emu_load(%[[T]], %[[P]], {{.*}})
// CHECK: %[[V:.*]] = llvm.load %[[L]] : !llvm.ptr -> f32
//   The shuffle: f32 as its bits, kind 0 (bfly), site 3.
// CHECK: %[[VB:.*]] = llvm.bitcast %[[V]] : f32 to i32
// CHECK: %[[BFLY:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[SITE3:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK: %[[R:.*]] = llvm.call @bt_emu_shfl(%[[T]], %[[BFLY]], %{{.*}}, %[[VB]], %{{.*}}, %{{.*}}, %[[SITE3]], %{{.*}})
// CHECK: %[[RF:.*]] = llvm.bitcast %[[R]] : i32 to f32
// CHECK: %[[E:.*]] = llvm.call @expf(%[[RF]]) : (f32) -> f32
// CHECK: %[[G:.*]] = llvm.getelementptr %[[OUT]][%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: %[[GA:.*]] = llvm.call @bt_emu_store(%[[T]], %[[G]], {{.*}})
// CHECK: llvm.store %[[E]], %[[GA]] : f32, !llvm.ptr
// CHECK: llvm.return

// The entry: void k(void **params), parameters in the NVVM kernel order.
// CHECK: llvm.func @k(%[[PARAMS:.*]]: !llvm.ptr) {
// CHECK: llvm.getelementptr %[[PARAMS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// CHECK: %[[P0:.*]] = llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.getelementptr %[[PARAMS]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[P1:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i64
// CHECK: llvm.getelementptr %[[PARAMS]][2] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[P2:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: llvm.call @k.bt_emu_body(%[[P0]], %[[P1]], %[[P2]])

// The kernel synchronizes (flags 1); five sites, named by location and op.
// CHECK: llvm.mlir.global external constant @k__bt_emu_flags(1 : i32)
// Three parameters of 8, 8 and 4 bytes (ptr, i64, f32).
// CHECK: llvm.mlir.global external constant @k__bt_emu_param_bytes(dense<[3, 8, 8, 4]> : tensor<4xi32>)
// CHECK: llvm.mlir.global external constant @bt_emu_site_table("k: store loc({{.*}}:[[@LINE+13]]:5){{.*}}\00k: barrier loc({{.*}}:[[@LINE+14]]:5) `nvvm.barrier0`\00k: load {{.*}}\00k: shuffle {{.*}}nvvm.shfl.sync bfly{{.*}}\00k: store {{.*}}!llvm.ptr<1>`\00\00")
// CHECK: llvm.mlir.global external constant @bt_emu_num_sites(5 : i32)
// CHECK: llvm.mlir.global external constant @bt_emu_abi_version(3 : i32)
gpu.module @kernels {
  llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
  llvm.func @__nv_expf(f32) -> f32
  llvm.func @k(%arg0: !llvm.ptr<1>, %arg1: i64, %arg2: f32) attributes {gpu.kernel, nvvm.kernel} {
    %0 = nvvm.read.ptx.sreg.tid.x : i32
    %1 = nvvm.read.ptx.sreg.ntid.x : i32
    %2 = nvvm.read.ptx.sreg.ctaid.y : i32
    %3 = nvvm.read.ptx.sreg.laneid : i32
    %s = llvm.mlir.addressof @__dynamic_shmem__0 : !llvm.ptr<3>
    %p = llvm.getelementptr %s[%0] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, f32
    llvm.store %arg2, %p : f32, !llvm.ptr<3>
    nvvm.barrier0
    %m = llvm.mlir.constant(-1 : i32) : i32
    %o = llvm.mlir.constant(1 : i32) : i32
    %c = llvm.mlir.constant(31 : i32) : i32
    %v = llvm.load %p : !llvm.ptr<3> -> f32
    %x = nvvm.shfl.sync bfly %m, %v, %o, %c : f32 -> f32
    %e = llvm.call @__nv_expf(%x) : (f32) -> f32
    %g = llvm.getelementptr %arg0[%arg1] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
    llvm.store %e, %g : f32, !llvm.ptr<1>
    llvm.return
  }
}

// -----

// A kernel without barrier or shuffle (flags 0); accesses of its own alloca
// are not checked.
// CHECK-LABEL: gpu.module @plain
// CHECK: llvm.func internal @e.bt_emu_body(%{{.*}}: !llvm.ptr, %{{.*}}: i32)
// CHECK: %[[AL:.*]] = llvm.alloca
// CHECK-NEXT: llvm.store %{{.*}}, %[[AL]] : i32, !llvm.ptr
// CHECK: llvm.call @bt_emu_load
// CHECK: llvm.mlir.global external constant @e__bt_emu_flags(0 : i32)
// CHECK: llvm.mlir.global external constant @e__bt_emu_param_bytes(dense<[2, 8, 4]> : tensor<3xi32>)
gpu.module @plain {
  llvm.func @e(%arg0: !llvm.ptr<1>, %arg1: i32) attributes {gpu.kernel, nvvm.kernel} {
    %one = llvm.mlir.constant(1 : i64) : i64
    %a = llvm.alloca %one x i32 : (i64) -> !llvm.ptr
    llvm.store %arg1, %a : i32, !llvm.ptr
    %v = llvm.load %arg0 : !llvm.ptr<1> -> i32
    llvm.return
  }
}

// -----

// The bf16 tensor-core mma (llvm.call_intrinsic: MLIR 19's nvvm.mma.sync
// cannot type it) → bt_emu_mma over an entry alloca of the 14 fragment words
// a[4], b[2], c[4] (stored in operand order) and d[4] (loaded back into the
// result struct); kind 0, site 0; the kernel runs as fibers (flags 1).
// CHECK-LABEL: gpu.module @mma
// CHECK-DAG: llvm.func @bt_emu_mma(!llvm.ptr, i32, !llvm.ptr, i32)
// CHECK: llvm.func internal @m.bt_emu_body(%[[A0:.*]]: i32, %[[A1:.*]]: i32, %[[A2:.*]]: i32, %[[A3:.*]]: i32, %[[B0:.*]]: i32, %[[B1:.*]]: i32, %[[C0:.*]]: f32, %[[C1:.*]]: f32, %[[C2:.*]]: f32, %[[C3:.*]]: f32, %[[OUT:.*]]: !llvm.ptr)
// CHECK: %[[T:.*]] = llvm.call @bt_emu_thread()
// CHECK: %[[N:.*]] = llvm.mlir.constant(14 : i64) : i64
// CHECK: %[[F:.*]] = llvm.alloca %[[N]] x i32 {alignment = 4 : i64} : (i64) -> !llvm.ptr
// CHECK-NOT: llvm.call_intrinsic
// CHECK: %[[W0:.*]] = llvm.getelementptr %[[F]][0] : (!llvm.ptr) -> !llvm.ptr, i32
// CHECK: llvm.store %[[A0]], %[[W0]] : i32, !llvm.ptr
// CHECK: %[[W5:.*]] = llvm.getelementptr %[[F]][5] : (!llvm.ptr) -> !llvm.ptr, i32
// CHECK: llvm.store %[[B1]], %[[W5]] : i32, !llvm.ptr
// CHECK: %[[W9:.*]] = llvm.getelementptr %[[F]][9] : (!llvm.ptr) -> !llvm.ptr, i32
// CHECK: llvm.store %[[C3]], %[[W9]] : f32, !llvm.ptr
// CHECK: %[[KIND:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[SITE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: llvm.call @bt_emu_mma(%[[T]], %[[KIND]], %[[F]], %[[SITE]])
// CHECK: %[[W10:.*]] = llvm.getelementptr %[[F]][10] : (!llvm.ptr) -> !llvm.ptr, i32
// CHECK: %[[D0:.*]] = llvm.load %[[W10]] : !llvm.ptr -> f32
// CHECK: %[[S0:.*]] = llvm.insertvalue %[[D0]], %{{.*}}[0] : !llvm.struct<(f32, f32, f32, f32)>
// CHECK: %[[W13:.*]] = llvm.getelementptr %[[F]][13] : (!llvm.ptr) -> !llvm.ptr, i32
// CHECK: %[[D3:.*]] = llvm.load %[[W13]] : !llvm.ptr -> f32
// CHECK: %[[S3:.*]] = llvm.insertvalue %[[D3]], %{{.*}}[3] : !llvm.struct<(f32, f32, f32, f32)>
// CHECK: %[[X:.*]] = llvm.extractvalue %[[S3]][2] : !llvm.struct<(f32, f32, f32, f32)>
// CHECK: llvm.call @bt_emu_store
// CHECK: llvm.store %[[X]], %{{.*}} : f32, !llvm.ptr
// CHECK: llvm.mlir.global external constant @m__bt_emu_flags(1 : i32)
// CHECK: llvm.mlir.global external constant @bt_emu_site_table("m: mma loc({{.*}}:{{[0-9]+}}:10) `%{{.*}} = llvm.call_intrinsic \22llvm.nvvm.mma.m16n8k16.row.col.bf16\22{{.*}}\00m: store {{.*}}\00\00")
gpu.module @mma {
  llvm.func @m(%a0: i32, %a1: i32, %a2: i32, %a3: i32, %b0: i32, %b1: i32,
               %c0: f32, %c1: f32, %c2: f32, %c3: f32, %out: !llvm.ptr<1>)
      attributes {gpu.kernel, nvvm.kernel} {
    %d = llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"(%a0, %a1, %a2, %a3, %b0, %b1, %c0, %c1, %c2, %c3) : (i32, i32, i32, i32, i32, i32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
    %x = llvm.extractvalue %d[2] : !llvm.struct<(f32, f32, f32, f32)>
    llvm.store %x, %out : f32, !llvm.ptr<1>
    llvm.return
  }
}
