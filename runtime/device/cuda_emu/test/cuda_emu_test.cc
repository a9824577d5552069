//===- cuda_emu_test.cc - checks of the emulated CUDA device ---------------===//
//
// The checks of runtime/device/cuda_emu that need no compiled kernel library
// (the others run generated kernels: test/bt-run/cuda-emu-*.test): the
// driver API's launch limits of sm_90, the device memory's bounds and
// initialization checks on copies, cuBLAS's argument checks, a host
// dereference of a device pointer, and the barrier / shuffle checks on
// kernels written here against the emulator ABI (bt_emu_abi.h), as
// bt-nvvm-to-host would emit them; the warp mma (its fragment layout from
// the PTX ISA, against a plain matmul) and its checks; the schedule seed's permutation
// (SetScheduleSeed, as BT_CUDA_EMU_SEED).
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bt_emu_abi.h"
#include "cuda_emu.h"
#include "emulator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace bt::cuda_emu {
namespace {

using ::testing::HasSubstr;
using CUresult = int;

// The tests check the reports they provoke on stderr: every report printed,
// however many the tests before made in this process (the emulator reads
// the setting once, at its first report).
const bool kEveryReportPrinted =
    ::setenv("BT_CUDA_EMU_MAX_REPORTS", "100000", /*overwrite=*/0) == 0;
using CUdeviceptr = unsigned long long;

template <typename F> F Sym(const char *name) {
  void *p = LookupSymbol(name);
  EXPECT_NE(p, nullptr) << name;
  return reinterpret_cast<F>(p);
}

/// The emulated device, initialized as CudaBackend does.
struct Device {
  void *stream = nullptr;
  Device() {
    EXPECT_EQ(Sym<CUresult (*)(unsigned)>("cuInit")(0), 0);
    void *ctx = nullptr;
    EXPECT_EQ(Sym<CUresult (*)(void **, int)>("cuDevicePrimaryCtxRetain")(&ctx, 0), 0);
    EXPECT_EQ(Sym<CUresult (*)(void *)>("cuCtxSetCurrent")(ctx), 0);
    EXPECT_EQ(Sym<CUresult (*)(void **, unsigned)>("cuStreamCreate")(&stream, 0), 0);
  }
  CUdeviceptr Alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(Sym<CUresult (*)(CUdeviceptr *, size_t)>("cuMemAlloc_v2")(&p, bytes), 0);
    return p;
  }
  CUresult Launch(Function &f, unsigned gx, unsigned gy, unsigned gz,
                  unsigned bx, unsigned by, unsigned bz, unsigned smem,
                  void **params) {
    using LaunchFn = CUresult (*)(void *, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, unsigned, unsigned,
                                  void *, void **, void **);
    return Sym<LaunchFn>("cuLaunchKernel")(&f, gx, gy, gz, bx, by, bz, smem,
                                           stream, params, nullptr);
  }
};

/// Launches `f` on one block of `threads` threads, expects the launch to
/// fail, and returns what the emulator reported.
std::string FailedLaunch(Device &d, Function &f, unsigned threads,
                         unsigned smem = 0, void **params = nullptr) {
  testing::internal::CaptureStderr();
  EXPECT_NE(d.Launch(f, 1, 1, 1, threads, 1, 1, smem, params), 0);
  return testing::internal::GetCapturedStderr();
}

Module g_module = {nullptr, -1, {"k: barrier A", "k: barrier B", "k: shuffle",
                                 "k: store", "k: load", "k: mma"}};

void Empty(void **) {}

/// Threads 0..15 wait at barrier site 0, the others at site 1.
void DivergentBarrier(void **) {
  BtEmuThread *t = bt_emu_thread();
  bt_emu_barrier(t, t->sreg[BT_EMU_SREG_TID_X] < 16 ? 0 : 1);
}

/// Thread 5 returns before the barrier that the others reach.
void EarlyExitBarrier(void **) {
  BtEmuThread *t = bt_emu_thread();
  if (t->sreg[BT_EMU_SREG_TID_X] == 5)
    return;
  bt_emu_barrier(t, 0);
}

/// A butterfly shuffle with a full mask that only even lanes execute.
void PartialShuffle(void **) {
  BtEmuThread *t = bt_emu_thread();
  if (t->sreg[BT_EMU_SREG_LANEID] % 2 != 0)
    return;
  uint8_t valid = 0;
  (void)bt_emu_shfl(t, BT_EMU_SHFL_BFLY, 0xffffffffu, 1, 1, 0x1f, 2, &valid);
}

/// out[lane] = lane of the butterfly partner (tid ^ 1), over 32 lanes.
void Butterfly(void **params) {
  BtEmuThread *t = bt_emu_thread();
  const int lane = t->sreg[BT_EMU_SREG_LANEID];
  uint8_t valid = 0;
  uint32_t v = bt_emu_shfl(t, BT_EMU_SHFL_BFLY, 0xffffffffu, lane, 1, 0x1f, 2,
                           &valid);
  auto *out = *static_cast<uint32_t **>(params[0]);
  *static_cast<uint32_t *>(bt_emu_store(t, out + lane, 4, 3)) = v;
}

/// Every thread writes shared word 0, then reads word 1 - tid (no barrier):
/// thread 1 reads the word thread 0 wrote.
void SharedRace(void **) {
  BtEmuThread *t = bt_emu_thread();
  const int tid = t->sreg[BT_EMU_SREG_TID_X];
  auto *smem = reinterpret_cast<float *>(t->smem);
  *static_cast<float *>(bt_emu_store(t, smem + tid, 4, 3)) = 1.0f;
  (void)*static_cast<float *>(bt_emu_load(t, smem + (tid ^ 1), 4, 4));
}

/// Every thread of every block stores its own value to element 0.
void SameWordEveryThread(void **params) {
  BtEmuThread *t = bt_emu_thread();
  auto *out = *static_cast<int32_t **>(params[0]);
  *static_cast<int32_t *>(bt_emu_store(t, out, 4, 3)) =
      t->sreg[BT_EMU_SREG_TID_X];
}

/// Reads element 1 of params[0] at a misaligned address (+2 bytes).
void Misaligned(void **params) {
  BtEmuThread *t = bt_emu_thread();
  char *p = *static_cast<char **>(params[0]);
  (void)*static_cast<float *>(bt_emu_load(t, p + 2, 4, 4));
}

/// out[tid] = sum of the 16 floats of params[1] (every thread reads all).
void SumRow(void **params) {
  BtEmuThread *t = bt_emu_thread();
  auto *out = *static_cast<float **>(params[0]);
  auto *in = *static_cast<float **>(params[1]);
  float sum = 0;
  for (int i = 0; i < 16; ++i)
    sum += *static_cast<float *>(bt_emu_load(t, in + i, 4, 4));
  *static_cast<float *>(bt_emu_store(t, out + t->sreg[BT_EMU_SREG_TID_X], 4, 3)) = sum;
}

/// The bf16 at `p` (a device address) as the low 16 bits of a word.
uint32_t LoadBf16(BtEmuThread *t, const uint16_t *p) {
  return *static_cast<uint16_t *>(
      bt_emu_load(t, const_cast<uint16_t *>(p), 2, 4));
}

/// Each warp w computes D_w = A * B + C_w with one m16n8k16 bf16 mma
/// (params: A bf16 [16, 16] row-major, B bf16 [16 (k), 8 (n)] row-major,
/// C f32 [warps, 16, 8], D f32 [warps, 16, 8]), its fragments gathered as
/// the PTX ISA lays them out (g = lane / 4, q = lane % 4).
void MmaTile(void **params) {
  BtEmuThread *t = bt_emu_thread();
  auto *a = *static_cast<const uint16_t **>(params[0]);
  auto *b = *static_cast<const uint16_t **>(params[1]);
  const int warp = t->sreg[BT_EMU_SREG_TID_X] / 32;
  auto *c = *static_cast<float **>(params[2]) + warp * 128;
  auto *d = *static_cast<float **>(params[3]) + warp * 128;
  const int lane = t->sreg[BT_EMU_SREG_LANEID], g = lane / 4, q = lane % 4;
  auto pair = [&](const uint16_t *p, int stride) {
    return LoadBf16(t, p) | LoadBf16(t, p + stride) << 16;
  };
  uint32_t f[14];
  f[0] = pair(a + g * 16 + 2 * q, 1);
  f[1] = pair(a + (g + 8) * 16 + 2 * q, 1);
  f[2] = pair(a + g * 16 + 2 * q + 8, 1);
  f[3] = pair(a + (g + 8) * 16 + 2 * q + 8, 1);
  f[4] = pair(b + (2 * q) * 8 + g, 8);
  f[5] = pair(b + (2 * q + 8) * 8 + g, 8);
  const int rc[4][2] = {{g, 2 * q}, {g, 2 * q + 1}, {g + 8, 2 * q},
                        {g + 8, 2 * q + 1}};
  for (int i = 0; i < 4; ++i)
    std::memcpy(&f[6 + i],
                bt_emu_load(t, c + rc[i][0] * 8 + rc[i][1], 4, 4), 4);
  bt_emu_mma(t, BT_EMU_MMA_M16N8K16_BF16_F32, f, 5);
  for (int i = 0; i < 4; ++i)
    std::memcpy(bt_emu_store(t, d + rc[i][0] * 8 + rc[i][1], 4, 3),
                &f[10 + i], 4);
}

/// Lanes 16..31 of the warp return before the mma that lanes 0..15 reach.
void HalfWarpMma(void **) {
  BtEmuThread *t = bt_emu_thread();
  if (t->sreg[BT_EMU_SREG_LANEID] >= 16)
    return;
  uint32_t f[14] = {};
  bt_emu_mma(t, BT_EMU_MMA_M16N8K16_BF16_F32, f, 5);
}

Function MakeFunction(const char *name, KernelEntry entry, bool sync) {
  Function f;
  f.module = &g_module;
  f.name = name;
  f.entry = entry;
  f.sync = sync;
  return f;
}

TEST(CudaEmu, LaunchLimitsOfSm90) {
  Device d;
  Function f = MakeFunction("empty", Empty, false);
  EXPECT_EQ(d.Launch(f, 1, 1, 1, 1024, 1, 1, 0, nullptr), 0);
  struct Case {
    unsigned g[3], b[3], smem;
    const char *report;
  } cases[] = {
      {{1, 1, 1}, {1025, 1, 1}, 0, "1025 threads per block (sm_90: at most 1024)"},
      {{1, 1, 1}, {32, 32, 2}, 0, "2048 threads per block"},
      {{1, 65536, 1}, {32, 1, 1}, 0, "a grid dimension exceeds sm_90's"},
      {{1, 1, 65536}, {32, 1, 1}, 0, "a grid dimension exceeds sm_90's"},
      {{1, 1, 1}, {32, 1, 1}, 48 * 1024 + 4,
       "49156 bytes of dynamic shared memory: above 48 KiB a kernel must opt in"},
      {{0, 1, 1}, {32, 1, 1}, 0, "a grid or block dimension is 0"},
  };
  for (const Case &c : cases) {
    testing::internal::CaptureStderr();
    EXPECT_NE(d.Launch(f, c.g[0], c.g[1], c.g[2], c.b[0], c.b[1], c.b[2],
                       c.smem, nullptr),
              0);
    EXPECT_THAT(testing::internal::GetCapturedStderr(),
                HasSubstr(std::string("launch of kernel empty outside sm_90's "
                                      "limits: ") +
                          c.report));
  }
  // 48 KiB exactly, and the largest grid y and z, are allowed.
  EXPECT_EQ(d.Launch(f, 1, 1, 1, 32, 1, 1, 48 * 1024, nullptr), 0);
  EXPECT_EQ(d.Launch(f, 1, 65535, 1, 1, 1, 1, 0, nullptr), 0);
}

TEST(CudaEmu, BarrierReachedAtDifferentSites) {
  Device d;
  Function f = MakeFunction("k", DivergentBarrier, true);
  std::string err = FailedLaunch(d, f, 32);
  EXPECT_THAT(err, HasSubstr("bt cuda-emu: ERROR: "));
  EXPECT_THAT(err, HasSubstr("k: barrier A"));
  EXPECT_THAT(err, HasSubstr("k: barrier B"));
}

// A thread that has exited is not live: the barrier waits for the others
// only (as on sm_70 and later), and nothing is reported.
TEST(CudaEmu, BarrierAfterAThreadExited) {
  Device d;
  Function f = MakeFunction("k", EarlyExitBarrier, true);
  testing::internal::CaptureStderr();
  EXPECT_EQ(d.Launch(f, 1, 1, 1, 32, 1, 1, 0, nullptr), 0);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(CudaEmu, ShuffleMaskNamesAbsentLane) {
  Device d;
  Function f = MakeFunction("k", PartialShuffle, true);
  EXPECT_THAT(FailedLaunch(d, f, 32),
              HasSubstr("shuffle whose mask names a lane that is not at the "
                        "same shuffle"));
}

TEST(CudaEmu, ButterflyShuffleExchangesLanes) {
  Device d;
  Function f = MakeFunction("k", Butterfly, true);
  CUdeviceptr out = d.Alloc(32 * 4);
  void *params[] = {&out};
  ASSERT_EQ(d.Launch(f, 1, 1, 1, 32, 1, 1, 0, params), 0);
  std::vector<uint32_t> host(32);
  ASSERT_EQ(Sym<CUresult (*)(void *, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2")(
                host.data(), out, 32 * 4),
            0);
  for (uint32_t lane = 0; lane < 32; ++lane)
    EXPECT_EQ(host[lane], lane ^ 1u) << "lane " << lane;
}

/// bf16 bits of `v` (exact for the small integers and halves used here).
uint16_t Bf16Bits(float v) {
  uint32_t w;
  std::memcpy(&w, &v, 4);
  return static_cast<uint16_t>(w >> 16);
}

TEST(CudaEmu, MmaComputesTheTileInThePtxFragmentLayout) {
  Device d;
  Function f = MakeFunction("k", MmaTile, true);
  // Small integers and halves: every product and sum is exact in f32, so
  // the emulator's D must equal the plain matmul bit for bit; distinct
  // values per element catch any transposed or swapped fragment.
  std::vector<uint16_t> a(256), b(128);
  std::vector<float> af(256), bf(128), c(256);
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k)
      af[i * 16 + k] = static_cast<float>((i * 7 + k * 3) % 11 - 5);
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < 8; ++j)
      bf[k * 8 + j] = static_cast<float>((k * 5 + j * 13) % 9 - 4) * 0.5f;
  for (int i = 0; i < 256; ++i)
    c[i] = static_cast<float>(i % 37) - (i >= 128 ? 100.0f : 0.0f);
  for (int i = 0; i < 256; ++i)
    a[i] = Bf16Bits(af[i]);
  for (int i = 0; i < 128; ++i)
    b[i] = Bf16Bits(bf[i]);
  CUdeviceptr da = d.Alloc(512), db = d.Alloc(256), dc = d.Alloc(1024),
              dd = d.Alloc(1024);
  auto copy = Sym<CUresult (*)(CUdeviceptr, const void *, size_t)>(
      "cuMemcpyHtoD_v2");
  ASSERT_EQ(copy(da, a.data(), 512), 0);
  ASSERT_EQ(copy(db, b.data(), 256), 0);
  ASSERT_EQ(copy(dc, c.data(), 1024), 0);
  void *params[] = {&da, &db, &dc, &dd};
  ASSERT_EQ(d.Launch(f, 1, 1, 1, 64, 1, 1, 0, params), 0);
  std::vector<float> out(256);
  ASSERT_EQ(Sym<CUresult (*)(void *, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2")(
                out.data(), dd, 1024),
            0);
  for (int w = 0; w < 2; ++w)
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 8; ++j) {
        float want = c[w * 128 + i * 8 + j];
        for (int k = 0; k < 16; ++k)
          want += af[i * 16 + k] * bf[k * 8 + j];
        EXPECT_EQ(out[w * 128 + i * 8 + j], want)
            << "warp " << w << " D[" << i << "][" << j << "]";
      }
}

TEST(CudaEmu, MmaNeedsEveryLaneOfTheWarp) {
  Device d;
  Function f = MakeFunction("k", HalfWarpMma, true);
  std::string err = FailedLaunch(d, f, 32);
  EXPECT_THAT(err, HasSubstr("mma.sync reached by a warp whose 32 lanes are "
                             "not all at it"));
  EXPECT_THAT(err, HasSubstr("at k: mma"));
  EXPECT_THAT(err, HasSubstr("lane 16 of the warp has exited"));
  // A block of 16 threads has no full warp (all 16 reach the mma).
  EXPECT_THAT(FailedLaunch(d, f, 16),
              HasSubstr("lane 16 of the warp does not exist (the block has 16 "
                        "threads)"));
}

TEST(CudaEmu, SharedMemoryRaceBetweenBarriers) {
  Device d;
  Function f = MakeFunction("k", SharedRace, true);
  EXPECT_THAT(FailedLaunch(d, f, 2, 8),
              HasSubstr("shared-memory race"));
}

TEST(CudaEmu, ConflictingGlobalWritesWithinALaunch) {
  Device d;
  Function f = MakeFunction("k", SameWordEveryThread, false);
  CUdeviceptr p = d.Alloc(4);
  void *params[] = {&p};
  // One thread: no conflict, also across two launches.
  ASSERT_EQ(d.Launch(f, 1, 1, 1, 1, 1, 1, 0, params), 0);
  ASSERT_EQ(d.Launch(f, 1, 1, 1, 1, 1, 1, 0, params), 0);
  EXPECT_THAT(FailedLaunch(d, f, 2, 0, params),
              HasSubstr("conflicting writes to global memory within one "
                        "launch"));
}

TEST(CudaEmu, MisalignedGlobalLoad) {
  Device d;
  Function f = MakeFunction("k", Misaligned, false);
  CUdeviceptr p = d.Alloc(16);
  std::vector<float> zeros(4, 0.0f);
  ASSERT_EQ(Sym<CUresult (*)(CUdeviceptr, const void *, size_t)>(
                "cuMemcpyHtoD_v2")(p, zeros.data(), 16),
            0);
  void *params[] = {&p};
  EXPECT_THAT(FailedLaunch(d, f, 1, 0, params), HasSubstr("misaligned"));
}

TEST(CudaEmu, MemsetInitializesAndIsBoundsChecked) {
  Device d;
  CUdeviceptr p = d.Alloc(64);
  auto memset8 = Sym<CUresult (*)(CUdeviceptr, unsigned char, size_t, void *)>(
      "cuMemsetD8Async");
  // The bytes are set and count as written: a kernel reading them is clean.
  ASSERT_EQ(memset8(p, 0x5a, 64, d.stream), 0);
  unsigned char back[64] = {};
  ASSERT_EQ(Sym<CUresult (*)(void *, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2")(
                back, p, 64),
            0);
  for (unsigned char c : back)
    EXPECT_EQ(c, 0x5a);
  Function f = MakeFunction("sum_row", SumRow, false);
  CUdeviceptr out = d.Alloc(4 * 4);
  void *params[] = {&out, &p};
  EXPECT_EQ(d.Launch(f, 1, 1, 1, 4, 1, 1, 0, params), 0);
  // Past the allocation: refused with a report, nothing written.
  testing::internal::CaptureStderr();
  EXPECT_NE(memset8(p, 0, 65, d.stream), 0);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("cuMemsetD8Async of 65 bytes outside a live device "
                        "allocation"));
}

TEST(CudaEmu, TrafficCountersCountAccessesAndDistinctSectors) {
  Device d;
  Function f = MakeFunction("sum_row", SumRow, false);
  CUdeviceptr out = d.Alloc(64 * 4), in = d.Alloc(16 * 4);
  std::vector<float> ones(16, 1.0f);
  ASSERT_EQ(Sym<CUresult (*)(CUdeviceptr, const void *, size_t)>(
                "cuMemcpyHtoD_v2")(in, ones.data(), 64),
            0);
  auto traffic = Sym<void (*)(int64_t *)>("bt_emu_global_traffic");
  int64_t before[4], after[4];
  traffic(before);
  void *params[] = {&out, &in};
  ASSERT_EQ(d.Launch(f, 1, 1, 1, 64, 1, 1, 0, params), 0);
  traffic(after);
  // 64 threads read the same 64 bytes (2 sectors) and write 4 bytes each
  // (256 bytes, 8 sectors); every access counts once in the access bytes.
  EXPECT_EQ(after[0] - before[0], 64);
  EXPECT_EQ(after[1] - before[1], 256);
  EXPECT_EQ(after[2] - before[2], 64 * 16 * 4 + 64 * 4);
  EXPECT_EQ(after[3] - before[3], 0);
}

/// out[tid] = in[tid] + x (params: out, in, f32 x).
void AddScalar(void **params) {
  BtEmuThread *t = bt_emu_thread();
  auto *out = *static_cast<float **>(params[0]);
  auto *in = *static_cast<float **>(params[1]);
  const float x = *static_cast<float *>(params[2]);
  const int i = t->sreg[BT_EMU_SREG_TID_X];
  const float v = *static_cast<float *>(bt_emu_load(t, in + i, 4, 4));
  *static_cast<float *>(bt_emu_store(t, out + i, 4, 3)) = v + x;
}
const int32_t kAddScalarParams[] = {3, 8, 8, 4};

using CopyToHost = CUresult (*)(void *, CUdeviceptr, size_t);
using CopyToDevice = CUresult (*)(CUdeviceptr, const void *, size_t);

// A capture records launches, memsets and GEMMs without running them; the
// instantiated graph replays them with the captured parameter values on the
// memory as it is at the replay.
TEST(CudaEmu, StreamCaptureRecordsAndGraphReplays) {
  Device d;
  Function f = MakeFunction("add_scalar", AddScalar, false);
  f.param_bytes = kAddScalarParams;
  CUdeviceptr in = d.Alloc(4 * 4), out = d.Alloc(4 * 4), c = d.Alloc(4);
  const float in0[4] = {1, 2, 3, 4};
  ASSERT_EQ(Sym<CopyToDevice>("cuMemcpyHtoD_v2")(in, in0, sizeof in0), 0);
  void *blas = nullptr;
  ASSERT_EQ(Sym<int (*)(void **)>("cublasCreate_v2")(&blas), 0);

  ASSERT_EQ(Sym<CUresult (*)(void *, int)>("cuStreamBeginCapture_v2")(d.stream, 2), 0);
  int status = -1;
  ASSERT_EQ(Sym<CUresult (*)(void *, int *)>("cuStreamIsCapturing")(d.stream, &status), 0);
  EXPECT_EQ(status, 1);
  float x = 0.5f;
  void *params[] = {&out, &in, &x};
  ASSERT_EQ(d.Launch(f, 1, 1, 1, 4, 1, 1, 0, params), 0);
  x = 100.0f; // the capture copied 0.5
  ASSERT_EQ(Sym<CUresult (*)(CUdeviceptr, unsigned char, size_t, void *)>(
                "cuMemsetD8Async")(c, 0, 4, d.stream),
            0);
  // c[0] = 2 * in[1] * out[0] + 0 * c (1 x 1 x 1, column-major).
  const float alpha = 2.0f, beta = 0.0f;
  using Sgemm = int (*)(void *, int, int, int, int, int, const float *,
                        const float *, int, const float *, int, const float *,
                        float *, int);
  ASSERT_EQ(Sym<Sgemm>("cublasSgemm_v2")(
                blas, 0, 0, 1, 1, 1, &alpha,
                reinterpret_cast<const float *>(in + 4), 1,
                reinterpret_cast<const float *>(out), 1, &beta,
                reinterpret_cast<float *>(c), 1),
            0);
  // copy = out, device to device.
  CUdeviceptr copy = d.Alloc(4 * 4);
  auto dtod = Sym<CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, void *)>(
      "cuMemcpyDtoDAsync_v2");
  ASSERT_EQ(dtod(copy, out, 16, d.stream), 0);
  void *graph = nullptr;
  ASSERT_EQ(Sym<CUresult (*)(void *, void **)>("cuStreamEndCapture")(d.stream, &graph), 0);
  size_t nodes = 0;
  ASSERT_EQ(Sym<CUresult (*)(void *, void **, size_t *)>("cuGraphGetNodes")(graph, nullptr, &nodes), 0);
  EXPECT_EQ(nodes, 4u);
  // Nothing ran: out is still the allocation's NaN fill.
  float got[4];
  ASSERT_EQ(Sym<CopyToHost>("cuMemcpyDtoH_v2")(got, out, sizeof got), 0);
  EXPECT_TRUE(std::isnan(got[0]));

  void *exec = nullptr;
  ASSERT_EQ(Sym<CUresult (*)(void **, void *, unsigned long long)>(
                "cuGraphInstantiateWithFlags")(&exec, graph, 0),
            0);
  ASSERT_EQ(Sym<CUresult (*)(void *)>("cuGraphDestroy")(graph), 0);
  auto replay = Sym<CUresult (*)(void *, void *)>("cuGraphLaunch");
  ASSERT_EQ(replay(exec, d.stream), 0);
  ASSERT_EQ(Sym<CopyToHost>("cuMemcpyDtoH_v2")(got, out, sizeof got), 0);
  EXPECT_THAT(got, testing::ElementsAre(1.5f, 2.5f, 3.5f, 4.5f));
  float gemm = 0;
  ASSERT_EQ(Sym<CopyToHost>("cuMemcpyDtoH_v2")(&gemm, c, 4), 0);
  EXPECT_EQ(gemm, 2.0f * 2.0f * 1.5f);
  // A replay reads the memory as it is then.
  const float in1[4] = {10, 20, 30, 40};
  ASSERT_EQ(Sym<CopyToDevice>("cuMemcpyHtoD_v2")(in, in1, sizeof in1), 0);
  ASSERT_EQ(replay(exec, d.stream), 0);
  ASSERT_EQ(Sym<CopyToHost>("cuMemcpyDtoH_v2")(got, out, sizeof got), 0);
  EXPECT_THAT(got, testing::ElementsAre(10.5f, 20.5f, 30.5f, 40.5f));
  ASSERT_EQ(Sym<CopyToHost>("cuMemcpyDtoH_v2")(&gemm, c, 4), 0);
  EXPECT_EQ(gemm, 2.0f * 20.0f * 10.5f);
  ASSERT_EQ(Sym<CopyToHost>("cuMemcpyDtoH_v2")(got, copy, sizeof got), 0);
  EXPECT_THAT(got, testing::ElementsAre(10.5f, 20.5f, 30.5f, 40.5f));
  // Outside a capture the copy runs at once; its source must be written.
  CUdeviceptr fresh = d.Alloc(16);
  testing::internal::CaptureStderr();
  EXPECT_NE(dtod(copy, fresh, 16, d.stream), 0);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("cuMemcpyDtoDAsync reads uninitialized device memory"));
  EXPECT_EQ(Sym<CUresult (*)(void *)>("cuGraphExecDestroy")(exec), 0);
}

// What a capture refuses: synchronous copies and synchronization
// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the capture is invalidated),
// allocations outside the relaxed mode, a kernel without parameter sizes,
// a nested or unmatched capture.
TEST(CudaEmu, StreamCaptureRefusesWhatCannotBeCaptured) {
  Device d;
  auto begin = Sym<CUresult (*)(void *, int)>("cuStreamBeginCapture_v2");
  auto end = Sym<CUresult (*)(void *, void **)>("cuStreamEndCapture");
  CUdeviceptr p = d.Alloc(16);
  float host[4] = {};
  void *graph = &host; // overwritten with null on failure

  ASSERT_EQ(begin(d.stream, 2), 0);
  EXPECT_EQ(begin(d.stream, 2), 401); // CUDA_ERROR_ILLEGAL_STATE
  EXPECT_EQ(Sym<CopyToHost>("cuMemcpyDtoH_v2")(host, p, 16), 900);
  int status = -1;
  ASSERT_EQ(Sym<CUresult (*)(void *, int *)>("cuStreamIsCapturing")(d.stream, &status), 0);
  EXPECT_EQ(status, 2); // invalidated
  EXPECT_EQ(end(d.stream, &graph), 901);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(end(d.stream, &graph), 903); // no capture to end

  ASSERT_EQ(begin(d.stream, 2), 0);
  EXPECT_EQ(Sym<CUresult (*)(void *)>("cuStreamSynchronize")(d.stream), 900);
  EXPECT_EQ(end(d.stream, &graph), 901);

  ASSERT_EQ(begin(d.stream, 0), 0); // global mode: no cuMemAlloc
  CUdeviceptr q = 0;
  EXPECT_EQ(Sym<CUresult (*)(CUdeviceptr *, size_t)>("cuMemAlloc_v2")(&q, 16), 900);
  EXPECT_EQ(end(d.stream, &graph), 901);
  ASSERT_EQ(begin(d.stream, 2), 0); // relaxed: allowed
  EXPECT_EQ(Sym<CUresult (*)(CUdeviceptr *, size_t)>("cuMemAlloc_v2")(&q, 16), 0);
  EXPECT_EQ(Sym<CUresult (*)(CUdeviceptr)>("cuMemFree_v2")(q), 0);

  Function f = MakeFunction("empty", Empty, false); // no param_bytes
  testing::internal::CaptureStderr();
  EXPECT_EQ(d.Launch(f, 1, 1, 1, 1, 1, 1, 0, nullptr), 900);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("stream capture of kernel empty, which has no "
                        "parameter sizes"));
  EXPECT_EQ(end(d.stream, &graph), 901);
  // The stream works as before.
  EXPECT_EQ(Sym<CopyToHost>("cuMemcpyDtoH_v2")(host, p, 0), 0);
}

/// The (block, thread) pairs in the order the emulator ran them.
std::vector<std::pair<int, int>> g_run_order;

void RecordOrder(void **) {
  BtEmuThread *t = bt_emu_thread();
  g_run_order.push_back(
      {t->sreg[BT_EMU_SREG_CTAID_X], t->sreg[BT_EMU_SREG_TID_X]});
}

/// The order of 6 blocks of 5 threads under schedule seed `seed`.
std::vector<std::pair<int, int>> RunOrder(Device &d, unsigned long long seed) {
  SetScheduleSeed(seed);
  Function f = MakeFunction("order", RecordOrder, false);
  g_run_order.clear();
  EXPECT_EQ(d.Launch(f, 6, 1, 1, 5, 1, 1, 0, nullptr), 0);
  SetScheduleSeed(0);
  return g_run_order;
}

TEST(CudaEmu, ScheduleSeedPermutesBlocksAndThreads) {
  Device d;
  std::vector<std::pair<int, int>> in_order = RunOrder(d, 0);
  ASSERT_EQ(in_order.size(), 30u);
  for (int i = 0; i < 30; ++i)
    EXPECT_EQ(in_order[i], std::make_pair(i / 5, i % 5));
  std::vector<std::pair<int, int>> seeded = RunOrder(d, 7);
  EXPECT_NE(seeded, in_order);
  EXPECT_EQ(RunOrder(d, 7), seeded) << "the same seed, the same order";
  std::sort(seeded.begin(), seeded.end());
  EXPECT_EQ(seeded, in_order) << "every thread of every block once";
}

TEST(CudaEmu, CopyOutsideAllocation) {
  Device d;
  CUdeviceptr p = d.Alloc(16);
  std::vector<char> host(32);
  testing::internal::CaptureStderr();
  EXPECT_NE(Sym<CUresult (*)(void *, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2")(
                host.data(), p, 32),
            0);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("cuMemcpyDtoH of 32 bytes outside a live device "
                        "allocation"));
}

/// A cuBLAS handle on `d`'s stream, as CudaBackend::LoadCublas makes it.
void *CublasHandle(const Device &d) {
  void *handle = nullptr;
  EXPECT_EQ(Sym<int (*)(void **)>("cublasCreate_v2")(&handle), 0);
  EXPECT_EQ(Sym<int (*)(void *, void *)>("cublasSetStream_v2")(handle, d.stream), 0);
  return handle;
}

TEST(CudaEmu, CublasLeadingDimensionAndOperandBounds) {
  Device d;
  void *handle = CublasHandle(d);
  using Sgemm = int (*)(void *, int, int, int, int, int, const float *,
                        const float *, int, const float *, int, const float *,
                        float *, int);
  Sgemm sgemm = Sym<Sgemm>("cublasSgemm_v2");
  // C[2x2] = A[2x3] B[3x2], column-major, every operand initialized.
  CUdeviceptr a = d.Alloc(6 * 4), b = d.Alloc(6 * 4), c = d.Alloc(4 * 4);
  std::vector<float> av = {1, 2, 3, 4, 5, 6}, bv = {1, 0, 0, 1, 1, 1}, cv(4);
  auto htod = Sym<CUresult (*)(CUdeviceptr, const void *, size_t)>("cuMemcpyHtoD_v2");
  ASSERT_EQ(htod(a, av.data(), 24), 0);
  ASSERT_EQ(htod(b, bv.data(), 24), 0);
  ASSERT_EQ(htod(c, cv.data(), 16), 0);
  const float one = 1, zero = 0;
  auto A = reinterpret_cast<const float *>(a);
  auto B = reinterpret_cast<const float *>(b);
  auto C = reinterpret_cast<float *>(c);
  ASSERT_EQ(sgemm(handle, 0, 0, 2, 2, 3, &one, A, 2, B, 3, &zero, C, 2), 0);
  ASSERT_EQ(Sym<CUresult (*)(void *, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2")(
                cv.data(), c, 16),
            0);
  // Column-major: A = [[1 3 5] [2 4 6]], B = [[1 1] [0 1] [0 1]], so
  // A·B = [[1 9] [2 12]].
  EXPECT_EQ(cv, (std::vector<float>{1, 2, 9, 12}));

  testing::internal::CaptureStderr();
  EXPECT_NE(sgemm(handle, 0, 0, 2, 2, 3, &one, A, 1, B, 3, &zero, C, 2), 0);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), HasSubstr("lda 1 < max(1, 2)"));
  // ldb 4: B's last column ends past its 24-byte allocation.
  testing::internal::CaptureStderr();
  EXPECT_NE(sgemm(handle, 0, 0, 2, 2, 3, &one, A, 2, B, 4, &zero, C, 2), 0);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("cuBLAS operand B ["));
}

TEST(CudaEmu, CublasGemmExRoundsABf16CToNearestEven) {
  Device d;
  void *handle = CublasHandle(d);
  using GemmEx = int (*)(void *, int, int, int, int, int, const void *,
                         const void *, int, int, const void *, int, int,
                         const void *, void *, int, int, int, int);
  GemmEx gemm = Sym<GemmEx>("cublasGemmEx");
  constexpr int kR16BF = 14, kR16F = 2, kCompute32F = 68;
  // Column-major C[1x2] = A[1x2] B[2x2] in bf16: A = [1, 2^-8],
  // B = [[1 1] [1 3]], so the f32 products are 1 + 2^-8 and 1 + 3·2^-8,
  // both midpoints between bf16 neighbours (spacing 2^-7 at 1): to nearest
  // even, 1.0 (0x3f80) and 1 + 2^-6 (0x3f82).
  CUdeviceptr a = d.Alloc(4), b = d.Alloc(8), c = d.Alloc(4);
  std::vector<uint16_t> av = {0x3f80, 0x3b80}, bv = {0x3f80, 0x3f80, 0x3f80, 0x4040},
                        cv(2);
  auto htod = Sym<CUresult (*)(CUdeviceptr, const void *, size_t)>("cuMemcpyHtoD_v2");
  auto dtoh = Sym<CUresult (*)(void *, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2");
  ASSERT_EQ(htod(a, av.data(), 4), 0);
  ASSERT_EQ(htod(b, bv.data(), 8), 0);
  const float one = 1, zero = 0;
  auto A = reinterpret_cast<const void *>(a);
  auto B = reinterpret_cast<const void *>(b);
  auto C = reinterpret_cast<void *>(c);
  ASSERT_EQ(gemm(handle, 0, 0, 1, 2, 2, &one, A, kR16BF, 1, B, kR16BF, 2,
                 &zero, C, kR16BF, 1, kCompute32F, -1),
            0);
  ASSERT_EQ(dtoh(cv.data(), c, 4), 0);
  EXPECT_EQ(cv, (std::vector<uint16_t>{0x3f80, 0x3f82}));
  // beta = 1 reads C as bf16: 1 + (1 + 2^-8) = 2 + 2^-8 -> 2.0 (0x4000),
  // 1.015625 + 1.01171875 = 2.02734375 -> 2.03125 (0x4002).
  ASSERT_EQ(gemm(handle, 0, 0, 1, 2, 2, &one, A, kR16BF, 1, B, kR16BF, 2,
                 &one, C, kR16BF, 1, kCompute32F, -1),
            0);
  ASSERT_EQ(dtoh(cv.data(), c, 4), 0);
  EXPECT_EQ(cv, (std::vector<uint16_t>{0x4000, 0x4002}));
  // A 2-byte C occupies 4 bytes here: ldc 2 reaches past the allocation.
  testing::internal::CaptureStderr();
  EXPECT_NE(gemm(handle, 0, 0, 1, 2, 2, &one, A, kR16BF, 1, B, kR16BF, 2,
                 &zero, C, kR16BF, 2, kCompute32F, -1),
            0);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("cuBLAS operand C ["));
  // Types the emulator does not implement are refused, not misread.
  testing::internal::CaptureStderr();
  EXPECT_NE(gemm(handle, 0, 0, 1, 2, 2, &one, A, kR16BF, 1, B, kR16BF, 2,
                 &zero, C, kR16F, 1, kCompute32F, -1),
            0);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("cublasGemmEx types A 14, B 14, C 2"));
}

TEST(CudaEmu, CublasLtBiasEpilogueAddsBeforeTheRounding) {
  Device d;
  (void)CublasHandle(d);
  void *lt = nullptr;
  ASSERT_EQ(Sym<int (*)(void **)>("cublasLtCreate")(&lt), 0);
  auto descCreate = Sym<int (*)(void **, int, int)>("cublasLtMatmulDescCreate");
  auto descDestroy = Sym<int (*)(void *)>("cublasLtMatmulDescDestroy");
  auto setAttr =
      Sym<int (*)(void *, int, const void *, size_t)>("cublasLtMatmulDescSetAttribute");
  auto layoutCreate = Sym<int (*)(void **, int, uint64_t, uint64_t, int64_t)>(
      "cublasLtMatrixLayoutCreate");
  auto layoutDestroy = Sym<int (*)(void *)>("cublasLtMatrixLayoutDestroy");
  using Matmul = int (*)(void *, void *, const void *, const void *, void *,
                         const void *, void *, const void *, const void *,
                         void *, void *, void *, const void *, void *, size_t,
                         void *);
  Matmul matmul = Sym<Matmul>("cublasLtMatmul");
  constexpr int kR16BF = 14, kR32F = 0, kCompute32F = 68;
  constexpr int kTransA = 3, kTransB = 4, kEpilogue = 7, kBiasPointer = 8;
  // Column-major D[2x1] = A[2x2] B[2x1] + bias[2] in bf16: A all ones,
  // B = [1, 2^-8], so both products are 1 + 2^-8; bias = [0, 2^-7] makes
  // them 1 + 2^-8 and 1 + 3·2^-8, midpoints that round to nearest even to
  // 1.0 (0x3f80) and 1 + 2^-6 (0x3f82) only if the bias is added before the
  // one rounding (rounding the product first gives 1.0 + 2^-7, 0x3f81).
  CUdeviceptr a = d.Alloc(8), b = d.Alloc(4), c = d.Alloc(4), bias = d.Alloc(4),
              short_bias = d.Alloc(2);
  std::vector<uint16_t> av = {0x3f80, 0x3f80, 0x3f80, 0x3f80}, bv = {0x3f80, 0x3b80},
                        biasv = {0x0000, 0x3c00}, cv(2);
  auto htod = Sym<CUresult (*)(CUdeviceptr, const void *, size_t)>("cuMemcpyHtoD_v2");
  auto dtoh = Sym<CUresult (*)(void *, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2");
  ASSERT_EQ(htod(a, av.data(), 8), 0);
  ASSERT_EQ(htod(b, bv.data(), 4), 0);
  ASSERT_EQ(htod(bias, biasv.data(), 4), 0);
  ASSERT_EQ(htod(short_bias, biasv.data(), 2), 0);
  void *desc = nullptr, *la = nullptr, *lb = nullptr, *ld = nullptr;
  ASSERT_EQ(descCreate(&desc, kCompute32F, kR32F), 0);
  const int32_t opN = 0, biasEpilogue = 4;
  ASSERT_EQ(setAttr(desc, kTransA, &opN, sizeof opN), 0);
  ASSERT_EQ(setAttr(desc, kTransB, &opN, sizeof opN), 0);
  ASSERT_EQ(setAttr(desc, kEpilogue, &biasEpilogue, sizeof biasEpilogue), 0);
  const void *biasPtr = reinterpret_cast<const void *>(bias);
  ASSERT_EQ(setAttr(desc, kBiasPointer, &biasPtr, sizeof biasPtr), 0);
  ASSERT_EQ(layoutCreate(&la, kR16BF, 2, 2, 2), 0);
  ASSERT_EQ(layoutCreate(&lb, kR16BF, 2, 1, 2), 0);
  ASSERT_EQ(layoutCreate(&ld, kR16BF, 2, 1, 2), 0);
  const float one = 1, zero = 0;
  auto A = reinterpret_cast<const void *>(a);
  auto B = reinterpret_cast<const void *>(b);
  auto D = reinterpret_cast<void *>(c);
  ASSERT_EQ(matmul(lt, desc, &one, A, la, B, lb, &zero, D, ld, D, ld, nullptr,
                   nullptr, 0, d.stream),
            0);
  ASSERT_EQ(dtoh(cv.data(), c, 4), 0);
  EXPECT_EQ(cv, (std::vector<uint16_t>{0x3f80, 0x3f82}));
  // A bias vector shorter than D's rows is refused, not read past its end.
  const void *shortPtr = reinterpret_cast<const void *>(short_bias);
  ASSERT_EQ(setAttr(desc, kBiasPointer, &shortPtr, sizeof shortPtr), 0);
  testing::internal::CaptureStderr();
  EXPECT_NE(matmul(lt, desc, &one, A, la, B, lb, &zero, D, ld, D, ld, nullptr,
                   nullptr, 0, d.stream),
            0);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("cuBLASLt bias vector ["));
  // What the emulator does not implement is refused: another attribute, an
  // out-of-place D.
  testing::internal::CaptureStderr();
  const int32_t value = 0;
  EXPECT_NE(setAttr(desc, 1, &value, sizeof value), 0);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), HasSubstr("matmul attribute 1"));
  CUdeviceptr other = d.Alloc(4);
  testing::internal::CaptureStderr();
  EXPECT_NE(matmul(lt, desc, &one, A, la, B, lb, &zero, D, ld,
                   reinterpret_cast<void *>(other), ld, nullptr, nullptr, 0,
                   d.stream),
            0);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), HasSubstr("C differs from D"));
  EXPECT_EQ(layoutDestroy(la), 0);
  EXPECT_EQ(layoutDestroy(lb), 0);
  EXPECT_EQ(layoutDestroy(ld), 0);
  EXPECT_EQ(descDestroy(desc), 0);
  EXPECT_EQ(Sym<int (*)(void *)>("cublasLtDestroy")(lt), 0);
}

TEST(CudaEmuDeathTest, HostDereferenceOfDevicePointerFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Device d;
        CUdeviceptr p = d.Alloc(64);
        volatile float x = *reinterpret_cast<volatile float *>(p);
        (void)x;
      },
      testing::ExitedWithCode(1),
      "host code dereferenced a device pointer(.|\n)*allocation");
}

} // namespace
} // namespace bt::cuda_emu
