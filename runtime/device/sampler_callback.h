//===- sampler_callback.h - the kernels' sampler callback -------*- C++ -*-===//
//
// The compiled `decode_tokens` entry point (docs/generation.md) calls back
// into the runtime once per token-decoder step:
//
//   void _mlir_ciface_bt_rt_sample(int64_t sampler,
//                                  StridedMemRefType<float, 2> *logits,
//                                  StridedMemRefType<int64_t, 1> *tokens);
//
// This is the kernel ABI's side of it (docs/abi.md): the symbol, which every
// binary linking the runtime exports dynamically so that kernel libraries
// resolve it against the process like cblas_sgemm, and the registry of the
// `sampler` handles it dispatches to. What a handle samples with is not the
// device's business: bt::rt::Sampler (generate/sampler.h) registers itself
// here; handle 0 is a stateless greedy sampler. The CUDA device's callback
// (_mlir_ciface_bt_gpu_sample) copies the logits to the host and comes here
// too.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DEVICE_SAMPLER_CALLBACK_H
#define BT_RUNTIME_DEVICE_SAMPLER_CALLBACK_H

#include <cstdint>

namespace bt::rt {

/// MLIR's StridedMemRefType<T, N> (a memref descriptor, docs/abi.md), without
/// depending on MLIR: allocated, aligned, offset, sizes[N], strides[N]
/// (offset and strides in elements).
template <typename T, int N> struct StridedMemRef {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[N];
  int64_t strides[N];
};

/// What a `sampler` handle stands for: one step picks a token per row of
/// the logits.
class SamplerCallbackTarget {
public:
  virtual ~SamplerCallbackTarget() = default;
  /// Reads logits F32 [B', V] and writes tokens I64 [B'] (any strides).
  /// Must not throw or abort on bad input: it records the error for its
  /// owner to report after the kernel returns.
  virtual void Step(const StridedMemRef<float, 2> &logits,
                    StridedMemRef<int64_t, 1> &tokens) = 0;

  /// A step a device may run itself (docs/generation.md, "Sampling on the
  /// device"): greedy or sampled (temperature, top-k, top-p from one
  /// SplitMix64 stream per row), with the official EOS rule.
  struct DeviceStep {
    int64_t step_in_block = 0; ///< 0 .. L_B - 1
    int64_t eos_token_id = -1; ///< < 0: no EOS handling
    int64_t pad_token_id = 0;  ///< generation_pad_token_id
    /// Argmax (the fields below are unused), else a draw from the
    /// distribution of generate/sampler.h SamplingDistribution:
    bool greedy = true;
    double inv_temperature = 1.0; ///< 1 / temperature, as the CPU computes it
    int64_t top_k = 0;            ///< 0 or >= V: off
    double top_p = 1.0;           ///< 1: off
    /// Sampling only: when non-null, the SplitMix64 states (generate/
    /// sampler.h Rng::state) of the step's rows, [rows], which the device
    /// loads before the step; null when the device's states are current
    /// (it drew the previous tokens of the same rows in the same order).
    const uint64_t *rng_states = nullptr;
    /// The caller reads the step's logits after it (GenerateOptions::
    /// keep_step_logits). When false, a device that can choose a greedy
    /// token without storing the logits may leave them unwritten (the CUDA
    /// target's LM head with an argmax epilogue,
    /// _mlir_ciface_bt_gpu_lm_head_sample_bf16).
    bool logits_kept = true;
  };
  /// Called by a device's callback (the CUDA device's
  /// _mlir_ciface_bt_gpu_sample) before Step with the shapes of the step:
  /// logits [rows, vocab], tokens [token_rows]. Returns true when the step
  /// may run on the device (the target counts it as a step and fills
  /// `step`; Step is not called), false for Step on the host. The default
  /// is false.
  virtual bool StepOnDevice(int64_t rows, int64_t vocab, int64_t token_rows,
                            DeviceStep &step) {
    return false;
  }
};

/// Registers `target` under a fresh non-zero handle (the value to pass as an
/// entry point's `sampler` input) until UnregisterSamplerTarget. Thread-safe.
int64_t RegisterSamplerTarget(SamplerCallbackTarget *target);
void UnregisterSamplerTarget(int64_t handle);
/// The target registered under `handle`, or nullptr (also for 0).
SamplerCallbackTarget *LookupSamplerTarget(int64_t handle);

/// The index of the largest logit (the lowest index among equal maxima; -inf
/// counts as a value, so an all -inf row gives 0). Returns -1 if a logit is
/// NaN. `stride` is the element distance between consecutive logits.
/// Contiguous logits take an AVX2 single pass where the CPU has AVX2, else
/// ArgMaxContiguousPortable; strided ones a sequential scan.
int64_t ArgMax(const float *logits, int64_t vocab, int64_t stride = 1);

/// ArgMax of `vocab` contiguous logits with baseline vectors (GCC vector
/// extensions), the path of CPUs without AVX2; the same result as ArgMax.
/// Exposed for the tests, which run both paths on every machine.
int64_t ArgMaxContiguousPortable(const float *logits, int64_t vocab);

} // namespace bt::rt

extern "C" {
/// The sampler callback of compiled `decode_tokens` kernels
/// (docs/generation.md): LookupSamplerTarget(sampler)->Step(*logits,
/// *tokens). Handle 0 is a stateless greedy sampler (argmax per row, NaN
/// rows give 0, no EOS), for running a kernel outside a generation. An
/// unknown handle or a null descriptor is a contract violation: the process
/// aborts with a message.
void _mlir_ciface_bt_rt_sample(int64_t sampler,
                               bt::rt::StridedMemRef<float, 2> *logits,
                               bt::rt::StridedMemRef<int64_t, 1> *tokens);
/// The same for bf16 logits [B, V] (the bits, any strides; bt.sample of bf16
/// logits, the CUDA target's `--dtype bf16`): each logit is extended exactly
/// to f32 (bits << 16) into a dense [B, V] copy, which
/// _mlir_ciface_bt_rt_sample then samples from.
void _mlir_ciface_bt_rt_sample_bf16(int64_t sampler,
                                    bt::rt::StridedMemRef<uint16_t, 2> *logits,
                                    bt::rt::StridedMemRef<int64_t, 1> *tokens);
}

#endif // BT_RUNTIME_DEVICE_SAMPLER_CALLBACK_H
