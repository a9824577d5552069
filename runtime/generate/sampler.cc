//===- sampler.cc - token sampling ----------------------------------------===//

#include "bt/runtime/generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "bt/runtime/base/status_macros.h"

namespace bt::rt {
namespace {

uint64_t SplitMix64(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Probabilities of `vocab` logits (`stride` apart) under `options` (not
// greedy) into `p`; `order` is scratch.
absl::Status Distribution(const SamplingOptions &options, const float *logits,
                          int64_t vocab, int64_t stride, std::vector<double> &p,
                          std::vector<int64_t> &order) {
  p.resize(static_cast<size_t>(vocab));
  const double inv_t = 1.0 / options.temperature;
  double max = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v) {
    const float l = logits[v * stride];
    if (std::isnan(l))
      return absl::InvalidArgumentError(
          absl::StrCat("logit ", v, " is NaN"));
    p[v] = static_cast<double>(l) * inv_t;
  }
  // top-k: keep the logits >= the k-th largest (ties kept).
  double threshold = -INFINITY;
  if (options.top_k > 0 && options.top_k < vocab) {
    std::vector<double> tmp(p.begin(), p.end());
    std::nth_element(tmp.begin(), tmp.begin() + (options.top_k - 1), tmp.end(),
                     std::greater<double>());
    threshold = tmp[options.top_k - 1];
  }
  for (int64_t v = 0; v < vocab; ++v) {
    if (p[v] < threshold)
      p[v] = -INFINITY;
    max = std::max(max, p[v]);
  }
  if (!std::isfinite(max))
    return absl::InvalidArgumentError(
        max > 0 ? "a logit is +inf" : "no logit is finite (all -inf)");
  double z = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    p[v] = std::exp(p[v] - max); // exp(-inf) = 0
    z += p[v];
  }
  for (double &x : p)
    x /= z;
  // top-p: probability descending, id ascending; keep while the mass before
  // the token is < top_p.
  if (options.top_p < 1.0) {
    order.clear();
    for (int64_t v = 0; v < vocab; ++v)
      if (p[v] > 0)
        order.push_back(v);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return p[a] != p[b] ? p[a] > p[b] : a < b;
    });
    double before = 0, kept = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      const int64_t v = order[i];
      if (i > 0 && before >= options.top_p) {
        p[v] = 0;
        continue;
      }
      before += p[v];
      kept += p[v];
    }
    for (double &x : p)
      x /= kept;
  }
  return absl::OkStatus();
}

} // namespace

absl::Status ValidateSamplingOptions(const SamplingOptions &o) {
  if (!o.greedy && !(o.temperature > 0 && std::isfinite(o.temperature)))
    return absl::InvalidArgumentError(absl::StrCat(
        "temperature must be > 0 (0 means greedy), got ", o.temperature));
  if (o.top_k < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("top-k must be >= 0 (0 = off), got ", o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1))
    return absl::InvalidArgumentError(
        absl::StrCat("top-p must be in (0, 1] (1 = off), got ", o.top_p));
  return absl::OkStatus();
}

Rng::Rng(uint64_t seed, uint64_t stream) {
  uint64_t s = seed;
  uint64_t a = SplitMix64(s);
  uint64_t t = stream ^ 0x5851F42D4C957F2DULL;
  uint64_t b = SplitMix64(t);
  state_ = a ^ (b * 0xD1342543DE82EF95ULL);
}

uint64_t Rng::Next() { return SplitMix64(state_); }

Rng Rng::FromState(uint64_t state) {
  Rng r;
  r.state_ = state;
  return r;
}

void Rng::Advance(uint64_t draws) {
  // SplitMix64 adds its constant once per Next() (mod 2^64).
  state_ += draws * 0x9E3779B97F4A7C15ULL;
}

double Rng::Uniform() {
  return static_cast<double>(Next() >> 11) * 0x1.0p-53;
}

absl::StatusOr<std::vector<double>>
SamplingDistribution(const SamplingOptions &options,
                     absl::Span<const float> logits) {
  BT_RETURN_IF_ERROR(ValidateSamplingOptions(options));
  const int64_t vocab = static_cast<int64_t>(logits.size());
  std::vector<double> p;
  if (options.greedy) {
    const int64_t a = ArgMax(logits.data(), vocab);
    if (a < 0)
      return absl::InvalidArgumentError("a logit is NaN");
    p.assign(logits.size(), 0.0);
    if (vocab > 0)
      p[a] = 1.0;
    return p;
  }
  std::vector<int64_t> order;
  BT_RETURN_IF_ERROR(Distribution(options, logits.data(), vocab, 1, p, order));
  return p;
}

absl::StatusOr<int64_t> SampleToken(const SamplingOptions &options,
                                    const float *logits, int64_t vocab,
                                    int64_t stride, Rng &rng,
                                    std::vector<double> &scratch) {
  if (vocab <= 0)
    return absl::InvalidArgumentError("empty vocabulary");
  if (options.greedy) {
    const int64_t a = ArgMax(logits, vocab, stride);
    if (a < 0)
      return absl::InvalidArgumentError("a logit is NaN");
    return a;
  }
  std::vector<int64_t> order;
  BT_RETURN_IF_ERROR(Distribution(options, logits, vocab, stride, scratch, order));
  const double u = rng.Uniform();
  double cum = 0;
  int64_t last = -1;
  for (int64_t v = 0; v < vocab; ++v) {
    if (scratch[v] <= 0)
      continue;
    cum += scratch[v];
    last = v;
    if (u < cum)
      return v;
  }
  return last; // u >= the rounded total
}

absl::StatusOr<std::unique_ptr<Sampler>>
Sampler::Create(const Options &options, int64_t num_sequences) {
  BT_RETURN_IF_ERROR(ValidateSamplingOptions(options.sampling));
  if (options.vocab_size <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("sampler: vocab_size must be > 0, got ", options.vocab_size));
  if (num_sequences < 0)
    return absl::InvalidArgumentError("sampler: negative number of sequences");
  if (!options.seeds.empty() &&
      static_cast<int64_t>(options.seeds.size()) != num_sequences)
    return absl::InvalidArgumentError(absl::StrCat(
        "sampler: ", options.seeds.size(), " seeds for ", num_sequences,
        " sequences"));
  std::unique_ptr<Sampler> s(new Sampler(options));
  s->rngs_.reserve(static_cast<size_t>(num_sequences));
  for (int64_t i = 0; i < num_sequences; ++i)
    s->rngs_.push_back(options.seeds.empty()
                           ? Rng(options.sampling.seed, static_cast<uint64_t>(i))
                           : Rng(options.seeds[i], 0));
  s->eos_block_step_.assign(static_cast<size_t>(num_sequences), -1);
  s->done_.assign(static_cast<size_t>(num_sequences), false);
  s->handle_ = RegisterSamplerTarget(s.get());
  return s;
}

Sampler::~Sampler() { UnregisterSamplerTarget(handle_); }

Sampler *Sampler::Lookup(int64_t handle) {
  return dynamic_cast<Sampler *>(LookupSamplerTarget(handle));
}

absl::Status Sampler::BeginBlock(std::vector<int64_t> rows) {
  std::vector<bool> seen(done_.size(), false);
  for (int64_t r : rows) {
    if (r < 0 || r >= num_sequences())
      return absl::InvalidArgumentError(absl::StrCat(
          "sampler: sequence ", r, " out of range [0, ", num_sequences(), ")"));
    if (seen[r])
      return absl::InvalidArgumentError(
          absl::StrCat("sampler: sequence ", r, " appears twice in the batch"));
    seen[r] = true;
  }
  for (size_t i = 0; i < done_.size(); ++i)
    if (eos_block_step_[i] >= 0) {
      done_[i] = true;
      eos_block_step_[i] = -1;
    }
  rows_ = std::move(rows);
  steps_in_block_ = 0;
  device_steps_in_block_ = 0;
  block_on_device_ = options_.device;
  for (int64_t r : rows_)
    block_on_device_ = block_on_device_ && !finished(r);
  return absl::OkStatus();
}

bool Sampler::StepOnDevice(int64_t rows, int64_t vocab, int64_t token_rows,
                           DeviceStep &step) {
  const int64_t batch = static_cast<int64_t>(rows_.size());
  // Mixed host and device steps in one block would split the EOS state.
  if (!block_on_device_ || device_steps_in_block_ != steps_in_block_ ||
      rows != batch || token_rows != batch || vocab != options_.vocab_size)
    return false;
  const int64_t index = recording_ ? recorded_steps_ : steps_in_block_;
  step.step_in_block = index;
  step.eos_token_id = options_.eos_token_id;
  step.pad_token_id = options_.generation_pad_token_id;
  const SamplingOptions &so = options_.sampling;
  step.greedy = so.greedy;
  step.logits_kept = options_.logits_kept;
  if (!so.greedy) {
    step.inv_temperature = 1.0 / so.temperature;
    step.top_k = so.top_k;
    step.top_p = so.top_p;
    step.rng_states = nullptr;
    if (index == 0 && !(device_rng_valid_ && device_rng_rows_ == rows_)) {
      rng_upload_.resize(rows_.size());
      for (size_t r = 0; r < rows_.size(); ++r)
        rng_upload_[r] = rngs_[rows_[r]].state();
      step.rng_states = rng_upload_.data();
      device_rng_rows_ = rows_;
      device_rng_valid_ = true;
    }
  }
  if (recording_) {
    ++recorded_steps_;
    return true;
  }
  ++device_steps_in_block_;
  ++steps_in_block_;
  ++total_steps_;
  total_rows_ += rows;
  return true;
}

bool Sampler::BlockReplayable() const {
  if (!block_on_device_ || steps_in_block_ != 0)
    return false;
  return options_.sampling.greedy ||
         (device_rng_valid_ && device_rng_rows_ == rows_);
}

absl::Status Sampler::BeginRecording() {
  if (!BlockReplayable())
    return absl::FailedPreconditionError(
        "sampler: recording a block that does not run wholly on the device "
        "(host steps, a stream handover, or steps already taken)");
  recording_ = true;
  recorded_steps_ = 0;
  return absl::OkStatus();
}

void Sampler::ReplayedSteps(int64_t steps) {
  const int64_t rows = static_cast<int64_t>(rows_.size());
  device_steps_in_block_ += steps;
  steps_in_block_ += steps;
  total_steps_ += steps;
  total_rows_ += rows * steps;
}

void Sampler::EndBlock(const Tensor &tokens) {
  const bool draws = !options_.sampling.greedy;
  if (device_steps_in_block_ == 0 || (options_.eos_token_id < 0 && !draws))
    return;
  const int64_t rows = static_cast<int64_t>(rows_.size());
  const int64_t steps = tokens.rank() == 2 ? tokens.dim(1) : 0;
  if (tokens.dtype() != proto::I64 || tokens.rank() != 2 ||
      tokens.dim(0) != rows) {
    Fail(absl::InvalidArgumentError(absl::StrCat(
        "sampler: block tokens ", tokens.DebugString(), " for ", rows,
        " rows")));
    return;
  }
  const int64_t *t = tokens.data_as<int64_t>();
  const int64_t device_steps = std::min(steps, device_steps_in_block_);
  for (int64_t r = 0; r < rows; ++r) {
    // The device drew once per step until the row's EOS, that one included.
    int64_t drawn = device_steps;
    if (options_.eos_token_id >= 0)
      for (int64_t k = 0; k < device_steps; ++k)
        if (t[r * steps + k] == options_.eos_token_id) {
          eos_block_step_[rows_[r]] = k;
          drawn = k + 1;
          break;
        }
    if (draws)
      rngs_[rows_[r]].Advance(static_cast<uint64_t>(drawn));
  }
}

void Sampler::Fail(absl::Status s) {
  if (status_.ok())
    status_ = std::move(s);
}

void Sampler::Step(const StridedMemRef<float, 2> &logits,
                   StridedMemRef<int64_t, 1> &tokens) {
  const int64_t rows = static_cast<int64_t>(rows_.size());
  const int64_t pad = options_.generation_pad_token_id;
  const std::string where =
      absl::StrCat("sampler (block step ", steps_in_block_, ")");
  const int64_t ntok = tokens.sizes[0];
  auto token_at = [&](int64_t r) -> int64_t & {
    return tokens.aligned[tokens.offset + r * tokens.strides[0]];
  };
  if (ntok > 0 && tokens.aligned == nullptr) {
    Fail(absl::InvalidArgumentError(absl::StrCat(where, ": null tokens buffer")));
    return;
  }
  const bool bad_shape = logits.sizes[0] != rows || ntok != rows ||
                         logits.sizes[1] != options_.vocab_size ||
                         (rows > 0 && logits.aligned == nullptr);
  if (bad_shape) {
    Fail(absl::InvalidArgumentError(absl::StrCat(
        where, ": logits [", logits.sizes[0], ", ", logits.sizes[1],
        "] and tokens [", ntok, "] do not match the batch [", rows, ", ",
        options_.vocab_size, "]")));
    for (int64_t r = 0; r < ntok; ++r)
      token_at(r) = pad;
    return;
  }
  // The host draws from its streams: the device's copies are stale now.
  device_rng_valid_ = false;
  const bool eos_on = options_.eos_token_id >= 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t seq = rows_[r];
    if (eos_on && finished(seq)) {
      token_at(r) = pad;
      continue;
    }
    const float *row = logits.aligned + logits.offset + r * logits.strides[0];
    absl::StatusOr<int64_t> t =
        SampleToken(options_.sampling, row, options_.vocab_size,
                    logits.strides[1], rngs_[seq], scratch_);
    if (!t.ok()) {
      Fail(absl::InvalidArgumentError(absl::StrCat(
          where, ", sequence ", seq, ": ", t.status().message())));
      token_at(r) = pad;
      continue;
    }
    token_at(r) = *t;
    if (eos_on && *t == options_.eos_token_id)
      eos_block_step_[seq] = steps_in_block_;
  }
  ++steps_in_block_;
  ++total_steps_;
  total_rows_ += rows;
}

absl::Status Sampler::StepTensors(const Tensor &logits, Tensor &tokens) {
  if (logits.dtype() != proto::F32 || logits.rank() != 2 ||
      tokens.dtype() != proto::I64 || tokens.rank() != 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "sampler: expected logits F32[B, V] and tokens I64[B], got ",
        logits.DebugString(), " and ", tokens.DebugString()));
  StridedMemRef<float, 2> l;
  l.allocated = l.aligned =
      const_cast<float *>(static_cast<const float *>(logits.data()));
  l.offset = 0;
  l.sizes[0] = logits.dim(0);
  l.sizes[1] = logits.dim(1);
  l.strides[0] = logits.dim(1);
  l.strides[1] = 1;
  StridedMemRef<int64_t, 1> t;
  t.allocated = t.aligned = tokens.data_as<int64_t>();
  t.offset = 0;
  t.sizes[0] = tokens.dim(0);
  t.strides[0] = 1;
  absl::Status before = status_;
  Step(l, t);
  if (before.ok() && !status_.ok())
    return status_;
  return absl::OkStatus();
}

} // namespace bt::rt
