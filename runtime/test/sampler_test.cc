//===- sampler_test.cc ----------------------------------------------------===//

#include "bt/runtime/generate/sampler.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;

SamplingOptions Sampling(double t, int64_t k = 0, double p = 1.0,
                         uint64_t seed = 0) {
  SamplingOptions o;
  o.greedy = false;
  o.temperature = t;
  o.top_k = k;
  o.top_p = p;
  o.seed = seed;
  return o;
}

std::vector<float> Logits(std::initializer_list<double> probs) {
  std::vector<float> l;
  for (double p : probs)
    l.push_back(static_cast<float>(std::log(p)));
  return l;
}

StridedMemRef<float, 2> Dense(std::vector<float> &v, int64_t rows, int64_t vocab) {
  return {v.data(), v.data(), 0, {rows, vocab}, {vocab, 1}};
}
StridedMemRef<int64_t, 1> Dense(std::vector<int64_t> &v) {
  return {v.data(), v.data(), 0, {static_cast<int64_t>(v.size())}, {1}};
}

TEST(Sampler, ArgMaxTakesTheLowestIdOnTies) {
  std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(ArgMax(l.data(), 4), 1);
  std::vector<float> inf = {-INFINITY, -INFINITY};
  EXPECT_EQ(ArgMax(inf.data(), 2), 0);
  std::vector<float> nan = {0.0f, NAN, 3.0f};
  EXPECT_EQ(ArgMax(nan.data(), 3), -1);
  // Stride 2: elements 0, 2, 4, 6 = {1, 5, 5, 0}.
  std::vector<float> strided = {1, 9, 5, 9, 5, 9, 0, 9};
  EXPECT_EQ(ArgMax(strided.data(), 4, 2), 1);
}

// The contiguous paths (AVX2 where the CPU has it: 2 x 8 lanes with the
// group of each lane's first maximum; portable: 16 lanes, then the first
// id at the maximum) against the documented rule as a sequential scan: the
// first strict maximum in id order from -inf (lowest id among equal maxima,
// +0 == -0, all -inf -> 0), -1 for a NaN; lengths around the lane count,
// values from a tiny set so that ties, signed zeros, infinities and NaNs
// land in every lane.
TEST(Sampler, ArgMaxOfContiguousRowsIsTheSequentialScan) {
  auto scan = [](const std::vector<float> &l) -> int64_t {
    int64_t best = 0;
    float value = -INFINITY;
    for (size_t v = 0; v < l.size(); ++v) {
      if (std::isnan(l[v]))
        return -1;
      if (l[v] > value) {
        value = l[v];
        best = static_cast<int64_t>(v);
      }
    }
    return best;
  };
  const float pool[] = {-INFINITY, -1.0f, -0.0f, 0.0f, 2.0f, INFINITY, NAN};
  uint64_t state = 12345;
  auto next = [&]() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  for (int64_t n : {0, 1, 15, 16, 17, 31, 32, 33, 100, 257}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> l(static_cast<size_t>(n));
      // Pools without NaN or +inf most of the time, so maxima vary.
      const size_t kinds = trial % 4 == 0 ? 7 : trial % 4 == 1 ? 6 : 5;
      for (float &x : l)
        x = pool[next() % kinds];
      ASSERT_EQ(ArgMax(l.data(), n), scan(l)) << "n " << n << " trial " << trial;
      ASSERT_EQ(ArgMaxContiguousPortable(l.data(), n), scan(l))
          << "n " << n << " trial " << trial;
    }
  }
}

TEST(Sampler, GreedyIsOneHotAndDrawsNothing) {
  std::vector<float> l = {0.1f, 0.7f, 0.7f};
  auto p = SamplingDistribution(SamplingOptions(), l);
  ASSERT_THAT(p.status(), IsOk());
  EXPECT_EQ(*p, std::vector<double>({0, 1, 0}));
  Rng rng(3, 0), ref(3, 0);
  std::vector<double> scratch;
  auto t = SampleToken(SamplingOptions(), l.data(), 3, 1, rng, scratch);
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_EQ(*t, 1);
  EXPECT_EQ(rng.Next(), ref.Next()); // no draw was consumed
}

TEST(Sampler, TemperatureScalesTheSoftmax) {
  std::vector<float> l = {0.0f, 1.0f, 2.0f, 0.5f};
  for (double t : {0.5, 1.0, 3.0}) {
    auto p = SamplingDistribution(Sampling(t), l);
    ASSERT_THAT(p.status(), IsOk());
    double z = 0;
    for (float x : l)
      z += std::exp(x / t);
    for (size_t i = 0; i < l.size(); ++i)
      EXPECT_NEAR((*p)[i], std::exp(l[i] / t) / z, 1e-12) << "T=" << t;
  }
}

TEST(Sampler, TopKKeepsTiesAtTheThreshold) {
  std::vector<float> l = {1, 3, 3, 2, 0};
  auto k2 = SamplingDistribution(Sampling(1, 2), l);
  ASSERT_THAT(k2.status(), IsOk());
  EXPECT_NEAR((*k2)[1], 0.5, 1e-12);
  EXPECT_NEAR((*k2)[2], 0.5, 1e-12);
  EXPECT_EQ((*k2)[0] + (*k2)[3] + (*k2)[4], 0.0);
  auto k3 = SamplingDistribution(Sampling(1, 3), l);
  ASSERT_THAT(k3.status(), IsOk());
  EXPECT_GT((*k3)[3], 0.0);
  EXPECT_EQ((*k3)[0] + (*k3)[4], 0.0);
  // The 2nd largest value (2) is shared: both tokens stay.
  std::vector<float> ties = {3, 2, 2, 1};
  auto kt = SamplingDistribution(Sampling(1, 2), ties);
  ASSERT_THAT(kt.status(), IsOk());
  EXPECT_GT((*kt)[1], 0.0);
  EXPECT_GT((*kt)[2], 0.0);
  EXPECT_EQ((*kt)[3], 0.0);
  // k >= V keeps everything.
  auto all = SamplingDistribution(Sampling(1, 5), l);
  ASSERT_THAT(all.status(), IsOk());
  for (double x : *all)
    EXPECT_GT(x, 0.0);
}

TEST(Sampler, TopPKeepsTheTokenThatCrossesTheThreshold) {
  // Probabilities 0.05, 0.5, 0.15, 0.3 (sorted: id1 .5, id3 .3, id2 .15, id0 .05).
  std::vector<float> l = Logits({0.05, 0.5, 0.15, 0.3});
  auto kept = [&](double top_p) {
    auto p = SamplingDistribution(Sampling(1, 0, top_p), l);
    EXPECT_THAT(p.status(), IsOk());
    std::vector<int64_t> ids;
    double sum = 0;
    for (size_t i = 0; i < p->size(); ++i)
      if ((*p)[i] > 0) {
        ids.push_back(static_cast<int64_t>(i));
        sum += (*p)[i];
      }
    EXPECT_NEAR(sum, 1.0, 1e-12);
    return ids;
  };
  EXPECT_EQ(kept(0.01), std::vector<int64_t>({1}));
  EXPECT_EQ(kept(0.49), std::vector<int64_t>({1}));
  EXPECT_EQ(kept(0.51), std::vector<int64_t>({1, 3}));
  EXPECT_EQ(kept(0.79), std::vector<int64_t>({1, 3}));
  EXPECT_EQ(kept(0.81), std::vector<int64_t>({1, 2, 3}));
  EXPECT_EQ(kept(0.96), std::vector<int64_t>({0, 1, 2, 3}));
  EXPECT_EQ(kept(1.0), std::vector<int64_t>({0, 1, 2, 3}));
  // Renormalized over the kept set: 0.5 / 0.8 and 0.3 / 0.8.
  auto p = SamplingDistribution(Sampling(1, 0, 0.7), l);
  ASSERT_THAT(p.status(), IsOk());
  EXPECT_NEAR((*p)[1], 0.625, 1e-6);
  EXPECT_NEAR((*p)[3], 0.375, 1e-6);
  // top-k first, then top-p over the renormalized top-k (HF order).
  auto kp = SamplingDistribution(Sampling(1, 2, 0.6), l);
  ASSERT_THAT(kp.status(), IsOk());
  EXPECT_NEAR((*kp)[1], 1.0, 1e-12); // 0.5/0.8 = 0.625 >= 0.6 alone
}

TEST(Sampler, DrawsFollowTheDistribution) {
  std::vector<float> l = {0.0f, 1.0f, 2.0f, 0.5f, -1.0f};
  for (const SamplingOptions &o :
       {Sampling(0.7, 0, 1.0), Sampling(1.3, 3, 1.0), Sampling(1.0, 0, 0.8)}) {
    auto p = SamplingDistribution(o, l);
    ASSERT_THAT(p.status(), IsOk());
    Rng rng(7, 0);
    std::vector<double> scratch;
    std::vector<int64_t> counts(l.size(), 0);
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      auto t = SampleToken(o, l.data(), 5, 1, rng, scratch);
      ASSERT_THAT(t.status(), IsOk());
      ++counts[*t];
    }
    for (size_t v = 0; v < l.size(); ++v) {
      // 4.5 binomial standard deviations; masked tokens are never drawn.
      const double sd = std::sqrt((*p)[v] * (1 - (*p)[v]) / n);
      EXPECT_NEAR(counts[v] / double(n), (*p)[v], 4.5 * sd + 1e-12)
          << "token " << v << " T=" << o.temperature << " k=" << o.top_k
          << " p=" << o.top_p;
    }
  }
}

TEST(Sampler, RngStreamsAreReproducibleAndDistinct) {
  Rng a(1, 0), b(1, 0), c(1, 1), d(2, 0);
  const uint64_t a0 = a.Next();
  EXPECT_EQ(a0, b.Next());
  EXPECT_NE(a0, c.Next());
  EXPECT_NE(a0, d.Next());
  // Pinned: the stream is part of the reproducibility contract.
  Rng pinned(0, 0);
  const uint64_t first = pinned.Next();
  EXPECT_EQ(first, Rng(0, 0).Next());
  double lo = 1, hi = 0;
  for (int i = 0; i < 1000; ++i) {
    double u = a.Uniform();
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_LT(lo, 0.01);
  EXPECT_GT(hi, 0.99);
}

TEST(Sampler, OptionsAreValidated) {
  EXPECT_THAT(ValidateSamplingOptions(Sampling(0)),
              StatusIs(absl::StatusCode::kInvalidArgument, "temperature"));
  EXPECT_THAT(ValidateSamplingOptions(Sampling(1, -1)),
              StatusIs(absl::StatusCode::kInvalidArgument, "top-k"));
  EXPECT_THAT(ValidateSamplingOptions(Sampling(1, 0, 0.0)),
              StatusIs(absl::StatusCode::kInvalidArgument, "top-p"));
  EXPECT_THAT(ValidateSamplingOptions(Sampling(1, 0, 1.5)),
              StatusIs(absl::StatusCode::kInvalidArgument, "top-p"));
  EXPECT_THAT(ValidateSamplingOptions(SamplingOptions()), IsOk());
  std::vector<float> nan = {0, NAN};
  EXPECT_THAT(SamplingDistribution(Sampling(1), nan).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "NaN"));
  std::vector<float> inf = {-INFINITY, -INFINITY};
  EXPECT_THAT(SamplingDistribution(Sampling(1), inf).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "finite"));
  Sampler::Options o;
  o.vocab_size = 0;
  EXPECT_THAT(Sampler::Create(o, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "vocab_size"));
  o.vocab_size = 4;
  o.seeds = {1, 2};
  EXPECT_THAT(Sampler::Create(o, 3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "2 seeds for 3"));
}

Sampler::Options EosOptions(SamplingOptions s = SamplingOptions()) {
  Sampler::Options o;
  o.sampling = s;
  o.vocab_size = 4;
  o.eos_token_id = 0;
  o.generation_pad_token_id = 1;
  return o;
}

// Official EOS semantics: the EOS token is returned, the rest of the block is
// the generation pad (whatever the logits say), and the sequence stays
// finished.
TEST(Sampler, EosFillsTheRestOfTheBlockWithThePad) {
  auto s = Sampler::Create(EosOptions(), 3);
  ASSERT_THAT(s.status(), IsOk());
  Sampler &sm = **s;
  ASSERT_THAT(sm.BeginBlock({0, 1, 2}), IsOk());
  auto step = [&](std::vector<int64_t> argmax) {
    std::vector<float> l(argmax.size() * 4, 0.0f);
    for (size_t r = 0; r < argmax.size(); ++r)
      l[r * 4 + argmax[r]] = 5.0f;
    std::vector<int64_t> t(argmax.size(), -7);
    auto lm = Dense(l, static_cast<int64_t>(argmax.size()), 4);
    auto tm = Dense(t);
    _mlir_ciface_bt_rt_sample(sm.handle(), &lm, &tm);
    return t;
  };
  EXPECT_EQ(step({2, 3, 2}), std::vector<int64_t>({2, 3, 2}));
  EXPECT_EQ(step({3, 0, 2}), std::vector<int64_t>({3, 0, 2})); // seq 1: EOS
  EXPECT_TRUE(sm.finished(1));
  EXPECT_EQ(sm.eos_step_in_block(1), 1);
  EXPECT_EQ(step({0, 3, 3}), std::vector<int64_t>({0, 1, 3})); // seq 0: EOS too
  EXPECT_EQ(step({2, 2, 2}), std::vector<int64_t>({1, 1, 2}));
  EXPECT_EQ(sm.eos_step_in_block(0), 2);
  EXPECT_FALSE(sm.finished(2));
  EXPECT_EQ(sm.steps_in_block(), 4);
  EXPECT_THAT(sm.status(), IsOk());

  // Next block: the finished sequences stay finished (pad if still present).
  ASSERT_THAT(sm.BeginBlock({2, 1}), IsOk());
  EXPECT_EQ(sm.eos_step_in_block(1), -1);
  EXPECT_TRUE(sm.finished(1));
  EXPECT_TRUE(sm.finished(0));
  EXPECT_EQ(step({3, 3}), std::vector<int64_t>({3, 1}));
  EXPECT_EQ(sm.total_steps(), 5);
  EXPECT_EQ(sm.total_rows(), 14);

  // Without EOS handling the EOS id is an ordinary token.
  Sampler::Options no_eos = EosOptions();
  no_eos.eos_token_id = -1;
  auto n = Sampler::Create(no_eos, 1);
  ASSERT_THAT(n.status(), IsOk());
  ASSERT_THAT((*n)->BeginBlock({0}), IsOk());
  std::vector<float> l = {5, 0, 0, 0};
  std::vector<int64_t> t(1);
  auto lm = Dense(l, 1, 4);
  auto tm = Dense(t);
  (*n)->Step(lm, tm);
  (*n)->Step(lm, tm);
  EXPECT_EQ(t[0], 0);
  EXPECT_FALSE((*n)->finished(0));
}

// A sequence's samples depend only on its stream and its logits: not on the
// other rows, their order, or whether they are present (compaction).
// Sampling on the device (StepOnDevice): the greedy steps of a block whose
// rows are all live run on the device; the EOS bookkeeping comes from the
// block's tokens (EndBlock), as the host steps would have recorded it.
TEST(Sampler, GreedyBlocksOfLiveRowsMayRunOnTheDevice) {
  Sampler::Options o = EosOptions();
  o.device = true;
  auto s = Sampler::Create(o, 3);
  ASSERT_THAT(s.status(), IsOk());
  Sampler &sm = **s;
  ASSERT_THAT(sm.BeginBlock({0, 1, 2}), IsOk());
  SamplerCallbackTarget::DeviceStep d;
  // Shapes that do not match the batch stay on the host (Step reports them).
  EXPECT_FALSE(sm.StepOnDevice(2, 4, 2, d));
  EXPECT_FALSE(sm.StepOnDevice(3, 5, 3, d));
  for (int64_t k = 0; k < 4; ++k) {
    ASSERT_TRUE(sm.StepOnDevice(3, 4, 3, d));
    EXPECT_EQ(d.step_in_block, k);
    EXPECT_EQ(d.eos_token_id, 0);
    EXPECT_EQ(d.pad_token_id, 1);
  }
  EXPECT_EQ(sm.steps_in_block(), 4);
  EXPECT_EQ(sm.device_steps_in_block(), 4);
  EXPECT_EQ(sm.total_rows(), 12);
  // The kernel's tokens: sequence 1 emitted EOS at step 1, then the pad.
  Tensor tok = *Tensor::Allocate(proto::I64, {3, 4});
  const int64_t t[] = {2, 3, 2, 2, 3, 0, 1, 1, 2, 2, 3, 3};
  std::copy(std::begin(t), std::end(t), tok.data_as<int64_t>());
  sm.EndBlock(tok);
  EXPECT_THAT(sm.status(), IsOk());
  EXPECT_EQ(sm.eos_step_in_block(1), 1);
  EXPECT_EQ(sm.eos_step_in_block(0), -1);
  EXPECT_TRUE(sm.finished(1));
  // A block with a finished row runs on the host (the kernel's EOS state
  // covers one block), and so does every step after a host step.
  ASSERT_THAT(sm.BeginBlock({0, 1}), IsOk());
  EXPECT_FALSE(sm.StepOnDevice(2, 4, 2, d));
  ASSERT_THAT(sm.BeginBlock({0}), IsOk());
  EXPECT_TRUE(sm.StepOnDevice(1, 4, 1, d));
  EXPECT_EQ(d.step_in_block, 0);

  // Not allowed (Options::device unset): host steps only, greedy or not.
  auto sampled = Sampler::Create(EosOptions(Sampling(1.0)), 1);
  ASSERT_THAT(sampled.status(), IsOk());
  ASSERT_THAT((*sampled)->BeginBlock({0}), IsOk());
  EXPECT_FALSE((*sampled)->StepOnDevice(1, 4, 1, d));
  auto host = Sampler::Create(EosOptions(), 1);
  ASSERT_THAT(host.status(), IsOk());
  ASSERT_THAT((*host)->BeginBlock({0}), IsOk());
  EXPECT_FALSE((*host)->StepOnDevice(1, 4, 1, d));
}

// Sampled blocks on the device: the first step of a block hands over the
// rows' stream states unless the device holds them (same rows, same order,
// no host step since); EndBlock advances the host's streams by the device's
// draws (one per step up to and including the row's EOS).
TEST(Sampler, SampledBlocksHandTheStreamsToTheDevice) {
  Sampler::Options o = EosOptions(Sampling(0.7, 3, 0.9, 42));
  o.device = true;
  auto s = Sampler::Create(o, 3);
  ASSERT_THAT(s.status(), IsOk());
  Sampler &sm = **s;
  auto advanced = [](uint64_t stream, int draws) {
    Rng r(42, stream);
    for (int i = 0; i < draws; ++i)
      r.Next();
    return r.state();
  };
  ASSERT_THAT(sm.BeginBlock({0, 1, 2}), IsOk());
  SamplerCallbackTarget::DeviceStep d;
  for (int64_t k = 0; k < 4; ++k) {
    ASSERT_TRUE(sm.StepOnDevice(3, 4, 3, d));
    EXPECT_FALSE(d.greedy);
    EXPECT_DOUBLE_EQ(d.inv_temperature, 1.0 / 0.7);
    EXPECT_EQ(d.top_k, 3);
    EXPECT_DOUBLE_EQ(d.top_p, 0.9);
    if (k == 0) {
      ASSERT_NE(d.rng_states, nullptr);
      for (int r = 0; r < 3; ++r)
        EXPECT_EQ(d.rng_states[r], advanced(r, 0)) << "row " << r;
    } else {
      EXPECT_EQ(d.rng_states, nullptr) << "step " << k;
    }
  }
  // Sequence 1 emitted EOS at step 1: 2 draws; the others 4.
  Tensor tok = *Tensor::Allocate(proto::I64, {3, 4});
  const int64_t t[] = {2, 3, 2, 2, 3, 0, 1, 1, 2, 2, 3, 3};
  std::copy(std::begin(t), std::end(t), tok.data_as<int64_t>());
  sm.EndBlock(tok);
  EXPECT_THAT(sm.status(), IsOk());
  // The same rows would continue on the device; other rows get the
  // advanced states.
  ASSERT_THAT(sm.BeginBlock({0, 2}), IsOk());
  ASSERT_TRUE(sm.StepOnDevice(2, 4, 2, d));
  ASSERT_NE(d.rng_states, nullptr);
  EXPECT_EQ(d.rng_states[0], advanced(0, 4));
  EXPECT_EQ(d.rng_states[1], advanced(2, 4));
  for (int k = 1; k < 4; ++k)
    ASSERT_TRUE(sm.StepOnDevice(2, 4, 2, d));
  Tensor tok2 = *Tensor::Allocate(proto::I64, {2, 4});
  std::fill_n(tok2.data_as<int64_t>(), 8, 2);
  sm.EndBlock(tok2);
  ASSERT_THAT(sm.BeginBlock({0, 2}), IsOk());
  ASSERT_TRUE(sm.StepOnDevice(2, 4, 2, d));
  EXPECT_EQ(d.rng_states, nullptr);
  // A host step (here: a shape the device path refuses) makes the device's
  // copies stale: the next device block hands the states over again.
  for (int k = 1; k < 4; ++k)
    ASSERT_TRUE(sm.StepOnDevice(2, 4, 2, d));
  sm.EndBlock(tok2);
  ASSERT_THAT(sm.BeginBlock({0, 2}), IsOk());
  std::vector<float> l = {-9, 1, 2, 3, -9, 1, 2, 3};
  std::vector<int64_t> out(2);
  auto lm = Dense(l, 2, 4);
  auto tm = Dense(out);
  sm.Step(lm, tm);
  EXPECT_THAT(sm.status(), IsOk());
  ASSERT_THAT(sm.BeginBlock({0, 2}), IsOk());
  ASSERT_TRUE(sm.StepOnDevice(2, 4, 2, d));
  ASSERT_NE(d.rng_states, nullptr);
  EXPECT_EQ(d.rng_states[0], advanced(0, 4 + 4 + 4 + 1));
  EXPECT_EQ(d.rng_states[1], advanced(2, 4 + 4 + 4 + 1));
}

// Recording a block for replays (decode_tokens as a CUDA graph): only a
// block that runs wholly on the device with no stream handover; while
// recording, the steps are described (0, 1, ...) but not counted; each
// replay counts them with ReplayedSteps, and EndBlock does the usual
// bookkeeping from the replay's tokens.
TEST(Sampler, RecordedBlocksCountTheirStepsAtEachReplay) {
  Sampler::Options o = EosOptions(Sampling(0.7, 3, 0.9, 42));
  o.device = true;
  auto s = Sampler::Create(o, 2);
  ASSERT_THAT(s.status(), IsOk());
  Sampler &sm = **s;
  SamplerCallbackTarget::DeviceStep d;
  // The first block hands the streams over: not replayable.
  ASSERT_THAT(sm.BeginBlock({0, 1}), IsOk());
  EXPECT_FALSE(sm.BlockReplayable());
  EXPECT_THAT(sm.BeginRecording(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "wholly on the device"));
  for (int k = 0; k < 4; ++k)
    ASSERT_TRUE(sm.StepOnDevice(2, 4, 2, d));
  EXPECT_FALSE(sm.BlockReplayable()); // steps taken
  Tensor tok = *Tensor::Allocate(proto::I64, {2, 4});
  std::fill_n(tok.data_as<int64_t>(), 8, 2);
  sm.EndBlock(tok);
  // The same rows: the device holds their streams.
  ASSERT_THAT(sm.BeginBlock({0, 1}), IsOk());
  ASSERT_TRUE(sm.BlockReplayable());
  ASSERT_THAT(sm.BeginRecording(), IsOk());
  for (int64_t k = 0; k < 4; ++k) {
    ASSERT_TRUE(sm.StepOnDevice(2, 4, 2, d));
    EXPECT_EQ(d.step_in_block, k);
    EXPECT_EQ(d.rng_states, nullptr);
  }
  sm.EndRecording();
  EXPECT_EQ(sm.steps_in_block(), 0);
  EXPECT_EQ(sm.total_steps(), 4);
  sm.ReplayedSteps(4);
  EXPECT_EQ(sm.steps_in_block(), 4);
  EXPECT_EQ(sm.device_steps_in_block(), 4);
  EXPECT_EQ(sm.total_steps(), 8);
  EXPECT_EQ(sm.total_rows(), 16);
  // Row 1 emits EOS at step 2 in this replay: its stream advanced by 3.
  const int64_t t[] = {2, 2, 2, 2, 2, 2, 0, 1};
  std::copy(std::begin(t), std::end(t), tok.data_as<int64_t>());
  sm.EndBlock(tok);
  EXPECT_EQ(sm.eos_step_in_block(1), 2);
  // Without every row live (a finished row) the block is not replayable.
  ASSERT_THAT(sm.BeginBlock({0, 1}), IsOk());
  EXPECT_FALSE(sm.BlockReplayable());
  // Row 0 alone: handed over again, its stream advanced by both blocks'
  // 4 + 4 draws (the replayed ones counted by EndBlock).
  ASSERT_THAT(sm.BeginBlock({0}), IsOk());
  EXPECT_FALSE(sm.BlockReplayable());
  ASSERT_TRUE(sm.StepOnDevice(1, 4, 1, d));
  ASSERT_NE(d.rng_states, nullptr);
  Rng r0(42, 0);
  for (int i = 0; i < 8; ++i)
    r0.Next();
  EXPECT_EQ(d.rng_states[0], r0.state());
  // Greedy blocks need no streams: replayable from the first block.
  Sampler::Options g = EosOptions(); // greedy
  g.device = true;
  auto gs = Sampler::Create(g, 2);
  ASSERT_THAT(gs.status(), IsOk());
  ASSERT_THAT((*gs)->BeginBlock({0, 1}), IsOk());
  EXPECT_TRUE((*gs)->BlockReplayable());
}

TEST(Sampler, RngAdvanceSkipsDraws) {
  Rng a(9, 3), b(9, 3);
  for (int i = 0; i < 37; ++i)
    a.Next();
  b.Advance(37);
  EXPECT_EQ(a.state(), b.state());
  EXPECT_EQ(a.Next(), b.Next());
  EXPECT_EQ(Rng::FromState(a.state()).Next(), Rng::FromState(b.state()).Next());
}

TEST(Sampler, StreamsAreIndependentOfBatchComposition) {
  std::vector<float> row = {-30.0f, 0.1f, 0.5f, 0.2f}; // EOS (0) unlikely
  const SamplingOptions o = Sampling(1.0, 0, 1.0, 42);
  auto all = Sampler::Create(EosOptions(o), 3);
  auto alone = Sampler::Create(EosOptions(o), 3);
  ASSERT_THAT(all.status(), IsOk());
  ASSERT_THAT(alone.status(), IsOk());
  std::vector<int64_t> seq2_all, seq2_alone;
  for (int block = 0; block < 20; ++block) {
    // Batch {0, 1, 2} with other logits in rows 0/1; versus {2, 0} and {2}.
    ASSERT_THAT((*all)->BeginBlock({0, 1, 2}), IsOk());
    std::vector<float> l = {0, 0, 0, 9, 1, 1, 1, 1};
    l.insert(l.end(), row.begin(), row.end());
    std::vector<int64_t> t(3);
    auto lm = Dense(l, 3, 4);
    auto tm = Dense(t);
    (*all)->Step(lm, tm);
    if (!(*all)->finished(2))
      seq2_all.push_back(t[2]);
    std::vector<int64_t> rows = block % 2 ? std::vector<int64_t>{2}
                                          : std::vector<int64_t>{2, 0};
    ASSERT_THAT((*alone)->BeginBlock(rows), IsOk());
    std::vector<float> l2(row.begin(), row.end());
    if (rows.size() == 2)
      l2.insert(l2.end(), {5, 5, 5, 5});
    std::vector<int64_t> t2(rows.size());
    auto lm2 = Dense(l2, static_cast<int64_t>(rows.size()), 4);
    auto tm2 = Dense(t2);
    (*alone)->Step(lm2, tm2);
    if (!(*alone)->finished(2))
      seq2_alone.push_back(t2[0]);
  }
  EXPECT_EQ(seq2_all, seq2_alone);
  EXPECT_GT(seq2_all.size(), 1u);

  // Per-sequence seeds: the stream does not depend on the index either.
  Sampler::Options a = EosOptions(o), b = EosOptions(o);
  a.eos_token_id = b.eos_token_id = -1;
  a.seeds = {5, 6, 7};
  b.seeds = {7};
  auto sa = Sampler::Create(a, 3), sb = Sampler::Create(b, 1);
  ASSERT_THAT(sa.status(), IsOk());
  ASSERT_THAT(sb.status(), IsOk());
  ASSERT_THAT((*sa)->BeginBlock({2}), IsOk());
  ASSERT_THAT((*sb)->BeginBlock({0}), IsOk());
  for (int i = 0; i < 30; ++i) {
    std::vector<float> l = row;
    std::vector<int64_t> x(1), y(1);
    auto lm = Dense(l, 1, 4);
    auto xm = Dense(x), ym = Dense(y);
    (*sa)->Step(lm, xm);
    (*sb)->Step(lm, ym);
    EXPECT_EQ(x[0], y[0]) << "draw " << i;
  }
}

TEST(Sampler, CallbackHonorsStrides) {
  auto s = Sampler::Create(EosOptions(), 2);
  ASSERT_THAT(s.status(), IsOk());
  ASSERT_THAT((*s)->BeginBlock({1, 0}), IsOk());
  // Logits [2, 4] at offset 3, row stride 10, column stride 2.
  std::vector<float> buf(32, 100.0f);
  const float rows[2][4] = {{0, 1, 0, 3}, {0, 4, 2, 0}};
  for (int r = 0; r < 2; ++r)
    for (int v = 0; v < 4; ++v)
      buf[3 + r * 10 + v * 2] = rows[r][v];
  StridedMemRef<float, 2> lm{buf.data(), buf.data(), 3, {2, 4}, {10, 2}};
  // Tokens [2] at offset 1, stride 3.
  std::vector<int64_t> tb(8, -1);
  StridedMemRef<int64_t, 1> tm{tb.data(), tb.data(), 1, {2}, {3}};
  _mlir_ciface_bt_rt_sample((*s)->handle(), &lm, &tm);
  EXPECT_THAT((*s)->status(), IsOk());
  EXPECT_EQ(tb, std::vector<int64_t>({-1, 3, -1, -1, 1, -1, -1, -1}));
}

TEST(Sampler, ErrorsAreRecordedNotThrown) {
  auto s = Sampler::Create(EosOptions(), 2);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_THAT((*s)->BeginBlock({0, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument, "out of range"));
  EXPECT_THAT((*s)->BeginBlock({1, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, "twice"));
  ASSERT_THAT((*s)->BeginBlock({0, 1}), IsOk());
  // Wrong batch size: tokens get the pad, the first error is kept.
  std::vector<float> l(12, 0.0f);
  std::vector<int64_t> t(3, 9);
  auto lm = Dense(l, 3, 4);
  auto tm = Dense(t);
  (*s)->Step(lm, tm);
  EXPECT_EQ(t, std::vector<int64_t>({1, 1, 1}));
  EXPECT_THAT((*s)->status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "logits [3, 4] and tokens [3] do not match the batch [2, 4]"));
  // NaN logits.
  auto s2 = Sampler::Create(EosOptions(), 1);
  ASSERT_THAT(s2.status(), IsOk());
  ASSERT_THAT((*s2)->BeginBlock({0}), IsOk());
  Tensor nan = testing::MakeF32({1, 4}, {0, NAN, 0, 0});
  Tensor tok = testing::MakeI64({1}, {5});
  EXPECT_THAT((*s2)->StepTensors(nan, tok),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "sampler (block step 0), sequence 0: a logit is NaN"));
  EXPECT_EQ(testing::I64Values(tok), std::vector<int64_t>({1}));
}

TEST(Sampler, HandlesAreRegisteredWhileAlive) {
  int64_t h;
  {
    auto s = Sampler::Create(EosOptions(), 1);
    ASSERT_THAT(s.status(), IsOk());
    h = (*s)->handle();
    EXPECT_NE(h, 0);
    EXPECT_EQ(Sampler::Lookup(h), s->get());
    auto other = Sampler::Create(EosOptions(), 1);
    ASSERT_THAT(other.status(), IsOk());
    EXPECT_NE((*other)->handle(), h);
  }
  EXPECT_EQ(Sampler::Lookup(h), nullptr);
  // Handle 0: stateless greedy.
  std::vector<float> l = {0, 2, 2, 1, 7, 0, 0, 0};
  std::vector<int64_t> t(2);
  auto lm = Dense(l, 2, 4);
  auto tm = Dense(t);
  _mlir_ciface_bt_rt_sample(0, &lm, &tm);
  EXPECT_EQ(t, std::vector<int64_t>({1, 0}));
  // An unknown handle is a contract violation.
  EXPECT_DEATH(_mlir_ciface_bt_rt_sample(h, &lm, &tm), "unknown sampler handle");
}

// Kernel libraries resolve the callback against the process: it must be in
// this executable's dynamic symbol table (btrt's link options).
TEST(Sampler, CallbackIsExportedDynamically) {
  void *self = dlopen(nullptr, RTLD_NOW);
  ASSERT_NE(self, nullptr);
  void *sym = dlsym(self, "_mlir_ciface_bt_rt_sample");
  EXPECT_EQ(sym, reinterpret_cast<void *>(&_mlir_ciface_bt_rt_sample));
  dlclose(self);
}

} // namespace
} // namespace bt::rt
