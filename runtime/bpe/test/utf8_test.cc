//===- utf8_test.cc - U+FFFD substitution of maximal subparts --------------===//
//
// Expected values: the examples of The Unicode Standard 15.0, §3.9, "U+FFFD
// Substitution of Maximal Subparts" (Tables 3-8 to 3-11 and the example
// before them).
//
//===----------------------------------------------------------------------===//

#include <string>

#include <gtest/gtest.h>

#include "bt/bpe/utf8.h"

namespace bt::bpe {
namespace {

const std::string R = "\xEF\xBF\xBD"; // U+FFFD

TEST(Utf8, ValidTextIsUnchanged) {
  const std::string s = "plain ASCII, caf\xC3\xA9, \xE4\xB8\xAD, \xF0\x9F\xA4\x97, \xF4\x8F\xBF\xBF";
  EXPECT_EQ(FindInvalidUtf8(s), absl::string_view::npos);
  EXPECT_EQ(ReplaceInvalidUtf8(s), s);
  EXPECT_EQ(FindInvalidUtf8(std::string("a\0b", 3)), absl::string_view::npos);
}

TEST(Utf8, MaximalSubpartsOfTheStandardsExample) {
  // 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  EXPECT_EQ(FindInvalidUtf8(in), 1u);
  EXPECT_EQ(ReplaceInvalidUtf8(in), "a" + R + R + R + "b" + R + "c" + R + R + "d");
}

TEST(Utf8, NonShortestFormsAreOneReplacementPerByte) { // Table 3-8
  EXPECT_EQ(ReplaceInvalidUtf8("\xC0\xAF\xE0\x80\xBF\xF0\x81\x82\x41"),
            R + R + R + R + R + R + R + R + "A");
}

TEST(Utf8, SurrogatesAreOneReplacementPerByte) { // Table 3-9
  EXPECT_EQ(ReplaceInvalidUtf8("\xED\xA0\x80\xED\xBF\xBF\xED\xAF\x41"),
            R + R + R + R + R + R + R + R + "A");
}

TEST(Utf8, OtherIllFormedSequences) { // Table 3-10
  EXPECT_EQ(ReplaceInvalidUtf8("\xF4\x91\x92\x93\xFF\x41\x80\xBF\x42"),
            R + R + R + R + R + "A" + R + R + "B");
}

TEST(Utf8, TruncatedSequencesAreOneReplacementEach) { // Table 3-11
  EXPECT_EQ(ReplaceInvalidUtf8("\xE1\x80\xE2\xF0\x91\x92\xF1\xBF\x41"), R + R + R + R + "A");
  EXPECT_EQ(FindInvalidUtf8("abc\xE2\x82"), 3u);
  EXPECT_EQ(ReplaceInvalidUtf8("abc\xE2\x82"), "abc" + R);
}

} // namespace
} // namespace bt::bpe
