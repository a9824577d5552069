//===- generate.cc - batched generation ------------------------------------===//

#include "bt/runtime/generate/generate.h"

#include <algorithm>
#include <limits>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/generate/kv_cache.h"
#include "bt/runtime/generate/value.h"
#include "bt/runtime/model/kv_plan.h"

namespace bt::rt {
namespace {

using generate_internal::KvCache;
using generate_internal::Value;
using generate_internal::ValueMap;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

Tensor ScalarI64(int64_t v) {
  Tensor t = std::move(Tensor::Allocate(proto::I64, {})).value();
  *t.data_as<int64_t>() = v;
  return t;
}



/// Runs `entry` with the host tensors `in`, the kept values `kept` and, when
/// given, the cache's in-outs: Model::Run on host values, Model::RunResident
/// on resident ones (`device` set). The outputs are Values of the same kind.
absl::StatusOr<ValueMap> RunEntry(const Model &model, Device *device,
                                  const std::string &entry, TensorMap in,
                                  const ValueMap &kept, const KvCache *cache) {
  ValueMap io;
  if (cache != nullptr) {
    BT_ASSIGN_OR_RETURN(io, cache->InOuts());
  }
  ValueMap result;
  if (device == nullptr) {
    for (const auto &[name, v] : kept)
      in.emplace(name, v.host().Share());
    TensorMap hio;
    for (const auto &[name, v] : io)
      hio.emplace(name, v.host().Share());
    BT_ASSIGN_OR_RETURN(TensorMap out,
                        model.Run(entry, in, cache != nullptr ? &hio : nullptr));
    for (auto &[name, t] : out)
      result.emplace(name, Value(std::move(t)));
    return result;
  }
  std::map<std::string, const DeviceTensor *> resident;
  for (const ValueMap *m : {&kept, static_cast<const ValueMap *>(&io)})
    for (const auto &[name, v] : *m)
      resident.emplace(name, v.device());
  BT_ASSIGN_OR_RETURN(auto out, model.RunResident(entry, in, resident));
  for (auto &[name, t] : out)
    result.emplace(name, Value::Resident(*device, std::move(t)));
  return result;
}

absl::Status NeedEntries(const Model &model,
                         std::initializer_list<const char *> names,
                         const char *kind) {
  std::vector<std::string> missing;
  for (const char *n : names)
    if (model.FindEntryPoint(n) == nullptr)
      missing.push_back(n);
  if (missing.empty())
    return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      model.artifact().path(), ": cannot generate with this ", kind,
      " artifact: it has no ", absl::StrJoin(missing, ", "),
      " entry point", missing.size() > 1 ? "s" : "", " (it has: ",
      absl::StrJoin(model.EntryPointNames(), ", "),
      "); compile it with a bt-run that emits the generation entry points "
      "(docs/generation.md)"));
}

/// Checks an output's dtype and shape (a kernel contract violation
/// otherwise).
absl::Status CheckOutput(const ValueMap &out, const std::string &entry,
                         const std::string &name, DType dtype,
                         const std::vector<int64_t> &shape) {
  auto it = out.find(name);
  if (it == out.end())
    return absl::FailedPreconditionError(absl::StrCat(
        "entry point '", entry, "' has no output '", name,
        "' (docs/generation.md)"));
  const Value &t = it->second;
  bool ok = t.dtype() == dtype && t.shape().size() == shape.size();
  for (size_t i = 0; ok && i < shape.size(); ++i)
    ok = shape[i] < 0 || t.shape()[i] == shape[i];
  if (!ok)
    return absl::FailedPreconditionError(absl::StrCat(
        "entry point '", entry, "' returned ", name, " ", DTypeName(t.dtype()),
        ShapeToString(t.shape()), ", expected ", DTypeName(dtype),
        ShapeToString(shape), " (-1: any)"));
  return absl::OkStatus();
}

/// CheckOutput for the logits of a decode entry: F32, or BF16 (a
/// `--target cuda --dtype bf16` artifact's, whose LM head writes them in
/// bf16 and whose sampler chooses from those values; bt-bf16-gemm-outputs).
absl::Status CheckLogitsOutput(const ValueMap &out, const std::string &entry,
                               const std::string &name,
                               const std::vector<int64_t> &shape) {
  auto it = out.find(name);
  const DType dtype = it != out.end() && it->second.dtype() == proto::BF16
                          ? proto::BF16
                          : proto::F32;
  return CheckOutput(out, entry, name, dtype, shape);
}

/// Decode logits (F32 or BF16, CheckLogitsOutput) on the host as F32: BF16
/// extended exactly.
absl::StatusOr<Tensor> LogitsToHost(const Value &logits, Device &device) {
  BT_ASSIGN_OR_RETURN(Tensor host, logits.ToHost(device));
  if (host.dtype() == proto::F32)
    return host;
  return ConvertToF32(host, "logits");
}

absl::Status Annotate(const absl::Status &s, const std::string &where) {
  if (s.ok())
    return s;
  return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
}

struct Prompt {
  int64_t batch = 0, length = 0;
  std::vector<int64_t> ids, mask; // [B, T]
};

absl::StatusOr<Prompt> CheckPrompt(const Tensor &input_ids,
                                   const Tensor &attention_mask) {
  Prompt p;
  if (input_ids.dtype() != proto::I64 || input_ids.rank() != 2)
    return absl::InvalidArgumentError(absl::StrCat(
        "generate: input_ids must be I64[B, T], got ", input_ids.DebugString()));
  p.batch = input_ids.dim(0);
  p.length = input_ids.dim(1);
  const size_t n = static_cast<size_t>(input_ids.num_elements());
  p.ids.assign(input_ids.data_as<int64_t>(), input_ids.data_as<int64_t>() + n);
  if (attention_mask.valid()) {
    if (attention_mask.dtype() != proto::I64 ||
        attention_mask.shape() != input_ids.shape())
      return absl::InvalidArgumentError(absl::StrCat(
          "generate: attention_mask must be I64", ShapeToString(input_ids.shape()),
          " like input_ids, got ", attention_mask.DebugString()));
    p.mask.assign(attention_mask.data_as<int64_t>(),
                  attention_mask.data_as<int64_t>() + n);
  } else {
    p.mask.assign(n, 1);
  }
  for (int64_t b = 0; b < p.batch; ++b) {
    bool seen = false;
    for (int64_t t = 0; t < p.length; ++t) {
      const int64_t m = p.mask[b * p.length + t];
      if (m != 0 && m != 1)
        return absl::InvalidArgumentError(absl::StrCat(
            "generate: attention_mask[", b, ", ", t, "] is ", m,
            ", expected 0 or 1"));
      if (m == 0 && seen)
        return absl::InvalidArgumentError(absl::StrCat(
            "generate: prompt row ", b, " has padding (mask 0) at column ", t,
            " after a token; prompts must be left-padded"));
      seen |= m == 1;
    }
    if (!seen)
      return absl::InvalidArgumentError(absl::StrCat(
          "generate: prompt row ", b, " has no token (attention_mask all 0)"));
  }
  return p;
}

/// Rows of `active` (sequence ids) whose sequence is not finished.
std::vector<int64_t> LiveRows(const std::vector<int64_t> &active,
                              const Sampler &sampler) {
  std::vector<int64_t> keep;
  for (size_t r = 0; r < active.size(); ++r)
    if (!sampler.finished(active[r]))
      keep.push_back(static_cast<int64_t>(r));
  return keep;
}

/// The prompt as blocks (official preprocess_inputs_for_generation): left
/// padding of `pad` tokens to a multiple of L_B; input_ids I64 [B, N, L_B]
/// and block_attention_mask I64 [B, N] (1 where a block has a real token).
absl::Status PromptBlocks(const Prompt &p, const proto::ModelConfig &cfg,
                          int64_t pad, int64_t N, TensorMap &in) {
  const int64_t L = cfg.block_length(), B = p.batch, T = p.length;
  BT_ASSIGN_OR_RETURN(Tensor ids, Tensor::Allocate(proto::I64, {B, N, L}));
  BT_ASSIGN_OR_RETURN(Tensor block_mask, Tensor::Allocate(proto::I64, {B, N}));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < N * L; ++j) {
      const int64_t t = j - pad;
      const bool real = t >= 0 && p.mask[b * T + t] == 1;
      ids.data_as<int64_t>()[b * N * L + j] = t >= 0 ? p.ids[b * T + t]
                                                     : cfg.pad_token_id();
      if (real)
        block_mask.data_as<int64_t>()[b * N + j / L] = 1;
    }
  in.emplace("input_ids", std::move(ids));
  in.emplace("block_attention_mask", std::move(block_mask));
  return absl::OkStatus();
}

/// The token decoder's positions I64 [td_inputs] (uploaded once when
/// `device` is set): P prefix vectors + L_B - 1 tokens, or for summation
/// [BOS, t_0 .. t_{L_B-2}] (L_B inputs, positions 0 .. L_B-1 in both
/// conventions: official generate keeps the BOS placeholder).
absl::StatusOr<Value> TokenDecoderPositions(Device *device,
                                            const proto::ModelConfig &cfg,
                                            const GenerateOptions &o) {
  const int64_t L = cfg.block_length(), P = cfg.prefix_length();
  const bool summation = cfg.strategy() == proto::ModelConfig::SUMMATION;
  const int64_t td_inputs = summation ? L : P + L - 1;
  BT_ASSIGN_OR_RETURN(Tensor host, Tensor::Allocate(proto::I64, {td_inputs}));
  for (int64_t i = 0; i < td_inputs; ++i)
    host.data_as<int64_t>()[i] = o.official_generate_positions && !summation
                                     ? std::max<int64_t>(0, i - P + 1)
                                     : i;
  return Value::Make(device, std::move(host));
}

/// The rows of a generation in flight: the sequence id of each row of the
/// batch and how many tokens each sequence has.
struct Rows {
  std::vector<int64_t> active;
  int64_t produced = 0;
};

/// Whether `cache` has room for `appended` more entries after `length`: an
/// entry point that keeps the length on the device (KvCache::holds_length)
/// does not check its capacity itself, so the loop checks before each call
/// (the capacity is sized for the whole generation: an error here is a bug).
absl::Status CheckRoom(const KvCache &cache, int64_t length, int64_t appended,
                       const std::string &where) {
  if (length + appended <= cache.capacity())
    return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      where, ": cache_length ", length, " + ", appended,
      " new entries exceed the KV cache's capacity C = ", cache.capacity()));
}

/// The outputs of `entry`'s replays by name: views of the recording's
/// tensors (rewritten by each replay, released with the recording).
ValueMap BorrowedOutputs(const Model::RecordedEntry &entry) {
  ValueMap out;
  for (auto &[name, t] : entry.outputs())
    out.emplace(name, Value::Borrowed(std::move(t)));
  return out;
}

/// decode_tokens recorded for replays (GenerateOptions::cuda_graphs): the
/// recording of the current batch size, if any. Declared before the Values
/// that borrow its outputs, so that it outlives them.
struct TokenRecording {
  bool enabled = false;
  int64_t rows = 0;
  std::unique_ptr<Model::RecordedEntry> entry;
};

/// decode_tokens as a replay of `rec` (recorded first when it holds another
/// batch size): the sampler counts the block's device steps, the outputs
/// are views of the recording's.
absl::StatusOr<ValueMap> ReplayDecodeTokens(const Model &model,
                                            TokenRecording &rec, TensorMap tin,
                                            const ValueMap &tkept,
                                            Sampler &sampler,
                                            GenerateCounters &c) {
  const int64_t rows = static_cast<int64_t>(sampler.rows().size());
  std::map<std::string, const DeviceTensor *> resident;
  for (const auto &[name, v] : tkept)
    resident.emplace(name, v.device());
  if (rec.entry == nullptr || rec.rows != rows) {
    rec.entry.reset(); // rows only shrink: the old size does not come back
    BT_RETURN_IF_ERROR(sampler.BeginRecording());
    absl::StatusOr<std::unique_ptr<Model::RecordedEntry>> made =
        model.RecordResident("decode_tokens", tin, resident);
    sampler.EndRecording();
    BT_RETURN_IF_ERROR(made.status());
    rec.entry = std::move(*made);
    rec.rows = rows;
    ++c.decode_tokens_graph.recordings;
    c.decode_tokens_graph.nodes = rec.entry->nodes();
  }
  BT_RETURN_IF_ERROR(rec.entry->Replay(tin, resident));
  sampler.ReplayedSteps(model.config().block_length());
  ++c.decode_tokens_graph.replays;
  return BorrowedOutputs(*rec.entry);
}

/// Whether the generation replays recordings (CUDA graphs): asked for
/// (GenerateOptions::cuda_graphs, not BT_CUDA_GRAPHS=0) on the resident path
/// of a device that records calls.
bool GraphsEnabled(const GenerateOptions &o, const Device *device) {
  const char *env = std::getenv("BT_CUDA_GRAPHS");
  return o.cuda_graphs && device != nullptr && device->recorded_calls() &&
         !(env != nullptr && std::string(env) == "0");
}

/// An entry point that updates the KV cache in place recorded for replays
/// (GenerateOptions::cuda_graphs, an artifact whose cache length stays on
/// the device: KvCache::holds_length): decode_block, and the vanilla
/// model's decode_step. The recording and the in-out tensors it updates in
/// place (address and rows of each). Declared before the Values that
/// borrow its outputs.
struct CacheStepRecording {
  bool enabled = false;
  std::vector<uint64_t> inouts;
  std::unique_ptr<Model::RecordedEntry> entry;
  GraphReplays counts;
};

/// `entry` on `host_in` (copied into the recording's blocks), `in` (device
/// tensors, copied there unless they are the recording's) and the cache's
/// in-out tensors as a replay of `rec`, recorded first when the cache's
/// tensors (or the batch) changed since: nothing of the call's host code
/// depends on anything else, so one recording serves every call of a
/// batch. The outputs are views of the recording's. With `sampler` (the
/// vanilla decode_step, which samples its one token on the device), the
/// recording runs between Sampler::BeginRecording and EndRecording and each
/// replay counts as one device step of the current block.
absl::StatusOr<ValueMap> ReplayCacheStep(const Model &model,
                                         CacheStepRecording &rec,
                                         const std::string &entry,
                                         const TensorMap &host_in,
                                         const ValueMap &in,
                                         const KvCache &cache,
                                         Sampler *sampler = nullptr) {
  BT_ASSIGN_OR_RETURN(ValueMap io, cache.InOuts());
  std::map<std::string, const DeviceTensor *> resident;
  std::vector<uint64_t> inouts;
  for (const auto &[name, v] : io) {
    resident.emplace(name, v.device());
    inouts.push_back(v.device()->address);
    inouts.push_back(static_cast<uint64_t>(v.shape().empty() ? 1 : v.shape()[0]));
  }
  for (const auto &[name, v] : in)
    resident.emplace(name, v.device());
  if (rec.entry == nullptr || rec.inouts != inouts) {
    rec.entry.reset();
    if (sampler != nullptr)
      BT_RETURN_IF_ERROR(sampler->BeginRecording());
    absl::StatusOr<std::unique_ptr<Model::RecordedEntry>> made =
        model.RecordResident(entry, host_in, resident);
    if (sampler != nullptr)
      sampler->EndRecording();
    BT_RETURN_IF_ERROR(made.status());
    rec.entry = std::move(*made);
    rec.inouts = std::move(inouts);
    ++rec.counts.recordings;
    rec.counts.nodes = rec.entry->nodes();
  }
  BT_RETURN_IF_ERROR(rec.entry->Replay(host_in, resident));
  if (sampler != nullptr)
    sampler->ReplayedSteps(1);
  ++rec.counts.replays;
  return BorrowedOutputs(*rec.entry);
}

/// Runs decode_tokens for the rows `r` and copies the first `take` tokens
/// of each row (and their step logits when kept) into `res`; marks the rows
/// that sampled EOS among them finished. Returns the entry's outputs
/// (tokens I64 [B', L_B], step_logits F32 [B', L_B, V]) and the tokens on
/// the host in `host_tok`. With `rec` enabled and a block that samples
/// wholly on the device after the first, the call is a replay of a
/// recording.
absl::StatusOr<ValueMap> DecodeTokens(const Model &model, Device *device,
                                      const Value &context,
                                      const Value &positions, const Rows &r,
                                      int64_t take, Sampler &sampler,
                                      const std::string &where,
                                      GenerateResult &res, Tensor &host_tok,
                                      TokenRecording &rec) {
  const proto::ModelConfig &cfg = model.config();
  const int64_t L = cfg.block_length(), V = cfg.vocab_size();
  const int64_t rows = static_cast<int64_t>(r.active.size());
  const int64_t B = res.new_tokens.dim(0), N_new = res.new_tokens.dim(1);
  BT_RETURN_IF_ERROR(sampler.BeginBlock(r.active));
  TensorMap tin;
  tin.emplace("sampler", ScalarI64(sampler.handle()));
  ValueMap tkept;
  tkept.emplace("context", context);
  tkept.emplace("positions", positions);
  // From the first block on (the device sampler's state exists before it:
  // Device::BeginSampling); a drawing sampler's first block hands the rows'
  // streams over and is not replayable (Sampler::BlockReplayable).
  const bool replay =
      rec.enabled && device != nullptr && sampler.BlockReplayable();
  absl::StatusOr<ValueMap> tout =
      replay ? ReplayDecodeTokens(model, rec, std::move(tin), tkept, sampler,
                                  res.counters)
             : RunEntry(model, device, "decode_tokens", std::move(tin), tkept,
                        nullptr);
  BT_RETURN_IF_ERROR(Annotate(tout.status(), where));
  BT_RETURN_IF_ERROR(Annotate(sampler.status(),
                              absl::StrCat(where, ", decode_tokens")));
  if (sampler.steps_in_block() != L)
    return absl::FailedPreconditionError(absl::StrCat(
        where, ": decode_tokens called the sampler ", sampler.steps_in_block(),
        " times, expected L_B = ", L, " (docs/generation.md)"));
  BT_RETURN_IF_ERROR(
      CheckOutput(*tout, "decode_tokens", "tokens", proto::I64, {rows, L}));
  BT_RETURN_IF_ERROR(
      CheckLogitsOutput(*tout, "decode_tokens", "step_logits", {rows, L, V}));
  // The resident path copies the tokens to the host, and the step logits
  // only when they are kept.
  float *step_logits =
      res.step_logits.valid() ? res.step_logits.data_as<float>() : nullptr;
  BT_ASSIGN_OR_RETURN(host_tok, tout->at("tokens").ToHost(model.device()));
  sampler.EndBlock(host_tok);
  BT_RETURN_IF_ERROR(Annotate(sampler.status(),
                              absl::StrCat(where, ", decode_tokens")));
  Tensor host_lg;
  if (step_logits != nullptr) {
    BT_ASSIGN_OR_RETURN(host_lg,
                        LogitsToHost(tout->at("step_logits"), model.device()));
  }
  const int64_t *tok = host_tok.data_as<int64_t>();
  const float *lg = step_logits != nullptr ? host_lg.data_as<float>() : nullptr;
  int64_t *new_tokens = res.new_tokens.data_as<int64_t>();
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t s = r.active[row];
    for (int64_t k = 0; k < take; ++k) {
      new_tokens[s * N_new + r.produced + k] = tok[row * L + k];
      if (step_logits != nullptr)
        std::memcpy(step_logits + ((r.produced + k) * B + s) * V,
                    lg + (row * L + k) * V, sizeof(float) * V);
    }
    const int64_t e = sampler.eos_step_in_block(s);
    if (e >= 0 && e < take) {
      res.finished[s] = true;
      res.lengths[s] = r.produced + e + 1;
    }
  }
  return std::move(*tout);
}

/// The next block's tokens I64 [kept, 1, L_B]: decode_tokens' output
/// itself while every row is live (on the resident path it stays on the
/// device), else its live rows `keep`: gathered within device memory
/// (Device::CopyOnDevice, a copy per run of consecutive rows) on the
/// resident path, else from the host copy `host_tok` (uploaded where the
/// device cannot copy within its memory).
absl::StatusOr<Value> NextBlockTokens(Device *device, const Value &tokens,
                                      const Tensor &host_tok,
                                      const std::vector<int64_t> &keep,
                                      int64_t rows, int64_t L) {
  const int64_t kept = static_cast<int64_t>(keep.size());
  if (kept == rows)
    return tokens.Reshaped({kept, 1, L});
  if (device != nullptr && tokens.resident() && kept > 0) {
    BT_ASSIGN_OR_RETURN(DeviceTensor d, device->Allocate(proto::I64, {kept, 1, L}));
    Value next = Value::Resident(*device, std::move(d));
    const uint64_t row = static_cast<uint64_t>(L) * sizeof(int64_t);
    absl::Status copied;
    for (int64_t j = 0; j < kept && copied.ok();) {
      int64_t n = 1;
      while (j + n < kept && keep[j + n] == keep[j] + n)
        ++n;
      copied = device->CopyOnDevice(
          DeviceTensor{tokens.device()->address + keep[j] * row, proto::I64, {n, L}},
          DeviceTensor{next.device()->address + j * row, proto::I64, {n, L}});
      j += n;
    }
    if (copied.ok())
      return next;
    if (!absl::IsUnimplemented(copied))
      return copied;
  }
  BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(proto::I64, {kept, 1, L}));
  for (int64_t j = 0; j < kept; ++j)
    std::memcpy(t.data_as<int64_t>() + j * L,
                host_tok.data_as<int64_t>() + keep[j] * L, sizeof(int64_t) * L);
  return Value::Make(device, std::move(t));
}

absl::Status GenerateBlock(const Model &model, Device *device,
                           const Prompt &p, const GenerateOptions &o,
                           Sampler &sampler, GenerateResult &res) {
  BT_RETURN_IF_ERROR(NeedEntries(
      model, {"prefill", "decode_tokens", "decode_block"}, "Block Transformer"));
  const proto::ModelConfig &cfg = model.config();
  const int64_t L = cfg.block_length(), P = cfg.prefix_length();
  const int64_t B = p.batch, T = p.length;
  const int64_t N_new = o.max_new_tokens;
  if (L <= 0 || P <= 0)
    return absl::FailedPreconditionError(absl::StrCat(
        "generate: model config has block_length ", L, " and prefix_length ", P));
  const int64_t pad = (L - T % L) % L;
  const int64_t N = (T + pad) / L;
  const int64_t gen_blocks = (N_new + L - 1) / L;
  GenerateCounters &c = res.counters;
  BT_ASSIGN_OR_RETURN(Value positions, TokenDecoderPositions(device, cfg, o));

  const int64_t C = N + gen_blocks - 1;
  BT_ASSIGN_OR_RETURN(KvCache cache, KvCache::Create(*model.FindEntryPoint("prefill"),
                                                     B, C, device));
  c.cache_capacity = C;
  c.cache_bytes_initial = cache.bytes();

  auto t0 = Clock::now();
  TensorMap in;
  BT_RETURN_IF_ERROR(PromptBlocks(p, cfg, pad, N, in));
  if (!cache.holds_length())
    in.emplace("cache_length", ScalarI64(0));
  BT_ASSIGN_OR_RETURN(ValueMap out,
                      RunEntry(model, device, "prefill", std::move(in), {}, &cache));
  BT_RETURN_IF_ERROR(CheckOutput(out, "prefill", "context", proto::F32, {B, -1}));
  Value context = std::move(out.at("context"));
  int64_t length = N;
  ++c.prefill_calls;
  c.blocks_prefilled += B * N;
  auto t1 = Clock::now();
  c.prefill_seconds = Seconds(t0, t1);
  if (o.on_progress)
    o.on_progress(0, N_new);
  const DeviceTraffic traffic0 = model.device().traffic();

  Rows r;
  for (int64_t b = 0; b < B; ++b)
    r.active.push_back(b);
  TokenRecording rec;
  rec.enabled = GraphsEnabled(o, device);
  CacheStepRecording brec;
  brec.enabled = rec.enabled && cache.holds_length();
  for (int64_t g = 0; g < gen_blocks; ++g) {
    const int64_t rows = static_cast<int64_t>(r.active.size());
    const std::string where = absl::StrCat("generated block ", g);
    const int64_t take = std::min(L, N_new - r.produced);
    Tensor host_tok;
    BT_ASSIGN_OR_RETURN(ValueMap tout,
                        DecodeTokens(model, device, context, positions, r, take,
                                     sampler, where, res, host_tok, rec));
    ++c.decode_tokens_calls;
    c.token_decoder_steps += L;
    c.token_decoder_rows += rows * L;
    r.produced += take;
    if (o.on_progress)
      o.on_progress(r.produced, N_new);
    if (r.produced == N_new)
      break;
    std::vector<int64_t> keep = LiveRows(r.active, sampler);
    if (keep.empty())
      break;
    const int64_t kept = static_cast<int64_t>(keep.size());
    BT_ASSIGN_OR_RETURN(Value next, NextBlockTokens(device, tout.at("tokens"),
                                                    host_tok, keep, rows, L));
    if (kept < rows) {
      BT_RETURN_IF_ERROR(cache.Keep(keep));
      c.rows_compacted += rows - kept;
      std::vector<int64_t> still;
      for (int64_t row : keep)
        still.push_back(r.active[row]);
      r.active = std::move(still);
    }
    BT_RETURN_IF_ERROR(CheckRoom(cache, length, 1, where));
    TensorMap bin;
    if (!cache.holds_length())
      bin.emplace("cache_length", ScalarI64(length));
    ValueMap bkept;
    bkept.emplace("input_ids", std::move(next));
    absl::StatusOr<ValueMap> bout =
        brec.enabled
            ? ReplayCacheStep(model, brec, "decode_block", {}, bkept, cache)
            : RunEntry(model, device, "decode_block", std::move(bin), bkept,
                       &cache);
    BT_RETURN_IF_ERROR(Annotate(bout.status(), where));
    BT_RETURN_IF_ERROR(
        CheckOutput(*bout, "decode_block", "context", proto::F32, {kept, -1}));
    context = std::move(bout->at("context"));
    ++length;
    ++c.decode_block_calls;
    c.decode_block_rows += kept;
  }
  c.decode_block_graph = brec.counts;
  c.cache_length = length;
  c.cache_bytes_final = cache.bytes();
  c.decode_seconds = Seconds(t1, Clock::now());
  c.decode_traffic = model.device().traffic().Since(traffic0);
  c.decode_token_steps = r.produced;
  return absl::OkStatus();
}

/// The vanilla decode_step's `left_padding` I64 [rows, 1] of the sequences
/// `active` (prompt length T minus each one's real tokens), uploaded when
/// `device` is set.
absl::StatusOr<Value> LeftPadding(Device *device,
                                  const std::vector<int64_t> &active, int64_t T,
                                  const std::vector<int64_t> &n_real) {
  const int64_t rows = static_cast<int64_t>(active.size());
  BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(proto::I64, {rows, 1}));
  for (int64_t r = 0; r < rows; ++r)
    t.data_as<int64_t>()[r] = T - n_real[active[r]];
  return Value::Make(device, std::move(t));
}

/// One vanilla decode_step for the rows of `sampler`'s current block: the
/// ids `ids` I64 [B', 1] and `padding` I64 [B', 1] (Values of the path's
/// kind), as a replay of `rec` when given; checks the sampler made its one
/// step and the outputs' shapes, and copies the tokens to `host_tok` (the
/// sampler's EOS bookkeeping reads them).
absl::StatusOr<ValueMap> DecodeStep(const Model &model, Device *device,
                                    const Value &ids, const Value &padding,
                                    int64_t length, Sampler &sampler,
                                    KvCache &cache, CacheStepRecording *rec,
                                    const std::string &where, Tensor &host_tok) {
  const int64_t rows = static_cast<int64_t>(sampler.rows().size());
  TensorMap din;
  din.emplace("sampler", ScalarI64(sampler.handle()));
  if (!cache.holds_length())
    din.emplace("cache_length", ScalarI64(length));
  ValueMap dkept;
  dkept.emplace("input_ids", ids);
  dkept.emplace("left_padding", padding);
  absl::StatusOr<ValueMap> dout =
      rec != nullptr
          ? ReplayCacheStep(model, *rec, "decode_step", din, dkept, cache,
                            &sampler)
          : RunEntry(model, device, "decode_step", std::move(din), dkept,
                     &cache);
  BT_RETURN_IF_ERROR(Annotate(dout.status(), where));
  const std::string in_step = absl::StrCat(where, ", decode_step");
  BT_RETURN_IF_ERROR(Annotate(sampler.status(), in_step));
  if (sampler.steps_in_block() != 1)
    return absl::FailedPreconditionError(absl::StrCat(
        where, ": decode_step called the sampler ", sampler.steps_in_block(),
        " times, expected 1 (docs/generation.md)"));
  BT_RETURN_IF_ERROR(
      CheckOutput(*dout, "decode_step", "tokens", proto::I64, {rows, 1}));
  BT_RETURN_IF_ERROR(CheckLogitsOutput(*dout, "decode_step", "logits",
                                       {rows, model.config().vocab_size()}));
  BT_ASSIGN_OR_RETURN(host_tok, dout->at("tokens").ToHost(model.device()));
  sampler.EndBlock(host_tok);
  BT_RETURN_IF_ERROR(Annotate(sampler.status(), in_step));
  return dout;
}

absl::Status GenerateVanilla(const Model &model, Device *device,
                             const Prompt &p, const GenerateOptions &o,
                             Sampler &sampler, GenerateResult &res) {
  BT_RETURN_IF_ERROR(
      NeedEntries(model, {"prefill", "decode_step"}, "vanilla GPT-NeoX"));
  const proto::ModelConfig &cfg = model.config();
  const int64_t V = cfg.vocab_size(), B = p.batch, T = p.length;
  const int64_t N_new = o.max_new_tokens;
  GenerateCounters &c = res.counters;

  // HF positions: cumsum(mask) - 1, padding at 1.
  BT_ASSIGN_OR_RETURN(Tensor ids, Tensor::Allocate(proto::I64, {B, T}));
  BT_ASSIGN_OR_RETURN(Tensor mask, Tensor::Allocate(proto::I64, {B, T}));
  BT_ASSIGN_OR_RETURN(Tensor positions, Tensor::Allocate(proto::I64, {B, T}));
  std::vector<int64_t> n_real(static_cast<size_t>(B), 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t i = b * T + t;
      ids.data_as<int64_t>()[i] = p.ids[i];
      mask.data_as<int64_t>()[i] = p.mask[i];
      n_real[b] += p.mask[i];
      positions.data_as<int64_t>()[i] = p.mask[i] ? n_real[b] - 1 : 1;
    }
  const int64_t C = T + N_new - 1;
  BT_ASSIGN_OR_RETURN(KvCache cache, KvCache::Create(*model.FindEntryPoint("prefill"),
                                                     B, C, device));
  c.cache_capacity = C;
  c.cache_bytes_initial = cache.bytes();

  auto t0 = Clock::now();
  TensorMap in;
  in.emplace("input_ids", std::move(ids));
  in.emplace("attention_mask", std::move(mask));
  in.emplace("positions", std::move(positions));
  if (!cache.holds_length())
    in.emplace("cache_length", ScalarI64(0));
  BT_ASSIGN_OR_RETURN(ValueMap out,
                      RunEntry(model, device, "prefill", std::move(in), {}, &cache));
  BT_RETURN_IF_ERROR(CheckOutput(out, "prefill", "logits", proto::F32, {B, V}));
  // Token 0 is sampled on the host from the prefill's logits (once, before
  // the decode loop).
  BT_ASSIGN_OR_RETURN(Tensor logits, out.at("logits").ToHost(model.device()));
  int64_t length = T;
  ++c.prefill_calls;
  c.blocks_prefilled += B * T;
  auto t1 = Clock::now();
  c.prefill_seconds = Seconds(t0, t1);
  if (o.on_progress)
    o.on_progress(0, N_new);
  const DeviceTraffic traffic0 = model.device().traffic();
  int64_t produced = 0;

  std::vector<int64_t> active(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b)
    active[b] = b;
  int64_t *new_tokens = res.new_tokens.data_as<int64_t>();
  float *step_logits =
      res.step_logits.valid() ? res.step_logits.data_as<float>() : nullptr;
  // Records token s of the rows `active` (host tokens I64 [rows, 1] and,
  // when kept, logits F32 [rows, V]) and marks the rows that emitted EOS.
  auto record = [&](int64_t s, const Tensor &tok, const Tensor *lg) {
    for (size_t r = 0; r < active.size(); ++r) {
      const int64_t q = active[r];
      new_tokens[q * N_new + s] = tok.data_as<int64_t>()[r];
      if (step_logits != nullptr && lg != nullptr)
        std::memcpy(step_logits + (s * B + q) * V,
                    lg->data_as<float>() + static_cast<int64_t>(r) * V,
                    sizeof(float) * V);
      if (sampler.eos_step_in_block(q) >= 0) {
        res.finished[q] = true;
        res.lengths[q] = s + 1;
      }
    }
  };
  // Token 0 from the prefill's logits, sampled on the host.
  BT_RETURN_IF_ERROR(sampler.BeginBlock(active));
  BT_ASSIGN_OR_RETURN(Tensor tok0, Tensor::Allocate(proto::I64, {B}));
  BT_RETURN_IF_ERROR(
      Annotate(sampler.StepTensors(logits, tok0), "generated token 0"));
  c.tokens_sampled += B;
  record(0, tok0, &logits);
  produced = 1;
  if (o.on_progress)
    o.on_progress(1, N_new);

  // Each decode_step samples its token itself (bt.sample: on the device on
  // the resident path), and the next call reads it where it is: per step
  // only the tokens come to the host (and the logits when kept). The RoPE
  // positions come from the cache length and each row's left padding,
  // uploaded once (and again when finished rows are dropped).
  CacheStepRecording srec;
  srec.enabled = GraphsEnabled(o, device) && cache.holds_length();
  Value next_ids, padding;
  {
    BT_ASSIGN_OR_RETURN(Tensor host_ids, tok0.Reshaped({B, 1}));
    BT_ASSIGN_OR_RETURN(next_ids, Value::Make(device, std::move(host_ids)));
  }
  BT_ASSIGN_OR_RETURN(padding, LeftPadding(device, active, T, n_real));
  Tensor host_tok = tok0.Share();
  for (int64_t s = 1; s < N_new; ++s) {
    const int64_t rows = static_cast<int64_t>(active.size());
    std::vector<int64_t> keep = LiveRows(active, sampler);
    if (keep.empty())
      break;
    const int64_t kept = static_cast<int64_t>(keep.size());
    if (kept < rows) {
      BT_ASSIGN_OR_RETURN(Value ids3, NextBlockTokens(device, next_ids,
                                                      host_tok, keep, rows, 1));
      BT_ASSIGN_OR_RETURN(next_ids, ids3.Reshaped({kept, 1}));
      BT_RETURN_IF_ERROR(cache.Keep(keep));
      c.rows_compacted += rows - kept;
      std::vector<int64_t> still;
      for (int64_t r : keep)
        still.push_back(active[r]);
      active = std::move(still);
      BT_ASSIGN_OR_RETURN(padding, LeftPadding(device, active, T, n_real));
    }
    const std::string where = absl::StrCat("generated token ", s);
    BT_RETURN_IF_ERROR(CheckRoom(cache, length, 1, where));
    BT_RETURN_IF_ERROR(sampler.BeginBlock(active));
    // From the first call on (Device::BeginSampling made the sampler's
    // device state before the loop).
    const bool replay = srec.enabled && sampler.BlockReplayable();
    absl::StatusOr<ValueMap> dout =
        DecodeStep(model, device, next_ids, padding, length, sampler, cache,
                   replay ? &srec : nullptr, where, host_tok);
    BT_RETURN_IF_ERROR(dout.status());
    c.tokens_sampled += kept;
    Tensor host_lg;
    if (step_logits != nullptr) {
      BT_ASSIGN_OR_RETURN(host_lg,
                          LogitsToHost(dout->at("logits"), model.device()));
    }
    record(s, host_tok, step_logits != nullptr ? &host_lg : nullptr);
    next_ids = dout->at("tokens");
    produced = s + 1;
    if (o.on_progress)
      o.on_progress(s + 1, N_new);
    ++length;
    ++c.decode_step_calls;
    c.decode_step_rows += kept;
  }
  c.decode_step_graph = srec.counts;
  c.cache_length = length;
  c.cache_bytes_final = cache.bytes();
  c.decode_seconds = Seconds(t1, Clock::now());
  c.decode_traffic = model.device().traffic().Since(traffic0);
  c.decode_token_steps = produced;
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<GenerateResult> Generate(const Model &model,
                                        const Tensor &input_ids,
                                        const Tensor &attention_mask,
                                        const GenerateOptions &options) {
  BT_ASSIGN_OR_RETURN(Prompt p, CheckPrompt(input_ids, attention_mask));
  if (options.max_new_tokens < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "generate: max_new_tokens must be >= 0, got ", options.max_new_tokens));
  BT_RETURN_IF_ERROR(ValidateSamplingOptions(options.sampling));
  if (!options.seeds.empty() &&
      static_cast<int64_t>(options.seeds.size()) != p.batch)
    return absl::InvalidArgumentError(absl::StrCat(
        "generate: ", options.seeds.size(), " seeds for ", p.batch,
        " sequences"));
  const proto::ModelConfig &cfg = model.config();
  const int64_t V = cfg.vocab_size(), N = options.max_new_tokens;
  if (V <= 0)
    return absl::FailedPreconditionError("generate: model config has no vocab_size");
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t t = 0; t < p.length; ++t) {
      const int64_t id = p.ids[b * p.length + t];
      if (id < 0 || id >= V)
        return absl::InvalidArgumentError(absl::StrCat(
            "generate: input_ids[", b, ", ", t, "] is ", id,
            ", expected a token id in [0, ", V, ")"));
    }

  BT_RETURN_IF_ERROR(CheckGenerationRequest(model, p.batch, p.length, options));

  // No entry point of a generation writes the weights: the device may keep
  // derived forms of them until it ends (cpu: packed for the decode GEMMs).
  ConstantParamsScope constant_params(model.device());

  GenerateResult res;
  BT_ASSIGN_OR_RETURN(res.new_tokens, Tensor::Allocate(proto::I64, {p.batch, N}));
  std::fill_n(res.new_tokens.data_as<int64_t>(), p.batch * N, cfg.pad_token_id());
  if (options.keep_step_logits) {
    BT_ASSIGN_OR_RETURN(res.step_logits,
                        Tensor::Allocate(proto::F32, {N, p.batch, V}));
  }
  res.finished.assign(static_cast<size_t>(p.batch), false);
  res.lengths.assign(static_cast<size_t>(p.batch), N);
  if (N == 0 || p.batch == 0)
    return res;

  Sampler::Options so;
  so.sampling = options.sampling;
  so.vocab_size = V;
  so.eos_token_id = options.stop_at_eos ? cfg.eos_token_id() : -1;
  so.generation_pad_token_id = cfg.generation_pad_token_id();
  so.seeds = options.seeds;
  so.logits_kept = options.keep_step_logits;
  const char *dev_env = std::getenv("BT_DEVICE_SAMPLING");
  so.device = options.device_sampling &&
              !(dev_env != nullptr && std::string(dev_env) == "0");
  BT_ASSIGN_OR_RETURN(std::unique_ptr<Sampler> sampler,
                      Sampler::Create(so, p.batch));
  // The resident path: the state stays on a device that can keep it
  // (GenerateOptions::resident_state; BT_RESIDENT_STATE=0 turns it off).
  const bool resident =
      options.resident_state && ResidentStateEnabled(model.device());
  Device *device = resident ? &model.device() : nullptr;
  res.counters.resident_state = resident;
  // The device sampler's state, before the first step: the first block's
  // steps then allocate nothing and can be captured into a CUDA graph.
  if (so.device)
    BT_RETURN_IF_ERROR(Annotate(
        model.device().BeginSampling(sampler->handle(), p.batch), "generate"));
  absl::Status s =
      cfg.kind() == proto::ModelConfig::VANILLA
          ? GenerateVanilla(model, device, p, options, *sampler, res)
          : GenerateBlock(model, device, p, options, *sampler, res);
  // What the device kept for sampling on it (its NaN flags), on every path.
  absl::Status end = model.device().EndSampling(sampler->handle());
  BT_RETURN_IF_ERROR(s);
  BT_RETURN_IF_ERROR(Annotate(end, "generate"));
  return res;
}

} // namespace bt::rt
