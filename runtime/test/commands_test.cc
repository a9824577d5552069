//===- commands_test.cc ---------------------------------------------------===//

#include "bt/runtime/tooling/commands.h"

#include <cstdio>
#include <sstream>
#include <sys/wait.h>

#include "bt/runtime/base/safetensors.h"
#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;
using ::testing::HasSubstr;

class CommandsTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteToyArtifact(dir_.File("toy.btart")), IsOk());
    auto m = Model::Open(dir_.File("toy.btart"));
    ASSERT_THAT(m.status(), IsOk());
    model_ = std::move(m).value();
    Tensor ids = testing::MakeI64({1, 2}, {3, 4});
    Tensor mask = testing::MakeI64({1, 2}, {1, 0});
    Tensor labels = testing::MakeI64({1, 2}, {7, 8});
    ASSERT_THAT(WriteSafetensors(dir_.File("in_labels.safetensors"),
                                 {{"input_ids", &ids}, {"attention_mask", &mask},
                                  {"labels", &labels}}),
                IsOk());
    ASSERT_THAT(WriteSafetensors(dir_.File("in.safetensors"),
                                 {{"input_ids", &ids}, {"attention_mask", &mask}}),
                IsOk());
    ASSERT_THAT(WriteSafetensors(dir_.File("in_bad.safetensors"), {{"input_ids", &ids}}),
                IsOk());
  }
  testing::TempDir dir_;
  std::unique_ptr<Model> model_;
};

TEST_F(CommandsTest, Info) {
  std::ostringstream out;
  ASSERT_THAT(RunInfoCommand(*model_, out), IsOk());
  const std::string s = out.str();
  EXPECT_THAT(s, HasSubstr("target cpu (x86-64), produced by btrt-tests"));
  EXPECT_THAT(s, HasSubstr("model: " + model_->config().name()));
  EXPECT_THAT(s, HasSubstr("  eval_loss (bt_entry_eval_loss, 1 params)"));
  EXPECT_THAT(s, HasSubstr("    in  labels: I64[B, T]"));
  EXPECT_THAT(s, HasSubstr("    in  a: F32[?, 3]"));
  EXPECT_THAT(s, HasSubstr("    out logits: F32[B, T, 5]"));
}

TEST_F(CommandsTest, EvalPicksEvalLossWhenLabelsArePresent) {
  std::ostringstream log;
  const std::string out = dir_.File("out.safetensors");
  ASSERT_THAT(RunEvalCommand(*model_, dir_.File("in_labels.safetensors"), out, log), IsOk());
  EXPECT_THAT(log.str(), HasSubstr("loss = 15"));
  auto f = SafetensorsFile::Open(out);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(f->names(), std::vector<std::string>({"logits", "loss"}));
  EXPECT_EQ(f->metadata().at("entry_point"), "eval_loss");
  EXPECT_EQ(testing::F32Values(*f->Get("logits")),
            std::vector<float>({4, 5, 6, 7, 8, 4, 4, 4, 4, 4}));
  EXPECT_EQ(testing::F32Values(*f->Get("loss"))[0], 15.0f);
}

TEST_F(CommandsTest, EvalWithoutLabels) {
  std::ostringstream log;
  const std::string out = dir_.File("out2.safetensors");
  ASSERT_THAT(RunEvalCommand(*model_, dir_.File("in.safetensors"), out, log), IsOk());
  auto f = SafetensorsFile::Open(out);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(f->names(), std::vector<std::string>({"logits"}));
  EXPECT_EQ(f->metadata().at("entry_point"), "eval");
}

TEST_F(CommandsTest, EvalErrorsNameTheFileAndTensor) {
  std::ostringstream log;
  EXPECT_THAT(RunEvalCommand(*model_, dir_.File("in_bad.safetensors"), dir_.File("o"), log),
              StatusIs(absl::StatusCode::kNotFound,
                       dir_.File("in_bad.safetensors") +
                           ": no tensor 'attention_mask' (entry point 'eval' needs I64[-1, -1])"));
  EXPECT_THAT(RunEvalCommand(*model_, dir_.File("absent.safetensors"), dir_.File("o"), log),
              StatusIs(absl::StatusCode::kNotFound, "absent.safetensors"));
}

// issue 14: an empty batch is an error (it printed `loss = -nan`, exit 0),
// and the inputs file is never the output.
TEST_F(CommandsTest, EvalRefusesAnEmptyBatchAndWritingOverItsInputs) {
  Tensor ids = testing::MakeI64({0, 2}, {});
  Tensor mask = testing::MakeI64({0, 2}, {});
  Tensor labels = testing::MakeI64({0, 2}, {});
  ASSERT_THAT(WriteSafetensors(dir_.File("empty.safetensors"),
                               {{"input_ids", &ids}, {"attention_mask", &mask},
                                {"labels", &labels}}),
              IsOk());
  std::ostringstream log;
  EXPECT_THAT(RunEvalCommand(*model_, dir_.File("empty.safetensors"), dir_.File("o"), log),
              StatusIs(absl::StatusCode::kInvalidArgument, "dimension 0 is empty"));
  EXPECT_FALSE(SafetensorsFile::Open(dir_.File("o")).ok()) << "nothing is written";
  const std::string before = testing::ReadRaw(dir_.File("in_labels.safetensors"));
  EXPECT_THAT(RunEvalCommand(*model_, dir_.File("in_labels.safetensors"),
                             dir_.File("in_labels.safetensors"), log),
              StatusIs(absl::StatusCode::kFailedPrecondition, "an input of this command"));
  EXPECT_EQ(testing::ReadRaw(dir_.File("in_labels.safetensors")), before);
}

TEST_F(CommandsTest, GradNeedsTheGradEntryPoint) {
  // The toy artifact has no grad entry point (the real one
  // is exercised by test/bt-run/fixtures-grad.test and executable.test).
  std::ostringstream log;
  const std::string out = dir_.File("grad.safetensors");
  EXPECT_THAT(RunGradCommand(*model_, dir_.File("in_labels.safetensors"), out, log),
              StatusIs(absl::StatusCode::kNotFound,
                       "the artifact has no 'grad' entry point (it has: eval, "
                       "eval_loss, add, wrong_shape)"));
  EXPECT_FALSE(SafetensorsFile::Open(out).ok()) << "nothing is written";
}

int Launch(const std::vector<std::string> &args, std::string *out, std::string *err) {
  std::vector<const char *> argv;
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  std::ostringstream o, e;
  int rc = LauncherMain(static_cast<int>(argv.size()), argv.data(), o, e);
  *out = o.str();
  *err = e.str();
  return rc;
}

TEST_F(CommandsTest, LauncherMainUsage) {
  std::string out, err;
  EXPECT_EQ(Launch({"model"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("missing command"));
  EXPECT_THAT(err, HasSubstr("usage: model"));
  EXPECT_EQ(Launch({"model", "frobnicate"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("unknown command 'frobnicate'"));
  EXPECT_EQ(Launch({"model", "--bogus"}, &out, &err), 2);
  EXPECT_EQ(Launch({"model", "eval", "--inputs", "x"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("eval: missing -o"));
  EXPECT_EQ(Launch({"model", "eval", "-o", "x"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("eval: missing --inputs"));
  EXPECT_EQ(Launch({"model", "eval", "--inputs"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("--inputs needs a path"));
  EXPECT_EQ(Launch({"model", "grad", "--inputs", "x"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("grad: missing -o"));
  EXPECT_EQ(Launch({"model", "grad", "-o", "x"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("grad: missing --inputs"));
  EXPECT_EQ(Launch({"model", "grad", "--bogus"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("grad: unexpected argument '--bogus'"));
  EXPECT_EQ(Launch({"model", "info", "extra"}, &out, &err), 2);
  EXPECT_EQ(Launch({"model", "--help"}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("usage: model"));
  // The test binary has no artifact appended.
  EXPECT_EQ(Launch({"model", "info"}, &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("no bt artifact"));
  // An explicit artifact.
  EXPECT_EQ(Launch({"model", "--artifact", dir_.File("toy.btart"), "info"}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("entry points:"));
  EXPECT_EQ(Launch({"model", "--artifact", dir_.File("toy.btart"), "eval", "--inputs",
                    dir_.File("in_bad.safetensors"), "-o", dir_.File("o")},
                   &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("no tensor 'attention_mask'"));
  EXPECT_EQ(Launch({"model", "--artifact", dir_.File("toy.btart"), "grad", "--inputs",
                    dir_.File("in_labels.safetensors"), "-o", dir_.File("g")},
                   &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("no 'grad' entry point"));
}

// Runs a command line, returning its exit status and stdout+stderr.
int Shell(const std::string &cmd, std::string *output) {
  FILE *p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr)
    return -1;
  char buf[4096];
  output->clear();
  while (size_t n = std::fread(buf, 1, sizeof buf, p))
    output->append(buf, n);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The real thing: bt-launcher with an artifact appended, run as a process.
TEST(Launcher, StandaloneExecutable) {
  testing::TempDir dir;
  const std::string exe = dir.File("toy-model");
  ASSERT_THAT(testing::WriteToyArtifact(exe, BT_LAUNCHER), IsOk());
  std::string out;
  ASSERT_EQ(Shell(exe + " info", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("eval_loss (bt_entry_eval_loss, 1 params)"));

  Tensor ids = testing::MakeI64({1, 2}, {3, 4});
  Tensor mask = testing::MakeI64({1, 2}, {1, 1});
  Tensor labels = testing::MakeI64({1, 2}, {7, 8});
  ASSERT_THAT(WriteSafetensors(dir.File("in.safetensors"),
                               {{"input_ids", &ids}, {"attention_mask", &mask},
                                {"labels", &labels}}),
              IsOk());
  ASSERT_EQ(Shell(exe + " eval --inputs " + dir.File("in.safetensors") + " -o " +
                      dir.File("out.safetensors"),
                  &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("loss = 15"));
  auto f = SafetensorsFile::Open(dir.File("out.safetensors"));
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(testing::F32Values(*f->Get("logits")),
            std::vector<float>({4, 5, 6, 7, 8, 5, 6, 7, 8, 9}));

  EXPECT_EQ(Shell(exe, &out), 2);
  EXPECT_THAT(out, HasSubstr("usage:"));
  EXPECT_EQ(Shell(exe + " eval --inputs " + dir.File("nope") + " -o " + dir.File("o"), &out), 1);
  EXPECT_THAT(out, HasSubstr("nope"));
  // The bare launcher has no artifact.
  EXPECT_EQ(Shell(std::string(BT_LAUNCHER) + " info", &out), 1);
  EXPECT_THAT(out, HasSubstr("no bt artifact"));
}

} // namespace
} // namespace bt::rt
