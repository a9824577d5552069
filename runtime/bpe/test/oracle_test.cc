//===- oracle_test.cc - bt::bpe against Hugging Face's tokenizers ----------===//
//
// The expected ids and texts in data/expected/*.json were made by the
// oracles (data/oracle.mjs: @huggingface/tokenizers and the Rust tokenizers
// library through its node binding, data/README.md), on the inputs of
// data/adversarial.json and the KJV text (`bible gen1:1-rev22:21`).
//
//===----------------------------------------------------------------------===//

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "bt/bpe/tokenizer.h"
#include "bt/bpe/utf8.h"

namespace bt::bpe {
namespace {

using json = nlohmann::json;

std::string DataPath(const std::string &rel) { return std::string(BT_BPE_TEST_DATA) + "/" + rel; }

json ReadJson(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

/// The bytes of an adversarial.json case.
std::string CaseInput(const json &c) {
  if (c.contains("hex"))
    return absl::HexStringToBytes(c["hex"].get<std::string>());
  return c["text"].get<std::string>();
}

std::vector<int32_t> Ids(const json &v) { return v.get<std::vector<int32_t>>(); }

/// Output of a shell command (stdout), or "" with a test failure.
std::string RunCommand(const std::string &cmd) {
  FILE *p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "cannot run " << cmd;
    return "";
  }
  std::string out;
  char buf[1 << 16];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;)
    out.append(buf, n);
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << cmd;
  return out;
}

/// SHA-256 (hex) of `bytes`, by coreutils' sha256sum (through a file of
/// its own: ctest runs the tests of this binary in parallel processes).
std::string Sha256(const std::string &bytes) {
  std::string path = ::testing::TempDir() + "/bt_bpe_sha256_XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) {
    ADD_FAILURE() << "mkstemp " << path;
    return "";
  }
  close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
  }
  std::string line = RunCommand("sha256sum '" + path + "'");
  std::remove(path.c_str());
  return line.substr(0, line.find(' '));
}

class OracleTest : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    expected_ = ReadJson(DataPath("expected/" + GetParam() + ".json"));
    spec_ = ReadJson(DataPath("adversarial.json"));
    absl::StatusOr<std::unique_ptr<Tokenizer>> t =
        Tokenizer::FromFile(DataPath(expected_["tokenizer"].get<std::string>()));
    ASSERT_TRUE(t.ok()) << t.status();
    tok_ = std::move(*t);
  }
  /// adversarial.json's input of an expected case.
  std::string Input(const std::string &name) {
    for (const json &c : spec_["cases"])
      if (c["name"] == name)
        return CaseInput(c);
    ADD_FAILURE() << "no input named " << name;
    return "";
  }

  json expected_, spec_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_P(OracleTest, AdversarialStringsGiveTheOraclesIds) {
  const json &known = spec_["known_divergences"].value(GetParam(), json::object());
  int divergent = 0;
  for (const json &c : expected_["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    // Where the two oracles disagree the data says why; the Rust library is
    // the reference there.
    if (c.contains("js_ids")) {
      EXPECT_TRUE(known.contains(name)) << "the oracles disagree, but not a known divergence";
      EXPECT_NE(Ids(c["js_ids"]), Ids(c["rust_ids"]));
      ++divergent;
    }
    absl::StatusOr<std::vector<int32_t>> ids = tok_->Encode(Input(name));
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, Ids(c["rust_ids"]));
  }
  EXPECT_EQ(divergent, static_cast<int>(known.size() - known.count("KJV")));
}

TEST_P(OracleTest, DecodingGivesTheOraclesText) {
  for (const json &c : expected_["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::vector<int32_t> ids = Ids(c["rust_ids"]);
    absl::StatusOr<std::string> text = tok_->Decode(ids);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, c["rust_decode"].get<std::string>());
    if (c.contains("prefix_decodes")) {
      // Prefixes of the ids end inside UTF-8 sequences: U+FFFD as the Rust
      // library's from_utf8_lossy.
      const json &prefixes = c["prefix_decodes"];
      for (size_t n = 1; n <= prefixes.size(); ++n) {
        absl::StatusOr<std::string> p =
            tok_->Decode(absl::MakeConstSpan(ids).subspan(0, n));
        ASSERT_TRUE(p.ok()) << p.status();
        EXPECT_EQ(*p, prefixes[n - 1].get<std::string>()) << n << " ids";
      }
    }
  }
}

TEST_P(OracleTest, EncodingFromSeveralThreadsGivesTheSameIds) {
  // Encode is thread-safe (the word cache is shared): four threads encode
  // every case at once.
  std::vector<std::pair<std::string, std::vector<int32_t>>> cases;
  for (const json &c : expected_["cases"])
    cases.emplace_back(Input(c["name"]), Ids(c["rust_ids"]));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < cases.size(); ++i) {
        const auto &[in, want] = cases[(i + t * 7) % cases.size()];
        absl::StatusOr<std::vector<int32_t>> ids = tok_->Encode(in);
        if (!ids.ok() || *ids != want)
          ++mismatches;
      }
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_P(OracleTest, TheKjvGivesTheOraclesIds) {
  ASSERT_TRUE(expected_.contains("kjv")) << "no KJV ids from the oracles";
  const json &kjv = expected_["kjv"];
  // Where the oracles disagree on the KJV the data says why (Rust expected).
  EXPECT_EQ(kjv.contains("js_ids_sha256"),
            spec_["known_divergences"].value(GetParam(), json::object()).contains("KJV"));
  // bible-kjv (scripts/install-deps.sh) prints the text the oracles encoded.
  const std::string text = RunCommand(kjv["command"].get<std::string>() + " 2>/dev/null");
  ASSERT_EQ(text.size(), kjv["text_bytes"].get<size_t>())
      << "`" << kjv["command"].get<std::string>() << "` (Debian bible-kjv) gave another text";
  ASSERT_EQ(Sha256(text), kjv["text_sha256"].get<std::string>());

  absl::StatusOr<std::vector<int32_t>> ids = tok_->Encode(text);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->size(), kjv["count"].get<size_t>());
  const std::vector<int32_t> first = Ids(kjv["first_ids"]), last = Ids(kjv["last_ids"]);
  EXPECT_EQ(std::vector<int32_t>(ids->begin(), ids->begin() + first.size()), first);
  EXPECT_EQ(std::vector<int32_t>(ids->end() - last.size(), ids->end()), last);
  std::string lines;
  lines.reserve(ids->size() * 6);
  for (int32_t id : *ids)
    absl::StrAppend(&lines, id, "\n");
  EXPECT_EQ(Sha256(lines), kjv["ids_sha256"].get<std::string>());

  // decode(encode(x)) == x where nothing changes the text: the KJV is ASCII
  // (NFC keeps it); tiny adds a prefix space and strips, tiny16 has <unk>.
  absl::StatusOr<std::string> back = tok_->Decode(*ids);
  ASSERT_TRUE(back.ok()) << back.status();
  if (GetParam() != "tiny" && GetParam() != "tiny16")
    EXPECT_TRUE(*back == text) << "decode(encode(KJV)) differs from the KJV";
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, OracleTest,
                         ::testing::Values("gpt2", "pythia_style", "tiny", "pythia_mini",
                                           "tiny16"));

TEST(Gpt2, DecodeOfEncodeIsTheText) {
  // gpt2 has no normalizer, no prefix space and no stripping added token:
  // decode(encode(x)) == x for valid UTF-8 x, and the U+FFFD-replaced x for
  // invalid x. (pythia_style applies NFC, tiny adds a prefix space and
  // strips: there the oracles' decodings are the reference, above.)
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      Tokenizer::FromFile(DataPath("gpt2/tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  // A named json: the range of a for over ReadJson(...)["cases"] would be a
  // reference into a temporary destroyed before the loop (found by ASan).
  const json adversarial = ReadJson(DataPath("adversarial.json"));
  for (const json &c : adversarial["cases"]) {
    if (c.contains("only"))
      continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string in = CaseInput(c);
    absl::StatusOr<std::vector<int32_t>> ids = (*tok)->Encode(in);
    ASSERT_TRUE(ids.ok()) << ids.status();
    absl::StatusOr<std::string> text = (*tok)->Decode(*ids);
    ASSERT_TRUE(text.ok()) << text.status();
    if (FindInvalidUtf8(in) == absl::string_view::npos)
      EXPECT_EQ(*text, in);
    else
      EXPECT_EQ(*text, ReplaceInvalidUtf8(in));
  }
}

} // namespace
} // namespace bt::bpe
