//===- NeoXConfigTest.cpp - #bt.neox ---------------------------------------===//

#include "TestUtils.h"

#include "mlir/AsmParser/AsmParser.h"

#include <cmath>

using namespace mlir;
using namespace bt;
using namespace bt::test;

namespace {

class NeoXConfigTest : public BTTest {
protected:
  /// getChecked with every field given explicitly.
  NeoXConfigAttr checked(int64_t hidden, int64_t layers, int64_t heads,
                         int64_t headDim, int64_t intermediate,
                         int64_t rotaryDims, double base, double eps) {
    return NeoXConfigAttr::getChecked(
        [&] { return emitError(loc("config")); }, &ctx, hidden, layers, heads,
        headDim, intermediate, rotaryDims, llvm::APFloat(base),
        llvm::APFloat(eps));
  }
};

TEST_F(NeoXConfigTest, ValidConfigHasTheGivenFields) {
  NeoXConfigAttr c = checked(64, 2, 2, 32, 256, 8, 10000.0, 1e-5);
  ASSERT_TRUE(c) << diags.dump();
  EXPECT_TRUE(diags.all().empty());
  EXPECT_EQ(c.getHidden(), 64);
  EXPECT_EQ(c.getLayers(), 2);
  EXPECT_EQ(c.getHeads(), 2);
  EXPECT_EQ(c.getHeadDim(), 32);
  EXPECT_EQ(c.getIntermediate(), 256);
  EXPECT_EQ(c.getRotaryDims(), 8);
  EXPECT_EQ(c.getRotaryBaseValue(), 10000.0);
  EXPECT_EQ(c.getEpsValue(), 1e-5);
}

TEST_F(NeoXConfigTest, ConvenienceBuilderDerivesHeadDim) {
  NeoXConfigAttr c = NeoXConfigAttr::get(&ctx, /*hidden=*/96, /*layers=*/3,
                                         /*heads=*/4, /*intermediate=*/384,
                                         /*rotaryDims=*/6, 10000.0, 1e-5);
  EXPECT_EQ(c.getHeadDim(), 24);
  // Same uniqued attribute as the fully explicit form.
  EXPECT_EQ(c, checked(96, 3, 4, 24, 384, 6, 10000.0, 1e-5));
}

TEST_F(NeoXConfigTest, AttentionScaleIsInverseSqrtHeadDim) {
  for (int64_t hd : {16, 24, 32, 64, 80, 128}) {
    NeoXConfigAttr c = checked(2 * hd, 1, 2, hd, 8 * hd, 0, 10000.0, 1e-5);
    ASSERT_TRUE(c) << diags.dump();
    EXPECT_DOUBLE_EQ(c.getAttentionScale(), 1.0 / std::sqrt(double(hd))) << hd;
  }
  // Exact powers of two.
  EXPECT_EQ(checked(128, 1, 2, 64, 512, 16, 1e4, 1e-5).getAttentionScale(),
            0.125);
  EXPECT_EQ(checked(32, 1, 2, 16, 128, 4, 1e4, 1e-5).getAttentionScale(), 0.25);
}

TEST_F(NeoXConfigTest, HiddenMustBeHeadsTimesHeadDim) {
  EXPECT_FALSE(checked(100, 2, 2, 32, 256, 8, 10000.0, 1e-5));
  EXPECT_TRUE(hasErrorAt(diags,
                         "#bt.neox: hidden (100) must equal heads (2) * "
                         "head_dim (32)",
                         loc("config")));
  EXPECT_EQ(diags.numErrors(), 1u);
}

TEST_F(NeoXConfigTest, ConvenienceBuilderRejectsIndivisibleHidden) {
  NeoXConfigAttr c = NeoXConfigAttr::getChecked(
      [&] { return emitError(loc("config")); }, &ctx, /*hidden=*/int64_t(100),
      /*layers=*/int64_t(1), /*heads=*/int64_t(3),
      /*intermediate=*/int64_t(400), /*rotaryDims=*/int64_t(8), 10000.0, 1e-5);
  EXPECT_FALSE(c);
  EXPECT_TRUE(hasError(diags, "hidden (100) must equal heads (3) * head_dim (33)"));
}

TEST_F(NeoXConfigTest, RotaryDimsMustBeEven) {
  EXPECT_FALSE(checked(64, 2, 2, 32, 256, 7, 10000.0, 1e-5));
  EXPECT_TRUE(hasError(
      diags, "#bt.neox: rotary_dims (7) must be even and in [0, head_dim = 32]"));
}

TEST_F(NeoXConfigTest, RotaryDimsMustNotExceedHeadDim) {
  EXPECT_FALSE(checked(64, 2, 2, 32, 256, 34, 10000.0, 1e-5));
  EXPECT_TRUE(hasError(
      diags, "#bt.neox: rotary_dims (34) must be even and in [0, head_dim = 32]"));
  diags.clear();
  // The bounds themselves are valid (0: no rotary; head_dim: full rotary).
  EXPECT_TRUE(checked(64, 2, 2, 32, 256, 32, 10000.0, 1e-5));
  EXPECT_TRUE(checked(64, 2, 2, 32, 256, 0, 10000.0, 1e-5));
  EXPECT_TRUE(diags.all().empty()) << diags.dump();
}

TEST_F(NeoXConfigTest, RotaryDimsMustNotBeNegative) {
  EXPECT_FALSE(checked(64, 2, 2, 32, 256, -2, 10000.0, 1e-5));
  EXPECT_TRUE(hasError(diags, "rotary_dims (-2) must be even"));
}

TEST_F(NeoXConfigTest, EpsMustBePositive) {
  EXPECT_FALSE(checked(64, 2, 2, 32, 256, 8, 10000.0, 0.0));
  EXPECT_TRUE(hasError(diags, "#bt.neox: eps must be > 0"));
  diags.clear();
  EXPECT_FALSE(checked(64, 2, 2, 32, 256, 8, 10000.0, -1e-5));
  EXPECT_TRUE(hasError(diags, "#bt.neox: eps must be > 0"));
  diags.clear();
  EXPECT_FALSE(checked(64, 2, 2, 32, 256, 8, 10000.0, std::nan("")));
  EXPECT_TRUE(hasError(diags, "#bt.neox: eps must be > 0"));
}

TEST_F(NeoXConfigTest, RotaryBaseMustBePositive) {
  EXPECT_FALSE(checked(64, 2, 2, 32, 256, 8, 0.0, 1e-5));
  EXPECT_TRUE(hasError(diags, "#bt.neox: rotary_base must be > 0"));
}

TEST_F(NeoXConfigTest, SizesMustBePositive) {
  struct Case {
    int64_t hidden, layers, heads, headDim, intermediate;
    const char *message;
  };
  const Case cases[] = {
      {64, 0, 2, 32, 256, "'layers' must be >= 1, got 0"},
      {0, 2, 2, 0, 256, "'hidden' must be >= 1, got 0"},
      {64, 2, 0, 32, 256, "'heads' must be >= 1, got 0"},
      {64, 2, 2, -32, 256, "'head_dim' must be >= 1, got -32"},
      {64, 2, 2, 32, 0, "'intermediate' must be >= 1, got 0"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.message);
    diags.clear();
    EXPECT_FALSE(checked(c.hidden, c.layers, c.heads, c.headDim, c.intermediate,
                         0, 10000.0, 1e-5));
    EXPECT_TRUE(hasError(diags, c.message));
  }
}

TEST_F(NeoXConfigTest, PrintsAndParsesBack) {
  NeoXConfigAttr c = checked(64, 2, 2, 32, 256, 8, 10000.0, 1e-5);
  std::string text = print(c);
  EXPECT_EQ(text, "#bt.neox<hidden = 64, layers = 2, heads = 2, head_dim = 32, "
                  "intermediate = 256, rotary_dims = 8, rotary_base = "
                  "1.000000e+04, eps = 1.000000e-05>");
  Attribute parsed = parseAttribute(text, &ctx);
  ASSERT_TRUE(parsed) << diags.dump();
  EXPECT_EQ(parsed, c);
  EXPECT_EQ(print(parsed), text);
}

TEST_F(NeoXConfigTest, ParsesTheDocumentedSyntax) {
  Attribute parsed = parseAttribute(
      "#bt.neox<hidden = 64, layers = 2, heads = 2, head_dim = 32, "
      "intermediate = 256, rotary_dims = 8, rotary_base = 10000.0, "
      "eps = 1.0e-05>",
      &ctx);
  ASSERT_TRUE(parsed) << diags.dump();
  EXPECT_EQ(parsed, checked(64, 2, 2, 32, 256, 8, 10000.0, 1e-5));
}

TEST_F(NeoXConfigTest, ParserReportsInvalidValues) {
  Attribute parsed = parseAttribute(
      "#bt.neox<hidden = 64, layers = 2, heads = 2, head_dim = 32, "
      "intermediate = 256, rotary_dims = 9, rotary_base = 10000.0, "
      "eps = 1.0e-05>",
      &ctx);
  EXPECT_FALSE(parsed);
  EXPECT_TRUE(hasError(diags, "rotary_dims (9) must be even"));
}

} // namespace
