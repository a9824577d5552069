// Tests of bt::rt::CompareTensors and the `compare` launcher command.

#include "bt/runtime/tooling/compare.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "bt/runtime/tooling/commands.h"
#include "bt/runtime/base/safetensors.h"
#include "bt/runtime/base/tensor.h"
#include "gtest/gtest.h"

namespace bt::rt {
namespace {

std::string TempPath(const std::string &name) {
  return ::testing::TempDir() + "/compare_test_" + name;
}

Tensor F32(std::vector<int64_t> shape, std::vector<float> values) {
  Tensor t = *Tensor::Allocate(DType::F32, shape);
  std::copy(values.begin(), values.end(), t.data_as<float>());
  return t;
}

Tensor I64(std::vector<int64_t> shape, std::vector<int64_t> values) {
  Tensor t = *Tensor::Allocate(DType::I64, shape);
  std::copy(values.begin(), values.end(), t.data_as<int64_t>());
  return t;
}

/// Writes name/tensor pairs (tensors are move-only, hence the builder).
struct Writer {
  std::map<std::string, Tensor> tensors;
  Writer &Add(const std::string &name, Tensor t) {
    tensors.emplace(name, std::move(t));
    return *this;
  }
  void To(const std::string &path) { ASSERT_TRUE(WriteSafetensors(path, tensors).ok()); }
};

TEST(Compare, ParsesChecks) {
  auto a = ParseTensorCheck("logits:atol=1e-4");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->tensor, "logits");
  EXPECT_EQ(a->kind, TensorCheck::Kind::kAbs);
  EXPECT_DOUBLE_EQ(a->tolerance, 1e-4);
  auto r = ParseTensorCheck("grad.a.b:rtol=1e-5");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tensor, "grad.a.b");
  EXPECT_EQ(r->kind, TensorCheck::Kind::kRel);
  auto e = ParseTensorCheck("new_tokens:equal");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->kind, TensorCheck::Kind::kEqual);
  EXPECT_EQ(e->reference_name(), "new_tokens");
  auto renamed = ParseTensorCheck("new_tokens=trainpos.new_tokens:equal");
  ASSERT_TRUE(renamed.ok());
  EXPECT_EQ(renamed->tensor, "new_tokens");
  EXPECT_EQ(renamed->reference_name(), "trainpos.new_tokens");
  for (const char *bad : {"logits", ":atol=1", "x:atol=", "x:tol=1", "x:atol=-1", "x:atol=abc",
                          "=y:equal", "x=:equal"})
    EXPECT_FALSE(ParseTensorCheck(bad).ok()) << bad;
}

TEST(Compare, MeasuresAbsoluteRelativeAndExactErrors) {
  std::string a = TempPath("a.safetensors"), r = TempPath("r.safetensors");
  Writer()
      .Add("x", F32({2, 2}, {1.0f, 2.0f, 3.0f, 4.5f}))
      .Add("loss", F32({}, {2.0f}))
      .Add("ids", I64({3}, {1, 2, 3}))
      .To(a);
  Writer()
      .Add("x", F32({2, 2}, {1.0f, 2.0f, 3.0f, 4.0f}))
      .Add("loss", F32({}, {2.002f}))
      .Add("ids", I64({3}, {1, 2, 4}))
      .To(r);
  std::ostringstream out;
  auto results = CompareTensors(a, r,
                                {*ParseTensorCheck("x:atol=0.6"),
                                 *ParseTensorCheck("x:atol=0.4"),
                                 *ParseTensorCheck("x:rtol=0.1"),
                                 *ParseTensorCheck("loss:rtol=1e-5"),
                                 *ParseTensorCheck("ids:equal")},
                                out);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 5u);
  EXPECT_NEAR((*results)[0].error, 0.5, 1e-7);
  EXPECT_TRUE((*results)[0].passed);
  EXPECT_FALSE((*results)[1].passed);
  EXPECT_NEAR((*results)[2].error, 0.5 / 4.0, 1e-7);  // max|Δ| / max|ref|
  EXPECT_FALSE((*results)[2].passed);
  EXPECT_NEAR((*results)[3].error, 0.002 / 2.002, 1e-6);
  EXPECT_FALSE((*results)[3].passed);
  EXPECT_EQ((*results)[4].error, 1.0);
  EXPECT_FALSE((*results)[4].passed);
  EXPECT_NE(out.str().find("FAIL"), std::string::npos);
}

TEST(Compare, PrefixPatternChecksEveryMatchingReferenceTensor) {
  auto p = ParseTensorCheck("grad.*:rtol=1e-4");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tensor, "grad.*");
  for (const char *bad : {"gr*ad:rtol=1", "grad.*=x.*:rtol=1", "grad.*=x:rtol=1",
                          "x=y*:equal"})
    EXPECT_FALSE(ParseTensorCheck(bad).ok()) << bad;

  std::string a = TempPath("p_a.safetensors"), r = TempPath("p_r.safetensors");
  Writer()
      .Add("grad.b", F32({2}, {1.0f, 2.0f}))
      .Add("grad.a", F32({1}, {4.0f}))
      .Add("loss", F32({}, {9.0f}))
      .To(a);
  Writer()
      .Add("grad.a", F32({1}, {4.0f}))
      .Add("grad.b", F32({2}, {1.0f, 2.5f}))
      .Add("loss", F32({}, {1.0f}))
      .To(r);
  std::ostringstream out;
  auto results = CompareTensors(a, r, {*p}, out);
  ASSERT_TRUE(results.ok()) << results.status();
  // One check per reference tensor with the prefix, in name order; `loss`
  // is not matched.
  ASSERT_EQ(results->size(), 2u);
  EXPECT_EQ((*results)[0].check.tensor, "grad.a");
  EXPECT_TRUE((*results)[0].passed);
  EXPECT_EQ((*results)[1].check.tensor, "grad.b");
  EXPECT_NEAR((*results)[1].error, 0.5 / 2.5, 1e-7);
  EXPECT_FALSE((*results)[1].passed);

  // A pattern that matches nothing is an error, not a vacuous pass.
  auto none = CompareTensors(a, r, {*ParseTensorCheck("nope.*:atol=1")}, out);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no tensor matches 'nope.*'"),
            std::string::npos)
      << none.status();
  // A reference tensor missing from the actual file fails.
  Writer().Add("grad.a", F32({1}, {4.0f})).To(a);
  EXPECT_FALSE(CompareTensors(a, r, {*p}, out).ok());
}

TEST(Compare, AbsentAsZero) {
  std::string a = TempPath("z_a.safetensors"), r = TempPath("z_r.safetensors");
  Writer().Add("grad.a", F32({1}, {4.0f})).To(a);
  Writer()
      .Add("grad.a", F32({1}, {4.0f}))
      .Add("grad.unused", F32({2, 2}, {0.0f, 0.0f, 0.0f, 0.0f}))
      .Add("grad.nonzero", F32({2}, {0.0f, 1.0f}))
      .To(r);
  std::ostringstream out;
  // Without the option an absent tensor is an error.
  EXPECT_FALSE(
      CompareTensors(a, r, {*ParseTensorCheck("grad.unused:atol=0")}, out).ok());
  CompareOptions options;
  options.absent_as_zero = true;
  auto results = CompareTensors(a, r, {*ParseTensorCheck("grad.*:rtol=1e-4")},
                                out, options);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 3u);
  EXPECT_TRUE((*results)[0].passed);   // grad.a
  EXPECT_FALSE((*results)[1].passed);  // grad.nonzero: zeros are wrong
  EXPECT_EQ((*results)[1].error, 1.0);
  EXPECT_TRUE((*results)[2].passed);   // grad.unused: zero reference
  EXPECT_NE(out.str().find("absent = 0"), std::string::npos) << out.str();
}

TEST(Compare, NaNNeverPasses) {
  std::string a = TempPath("nan_a.safetensors"), r = TempPath("nan_r.safetensors");
  Writer().Add("x", F32({2}, {1.0f, NAN})).To(a);
  Writer().Add("x", F32({2}, {1.0f, 2.0f})).To(r);
  std::ostringstream out;
  auto results = CompareTensors(a, r, {*ParseTensorCheck("x:atol=1e9")}, out);
  ASSERT_TRUE(results.ok());
  EXPECT_FALSE((*results)[0].passed);
}

TEST(Compare, ReportsMissingTensorsAndShapeMismatches) {
  std::string a = TempPath("m_a.safetensors"), r = TempPath("m_r.safetensors");
  Writer().Add("x", F32({2}, {1.0f, 2.0f})).To(a);
  Writer().Add("x", F32({1, 2}, {1.0f, 2.0f})).Add("y", F32({1}, {0.0f})).To(r);
  std::ostringstream out;
  auto shape = CompareTensors(a, r, {*ParseTensorCheck("x:atol=1")}, out);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("has shape [2]"), std::string::npos)
      << shape.status();
  auto missing = CompareTensors(a, r, {*ParseTensorCheck("y:atol=1")}, out);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no tensor 'y'"), std::string::npos);
}

TEST(Compare, ComparesDifferentlyNamedTensors) {
  std::string a = TempPath("n_a.safetensors"), r = TempPath("n_r.safetensors");
  Writer().Add("new_tokens", I64({2}, {5, 6})).Add("x", F32({2}, {1.0f, 2.0f})).To(a);
  Writer()
      .Add("official.new_tokens", I64({2}, {5, 6}))
      .Add("trainpos.new_tokens", I64({2}, {5, 7}))
      .Add("ref.x", F32({3}, {1.0f, 2.0f, 3.0f}))
      .To(r);
  std::ostringstream out;
  auto results = CompareTensors(a, r,
                                {*ParseTensorCheck("new_tokens=official.new_tokens:equal"),
                                 *ParseTensorCheck("new_tokens=trainpos.new_tokens:equal")},
                                out);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_TRUE((*results)[0].passed);
  EXPECT_FALSE((*results)[1].passed);
  EXPECT_NE(out.str().find("new_tokens = official.new_tokens"), std::string::npos) << out.str();
  auto missing = CompareTensors(a, r, {*ParseTensorCheck("x=y:atol=1")}, out);
  EXPECT_NE(missing.status().message().find("no tensor 'y'"), std::string::npos);
  auto shape = CompareTensors(a, r, {*ParseTensorCheck("x=ref.x:atol=1")}, out);
  EXPECT_NE(shape.status().message().find("but 'ref.x' has [3]"), std::string::npos)
      << shape.status();
}

TEST(Compare, LauncherCommandExitCodes) {
  std::string a = TempPath("l_a.safetensors"), r = TempPath("l_r.safetensors");
  Writer().Add("x", F32({2}, {1.0f, 2.0f})).To(a);
  Writer().Add("x", F32({2}, {1.0f, 2.5f})).To(r);
  auto run = [&](std::vector<std::string> args) {
    std::vector<const char *> argv = {"bt-launcher"};
    for (auto &s : args)
      argv.push_back(s.c_str());
    std::ostringstream out, err;
    return LauncherMain(static_cast<int>(argv.size()), argv.data(), out, err);
  };
  EXPECT_EQ(run({"compare", a, r, "--check", "x:atol=1"}), 0);
  EXPECT_EQ(run({"compare", a, r, "--check", "x:atol=0.1"}), 1);
  EXPECT_EQ(run({"compare", a, r}), 2);
  EXPECT_EQ(run({"compare", a, r, "--check", "x:bad"}), 2);
}

CompareOptions MaskFile(const std::string &path) {
  CompareOptions o;
  o.mask_path = path;
  return o;
}

TEST(Compare, ParsesPatternsAndElementMasks) {
  auto all = ParseTensorCheck("*:atol=5e-5");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->is_pattern());
  EXPECT_FALSE(all->where.has_value());
  auto masked = ParseTensorCheck("param.*:atol=1e-6,where=|grad.{}|*0.25>1e-6");
  ASSERT_TRUE(masked.ok()) << masked.status();
  EXPECT_EQ(masked->tensor, "param.*");
  ASSERT_TRUE(masked->where.has_value());
  EXPECT_EQ(masked->where->tensor, "grad.{}");
  EXPECT_DOUBLE_EQ(masked->where->factor, 0.25);
  EXPECT_DOUBLE_EQ(masked->where->threshold, 1e-6);
  EXPECT_TRUE(masked->where->greater);
  EXPECT_EQ(masked->where->TensorFor("a.b"), "grad.a.b");
  EXPECT_EQ(masked->where->ToString(), "|grad.{}|*0.25>1e-06");
  auto le = ParseTensorCheck("x=y:rtol=1e-3,where=|m|<=2");
  ASSERT_TRUE(le.ok()) << le.status();
  EXPECT_EQ(le->reference_name(), "y");
  EXPECT_FALSE(le->where->greater);
  EXPECT_DOUBLE_EQ(le->where->factor, 1.0);
  EXPECT_DOUBLE_EQ(le->where->threshold, 2.0);
  for (const char *bad :
       {"x:atol=1,where=m>1", "x:atol=1,where=|m|", "x:atol=1,where=|m|*>1",
        "x:atol=1,where=|m|*a>1", "x:atol=1,where=|m|>b", "x:atol=1,mask=|m|>1",
        "x:atol=1,where=||>1", "*=y:atol=1", "a*b:atol=1", "x:atol=1,where=|m|>inf"})
    EXPECT_FALSE(ParseTensorCheck(bad).ok()) << bad;
}

TEST(Compare, MasksSelectElementsByAnotherTensor) {
  std::string a = TempPath("k_a.safetensors"), r = TempPath("k_r.safetensors"),
              m = TempPath("k_m.safetensors");
  // Element 1 is off by 0.5, element 2 by 1e-3; the mask keeps elements with
  // |g| * 2 > 1, i.e. 0 and 2 for x (|g| = 1, 0.1, -0.75) and none for y.
  Writer()
      .Add("x", F32({3}, {1.0f, 2.5f, 3.001f}))
      .Add("y", F32({2}, {5.0f, 6.0f}))
      .To(a);
  Writer().Add("x", F32({3}, {1.0f, 2.0f, 3.0f})).Add("y", F32({2}, {0.0f, 0.0f})).To(r);
  Writer()
      .Add("g.x", F32({3}, {1.0f, 0.1f, -0.75f}))
      .Add("g.y", F32({2}, {0.0f, 0.1f}))
      .Add("bad", F32({2}, {0.0f, 0.0f}))
      .To(m);
  std::ostringstream out;
  auto results = CompareTensors(
      a, r, {*ParseTensorCheck("*:atol=2e-3,where=|g.{}|*2>1")}, out, MaskFile(m));
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 2u);
  const TensorCheckResult &x = (*results)[0], &y = (*results)[1];
  EXPECT_EQ(x.check.tensor, "x");
  EXPECT_EQ(x.selected, 2);
  EXPECT_EQ(x.elements, 3);
  EXPECT_NEAR(x.error, 1e-3, 1e-6);
  EXPECT_TRUE(x.passed);
  EXPECT_EQ(y.check.tensor, "y");
  EXPECT_EQ(y.selected, 0);
  EXPECT_EQ(y.error, 0.0);
  EXPECT_TRUE(y.passed);
  EXPECT_NE(out.str().find("on 2 of 3 where |g.x|*2>1"), std::string::npos) << out.str();
  // The complement: element 1 only.
  auto rest = CompareTensors(
      a, r, {*ParseTensorCheck("x:atol=0.1,where=|g.{}|*2<=1")}, out, MaskFile(m));
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ((*rest)[0].selected, 1);
  EXPECT_NEAR((*rest)[0].error, 0.5, 1e-6);
  EXPECT_FALSE((*rest)[0].passed);
  // Relative errors are relative to the selected reference elements.
  auto rel = CompareTensors(
      a, r, {*ParseTensorCheck("x:rtol=1,where=|g.{}|>0.9")}, out, MaskFile(m));
  ASSERT_TRUE(rel.ok());
  EXPECT_NEAR((*rel)[0].error, 0.0, 1e-9);
  // Without a mask file the masks come from the reference.
  auto noMask = CompareTensors(a, r, {*ParseTensorCheck("x:atol=1,where=|g.{}|>0")}, out);
  ASSERT_FALSE(noMask.ok());
  EXPECT_NE(noMask.status().message().find("no tensor 'g.x'"), std::string::npos)
      << noMask.status();
  auto shape = CompareTensors(a, r, {*ParseTensorCheck("x:atol=1,where=|bad|>0")}, out, MaskFile(m));
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("mask 'bad' has shape [2]"), std::string::npos)
      << shape.status();
  auto none = CompareTensors(a, r, {*ParseTensorCheck("z*:atol=1")}, out, MaskFile(m));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no tensor matches 'z*'"), std::string::npos)
      << none.status();
}

TEST(Compare, LauncherTakesAMaskFile) {
  std::string a = TempPath("lm_a.safetensors"), r = TempPath("lm_r.safetensors"),
              m = TempPath("lm_m.safetensors");
  Writer().Add("x", F32({2}, {1.0f, 3.0f})).To(a);
  Writer().Add("x", F32({2}, {1.0f, 2.0f})).To(r);
  Writer().Add("g.x", F32({2}, {1.0f, 0.0f})).To(m);
  auto run = [&](std::vector<std::string> args) {
    std::vector<const char *> argv = {"bt-launcher"};
    for (auto &s : args)
      argv.push_back(s.c_str());
    std::ostringstream out, err;
    return LauncherMain(static_cast<int>(argv.size()), argv.data(), out, err);
  };
  EXPECT_EQ(run({"compare", a, r, "--mask-file", m, "--check",
                 "*:atol=1e-6,where=|g.{}|>0.5"}),
            0);
  EXPECT_EQ(run({"compare", a, r, "--mask-file", m, "--check", "*:atol=1e-6"}), 1);
  EXPECT_EQ(run({"compare", a, r, "--check", "*:atol=1e-6,where=|g.{}|>0.5"}), 1);
  EXPECT_EQ(run({"compare", a, r, "--mask-file"}), 2);
}

} // namespace
} // namespace bt::rt
