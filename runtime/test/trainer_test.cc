// Tests of bt::rt::Trainer and the `train-step` command against a fake kernel
// library (trainer_test_kernels.c: toy train_step / apply_gradients through the
// ABI, in-out parameters and moments). The numerics of the compiled entry
// points are checked against the official fixtures by test/bt-run.

#include "bt/runtime/train/trainer.h"

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "bt/runtime/model/artifact.h"
#include "bt/runtime/tooling/commands.h"
#include "bt/runtime/model/config.h"
#include "bt/runtime/base/safetensors.h"
#include "test_util.h"

namespace bt::rt {
namespace {

using testing::F32Values;
using testing::IsOk;
using testing::MakeF32;
using testing::ReadRaw;
using testing::StatusIs;
using testing::TempDir;
using testing::WriteRaw;

proto::TensorSpec Spec(const std::string &name, DType dtype,
                       std::vector<int64_t> shape, bool inout = false) {
  proto::TensorSpec s;
  s.set_name(name);
  s.set_dtype(dtype);
  for (int64_t d : shape)
    s.add_shape(d);
  s.set_inout(inout);
  return s;
}

struct TrainArtifactOptions {
  bool train_step = true;
  bool apply_gradients = true;
};

TrainerSchedule Schedule(double peak, int64_t warmup = 0, int64_t total = 0) {
  TrainerSchedule s;
  s.peak_lr = peak;
  s.warmup_steps = warmup;
  s.total_steps = total;
  return s;
}

CheckpointWriteOptions Write(const std::string &config,
                             const std::map<std::string, Tensor> *extra = nullptr) {
  CheckpointWriteOptions w;
  w.config_path = config;
  w.extra = extra;
  return w;
}

TrainArtifactOptions Entries(bool train_step, bool apply_gradients) {
  TrainArtifactOptions o;
  o.train_step = train_step;
  o.apply_gradients = apply_gradients;
  return o;
}

/// A fake model with weights w = {1, 2, 3}, b = {10, 20} and the entry points
/// of trainer_test_kernels.c.
absl::Status WriteTrainArtifact(const std::string &path,
                                const TrainArtifactOptions &o = {}) {
  proto::Manifest m;
  m.set_target("cpu");
  m.set_cpu("x86-64");
  m.set_producer("btrt-tests");
  proto::ModelConfig &c = *m.mutable_config();
  c.set_kind(proto::ModelConfig::VANILLA);
  c.set_name("fake_train");
  c.set_vocab_size(16);
  c.set_block_length(1);
  auto scalars_and_state = [](proto::EntryPoint *ep) {
    *ep->add_inputs() = Spec("step", DType::I64, {});
    *ep->add_inputs() = Spec("peak_lr", DType::F32, {});
    *ep->add_inputs() = Spec("warmup_steps", DType::I64, {});
    *ep->add_inputs() = Spec("total_steps", DType::I64, {});
    for (const char *prefix : {"param.", "adam_m.", "adam_v."}) {
      *ep->add_inputs() = Spec(std::string(prefix) + "w", DType::F32, {3}, true);
      *ep->add_inputs() = Spec(std::string(prefix) + "b", DType::F32, {2}, true);
    }
  };
  if (o.train_step) {
    proto::EntryPoint *ep = m.add_entry_points();
    ep->set_name("train_step");
    ep->set_symbol("bt_entry_train_step");
    *ep->add_inputs() = Spec("x", DType::F32, {-1, 3});
    scalars_and_state(ep);
    *ep->add_outputs() = Spec("loss", DType::F32, {});
    *ep->add_outputs() = Spec("grad_norm", DType::F32, {});
    *ep->add_outputs() = Spec("lr", DType::F32, {});
  }
  if (o.apply_gradients) {
    proto::EntryPoint *ep = m.add_entry_points();
    ep->set_name("apply_gradients");
    ep->set_symbol("bt_entry_apply_gradients");
    *ep->add_inputs() = Spec("grad.w", DType::F32, {3});
    *ep->add_inputs() = Spec("grad.b", DType::F32, {2});
    scalars_and_state(ep);
    *ep->add_outputs() = Spec("grad_norm", DType::F32, {});
    *ep->add_outputs() = Spec("lr", DType::F32, {});
  }
  ArtifactWriter w(m);
  w.SetKernels(ReadRaw(BT_TEST_TRAINER_KERNELS));
  Tensor wt = MakeF32({3}, {1, 2, 3});
  Tensor bt = MakeF32({2}, {10, 20});
  if (absl::Status s = w.AddWeight("w", wt); !s.ok())
    return s;
  if (absl::Status s = w.AddWeight("b", bt); !s.ok())
    return s;
  return w.Write(path);
}

class TrainerTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_THAT(WriteTrainArtifact(dir.File("model.btart")), IsOk());
    auto m = Model::Open(dir.File("model.btart"));
    ASSERT_TRUE(m.ok()) << m.status();
    model = std::move(*m);
  }
  TempDir dir;
  std::unique_ptr<Model> model;
};

TEST_F(TrainerTest, OwnsCopiesOfTheWeightsAndZeroMoments) {
  auto t = Trainer::Create(*model);
  ASSERT_TRUE(t.ok()) << t.status();
  Trainer &tr = **t;
  EXPECT_EQ(tr.param_names(), (std::vector<std::string>{"w", "b"}));
  EXPECT_EQ(tr.step(), 0);
  EXPECT_EQ(F32Values(*tr.parameter("w")), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(F32Values(*tr.parameter("b")), (std::vector<float>{10, 20}));
  EXPECT_EQ(F32Values(*tr.exp_avg("w")), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(F32Values(*tr.exp_avg_sq("b")), (std::vector<float>{0, 0}));
  EXPECT_EQ(tr.parameter("nope"), nullptr);
  // Writable copies, not views of the (read-only) artifact.
  auto weight = model->artifact().GetWeight("w");
  ASSERT_TRUE(weight.ok());
  EXPECT_NE(weight->data(), tr.parameter("w")->data());
}

TEST_F(TrainerTest, StepsUpdateTheStateInPlace) {
  auto t = Trainer::Create(*model, Schedule(0.5));
  ASSERT_TRUE(t.ok()) << t.status();
  Trainer &tr = **t;
  const void *w_before = tr.parameter("w")->data();
  TensorMap batch;
  batch.emplace("x", MakeF32({2, 3}, {1, 0, 0, 0, 1, 1}));
  auto r = tr.Step(batch);
  ASSERT_TRUE(r.ok()) << r.status();
  // loss = x·w summed + b0 = 1 + (2 + 3) + 10; g.w = (1, 1, 1), g.b = (1, 2);
  // lr = 0.5 · step 1.
  EXPECT_EQ(r->step, 1);
  EXPECT_FLOAT_EQ(r->loss, 16.0f);
  EXPECT_FLOAT_EQ(r->grad_norm, 6.0f);
  EXPECT_FLOAT_EQ(r->lr, 0.5f);
  EXPECT_EQ(tr.step(), 1);
  EXPECT_EQ(tr.parameter("w")->data(), w_before);
  EXPECT_EQ(F32Values(*tr.parameter("w")), (std::vector<float>{0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(F32Values(*tr.parameter("b")), (std::vector<float>{9.5f, 19.0f}));
  EXPECT_EQ(F32Values(*tr.exp_avg("b")), (std::vector<float>{1, 2}));
  EXPECT_EQ(F32Values(*tr.exp_avg_sq("b")), (std::vector<float>{1, 4}));
  // Step 2 passes step 2 and the schedule.
  tr.set_schedule(Schedule(0.5, 3));
  auto r2 = tr.Step(batch);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->step, 2);
  EXPECT_FLOAT_EQ(r2->lr, 0.5f * 2 + 3);
  EXPECT_EQ(F32Values(*tr.exp_avg("b")), (std::vector<float>{2, 4}));
  // A bad batch changes nothing.
  TensorMap bad;
  bad.emplace("x", MakeF32({1, 2}, {1, 2}));
  EXPECT_THAT(tr.Step(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "input 'x'"));
  TensorMap extra;
  extra.emplace("x", MakeF32({1, 3}, {1, 2, 3}));
  extra.emplace("labels", MakeF32({1}, {0}));
  EXPECT_THAT(tr.Step(extra).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "unexpected input 'labels'"));
  EXPECT_EQ(tr.step(), 2);
  EXPECT_EQ(F32Values(*tr.exp_avg("b")), (std::vector<float>{2, 4}));
}

TEST_F(TrainerTest, AppliesGivenGradients) {
  auto t = Trainer::Create(*model, Schedule(2.0));
  ASSERT_TRUE(t.ok());
  Trainer &tr = **t;
  TensorMap grads;
  grads.emplace("grad.w", MakeF32({3}, {1, -1, 0}));
  grads.emplace("grad.b", MakeF32({2}, {0.5f, 0}));
  grads.emplace("grad.other", MakeF32({1}, {7}));  // ignored
  auto r = tr.ApplyGradients(grads);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(std::isnan(r->loss));
  EXPECT_FLOAT_EQ(r->grad_norm, 2.5f);
  EXPECT_FLOAT_EQ(r->lr, 2.0f);
  EXPECT_EQ(F32Values(*tr.parameter("w")), (std::vector<float>{-1, 4, 3}));
  EXPECT_EQ(F32Values(*tr.parameter("b")), (std::vector<float>{9, 20}));
  TensorMap missing;
  missing.emplace("grad.w", MakeF32({3}, {1, 1, 1}));
  EXPECT_THAT(tr.ApplyGradients(missing).status(),
              StatusIs(absl::StatusCode::kNotFound, "no gradient 'grad.b'"));
  EXPECT_EQ(tr.step(), 1);
}

TEST_F(TrainerTest, SetsParametersAllOrNothing) {
  auto t = Trainer::Create(*model);
  ASSERT_TRUE(t.ok());
  Trainer &tr = **t;
  TensorMap p;
  p.emplace("w", MakeF32({3}, {7, 8, 9}));
  p.emplace("b", MakeF32({3}, {1, 2, 3}));  // wrong shape
  EXPECT_THAT(tr.SetParameters(p),
              StatusIs(absl::StatusCode::kInvalidArgument, "parameter 'b' has shape [3]"));
  EXPECT_EQ(F32Values(*tr.parameter("w")), (std::vector<float>{1, 2, 3}));
  TensorMap only_w;
  only_w.emplace("w", MakeF32({3}, {7, 8, 9}));
  only_w.emplace("unused", MakeF32({1}, {0}));
  EXPECT_THAT(tr.SetParameters(only_w),
              StatusIs(absl::StatusCode::kNotFound, "missing parameter 'b'"));
  std::vector<std::string> ignored;
  EXPECT_THAT(tr.SetParameters(only_w, /*require_all=*/false, &ignored), IsOk());
  EXPECT_EQ(ignored, (std::vector<std::string>{"unused"}));
  EXPECT_EQ(F32Values(*tr.parameter("w")), (std::vector<float>{7, 8, 9}));
  TensorMap views = *tr.Parameters();
  EXPECT_EQ(views.at("w").data(), tr.parameter("w")->data());
}

TEST_F(TrainerTest, SavesCheckpointDirectoriesAtomically) {
  auto t = Trainer::Create(*model, Schedule(1.0));
  ASSERT_TRUE(t.ok());
  Trainer &tr = **t;
  WriteRaw(dir.File("config.yaml"), "name: fake\n");
  std::map<std::string, Tensor> extra;
  extra.emplace("unused.weight", MakeF32({2}, {5, 6}));
  const std::string out = dir.File("ckpt");
  ASSERT_THAT(tr.SaveCheckpoint(out, Write(dir.File("config.yaml"), &extra)),
              IsOk());
  EXPECT_EQ(ReadRaw(out + "/config.yaml"), "name: fake\n");
  auto f = SafetensorsFile::Open(out + "/model.safetensors");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->names(), (std::vector<std::string>{"b", "unused.weight", "w"}));
  EXPECT_EQ(F32Values(*f->Get("w")), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(F32Values(*f->Get("unused.weight")), (std::vector<float>{5, 6}));

  // Overwriting swaps the directory: a stale file disappears, nothing is
  // left beside it.
  WriteRaw(out + "/stale", "x");
  TensorMap grads;
  grads.emplace("grad.w", MakeF32({3}, {1, 1, 1}));
  grads.emplace("grad.b", MakeF32({2}, {0, 0}));
  ASSERT_TRUE(tr.ApplyGradients(grads).ok());
  ASSERT_THAT(tr.SaveCheckpoint(out, Write(dir.File("config.yaml"))), IsOk());
  EXPECT_FALSE(std::filesystem::exists(out + "/stale"));
  auto g = SafetensorsFile::Open(out + "/model.safetensors");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(F32Values(*g->Get("w")), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(g->metadata().at("step"), "1");
  int entries = 0;
  for (const auto &e : std::filesystem::directory_iterator(dir.path()))
    entries += e.path().filename().string().find(".tmp-") != std::string::npos;
  EXPECT_EQ(entries, 0);

  // A config.json keeps its name; a file in the way is an error.
  WriteRaw(dir.File("c.json"), "{}");
  ASSERT_THAT(tr.SaveCheckpoint(dir.File("ckpt2"), Write(dir.File("c.json"))),
              IsOk());
  EXPECT_EQ(ReadRaw(dir.File("ckpt2/config.json")), "{}");
  WriteRaw(dir.File("file"), "x");
  EXPECT_THAT(tr.SaveCheckpoint(dir.File("file")),
              StatusIs(absl::StatusCode::kInvalidArgument, "is not a directory"));
  std::map<std::string, Tensor> clash;
  clash.emplace("w", MakeF32({3}, {0, 0, 0}));
  EXPECT_THAT(tr.SaveCheckpoint(dir.File("ckpt3"), Write("", &clash)),
              StatusIs(absl::StatusCode::kInvalidArgument, "is a trained parameter"));
  EXPECT_FALSE(std::filesystem::exists(dir.File("ckpt3")));
}

// Issue 14 (data loss): an existing directory is swapped out and deleted only
// when it is a checkpoint; `train-step -o .` or `-o ~` replaced the user's
// whole directory.
TEST_F(TrainerTest, SaveCheckpointNeverReplacesADirectoryThatIsNotACheckpoint) {
  auto t = Trainer::Create(*model, Schedule(1.0));
  ASSERT_TRUE(t.ok());
  Trainer &tr = **t;
  const std::string mine = dir.File("mine");
  ASSERT_TRUE(std::filesystem::create_directories(mine + "/src"));
  WriteRaw(mine + "/notes.txt", "keep me");
  EXPECT_THAT(tr.SaveCheckpoint(mine),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "refusing to replace " + mine +
                           ": it is not empty (notes.txt, src) and is not a "
                           "checkpoint directory"));
  EXPECT_EQ(ReadRaw(mine + "/notes.txt"), "keep me");
  EXPECT_TRUE(std::filesystem::is_directory(mine + "/src"));
  // The working directory (or one containing it), even if a checkpoint.
  WriteRaw(mine + "/model.safetensors", "x");
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(mine + "/src");
  const absl::Status dot = tr.SaveCheckpoint(".");
  const absl::Status parent = tr.SaveCheckpoint(mine);
  std::filesystem::current_path(cwd);
  EXPECT_THAT(dot, StatusIs(absl::StatusCode::kFailedPrecondition,
                            "refusing to replace .: it is the working directory or contains it"));
  EXPECT_THAT(parent, StatusIs(absl::StatusCode::kFailedPrecondition, "it is the working directory"));
  EXPECT_EQ(ReadRaw(mine + "/notes.txt"), "keep me");
  // An empty directory is fine.
  ASSERT_TRUE(std::filesystem::create_directories(dir.File("empty")));
  EXPECT_THAT(tr.SaveCheckpoint(dir.File("empty")), IsOk());
  EXPECT_TRUE(std::filesystem::exists(dir.File("empty/model.safetensors")));
}

TEST_F(TrainerTest, SavesAndLoadsTheOptimizerState) {
  auto t = Trainer::Create(*model, Schedule(0.25, 7, 9));
  ASSERT_TRUE(t.ok());
  TensorMap grads;
  grads.emplace("grad.w", MakeF32({3}, {1, 2, 3}));
  grads.emplace("grad.b", MakeF32({2}, {4, 5}));
  ASSERT_TRUE((*t)->ApplyGradients(grads).ok());
  ASSERT_THAT((*t)->SaveState(dir.File("state.safetensors")), IsOk());

  auto u = Trainer::Create(*model);
  ASSERT_TRUE(u.ok());
  ASSERT_THAT((*u)->LoadState(dir.File("state.safetensors")), IsOk());
  EXPECT_EQ((*u)->step(), 1);
  EXPECT_EQ((*u)->schedule().peak_lr, 0.25);
  EXPECT_EQ((*u)->schedule().warmup_steps, 7);
  EXPECT_EQ((*u)->schedule().total_steps, 9);
  for (const std::string &n : {"w", "b"}) {
    EXPECT_EQ(F32Values(*(*u)->parameter(n)), F32Values(*(*t)->parameter(n)));
    EXPECT_EQ(F32Values(*(*u)->exp_avg(n)), F32Values(*(*t)->exp_avg(n)));
    EXPECT_EQ(F32Values(*(*u)->exp_avg_sq(n)), F32Values(*(*t)->exp_avg_sq(n)));
  }
  // The next step continues the count: lr = 0.25 · 2 + 7 + 9000.
  auto r = (*u)->ApplyGradients(grads);
  ASSERT_TRUE(r.ok());
  EXPECT_FLOAT_EQ(r->lr, 9007.5f);

  std::map<std::string, Tensor> partial;
  partial.emplace("param.w", MakeF32({3}, {0, 0, 0}));
  ASSERT_TRUE(WriteSafetensors(dir.File("partial.safetensors"), partial).ok());
  EXPECT_THAT((*u)->LoadState(dir.File("partial.safetensors")),
              StatusIs(absl::StatusCode::kNotFound, "no tensor 'adam_m.b'"));
  EXPECT_EQ((*u)->step(), 2);
}

TEST(Trainer, NeedsATrainingEntryPoint) {
  TempDir dir;
  ASSERT_THAT(WriteTrainArtifact(dir.File("a.btart"), Entries(false, false)),
              IsOk());
  auto m = Model::Open(dir.File("a.btart"));
  ASSERT_TRUE(m.ok());
  EXPECT_THAT(Trainer::Create(**m).status(),
              StatusIs(absl::StatusCode::kNotFound, "no 'train_step' or 'apply_gradients'"));
  ASSERT_THAT(WriteTrainArtifact(dir.File("b.btart"), Entries(false, true)), IsOk());
  auto mb = Model::Open(dir.File("b.btart"));
  ASSERT_TRUE(mb.ok());
  auto t = Trainer::Create(**mb);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT((*t)->Step({}).status(),
              StatusIs(absl::StatusCode::kNotFound, "no 'train_step'"));
}

TEST(TrainStepCommand, ParsesArguments) {
  auto o = ParseTrainStepArgs({"--inputs", "b.st", "-o", "out", "--lr", "6e-4",
                               "--warmup-steps", "3000", "--total-steps", "572000",
                               "--checkpoint", "ck", "--state-out", "s.st",
                               "--step-outputs", "o.st", "--config-file", "c.yaml"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->inputs_path, "b.st");
  EXPECT_EQ(o->output_dir, "out");
  EXPECT_DOUBLE_EQ(o->schedule.peak_lr, 6e-4);
  EXPECT_EQ(o->schedule.warmup_steps, 3000);
  EXPECT_EQ(o->schedule.total_steps, 572000);
  EXPECT_EQ(o->checkpoint_dir, "ck");
  EXPECT_EQ(o->state_path, "s.st");
  EXPECT_EQ(o->outputs_path, "o.st");
  EXPECT_EQ(o->config_path, "c.yaml");
  for (std::vector<std::string> bad :
       {std::vector<std::string>{"-o", "out"},
        {"--inputs", "a", "--grads", "b", "-o", "out"},
        {"--inputs", "a"},
        {"--inputs", "a", "-o", "out", "--lr", "-1"},
        {"--inputs", "a", "-o", "out", "--warmup-steps", "x"},
        {"--inputs", "a", "-o", "out", "--bogus", "1"},
        {"--inputs"}})
    EXPECT_FALSE(ParseTrainStepArgs(bad).ok());
}

TEST(TrainStepCommand, RunsThroughTheLauncher) {
  TempDir dir;
  ASSERT_THAT(WriteTrainArtifact(dir.File("m.btart")), IsOk());
  std::map<std::string, Tensor> grads;
  grads.emplace("grad.w", MakeF32({3}, {1, 1, 1}));
  grads.emplace("grad.b", MakeF32({2}, {1, 1}));
  ASSERT_TRUE(WriteSafetensors(dir.File("g.safetensors"), grads).ok());
  std::map<std::string, Tensor> batch;
  batch.emplace("x", MakeF32({1, 3}, {1, 1, 1}));
  ASSERT_TRUE(WriteSafetensors(dir.File("x.safetensors"), batch).ok());
  auto run = [&](std::vector<std::string> args, std::string *log = nullptr) {
    std::vector<std::string> all = {"bt-launcher", "--artifact", dir.File("m.btart")};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<const char *> argv;
    for (auto &s : all)
      argv.push_back(s.c_str());
    std::ostringstream out, err;
    int rc = LauncherMain(static_cast<int>(argv.size()), argv.data(), out, err);
    if (log)
      *log = out.str() + err.str();
    return rc;
  };
  std::string log;
  EXPECT_EQ(run({"train-step", "--grads", dir.File("g.safetensors"), "--lr", "0.5",
                 "-o", dir.File("out"), "--step-outputs", dir.File("o.safetensors")},
                &log),
            0)
      << log;
  EXPECT_NE(log.find("step 1: grad_norm = 5, lr = 0.5"), std::string::npos) << log;
  auto f = SafetensorsFile::Open(dir.File("out/model.safetensors"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(F32Values(*f->Get("w")), (std::vector<float>{0.5f, 1.5f, 2.5f}));
  auto o = SafetensorsFile::Open(dir.File("o.safetensors"));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->names(), (std::vector<std::string>{"grad_norm", "lr", "step"}));
  EXPECT_EQ(run({"train-step", "--inputs", dir.File("x.safetensors"), "-o",
                 dir.File("out2")},
                &log),
            0)
      << log;
  EXPECT_NE(log.find("step 1: loss = 16, grad_norm = 6, lr = 0.001"), std::string::npos)
      << log;
  EXPECT_EQ(run({"train-step", "--inputs", dir.File("g.safetensors"), "-o",
                 dir.File("out3")},
                &log),
            1);
  EXPECT_NE(log.find("no tensor 'x'"), std::string::npos) << log;
  EXPECT_EQ(run({"train-step", "-o", dir.File("out4")}), 2);
}

} // namespace
} // namespace bt::rt
