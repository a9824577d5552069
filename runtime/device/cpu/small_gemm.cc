//===- small_gemm.cc - the GEMM entry of compiled CPU kernels -------------===//
//
// The small-M path computes C[i, j] = alpha * dot(A[i, :], B[j, :]) +
// beta * C[i, j] (row-major A [M, K], B [N, K] as PyTorch's Linear weight,
// M <= 8), reading B once:
//  - packed (B is a registered constant weight): panels of 32 columns x K,
//    one 32-float vector of B per step of K, M x 32 outputs accumulated in
//    registers (2 x M zmm), A broadcast from L1. The 50304 x 256 LM head at
//    M = 8 on a 2-core Zen 4 (-O3, best of 30 calls): packed 1.40 ms with
//    2 threads (37 GB/s of weight, 147 GFLOP/s) and 2.54 ms with 1; the
//    dot-product form below 2.05-2.34 ms and 4.4-5.3 ms; cblas_sgemm,
//    which packs B on every call, 5.1-5.2 ms with 2 threads. AVX2 (16 ymm):
//    passes of up to 6 rows x 16 columns (or 2 x 32) over K blocks of 32
//    (PanelsAvx2); the 50304 x 512 LM head at M = 8 on a 2-core Zen 3
//    3.2-3.3 ms with 2 threads, 6.1-6.4 ms with 1;
//  - unpacked: one row of B at a time, M dot products with vector
//    accumulators and one horizontal sum each.
// The columns are split over the process' one OpenMP pool (the one the
// compiled kernels and OpenBLAS run on, docs/codegen.md "Threads").
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/device/cpu/small_gemm.h"

#include "bt/runtime/device/cpu/cpu_device.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"

#include "cblas.h"

namespace bt::rt {
namespace {

// The process' OpenMP runtime through libgomp's ABI for `#pragma omp
// parallel` (GOMP_parallel), which LLVM's libomp implements as well and
// OpenBLAS' OpenMP build calls the same way. Looked up at the first call,
// when the kernel library that calls us has loaded libomp: bt-run and
// bt-launcher link it (global scope); the static standalone executable gets
// it only as the kernels' dependency (found with RTLD_NOLOAD). Without one,
// the small path runs on the calling thread.
struct OmpApi {
  void (*parallel)(void (*fn)(void *), void *data, unsigned num_threads,
                   unsigned flags) = nullptr;
  int (*thread_num)() = nullptr;
  int (*num_threads)() = nullptr;
  int (*in_parallel)() = nullptr;
};

const OmpApi &Omp() {
  static const OmpApi api = [] {
    OmpApi r;
    r.parallel = reinterpret_cast<decltype(r.parallel)>(
        OmpSymbol("GOMP_parallel"));
    r.thread_num = reinterpret_cast<decltype(r.thread_num)>(
        OmpSymbol("omp_get_thread_num"));
    r.num_threads = reinterpret_cast<decltype(r.num_threads)>(
        OmpSymbol("omp_get_num_threads"));
    r.in_parallel = reinterpret_cast<decltype(r.in_parallel)>(
        OmpSymbol("omp_in_parallel"));
    return r.parallel && r.thread_num && r.num_threads && r.in_parallel
               ? r
               : OmpApi{};
  }();
  return api;
}

// A weight of at least this many elements (512 KiB) splits its rows over
// the pool: a fork of the pool's hot team (a few us) is then a small part
// of the read.
constexpr long kParallelElements = long{1} << 17;

struct SmallGemm {
  int m, k;
  float alpha;
  const float *a;
  int lda;
  const float *b;
  int ldb;
  float beta;
  float *c;
  int ldc;
};

inline void Store(const SmallGemm &g, int i, int j, float sum) {
  float &out = g.c[static_cast<long>(i) * g.ldc + j];
  out = g.beta == 0.0f ? g.alpha * sum : g.alpha * sum + g.beta * out;
}

[[gnu::target("avx2,fma")]] inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

[[gnu::target("avx512f,avx2,fma")]] inline float HorizontalSum(__m512 v) {
  // Fold 256-bit halves, 128-bit quarters, then within 128 bits; all with
  // zero-masked shuffles (GCC 12's unmasked shuffle / extract / cast
  // intrinsics warn on their undefined source operand).
  v = _mm512_add_ps(
      v, _mm512_maskz_shuffle_f32x4(0xFFFF, v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_add_ps(
      v, _mm512_maskz_shuffle_f32x4(0xFFFF, v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  v = _mm512_add_ps(v, _mm512_maskz_permute_ps(0xFFFF, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_add_ps(v, _mm512_maskz_permute_ps(0xFFFF, v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_cvtss_f32(v);
}

// 2: AVX-512F, 1: AVX2 + FMA, 0: neither. BT_CPU_ISA=avx2 or generic
// lowers it (to test the AVX2 and portable kernels on an AVX-512 machine,
// and for A/B measurements); another value, or one above what the CPU
// has, is reported on stderr and ignored.
int Isa() {
  static const int isa = [] {
    int cpu = 0;
    if (__builtin_cpu_supports("avx512f"))
      cpu = 2;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      cpu = 1;
    const char *v = std::getenv("BT_CPU_ISA");
    if (v == nullptr || *v == '\0')
      return cpu;
    const std::string name(v);
    const int want = name == "avx512" ? 2 : name == "avx2" ? 1
                     : name == "generic" ? 0 : -1;
    if (want < 0 || want > cpu) {
      std::fprintf(stderr,
                   "bt: warning: BT_CPU_ISA=%s is not one of avx512, avx2, "
                   "generic that this CPU has; using %s\n",
                   v, cpu == 2 ? "avx512" : cpu == 1 ? "avx2" : "generic");
      return cpu;
    }
    return want;
  }();
  return isa;
}

// ---- AVX-512: masked tail loads ---------------------------------------------

// C[0:M, j] from row j of B: M vector accumulators, one horizontal sum each.
template <int M>
[[gnu::target("avx512f,avx2,fma")]] void RowAvx512(const SmallGemm &g, int j) {
  __m512 acc[M];
  for (int i = 0; i < M; ++i)
    acc[i] = _mm512_setzero_ps();
  const float *bj = g.b + static_cast<long>(j) * g.ldb;
  int p = 0;
  for (; p + 16 <= g.k; p += 16) {
    const __m512 w = _mm512_loadu_ps(bj + p);
    for (int i = 0; i < M; ++i)
      acc[i] = _mm512_fmadd_ps(
          _mm512_loadu_ps(g.a + static_cast<long>(i) * g.lda + p), w, acc[i]);
  }
  if (p < g.k) { // the tail: masked loads (no fault past the row)
    const __mmask16 mask = static_cast<__mmask16>((1u << (g.k - p)) - 1);
    const __m512 w = _mm512_maskz_loadu_ps(mask, bj + p);
    for (int i = 0; i < M; ++i)
      acc[i] = _mm512_fmadd_ps(
          _mm512_maskz_loadu_ps(mask, g.a + static_cast<long>(i) * g.lda + p),
          w, acc[i]);
  }
  for (int i = 0; i < M; ++i)
    Store(g, i, j, HorizontalSum(acc[i]));
}

// Rows [j0, j1) of B, one at a time: rows read side by side measured
// 1.3-4x slower from DRAM than one contiguous stream (2-core Zen 4,
// 50304 x 256, issue 15).
template <int M>
[[gnu::target("avx512f,avx2,fma")]] void RowsAvx512(const SmallGemm &g, int j0,
                                                    int j1) {
  for (int j = j0; j < j1; ++j)
    RowAvx512<M>(g, j);
}

// ---- AVX2 + FMA: scalar tail ------------------------------------------------

template <int M>
[[gnu::target("avx2,fma")]] void RowAvx2(const SmallGemm &g, int j) {
  __m256 acc[M];
  for (int i = 0; i < M; ++i)
    acc[i] = _mm256_setzero_ps();
  const float *bj = g.b + static_cast<long>(j) * g.ldb;
  int p = 0;
  for (; p + 8 <= g.k; p += 8) {
    const __m256 w = _mm256_loadu_ps(bj + p);
    for (int i = 0; i < M; ++i)
      acc[i] = _mm256_fmadd_ps(
          _mm256_loadu_ps(g.a + static_cast<long>(i) * g.lda + p), w, acc[i]);
  }
  for (int i = 0; i < M; ++i) {
    float sum = HorizontalSum(acc[i]);
    const float *ai = g.a + static_cast<long>(i) * g.lda;
    for (int q = p; q < g.k; ++q)
      sum += ai[q] * bj[q];
    Store(g, i, j, sum);
  }
}

template <int M>
[[gnu::target("avx2,fma")]] void RowsAvx2(const SmallGemm &g, int j0, int j1) {
  for (int j = j0; j < j1; ++j)
    RowAvx2<M>(g, j);
}

// ---- any x86-64 (the compiler vectorizes the dot) --------------------------

void RowsGeneric(const SmallGemm &g, int j0, int j1) {
  for (int j = j0; j < j1; ++j) {
    const float *bj = g.b + static_cast<long>(j) * g.ldb;
    for (int i = 0; i < g.m; ++i) {
      const float *ai = g.a + static_cast<long>(i) * g.lda;
      float sum = 0;
      for (int q = 0; q < g.k; ++q)
        sum += ai[q] * bj[q];
      Store(g, i, j, sum);
    }
  }
}

using RowsFn = void (*)(const SmallGemm &, int, int);

// The register-blocked kernels take up to this many rows; a product of 9..16
// rows against a packed weight runs as two (rows [0, 8) and [8, M)),
// interleaved per panel so that the second reads the panel from cache.
constexpr int kKernelRows = kSmallGemmMaxM;
static_assert(kPackedGemmMaxM <= 2 * kKernelRows, "two row chunks at most");

/// Rows [0, 8) and [8, M) of a product of M > 8 rows.
std::pair<SmallGemm, SmallGemm> SplitRows(const SmallGemm &g) {
  SmallGemm top = g, bottom = g;
  top.m = kKernelRows;
  bottom.m = g.m - kKernelRows;
  bottom.a = g.a + static_cast<long>(kKernelRows) * g.lda;
  bottom.c = g.c + static_cast<long>(kKernelRows) * g.ldc;
  return {top, bottom};
}

RowsFn SelectRows(int m) {
  static constexpr RowsFn kAvx512[kKernelRows] = {
      RowsAvx512<1>, RowsAvx512<2>, RowsAvx512<3>, RowsAvx512<4>,
      RowsAvx512<5>, RowsAvx512<6>, RowsAvx512<7>, RowsAvx512<8>};
  static constexpr RowsFn kAvx2[kKernelRows] = {
      RowsAvx2<1>, RowsAvx2<2>, RowsAvx2<3>, RowsAvx2<4>,
      RowsAvx2<5>, RowsAvx2<6>, RowsAvx2<7>, RowsAvx2<8>};
  switch (Isa()) {
  case 2:
    return kAvx512[m - 1];
  case 1:
    return kAvx2[m - 1];
  default:
    return RowsGeneric;
  }
}

// ---- packed weights: panels of kPackedPanel columns -------------------------
//
// packed[(q * K + p) * 32 + l] = B[q * 32 + l, p] (0 past N): panel q holds
// output columns [32 q, 32 q + 32), one 32-float vector per p.

// C[0:M, 32 q : 32 q + 32) = alpha * acc + beta * C (C not read when beta
// is 0), masked at N.
template <int M>
[[gnu::target("avx512f,avx2,fma")]] inline void
StorePanel(const SmallGemm &g, const __m512 (&acc)[M][2], int n, int q) {
  const __m512 alpha = _mm512_set1_ps(g.alpha), beta = _mm512_set1_ps(g.beta);
  for (int h = 0; h < 2; ++h) {
    const int j = q * kPackedPanel + h * 16;
    if (j >= n)
      break;
    const int count = std::min(16, n - j);
    const __mmask16 mask = static_cast<__mmask16>((1u << count) - 1);
    for (int i = 0; i < M; ++i) {
      float *out = g.c + static_cast<long>(i) * g.ldc + j;
      __m512 v = _mm512_mul_ps(alpha, acc[i][h]);
      if (g.beta != 0.0f)
        v = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(mask, out), v);
      _mm512_mask_storeu_ps(out, mask, v);
    }
  }
}

// How far ahead of the panel stream PanelsAvx512 and PanelsAvx2 prefetch
// (non-temporal), in floats: BT_CPU_PANEL_PREFETCH bytes (default 8192 on
// AVX-512, 4096 on AVX2; 0: no prefetch), for A/B measurements; a value
// that is not a non-negative integer is reported on stderr and the default
// kept. The hardware prefetcher alone did not keep the stream at the
// memory's rate once the FMAs of several rows sit between the loads: on a
// 2-core Zen 5 (2026-12-02, /tmp microbenchmark of this loop, 50304 x 512
// panels, 2 threads, median of 15) M = 8 streamed 40-43 GB/s without and
// 51-54 GB/s with an NTA prefetch 8 KiB ahead, a pure read 54-57 GB/s and
// M = 1 50-57 GB/s. On a 2-core Zen 3 (AVX2), block_main_b4_19 batch-8
// decode, 2 rounds: 2048 / 4096 / 8192 B took 1.54 / 1.28-1.32 / 1.36 s at
// 1 thread and 0.78-0.82 / 0.74-0.76 / 0.78-0.79 s at 2. A prefetch never
// faults, so running past the end of the packed copy is harmless.
long PanelPrefetchFloats() {
  static const long floats = [] {
    const long default_bytes = Isa() == 2 ? 8192 : 4096;
    const char *v = std::getenv("BT_CPU_PANEL_PREFETCH");
    long bytes = default_bytes;
    if (v != nullptr && *v != '\0' &&
        (!absl::SimpleAtoi(v, &bytes) || bytes < 0)) {
      std::fprintf(stderr,
                   "bt: warning: BT_CPU_PANEL_PREFETCH=%s is not a byte count "
                   "(a non-negative integer); using %ld\n",
                   v, default_bytes);
      bytes = default_bytes;
    }
    return bytes / static_cast<long>(sizeof(float));
  }();
  return floats;
}

// C[0:M, 32 q : 32 q + 32) for panels q in [q0, q1); with Prefetch, also a
// non-temporal prefetch `ahead` floats past the 128 B each K step loads.
template <int M, bool Prefetch>
[[gnu::target("avx512f,avx2,fma")]] void
PanelsAvx512Loop(const SmallGemm &g, const float *packed, int n, int q0,
                 int q1, long ahead) {
  for (int q = q0; q < q1; ++q) {
    __m512 acc[M][2];
    for (int i = 0; i < M; ++i)
      acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    const float *w = packed + static_cast<long>(q) * g.k * kPackedPanel;
    for (int p = 0; p < g.k; ++p, w += kPackedPanel) {
      if constexpr (Prefetch) {
        _mm_prefetch(reinterpret_cast<const char *>(w + ahead), _MM_HINT_NTA);
        _mm_prefetch(reinterpret_cast<const char *>(w + ahead + 16),
                     _MM_HINT_NTA);
      }
      const __m512 w0 = _mm512_load_ps(w), w1 = _mm512_load_ps(w + 16);
      for (int i = 0; i < M; ++i) {
        const __m512 x = _mm512_set1_ps(g.a[static_cast<long>(i) * g.lda + p]);
        acc[i][0] = _mm512_fmadd_ps(x, w0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(x, w1, acc[i][1]);
      }
    }
    StorePanel<M>(g, acc, n, q);
  }
}

template <int M>
void PanelsAvx512(const SmallGemm &g, const float *packed, int n, int q0,
                  int q1) {
  const long ahead = M >= 2 ? PanelPrefetchFloats() : 0;
  if (ahead > 0)
    PanelsAvx512Loop<M, true>(g, packed, n, q0, q1, ahead);
  else
    PanelsAvx512Loop<M, false>(g, packed, n, q0, q1, 0);
}

// AVX2 (16 ymm registers, too few for M x 32 accumulators): K in blocks of
// kAvx2BlockK steps, and each block in passes over groups of up to
// kAvx2PassRows rows: a group of 1-2 rows takes the whole panel (4 vectors
// of 8 columns) in one pass, a group of 3-6 rows one half (2 vectors) in
// each of two passes, so a pass keeps at most 12 accumulators, its weight
// vectors and one broadcast in registers. The passes after the first read
// the block (kAvx2BlockK x 128 B) from L1; without the blocking they read
// the whole panel (K x 128 B: 32 KiB at K = 256, all of Zen 3's L1d) from
// L2, and the 50304 x 256 LM head at M = 8 took 4.5 ms (2 threads, 2-core
// Zen 3, 46 GFLOP/s) against 2.0 ms at M = 1. The accumulators wait in
// `acc` between blocks; each output is still the sum over p in order, as
// in one pass (and as PanelsAvx512).
// For M >= 2 the first group's passes also prefetch (non-temporal) the
// lines of the block PanelPrefetchFloats() ahead, 2 lines (one K step) per
// step between them, so that misses stay in flight through the whole block
// (the hardware prefetcher alone let the compute and the DRAM stream take
// turns rather than overlap). Measured on a 2-core Zen 3 (2026-12-02, /tmp
// microbenchmark of this loop, 50304 x 512 panels, M = 8, best of 9): 2
// chunks of 2 rows x 4 vectors (8 accumulators, the loads of the weight
// folded into 8 FMAs per step) with the block two panels ahead: 7.7-8.1 ms
// at 1 thread, 3.9-4.2 ms at 2; these passes 4 KiB ahead: 6.1-6.4 ms and
// 3.2-3.3 ms (L2-resident panels: 73 -> 89 GFLOP/s at 1 thread, where
// OpenBLAS's sgemm peaks at 93-95); a pure read streams 22-24 GB/s at 1
// thread, the passes 16-18. Blocks of 16, 24, 64 or 128 steps, and a second
// (T1 / T2) prefetch 8-32 KiB ahead, were all slower.
constexpr int kAvx2BlockK = 32;
constexpr int kAvx2PassRows = 6;

[[gnu::target("avx2,fma")]] inline __m256 LoadAccAvx2(const float *acc,
                                                      bool first) {
  return first ? _mm256_setzero_ps() : _mm256_load_ps(acc);
}

// Accumulates rows [i0, i0 + R) x columns [8 h0, 8 (h0 + NH)) of the panel
// `w` over K steps [p0, p1) into `acc` (rows of 32 floats; the first
// block, p0 = 0, starts from zero), prefetching PFL lines of 64 B per step
// from the address `pf` on. Every accumulator stays in a register: one
// array per vector, all three row loops unrolled (GCC 12 otherwise stores
// the 12 accumulators of R = 6 to the stack on every step).
template <int R, int NH, int PFL>
[[gnu::target("avx2,fma")]] void PanelPassAvx2(const SmallGemm &g,
                                               const float *w, int p0, int p1,
                                               int i0, int h0, float *acc,
                                               uintptr_t pf) {
  static_assert((NH == 4 && R <= 2) || (NH == 2 && R <= kAvx2PassRows));
  __m256 c0[R], c1[R], c2[R], c3[R];
  float *out = acc + i0 * kPackedPanel + 8 * h0;
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    float *row = out + i * kPackedPanel;
    c0[i] = LoadAccAvx2(row, p0 == 0);
    c1[i] = LoadAccAvx2(row + 8, p0 == 0);
    if constexpr (NH == 4) {
      c2[i] = LoadAccAvx2(row + 16, p0 == 0);
      c3[i] = LoadAccAvx2(row + 24, p0 == 0);
    }
  }
  const float *a = g.a + static_cast<long>(i0) * g.lda;
  w += static_cast<long>(p0) * kPackedPanel + 8 * h0;
  for (int p = p0; p < p1; ++p, w += kPackedPanel) {
    // Hints, which never fault past the end (the addresses are integers:
    // no pointer past the allocation). Non-temporal: the streamed weight
    // (the 51.5 MB LM head) then evicts less of the next GEMMs' weights
    // from L2/L3; block_main_b4_5 batch-8 decode, 6 interleaved A/B runs:
    // 1052 -> 1138 tok/s (T0 -> NTA).
    const uintptr_t line = pf + static_cast<uintptr_t>(p - p0) * 64 * PFL;
    if constexpr (PFL >= 1)
      _mm_prefetch(reinterpret_cast<const char *>(line), _MM_HINT_NTA);
    if constexpr (PFL >= 2)
      _mm_prefetch(reinterpret_cast<const char *>(line + 64), _MM_HINT_NTA);
    const __m256 w0 = _mm256_load_ps(w), w1 = _mm256_load_ps(w + 8);
    __m256 w2 = w0, w3 = w1; // read only when NH == 4
    if constexpr (NH == 4) {
      w2 = _mm256_load_ps(w + 16);
      w3 = _mm256_load_ps(w + 24);
    }
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 x = _mm256_broadcast_ss(a + static_cast<long>(i) * g.lda + p);
      c0[i] = _mm256_fmadd_ps(x, w0, c0[i]);
      c1[i] = _mm256_fmadd_ps(x, w1, c1[i]);
      if constexpr (NH == 4) {
        c2[i] = _mm256_fmadd_ps(x, w2, c2[i]);
        c3[i] = _mm256_fmadd_ps(x, w3, c3[i]);
      }
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    float *row = out + i * kPackedPanel;
    _mm256_store_ps(row, c0[i]);
    _mm256_store_ps(row + 8, c1[i]);
    if constexpr (NH == 4) {
      _mm256_store_ps(row + 16, c2[i]);
      _mm256_store_ps(row + 24, c3[i]);
    }
  }
}

using PassFn = void (*)(const SmallGemm &, const float *, int, int, int, int,
                        float *, uintptr_t);

// The pass of a group of r rows, [r][prefetching]: the whole panel with 2
// lines per step, or a half with 1. Only the first group prefetches, and
// it has one row only when M = 1, which never prefetches: no [1][1].
constexpr PassFn kAvx2Passes[kAvx2PassRows + 1][2] = {
    {nullptr, nullptr},
    {PanelPassAvx2<1, 4, 0>, nullptr},
    {PanelPassAvx2<2, 4, 0>, PanelPassAvx2<2, 4, 2>},
    {PanelPassAvx2<3, 2, 0>, PanelPassAvx2<3, 2, 1>},
    {PanelPassAvx2<4, 2, 0>, PanelPassAvx2<4, 2, 1>},
    {PanelPassAvx2<5, 2, 0>, PanelPassAvx2<5, 2, 1>},
    {PanelPassAvx2<6, 2, 0>, PanelPassAvx2<6, 2, 1>}};

// C[0:M, j0 : j0 + count) = alpha * acc + beta * C, 8 columns at a time
// (a full panel) or one at a time (the last, partial panel).
[[gnu::target("avx2,fma")]] void StorePanelAvx2(const SmallGemm &g,
                                                const float *acc, int j0,
                                                int count) {
  for (int i = 0; i < g.m; ++i) {
    const float *v = acc + i * kPackedPanel;
    if (count < kPackedPanel) {
      for (int l = 0; l < count; ++l)
        Store(g, i, j0 + l, v[l]);
      continue;
    }
    float *out = g.c + static_cast<long>(i) * g.ldc + j0;
    const __m256 alpha = _mm256_set1_ps(g.alpha), beta = _mm256_set1_ps(g.beta);
    for (int h = 0; h < kPackedPanel / 8; ++h) {
      __m256 r = _mm256_mul_ps(alpha, _mm256_load_ps(v + 8 * h));
      if (g.beta != 0.0f)
        r = _mm256_fmadd_ps(beta, _mm256_loadu_ps(out + 8 * h), r);
      _mm256_storeu_ps(out + 8 * h, r);
    }
  }
}

void PanelsAvx2(const SmallGemm &g, const float *packed, int n, int q0,
                int q1) {
  alignas(32) float acc[kPackedGemmMaxM * kPackedPanel];
  const long ahead = g.m >= 2 ? PanelPrefetchFloats() : 0;
  for (int q = q0; q < q1; ++q) {
    const float *w = packed + static_cast<long>(q) * g.k * kPackedPanel;
    for (int p0 = 0; p0 < g.k; p0 += kAvx2BlockK) {
      const int p1 = std::min(g.k, p0 + kAvx2BlockK);
      const uintptr_t pf = reinterpret_cast<uintptr_t>(w) +
                           (static_cast<uintptr_t>(p0) * kPackedPanel + ahead) *
                               sizeof(float);
      for (int i0 = 0; i0 < g.m; i0 += kAvx2PassRows) {
        const int r = std::min(kAvx2PassRows, g.m - i0);
        const PassFn pass = kAvx2Passes[r][i0 == 0 && ahead > 0];
        pass(g, w, p0, p1, i0, 0, acc, pf);
        if (r > 2) // the second half; its prefetches follow the first's
          pass(g, w, p0, p1, i0, 2, acc,
               pf + static_cast<uintptr_t>(p1 - p0) * 64);
      }
    }
    const int j0 = q * kPackedPanel;
    StorePanelAvx2(g, acc, j0, std::min(kPackedPanel, n - j0));
  }
}

using PanelsFn = void (*)(const SmallGemm &, const float *, int, int, int);

PanelsFn SelectPanels(int m);

void PanelsChunked(const SmallGemm &g, const float *packed, int n, int q0,
                   int q1) {
  const auto [top, bottom] = SplitRows(g);
  const PanelsFn first = SelectPanels(top.m), second = SelectPanels(bottom.m);
  for (int q = q0; q < q1; ++q) {
    first(top, packed, n, q, q + 1);
    second(bottom, packed, n, q, q + 1);
  }
}

PanelsFn SelectPanels(int m) {
  if (m > kKernelRows && Isa() == 2)
    return PanelsChunked;
  static constexpr PanelsFn kAvx512[kKernelRows] = {
      PanelsAvx512<1>, PanelsAvx512<2>, PanelsAvx512<3>, PanelsAvx512<4>,
      PanelsAvx512<5>, PanelsAvx512<6>, PanelsAvx512<7>, PanelsAvx512<8>};
  switch (Isa()) {
  case 2:
    return kAvx512[m - 1];
  case 1:
    return PanelsAvx2;
  default:
    return nullptr; // no packing without AVX2
  }
}

// ---- the registry of constant ranges and their packed weights ---------------

struct PackKey {
  const float *b;
  int n, k, ldb;
  bool operator==(const PackKey &o) const {
    return b == o.b && n == o.n && k == o.k && ldb == o.ldb;
  }
  template <typename H> friend H AbslHashValue(H h, const PackKey &key) {
    return H::combine(std::move(h), key.b, key.n, key.k, key.ldb);
  }
};

struct FreeDeleter {
  void operator()(const float *p) const { std::free(const_cast<float *>(p)); }
};

struct Registry {
  absl::Mutex mu;
  // start -> end of each constant range.
  std::map<uintptr_t, uintptr_t> ranges ABSL_GUARDED_BY(mu);
  // Shared: a product in flight keeps its panels alive even when another
  // thread's ReleaseConstantWeights clears the registry meanwhile.
  absl::flat_hash_map<PackKey, std::shared_ptr<const float>> packed
      ABSL_GUARDED_BY(mu);
  size_t packed_bytes ABSL_GUARDED_BY(mu) = 0;
  std::atomic<bool> any{false};
};

Registry &GetRegistry() {
  static Registry *r = new Registry;
  return *r;
}

struct PackWork {
  const float *b;
  int n, k, ldb;
  float *packed;
  long panels;
};

// Panels [q0, q1) of B: for each p, the 32 rows' elements side by side (the
// rows are read in parallel streams; the panel is written sequentially).
void PackPanels(const PackWork &w, long q0, long q1) {
  for (long q = q0; q < q1; ++q) {
    float *out = w.packed + q * w.k * kPackedPanel;
    const long j0 = q * kPackedPanel;
    const int rows = static_cast<int>(std::min<long>(kPackedPanel, w.n - j0));
    const float *row0 = w.b + j0 * w.ldb;
    for (int p = 0; p < w.k; ++p, out += kPackedPanel) {
      int l = 0;
      for (; l < rows; ++l)
        out[l] = row0[static_cast<long>(l) * w.ldb + p];
      for (; l < kPackedPanel; ++l)
        out[l] = 0.0f;
    }
  }
}

void PackShare(void *data) {
  const PackWork &w = *static_cast<const PackWork *>(data);
  const long team = Omp().num_threads(), id = Omp().thread_num();
  PackPanels(w, w.panels * id / team, w.panels * (id + 1) / team);
}

// B [n, k] (leading dimension ldb) as panels, packed on the pool's threads;
// nullptr when out of memory.
float *Pack(const float *b, int n, int k, int ldb) {
  const long panels = (n + kPackedPanel - 1) / kPackedPanel;
  const size_t bytes = static_cast<size_t>(panels) * k * kPackedPanel * 4;
  float *packed = static_cast<float *>(std::aligned_alloc(64, bytes));
  if (packed == nullptr)
    return nullptr;
  PackWork work{b, n, k, ldb, packed, panels};
  const int threads = static_cast<long>(n) * k >= kParallelElements &&
                              Omp().parallel != nullptr
                          ? std::max(1, openblas_get_num_threads())
                          : 1;
  if (threads > 1)
    Omp().parallel(PackShare, &work, static_cast<unsigned>(threads), 0);
  else
    PackPanels(work, 0, panels);
  return packed;
}

// The packed copy of B when B lies in a constant range (packed now if it is
// the first use), else null.
std::shared_ptr<const float> PackedFor(const float *b, int n, int k, int ldb) {
  Registry &r = GetRegistry();
  if (!r.any.load(std::memory_order_acquire))
    return nullptr;
  absl::MutexLock lock(&r.mu);
  const PackKey key{b, n, k, ldb};
  if (auto it = r.packed.find(key); it != r.packed.end())
    return it->second;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(b);
  const uintptr_t end =
      begin + (static_cast<uintptr_t>(n - 1) * ldb + k) * sizeof(float);
  auto range = r.ranges.upper_bound(begin);
  if (range == r.ranges.begin())
    return nullptr;
  --range;
  if (end > range->second)
    return nullptr;
  float *packed = Pack(b, n, k, ldb);
  if (packed == nullptr)
    return nullptr;
  r.packed_bytes += static_cast<size_t>((n + kPackedPanel - 1) / kPackedPanel) *
                    k * kPackedPanel * sizeof(float);
  std::shared_ptr<const float> shared(packed, FreeDeleter());
  r.packed.emplace(key, shared);
  return shared;
}

// The columns of one product, split over the threads of a pool team.
struct ParallelWork {
  const SmallGemm *gemm;
  int n;
  RowsFn rows;         // unpacked: rows of B
  PanelsFn panels;     // packed: panels of `packed`
  const float *packed;
};

// One thread's share: contiguous panels (packed) or rows of B in multiples
// of 8 (unpacked).
void RunShare(void *data) {
  const ParallelWork &work = *static_cast<const ParallelWork *>(data);
  const long team = Omp().num_threads();
  const long id = Omp().thread_num();
  if (work.packed != nullptr) {
    const long panels = (work.n + kPackedPanel - 1) / kPackedPanel;
    const int q0 = static_cast<int>(panels * id / team);
    const int q1 = static_cast<int>(panels * (id + 1) / team);
    if (q0 < q1)
      work.panels(*work.gemm, work.packed, work.n, q0, q1);
    return;
  }
  const long groups = (work.n + 7) / 8;
  const int j0 = static_cast<int>(std::min<long>(work.n, groups * id / team * 8));
  const int j1 =
      static_cast<int>(std::min<long>(work.n, groups * (id + 1) / team * 8));
  if (j0 < j1)
    work.rows(*work.gemm, j0, j1);
}

} // namespace
} // namespace bt::rt

namespace bt::rt {
namespace {

/// C = alpha * op(A) * op(B) + beta * C for a tiny row-major product, as
/// axpy rows (C[i, :] += alpha A[i, p] B[p, :], vectorizable over N); a
/// transposed B is first copied to [K, N]. beta == 0 does not read C (BLAS
/// semantics).
void TinyGemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
              const float *a, int lda, const float *b, int ldb, float beta,
              float *c, int ldc) {
  thread_local std::vector<float> bt_scratch;
  const float *rows = b;
  int ld = ldb;
  if (trans_b) {
    bt_scratch.resize(static_cast<size_t>(k) * n);
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p)
        bt_scratch[static_cast<size_t>(p) * n + j] =
            b[static_cast<size_t>(j) * ldb + p];
    rows = bt_scratch.data();
    ld = n;
  }
  for (int i = 0; i < m; ++i) {
    float *ci = c + static_cast<size_t>(i) * ldc;
    if (beta == 0.0f)
      std::fill_n(ci, n, 0.0f);
    else if (beta != 1.0f)
      for (int j = 0; j < n; ++j)
        ci[j] *= beta;
    for (int p = 0; p < k; ++p) {
      const float aip =
          alpha * (trans_a ? a[static_cast<size_t>(p) * lda + i]
                           : a[static_cast<size_t>(i) * lda + p]);
      const float *bp = rows + static_cast<size_t>(p) * ld;
      for (int j = 0; j < n; ++j)
        ci[j] += aip * bp[j];
    }
  }
}

} // namespace
} // namespace bt::rt

extern "C" void bt_cpu_sgemm(int order, int trans_a, int trans_b, int m, int n,
                             int k, float alpha, const float *a, int lda,
                             const float *b, int ldb, float beta, float *c,
                             int ldc) {
  using namespace bt::rt;
  // BT_CPU_SGEMM=cblas sends every product to cblas_sgemm (the code before
  // the small-M path), =rows keeps the small path without packing, for A/B
  // measurements with `bench`.
  static const int mode = [] {
    const char *v = std::getenv("BT_CPU_SGEMM");
    const std::string s = v == nullptr ? "" : v;
    return s == "cblas" ? 0 : s == "rows" ? 1 : 2;
  }();
  MatchBlasThreadsToTeam(Omp().in_parallel != nullptr &&
                         Omp().in_parallel() != 0);
  // Linear-layout products of up to kPackedGemmMaxM rows; those of more than
  // kSmallGemmMaxM rows only against a packed (constant) weight, so that
  // the products of training (never packed) keep cblas_sgemm's summation.
  const bool linear = mode > 0 && order == CblasRowMajor &&
                      trans_a == CblasNoTrans && trans_b == CblasTrans &&
                      m >= 1 && m <= kPackedGemmMaxM && n >= 1 && k >= 1;
  const PanelsFn panels = linear ? SelectPanels(m) : nullptr;
  std::shared_ptr<const float> packed; // alive until the product is done
  if (mode == 2 && panels != nullptr)
    packed = PackedFor(b, n, k, ldb);
  const bool small = linear && (m <= kSmallGemmMaxM || packed != nullptr);
  if (!small && mode > 0 && order == CblasRowMajor && m >= 1 && n >= 1 &&
      k >= 1 && static_cast<long>(m) * n * k <= kTinyGemmWork) {
    TinyGemm(trans_a == CblasTrans, trans_b == CblasTrans, m, n, k, alpha, a,
             lda, b, ldb, beta, c, ldc);
    return;
  }
  if (!small) {
    cblas_sgemm(static_cast<CBLAS_ORDER>(order),
                static_cast<CBLAS_TRANSPOSE>(trans_a),
                static_cast<CBLAS_TRANSPOSE>(trans_b), m, n, k, alpha, a, lda,
                b, ldb, beta, c, ldc);
    return;
  }
  const SmallGemm gemm{m, k, alpha, a, lda, b, ldb, beta, c, ldc};
  ParallelWork work{&gemm, n, packed != nullptr ? nullptr : SelectRows(m),
                    panels, packed.get()};
  const long elements = static_cast<long>(n) * k;
  const int threads =
      elements >= kParallelElements && Omp().parallel != nullptr
          ? std::clamp(openblas_get_num_threads(), 1, std::max(1, n / 64))
          : 1;
  if (threads <= 1) {
    if (work.packed != nullptr)
      work.panels(gemm, work.packed, n, 0,
                  (n + kPackedPanel - 1) / kPackedPanel);
    else
      work.rows(gemm, 0, n);
    return;
  }
  Omp().parallel(RunShare, &work, static_cast<unsigned>(threads), 0);
}

namespace bt::rt {

void RegisterConstantWeights(const void *data, size_t bytes) {
  if (data == nullptr || bytes == 0)
    return;
  Registry &r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  uintptr_t &end = r.ranges[begin];
  end = std::max(end, begin + bytes);
  r.any.store(true, std::memory_order_release);
}

void ReleaseConstantWeights() {
  Registry &r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  r.any.store(false, std::memory_order_release);
  r.ranges.clear();
  r.packed.clear();
  r.packed_bytes = 0;
}

size_t PackedWeightBytes() {
  Registry &r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  return r.packed_bytes;
}

} // namespace bt::rt
