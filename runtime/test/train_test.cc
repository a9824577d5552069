//===- train_test.cc - the training loop (bt/runtime/train.h) -------------===//
//
// The loop, its checkpoints and resume run here on a fake model
// (train_test_kernels.c: a bigram LM with AdamW behind the train_step /
// eval_loss ABI of docs/training.md, driven through bt::rt::Trainer) trained
// on the committed KJV excerpt with a SentencePiece model trained in the
// test. The real model's loop runs in test/bt-run/train*.test.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/tooling/train.h"

#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bt/runtime/model/config.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/safetensors.h"
#include "test_util.h"

extern char **environ;

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;

std::string Kjv() { return absl::StrCat(BT_TEST_DATA_DIR, "/kjv/genesis_1-25.txt"); }

TEST(TrainArgsTest, Parses) {
  absl::StatusOr<TrainOptions> o = ParseTrainArgs(
      {"--data", "a.txt", "b.txt", "-o", "out", "--steps", "100", "--batch", "4",
       "--lr", "3e-4", "--warmup", "10", "--split", "heading", "--note", "k=v=w"});
  ASSERT_THAT(o.status(), IsOk());
  EXPECT_EQ(o->data_paths, (std::vector<std::string>{"a.txt", "b.txt"}));
  EXPECT_EQ(o->schedule.total_steps, 100);
  EXPECT_EQ(o->schedule.warmup_steps, 10);
  EXPECT_DOUBLE_EQ(o->schedule.peak_lr, 3e-4);
  EXPECT_EQ(o->split, DocumentSplit::kHeading);
  EXPECT_EQ(o->notes.at("k"), "v=w");
  EXPECT_THAT(ParseTrainArgs({"--data", "a", "-o", "x"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "missing --steps"));
  EXPECT_THAT(ParseTrainArgs({"--data", "-o", "x", "--steps", "1"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "--data needs"));
  EXPECT_FALSE(ParseTrainArgs({"--data", "a", "-o", "x", "--steps", "0"}).ok());
  EXPECT_FALSE(ParseTrainArgs({"--data", "a", "-o", "x", "--steps", "1", "--bogus"}).ok());
}

// The YAML of a checkpoint loads back to the same architecture.
TEST(TrainYamlTest, RoundTrips) {
  for (const std::string &dir : testing::FixtureCases()) {
    absl::StatusOr<proto::ModelConfig> c = LoadModelConfig(dir);
    ASSERT_THAT(c.status(), IsOk());
    if (c->kind() != proto::ModelConfig::BLOCK_TRANSFORMER)
      continue;
    c->set_vocab_size(777);
    c->set_name("roundtrip");
    TrainOptions o;
    o.seq_len = 64;
    o.batch = 3;
    testing::TempDir d;
    ASSERT_THAT(WriteFileAtomically(d.File("config.yaml"), OfficialTrainerYaml(*c, o, "note")),
                IsOk());
    absl::StatusOr<proto::ModelConfig> back = LoadModelConfig(d.File("config.yaml"));
    ASSERT_THAT(back.status(), IsOk()) << OfficialTrainerYaml(*c, o);
    EXPECT_EQ(back->vocab_size(), 777);
    EXPECT_EQ(back->max_length(), 64);
    EXPECT_EQ(back->block_decoder().SerializeAsString(), c->block_decoder().SerializeAsString())
        << dir;
    EXPECT_EQ(back->token_decoder().SerializeAsString(), c->token_decoder().SerializeAsString())
        << dir;
    for (auto f : {&proto::ModelConfig::block_length, &proto::ModelConfig::embedder_width,
                   &proto::ModelConfig::prefix_length, &proto::ModelConfig::eos_token_id,
                   &proto::ModelConfig::pad_token_id, &proto::ModelConfig::bos_token_id})
      EXPECT_EQ(((*back).*f)(), ((*c).*f)()) << dir;
    EXPECT_EQ(back->strategy(), c->strategy());
    EXPECT_EQ(back->embedder_projection(), c->embedder_projection());
  }
}

// Shared: a SentencePiece model of the excerpt (vocabulary 256).
class TrainTest : public ::testing::Test {
protected:
  static constexpr int64_t kVocab = 256;
  static void SetUpTestSuite() {
    absl::StatusOr<std::vector<std::string>> docs =
        ReadDocuments({Kjv()}, DocumentSplit::kHeading);
    if (!docs.ok())
      return;
    SentencePieceTrainOptions o;
    o.vocab_size = kVocab;
    absl::StatusOr<std::string> m =
        TrainSentencePiece(SentencesForTokenizer(*docs, o.max_sentence_length), o);
    if (m.ok())
      tokenizer_ = new std::string(*m);
    else
      skip_reason_ = new std::string(m.status().ToString());
  }
  void SetUp() override {
    if (tokenizer_ == nullptr)
      GTEST_SKIP() << "no SentencePiece: " << (skip_reason_ ? *skip_reason_ : "");
  }

  static TrainerSchedule Schedule(int64_t total) { return TrainerSchedule{0.05, 10, total}; }

  std::unique_ptr<Model> Open(const std::string &path) {
    EXPECT_THAT(testing::WriteTrainArtifact(path, kVocab, *tokenizer_), IsOk());
    absl::StatusOr<std::unique_ptr<Model>> m = Model::Open(path);
    EXPECT_THAT(m.status(), IsOk());
    return m.ok() ? std::move(*m) : nullptr;
  }

  TrainOptions Options(const std::string &out, int64_t steps) {
    TrainOptions o;
    o.data_paths = {Kjv()};
    o.split = DocumentSplit::kHeading;
    o.holdout_fraction = 0.08;
    o.output_dir = out;
    o.steps = steps;
    o.batch = 8;
    o.seq_len = 64;
    o.eval_every = 0;
    o.eval_batches = 8;
    o.progress = "none";
    o.schedule = Schedule(steps);
    return o;
  }

  static std::string *tokenizer_;
  static std::string *skip_reason_;
};
std::string *TrainTest::tokenizer_ = nullptr;
std::string *TrainTest::skip_reason_ = nullptr;

// Columns step, loss, grad_norm, lr of log.csv, by step (exact text).
std::map<int64_t, std::string> LossColumns(const std::string &csv_path) {
  std::map<int64_t, std::string> rows;
  std::ifstream f(csv_path);
  std::string line;
  std::getline(f, line);
  while (std::getline(f, line)) {
    std::vector<std::string> c = absl::StrSplit(line, ',');
    if (c.size() < 7 || c[4].empty())
      continue;
    rows[std::stoll(c[0])] = absl::StrCat(c[4], ",", c[5], ",", c[6]);
  }
  return rows;
}

double LastEvalLoss(const std::string &csv_path) {
  std::ifstream f(csv_path);
  std::string line;
  double last = -1;
  while (std::getline(f, line)) {
    std::vector<std::string> c = absl::StrSplit(line, ',');
    if (c.size() == 12 && !c[10].empty() && c[10] != "eval_loss")
      last = std::stod(c[10]);
  }
  return last;
}

// issue 14: a batch larger than the training set is refused before the loop
// (it was accepted without a word and ran out of memory at --batch 100000).
TEST_F(TrainTest, BatchLargerThanTheDataIsAnError) {
  testing::TempDir d;
  std::unique_ptr<Model> model = Open(d.File("fake.btart"));
  ASSERT_NE(model, nullptr);
  TrainOptions o = Options(d.File("run"), 1);
  o.batch = 100000;
  std::ostringstream out, log;
  EXPECT_THAT(RunTraining(*model, o, out, log),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--batch 100000 is larger than the "));
  EXPECT_FALSE(std::ifstream(d.File("run/latest/trainer_state.json")).good());
}

TEST_F(TrainTest, LearnsTheExcerpt) {
  testing::TempDir d;
  std::unique_ptr<Model> model = Open(d.File("fake.btart"));
  ASSERT_NE(model, nullptr);
  TrainOptions o = Options(d.File("run"), 300);
  o.eval_every = 100;
  o.save_every = 100;
  std::ostringstream out, log;
  ASSERT_THAT(RunTraining(*model, o, out, log), IsOk()) << log.str();
  const double lnv = std::log(static_cast<double>(kVocab));
  const double held = LastEvalLoss(d.File("run/log.csv"));
  // A bigram model of the excerpt: the held-out loss falls from ln V = 5.55
  // to ~3.5 nats.
  EXPECT_GT(held, 0);
  EXPECT_LT(held, 0.75 * lnv) << out.str();
  EXPECT_NE(out.str().find("held-out loss"), std::string::npos) << out.str();
  std::map<int64_t, std::string> rows = LossColumns(d.File("run/log.csv"));
  EXPECT_EQ(rows.size(), 300u);
  // Checkpoint layout.
  const std::string ck = d.File("run/latest");
  for (const char *f : {"config.yaml", "model.safetensors", "optimizer.safetensors",
                        "trainer_state.json", "tokenizer.model"})
    EXPECT_TRUE(std::ifstream(ck + "/" + f).good()) << f;
  char buf[256] = {};
  ASSERT_GT(readlink(ck.c_str(), buf, sizeof(buf) - 1), 0);
  EXPECT_EQ(std::string(buf), "step-000300");
  struct stat st;
  EXPECT_NE(stat(d.File("run/step-000200").c_str(), &st), 0) << "previous checkpoint removed";
  absl::StatusOr<proto::ModelConfig> config = LoadModelConfig(ck);
  ASSERT_THAT(config.status(), IsOk());
  EXPECT_EQ(config->vocab_size(), kVocab);
  EXPECT_EQ(config->max_length(), 64);
  absl::StatusOr<SafetensorsFile> opt = SafetensorsFile::Open(ck + "/optimizer.safetensors");
  ASSERT_THAT(opt.status(), IsOk());
  std::vector<std::string> opt_names = opt->names();
  std::sort(opt_names.begin(), opt_names.end());
  EXPECT_EQ(opt_names, (std::vector<std::string>{"adam_m.bigram", "adam_v.bigram",
                                                 "param.bigram", "peak_lr", "step",
                                                 "total_steps", "warmup_steps"}));
  EXPECT_EQ(*opt->Get("step")->data_as<int64_t>(), 300);
  absl::StatusOr<SafetensorsFile> params = SafetensorsFile::Open(ck + "/model.safetensors");
  ASSERT_THAT(params.status(), IsOk());
  std::vector<std::string> names = params->names();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"bigram", "untrained"}));
  // The untrained weight is copied through; the trained one is the state's.
  EXPECT_EQ(testing::F32Values(*params->Get("untrained")),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(testing::F32Values(*params->Get("bigram")),
            testing::F32Values(*opt->Get("param.bigram")));
  if (system("command -v gnuplot > /dev/null 2>&1") == 0)
    EXPECT_TRUE(std::ifstream(d.File("run/loss.png")).good());
}

// Stopping at step 20 and resuming gives exactly the uninterrupted steps.
TEST_F(TrainTest, ResumeIsBitIdentical) {
  testing::TempDir d;
  std::unique_ptr<Model> model = Open(d.File("fake.btart"));
  ASSERT_NE(model, nullptr);
  std::ostringstream out, log;
  TrainOptions full = Options(d.File("full"), 40);
  full.save_every = 20;
  full.eval_every = 20;
  ASSERT_THAT(RunTraining(*model, full, out, log), IsOk()) << log.str();

  TrainOptions first = Options(d.File("part"), 40);
  first.steps = 20; // the schedule still spans 40 steps
  first.eval_every = 20;
  ASSERT_THAT(RunTraining(*model, first, out, log), IsOk()) << log.str();
  TrainOptions second = Options(d.File("part"), 40);
  second.resume_dir = d.File("part");
  second.eval_every = 20;
  ASSERT_THAT(RunTraining(*model, second, out, log), IsOk()) << log.str();

  std::map<int64_t, std::string> a = LossColumns(d.File("full/log.csv"));
  std::map<int64_t, std::string> b = LossColumns(d.File("part/log.csv"));
  ASSERT_EQ(a.size(), 40u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(LastEvalLoss(d.File("full/log.csv")), LastEvalLoss(d.File("part/log.csv")));
  for (const char *f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(testing::ReadRaw(d.File(absl::StrCat("full/latest/", f))),
              testing::ReadRaw(d.File(absl::StrCat("part/latest/", f))))
        << f;

  // A different batch size cannot resume this run.
  TrainOptions wrong = Options(d.File("part"), 60);
  wrong.resume_dir = d.File("part");
  wrong.batch = 4;
  EXPECT_THAT(RunTraining(*model, wrong, out, log),
              StatusIs(absl::StatusCode::kInvalidArgument, "batch"));
}

// SIGKILL while a checkpoint is being written leaves the previous one
// intact, and resuming from it continues the same loss curve.
TEST_F(TrainTest, KillDuringCheckpointWriteKeepsThePreviousOne) {
  testing::TempDir d;
  const std::string art = d.File("fake.btart");
  ASSERT_THAT(testing::WriteTrainArtifact(art, kVocab, *tokenizer_), IsOk());
  const std::string out_dir = d.File("run"), marker = d.File("paused");
  const std::string env = absl::StrCat(kPauseInCheckpointEnv, "=20:", marker);
  std::vector<std::string> args = {BT_LAUNCHER, "--artifact", art, "train", "--data", Kjv(),
                                   "--split", "heading", "--holdout", "0.08", "-o", out_dir,
                                   "--steps", "30", "--batch", "8", "--seq-len", "64",
                                   "--save-every", "10", "--lr", "0.05", "--warmup", "10",
                                   "--progress", "none", "--no-plot"};
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> envs;
  for (char **e = environ; *e; ++e)
    envs.push_back(*e);
  envs.push_back(env);
  std::vector<char *> envp;
  for (std::string &e : envs)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()), 0);
  bool paused = false;
  for (int i = 0; i < 1200 && !paused; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    paused = std::ifstream(marker).good();
    int status = 0;
    if (!paused && waitpid(pid, &status, WNOHANG) == pid)
      FAIL() << "the trainer exited before the pause (status " << status << ")";
  }
  ASSERT_TRUE(paused);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));

  // `latest` is the complete step-10 checkpoint; step 20 exists only as a
  // temporary directory.
  char buf[256] = {};
  ASSERT_GT(readlink((out_dir + "/latest").c_str(), buf, sizeof(buf) - 1), 0);
  EXPECT_EQ(std::string(buf), "step-000010");
  for (const char *f : {"config.yaml", "model.safetensors", "optimizer.safetensors",
                        "trainer_state.json", "tokenizer.model"})
    EXPECT_TRUE(std::ifstream(out_dir + "/latest/" + f).good()) << f;
  EXPECT_THAT(SafetensorsFile::Open(out_dir + "/latest/model.safetensors").status(), IsOk());
  EXPECT_THAT(SafetensorsFile::Open(out_dir + "/latest/optimizer.safetensors").status(), IsOk());
  struct stat st;
  EXPECT_NE(stat((out_dir + "/step-000020").c_str(), &st), 0);
  bool have_tmp = false;
  for (const std::string &n : {std::string("")}) {
    (void)n;
    FILE *p = popen(absl::StrCat("ls -a ", out_dir).c_str(), "r");
    char line[512];
    while (p && fgets(line, sizeof(line), p))
      have_tmp |= std::string(line).rfind(".tmp-step-000020", 0) == 0;
    if (p)
      pclose(p);
  }
  EXPECT_TRUE(have_tmp) << "the interrupted write left its temporary directory";

  // Resume (in-process) and compare with an uninterrupted run.
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Open(art);
  ASSERT_THAT(model.status(), IsOk());
  std::ostringstream out, log;
  TrainOptions resumed = Options(out_dir, 30);
  resumed.resume_dir = out_dir;
  resumed.save_every = 10;
  resumed.plot = false;
  ASSERT_THAT(RunTraining(**model, resumed, out, log), IsOk()) << log.str();
  TrainOptions full = Options(d.File("full"), 30);
  full.save_every = 10;
  full.plot = false;
  ASSERT_THAT(RunTraining(**model, full, out, log), IsOk()) << log.str();
  EXPECT_EQ(LossColumns(out_dir + "/log.csv"), LossColumns(d.File("full/log.csv")));
  EXPECT_EQ(testing::ReadRaw(out_dir + "/latest/model.safetensors"),
            testing::ReadRaw(d.File("full/latest/model.safetensors")));
  // The interrupted write's leftovers are gone.
  EXPECT_EQ(system(absl::StrCat("ls -a ", out_dir, " | grep -q '^.tmp-'").c_str()) == 0, false);
}

// eval_loss with the trainer's parameters in place of the artifact's.
TEST_F(TrainTest, HeldOutLossUsesTheGivenParameters) {
  testing::TempDir d;
  std::unique_ptr<Model> model = Open(d.File("fake.btart"));
  ASSERT_NE(model, nullptr);
  auto batches = [](bool targets) {
    TensorMap b;
    b.emplace("input_ids", testing::MakeI64({1, 2, 4}, {2, 3, 4, 5, 6, 7, 8, 9}));
    b.emplace("attention_mask", testing::MakeI64({1, 2, 4}, {1, 1, 1, 1, 1, 1, 1, 1}));
    b.emplace("labels", targets ? testing::MakeI64({1, 2, 4}, {2, 3, 4, 5, 6, 7, 8, 9})
                                : testing::MakeI64({1, 2, 4}, std::vector<int64_t>(8, -100)));
    b.emplace("block_attention_mask", testing::MakeI64({1, 2}, {1, 1}));
    std::vector<TensorMap> v;
    v.push_back(std::move(b));
    return v;
  };
  // The artifact's zero table: uniform, ln V.
  absl::StatusOr<double> zero = HeldOutLoss(*model, {}, batches(true));
  ASSERT_THAT(zero.status(), IsOk());
  EXPECT_NEAR(*zero, std::log(256.0), 1e-5);
  // A table that predicts the targets of block 1 (5 -> 6 -> 7 -> 8 -> 9).
  std::vector<float> w(kVocab * kVocab, 0.0f);
  for (int t = 5; t <= 8; ++t)
    w[t * kVocab + t + 1] = 20.0f;
  TensorMap params;
  params.emplace("bigram", testing::MakeF32({kVocab, kVocab}, w));
  absl::StatusOr<double> good = HeldOutLoss(*model, params, batches(true));
  ASSERT_THAT(good.status(), IsOk());
  EXPECT_LT(*good, 1e-5);
  // A replacement of the wrong shape is refused by name.
  TensorMap bad;
  bad.emplace("bigram", testing::MakeF32({2}, {1, 2}));
  EXPECT_THAT(HeldOutLoss(*model, bad, batches(true)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "parameter 'bigram' replaced"));
  EXPECT_THAT(HeldOutLoss(*model, {}, batches(false)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "no targets"));
}

// An artifact without the training entry points is refused with a hint.
TEST_F(TrainTest, NeedsTheTrainingEntryPoints) {
  testing::TempDir d;
  ASSERT_THAT(testing::WriteGenArtifact(d.File("gen.btart"), {}), IsOk());
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Open(d.File("gen.btart"));
  ASSERT_THAT(model.status(), IsOk());
  std::ostringstream out, log;
  EXPECT_THAT(RunTraining(**model, Options(d.File("run"), 10), out, log),
              StatusIs(absl::StatusCode::kNotFound, "train_step"));
}

// issue 14: a run never writes over another run's directory unless asked.
TEST(TrainOutputDir, RefusesOtherFilesUnlessResumingOrOverwriting) {
  testing::TempDir d;
  TrainOptions o;
  o.output_dir = d.File("out");
  EXPECT_THAT(CheckTrainOutputDir(o, false), IsOk()); // does not exist yet
  ASSERT_EQ(::mkdir(o.output_dir.c_str(), 0755), 0);
  EXPECT_THAT(CheckTrainOutputDir(o, false), IsOk()); // empty
  // What bt-run train wrote before the loop is this run's.
  testing::WriteRaw(o.output_dir + "/model.btart", "x");
  testing::WriteRaw(o.output_dir + "/tokenizer.model", "x");
  EXPECT_THAT(CheckTrainOutputDir(o, true), IsOk());
  EXPECT_THAT(CheckTrainOutputDir(o, false),
              StatusIs(absl::StatusCode::kFailedPrecondition, "model.btart, tokenizer.model"));
  // An earlier run: refused, then accepted with --resume of it or --overwrite.
  ASSERT_EQ(::mkdir((o.output_dir + "/step-000002").c_str(), 0755), 0);
  testing::WriteRaw(o.output_dir + "/step-000002/trainer_state.json", "{}");
  ASSERT_EQ(::symlink("step-000002", (o.output_dir + "/latest").c_str()), 0);
  EXPECT_THAT(CheckTrainOutputDir(o, true),
              StatusIs(absl::StatusCode::kFailedPrecondition, "--overwrite"));
  TrainOptions resume = o;
  resume.resume_dir = o.output_dir;
  EXPECT_THAT(CheckTrainOutputDir(resume, true), IsOk());
  resume.resume_dir = o.output_dir + "/step-000002"; // the checkpoint itself
  EXPECT_THAT(CheckTrainOutputDir(resume, true), IsOk());
  TrainOptions other = o;
  other.resume_dir = d.File("elsewhere");
  EXPECT_THAT(CheckTrainOutputDir(other, true),
              StatusIs(absl::StatusCode::kFailedPrecondition, "is not empty"));
  TrainOptions overwrite = o;
  overwrite.overwrite = true;
  EXPECT_THAT(CheckTrainOutputDir(overwrite, true), IsOk());
  EXPECT_TRUE(ParseTrainArgs({"--data", "x", "-o", "y", "--steps", "1", "--overwrite"})->overwrite);
}

} // namespace
} // namespace bt::rt
