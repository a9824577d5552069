//===- cuda_lm_head.cc - the LM head of a bf16 decode step ----------------===//
//
// The two ways the runtime computes the LM head of a `--dtype bf16` decode
// step for _mlir_ciface_bt_gpu_lm_head_sample_bf16 (cuda_call.cc, cuda.h):
// the cuBLAS GEMM into the logits, or bt_lm_head_argmax_bf16 into per-tile
// maxima (lib/Codegen/CUDA/GPUKernelText.h).
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bt/runtime/device/cuda/cuda.h"
#include "cblas.h"

namespace bt::rt {

// The launch bt_lm_head_argmax_bf16 is written for (lib/Codegen/CUDA/
// GPUKernelText.h): a block of 4 warps per tile of 64 vocabulary ids.
namespace {
constexpr int64_t kLMHeadTile = 64;
constexpr int64_t kLMHeadThreads = 128;
constexpr int32_t kLMHeadSharedBytes = 768;
} // namespace

// Whether bt_lm_head_argmax_bf16 computes logits [M, N] = x [M, K] · w [N,
// K]ᵀ of these views: K a multiple of 16 and every bf16 pair 4-byte aligned
// (the kernel reads x and w as I32 [., K / 2]: unit inner strides, even
// offsets and row strides), pv and pi [M, ceil(N / 64)] with unit inner
// strides.
bool LMHeadArgmaxFits(const StridedMemRef<uint16_t, 2> &x,
                      const StridedMemRef<uint16_t, 2> &w,
                      const StridedMemRef<uint16_t, 2> &logits,
                      const StridedMemRef<float, 2> &pv,
                      const StridedMemRef<int32_t, 2> &pi) {
  const int64_t m = x.sizes[0], k = x.sizes[1], n = w.sizes[0];
  const int64_t tiles = (n + kLMHeadTile - 1) / kLMHeadTile;
  auto pairs = [&](const StridedMemRef<uint16_t, 2> &v) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(v.aligned + v.offset);
    return v.strides[1] == 1 && base % 4 == 0 &&
           (v.sizes[0] == 1 || v.strides[0] % 2 == 0);
  };
  auto rows = [&](int64_t r, int64_t c, const int64_t *sizes,
                  const int64_t *strides) {
    return sizes[0] == r && sizes[1] == c && (c == 1 || strides[1] == 1);
  };
  return m >= 1 && n >= 1 && k >= 16 && k % 16 == 0 && w.sizes[1] == k &&
         logits.sizes[0] == m && logits.sizes[1] == n && pairs(x) && pairs(w) &&
         rows(m, tiles, pv.sizes, pv.strides) &&
         rows(m, tiles, pi.sizes, pi.strides) && m <= INT32_MAX &&
         n <= INT32_MAX;
}

// logits = x · wᵀ in bf16 through cuBLAS (the LM head of the unfused step:
// bt_gpu_gemm_bf16_out as bt-gemm-to-blas calls it, beta = 0).
absl::Status LMHeadGemmBf16(CudaBackend &gpu,
                            const StridedMemRef<uint16_t, 2> &x,
                            const StridedMemRef<uint16_t, 2> &w,
                            StridedMemRef<uint16_t, 2> &logits) {
  const int64_t m = x.sizes[0], k = x.sizes[1], n = w.sizes[0];
  if (w.sizes[1] != k || logits.sizes[0] != m || logits.sizes[1] != n ||
      std::max({m, n, k, x.strides[0], w.strides[0], logits.strides[0]}) >
          INT32_MAX)
    return absl::InvalidArgumentError(
        absl::StrCat("LM head: x [", m, ", ", k, "], w [", w.sizes[0], ", ",
                     w.sizes[1], "] and logits [", logits.sizes[0], ", ",
                     logits.sizes[1], "] do not form logits = x · wᵀ"));
  if (m == 0 || n == 0)
    return absl::OkStatus();
  // BLAS requires ld >= max(1, row length), also for one row.
  auto ld = [](int64_t stride, int64_t cols) {
    return static_cast<int32_t>(std::max(stride, std::max<int64_t>(cols, 1)));
  };
  return gpu.GemmBf16(CblasRowMajor, CblasNoTrans, CblasTrans,
                      static_cast<int32_t>(m), static_cast<int32_t>(n),
                      static_cast<int32_t>(k), 1.0f, x.aligned + x.offset,
                      ld(x.strides[0], k), w.aligned + w.offset,
                      ld(w.strides[0], k), 0.0f, logits.aligned + logits.offset,
                      ld(logits.strides[0], n), /*bf16_c=*/true);
}

// bt_lm_head_argmax_bf16 over x and w into pv and pi (LMHeadArgmaxFits holds).
absl::Status LMHeadArgmaxBf16(CudaBackend &gpu,
                              const StridedMemRef<uint16_t, 2> &x,
                              const StridedMemRef<uint16_t, 2> &w,
                              const StridedMemRef<float, 2> &pv,
                              const StridedMemRef<int32_t, 2> &pi) {
  const auto ptr = [](const void *p) {
    return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p));
  };
  // x and w as I32 [., K / 2] (bf16 pairs): offsets and strides halve.
  auto pairs = [&](const StridedMemRef<uint16_t, 2> &v) {
    const int64_t a = ptr(v.aligned);
    const int64_t stride = v.sizes[0] == 1 ? v.sizes[1] : v.strides[0];
    return std::vector<int64_t>{
        a, a, v.offset / 2, v.sizes[0], v.sizes[1] / 2, stride / 2, 1};
  };
  std::vector<int64_t> words = pairs(x);
  for (int64_t v : pairs(w))
    words.push_back(v);
  const int64_t tiles = pv.sizes[1];
  words.insert(words.end(),
               {ptr(pv.allocated), ptr(pv.aligned), pv.offset, pv.sizes[0],
                tiles, pv.strides[0], 1, ptr(pi.allocated), ptr(pi.aligned),
                pi.offset, pi.sizes[0], tiles, pi.strides[0], 1});
  std::vector<void *> params;
  for (int64_t &v : words)
    params.push_back(&v);
  return gpu.Launch("bt_lm_head_argmax_bf16", tiles, 1, 1, kLMHeadThreads, 1, 1,
                    kLMHeadSharedBytes, params.data());
}

// BT_LM_HEAD_ARGMAX=0 turns the fused greedy LM head off (a benchmark's
// side-by-side comparison).
bool LMHeadArgmaxEnabled() {
  static const bool on = [] {
    const char *e = std::getenv("BT_LM_HEAD_ARGMAX");
    return !(e != nullptr && std::string(e) == "0");
  }();
  return on;
}

} // namespace bt::rt
