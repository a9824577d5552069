/*===- bt_emu_abi.h - the ABI between host-lowered kernels and the emulator ===//
 *
 * The CUDA emulator (docs/cuda-emulator.md) runs the kernels of a CUDA-target
 * artifact on the CPU: `bt-nvvm-to-host` (lib/Codegen/CUDA/NVVMToHost.cpp)
 * rewrites the NVVM gpu.module exactly as it goes to PTX into host LLVM IR
 * that calls the functions below, and the emulator (runtime/device/cuda_emu/)
 * defines them. This header is that contract; the pass emits the same names,
 * signatures and struct layout (kept in step by the lit tests of the pass and
 * the emulator's tests).
 *
 * The kernel library (the artifact's `cuda_emu` section, a shared object)
 * exports, for every kernel K of the PTX module:
 *   void K(void **params);      the entry: params as cuLaunchKernel's
 *                               kernelParams (pointers to the values, in the
 *                               NVVM kernel's parameter order);
 *   const uint32_t K__bt_emu_flags;  BT_EMU_KERNEL_SYNC when K may reach a
 *                               barrier, a shuffle or an mma (it then runs one fiber
 *                               per thread; otherwise threads run one after
 *                               the other as plain calls);
 *   const int32_t K__bt_emu_param_bytes[1 + n];  n, then the size in bytes of
 *                               each of K's n parameters (what a stream
 *                               capture copies out of kernelParams; since
 *                               ABI version 2);
 * and once:
 *   const uint32_t bt_emu_abi_version;          BT_EMU_ABI_VERSION
 *   const uint32_t bt_emu_num_sites;
 *   const char bt_emu_site_table[];   site names, NUL-separated, in site-id
 *                                     order: "kernel: kind loc `op`"
 * The functions below stay undefined in it and resolve against the process
 * (every binary that links the runtime exports them).
 *
 *===----------------------------------------------------------------------===*/

#ifndef BT_EMU_ABI_H
#define BT_EMU_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BT_EMU_ABI_VERSION 3u

/* K__bt_emu_flags */
#define BT_EMU_KERNEL_SYNC 1u

/* The state of one emulated GPU thread, read by the kernel code: the NVVM
 * special registers are i32 loads of `sreg[BT_EMU_SREG_*]` (byte offset
 * 4 * index), the dynamic shared memory symbol is `smem` (byte offset 64).
 * The emulator owns the rest of the object (it is larger than this prefix). */
enum {
  BT_EMU_SREG_TID_X = 0,
  BT_EMU_SREG_TID_Y = 1,
  BT_EMU_SREG_TID_Z = 2,
  BT_EMU_SREG_NTID_X = 3,
  BT_EMU_SREG_NTID_Y = 4,
  BT_EMU_SREG_NTID_Z = 5,
  BT_EMU_SREG_CTAID_X = 6,
  BT_EMU_SREG_CTAID_Y = 7,
  BT_EMU_SREG_CTAID_Z = 8,
  BT_EMU_SREG_NCTAID_X = 9,
  BT_EMU_SREG_NCTAID_Y = 10,
  BT_EMU_SREG_NCTAID_Z = 11,
  BT_EMU_SREG_LANEID = 12,
  BT_EMU_SREG_WARPSIZE = 13,
  BT_EMU_NUM_SREGS = 16
};

typedef struct BtEmuThread {
  int32_t sreg[BT_EMU_NUM_SREGS]; /* bytes 0..63 */
  char *smem;                     /* byte 64: the block's dynamic shared memory */
} BtEmuThread;

/* Shuffle kinds (nvvm.shfl.sync: bfly, idx, up, down). */
enum {
  BT_EMU_SHFL_BFLY = 0,
  BT_EMU_SHFL_IDX = 1,
  BT_EMU_SHFL_UP = 2,
  BT_EMU_SHFL_DOWN = 3
};

/* Warp matrix multiply-accumulate operations (bt_emu_mma `kind`). Since ABI
 * version 3.
 *   BT_EMU_MMA_M16N8K16_BF16_F32: PTX mma.sync.aligned.m16n8k16.row.col.f32.
 *     bf16.bf16.f32 (LLVM llvm.nvvm.mma.m16n8k16.row.col.bf16): D[16x8] =
 *     A[16x16] * B[16x8] + C[16x8], A and B bf16, C and D f32. Each lane's
 *     fragment as the PTX ISA lays it out ("Matrix Fragments for mma.m16n8k16
 *     with floating point type"), g = lane / 4, q = lane % 4, the lower 16
 *     bits of a word the element of lower index:
 *       a[0] = A[g][2q..2q+1]      a[1] = A[g+8][2q..2q+1]
 *       a[2] = A[g][2q+8..2q+9]    a[3] = A[g+8][2q+8..2q+9]
 *       b[0] = B[2q..2q+1][g]      b[1] = B[2q+8..2q+9][g]
 *       c[0..1] = C[g][2q..2q+1]   c[2..3] = C[g+8][2q..2q+1]  (f32 bits),
 *     D as C. */
enum { BT_EMU_MMA_M16N8K16_BF16_F32 = 0 };

/* The calling thread's state (valid for the whole kernel invocation). */
BtEmuThread *bt_emu_thread(void);

/* Every load and store of global or shared memory (not of the thread's own
 * allocas): checks that [addr, addr + bytes) lies inside a live device
 * allocation or the block's dynamic shared memory, is naturally aligned
 * (addr % bytes == 0), and for loads that it was written (initcheck); feeds
 * the race checks; returns the address the kernel then accesses (device
 * memory is not accessible at the addresses the host sees). `site` indexes
 * the site table. A failed check is reported and ends the launch (the
 * call does not return; the launch fails). */
void *bt_emu_load(BtEmuThread *t, void *addr, uint32_t bytes, uint32_t site);
void *bt_emu_store(BtEmuThread *t, void *addr, uint32_t bytes, uint32_t site);

/* nvvm.barrier0 (__syncthreads): returns when every live thread of the block
 * reached the barrier; all at the same site, or it is reported. */
void bt_emu_barrier(BtEmuThread *t, uint32_t site);

/* nvvm.shfl.sync `kind` with PTX semantics: `mask` the participating lanes
 * (each must reach this shuffle), `value` the 32-bit value (f32 as bits),
 * `b` the lane / offset operand, `c` the packed clamp and segment mask
 * (shfl.sync's c operand). Returns the value read and stores whether the
 * source lane was in range into *valid. */
uint32_t bt_emu_shfl(BtEmuThread *t, uint32_t kind, uint32_t mask,
                     uint32_t value, uint32_t b, uint32_t c, uint32_t site,
                     uint8_t *valid);

/* A warp-wide mma.sync of `kind` (BT_EMU_MMA_*): `frags` the calling lane's
 * 14 words a[4], b[2], c[4], d[4] (layout above); returns when all 32 lanes
 * of the warp reached this mma (the same site), with d[] written. A warp
 * whose lanes are not all at it is reported and ends the launch. */
void bt_emu_mma(BtEmuThread *t, uint32_t kind, uint32_t *frags, uint32_t site);

/* CUDA's device printf (vprintf: `args` packed with natural alignment,
 * float arguments promoted to double). Prints to stderr with the block and
 * thread; returns the number of arguments. */
int32_t bt_emu_vprintf(BtEmuThread *t, const char *format, const void *args);

/* llvm.trap / __trap(): reported; the launch fails. Does not return. */
void bt_emu_trap(BtEmuThread *t, uint32_t site);

#ifdef __cplusplus
}
#endif

#endif /* BT_EMU_ABI_H */
