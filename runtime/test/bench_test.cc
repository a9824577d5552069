//===- bench_test.cc ------------------------------------------------------===//
//
// The bench harness on the toy kernels (test_kernels.c): settings, inputs,
// timing loop, table, CSV and the missing-baseline path. No timing is
// asserted.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/bench.h"

#include <sstream>

#include "bt/runtime/artifact.h"
#include "bt/runtime/config.h"
#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;
using ::testing::HasSubstr;

proto::ModelConfig VanillaConfig() {
  auto c = LoadModelConfig(testing::FixturesDir() + "/vanilla_tiny");
  EXPECT_THAT(c.status(), IsOk());
  return c.ok() ? *c : proto::ModelConfig();
}

proto::ModelConfig BlockConfig() {
  auto c = LoadModelConfig(testing::FixturesDir() + "/block_tiny");
  EXPECT_THAT(c.status(), IsOk());
  return c.ok() ? *c : proto::ModelConfig();
}

class BenchTest : public ::testing::Test {
protected:
  void SetUp() override {
    // The toy artifact's eval takes [B, T] ids: give it a vanilla config.
    ASSERT_THAT(testing::WriteToyArtifact(dir_.File("toy.btart")), IsOk());
    auto toy = Artifact::Open(dir_.File("toy.btart"));
    ASSERT_THAT(toy.status(), IsOk());
    proto::Manifest m = (*toy)->manifest();
    *m.mutable_config() = VanillaConfig();
    m.clear_weights();
    m.clear_kernels();
    m.clear_weights_data();
    m.clear_tokenizer();
    ArtifactWriter w(m);
    w.SetKernels(std::string((*toy)->kernels()));
    auto weight = (*toy)->GetWeight("w");
    ASSERT_THAT(weight.status(), IsOk());
    ASSERT_THAT(w.AddWeight("w", *weight), IsOk());
    ASSERT_THAT(w.Write(dir_.File("vanilla.btart")), IsOk());
    auto model = Model::Open(dir_.File("vanilla.btart"));
    ASSERT_THAT(model.status(), IsOk());
    model_ = std::move(*model);
  }
  testing::TempDir dir_;
  std::unique_ptr<Model> model_;
};

TEST(BenchMedian, OddEvenEmpty) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({}), 0);
}

TEST(BenchSettings, Forward) {
  auto s = ForwardSettings(BlockConfig(), {1, 8}, 512);
  ASSERT_THAT(s.status(), IsOk());
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].name, "forward");
  EXPECT_EQ((*s)[0].batch, 1);
  EXPECT_EQ((*s)[1].batch, 8);
  EXPECT_EQ((*s)[1].prompt_tokens, 512);
  EXPECT_EQ((*s)[1].gen_tokens, 0);
  EXPECT_THAT(ForwardSettings(BlockConfig(), {1}, 6).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "multiple of the block length L_B = 4"));
  EXPECT_THAT(ForwardSettings(BlockConfig(), {1}, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "at least 2 blocks"));
  EXPECT_THAT(ForwardSettings(BlockConfig(), {0}, 8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "batch size 0"));
  EXPECT_THAT(ForwardSettings(BlockConfig(), {}, 8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "no batch size"));
  EXPECT_THAT(ForwardSettings(VanillaConfig(), {2}, 5).status(), IsOk());
}

TEST(BenchInputs, Shapes) {
  BenchSetting s;
  s.batch = 2;
  s.prompt_tokens = 12;
  auto block = ForwardInputs(BlockConfig(), s, 7);
  ASSERT_THAT(block.status(), IsOk());
  EXPECT_EQ(block->at("input_ids").shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(block->at("attention_mask").shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(block->at("block_attention_mask").shape(), (std::vector<int64_t>{2, 3}));
  for (int64_t id : testing::I64Values(block->at("input_ids"))) {
    EXPECT_GE(id, 2);
    EXPECT_LT(id, 512);
  }
  for (int64_t m : testing::I64Values(block->at("block_attention_mask")))
    EXPECT_EQ(m, 1);
  auto again = ForwardInputs(BlockConfig(), s, 7);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(testing::I64Values(block->at("input_ids")),
            testing::I64Values(again->at("input_ids")));
  auto vanilla = ForwardInputs(VanillaConfig(), s, 7);
  ASSERT_THAT(vanilla.status(), IsOk());
  EXPECT_EQ(vanilla->at("input_ids").shape(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(vanilla->count("block_attention_mask"), 0u);
}

TEST_F(BenchTest, BtRunnerRunsTheForward) {
  BtRunner bt(*model_, 0);
  EXPECT_EQ(bt.impl(), "bt");
  EXPECT_THAT(bt.Call().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "before Prepare"));
  BenchSetting s;
  s.batch = 2;
  s.prompt_tokens = 6;
  ASSERT_THAT(bt.Prepare(s), IsOk());
  EXPECT_EQ(bt.inputs().at("input_ids").shape(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(bt.inputs().count("block_attention_mask"), 0u); // not an eval input
  auto t = bt.Call();
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_GE(*t, 0);
  ASSERT_EQ(bt.outputs().count("logits"), 1u);
  EXPECT_EQ(bt.outputs().at("logits").shape(), (std::vector<int64_t>{2, 6, 5}));
  auto peak = bt.PeakRssMb();
  ASSERT_THAT(peak.status(), IsOk());
  EXPECT_GT(*peak, 0);

  s.name = "decode-heavy";
  EXPECT_THAT(bt.Prepare(s), StatusIs(absl::StatusCode::kUnimplemented, "decode-heavy"));
}

/// A runner that fails its second call (for RunSettings' error handling).
class FlakyRunner : public BenchRunner {
public:
  std::string impl() const override { return "flaky"; }
  absl::Status Prepare(const BenchSetting &) override { return absl::OkStatus(); }
  absl::StatusOr<double> Call() override {
    if (++calls_ == 2)
      return absl::InternalError("flaky broke");
    return 0.5;
  }
  absl::StatusOr<double> PeakRssMb() override { return 1.0; }
  int calls_ = 0;
};

TEST_F(BenchTest, RunSettingsTakesTurnsAndDropsAFailingBaseline) {
  BenchOptions opts;
  opts.settings = *ForwardSettings(model_->config(), {1, 2}, 4);
  opts.iters = 3;
  opts.warmup = 1;
  opts.switch_pause = 0.001;
  BtRunner bt(*model_, 0);
  FlakyRunner flaky;
  std::ostringstream progress;
  absl::Status secondary;
  auto r = RunSettings({&bt, &flaky}, opts, "m", progress, &secondary);
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->size(), 2u);
  ASSERT_EQ((*r)[0].size(), 2u); // bt: both settings
  EXPECT_EQ((*r)[1].size(), 0u); // flaky: dropped during the first
  EXPECT_THAT(secondary, StatusIs(absl::StatusCode::kInternal, "flaky broke"));
  const BenchResult &b = (*r)[0][1];
  EXPECT_EQ(b.impl, "bt");
  EXPECT_EQ(b.model, "m");
  EXPECT_EQ(b.tokens, 8);
  EXPECT_EQ(b.run_seconds.size(), 3u);
  EXPECT_EQ(b.seconds, Median(b.run_seconds));
  EXPECT_GT(b.tokens_per_s, 0);
  EXPECT_THAT(progress.str(), HasSubstr("forward batch 1 x 4 tokens:\n  warmup 1/1: bt "));
  EXPECT_THAT(progress.str(), HasSubstr(" flaky 0.5s\n  call 1/3: bt "));
  EXPECT_THAT(progress.str(), HasSubstr("[flaky] failed: flaky broke; continuing without it"));

  // A failure of the first runner is the result.
  FlakyRunner first;
  EXPECT_THAT(RunSettings({&first, &bt}, opts, "m", progress).status(),
              StatusIs(absl::StatusCode::kInternal, "flaky broke"));
}

TEST_F(BenchTest, MissingInterpreterIsUnavailable) {
  BenchOptions opts;
  opts.python = dir_.File("no-python");
  opts.torch_script = dir_.File("missing.py");
  std::ostringstream progress;
  EXPECT_THAT(TorchRunner::Start(*model_, opts, progress).status(),
              StatusIs(absl::StatusCode::kUnavailable, "missing.py"));
  testing::WriteRaw(opts.torch_script, "");
  EXPECT_THAT(TorchRunner::Start(*model_, opts, progress).status(),
              StatusIs(absl::StatusCode::kUnavailable, "no Python interpreter"));
  // A bare name is looked up in $PATH.
  opts.python = "bt-no-such-python-anywhere";
  EXPECT_THAT(TorchRunner::Start(*model_, opts, progress).status(),
              StatusIs(absl::StatusCode::kUnavailable,
                       "cannot run bt-no-such-python-anywhere"));
  // An interpreter that exits at once.
  opts.python = "/bin/true";
  EXPECT_THAT(TorchRunner::Start(*model_, opts, progress).status(),
              StatusIs(absl::StatusCode::kUnavailable, "exited before it was ready"));
}

TEST_F(BenchTest, CommandWithoutBaseline) {
  BenchOptions opts;
  opts.settings = *ForwardSettings(model_->config(), {1, 3}, 4);
  opts.iters = 1;
  opts.baseline = "none";
  opts.csv_path = dir_.File("out.csv");
  std::ostringstream out, err;
  ASSERT_THAT(RunBenchCommand(*model_, opts, out, err), IsOk());
  EXPECT_THAT(out.str(), HasSubstr("bench: model vanilla_tiny, device cpu"));
  EXPECT_THAT(out.str(), HasSubstr("setting    batch  prompt"));
  const std::string csv = testing::ReadRaw(opts.csv_path);
  EXPECT_THAT(csv, HasSubstr("setting,device,model,batch,tokens,seconds,"
                             "tokens_per_s,impl,ratio_vs_torch,peak_rss_mb\n"));
  EXPECT_THAT(csv, HasSubstr("forward,cpu,vanilla_tiny,3,12,"));
  EXPECT_THAT(csv, HasSubstr(",bt,,"));

  opts.device = "cuda";
  EXPECT_THAT(RunBenchCommand(*model_, opts, out, err),
              StatusIs(absl::StatusCode::kUnimplemented, "--device cuda"));
}

TEST(BenchTable, RatioAndCsv) {
  BenchResult bt, torch;
  bt.setting.batch = torch.setting.batch = 8;
  bt.setting.prompt_tokens = torch.setting.prompt_tokens = 512;
  bt.impl = "bt";
  torch.impl = "torch";
  bt.device = torch.device = "cpu";
  bt.model = torch.model = "m,odd";
  bt.tokens = torch.tokens = 4096;
  bt.seconds = 2;
  bt.tokens_per_s = 2048;
  torch.seconds = 4;
  torch.tokens_per_s = 1024;
  bt.peak_rss_mb = 100;
  torch.peak_rss_mb = 300;
  const std::string table = FormatBenchTable({bt}, {torch});
  EXPECT_THAT(table, HasSubstr("2048.0"));
  EXPECT_THAT(table, HasSubstr("1024.0"));
  EXPECT_THAT(table, HasSubstr("2.00x"));
  testing::TempDir dir;
  ASSERT_THAT(WriteBenchCsv(dir.File("b.csv"), {bt}, {torch}), IsOk());
  EXPECT_EQ(testing::ReadRaw(dir.File("b.csv")),
            "setting,device,model,batch,tokens,seconds,tokens_per_s,impl,"
            "ratio_vs_torch,peak_rss_mb\n"
            "forward,cpu,\"m,odd\",8,4096,2.000000,2048.00,bt,2.0000,100.0\n"
            "forward,cpu,\"m,odd\",8,4096,4.000000,1024.00,torch,1.0000,300.0\n");
}

} // namespace
} // namespace bt::rt
