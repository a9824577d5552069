//===- tokenizer_test.cc - loading tokenizer.json, errors, the API --------===//
//
// Every unsupported or malformed tokenizer.json gets an error naming the JSON
// field; the unknown-byte options (unk_token, fuse_unk, byte_fallback) and
// the API (ids, special tokens, decoding errors). The ids expected here follow
// from the test's own vocabulary by hand (the oracle comparison is in
// oracle_test.cc).
//
//===----------------------------------------------------------------------===//

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bt/bpe/tokenizer.h"

namespace bt::bpe {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kTiny = std::string(BT_BPE_TEST_DATA) + "/tiny/tokenizer.json";

json Tiny() {
  std::ifstream in(kTiny, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

absl::Status Load(const json &j) { return Tokenizer::FromJson(j.dump(), "t.json").status(); }

std::unique_ptr<Tokenizer> LoadOk(const json &j) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::FromJson(j.dump(), "t.json");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

/// Expects InvalidArgument "t.json: <field>: ...<detail>...".
void ExpectError(const json &j, const std::string &field, const std::string &detail) {
  absl::Status s = Load(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("t.json: " + field + ": "));
  EXPECT_THAT(std::string(s.message()), HasSubstr(detail));
}

TEST(TokenizerLoad, TheTestTokenizerLoads) {
  std::unique_ptr<Tokenizer> t = LoadOk(Tiny());
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->added_tokens().size(), 7u);
  EXPECT_EQ(t->added_tokens()[1].content, "<mask>");
  EXPECT_TRUE(t->added_tokens()[1].lstrip && t->added_tokens()[1].rstrip);
  const int32_t mask = t->added_tokens()[1].id;
  EXPECT_EQ(t->TokenToId("<mask>"), mask);
  EXPECT_EQ(t->IdToToken(mask), "<mask>");
  EXPECT_EQ(t->TokenToId("Ġ"), Tiny()["model"]["vocab"]["Ġ"].get<int32_t>());
  EXPECT_EQ(t->TokenToId("no such token"), std::nullopt);
  EXPECT_EQ(t->IdToToken(-1), std::nullopt);
  EXPECT_EQ(t->vocab_size(), t->added_tokens().back().id + 1);
}

TEST(TokenizerLoad, MalformedJsonIsLocated) {
  absl::Status s = Tokenizer::FromJson("{\"model\": [1, 2,", "t.json").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("t.json: not valid JSON at byte"));
  ExpectError(json::array(), "(top level)", "expected an object");
  ExpectError(json::object(), "model", "missing");
  // Found by fuzz/tokenizer_json_fuzzer: a number beyond double's range made
  // the JSON library throw out_of_range, which escaped as std::terminate.
  s = Tokenizer::FromJson("{\"model\": 4444444444e4444}", "t.json").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("t.json: not valid JSON"));
}

TEST(TokenizerLoad, AMissingFileIsNotFound) {
  absl::Status s = Tokenizer::FromFile("/nonexistent/tokenizer.json").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("/nonexistent/tokenizer.json"));
}

TEST(TokenizerLoad, UnsupportedModelsAndOptionsAreNamed) {
  json j = Tiny();
  j["model"]["type"] = "WordPiece";
  ExpectError(j, "model.type", "'WordPiece' is not supported (supported: BPE)");
  j = Tiny();
  j["model"]["dropout"] = 0.1;
  ExpectError(j, "model.dropout", "BPE dropout (0.1) is not supported");
  j = Tiny();
  j["model"]["dropout"] = 0.0;
  EXPECT_TRUE(Load(j).ok());
  j = Tiny();
  j["model"]["continuing_subword_prefix"] = "##";
  ExpectError(j, "model.continuing_subword_prefix", "\"##\" is not supported");
  j = Tiny();
  j["model"]["end_of_word_suffix"] = "</w>";
  ExpectError(j, "model.end_of_word_suffix", "\"</w>\" is not supported");
  j = Tiny();
  j["model"]["end_of_word_suffix"] = "";  // GPT-2's files say "" for none
  EXPECT_TRUE(Load(j).ok());
  j = Tiny();
  j["model"]["fuse_unk"] = "yes";
  ExpectError(j, "model.fuse_unk", "expected a boolean, got string");
}

TEST(TokenizerLoad, UnsupportedComponentsAreNamed) {
  json j = Tiny();
  j["normalizer"] = {{"type", "Lowercase"}};
  ExpectError(j, "normalizer.type", "'Lowercase' is not supported (supported: NFC");
  j = Tiny();
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", {{{"type", "NFC"}}, {{"type", "NFKC"}}}}};
  ExpectError(j, "normalizer.normalizers[1].type", "'NFKC' is not supported");
  j = Tiny();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
  ExpectError(j, "pre_tokenizer.type", "'Metaspace' is not supported");
  j = Tiny();
  j["pre_tokenizer"] = nullptr;
  ExpectError(j, "pre_tokenizer", "null is not supported");
  j = Tiny();
  const json digits = {{"type", "Digits"}, {"individual_digits", true}};
  j["pre_tokenizer"]["pretokenizers"].insert(j["pre_tokenizer"]["pretokenizers"].begin(), digits);
  ExpectError(j, "pre_tokenizer.pretokenizers", "a Sequence of 2 components is not supported");
  j = Tiny();
  j["pre_tokenizer"]["pretokenizers"][0].erase("add_prefix_space");
  ExpectError(j, "pre_tokenizer.pretokenizers[0].add_prefix_space", "missing");
  j = Tiny();
  j["decoder"] = nullptr;
  ExpectError(j, "decoder", "null is not supported");
  j = Tiny();
  j["decoder"] = {{"type", "WordPiece"}};
  ExpectError(j, "decoder.type", "'WordPiece' is not supported");
  j = Tiny();
  j["post_processor"] = {{"type", "TemplateProcessing"}};
  ExpectError(j, "post_processor.type", "'TemplateProcessing' is not supported");
  j = Tiny();
  j["truncation"] = {{"max_length", 512}};
  ExpectError(j, "truncation", "is not supported (supported: null)");
  j = Tiny();
  j["padding"] = {{"pad_id", 0}};
  ExpectError(j, "padding", "is not supported (supported: null)");
}

TEST(TokenizerLoad, BadMergesAreNamed) {
  json j = Tiny();
  j["model"]["merges"][3] = "nosuchtoken Ġ";
  ExpectError(j, "model.merges[3]", "\"nosuchtoken\" is not in model.vocab");
  j = Tiny();
  j["model"]["merges"][0] = "nospace";
  ExpectError(j, "model.merges[0]", "\"nospace\" is not of the form \"left right\"");
  j = Tiny();
  j["model"]["merges"][0] = 5;
  ExpectError(j, "model.merges[0]", "expected \"left right\" or [left, right], got 5");
  j = Tiny();
  j["model"]["merges"][0] = "Ā Ā"; // both parts exist, "ĀĀ" does not
  ExpectError(j, "model.merges[0]", "the merged token \"ĀĀ\" is not in model.vocab");
  j = Tiny();
  j["model"]["merges"][1] = json::array({"Ġ", "t"}); // pairs are accepted too
  EXPECT_TRUE(Load(j).ok());
}

TEST(TokenizerLoad, BadVocabulariesAndAddedTokensAreNamed) {
  json j = Tiny();
  j["model"]["vocab"]["zzz"] = 0;
  ExpectError(j, "model.vocab[\"zzz\"]", "id 0 is also the id of");
  j = Tiny();
  j["model"]["vocab"]["zzz"] = -1;
  ExpectError(j, "model.vocab[\"zzz\"]", "token id -1 is out of range");
  j = Tiny();
  j["model"]["vocab"]["zzz"] = "7";
  ExpectError(j, "model.vocab[\"zzz\"]", "expected a token id (an integer), got \"7\"");
  j = Tiny();
  j["model"]["unk_token"] = "<unk>";
  ExpectError(j, "model.unk_token", "\"<unk>\" is not in model.vocab");
  j = Tiny();
  j["added_tokens"][5]["id"] = 7; // "the" is in the vocabulary with another id
  ExpectError(j, "added_tokens[5].id", "7 disagrees with model.vocab, where \"the\" is");
  j = Tiny();
  j["added_tokens"][1]["id"] = 0; // <mask> onto the vocabulary's id 0
  ExpectError(j, "added_tokens[1].id", "0 is model.vocab's \"!\", not \"<mask>\"");
  j = Tiny();
  j["added_tokens"][0].erase("special");
  ExpectError(j, "added_tokens[0].special", "missing");
  j = Tiny();
  j["added_tokens"][2]["content"] = "<mask>";
  ExpectError(j, "added_tokens[2].content", "\"<mask>\" is already an added token");
  j = Tiny();
  j["added_tokens"][2]["content"] = "";
  ExpectError(j, "added_tokens[2].content", "missing or empty");
}

TEST(TokenizerLoad, AByteNoTokenEncodesIsAnError) {
  json j = Tiny();
  j["model"]["vocab"].erase("ā"); // byte 0x01's character, in no merge
  ExpectError(j, "model.vocab", "no token for the byte-level character \"ā\" (U+0101, byte 0x01)");
}

/// Tiny without byte 0x01's character 'ā' (U+0101, UTF-8 C4 81), plus
/// "<unk>" or the byte-fallback tokens.
json WithoutByte01() {
  json j = Tiny();
  j["model"]["vocab"].erase("ā");
  int32_t next = 0;
  for (auto &[k, v] : j["model"]["vocab"].items())
    next = std::max(next, v.get<int32_t>() + 1);
  for (const json &a : j["added_tokens"])
    next = std::max(next, a["id"].get<int32_t>() + 1);
  j["model"]["vocab"]["<unk>"] = next;
  j["model"]["vocab"]["<0xC4>"] = next + 1;
  j["model"]["vocab"]["<0x81>"] = next + 2;
  return j;
}

TEST(TokenizerEncode, UnknownBytesBecomeUnkOrByteFallbackTokens) {
  // " \x01\x01" (tiny adds the prefix space) is one pre-token: Ġ, then the
  // two unknown bytes; no merge involves them.
  json j = WithoutByte01();
  const int32_t space = j["model"]["vocab"]["Ġ"];
  const int32_t unk = j["model"]["vocab"]["<unk>"];
  j["model"]["unk_token"] = "<unk>";
  std::unique_ptr<Tokenizer> t = LoadOk(j);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(*t->Encode("\x01\x01"), ElementsAre(space, unk, unk));
  j["model"]["fuse_unk"] = true;
  t = LoadOk(j);
  EXPECT_THAT(*t->Encode("\x01\x01"), ElementsAre(space, unk));
  // byte_fallback: the character's UTF-8 bytes as <0xHH> tokens (Rust:
  // format!("<{b:#04X}>")).
  j["model"]["byte_fallback"] = true;
  t = LoadOk(j);
  const int32_t c4 = j["model"]["vocab"]["<0xC4>"], x81 = j["model"]["vocab"]["<0x81>"];
  EXPECT_THAT(*t->Encode("\x01"), ElementsAre(space, c4, x81));
}

TEST(TokenizerEncode, EmptyTextHasNoTokens) {
  std::unique_ptr<Tokenizer> t = LoadOk(Tiny());
  EXPECT_TRUE(t->Encode("")->empty());
}

TEST(TokenizerDecode, SpecialTokensAreKeptOrSkipped) {
  std::unique_ptr<Tokenizer> t = LoadOk(Tiny());
  const int32_t eot = *t->TokenToId("<|endoftext|>");
  const int32_t a = *t->TokenToId("a"), space_a = *t->TokenToId("Ġa");
  const std::vector<int32_t> ids = {a, eot, space_a};
  EXPECT_EQ(*t->Decode(ids), "a<|endoftext|> a");
  EXPECT_EQ(*t->Decode(ids, /*skip_special_tokens=*/true), "a a");
}

TEST(TokenizerDecode, IdsThatAreNoTokenAreErrors) {
  std::unique_ptr<Tokenizer> t = LoadOk(Tiny());
  const std::vector<int32_t> bad = {0, t->vocab_size()};
  absl::Status s = t->Decode(bad).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("(position 1) is not in the vocabulary"));
  const std::vector<int32_t> negative = {-3};
  EXPECT_FALSE(t->Decode(negative).ok());
}

TEST(TokenizerDecode, BytesEndingInsideACharacterAreKept) {
  // DecodeBytes keeps a cut UTF-8 sequence (streaming); Decode replaces it.
  std::unique_ptr<Tokenizer> t = LoadOk(Tiny());
  const int32_t e2 = *t->TokenToId("â"); // byte 0xE2, the lead byte of "€"
  const std::vector<int32_t> ids = {e2};
  EXPECT_EQ(*t->DecodeBytes(ids), "\xE2");
  EXPECT_EQ(*t->Decode(ids), "\xEF\xBF\xBD");
}

} // namespace
} // namespace bt::bpe
