//===- tokenizer_test.cc --------------------------------------------------===//

#include "bt/runtime/model/tokenizer.h"

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

TEST(Tokenizer, RejectsBytesThatAreNotAModel) {
  EXPECT_THAT(Tokenizer::LoadSentencePiece("not a model").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "not a SentencePiece model"));
  EXPECT_THAT(Tokenizer::LoadSentencePiece("").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "empty"));
}

} // namespace
} // namespace bt::rt
