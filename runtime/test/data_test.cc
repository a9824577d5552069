//===- data_test.cc - training data pipeline (bt/runtime/data.h) ----------===//

#include "bt/runtime/train/data.h"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/base/file_util.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;

// Runs a shell command; its stdout, or nullopt if it failed.
std::optional<std::string> Capture(const std::string &cmd) {
  FILE *p = popen(cmd.c_str(), "r");
  if (p == nullptr)
    return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
    out.append(buf, n);
  return pclose(p) == 0 ? std::optional<std::string>(out) : std::nullopt;
}

const char kPython[] = "/usr/bin/python3";

bool HaveNumpy() {
  static const bool have =
      Capture(absl::StrCat(kPython, " -c 'import numpy' 2>/dev/null")).has_value();
  return have;
}

std::string PackingScript() {
  return absl::StrCat(BT_SOURCE_DIR, "/runtime/test/official_packing.py");
}

TEST(NumpyRandintTest, KnownValues) {
  // numpy 1.24: RandomState(42).randint(4, size=12, dtype=np.int16) and
  // RandomState(0).randint(3, size=10, dtype=np.int16) (mask 3: rejections).
  EXPECT_EQ(*NumpyRandintInt16(42, 4, 12),
            (std::vector<int16_t>{2, 1, 3, 2, 0, 2, 2, 1, 2, 3, 3, 1}));
  EXPECT_EQ(*NumpyRandintInt16(0, 3, 10),
            (std::vector<int16_t>{0, 0, 1, 2, 0, 1, 2, 2, 1, 1}));
  EXPECT_EQ(*NumpyRandintInt16(5, 1, 3), (std::vector<int16_t>{0, 0, 0}));
  EXPECT_FALSE(NumpyRandintInt16(0, 0, 1).ok());
  EXPECT_FALSE(NumpyRandintInt16(0, 40000, 1).ok());
}

// Bit-exact against numpy itself, when /usr/bin/python3 has it.
TEST(NumpyRandintTest, MatchesNumpy) {
  if (!HaveNumpy())
    GTEST_SKIP() << kPython << " has no numpy";
  std::vector<std::pair<uint32_t, int64_t>> cases;
  nlohmann::json args = nlohmann::json::array();
  for (uint32_t seed : {0u, 1u, 42u, 1234567u, 4294967295u})
    for (int64_t high : {1, 2, 3, 4, 5, 7, 8, 16, 100, 1000, 32767}) {
      cases.emplace_back(seed, high);
      args.push_back({seed, high, 1000});
    }
  std::optional<std::string> js = Capture(absl::StrCat(
      kPython, " ", PackingScript(), " randint-many '", args.dump(), "'"));
  ASSERT_TRUE(js.has_value());
  nlohmann::json expected = nlohmann::json::parse(*js);
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(*NumpyRandintInt16(cases[i].first, cases[i].second, 1000),
              expected[i].get<std::vector<int16_t>>())
        << "seed " << cases[i].first << " high " << cases[i].second;
}

TEST(DocumentsTest, Splits) {
  const std::string text =
      "\nGenesis 1\n\n  1 In the beginning God\ncreated the heaven.\n  2 And the "
      "earth\n\nGenesis 2\n\n  1 Thus   the heavens\r\n\n\nTrailing para\n";
  EXPECT_EQ(SplitDocuments(text, DocumentSplit::kParagraph),
            (std::vector<std::string>{
                "Genesis 1", "1 In the beginning God created the heaven. 2 And the earth",
                "Genesis 2", "1 Thus the heavens", "Trailing para"}));
  EXPECT_EQ(SplitDocuments(text, DocumentSplit::kHeading),
            (std::vector<std::string>{
                "Genesis 1\n1 In the beginning God created the heaven. 2 And the earth",
                "Genesis 2\n1 Thus the heavens", "Trailing para"}));
  EXPECT_EQ(SplitDocuments(text, DocumentSplit::kLine),
            (std::vector<std::string>{"Genesis 1", "1 In the beginning God",
                                      "created the heaven.", "2 And the earth",
                                      "Genesis 2", "1 Thus the heavens",
                                      "Trailing para"}));
  EXPECT_EQ(SplitDocuments(text, DocumentSplit::kFile).size(), 1u);
  EXPECT_TRUE(SplitDocuments("  \n\n \t\n", DocumentSplit::kParagraph).empty());
  EXPECT_FALSE(ParseDocumentSplit("chapter").ok());
}

TEST(DocumentsTest, KjvExcerptIsOneDocumentPerChapter) {
  absl::StatusOr<std::vector<std::string>> docs = ReadDocuments(
      {absl::StrCat(BT_TEST_DATA_DIR, "/kjv/genesis_1-25.txt")}, DocumentSplit::kHeading);
  ASSERT_THAT(docs.status(), IsOk());
  ASSERT_EQ(docs->size(), 25u);
  EXPECT_EQ((*docs)[0].substr(0, 40), "Genesis 1\n1 In the beginning God created");
  EXPECT_EQ((*docs)[24].substr(0, 10), "Genesis 25");
}

TokenizedCorpus SmallCorpus() {
  // Document d (0-based) has tokens 10(d+1) + i, lengths 5 3 8 1 6 2 9 4.
  TokenizedCorpus c;
  int d = 0;
  for (int len : {5, 3, 8, 1, 6, 2, 9, 4}) {
    std::vector<int32_t> ids;
    for (int i = 0; i < len; ++i)
      ids.push_back(10 * (d + 1) + i);
    c.Add(ids);
    ++d;
  }
  return c;
}

// Golden samples produced by the official TokenizedCorpusDataset (+
// SplitBlocks/AddLabels) on SmallCorpus with eos 1, pad 0, seed 42: they
// show the EOS that the official walk overwrites (sample 0 position 7,
// sample 2 position 7; L_B 3: sample 4 position 2) and the EOS kept at the
// end of a sample (sample 4, last position).
TEST(PackingTest, MatchesOfficialGolden) {
  struct Case {
    int64_t length, block;
    std::vector<int16_t> left, right;
    std::vector<std::vector<int64_t>> ids, mask;
  };
  const std::vector<Case> cases = {
      {12,
       4,
       {2, 1, 3, 2, 0, 2, 2, 1},
       {0, 3, 0, 0, 1, 3, 0, 2},
       {{0, 0, 10, 11, 12, 13, 14, 0, 0, 20, 21, 22},
        {1, 0, 0, 0, 0, 0, 0, 30, 31, 32, 33, 34},
        {35, 36, 37, 0, 0, 0, 40, 0, 50, 51, 52, 53},
        {54, 55, 1, 0, 0, 0, 60, 61, 1, 0, 0, 0},
        {0, 0, 70, 71, 72, 73, 74, 75, 76, 77, 78, 1}},
       {{0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1},
        {1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1},
        {1, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 1},
        {1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0},
        {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}},
      {9,
       3,
       {2, 1, 2, 0, 2, 2, 1, 2},
       {1, 1, 1, 1, 0, 1, 1, 2},
       {{0, 0, 10, 11, 12, 13, 14, 1, 0},
        {0, 20, 21, 22, 1, 0, 0, 0, 30},
        {31, 32, 33, 34, 35, 36, 37, 1, 0},
        {40, 1, 0, 0, 0, 50, 51, 52, 53},
        {54, 55, 0, 0, 0, 60, 61, 1, 0},
        {0, 70, 71, 72, 73, 74, 75, 76, 77},
        {78, 1, 0, 0, 0, 80, 81, 82, 83}},
       {{0, 0, 1, 1, 1, 1, 1, 1, 0},
        {0, 1, 1, 1, 1, 0, 0, 0, 1},
        {1, 1, 1, 1, 1, 1, 1, 1, 0},
        {1, 1, 0, 0, 0, 1, 1, 1, 1},
        {1, 1, 0, 0, 0, 1, 1, 1, 0},
        {0, 1, 1, 1, 1, 1, 1, 1, 1},
        {1, 1, 0, 0, 0, 1, 1, 1, 1}}},
  };
  for (const Case &c : cases) {
    PackingOptions o;
    o.length = c.length;
    o.block_length = c.block;
    o.eos_token = 1;
    o.pad_token = 0;
    absl::StatusOr<PackedDataset> d = PackedDataset::Create(SmallCorpus(), o);
    ASSERT_THAT(d.status(), IsOk());
    EXPECT_EQ(d->left_pads(), c.left);
    EXPECT_EQ(d->right_pads(), c.right);
    ASSERT_EQ(d->size(), static_cast<int64_t>(c.ids.size()));
    std::vector<int64_t> all(c.ids.size());
    for (size_t i = 0; i < all.size(); ++i)
      all[i] = static_cast<int64_t>(i);
    absl::StatusOr<TensorMap> batch = MakeBatch(*d, all);
    ASSERT_THAT(batch.status(), IsOk());
    const int64_t n = c.length / c.block;
    EXPECT_EQ(batch->at("input_ids").shape(),
              (std::vector<int64_t>{d->size(), n, c.block}));
    EXPECT_EQ(batch->at("block_attention_mask").shape(), (std::vector<int64_t>{d->size(), n}));
    std::vector<int64_t> ids = testing::I64Values(batch->at("input_ids"));
    std::vector<int64_t> mask = testing::I64Values(batch->at("attention_mask"));
    std::vector<int64_t> labels = testing::I64Values(batch->at("labels"));
    for (size_t s = 0; s < c.ids.size(); ++s)
      for (int64_t t = 0; t < c.length; ++t) {
        const size_t k = s * c.length + t;
        EXPECT_EQ(ids[k], c.ids[s][t]) << "L_B " << c.block << " sample " << s << " pos " << t;
        EXPECT_EQ(mask[k], c.mask[s][t]) << "L_B " << c.block << " sample " << s << " pos " << t;
        EXPECT_EQ(labels[k], c.mask[s][t] ? c.ids[s][t] : -100);
      }
  }
}

// bt's packing against runtime/test/official_packing.py (a step-by-step
// re-implementation of the official walk) on random corpora.
TEST(PackingTest, MatchesPythonReimplementation) {
  if (!HaveNumpy())
    GTEST_SKIP() << kPython << " has no numpy";
  testing::TempDir dir;
  std::mt19937_64 rng(7);
  struct Trial {
    TokenizedCorpus corpus;
    PackingOptions options;
  };
  std::vector<Trial> trials;
  nlohmann::json in = nlohmann::json::array();
  for (int trial = 0; trial < 40; ++trial) {
    Trial t;
    std::vector<std::vector<int32_t>> docs;
    const int n = 1 + static_cast<int>(rng() % 25);
    for (int d = 0; d < n; ++d) {
      std::vector<int32_t> ids(1 + rng() % 30);
      for (int32_t &id : ids)
        id = 2 + static_cast<int32_t>(rng() % 500);
      t.corpus.Add(ids);
      docs.push_back(ids);
    }
    static const int64_t kBlocks[] = {1, 2, 3, 4, 5, 8};
    PackingOptions &o = t.options;
    o.block_length = kBlocks[rng() % 6];
    o.length = o.block_length * static_cast<int64_t>(1 + rng() % 6);
    o.eos_token = 1;
    o.pad_token = 0;
    o.seed = static_cast<uint32_t>(rng() % 100000);
    o.random_pad_first_block = trial % 5 != 1;
    o.pad_to_block_boundary = trial % 5 != 2;
    in.push_back({{"docs", docs},
                  {"length", o.length},
                  {"block_length", o.block_length},
                  {"eos", o.eos_token},
                  {"pad", o.pad_token},
                  {"seed", o.seed},
                  {"random_pad_first_block", o.random_pad_first_block},
                  {"pad_to_block_boundary", o.pad_to_block_boundary}});
    trials.push_back(std::move(t));
  }
  // One Python process for all trials.
  ASSERT_THAT(WriteFileAtomically(dir.File("in.json"), in.dump()), IsOk());
  ASSERT_TRUE(Capture(absl::StrCat(kPython, " ", PackingScript(), " pack ", dir.File("in.json"),
                                   " ", dir.File("out.json")))
                  .has_value());
  nlohmann::json refs = nlohmann::json::parse(testing::ReadRaw(dir.File("out.json")));
  ASSERT_EQ(refs.size(), trials.size());
  int samples = 0;
  for (size_t trial = 0; trial < trials.size(); ++trial) {
    const PackingOptions &o = trials[trial].options;
    const nlohmann::json &ref = refs[trial];
    absl::StatusOr<PackedDataset> d = PackedDataset::Create(trials[trial].corpus, o);
    ASSERT_THAT(d.status(), IsOk());
    EXPECT_EQ(d->left_pads(), ref["left"].get<std::vector<int16_t>>()) << "trial " << trial;
    EXPECT_EQ(d->right_pads(), ref["right"].get<std::vector<int16_t>>()) << "trial " << trial;
    ASSERT_EQ(d->size(), static_cast<int64_t>(ref["samples"].size())) << "trial " << trial;
    for (int64_t i = 0; i < d->size(); ++i) {
      absl::StatusOr<TensorMap> b = MakeBatch(*d, {i});
      ASSERT_THAT(b.status(), IsOk());
      for (const char *name : {"input_ids", "attention_mask", "labels", "block_attention_mask"}) {
        std::vector<int64_t> expected;
        const nlohmann::json &r = ref["samples"][i][name];
        if (std::string(name) == "block_attention_mask")
          expected = r.get<std::vector<int64_t>>();
        else
          for (const auto &blk : r)
            for (int64_t v : blk)
              expected.push_back(v);
        EXPECT_EQ(testing::I64Values(b->at(name)), expected)
            << "trial " << trial << " sample " << i << " " << name << " (L_B "
            << o.block_length << ", length " << o.length << ")";
      }
      ++samples;
    }
  }
  EXPECT_GT(samples, 200);
}

TEST(PackingTest, Errors) {
  PackingOptions o;
  o.length = 10;
  o.block_length = 4;
  EXPECT_FALSE(PackedDataset::Create(SmallCorpus(), o).ok());
  o.length = 8;
  EXPECT_FALSE(PackedDataset::Create(TokenizedCorpus(), o).ok());
  o.block_length = 40000;
  o.length = 40000;
  EXPECT_FALSE(PackedDataset::Create(SmallCorpus(), o).ok());
}

TEST(SplitTest, HeldOutAndOrder) {
  auto [train, held] = SplitHeldOut(100, 0.05, 3);
  EXPECT_EQ(held.size(), 5u);
  EXPECT_EQ(train.size(), 95u);
  std::set<int64_t> all(train.begin(), train.end());
  all.insert(held.begin(), held.end());
  EXPECT_EQ(all.size(), 100u);
  EXPECT_TRUE(std::is_sorted(held.begin(), held.end()));
  EXPECT_EQ(SplitHeldOut(100, 0.05, 3).second, held); // deterministic
  EXPECT_NE(SplitHeldOut(100, 0.05, 4).second, held);
  EXPECT_EQ(SplitHeldOut(3, 0.01, 0).second.size(), 1u); // at least one
  EXPECT_EQ(SplitHeldOut(3, 0.0, 0).second.size(), 0u);
  EXPECT_EQ(SplitHeldOut(1, 0.5, 0).second.size(), 0u);

  SampleOrder order(7, 11);
  std::vector<int64_t> e0, e1;
  for (int64_t g = 0; g < 7; ++g)
    e0.push_back(order.At(g));
  for (int64_t g = 7; g < 14; ++g)
    e1.push_back(order.At(g));
  EXPECT_EQ(std::set<int64_t>(e0.begin(), e0.end()).size(), 7u);
  EXPECT_EQ(std::set<int64_t>(e1.begin(), e1.end()).size(), 7u);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(order.At(3), e0[3]); // back to epoch 0
  EXPECT_EQ(order.EpochOf(13), 1);
}

TEST(SentencePieceTest, TrainsFromMemory) {
  absl::StatusOr<std::vector<std::string>> docs = ReadDocuments(
      {absl::StrCat(BT_TEST_DATA_DIR, "/kjv/genesis_1-25.txt")}, DocumentSplit::kHeading);
  ASSERT_THAT(docs.status(), IsOk());
  SentencePieceTrainOptions o;
  o.vocab_size = 300;
  absl::StatusOr<std::string> model =
      TrainSentencePiece(SentencesForTokenizer(*docs, o.max_sentence_length), o);
  if (!model.ok() && (model.status().code() == absl::StatusCode::kUnimplemented ||
                      model.status().code() == absl::StatusCode::kFailedPrecondition))
    GTEST_SKIP() << model.status();
  ASSERT_THAT(model.status(), IsOk());
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::LoadSentencePiece(*model);
  ASSERT_THAT(tok.status(), IsOk());
  EXPECT_EQ((*tok)->vocab_size(), 300);
  EXPECT_EQ((*tok)->eos_id(), 0);
  EXPECT_EQ((*tok)->unk_id(), 1);
  absl::StatusOr<std::vector<int64_t>> ids = (*tok)->Encode("And God said, Let there be light");
  ASSERT_THAT(ids.status(), IsOk());
  EXPECT_LT(ids->size(), 20u);
  EXPECT_EQ(*(*tok)->Decode(*ids), "And God said, Let there be light");
  absl::StatusOr<TokenizedCorpus> corpus = TokenizeDocuments(**tok, *docs);
  ASSERT_THAT(corpus.status(), IsOk());
  EXPECT_EQ(corpus->num_documents(), 25);
  EXPECT_GT(corpus->tokens.size(), 15000u);
  // Too large a vocabulary for the text: a located error.
  o.vocab_size = 100000;
  EXPECT_FALSE(TrainSentencePiece({"tiny text"}, o).ok());
}

} // namespace
} // namespace bt::rt
