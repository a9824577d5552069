//===- tokenizer_test.cc --------------------------------------------------===//

#include "bt/runtime/model/tokenizer.h"

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;

std::string TinyModel() {
  return testing::ReadRaw(std::string(BT_TEST_DATA_DIR) + "/spm/tiny16.model");
}

TEST(Tokenizer, EncodesAndDecodesThroughLibSentencePiece) {
  auto t = Tokenizer::LoadSentencePiece(TinyModel());
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_EQ((*t)->vocab_size(), 16);
  auto ids = (*t)->Encode("the cat");
  ASSERT_THAT(ids.status(), IsOk());
  EXPECT_EQ(*ids, std::vector<int64_t>({5, 4, 6, 12, 3}));
  auto text = (*t)->Decode(*ids);
  ASSERT_THAT(text.status(), IsOk());
  EXPECT_EQ(*text, "the cat");
  // Ids outside the tokenizer's vocabulary (a model may have more) are skipped.
  auto skipped = (*t)->Decode({5, 4, 99, -1, 6, 12, 3});
  ASSERT_THAT(skipped.status(), IsOk());
  EXPECT_EQ(*skipped, "the cat");
  // Two tokenizers at once.
  auto other = Tokenizer::LoadSentencePiece(TinyModel());
  ASSERT_THAT(other.status(), IsOk());
  EXPECT_EQ(*(*other)->Encode("a hat"), *(*t)->Encode("a hat"));
}

// The shim and the libsentencepiece files it was linked against are
// embedded in btrt and loaded from memory (memfds): the process never maps
// the machine's own libsentencepiece*.so (missing on the GPU box, or another
// build with another C++ ABI), so tokenizing works wherever btrt runs.
TEST(Tokenizer, NeverMapsTheMachinesLibSentencePiece) {
  auto t = Tokenizer::LoadSentencePiece(TinyModel());
  ASSERT_THAT(t.status(), IsOk());
  ASSERT_THAT((*t)->Encode("the cat").status(), IsOk());
  const std::string maps = testing::ReadRaw("/proc/self/maps");
  ASSERT_FALSE(maps.empty());
  EXPECT_EQ(maps.find("libsentencepiece"), std::string::npos) << maps;
}

TEST(Tokenizer, RejectsBytesThatAreNotAModel) {
  EXPECT_THAT(Tokenizer::LoadSentencePiece("not a model").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "not a SentencePiece model"));
  EXPECT_THAT(Tokenizer::LoadSentencePiece("").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "empty"));
}

// tokenizer.json (bt_bpe): runtime/bpe/test/data, whose expected/ ids are
// the oracles' (Hugging Face's tokenizers libraries).
std::string BpeData(const std::string &rel) {
  return std::string(BT_SOURCE_DIR) + "/runtime/bpe/test/data/" + rel;
}

TEST(Tokenizer, DetectsTheKindOfTokenizerBytes) {
  EXPECT_EQ(DetectTokenizerKind(TinyModel()), proto::TOKENIZER_SENTENCEPIECE);
  EXPECT_EQ(DetectTokenizerKind(" \n{\"model\": {}}"), proto::TOKENIZER_HF_JSON);
  EXPECT_EQ(DetectTokenizerKind(testing::ReadRaw(BpeData("pythia_mini/tokenizer.json"))),
            proto::TOKENIZER_HF_JSON);
  EXPECT_EQ(DetectTokenizerKind(""), proto::TOKENIZER_SENTENCEPIECE);
  EXPECT_STREQ(TokenizerFileName(proto::TOKENIZER_HF_JSON), "tokenizer.json");
  EXPECT_STREQ(TokenizerFileName(proto::TOKENIZER_SENTENCEPIECE), "tokenizer.model");
}

TEST(Tokenizer, EncodesAndDecodesATokenizerJson) {
  const std::string json = testing::ReadRaw(BpeData("pythia_mini/tokenizer.json"));
  auto t = Tokenizer::Load(proto::TOKENIZER_HF_JSON, json);
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_EQ((*t)->kind(), proto::TOKENIZER_HF_JSON);
  EXPECT_EQ((*t)->vocab_size(), 512);
  EXPECT_EQ((*t)->eos_id(), 0); // <|endoftext|>, as in Pythia
  // The oracles' ids of the "kjv-like" case.
  const std::string expected = testing::ReadRaw(BpeData("expected/pythia_mini.json"));
  auto e = nlohmann::json::parse(expected);
  std::vector<int64_t> want;
  for (const auto &c : e["cases"])
    if (c["name"] == "kjv-like")
      want = c["rust_ids"].get<std::vector<int64_t>>();
  ASSERT_FALSE(want.empty());
  const std::string text = "  1 In the beginning God created the heaven and the earth.\n"
                           "  2 And the earth was without form, and void;";
  auto ids = (*t)->Encode(text);
  ASSERT_THAT(ids.status(), IsOk());
  EXPECT_EQ(*ids, want);
  // Ids that name no token (a model may have more) are skipped, as for
  // SentencePiece.
  std::vector<int64_t> with_extra = *ids;
  with_extra.insert(with_extra.begin() + 3, {512, -1, 50000});
  auto back = (*t)->Decode(with_extra);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(*back, text);
}

TEST(Tokenizer, RejectsATokenizerJsonItCannotEncode) {
  EXPECT_THAT(Tokenizer::LoadHfJson("{\"model\": {\"type\": \"Unigram\"}}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "tokenizer.json: model.type: 'Unigram' is not supported"));
  EXPECT_THAT(Tokenizer::Load(static_cast<proto::TokenizerKind>(7), "x").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown tokenizer kind 7"));
}

} // namespace
} // namespace bt::rt
