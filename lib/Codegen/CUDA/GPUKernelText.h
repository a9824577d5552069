//===- GPUKernelText.h - kernels written as MLIR text (internal) -*- C++ -*-===//
//
// The kernels that bt-gpu-sampler-kernels parses from MLIR text
// (GPUSamplerKernels.cpp: the samplers; GPULMHeadKernel.cpp: the LM head
// with a greedy argmax epilogue) and the template substitution they are
// written with. Internal to lib/Codegen/CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef BT_LIB_CODEGEN_GPUKERNELTEXT_H
#define BT_LIB_CODEGEN_GPUKERNELTEXT_H

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

namespace bt::codegen {

/// Replaces each `{KEY}` of `vars` in `text` (the keys of one template).
inline std::string
subst(std::string text,
      std::initializer_list<std::pair<const char *, std::string>> vars) {
  for (const auto &[key, value] : vars) {
    const std::string k = std::string("{") + key + "}";
    for (size_t at = text.find(k); at != std::string::npos;
         at = text.find(k, at + value.size()))
      text.replace(at, k.size(), value);
  }
  return text;
}

/// The text of `gpu.func @bt_lm_head_argmax_bf16(x, w, pv, pi)`, for a
/// `gpu.module` (GPULMHeadKernel.cpp). The greedy LM head of a bf16 decode
/// step without its logits in memory: logits[m, n] = Σ_k x[m, k] · w[n, k]
/// on the tensor cores (mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32, f32
/// accumulation over k in steps of 16), each rounded to bf16 (nearest even,
/// as cuBLAS stores the bf16 logits that bt_sample_greedy_bf16 reads), and
/// per row m and tile t of 64 ids the maximum and its lowest id:
///
/// - x: the final LayerNorm's output BF16 [M, K] as I32 [M, K / 2] (bf16
///   pairs, the lower id in the low half; any row stride), M >= 1;
/// - w: the LM head's weight BF16 [N, K] (`embed_out`, row-major) as I32
///   [N, K / 2], N >= 1; K a multiple of 16 (K / 2 of 8): the launcher's
///   precondition, not checked here;
/// - pv F32 [M, T], T = ceil(N / 64): the largest rounded logit of row m in
///   ids [64 t, 64 t + 64) ∩ [0, N), -inf when none exceeds -inf, NaN when
///   one of them is NaN;
/// - pi I32 [M, T]: the lowest id with that value, 2^31 - 1 when none
///   exceeds -inf.
///
/// Launch: grid T x 1 x 1, block 128 x 1 x 1 (4 warps, warp w computes ids
/// 64 t + 16 w .. + 15 of every row, m-tiles of 16 rows in turn), 768 bytes
/// of dynamic shared memory. The greedy token of row m is the entry of the
/// first tile (in t order) whose value is the row's maximum (strict >
/// across tiles keeps the lowest id), 0 when every value is -inf: the
/// choice of bt_sample_greedy_bf16 on the stored bf16 logits, up to the
/// order in which the GEMMs accumulate in f32.
std::string lmHeadArgmaxKernelText();

/// The vocabulary ids per tile of bt_lm_head_argmax_bf16 (the 64 of its
/// text): pv and pi have ceil(N / kLMHeadTile) columns.
constexpr int64_t kLMHeadTile = 64;

} // namespace bt::codegen

#endif // BT_LIB_CODEGEN_GPUKERNELTEXT_H
