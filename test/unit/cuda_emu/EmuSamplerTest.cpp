//===- EmuSamplerTest.cpp - the device's greedy sampler on the emulator ---===//
//
// bt_sample_greedy (lib/Codegen/CUDA/GPUSamplerKernels.cpp: one block of 256
// threads per row, a tree over shared memory) launched by the runtime
// (rt::SampleOnDevice) on the CUDA emulator, whose checks (bounds, races,
// barriers) end the process with a report if they fire. The expected token
// of every row is the documented greedy rule of the CPU sampler
// (sampler_callback.h ArgMax), restated below as a sequential scan: the
// first strict maximum in id order, starting from id 0 at -inf, so that the
// lowest id among equal maxima wins (+0 and -0 are equal), an all -inf row
// gives 0, and NaN never wins; a row with a NaN gives the pad id and sets
// the NaN flag that EndDeviceSampling reports; after a row's EOS the rest of
// its block is padding. Vocabularies around the block size (1, 7, 255, 256,
// 257, 1000) and the paper models' 50304, rows strided in memory, and the
// schedule seeds 1..3 (a permuted order of blocks and threads) give the same
// tokens as the in-order run. bt_lm_head_argmax_bf16 (the LM head on the
// tensor cores with the greedy argmax as its epilogue) against the GEMM
// computed here and the same sequential scan per tile of 64 ids; and the
// runtime's call of the LM head and the sampler together
// (_mlir_ciface_bt_gpu_lm_head_sample_bf16) in its three ways of running.
//
//===----------------------------------------------------------------------===//

#include "EmuDevice.h"
#include "../codegen/KernelHarness.h"
#include "EmuCompare.h"
#include "bt/runtime/base/tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace bt::test {
namespace {

/// The greedy rule of the CPU sampler (sampler_callback.h ArgMax).
int64_t sequentialArgMax(const float *row, int64_t vocab) {
  int64_t best = 0;
  float value = -std::numeric_limits<float>::infinity();
  for (int64_t v = 0; v < vocab; ++v)
    if (row[v] > value) {
      value = row[v];
      best = v;
    }
  return best;
}

/// The emulator's module image of a module whose host code calls the
/// runtime's sampler: it has bt_sample_greedy (bt-gpu-sampler-kernels).
const std::string &samplerImage() {
  static std::string image = [] {
    std::unique_ptr<mlir::MLIRContext> ctx = makeCUDAContext();
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(R"mlir(module {
      func.func private @bt_rt_sample(i64, memref<?x?xf32>, memref<?xi64>)
      func.func private @bt_rt_sample_bf16(i64, memref<?x?xbf16>, memref<?xi64>)
      func.func @ln(%x: tensor<?x3x40xf32>, %w: tensor<40xf32>, %b: tensor<40xf32>) -> tensor<?x3x40xf32> {
        %y = bt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<?x3x40xf32>, tensor<40xf32>, tensor<40xf32> -> tensor<?x3x40xf32>
        return %y : tensor<?x3x40xf32>
      }
    })mlir",
                                                ctx.get());
    std::string ptx, error, out;
    std::unique_ptr<Kernels> k = Kernels::compileCUDAModule(
        *module, CUDAPipelineOptions(), ptx, error, &out);
    EXPECT_TRUE(k) << error;
    EXPECT_NE(ptx.find("bt_sample_greedy"), std::string::npos);
    EXPECT_NE(ptx.find("bt_sample_greedy_bf16"), std::string::npos);
    EXPECT_NE(ptx.find("bt_lm_head_argmax_bf16"), std::string::npos);
    EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
              std::string::npos);
    return out;
  }();
  return image;
}

class Sampler : public ::testing::Test {
protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(emu::open(error)) << error;
    ASSERT_FALSE(samplerImage().empty());
    ASSERT_TRUE(emu::loadModule(samplerImage(), error)) << error;
  }
  /// Samples `logits` ([rows, stride], the first `vocab` of each row used)
  /// with every schedule seed; returns the tokens of seed 0 and expects the
  /// others equal.
  std::vector<int64_t> sample(int64_t handle, const std::vector<float> &logits,
                              int64_t rows, int64_t vocab, int64_t stride,
                              int64_t step, int64_t eos, int64_t pad,
                              bool allSeeds = true, bool bf16 = false) {
    // bf16: the logits rounded to bf16 (each is then exactly representable,
    // so the rounding keeps the values the caller compares with).
    std::vector<uint16_t> bits;
    for (float f : logits)
      bits.push_back(rt::F32ToBf16(f));
    void *d = bf16 ? emu::upload(bits.data(), rows * stride * 2)
                   : emu::upload(logits.data(), rows * stride * 4);
    std::vector<int64_t> init(rows, -7);
    void *t = emu::upload(init.data(), rows * 8);
    std::vector<int64_t> first;
    for (unsigned long long seed : {0ull, 1ull, 2ull, 3ull}) {
      if (seed != 0 && !allSeeds)
        break;
      emu::setScheduleSeed(seed);
      std::string error;
      long before = emu::reports();
      EXPECT_TRUE(emu::sampleGreedy(handle, d, rows, vocab, stride, t, step,
                                    eos, pad, error, bf16))
          << error;
      EXPECT_EQ(emu::reports(), before);
      std::vector<int64_t> got(rows);
      emu::download(got.data(), t, rows * 8);
      if (seed == 0)
        first = got;
      else
        EXPECT_EQ(got, first) << "schedule seed " << seed;
    }
    emu::setScheduleSeed(0);
    emu::release(d);
    emu::release(t);
    return first;
  }
};

constexpr float kInf = std::numeric_limits<float>::infinity();

/// Rows of adversarial cases for a vocabulary of `vocab` (row stride
/// `stride` >= vocab; the padding holds +inf, which a kernel reading past
/// the row would pick): random, ties across threads, all -inf, one finite
/// logit at the end, +0/-0 ties, +inf ties.
std::vector<float> adversarialRows(int64_t vocab, int64_t stride,
                                   int64_t &rows, std::mt19937 &rng) {
  rows = 6;
  std::vector<float> l(rows * stride, kInf);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  auto row = [&](int64_t r) { return l.data() + r * stride; };
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t v = 0; v < vocab; ++v)
      row(r)[v] = -std::fabs(normal(rng)) - 1.0f;
  for (int64_t v = 0; v < vocab; ++v)
    row(0)[v] = normal(rng);
  // Ties of the maximum at ids handled by different threads.
  for (int64_t v : {vocab - 1, vocab / 2 + 1, vocab / 3, int64_t(3)})
    if (v >= 0 && v < vocab)
      row(1)[v] = 5.0f;
  for (int64_t v = 0; v < vocab; ++v)
    row(2)[v] = -kInf;
  for (int64_t v = 0; v < vocab; ++v)
    row(3)[v] = -kInf;
  row(3)[vocab - 1] = -1e30f;
  row(4)[vocab - 1] = 0.0f;
  row(4)[vocab / 2] = -0.0f;
  row(5)[vocab - 1] = kInf;
  row(5)[vocab / 4] = kInf;
  return l;
}

TEST_F(Sampler, GreedyMatchesTheSequentialScan) {
  std::mt19937 rng(11);
  int64_t handle = 100;
  for (int64_t vocab : {1, 7, 255, 256, 257, 1000, 50304}) {
    for (int64_t pad : {int64_t(0), int64_t(3)}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + " row padding " +
                   std::to_string(pad));
      const int64_t stride = vocab + pad;
      int64_t rows = 0;
      std::vector<float> l = adversarialRows(vocab, stride, rows, rng);
      std::vector<int64_t> want(rows);
      for (int64_t r = 0; r < rows; ++r)
        want[r] = sequentialArgMax(l.data() + r * stride, vocab);
      std::vector<int64_t> got =
          sample(++handle, l, rows, vocab, stride, 0, -1, 1, vocab <= 1000);
      EXPECT_EQ(got, want);
      EXPECT_EQ(emu::endSampling(handle), "");
    }
  }
}

/// The logits rounded to bf16 and back (exact), as a --dtype bf16 decode
/// entry's LM head stores them.
std::vector<float> roundedToBf16(std::vector<float> l) {
  for (float &f : l)
    f = rt::Bf16ToF32(rt::F32ToBf16(f));
  return l;
}

// bt_sample_greedy_bf16 (bf16 logits, extended exactly): the sequential scan
// of the extended values, ties made by the rounding included (ids whose f32
// logits differ below bf16's resolution become equal: the lowest id wins).
TEST_F(Sampler, GreedyOfBf16LogitsMatchesTheSequentialScan) {
  std::mt19937 rng(13);
  int64_t handle = 500;
  for (int64_t vocab : {1, 7, 256, 257, 1000, 50304}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const int64_t stride = vocab + 5;
    int64_t rows = 0;
    std::vector<float> l = adversarialRows(vocab, stride, rows, rng);
    // A row whose maximum is a tie only in bf16: 3.0 + 2^-10 at a high id,
    // 3.0 at a lower one (1 + 2^-10 has no bf16: it rounds to 1).
    std::vector<float> tie(stride, kInf);
    for (int64_t v = 0; v < vocab; ++v)
      tie[v] = -1.0f;
    tie[vocab - 1] = 3.0f + std::ldexp(3.0f, -10);
    tie[vocab / 2] = 3.0f;
    l.insert(l.end(), tie.begin(), tie.end());
    ++rows;
    std::vector<float> wide = roundedToBf16(l);
    std::vector<int64_t> want(rows);
    for (int64_t r = 0; r < rows; ++r)
      want[r] = sequentialArgMax(wide.data() + r * stride, vocab);
    if (vocab > 1)
      EXPECT_EQ(want[rows - 1], vocab / 2);
    EXPECT_EQ(sample(++handle, l, rows, vocab, stride, 0, -1, 1, vocab <= 1000,
                     true),
              want);
    EXPECT_EQ(emu::endSampling(handle), "");
  }
}

TEST_F(Sampler, NaNRowsArePaddedAndReported) {
  const int64_t vocab = 600, rows = 3;
  std::vector<float> l(rows * vocab);
  for (int64_t i = 0; i < rows * vocab; ++i)
    l[i] = static_cast<float>((i * 37) % 101) / 10.0f;
  l[1 * vocab + 450] = std::numeric_limits<float>::quiet_NaN();
  std::vector<int64_t> got = sample(7, l, rows, vocab, vocab, 0, -1, 9);
  EXPECT_EQ(got[0], sequentialArgMax(l.data(), vocab));
  EXPECT_EQ(got[1], 9);
  EXPECT_EQ(got[2], sequentialArgMax(l.data() + 2 * vocab, vocab));
  EXPECT_EQ(emu::endSampling(7),
            "sampler (on the device): a row of the batch (row 1 when "
            "it was sampled) has a NaN logit");
}

TEST_F(Sampler, EOSPadsTheRestOfTheBlock) {
  const int64_t vocab = 300, rows = 2, eos = 5, pad = 1;
  std::vector<float> l(rows * vocab, 0.0f);
  l[0 * vocab + eos] = 2.0f; // row 0 emits EOS at step 0
  l[1 * vocab + 250] = 2.0f;
  EXPECT_EQ(sample(21, l, rows, vocab, vocab, 0, eos, pad),
            (std::vector<int64_t>{eos, 250}));
  // Later steps of the block: row 0 pads, row 1 goes on (and emits EOS).
  std::vector<float> l2(rows * vocab, 0.0f);
  l2[0 * vocab + 17] = 2.0f;
  l2[1 * vocab + eos] = 2.0f;
  EXPECT_EQ(sample(21, l2, rows, vocab, vocab, 1, eos, pad, false),
            (std::vector<int64_t>{pad, eos}));
  EXPECT_EQ(sample(21, l2, rows, vocab, vocab, 2, eos, pad, false),
            (std::vector<int64_t>{pad, pad}));
  // A new block (step 0) starts over.
  EXPECT_EQ(sample(21, l2, rows, vocab, vocab, 0, eos, pad, false),
            (std::vector<int64_t>{17, eos}));
  EXPECT_EQ(emu::endSampling(21), "");
}

/// Sampling on the device (bt_sample): the tokens of the CPU sampler
/// (rt::SampleToken) drawing from the same SplitMix64 streams, step after
/// step, the device continuing its streams after the states of the first
/// step. Rows: random logits, logits on a coarse grid (ties at the top-k
/// threshold and at the top-p boundary), equal logits (top-p cuts a run of
/// ties in id order), -inf entries, one dominant logit. The sums (z, the
/// kept mass, the cumulative) are added in another order than on the CPU,
/// so a token could differ when the draw falls within a few ulps of a
/// cumulative sum; with these draws none does.
class Draw : public Sampler {
protected:
  struct Case {
    double temperature;
    int64_t topK;
    double topP;
  };
  /// Samples `steps` steps of `logits` [rows, stride] on the device and on
  /// the host; returns the device's tokens [steps][rows] after expecting
  /// them equal to the host's.
  std::vector<std::vector<int64_t>>
  drawBoth(int64_t handle, const std::vector<float> &logits, int64_t rows,
           int64_t vocab, int64_t stride, const Case &c, int64_t steps,
           uint64_t seed, unsigned long long schedule = 0, bool bf16 = false) {
    std::vector<uint64_t> states(rows);
    for (int64_t r = 0; r < rows; ++r)
      states[r] = emu::rngState(seed, r);
    std::vector<uint64_t> host = states;
    // bf16: the device reads the logits' bf16 bits (logits must be bf16
    // values already, so that the host samples the same values).
    std::vector<uint16_t> bits;
    for (float f : logits)
      bits.push_back(rt::F32ToBf16(f));
    void *d = bf16 ? emu::upload(bits.data(), rows * stride * 2)
                   : emu::upload(logits.data(), rows * stride * 4);
    std::vector<int64_t> init(rows, -7);
    void *t = emu::upload(init.data(), rows * 8);
    emu::setScheduleSeed(schedule);
    std::vector<std::vector<int64_t>> all;
    for (int64_t k = 0; k < steps; ++k) {
      std::string error;
      long before = emu::reports();
      EXPECT_TRUE(emu::sampleDraw(handle, d, rows, vocab, stride, t, k, -1, 0,
                                  c.temperature, c.topK, c.topP,
                                  k == 0 ? states.data() : nullptr, error,
                                  bf16))
          << error;
      EXPECT_EQ(emu::reports(), before);
      std::vector<int64_t> got(rows);
      emu::download(got.data(), t, rows * 8);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t want = emu::hostSample(logits.data() + r * stride, vocab,
                                             c.temperature, c.topK, c.topP,
                                             host[r]);
        EXPECT_EQ(got[r], want)
            << "V " << vocab << " row " << r << " step " << k << " T "
            << c.temperature << " top-k " << c.topK << " top-p " << c.topP;
      }
      all.push_back(got);
    }
    emu::setScheduleSeed(0);
    EXPECT_EQ(emu::endSampling(handle), "");
    emu::release(d);
    emu::release(t);
    return all;
  }
};

std::vector<float> drawRows(int64_t vocab, int64_t stride, int64_t &rows,
                            std::mt19937 &rng) {
  rows = 5;
  std::vector<float> l(rows * stride, kInf);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  auto row = [&](int64_t r) { return l.data() + r * stride; };
  for (int64_t v = 0; v < vocab; ++v) {
    row(0)[v] = normal(rng);
    row(1)[v] = std::round(normal(rng)); // ties
    row(2)[v] = 0.5f;                    // all equal
    row(3)[v] = v % 3 == 0 ? -kInf : normal(rng);
    row(4)[v] = normal(rng) - 30.0f;
  }
  row(3)[vocab - 1] = 1.0f; // a finite logit even when vocab <= 3
  row(4)[vocab / 2] = 8.0f; // dominant
  return l;
}

TEST_F(Draw, MatchesTheCpuSampler) {
  std::mt19937 rng(11);
  const Case cases[] = {{1.0, 0, 1.0},  {0.7, 0, 1.0},   {1.3, 5, 1.0},
                        {0.9, 0, 0.9},  {0.8, 40, 0.95}, {1.0, 1, 1.0},
                        {1.0, 0, 1e-9}, {2.0, 3, 0.5},   {1.0, 0, 0.5}};
  int64_t handle = 100;
  for (int64_t vocab : {1, 7, 256, 257, 1000}) {
    const int64_t stride = vocab + 3;
    int64_t rows = 0;
    std::vector<float> l = drawRows(vocab, stride, rows, rng);
    for (const Case &c : cases)
      drawBoth(++handle, l, rows, vocab, stride, c, 2, 1234 + vocab);
  }
}

// bt_sample_bf16: the CPU sampler's draws from the same (bf16) values.
TEST_F(Draw, Bf16LogitsMatchTheCpuSampler) {
  std::mt19937 rng(17);
  const Case cases[] = {{1.0, 0, 1.0}, {0.8, 40, 0.95}, {2.0, 3, 0.5}};
  int64_t handle = 700;
  for (int64_t vocab : {7, 257, 1000}) {
    const int64_t stride = vocab + 3;
    int64_t rows = 0;
    std::vector<float> l = roundedToBf16(drawRows(vocab, stride, rows, rng));
    for (const Case &c : cases)
      drawBoth(++handle, l, rows, vocab, stride, c, 2, 99 + vocab, 0, true);
  }
}

TEST_F(Draw, PaperVocabulary) {
  std::mt19937 rng(5);
  const int64_t vocab = 50304;
  int64_t rows = 0;
  std::vector<float> l = drawRows(vocab, vocab, rows, rng);
  l.resize(2 * vocab); // rows 0 and 1
  drawBoth(300, l, 2, vocab, vocab, {0.8, 50, 0.9}, 2, 7);
  drawBoth(301, l, 2, vocab, vocab, {1.0, 0, 1.0}, 2, 8);
}

TEST_F(Draw, ScheduleDoesNotChangeTheTokens) {
  std::mt19937 rng(3);
  int64_t rows = 0;
  std::vector<float> l = drawRows(300, 300, rows, rng);
  std::vector<std::vector<int64_t>> first;
  for (unsigned long long schedule : {0ull, 1ull, 2ull, 3ull}) {
    std::vector<std::vector<int64_t>> got =
        drawBoth(400 + schedule, l, rows, 300, 300, {0.9, 20, 0.9}, 2, 99,
                 schedule);
    if (schedule == 0)
      first = got;
    else
      EXPECT_EQ(got, first) << "schedule seed " << schedule;
  }
}

TEST_F(Draw, ErrorsPadTheRowAndAreReported) {
  const int64_t vocab = 300, rows = 3;
  std::vector<float> l(rows * vocab, 0.25f);
  l[0 * vocab + 7] = kInf;
  for (int64_t v = 0; v < vocab; ++v)
    l[2 * vocab + v] = -kInf;
  std::vector<uint64_t> states = {1, 2, 3};
  std::vector<int64_t> init(rows, -7);
  void *d = emu::upload(l.data(), rows * vocab * 4);
  void *t = emu::upload(init.data(), rows * 8);
  std::string error;
  ASSERT_TRUE(emu::sampleDraw(500, d, rows, vocab, vocab, t, 0, -1, 9, 1.0, 0,
                              1.0, states.data(), error))
      << error;
  std::vector<int64_t> got(rows);
  emu::download(got.data(), t, rows * 8);
  EXPECT_EQ(got[0], 9);
  EXPECT_GE(got[1], 0);
  EXPECT_LT(got[1], vocab);
  EXPECT_EQ(got[2], 9);
  EXPECT_EQ(emu::endSampling(500),
            "sampler (on the device): a row of the batch (row 0 when it was "
            "sampled) has a +inf logit");
  // All -inf alone.
  ASSERT_TRUE(emu::sampleDraw(501, static_cast<char *>(d) + 2 * vocab * 4, 1,
                              vocab, vocab, t, 0, -1, 9, 1.0, 0, 1.0,
                              states.data(), error))
      << error;
  EXPECT_EQ(emu::endSampling(501),
            "sampler (on the device): a row of the batch (row 0 when it was "
            "sampled) has no finite logit (all -inf)");
  emu::release(d);
  emu::release(t);
}

TEST_F(Draw, EOSStopsTheRowsDraws) {
  // Row 0 draws EOS at step 0 (its logit dominates), then pads without
  // drawing; row 1 draws at every step. The next block continues both
  // streams on the device: row 0 advanced by one draw, row 1 by two.
  const int64_t vocab = 64, rows = 2, eos = 5, pad = 1;
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> l(rows * vocab);
  for (float &x : l)
    x = normal(rng);
  l[0 * vocab + eos] = 80.0f;
  l[1 * vocab + eos] = -80.0f;
  std::vector<uint64_t> states = {emu::rngState(4, 0), emu::rngState(4, 1)};
  std::vector<uint64_t> host = states;
  void *d = emu::upload(l.data(), rows * vocab * 4);
  std::vector<int64_t> init(rows, -7);
  void *t = emu::upload(init.data(), rows * 8);
  std::vector<int64_t> got(rows);
  std::string error;
  const double temp = 1.0, topP = 1.0;
  for (int64_t step : {0, 1}) {
    ASSERT_TRUE(emu::sampleDraw(600, d, rows, vocab, vocab, t, step, eos, pad,
                                temp, 0, topP,
                                step == 0 ? states.data() : nullptr, error))
        << error;
    emu::download(got.data(), t, rows * 8);
    EXPECT_EQ(got[0], step == 0 ? eos : pad) << "step " << step;
    EXPECT_EQ(got[1], emu::hostSample(l.data() + vocab, vocab, temp, 0, topP,
                                      host[1]))
        << "step " << step;
  }
  EXPECT_EQ(emu::hostSample(l.data(), vocab, temp, 0, topP, host[0]), eos);
  // Next block, same rows: the device's streams continue.
  l[0 * vocab + eos] = 0.0f;
  emu::release(d);
  d = emu::upload(l.data(), rows * vocab * 4);
  ASSERT_TRUE(emu::sampleDraw(600, d, rows, vocab, vocab, t, 0, eos, pad, temp,
                              0, topP, nullptr, error))
      << error;
  emu::download(got.data(), t, rows * 8);
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(got[r], emu::hostSample(l.data() + r * vocab, vocab, temp, 0,
                                      topP, host[r]))
        << "row " << r;
  EXPECT_EQ(emu::endSampling(600), "");
  emu::release(d);
  emu::release(t);
}

/// A case of the LM head: x BF16 [M, K] (row stride `xStride` elements)
/// and w BF16 [N, K].
struct LMHeadCase {
  int64_t m, n, k, xStride;
};

/// The inputs of an LM head case and its logits computed here: exact in
/// double, rounded to bf16 (row r at r N).
struct LMHeadInputs {
  std::vector<uint16_t> x, w;
  std::vector<float> logits;
  bool nearTie = false; ///< row 3 holds the tie made by the rounding
};

/// The inputs are small multiples of 1/2 so that every logit is exact in
/// f32 whatever the order of the sums: the bf16 rounding then makes ties
/// (ids whose logits differ below bf16's resolution), which the lowest id
/// must win, as must the planted exact ties of row 0 across lanes, warps
/// and tiles and of row 1 within a lane, and row 3's tie made by the
/// rounding. Row 2 holds a NaN (every tile NaN).
LMHeadInputs lmHeadInputs(const LMHeadCase &c, std::mt19937 &rng) {
  std::uniform_int_distribution<int> small(-6, 6);
  std::vector<float> x(c.m * c.xStride, kInf), w(c.n * c.k);
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t k = 0; k < c.k; ++k)
      x[r * c.xStride + k] = small(rng) * 0.5f;
  for (float &v : w)
    v = small(rng) * 0.25f;
  // Row r's largest logit at id n: w[n] = 1.5 sign(x[r]).
  const auto plant = [&](int64_t r, int64_t n) {
    for (int64_t k = 0; k < c.k; ++k) {
      const float v = x[r * c.xStride + k];
      w[n * c.k + k] = v > 0 ? 1.5f : v < 0 ? -1.5f : 0.0f;
    }
  };
  for (int64_t n : {c.n - 1, int64_t(70), int64_t(17), int64_t(9)})
    if (n < c.n)
      plant(0, n);
  // Row 1's, at ids 0, 1, 8 (one lane's candidates) and 3 (the next
  // lane's).
  if (c.m > 1)
    for (int64_t n : {int64_t(3), int64_t(8), int64_t(1), int64_t(0)})
      plant(1, n);
  // Row 3 (all 0.5): its largest logit 0.75 K at id 40 exactly, at id 20
  // 1/8 less; for K = 48 and 64 half of bf16's spacing there, which
  // rounds to the even 0.75 K: the same bf16 logit, so id 20 wins.
  LMHeadInputs in;
  in.nearTie = c.m > 3 && c.n > 40 && (c.k == 48 || c.k == 64);
  if (in.nearTie) {
    for (int64_t k = 0; k < c.k; ++k)
      x[3 * c.xStride + k] = 0.5f;
    plant(3, 40);
    plant(3, 20);
    w[20 * c.k] = 1.25f;
  }
  if (c.m > 2)
    x[2 * c.xStride + c.k / 2] = std::numeric_limits<float>::quiet_NaN();
  for (float v : x)
    in.x.push_back(rt::F32ToBf16(v));
  for (float v : w)
    in.w.push_back(rt::F32ToBf16(v));
  in.logits.resize(c.m * c.n);
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t n = 0; n < c.n; ++n) {
      double sum = 0;
      for (int64_t k = 0; k < c.k; ++k)
        sum += static_cast<double>(rt::Bf16ToF32(in.x[r * c.xStride + k])) *
               rt::Bf16ToF32(in.w[n * c.k + k]);
      in.logits[r * c.n + n] =
          rt::Bf16ToF32(rt::F32ToBf16(static_cast<float>(sum)));
    }
  return in;
}

/// The greedy token of every row of `logits` ([m, n]) but the NaN row 2,
/// with the planted ties' winners checked.
std::vector<int64_t> expectedTokens(const LMHeadCase &c,
                                    const LMHeadInputs &in) {
  std::vector<int64_t> tokens(c.m, 0);
  for (int64_t r = 0; r < c.m; ++r)
    tokens[r] = sequentialArgMax(in.logits.data() + r * c.n, c.n);
  EXPECT_EQ(tokens[0], c.n > 9 ? 9 : c.n - 1);
  if (c.m > 1) {
    EXPECT_EQ(tokens[1], 0);
  }
  if (in.nearTie) {
    EXPECT_EQ(in.logits[3 * c.n + 20], 0.75f * c.k);
    EXPECT_EQ(in.logits[3 * c.n + 40], 0.75f * c.k);
    EXPECT_EQ(tokens[3], 20);
  }
  return tokens;
}

const LMHeadCase kLMHeadCases[] = {{1, 8, 16, 16},
                                   {5, 100, 32, 38},
                                   {17, 130, 48, 48},
                                   {33, 1000, 64, 70}};

int64_t devicePtr(const void *p) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p));
}

/// The LM head with the greedy argmax epilogue (bt_lm_head_argmax_bf16,
/// lib/Codegen/CUDA/GPUKernelText.h): per row and tile of 64 ids, the
/// largest bf16-rounded logit and its lowest id, against the GEMM computed
/// here in double and the sequential scan of each tile (lmHeadInputs).
TEST_F(Sampler, LMHeadArgmaxMatchesTheGemmPerTile) {
  std::mt19937 rng(17);
  for (const LMHeadCase &c : kLMHeadCases) {
    SCOPED_TRACE("M " + std::to_string(c.m) + " N " + std::to_string(c.n) +
                 " K " + std::to_string(c.k));
    const LMHeadInputs in = lmHeadInputs(c, rng);
    const std::vector<int64_t> expected = expectedTokens(c, in);
    const int64_t tiles = (c.n + 63) / 64;
    void *dx = emu::upload(in.x.data(), c.m * c.xStride * 2);
    void *dw = emu::upload(in.w.data(), c.n * c.k * 2);
    std::vector<float> pv0(c.m * tiles, -7.0f);
    std::vector<int32_t> pi0(c.m * tiles, -7);
    void *dv = emu::upload(pv0.data(), c.m * tiles * 4);
    void *di = emu::upload(pi0.data(), c.m * tiles * 4);
    // x and w as I32 [rows, K / 2] (bf16 pairs); the outputs [M, T].
    const std::vector<int64_t> words = {
        devicePtr(dx), devicePtr(dx), 0, c.m, c.k / 2, c.xStride / 2, 1,
        devicePtr(dw), devicePtr(dw), 0, c.n, c.k / 2, c.k / 2, 1,
        devicePtr(dv), devicePtr(dv), 0, c.m, tiles, tiles, 1,
        devicePtr(di), devicePtr(di), 0, c.m, tiles, tiles, 1};
    for (unsigned long long seed : {0ull, 1ull, 2ull}) {
      emu::setScheduleSeed(seed);
      std::string error;
      const long before = emu::reports();
      ASSERT_TRUE(emu::launch("bt_lm_head_argmax_bf16", {tiles, 1, 1},
                              {128, 1, 1}, 768, words, error))
          << error;
      EXPECT_EQ(emu::reports(), before);
      std::vector<float> pv(c.m * tiles);
      std::vector<int32_t> pi(c.m * tiles);
      emu::download(pv.data(), dv, c.m * tiles * 4);
      emu::download(pi.data(), di, c.m * tiles * 4);
      for (int64_t r = 0; r < c.m; ++r) {
        const float *row = in.logits.data() + r * c.n;
        for (int64_t t = 0; t < tiles; ++t) {
          SCOPED_TRACE("seed " + std::to_string(seed) + " row " +
                       std::to_string(r) + " tile " + std::to_string(t));
          const int64_t lo = t * 64, hi = std::min(c.n, lo + 64);
          if (r == 2) {
            EXPECT_TRUE(std::isnan(pv[r * tiles + t]));
            continue;
          }
          const int64_t best = lo + sequentialArgMax(row + lo, hi - lo);
          EXPECT_EQ(pv[r * tiles + t], row[best]);
          EXPECT_EQ(pi[r * tiles + t], best);
        }
      }
    }
    emu::setScheduleSeed(0);
    for (void *p : {dx, dw, dv, di})
      emu::release(p);
  }
}

/// The LM head and sampler in one call (_mlir_ciface_bt_gpu_lm_head_sample_
/// bf16, bt-gpu-lm-head-sampling): a greedy device step whose logits are
/// not kept leaves them unwritten (bt_lm_head_argmax_bf16 and
/// bt_sample_greedy_partials), a kept one and a host step write them
/// (the emulated cuBLAS); all three choose the sequential scan's token of
/// the bf16 logits, the device steps pad the NaN row and report it.
TEST_F(Sampler, LMHeadSampleCallbackChoosesTheGreedyToken) {
  std::mt19937 rng(29);
  for (const LMHeadCase &c : kLMHeadCases) {
    const LMHeadInputs in = lmHeadInputs(c, rng);
    const std::vector<int64_t> expected = expectedTokens(c, in);
    const int64_t tiles = (c.n + 63) / 64;
    for (int mode = 0; mode < 3; ++mode) {
      SCOPED_TRACE("M " + std::to_string(c.m) + " N " + std::to_string(c.n) +
                   " mode " + std::to_string(mode));
      const uint16_t sentinel = rt::F32ToBf16(-123.0f);
      std::vector<uint16_t> l0(c.m * c.n, sentinel);
      std::vector<int64_t> t0(c.m, -7);
      void *dx = emu::upload(in.x.data(), c.m * c.xStride * 2);
      void *dw = emu::upload(in.w.data(), c.n * c.k * 2);
      void *dl = emu::upload(l0.data(), c.m * c.n * 2);
      void *dt = emu::upload(t0.data(), c.m * 8);
      void *dv = emu::upload(std::vector<float>(c.m * tiles).data(),
                             c.m * tiles * 4);
      void *di = emu::upload(std::vector<int32_t>(c.m * tiles).data(),
                             c.m * tiles * 4);
      const emu::LMHeadStep step = emu::lmHeadSample(
          /*onDevice=*/mode != 2, /*logitsKept=*/mode == 1, dx, dw, dl, dt, dv,
          di, c.m, c.n, c.k, c.xStride);
      std::vector<int64_t> tokens(c.m);
      std::vector<uint16_t> logits(c.m * c.n);
      emu::download(tokens.data(), dt, c.m * 8);
      emu::download(logits.data(), dl, c.m * c.n * 2);
      EXPECT_EQ(step.hostSteps, mode == 2 ? 1 : 0);
      EXPECT_EQ(step.deviceSteps, mode == 2 ? 0 : 1);
      for (int64_t r = 0; r < c.m; ++r) {
        if (r == 2 && mode != 2) {
          EXPECT_EQ(tokens[r], 0) << "the NaN row gets pad";
        } else if (r != 2) {
          EXPECT_EQ(tokens[r], expected[r]) << "row " << r;
        }
        for (int64_t n = 0; n < c.n; ++n) {
          const float got = rt::Bf16ToF32(logits[r * c.n + n]);
          if (mode == 0)
            ASSERT_EQ(logits[r * c.n + n], sentinel) << "written: " << r;
          else if (r != 2)
            ASSERT_EQ(got, in.logits[r * c.n + n]) << r << ", " << n;
        }
      }
      if (c.m > 2 && mode != 2) {
        EXPECT_NE(step.ended.find("NaN"), std::string::npos) << step.ended;
      }
      for (void *p : {dx, dw, dl, dt, dv, di})
        emu::release(p);
    }
  }
}

} // namespace
} // namespace bt::test
