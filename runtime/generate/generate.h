//===- generate.h - batched generation --------------------------*- C++ -*-===//
//
// The generation loop of docs/generation.md over a compiled model's entry
// points:
//
//   Block Transformer:  prefill -> [decode_tokens -> EOS bookkeeping ->
//                       compaction -> decode_block]*
//   vanilla GPT-NeoX:   prefill -> [sample -> EOS bookkeeping -> compaction
//                       -> decode_step]*
//
// The runtime owns the KV caches (in-out arguments kv_cache / kv_valid,
// batch-major, sized exactly for the prompt and the generated blocks), tracks
// their fill length (cache_length), removes finished sequences from the batch
// (their cache rows are dropped by moving the live rows down, and the buffer
// is shrunk once at most half of it is live) and samples through a Sampler
// (bt/runtime/sampler.h) whose handle it passes to decode_tokens.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_GENERATE_H
#define BT_RUNTIME_GENERATE_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bt/runtime/exec/model.h"
#include "bt/runtime/generate/sampler.h"
#include "bt/runtime/base/tensor.h"

namespace bt::rt {

struct GenerateOptions {
  /// Number of new tokens per sequence (>= 0). For a Block Transformer the
  /// last block is decoded whole and truncated when L_B does not divide it.
  int64_t max_new_tokens = 32;
  /// Greedy by default (bt/runtime/sampler.h).
  SamplingOptions sampling;
  /// Optional per-sequence seeds (size B): sequence s samples from
  /// Rng(seeds[s], 0) instead of Rng(sampling.seed, s).
  std::vector<uint64_t> seeds;
  /// Block Transformer: the token decoder's RoPE positions
  /// [P_0..P_{P-1}, t_0..t_{L_B-2}] are the official generate's
  /// [0]*P, 1, .., L_B-1 instead of the training positions 0 .. P+L_B-2
  /// (fixtures README, "Position-id finding"). Ignored for vanilla models,
  /// whose positions are always HF's.
  bool official_generate_positions = false;
  /// Stop sequences at EOS (config.eos_token_id), with the official
  /// semantics (docs/generation.md). When false, EOS is an ordinary token.
  bool stop_at_eos = true;
  /// Keep every step's logits in GenerateResult::step_logits ([N, B, V]
  /// floats: 3.3 GB for 2048 tokens x 8 rows x 50304). When false,
  /// step_logits is left unallocated (an invalid Tensor) and nothing is
  /// copied: what benchmarks want.
  bool keep_step_logits = true;
  /// Called after prefill with (0, max_new_tokens) and after each generated
  /// block (vanilla: token) with the number of tokens produced per row so
  /// far, from the calling thread (a progress bar). May be empty.
  std::function<void(int64_t produced, int64_t total)> on_progress;
  /// Keep the generation's state (KV caches, context, token ids, positions)
  /// in device memory across calls when the model's device can
  /// (Device::resident_calls: cuda, cuda-emu): per decode step only the
  /// token ids (and the step logits when kept, and the host sampler's
  /// copies) cross between host and device. False, or the environment
  /// variable BT_RESIDENT_STATE=0, copies the state in and out of every call
  /// (Model::Run), as on the CPU.
  bool resident_state = true;
  /// Let greedy steps of decode_tokens sample on the device when its
  /// callback can (cuda, cuda-emu: Sampler::StepOnDevice; the logits stay on
  /// the device, the tokens are the CPU sampler's). False, or the
  /// environment variable BT_DEVICE_SAMPLING=0, samples every step on the
  /// host (the logits are copied down, the tokens up).
  bool device_sampling = true;
  /// On a device with recorded calls (Device::recorded_calls: cuda,
  /// cuda-emu) and the resident state, run decode_tokens as a recording
  /// (a CUDA graph: one launch per call) once its block samples wholly on
  /// the device (Sampler::BlockReplayable): recorded on the first such call
  /// of each batch size after the first block, replayed from then on. The
  /// tokens are those of direct calls. False, or the environment variable
  /// BT_CUDA_GRAPHS=0, calls it directly every block.
  bool cuda_graphs = true;
};

/// Work done by one generation (what the kernels were asked to compute).
/// Token-decoder work (decode_tokens calls, steps, rows) depends on the
/// number of generated blocks and the batch, never on the prompt length:
/// prompt blocks other than the last never run the token decoder.
/// Calls of one entry point run as replays of a recording (a CUDA graph):
/// the replays, the recordings made (one per batch size / cache buffer),
/// and the nodes (kernels, GEMMs, copies) of the last recording.
struct GraphReplays {
  int64_t replays = 0;
  int64_t recordings = 0;
  int64_t nodes = 0;
};

struct GenerateCounters {
  int64_t prefill_calls = 0;
  /// Prompt blocks (vanilla: prompt tokens) run through prefill, summed over
  /// the rows of the batch (B x N).
  int64_t blocks_prefilled = 0;
  int64_t decode_tokens_calls = 0;
  /// Of these: the replays of a recording (GenerateOptions::cuda_graphs).
  GraphReplays decode_tokens_graph;
  /// Token-decoder steps: sampler calls made by decode_tokens (L_B each).
  int64_t token_decoder_steps = 0;
  /// Rows computed by the token decoder: sum over its steps of the batch.
  int64_t token_decoder_rows = 0;
  int64_t decode_block_calls = 0;
  /// Rows computed by decode_block (sum over calls of the batch).
  int64_t decode_block_rows = 0;
  /// Of the decode_block calls: the replays of a recording (an artifact
  /// that keeps the cache length on the device, GenerateOptions::
  /// cuda_graphs).
  GraphReplays decode_block_graph;
  /// Vanilla: decode_step calls and their rows, and of the calls the
  /// replays of a recording (as for decode_block).
  int64_t decode_step_calls = 0;
  int64_t decode_step_rows = 0;
  GraphReplays decode_step_graph;
  /// Sequences removed from the batch after EOS (cache rows released).
  int64_t rows_compacted = 0;
  /// Tokens sampled by the runtime itself (vanilla).
  int64_t tokens_sampled = 0;
  /// Cache capacity per sequence in entries (blocks; vanilla: tokens) and
  /// its fill length at the end.
  int64_t cache_capacity = 0;
  int64_t cache_length = 0;
  /// Bytes of kv_cache + kv_valid allocated at the start, and at the end
  /// (after finished rows were released).
  int64_t cache_bytes_initial = 0;
  int64_t cache_bytes_final = 0;
  /// Wall time in prefill and in the decode loop (seconds).
  double prefill_seconds = 0;
  double decode_seconds = 0;
  /// The state was kept on the device (GenerateOptions::resident_state).
  bool resident_state = false;
  /// Host<->device traffic and launches of the decode loop (after prefill;
  /// all zero on the CPU), and the decode steps it ran: tokens generated per
  /// row (token-decoder steps; vanilla: sampled tokens). Its sampler_bytes
  /// also count, for a vanilla model on the resident path, the logits the
  /// runtime copies to the host to sample from.
  DeviceTraffic decode_traffic;
  int64_t decode_token_steps = 0;
};

/// One line per group, e.g.
///   prefill: 1 call, 6 blocks (rows x blocks)
///   decode_tokens: 3 calls, 12 token-decoder steps, 24 rows
///   decode_block: 2 calls, 4 rows; 0 rows compacted
///   kv cache: capacity 6 entries, length 5, 1920 -> 1920 bytes
std::string FormatCounters(const GenerateCounters &c);

struct GenerateResult {
  /// I64 [B, N]: the new tokens. After a sequence's EOS: the generation pad
  /// (config.generation_pad_token_id) for the rest of that block, then
  /// config.pad_token_id.
  Tensor new_tokens;
  /// F32 [N, B, V]: the next-token logits of every step; 0 for the steps of
  /// a sequence after the block in which it finished (never computed).
  /// Invalid (not allocated) with GenerateOptions::keep_step_logits false.
  Tensor step_logits;
  /// Per sequence: emitted EOS within the N tokens, and the number of tokens
  /// up to and including EOS (N if none).
  std::vector<bool> finished;
  std::vector<int64_t> lengths;
  GenerateCounters counters;
};

/// Left-pads variable-length prompts to the longest one: input_ids I64 [B, T]
/// (pad_id in the padding) and attention_mask I64 [B, T] (0 in the padding).
/// Errors: InvalidArgument for no prompts or an empty prompt.
absl::StatusOr<std::pair<Tensor, Tensor>>
LeftPadPrompts(const std::vector<std::vector<int64_t>> &prompts, int64_t pad_id);

/// Checks a generation request before anything is allocated (issue 14):
/// for a Block Transformer, ceil(prompt_length / L_B) + ceil(max_new_tokens /
/// L_B) blocks within the block decoder's max_position_embeddings
/// (InvalidArgument naming both); the bytes of the outputs (new tokens I64
/// [B, N], step logits F32 [N, B, V] when kept) and of the planned KV caches
/// (manifest plan) without 64-bit overflow (InvalidArgument) and within
/// MemAvailable (ResourceExhausted, in GiB). Vanilla models have no position
/// limit (HF's rotary embedding extends past max_position_embeddings).
absl::Status CheckGenerationRequest(const Model &model, int64_t batch, int64_t prompt_length,
                                    const GenerateOptions &options);

/// Generates `options.max_new_tokens` tokens for each row of `input_ids`
/// (I64 [B, T]) with `attention_mask` (I64 [B, T], 1 = token, 0 = left
/// padding; an invalid (default-constructed) tensor means all ones).
///
/// Block Transformer (entry points prefill, decode_tokens, decode_block of
/// docs/generation.md): the prompt is left-padded to a multiple of L_B with
/// config.pad_token_id and mask 0, block_attention_mask = any token of the
/// block has mask 1; kv_cache [B, Ly, 2, H, C, hd] and kv_valid [B, C] with
/// C = N + ceil(max_new_tokens / L_B) - 1 (the last generated block is
/// never appended).
/// Vanilla (prefill, decode_step): positions are HF's, cumsum(mask) - 1 with
/// the padding at 1 for the prompt and n_real + s for the s-th generated
/// token of a row with n_real prompt tokens; C = T + max_new_tokens - 1.
///
/// Errors: InvalidArgument for bad shapes, dtypes, masks (values other
/// than 0/1, a row without tokens, padding after a token: prompts must be
/// left-padded), bad options or seeds; FailedPrecondition when the artifact
/// lacks the entry points (naming the missing ones) or its kv specs disagree
/// with the model configuration; the errors of Model::Run and of the
/// sampler (e.g. NaN logits), located by entry point and block.
absl::StatusOr<GenerateResult> Generate(const Model &model,
                                        const Tensor &input_ids,
                                        const Tensor &attention_mask,
                                        const GenerateOptions &options);

} // namespace bt::rt

#endif // BT_RUNTIME_GENERATE_H
