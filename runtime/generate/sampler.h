//===- sampler.h - token sampling and the kernels' sampler callback -*- C++ -*-===//
//
// Sampling policies of generation (docs/generation.md, "Sampling"): greedy,
// temperature, top-k, top-p, with one random stream per sequence, and the
// official EOS semantics. The compiled `decode_tokens` entry point calls
//
//   void _mlir_ciface_bt_rt_sample(int64_t sampler,
//                                  StridedMemRefType<float, 2> *logits,
//                                  StridedMemRefType<int64_t, 1> *tokens);
//
// once per token-decoder step; `sampler` is the handle of a live Sampler
// (Sampler::handle(), passed to the entry point as its `sampler` input). The
// symbol and its handle registry are the kernel ABI's
// (device/sampler_callback.h); a Sampler registers itself there.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_GENERATE_SAMPLER_H
#define BT_RUNTIME_GENERATE_SAMPLER_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "bt/runtime/base/tensor.h"
#include "bt/runtime/device/sampler_callback.h"

namespace bt::rt {

/// How to choose the next token from a row of logits.
struct SamplingOptions {
  /// Argmax of the logits (the lowest id among equal maxima, as torch).
  /// When true, temperature / top_k / top_p / seed are ignored.
  bool greedy = true;
  /// Logits are divided by the temperature (> 0) before top-k / top-p and
  /// the softmax (HF order: temperature, top-k, top-p).
  double temperature = 1.0;
  /// Keep only the tokens whose logit is >= the k-th largest (ties at the
  /// threshold are kept, as HF's TopKLogitsWarper); 0 = off.
  int64_t top_k = 0;
  /// Nucleus: keep the smallest set of most likely tokens (probability
  /// descending, then id ascending) whose cumulative probability reaches
  /// top_p, including the token that crosses it (at least one token; as HF's
  /// TopPLogitsWarper); 1 = off. In (0, 1].
  double top_p = 1.0;
  /// Seed of the per-sequence random streams (see Sampler).
  uint64_t seed = 0;
};

/// InvalidArgument for temperature <= 0 or not finite (when !greedy),
/// top_k < 0, top_p outside (0, 1].
absl::Status ValidateSamplingOptions(const SamplingOptions &options);

/// A small, portable random stream (SplitMix64): identical on every platform
/// and library, so a seed reproduces the same tokens everywhere.
class Rng {
public:
  /// The stream of sequence `stream` under `seed`: streams of different
  /// sequences are independent (state = mix(seed, stream)).
  Rng(uint64_t seed, uint64_t stream);
  /// The stream whose state() is `state`.
  static Rng FromState(uint64_t state);
  uint64_t Next();
  /// Uniform in [0, 1) with 53 random bits.
  double Uniform();
  /// The state: SplitMix64's counter, which each Next() advances by a
  /// constant (the device's kernel bt_sample continues a stream from it).
  uint64_t state() const { return state_; }
  /// The stream after `draws` more Next() calls (O(1)).
  void Advance(uint64_t draws);

private:
  Rng() = default;
  uint64_t state_ = 0;
};

/// The distribution SampleToken draws from: probabilities over the vocabulary
/// after temperature, top-k and top-p (0 for masked tokens; they sum to 1).
/// Greedy gives a one-hot vector at ArgMax. Errors: InvalidArgument for bad
/// options, a NaN logit, or no finite logit when sampling.
absl::StatusOr<std::vector<double>>
SamplingDistribution(const SamplingOptions &options,
                     absl::Span<const float> logits);

/// Picks one token from `logits` (`vocab` values `stride` apart): ArgMax when
/// greedy, else one Uniform() draw u from `rng` and the first token id whose
/// cumulative SamplingDistribution probability exceeds u (ids in ascending
/// order). Exactly one draw per sampled token, none when greedy. `scratch`
/// is reused between calls. Errors: as SamplingDistribution.
absl::StatusOr<int64_t> SampleToken(const SamplingOptions &options,
                                    const float *logits, int64_t vocab,
                                    int64_t stride, Rng &rng,
                                    std::vector<double> &scratch);

/// The state behind a `sampler` handle during one generation: the policy,
/// one Rng per sequence, EOS bookkeeping and the rows of the current batch.
///
/// EOS (official semantics, docs/generation.md and the fixtures'
/// generate_eos.safetensors): when a sequence's sampled token is
/// `eos_token_id`, that token is returned and the sequence is finished; for
/// the remaining steps of the block (until the next BeginBlock) it gets
/// `generation_pad_token_id` without sampling (no random draw). A finished
/// sequence keeps getting the pad in later blocks (the generator drops it
/// from the batch instead). eos_token_id < 0 disables EOS handling.
///
/// Random streams: sequence s draws from Rng(options.seed, s), or from
/// Rng(seeds[s], 0) when per-sequence seeds are given; it draws once per
/// token it samples and at no other time. Its tokens therefore depend only on
/// its own logits and its stream, not on the other rows of the batch, their
/// order, or compaction (with `seeds`, not even on its index).
///
/// Not thread-safe: one generation drives one Sampler. The handle registry
/// itself is thread-safe.
class Sampler : public SamplerCallbackTarget {
public:
  struct Options {
    SamplingOptions sampling;
    int64_t vocab_size = 0;               // logits rows must have this width
    int64_t eos_token_id = -1;            // < 0: no EOS handling
    int64_t generation_pad_token_id = 0;  // returned after EOS within a block
    /// Optional per-sequence seeds (size num_sequences); see above.
    std::vector<uint64_t> seeds;
    /// Steps may run on the device (StepOnDevice): greedy and sampled.
    bool device = false;
    /// The caller reads each step's logits after the step
    /// (GenerateOptions::keep_step_logits); DeviceStep::logits_kept.
    bool logits_kept = true;
  };

  /// A sampler for `num_sequences` sequences, registered under a fresh
  /// non-zero handle (RegisterSamplerTarget). Errors: InvalidArgument for bad options, vocab_size <=
  /// 0, num_sequences < 0, or seeds of the wrong size.
  static absl::StatusOr<std::unique_ptr<Sampler>> Create(const Options &options,
                                                         int64_t num_sequences);
  ~Sampler() override; // unregisters the handle
  Sampler(const Sampler &) = delete;
  Sampler &operator=(const Sampler &) = delete;

  /// The value to pass as the entry point's `sampler` input.
  int64_t handle() const { return handle_; }

  /// Starts a block: row r of the next Step calls' logits is sequence
  /// rows[r]. Clears the in-block step count. Errors: InvalidArgument for a
  /// sequence index out of range or repeated.
  absl::Status BeginBlock(std::vector<int64_t> rows);

  /// One step for the current rows: reads logits [B', V] and writes tokens
  /// [B'] (any strides). On a shape mismatch or bad logits it records the
  /// first error (status()), writes generation_pad_token_id (a valid id) for
  /// the affected rows and returns.
  void Step(const StridedMemRef<float, 2> &logits,
            StridedMemRef<int64_t, 1> &tokens) override;
  /// Sampling on the device (SamplerCallbackTarget::StepOnDevice): true for
  /// every step of a block begun with every row live, when Options::device
  /// is set and the shapes match the batch. The device's kernel then applies
  /// the EOS rule within the block; EndBlock does the bookkeeping from the
  /// block's tokens. When sampling (not greedy), the first device step of a
  /// block hands the rows' random-stream states to the device
  /// (DeviceStep::rng_states) unless the device already holds them: the
  /// same rows in the same order as its last block, with no host step since.
  bool StepOnDevice(int64_t rows, int64_t vocab, int64_t token_rows,
                    DeviceStep &step) override;
  /// After a block: when its steps ran on the device, records each row's
  /// EOS step from its tokens I64 [B', L_B] (host, dense; the first EOS of
  /// the row) and, when sampling, advances each row's stream by the draws
  /// the device made (one per step up to and including its EOS). Nothing to
  /// do after host steps.
  void EndBlock(const Tensor &tokens);
  /// Steps of the current block that ran on the device.
  int64_t device_steps_in_block() const { return device_steps_in_block_; }

  /// Replays of a recorded block (decode_tokens recorded as a CUDA graph,
  /// generate.cc): whether every step of the current block runs on the
  /// device with nothing handed over — StepOnDevice's conditions for all
  /// rows, and when sampling, the device already holding these rows'
  /// streams — so that a recording of it holds no host step and no copy.
  bool BlockReplayable() const;
  /// Between BeginRecording and EndRecording (the host code running once
  /// under a recording, which computes nothing), StepOnDevice describes the
  /// steps 0, 1, ... of a replayable block without counting them. Errors of
  /// BeginRecording: FailedPrecondition when the block is not replayable
  /// or has begun.
  absl::Status BeginRecording();
  void EndRecording() { recording_ = false; }
  /// Counts `steps` steps of the current block run on the device by a
  /// replay, as StepOnDevice counts each step the host code runs (the
  /// block must be replayable).
  void ReplayedSteps(int64_t steps);
  /// Step over dense tensors: logits F32 [B', V] -> tokens I64 [B'].
  absl::Status StepTensors(const Tensor &logits, Tensor &tokens);

  /// The first error a Step recorded (OK if none).
  const absl::Status &status() const { return status_; }
  /// The sequence emitted EOS.
  bool finished(int64_t seq) const { return eos_block_step_[seq] >= 0 || done_[seq]; }
  /// The step of the current block at which `seq` emitted EOS, or -1 if it
  /// did not emit EOS in this block.
  int64_t eos_step_in_block(int64_t seq) const { return eos_block_step_[seq]; }
  const std::vector<int64_t> &rows() const { return rows_; }
  int64_t steps_in_block() const { return steps_in_block_; }
  /// Step calls so far, and the rows they covered (Σ B').
  int64_t total_steps() const { return total_steps_; }
  int64_t total_rows() const { return total_rows_; }
  int64_t num_sequences() const { return static_cast<int64_t>(done_.size()); }

  /// The live Sampler registered under `handle`, or nullptr.
  static Sampler *Lookup(int64_t handle);

private:
  explicit Sampler(Options options) : options_(std::move(options)) {}
  void Fail(absl::Status s);

  Options options_;
  int64_t handle_ = 0;
  std::vector<Rng> rngs_;
  std::vector<int64_t> eos_block_step_; // step of this block's EOS, else -1
  std::vector<bool> done_;              // emitted EOS in an earlier block
  std::vector<int64_t> rows_;
  std::vector<double> scratch_;
  int64_t steps_in_block_ = 0, total_steps_ = 0, total_rows_ = 0;
  int64_t device_steps_in_block_ = 0;
  bool block_on_device_ = false; // every row live at BeginBlock
  bool recording_ = false;
  int64_t recorded_steps_ = 0;
  // The rows whose stream states the device holds, in its row order (valid
  // while device_rng_valid_), and the states handed over by StepOnDevice.
  std::vector<int64_t> device_rng_rows_;
  bool device_rng_valid_ = false;
  std::vector<uint64_t> rng_upload_;
  absl::Status status_;
};

} // namespace bt::rt

#endif // BT_RUNTIME_GENERATE_SAMPLER_H
