//===- bench_test.cc ------------------------------------------------------===//
//
// The bench harness on the toy kernels (test_kernels.c): settings, inputs,
// timing loop, table, CSV and the missing-baseline path. No timing is
// asserted.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/tooling/bench.h"

#include <sstream>

#include "bt/runtime/model/artifact.h"
#include "bt/runtime/model/config.h"
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
  EXPECT_THAT(bt.Call(nullptr).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "before Prepare"));
  BenchSetting s;
  s.batch = 2;
  s.prompt_tokens = 6;
  ASSERT_THAT(bt.Prepare(s), IsOk());
  EXPECT_EQ(bt.inputs().at("input_ids").shape(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(bt.inputs().count("block_attention_mask"), 0u); // not an eval input
  int progress_calls = 0;
  auto t = bt.Call([&](int64_t, int64_t) { ++progress_calls; });
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_GE(t->seconds, 0);
  EXPECT_EQ(t->prefill_seconds, -1);
  EXPECT_EQ(t->kv_bytes_per_sample, 0);
  EXPECT_EQ(progress_calls, 0); // a forward reports no progress
  ASSERT_EQ(bt.outputs().count("logits"), 1u);
  EXPECT_EQ(bt.outputs().at("logits").shape(), (std::vector<int64_t>{2, 6, 5}));
  auto peak = bt.PeakRssMb();
  ASSERT_THAT(peak.status(), IsOk());
  EXPECT_GT(*peak, 0);

  auto none = bt.GeneratedTokens();
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_TRUE(none->empty());

  // The toy model has no generation entry points.
  s.name = "decode-heavy";
  s.gen_tokens = 4;
  EXPECT_THAT(bt.Prepare(s), StatusIs(absl::StatusCode::kNotFound,
                                      "no 'prefill' entry point for the "
                                      "decode-heavy setting"));
  s.name = "sideways";
  EXPECT_THAT(bt.Prepare(s), StatusIs(absl::StatusCode::kInvalidArgument,
                                      "unknown setting 'sideways'"));
}

/// A runner that fails its second call (for RunSettings' error handling).
class FlakyRunner : public BenchRunner {
public:
  std::string impl() const override { return "flaky"; }
  absl::Status Prepare(const BenchSetting &) override { return absl::OkStatus(); }
  absl::StatusOr<CallStats> Call(const ProgressFn &) override {
    if (++calls_ == 2)
      return absl::InternalError("flaky broke");
    CallStats s;
    s.seconds = 0.5;
    return s;
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

/// A runner whose calls all succeed; without "train" when `no_train`.
class SteadyRunner : public BenchRunner {
public:
  explicit SteadyRunner(bool no_train) : no_train_(no_train) {}
  std::string impl() const override { return no_train_ ? "torch" : "bt"; }
  absl::Status Prepare(const BenchSetting &s) override {
    prepared_.push_back(s.name);
    return absl::OkStatus();
  }
  absl::StatusOr<CallStats> Call(const ProgressFn &) override {
    ++calls_;
    CallStats s;
    s.seconds = 0.25;
    return s;
  }
  absl::StatusOr<double> PeakRssMb() override { return 1.0; }
  bool Runs(const BenchSetting &s) const override {
    return !(no_train_ && s.name == kTrainSetting);
  }
  bool no_train_;
  int calls_ = 0;
  std::vector<std::string> prepared_;
};

TEST(BenchRunSettings, SkipsTheSettingsARunnerDoesNotRun) {
  BenchOptions opts;
  BenchSetting forward, train;
  forward.prompt_tokens = train.prompt_tokens = 8;
  train.name = kTrainSetting;
  opts.settings = {train, forward};
  opts.iters = 2;
  opts.warmup = 1;
  opts.switch_pause = 0;
  SteadyRunner bt(false), torch(true);
  std::ostringstream progress;
  absl::Status secondary;
  auto r = RunSettings({&bt, &torch}, opts, "m", progress, &secondary);
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_THAT(secondary, IsOk());
  ASSERT_EQ((*r)[0].size(), 2u);
  ASSERT_EQ((*r)[1].size(), 1u);
  EXPECT_EQ((*r)[1][0].setting.name, kForwardSetting);
  EXPECT_EQ(torch.prepared_, std::vector<std::string>({"forward"}));
  EXPECT_EQ(torch.calls_, 3);
  EXPECT_EQ(bt.calls_, 6);
  // The table: the train row has no torch figures.
  EXPECT_THAT(FormatBenchTable((*r)[0], (*r)[1]),
              ::testing::ContainsRegex("train +1 +8 +0 +32\\.0 +- +-"));
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
  EXPECT_THAT(out.str(), HasSubstr("setting        batch  prompt"));
  EXPECT_THAT(out.str(), ::testing::Not(HasSubstr("generation")));
  const std::string csv = testing::ReadRaw(opts.csv_path);
  EXPECT_THAT(csv, HasSubstr("setting,device,model,batch,tokens,seconds,"
                             "tokens_per_s,impl,ratio_vs_torch,peak_rss_mb,"
                             "prompt_tokens,gen_tokens,total_tokens,"
                             "total_tokens_per_s,prefill_seconds,"
                             "decode_tokens_per_s,kv_bytes_per_sample,"
                             "planned_kv_bytes_per_sample,max_batch\n"));
  EXPECT_THAT(csv, HasSubstr("forward,cpu,vanilla_tiny,3,12,"));
  EXPECT_THAT(csv, HasSubstr(",bt,,"));
  EXPECT_THAT(csv, HasSubstr(",4,0,12,")); // prompt, gen, total tokens

  opts.progress = "sometimes";
  EXPECT_THAT(RunBenchCommand(*model_, opts, out, err),
              StatusIs(absl::StatusCode::kInvalidArgument, "--progress sometimes"));
  opts.progress = "dots";

  opts.device = "cuda";
  EXPECT_THAT(RunBenchCommand(*model_, opts, out, err),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "bench --device cuda: the artifact runs on 'cpu'"));
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
  bt.total_tokens = torch.total_tokens = 4096;
  bt.total_tokens_per_s = 2048;
  torch.total_tokens_per_s = 1024;
  ASSERT_THAT(WriteBenchCsv(dir.File("b.csv"), {bt}, {torch}), IsOk());
  EXPECT_EQ(testing::ReadRaw(dir.File("b.csv")),
            "setting,device,model,batch,tokens,seconds,tokens_per_s,impl,"
            "ratio_vs_torch,peak_rss_mb,prompt_tokens,gen_tokens,total_tokens,"
            "total_tokens_per_s,prefill_seconds,decode_tokens_per_s,"
            "kv_bytes_per_sample,planned_kv_bytes_per_sample,max_batch\n"
            "forward,cpu,\"m,odd\",8,4096,2.000000,2048.00,bt,2.0000,100.0,"
            "512,0,4096,2048.00,,,,,0\n"
            "forward,cpu,\"m,odd\",8,4096,4.000000,1024.00,torch,1.0000,300.0,"
            "512,0,4096,1024.00,,,,,0\n");
}

TEST(BenchTable, GenerationColumnsAndTokensCheck) {
  BenchResult bt, torch;
  for (BenchResult *r : {&bt, &torch}) {
    r->setting.name = "prefill-heavy";
    r->setting.batch = 2;
    r->setting.prompt_tokens = 16;
    r->setting.gen_tokens = 3;
    r->setting.max_batch = true;
    r->device = "cpu";
    r->model = "m";
    r->tokens = 6;
    r->total_tokens = 38;
  }
  bt.impl = "bt";
  torch.impl = "torch";
  bt.setting.planned_kv_bytes_per_sample = torch.setting.planned_kv_bytes_per_sample =
      5 << 20;
  bt.seconds = 0.5;
  bt.tokens_per_s = 12;
  bt.total_tokens_per_s = 76;
  bt.prefill_seconds = 0.25;
  bt.decode_seconds = 0.25;
  bt.decode_tokens_per_s = 24;
  bt.kv_bytes_per_sample = 3 << 20;
  torch.seconds = 1;
  torch.tokens_per_s = 6;
  torch.total_tokens_per_s = 38;
  torch.prefill_seconds = 0.5;
  torch.decode_seconds = 0.5;
  torch.decode_tokens_per_s = 12;
  torch.kv_bytes_per_sample = 6144;
  bt.new_tokens = {5, 6, 7, 8, 9, 10};
  torch.new_tokens = {5, 6, 7, 8, 4, 10};
  const std::string table = FormatBenchTable({bt}, {torch});
  EXPECT_THAT(table, HasSubstr("prefill-heavy     2*      16      3         12.0"
                               "          6.0     2.00x    0.5000    1.0000"));
  EXPECT_THAT(table, HasSubstr("generation     batch  prompt    gen  bt pref s"));
  // prefill s bt / torch, decode tok/s bt / torch, KV per sample plan / bt /
  // torch.
  EXPECT_THAT(table, HasSubstr("prefill-heavy     2*      16      3     0.2500"
                               "     0.5000        24.0        12.0    5.00 MiB"
                               "    3.00 MiB    6.00 KiB\n"));
  EXPECT_THAT(table, HasSubstr("generated tokens (batch x gen) / call"));
  EXPECT_THAT(table, HasSubstr("*: the planned max batch"));
  EXPECT_EQ(FormatTokensCheck({bt}, {torch}),
            "tokens check prefill-heavy batch 2: 1/2 rows identical (row 1 "
            "first differs at token 1)\n");
  torch.new_tokens = bt.new_tokens;
  EXPECT_EQ(FormatTokensCheck({bt}, {torch}),
            "tokens check prefill-heavy batch 2: 2/2 rows identical\n");
  EXPECT_EQ(FormatTokensCheck({bt}, {}), "");
  testing::TempDir dir;
  ASSERT_THAT(WriteBenchCsv(dir.File("g.csv"), {bt}, {torch}), IsOk());
  EXPECT_THAT(testing::ReadRaw(dir.File("g.csv")),
              HasSubstr("prefill-heavy,cpu,m,2,6,0.500000,12.00,bt,2.0000,0.0,"
                        "16,3,38,76.00,0.250000,24.00,3145728,5242880,1\n"));
  // Without a plan the planned column is empty ("-" in the table).
  bt.setting.planned_kv_bytes_per_sample = 0;
  ASSERT_THAT(WriteBenchCsv(dir.File("g.csv"), {bt}, {}), IsOk());
  EXPECT_THAT(testing::ReadRaw(dir.File("g.csv")),
              HasSubstr(",0.250000,24.00,3145728,,1\n"));
  EXPECT_THAT(FormatBenchTable({bt}, {}),
              HasSubstr("24.0           -           -    3.00 MiB           -\n"));
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(int64_t{5} << 30), "5.00 GiB");
}

// bt-run fills BenchCommandOptions in process: typed fields directly, texts
// through SetBenchOption; FinishBenchCommandOptions checks both alike.
TEST(BenchCommand, OptionsWithoutArgv) {
  BenchCommandOptions o;
  o.bench.iters = 2;
  ASSERT_THAT(SetBenchOption("--batch", "1,max", o), IsOk());
  ASSERT_THAT(SetBenchOption("--memory", "2MiB", o), IsOk());
  ASSERT_THAT(FinishBenchCommandOptions(o), IsOk());
  EXPECT_EQ(o.batches, std::vector<int64_t>({1}));
  EXPECT_TRUE(o.with_max);
  EXPECT_EQ(o.memory_bytes, 2 << 20);
  EXPECT_EQ(o.specs.size(), 3u);
  EXPECT_THAT(SetBenchOption("--baseline", "tf", o),
              StatusIs(absl::StatusCode::kInvalidArgument, "expected torch or none"));
  EXPECT_THAT(SetBenchOption("--no-such", "1", o),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown option"));
  BenchCommandOptions zero;
  zero.bench.iters = 0;
  EXPECT_THAT(FinishBenchCommandOptions(zero),
              StatusIs(absl::StatusCode::kInvalidArgument, "--iters"));
}

TEST(BenchSettings, ParseList) {
  auto s = ParseBenchSettings("forward,prefill-heavy,decode-heavy");
  ASSERT_THAT(s.status(), IsOk());
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[0].name, "forward");
  EXPECT_EQ((*s)[0].prompt_tokens, 0);
  EXPECT_EQ((*s)[1].prompt_tokens, 2048);
  EXPECT_EQ((*s)[1].gen_tokens, 128);
  EXPECT_EQ((*s)[2].prompt_tokens, 128);
  EXPECT_EQ((*s)[2].gen_tokens, 2048);
  // Overrides apply to every generation setting without its own lengths.
  s = ParseBenchSettings("prefill-heavy,decode-heavy=8/64", 512, 0);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ((*s)[0].prompt_tokens, 512);
  EXPECT_EQ((*s)[0].gen_tokens, 128);
  EXPECT_EQ((*s)[1].prompt_tokens, 8);
  EXPECT_EQ((*s)[1].gen_tokens, 64);
  EXPECT_THAT(ParseBenchSettings("sideways").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown setting 'sideways'"));
  EXPECT_THAT(ParseBenchSettings("forward,forward").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "given twice"));
  EXPECT_THAT(ParseBenchSettings("forward=8/8").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "takes no lengths"));
  EXPECT_THAT(ParseBenchSettings("decode-heavy=8").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "NAME=PROMPT/GEN"));
  EXPECT_THAT(ParseBenchSettings("decode-heavy=0/8").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "NAME=PROMPT/GEN"));
  EXPECT_THAT(ParseBenchSettings("").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown setting ''"));
  // train: a sequence setting like forward (its length is --tokens).
  s = ParseBenchSettings("train,forward", 512, 64);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ((*s)[0].name, "train");
  EXPECT_EQ((*s)[0].prompt_tokens, 0);
  EXPECT_EQ((*s)[0].gen_tokens, 0);
  EXPECT_THAT(ParseBenchSettings("train=8/8").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "'train' takes no lengths"));
}

TEST(BenchSettings, Generation) {
  BenchSettingSpec spec{"decode-heavy", 8, 16};
  auto s = GenerationSettings(spec, {1, 4}, 37);
  ASSERT_THAT(s.status(), IsOk());
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[1].batch, 4);
  EXPECT_FALSE((*s)[1].max_batch);
  EXPECT_EQ((*s)[2].batch, 37);
  EXPECT_TRUE((*s)[2].max_batch);
  EXPECT_EQ((*s)[2].prompt_tokens, 8);
  EXPECT_EQ((*s)[2].gen_tokens, 16);
  EXPECT_THAT(GenerationSettings(spec, {}, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "no batch size"));
  EXPECT_THAT(GenerationSettings(spec, {0}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "batch size 0"));
  EXPECT_THAT(GenerationSettings({"forward", 0, 0}, {1}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "not a generation"));
  EXPECT_THAT(GenerationSettings({"decode-heavy", 8, 0}, {1}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "at least 1 prompt"));
}

TEST(BenchInputs, GenerationPrompt) {
  BenchSetting s;
  s.name = "prefill-heavy";
  s.batch = 3;
  s.prompt_tokens = 10;
  s.gen_tokens = 2;
  auto p = GenerationPrompt(BlockConfig(), s, 5);
  ASSERT_THAT(p.status(), IsOk());
  EXPECT_EQ(p->shape(), (std::vector<int64_t>{3, 10}));
  for (int64_t id : testing::I64Values(*p)) {
    EXPECT_GE(id, 2);
    EXPECT_LT(id, 512);
  }
  // Row 0 does not depend on the batch size.
  s.batch = 1;
  auto one = GenerationPrompt(BlockConfig(), s, 5);
  ASSERT_THAT(one.status(), IsOk());
  std::vector<int64_t> all = testing::I64Values(*p);
  EXPECT_EQ(testing::I64Values(*one), std::vector<int64_t>(all.begin(), all.begin() + 10));
}

/// BtRunner on the fake generation models of gen_test_kernels.c.
TEST(BenchGeneration, BtRunnerGeneratesWithFixedWork) {
  for (bool vanilla : {false, true}) {
    SCOPED_TRACE(vanilla ? "vanilla" : "block");
    testing::TempDir dir;
    testing::GenArtifactOptions o;
    o.vanilla = vanilla;
    ASSERT_THAT(testing::WriteGenArtifact(dir.File("gen.btart"), o), IsOk());
    auto model = Model::Open(dir.File("gen.btart"));
    ASSERT_THAT(model.status(), IsOk());
    BtRunner bt(**model, 3);
    BenchSetting s;
    s.name = "decode-heavy";
    s.batch = 3;
    s.prompt_tokens = 6;
    s.gen_tokens = 10; // the fake models reach EOS (0) within 16 tokens
    ASSERT_THAT(bt.Prepare(s), IsOk());
    EXPECT_EQ(bt.inputs().at("input_ids").shape(), (std::vector<int64_t>{3, 6}));
    std::vector<std::pair<int64_t, int64_t>> seen;
    auto t = bt.Call([&](int64_t d, int64_t n) { seen.emplace_back(d, n); });
    ASSERT_THAT(t.status(), IsOk());
    EXPECT_GE(t->prefill_seconds, 0);
    EXPECT_LE(t->prefill_seconds, t->seconds);
    const GenerateCounters &c = bt.counters();
    EXPECT_EQ(t->kv_bytes_per_sample, c.cache_bytes_initial / 3);
    EXPECT_GT(t->kv_bytes_per_sample, 0);
    EXPECT_EQ(c.rows_compacted, 0); // EOS ignored: fixed work
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ(seen.front(), std::make_pair(int64_t{0}, int64_t{10}));
    EXPECT_EQ(seen.back(), std::make_pair(int64_t{10}, int64_t{10}));
    if (vanilla) {
      EXPECT_EQ(seen.size(), 11u); // after the prefill and each token
      EXPECT_EQ(c.decode_step_rows, 9 * 3);
    } else {
      EXPECT_EQ(seen.size(), 4u); // after the prefill and each block
      EXPECT_EQ(c.token_decoder_rows, 3 * 4 * 3);
    }
    auto toks = bt.GeneratedTokens();
    ASSERT_THAT(toks.status(), IsOk());
    EXPECT_EQ(toks->size(), 30u);
    EXPECT_EQ(bt.outputs().at("new_tokens").shape(), (std::vector<int64_t>{3, 10}));
  }
}

TEST(BenchGeneration, RunSettingsShowsProgressAndCountsGeneratedTokens) {
  testing::TempDir dir;
  ASSERT_THAT(testing::WriteGenArtifact(dir.File("gen.btart")), IsOk());
  auto model = Model::Open(dir.File("gen.btart"));
  ASSERT_THAT(model.status(), IsOk());
  BtRunner bt(**model, 0);
  BenchOptions opts;
  opts.settings = *GenerationSettings({"prefill-heavy", 12, 8}, {2}, 3);
  opts.iters = 2;
  opts.warmup = 1;
  opts.progress = "dots";
  std::ostringstream progress;
  auto r = RunSettings({&bt}, opts, "m", progress);
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ((*r)[0].size(), 2u);
  const BenchResult &b = (*r)[0][0];
  EXPECT_EQ(b.tokens, 2 * 8);
  EXPECT_EQ(b.total_tokens, 2 * (12 + 8));
  EXPECT_GT(b.kv_bytes_per_sample, 0);
  EXPECT_GE(b.prefill_seconds, 0);
  EXPECT_EQ(b.new_tokens.size(), 16u);
  EXPECT_TRUE((*r)[0][1].setting.max_batch);
  EXPECT_EQ((*r)[0][1].setting.batch, 3);
  EXPECT_THAT(progress.str(),
              HasSubstr("prefill-heavy batch 2 x 12 tokens + 8 generated:\n"
                        "  warmup 1/1: bt [..........] "));
  EXPECT_THAT(progress.str(), HasSubstr("prefill-heavy batch 3 (planned max) x 12"));
  EXPECT_THAT(progress.str(), HasSubstr(" tok/s generated (median "));
  EXPECT_GE(b.decode_seconds, 0);
  EXPECT_NEAR(b.decode_tokens_per_s * b.decode_seconds, 16, 1e-6);

  opts.progress = "bar";
  std::ostringstream bar;
  ASSERT_THAT(RunSettings({&bt}, opts, "m", bar).status(), IsOk());
  EXPECT_THAT(bar.str(), HasSubstr("] 8/8 tokens\x1b[K"));
  EXPECT_THAT(bar.str(), HasSubstr("\r  call 1/2: bt\x1b[K"));
  opts.progress = "none";
  std::ostringstream quiet;
  ASSERT_THAT(RunSettings({&bt}, opts, "m", quiet).status(), IsOk());
  EXPECT_THAT(quiet.str(), ::testing::Not(HasSubstr("[")));
}

} // namespace
} // namespace bt::rt
