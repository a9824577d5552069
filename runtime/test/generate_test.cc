//===- generate_test.cc ---------------------------------------------------===//
//
// The generation loop against gen_test_kernels.c's fake models, compared with
// an oracle that runs the same fake model one sequence at a time, without
// caches, batching or compaction.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/generate/generate.h"

#include <limits>
#include <cmath>

#include "absl/strings/str_cat.h"

#include "bt/runtime/model/config.h"
#include "bt/runtime/base/safetensors.h"
#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::kFakeBlock;
using testing::kFakePeak;
using testing::kFakePrefix;
using testing::kFakeVocab;
using testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t V = kFakeVocab, L = kFakeBlock, P = kFakePrefix;

/// The expected output of one sequence.
struct Expected {
  std::vector<int64_t> tokens;             // [N]
  std::vector<std::vector<float>> logits;  // [N][V]
  bool finished = false;
  int64_t length = 0;
};

/// The fake block model of gen_test_kernels.c for one left-padded prompt,
/// greedy, from the whole history at every block (no cache).
Expected BlockOracle(const std::vector<int64_t> &ids,
                     const std::vector<int64_t> &mask, int64_t n_new,
                     bool official, bool stop_at_eos = true) {
  struct Entry {
    int64_t hash, last, valid;
  };
  const int64_t T = static_cast<int64_t>(ids.size());
  const int64_t pad = (L - T % L) % L;
  std::vector<Entry> entries;
  for (int64_t j = 0; j < (T + pad) / L; ++j) {
    Entry e{0, 0, 0};
    for (int64_t i = 0; i < L; ++i) {
      const int64_t t = j * L + i - pad;
      const int64_t id = t >= 0 ? ids[t] : 0;
      e.hash += id * (i + 1);
      e.valid |= t >= 0 && mask[t] == 1;
      if (i == L - 1)
        e.last = id;
    }
    entries.push_back(e);
  }
  Expected x;
  x.tokens.assign(n_new, 0);
  x.logits.assign(n_new, std::vector<float>(V, 0.0f));
  x.length = n_new;
  int64_t produced = 0;
  while (produced < n_new) {
    const int64_t last = static_cast<int64_t>(entries.size()) - 1;
    double sum = 0, count = 0;
    for (int64_t e = 0; e <= last; ++e)
      if (entries[e].valid) {
        sum += entries[e].hash * static_cast<double>(e + 1);
        count += 1;
      }
    const float cv[4] = {static_cast<float>(entries[last].last),
                         static_cast<float>(std::fmod(sum, 1009.0)),
                         static_cast<float>(count), static_cast<float>(last)};
    std::vector<int64_t> block(L);
    bool done = false;
    for (int64_t k = 0; k < L; ++k) {
      const int64_t prev = k ? block[k - 1] : static_cast<int64_t>(cv[0]);
      const int64_t target = (prev + 1) % V;
      const int64_t pos = official ? (k == 0 ? 0 : k) : P - 1 + k;
      const float sig =
          static_cast<float>(std::fmod(static_cast<double>(cv[1]) + 3.0 * cv[2] +
                                           5.0 * cv[3] + 7.0 * pos + 11.0 * k,
                                       97.0)) /
          1000.0f;
      std::vector<float> lg(V);
      for (int64_t v = 0; v < V; ++v)
        lg[v] = (v == target ? kFakePeak : 0.0f) + sig;
      block[k] = done ? 1 : target;
      if (produced + k < n_new) {
        x.logits[produced + k] = lg;
        x.tokens[produced + k] = block[k];
        if (!done && stop_at_eos && target == 0) {
          x.finished = true;
          x.length = produced + k + 1;
        }
      }
      done |= stop_at_eos && target == 0;
    }
    produced += L;
    if (done)
      break;
    int64_t hash = 0;
    for (int64_t i = 0; i < L; ++i)
      hash += block[i] * (i + 1);
    entries.push_back({hash, block[L - 1], 1});
  }
  return x;
}

/// The fake vanilla model for one left-padded prompt, greedy (HF positions).
Expected VanillaOracle(const std::vector<int64_t> &ids,
                       const std::vector<int64_t> &mask, int64_t n_new) {
  struct Entry {
    int64_t x, p, m;
  };
  std::vector<Entry> entries;
  int64_t n_real = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    n_real += mask[t];
    entries.push_back({ids[t], mask[t] ? n_real - 1 : 1, mask[t]});
  }
  Expected x;
  x.tokens.assign(n_new, 0);
  x.logits.assign(n_new, std::vector<float>(V, 0.0f));
  x.length = n_new;
  for (int64_t s = 0; s < n_new; ++s) {
    const int64_t last = static_cast<int64_t>(entries.size()) - 1;
    double sum = 0;
    for (const Entry &e : entries)
      if (e.m)
        sum += (e.x + 1.0) * (e.p + 2.0);
    const int64_t target = (entries[last].x + 1) % V;
    const float sig = static_cast<float>(std::fmod(sum + 3.0 * last, 97.0)) / 1000.0f;
    for (int64_t v = 0; v < V; ++v)
      x.logits[s][v] = (v == target ? kFakePeak : 0.0f) + sig;
    x.tokens[s] = target;
    if (target == 0) {
      x.finished = true;
      x.length = s + 1;
      break;
    }
    entries.push_back({target, n_real + s, 1});
  }
  return x;
}

class GenerateTest : public ::testing::Test {
protected:
  std::unique_ptr<Model> Open(const testing::GenArtifactOptions &o = {}) {
    const std::string path = dir_.File(absl::StrCat("gen", n_++, ".btart"));
    EXPECT_THAT(testing::WriteGenArtifact(path, o), IsOk());
    auto m = Model::Open(path);
    EXPECT_THAT(m.status(), IsOk());
    return m.ok() ? std::move(m).value() : nullptr;
  }

  /// Generates for `prompts` (left-padded here) and compares every row with
  /// the oracle.
  GenerateResult Check(const Model &model,
                       const std::vector<std::vector<int64_t>> &prompts,
                       GenerateOptions o, bool vanilla = false) {
    auto padded = LeftPadPrompts(prompts, 0);
    EXPECT_THAT(padded.status(), IsOk());
    auto r = Generate(model, padded->first, padded->second, o);
    EXPECT_THAT(r.status(), IsOk());
    if (!r.ok())
      return {};
    const int64_t B = static_cast<int64_t>(prompts.size()),
                  T = padded->first.dim(1), N = o.max_new_tokens;
    EXPECT_EQ(r->new_tokens.shape(), std::vector<int64_t>({B, N}));
    EXPECT_EQ(r->step_logits.shape(), std::vector<int64_t>({N, B, V}));
    for (int64_t b = 0; b < B; ++b) {
      std::vector<int64_t> ids(padded->first.data_as<int64_t>() + b * T,
                               padded->first.data_as<int64_t>() + (b + 1) * T);
      std::vector<int64_t> mask(padded->second.data_as<int64_t>() + b * T,
                                padded->second.data_as<int64_t>() + (b + 1) * T);
      Expected x = vanilla ? VanillaOracle(ids, mask, N)
                           : BlockOracle(ids, mask, N,
                                         o.official_generate_positions,
                                         o.stop_at_eos);
      std::vector<int64_t> got(r->new_tokens.data_as<int64_t>() + b * N,
                               r->new_tokens.data_as<int64_t>() + (b + 1) * N);
      EXPECT_EQ(got, x.tokens) << "row " << b;
      for (int64_t s = 0; s < N; ++s) {
        std::vector<float> lg(r->step_logits.data_as<float>() + (s * B + b) * V,
                              r->step_logits.data_as<float>() + (s * B + b + 1) * V);
        EXPECT_EQ(lg, x.logits[s]) << "row " << b << " step " << s;
      }
      EXPECT_EQ(r->finished[b], x.finished) << "row " << b;
      EXPECT_EQ(r->lengths[b], x.length) << "row " << b;
    }
    return std::move(r).value();
  }

  testing::TempDir dir_;
  int n_ = 0;
};

testing::GenArtifactOptions Vanilla() {
  testing::GenArtifactOptions o;
  o.vanilla = true;
  return o;
}
testing::GenArtifactOptions WithoutDecode(bool vanilla) {
  testing::GenArtifactOptions o;
  o.vanilla = vanilla;
  o.without_decode = true;
  return o;
}
testing::GenArtifactOptions ShortDecodeTokens() {
  testing::GenArtifactOptions o;
  o.short_decode_tokens = true;
  return o;
}

GenerateOptions Greedy(int64_t n, bool official = false) {
  GenerateOptions o;
  o.max_new_tokens = n;
  o.official_generate_positions = official;
  return o;
}

// Tokens count up from the prompt's last token: x -> x+1 -> ... -> 15 -> 0
// (EOS). Rows whose last token is small never reach EOS.
TEST_F(GenerateTest, BlockGreedyMatchesTheOracle) {
  auto model = Open();
  ASSERT_NE(model, nullptr);
  GenerateResult r = Check(*model, {{7, 8, 9, 10, 3}, {2, 3, 4, 5, 6, 7, 8, 9, 1}, {11, 4}},
                           Greedy(10));
  const GenerateCounters &c = r.counters;
  EXPECT_EQ(c.prefill_calls, 1);
  EXPECT_EQ(c.blocks_prefilled, 3 * 3); // T = 9 -> 3 blocks
  EXPECT_EQ(c.decode_tokens_calls, 3);  // ceil(10 / 4)
  EXPECT_EQ(c.token_decoder_steps, 12);
  EXPECT_EQ(c.token_decoder_rows, 36);
  EXPECT_EQ(c.decode_block_calls, 2);
  EXPECT_EQ(c.decode_block_rows, 6);
  EXPECT_EQ(c.rows_compacted, 0);
  EXPECT_EQ(c.cache_capacity, 3 + 3 - 1);
  EXPECT_EQ(c.cache_length, 5);
  // kv_cache [3, 1, 2, 1, 5, 2] f32 + kv_valid [3, 5] i64.
  EXPECT_EQ(c.cache_bytes_initial, 3 * 20 * 4 + 3 * 5 * 8);
  EXPECT_EQ(c.cache_bytes_final, c.cache_bytes_initial);
  EXPECT_THAT(FormatCounters(c), HasSubstr("decode_tokens: 3 call(s), 12 token-decoder steps, 36 rows"));
}

TEST_F(GenerateTest, OfficialPositions) {
  auto model = Open();
  ASSERT_NE(model, nullptr);
  const std::vector<std::vector<int64_t>> prompts = {{5, 6, 7, 2}, {9, 1}};
  GenerateResult train = Check(*model, prompts, Greedy(8));
  GenerateResult official = Check(*model, prompts, Greedy(8, /*official=*/true));
  // Same tokens (the peak dominates), different logits: the positions reach
  // the token decoder.
  EXPECT_EQ(testing::I64Values(train.new_tokens),
            testing::I64Values(official.new_tokens));
  EXPECT_NE(testing::F32Values(train.step_logits),
            testing::F32Values(official.step_logits));
}

// EOS in the middle of a block for the middle row (block 0, step 2), in a
// later block for row 0 (block 1, step 2); row 2 runs to the end. The rows
// that finish are compacted out of the batch and the cache; the others must
// still match the oracle (their cache rows were moved correctly).
TEST_F(GenerateTest, EosMidBlockAndCompactionOfAFinishedMiddleRow) {
  auto model = Open();
  ASSERT_NE(model, nullptr);
  GenerateResult r = Check(*model, {{4, 9}, {1, 2, 3, 4, 5, 13}, {3, 3, 1}}, Greedy(12));
  EXPECT_EQ(testing::I64Values(r.new_tokens),
            std::vector<int64_t>({10, 11, 12, 13, 14, 15, 0, 1, 0, 0, 0, 0,   //
                                  14, 15, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,       //
                                  2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(r.finished, std::vector<bool>({true, true, false}));
  EXPECT_EQ(r.lengths, std::vector<int64_t>({7, 3, 12}));
  const GenerateCounters &c = r.counters;
  EXPECT_EQ(c.decode_tokens_calls, 3);
  EXPECT_EQ(c.token_decoder_rows, 3 * 4 + 2 * 4 + 1 * 4);
  EXPECT_EQ(c.decode_block_calls, 2);
  EXPECT_EQ(c.decode_block_rows, 2 + 1);
  EXPECT_EQ(c.rows_compacted, 2);
  EXPECT_EQ(c.cache_length, 2 + 2);
  // One live row of three: the cache moved to an exact-size buffer.
  EXPECT_EQ(c.cache_bytes_final * 3, c.cache_bytes_initial);
}

TEST_F(GenerateTest, EveryRowFinishes) {
  auto model = Open();
  ASSERT_NE(model, nullptr);
  GenerateResult r = Check(*model, {{14}, {13, 15}}, Greedy(9));
  EXPECT_EQ(r.finished, std::vector<bool>({true, true}));
  EXPECT_EQ(r.counters.decode_tokens_calls, 1);
  EXPECT_EQ(r.counters.decode_block_calls, 0);
  // Without EOS stopping, EOS is an ordinary token (0 -> 1 -> 2 ...).
  GenerateOptions o = Greedy(9);
  o.stop_at_eos = false;
  GenerateResult all = Check(*model, {{14}, {13, 15}}, o);
  EXPECT_EQ(all.finished, std::vector<bool>({false, false}));
  EXPECT_EQ(all.counters.decode_tokens_calls, 3);
}

TEST_F(GenerateTest, PartialLastBlockIsDecodedWholeAndTruncated) {
  auto model = Open();
  ASSERT_NE(model, nullptr);
  GenerateResult r = Check(*model, {{1, 2, 3}, {6}}, Greedy(6));
  EXPECT_EQ(r.counters.decode_tokens_calls, 2);
  EXPECT_EQ(r.counters.token_decoder_steps, 8);
  EXPECT_EQ(r.counters.decode_block_calls, 1);
  EXPECT_EQ(r.counters.cache_capacity, 1 + 2 - 1);
  // EOS in the truncated part of the last block does not count.
  GenerateResult e = Check(*model, {{10}}, Greedy(5)); // 11 .. 15 | 0 cut off
  EXPECT_EQ(e.finished, std::vector<bool>({false}));
  EXPECT_EQ(testing::I64Values(e.new_tokens), std::vector<int64_t>({11, 12, 13, 14, 15}));
  GenerateResult one = Check(*model, {{2}}, Greedy(1));
  EXPECT_EQ(one.counters.decode_block_calls, 0);
}

// The claim: token-decoder work depends on the generated blocks and
// the batch, not on the prompt length.
TEST_F(GenerateTest, TokenDecoderWorkDoesNotDependOnPromptLength) {
  auto model = Open();
  ASSERT_NE(model, nullptr);
  std::vector<int64_t> long_prompt;
  for (int i = 0; i < 41; ++i)
    long_prompt.push_back(2 + i % 3);
  GenerateResult a = Check(*model, {{2, 3, 4}, {5, 2}}, Greedy(8));
  GenerateResult b = Check(*model, {long_prompt, long_prompt}, Greedy(8));
  EXPECT_EQ(a.counters.blocks_prefilled, 2 * 1);
  EXPECT_EQ(b.counters.blocks_prefilled, 2 * 11);
  EXPECT_EQ(a.counters.decode_tokens_calls, b.counters.decode_tokens_calls);
  EXPECT_EQ(a.counters.token_decoder_steps, b.counters.token_decoder_steps);
  EXPECT_EQ(a.counters.token_decoder_rows, b.counters.token_decoder_rows);
  EXPECT_EQ(a.counters.decode_block_rows, b.counters.decode_block_rows);
}

TEST_F(GenerateTest, VanillaUsesHfPositionsAndStopsAtEos) {
  auto model = Open(Vanilla());
  ASSERT_NE(model, nullptr);
  // Rows: no EOS; EOS at token 3; left padding of 3.
  GenerateResult r = Check(*model, {{3, 4, 5, 6}, {2, 13}, {1}}, Greedy(7), true);
  EXPECT_EQ(r.finished, std::vector<bool>({false, true, false}));
  EXPECT_EQ(r.lengths, std::vector<int64_t>({7, 3, 7}));
  const GenerateCounters &c = r.counters;
  EXPECT_EQ(c.blocks_prefilled, 3 * 4);
  EXPECT_EQ(c.decode_step_calls, 6);
  EXPECT_EQ(c.decode_step_rows, 3 + 3 + 2 + 2 + 2 + 2);
  EXPECT_EQ(c.tokens_sampled, 3 + 3 + 3 + 2 + 2 + 2 + 2);
  EXPECT_EQ(c.rows_compacted, 1);
  EXPECT_EQ(c.cache_capacity, 4 + 7 - 1);
  EXPECT_EQ(c.cache_length, 4 + 6);
}

// Sampling: a sequence's tokens depend only on its seed and its own logits,
// not on the other rows (which finish at random points and are compacted).
TEST_F(GenerateTest, SamplingIsIndependentOfBatchComposition) {
  auto model = Open();
  ASSERT_NE(model, nullptr);
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.sampling.greedy = false;
  o.sampling.temperature = 2.0;
  o.seeds = {11, 22, 33, 44};
  auto batch = LeftPadPrompts({{3, 4}, {5, 6, 7}, {8}, {2, 2, 2, 2, 2}}, 0);
  ASSERT_THAT(batch.status(), IsOk());
  auto all = Generate(*model, batch->first, batch->second, o);
  ASSERT_THAT(all.status(), IsOk());
  EXPECT_GT(all->counters.rows_compacted, 0); // random EOS happened
  auto again = Generate(*model, batch->first, batch->second, o);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(testing::I64Values(all->new_tokens), testing::I64Values(again->new_tokens));
  for (int64_t b = 0; b < 4; ++b) {
    GenerateOptions one = o;
    one.seeds = {o.seeds[b]};
    const std::vector<std::vector<int64_t>> prompts = {{3, 4}, {5, 6, 7}, {8}, {2, 2, 2, 2, 2}};
    auto single = LeftPadPrompts({prompts[b]}, 0);
    ASSERT_THAT(single.status(), IsOk());
    auto r = Generate(*model, single->first, single->second, one);
    ASSERT_THAT(r.status(), IsOk());
    std::vector<int64_t> row(all->new_tokens.data_as<int64_t>() + b * 24,
                             all->new_tokens.data_as<int64_t>() + (b + 1) * 24);
    EXPECT_EQ(testing::I64Values(r->new_tokens), row) << "row " << b;
    EXPECT_EQ(r->finished[0], all->finished[b]);
  }
  // A different seed changes the tokens; greedy ignores the seed.
  GenerateOptions other = o;
  other.seeds = {12, 23, 34, 45};
  auto d = Generate(*model, batch->first, batch->second, other);
  ASSERT_THAT(d.status(), IsOk());
  EXPECT_NE(testing::I64Values(all->new_tokens), testing::I64Values(d->new_tokens));
}

TEST_F(GenerateTest, BadPromptsAndOptions) {
  auto model = Open();
  ASSERT_NE(model, nullptr);
  Tensor ids = testing::MakeI64({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_THAT(Generate(*model, ids, testing::MakeI64({2, 3}, {1, 1, 1, 1, 0, 1}), Greedy(4)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "prompt row 1 has padding (mask 0) at column 1 after a token"));
  EXPECT_THAT(Generate(*model, ids, testing::MakeI64({2, 3}, {1, 1, 1, 0, 0, 0}), Greedy(4)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "prompt row 1 has no token"));
  EXPECT_THAT(Generate(*model, ids, testing::MakeI64({2, 3}, {1, 1, 1, 1, 2, 1}), Greedy(4)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "attention_mask[1, 1] is 2"));
  EXPECT_THAT(Generate(*model, testing::MakeI64({1, 2}, {1, 16}), Tensor(), Greedy(4)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input_ids[0, 1] is 16, expected a token id in [0, 16)"));
  EXPECT_THAT(Generate(*model, testing::MakeF32({1, 1}, {1}), Tensor(), Greedy(4)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "I64[B, T]"));
  EXPECT_THAT(Generate(*model, ids, Tensor(), Greedy(-1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "max_new_tokens"));
  // issue 14: lengths beyond the model's positions fail before allocating.
  // 3 prompt tokens = 1 block; 1021 new tokens = 256 blocks: 257 > 256.
  EXPECT_THAT(Generate(*model, ids, Tensor(), Greedy(255 * testing::kFakeBlock + 1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "need 1 + 256 blocks = 257 positions; the block decoder has "
                       "max_position_embeddings 256 (1024 tokens at L_B 4)"));
  for (int64_t n : {int64_t{1000000000}, std::numeric_limits<int64_t>::max()})
    EXPECT_THAT(Generate(*model, ids, Tensor(), Greedy(n)).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, "max_position_embeddings"));
  auto vanilla = Open(Vanilla());
  ASSERT_NE(vanilla, nullptr);
  // Vanilla: no position limit (HF extends rotary), but sizes are checked.
  EXPECT_THAT(Generate(*vanilla, ids, Tensor(), Greedy(std::numeric_limits<int64_t>::max()))
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "overflows a 64-bit byte count"));
  EXPECT_THAT(Generate(*vanilla, ids, Tensor(), Greedy(int64_t{1} << 40)).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, "of available memory"));
  GenerateOptions seeds = Greedy(4);
  seeds.seeds = {1};
  EXPECT_THAT(Generate(*model, ids, Tensor(), seeds).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "1 seeds for 2 sequences"));
  GenerateOptions hot = Greedy(4);
  hot.sampling.greedy = false;
  hot.sampling.top_p = 0;
  EXPECT_THAT(Generate(*model, ids, Tensor(), hot).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "top-p"));
  // Zero new tokens: empty outputs, no kernel call.
  auto none = Generate(*model, ids, Tensor(), Greedy(0));
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_EQ(none->new_tokens.shape(), std::vector<int64_t>({2, 0}));
  EXPECT_EQ(none->counters.prefill_calls, 0);
  EXPECT_THAT(LeftPadPrompts({{1}, {}}, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "prompt 1 has no tokens"));
}

TEST_F(GenerateTest, ArtifactsWithoutTheEntryPointsOrWithBrokenKernels) {
  auto no_decode = Open(WithoutDecode(false));
  ASSERT_NE(no_decode, nullptr);
  Tensor ids = testing::MakeI64({1, 2}, {1, 2});
  EXPECT_THAT(Generate(*no_decode, ids, Tensor(), Greedy(4)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "it has no decode_block entry point (it has: prefill, decode_tokens)"));
  auto vanilla = Open(WithoutDecode(true));
  ASSERT_NE(vanilla, nullptr);
  EXPECT_THAT(Generate(*vanilla, ids, Tensor(), Greedy(4)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "no decode_step entry point"));
  auto broken = Open(ShortDecodeTokens());
  ASSERT_NE(broken, nullptr);
  EXPECT_THAT(Generate(*broken, ids, Tensor(), Greedy(4)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "generated block 0: decode_tokens called the sampler 1 times, "
                       "expected L_B = 4"));
  // The KV layout is the artifact's: dims it leaves dynamic (other than B
  // and C) are not filled in from the config.
  testing::GenArtifactOptions dynamic;
  dynamic.dynamic_kv_layout = true;
  auto no_layout = Open(dynamic);
  ASSERT_NE(no_layout, nullptr);
  EXPECT_THAT(Generate(*no_layout, ids, Tensor(), Greedy(4)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "entry point 'prefill': cannot size dim 1 of in-out 'kv_cache'"));
  testing::TempDir d;
  ASSERT_THAT(testing::WriteToyArtifact(d.File("toy.btart")), IsOk());
  auto toy = Model::Open(d.File("toy.btart"));
  ASSERT_THAT(toy.status(), IsOk());
  EXPECT_THAT(Generate(**toy, ids, Tensor(), Greedy(4)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "it has no prefill, decode_tokens, decode_block entry points"));
}

// The official generations of the fixtures, replayed: decode_tokens feeds
// the recorded next-token logits of each row (identified through its cache
// row, so compaction must move it) to the runtime's sampler. The loop must
// reproduce the recorded tokens and logits exactly; generate_eos.safetensors
// checks the official EOS semantics (row 1 emits EOS first: the rest of its
// block is the generation pad 1, later blocks pad 0 with zero logits, and
// the next block is decoded for row 0 only).
TEST_F(GenerateTest, ReplaysTheOfficialGenerations) {
  int checked = 0;
  for (const std::string &dir : testing::FixtureCases()) {
    auto config = LoadModelConfig(dir);
    ASSERT_THAT(config.status(), IsOk()) << dir;
    if (config->kind() != proto::ModelConfig::BLOCK_TRANSFORMER)
      continue;
    for (const std::string &file : {"generate", "generate_eos"})
      for (const std::string &mode : {"trainpos", "official"}) {
        auto g = SafetensorsFile::Open(dir + "/" + file + ".safetensors");
        if (!g.ok() || !g->contains(mode + ".new_tokens"))
          continue;
        SCOPED_TRACE(dir + " " + file + " " + mode);
        auto logits = g->Get(mode + ".step_logits");
        auto expected_tokens = g->Get(mode + ".new_tokens");
        ASSERT_THAT(logits.status(), IsOk());
        ASSERT_THAT(expected_tokens.status(), IsOk());
        const std::string art = dir_.File(absl::StrCat("replay", checked, ".btart"));
        ASSERT_THAT(testing::WriteReplayArtifact(art, *config, *logits), IsOk());
        auto model = Model::Open(art);
        ASSERT_THAT(model.status(), IsOk());
        GenerateOptions o = Greedy(expected_tokens->dim(1), mode == "official");
        auto r = Generate(**model, *g->Get("prompt.input_ids"),
                          *g->Get("prompt.attention_mask"), o);
        ASSERT_THAT(r.status(), IsOk());
        EXPECT_EQ(testing::I64Values(r->new_tokens),
                  testing::I64Values(*expected_tokens));
        EXPECT_EQ(testing::F32Values(r->step_logits), testing::F32Values(*logits));
        if (file == "generate_eos") {
          EXPECT_EQ(r->finished, std::vector<bool>({false, true}));
          EXPECT_EQ(r->lengths, std::vector<int64_t>({12, 1}));
          EXPECT_EQ(r->counters.rows_compacted, 1);
          EXPECT_EQ(r->counters.token_decoder_rows,
                    2 * config->block_length() + 1 * config->block_length());
        }
        ++checked;
      }
  }
  EXPECT_GE(checked, 4); // block_tiny x2, block_tiny_b8 x2, its EOS file
}

// Model::Run with in-out arguments (TensorSpec.inout).
TEST_F(GenerateTest, InOutArgumentsAreCheckedAndUpdatedInPlace) {
  auto model = Open();
  ASSERT_NE(model, nullptr);
  auto make = [](int64_t b, int64_t c) {
    TensorMap io;
    io.emplace("kv_cache", std::move(Tensor::Allocate(proto::F32, {b, 1, 2, 1, c, 2})).value());
    io.emplace("kv_valid", std::move(Tensor::Allocate(proto::I64, {b, c})).value());
    return io;
  };
  auto inputs = [](int64_t len) {
    TensorMap in;
    in.emplace("input_ids", testing::MakeI64({1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}));
    in.emplace("block_attention_mask", testing::MakeI64({1, 2}, {0, 1}));
    in.emplace("cache_length", testing::MakeI64({}, {len}));
    return in;
  };
  TensorMap io = make(1, 3);
  auto out = model->Run("prefill", inputs(1), &io);
  ASSERT_THAT(out.status(), IsOk());
  EXPECT_EQ(out->size(), 1u); // context only: in-out buffers are not returned
  EXPECT_EQ(testing::I64Values(io.at("kv_valid")), std::vector<int64_t>({0, 0, 1}));
  EXPECT_EQ(io.at("kv_cache").data_as<float>()[2 * 2 + 1], 2.0f); // k[entry 2][1] = 2

  EXPECT_THAT(model->Run("prefill", inputs(2), &io).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "entry point 'prefill': cache_length 2 + 2 new entries exceed "
                       "in-out 'kv_cache' capacity C = 3"));
  EXPECT_THAT(model->Run("prefill", inputs(-1), &io).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "cache_length is -1"));
  EXPECT_THAT(model->Run("prefill", inputs(0)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "missing in-out argument 'kv_cache' (F32[-1, 1, 2, 1, -1, 2]; a "
                       "writable buffer owned by the caller)"));
  TensorMap wrong = inputs(0);
  TensorMap io2 = make(1, 3);
  wrong.emplace("kv_valid", std::move(io2.at("kv_valid")));
  io2.erase("kv_valid");
  EXPECT_THAT(model->Run("prefill", wrong, &io2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "'kv_valid' is an in-out argument"));
  TensorMap batch = make(2, 3);
  EXPECT_THAT(model->Run("prefill", inputs(0), &batch).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "in-out 'kv_cache' dim 0 (B = 2) disagrees with input 'input_ids' dim 0 (B = 1)"));
  TensorMap capacity = make(1, 3);
  capacity.at("kv_valid") = std::move(Tensor::Allocate(proto::I64, {1, 4})).value();
  EXPECT_THAT(model->Run("prefill", inputs(0), &capacity).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "(C = 4) disagrees"));
  // An in-out buffer aliasing an input.
  TensorMap alias = make(1, 3);
  TensorMap in = inputs(0);
  in.at("block_attention_mask") =
      Tensor::Borrow(proto::I64, {1, 2}, alias.at("kv_valid").data());
  EXPECT_THAT(model->Run("prefill", in, &alias).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "in-out argument 'kv_valid' overlaps input 'block_attention_mask'"));
}

// An in-out cache_length (the CUDA target keeps it in device memory; its
// compiled code does not check the capacity): checked like an input where
// the caller passes it through the host.
TEST_F(GenerateTest, InOutCacheLengthIsChecked) {
  testing::GenArtifactOptions o;
  o.inout_length = true;
  auto model = Open(o);
  ASSERT_NE(model, nullptr);
  auto io = [](int64_t len) {
    TensorMap m;
    m.emplace("kv_cache", std::move(Tensor::Allocate(proto::F32, {1, 1, 2, 1, 3, 2})).value());
    m.emplace("kv_valid", std::move(Tensor::Allocate(proto::I64, {1, 3})).value());
    m.emplace("cache_length", testing::MakeI64({}, {len}));
    return m;
  };
  TensorMap in;
  in.emplace("input_ids", testing::MakeI64({1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}));
  in.emplace("block_attention_mask", testing::MakeI64({1, 2}, {0, 1}));
  TensorMap over = io(2);
  EXPECT_THAT(model->Run("prefill", in, &over).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "entry point 'prefill': cache_length 2 + 2 new entries exceed "
                       "in-out 'kv_cache' capacity C = 3"));
  TensorMap negative = io(-1);
  EXPECT_THAT(model->Run("prefill", in, &negative).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "cache_length is -1"));
  // Passed as an input instead: the manifest says in-out.
  TensorMap as_input = io(0);
  in.emplace("cache_length", std::move(as_input.at("cache_length")));
  as_input.erase("cache_length");
  EXPECT_THAT(model->Run("prefill", in, &as_input).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "'cache_length' is an in-out argument"));
}

} // namespace
} // namespace bt::rt
