//===- generate_command_test.cc -------------------------------------------===//
//
// `generate` (bt/runtime/commands.h) on the fake models of gen_test_kernels.c:
// argument parsing, --inputs / -o, --prompt with an embedded SentencePiece
// model, and the standalone executable (static bt-launcher) as a process.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/tooling/commands.h"

#include <cstdio>
#include <sstream>
#include <sys/wait.h>

#include "bt/runtime/base/safetensors.h"
#include "bt/runtime/model/tokenizer.h"
#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;
using ::testing::HasSubstr;

std::string TinyTokenizer() {
  return testing::ReadRaw(std::string(BT_TEST_DATA_DIR) + "/spm/tiny16.model");
}

absl::StatusOr<GenerateCommandOptions> Parse(std::vector<std::string> args) {
  return ParseGenerateArgs(args);
}

// An in-process caller (bt-run) fills the flags struct directly: the same
// checks as the command line.
TEST(GenerateCommand, ResolvesFlagsWithoutArgv) {
  GenerateCommandFlags f;
  f.prompts = {"a"};
  f.temperature = "0.5";
  f.seed = "7";
  auto s = ResolveGenerateFlags(f);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_FALSE(s->generate.sampling.greedy);
  EXPECT_EQ(s->generate.sampling.temperature, 0.5);
  EXPECT_EQ(s->generate.sampling.seed, 7u);
  f.greedy = true;
  EXPECT_THAT(ResolveGenerateFlags(f).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "--greedy contradicts"));
  f.greedy = false;
  f.max_new_tokens = "many";
  EXPECT_THAT(ResolveGenerateFlags(f).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--max-new-tokens: 'many' is not a number"));
}

TEST(GenerateCommand, ParsesOptions) {
  auto g = Parse({"--inputs", "in", "-o", "out", "--max-new-tokens", "12"});
  ASSERT_THAT(g.status(), IsOk());
  EXPECT_EQ(g->inputs_path, "in");
  EXPECT_EQ(g->output_path, "out");
  EXPECT_EQ(g->generate.max_new_tokens, 12);
  EXPECT_TRUE(g->generate.sampling.greedy);
  EXPECT_FALSE(g->generate.official_generate_positions);
  EXPECT_TRUE(g->generate.stop_at_eos);

  auto s = Parse({"--prompt", "a", "--prompt", "b c", "--temperature", "0.7", "--top-k",
                  "40", "--top-p", "0.9", "--seed", "5", "--official-generate-positions",
                  "--ignore-eos"});
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->prompts, std::vector<std::string>({"a", "b c"}));
  EXPECT_EQ(s->generate.max_new_tokens, 32);
  EXPECT_FALSE(s->generate.sampling.greedy);
  EXPECT_EQ(s->generate.sampling.temperature, 0.7);
  EXPECT_EQ(s->generate.sampling.top_k, 40);
  EXPECT_EQ(s->generate.sampling.top_p, 0.9);
  EXPECT_EQ(s->generate.sampling.seed, 5u);
  EXPECT_TRUE(s->generate.official_generate_positions);
  EXPECT_FALSE(s->generate.stop_at_eos);

  auto k = Parse({"--prompt", "a", "--top-k", "5"});
  ASSERT_THAT(k.status(), IsOk());
  EXPECT_FALSE(k->generate.sampling.greedy);
  EXPECT_EQ(k->generate.sampling.temperature, 1.0);
  auto zero = Parse({"--prompt", "a", "--temperature", "0"});
  ASSERT_THAT(zero.status(), IsOk());
  EXPECT_TRUE(zero->generate.sampling.greedy);

  for (const auto &[args, msg] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "give either --inputs"},
           {{"--inputs", "a", "--prompt", "b", "-o", "x"}, "give either --inputs"},
           {{"--inputs", "a"}, "--inputs needs -o"},
           {{"--prompt", "a", "--greedy", "--temperature", "1"}, "--greedy contradicts"},
           {{"--prompt", "a", "--seed", "3"}, "--seed needs sampling"},
           {{"--prompt", "a", "--temperature", "0", "--top-k", "3"}, "contradicts"},
           {{"--prompt", "a", "--top-p", "1.5"}, "top-p must be in (0, 1]"},
           {{"--prompt", "a", "--top-k", "-1"}, "top-k must be >= 0"},
           {{"--prompt", "a", "--max-new-tokens", "x"}, "'x' is not a number"},
           {{"--prompt", "a", "--max-new-tokens", "-2"}, ">= 0"},
           {{"--prompt"}, "--prompt needs a value"},
           {{"--prompt", "a", "--frobnicate"}, "unexpected argument '--frobnicate'"}})
    EXPECT_THAT(Parse(args).status(), StatusIs(absl::StatusCode::kInvalidArgument, msg))
        << args.size();
}

class GenerateCommandTest : public ::testing::Test {
protected:
  void SetUp() override {
    testing::GenArtifactOptions o;
    o.tokenizer = TinyTokenizer();
    ASSERT_THAT(testing::WriteGenArtifact(dir_.File("fake.btart"), o), IsOk());
    auto m = Model::Open(dir_.File("fake.btart"));
    ASSERT_THAT(m.status(), IsOk());
    model_ = std::move(m).value();
    Tensor ids = testing::MakeI64({2, 3}, {0, 4, 9, 2, 3, 5});
    Tensor mask = testing::MakeI64({2, 3}, {0, 1, 1, 1, 1, 1});
    ASSERT_THAT(WriteSafetensors(dir_.File("prompt.safetensors"),
                                 {{"prompt.input_ids", &ids},
                                  {"prompt.attention_mask", &mask},
                                  {"official.new_tokens", &ids}}),
                IsOk());
  }
  testing::TempDir dir_;
  std::unique_ptr<Model> model_;
};

TEST_F(GenerateCommandTest, InputsToOutputFile) {
  auto o = Parse({"--inputs", dir_.File("prompt.safetensors"), "-o", dir_.File("out.safetensors"),
                  "--max-new-tokens", "9"});
  ASSERT_THAT(o.status(), IsOk());
  std::ostringstream out, log;
  ASSERT_THAT(RunGenerateCommand(*model_, *o, out, log), IsOk());
  EXPECT_EQ(out.str(), "");
  EXPECT_THAT(log.str(), HasSubstr("decode_tokens: 3 call(s), 12 token-decoder steps"));
  EXPECT_THAT(log.str(), HasSubstr("wrote new_tokens [2, 9] and step_logits [9, 2, 16]"));
  auto f = SafetensorsFile::Open(dir_.File("out.safetensors"));
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(f->names(),
            std::vector<std::string>({"finished", "lengths", "new_tokens", "step_logits"}));
  // The same as Generate on the prompt: 9 -> 10 .. 15, EOS, pad; 5 -> 6 .. 14.
  EXPECT_EQ(testing::I64Values(*f->Get("new_tokens")),
            std::vector<int64_t>({10, 11, 12, 13, 14, 15, 0, 1, 0,  //
                                  6, 7, 8, 9, 10, 11, 12, 13, 14}));
  EXPECT_EQ(testing::I64Values(*f->Get("finished")), std::vector<int64_t>({1, 0}));
  EXPECT_EQ(testing::I64Values(*f->Get("lengths")), std::vector<int64_t>({7, 9}));
  EXPECT_EQ(f->metadata().at("positions"), "training");
  EXPECT_EQ(f->metadata().at("sampling"), "greedy");
  EXPECT_THAT(f->metadata().at("counters"), HasSubstr("decode_tokens_calls=3"));

  // Missing tensors name the file.
  Tensor x = testing::MakeI64({1}, {1});
  ASSERT_THAT(WriteSafetensors(dir_.File("bad.safetensors"), {{"x", &x}}), IsOk());
  o->inputs_path = dir_.File("bad.safetensors");
  EXPECT_THAT(RunGenerateCommand(*model_, *o, out, log),
              StatusIs(absl::StatusCode::kNotFound, "bad.safetensors: no tensor 'prompt.input_ids'"));
}

TEST_F(GenerateCommandTest, PromptsAreTokenizedWithTheArtifactsTokenizer) {
  auto tok = Tokenizer::LoadSentencePiece(TinyTokenizer());
  ASSERT_THAT(tok.status(), IsOk());
  // "the cat" = 5 4 6 12 3 -> 4 5 6 7 8 9; "the cats" ends with s = 15 -> EOS.
  auto o = Parse({"--prompt", "the cat", "--prompt", "the cats", "--max-new-tokens", "6"});
  ASSERT_THAT(o.status(), IsOk());
  std::ostringstream out, log;
  ASSERT_THAT(RunGenerateCommand(*model_, *o, out, log), IsOk());
  auto expected = (*tok)->Decode({5, 4, 6, 12, 3, 4, 5, 6, 7, 8, 9});
  ASSERT_THAT(expected.status(), IsOk());
  EXPECT_EQ(out.str(), "[0] " + *expected + "\n[1] the cats\n");
  // A single prompt prints only the text.
  o->prompts = {"the cat"};
  std::ostringstream one;
  ASSERT_THAT(RunGenerateCommand(*model_, *o, one, log), IsOk());
  EXPECT_EQ(one.str(), *expected + "\n");

  // No tokenizer section.
  ASSERT_THAT(testing::WriteGenArtifact(dir_.File("plain.btart")), IsOk());
  auto plain = Model::Open(dir_.File("plain.btart"));
  ASSERT_THAT(plain.status(), IsOk());
  EXPECT_THAT(RunGenerateCommand(**plain, *o, out, log),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "has no tokenizer: compile it with `bt-run compile --tokenizer"));
}

// A Hugging Face tokenizer.json in the artifact (tokenizer_kind
// TOKENIZER_HF_JSON): runtime/bpe/test/data/tiny16, 16 ids for the fake
// 16-token model: "the cat" = the, Ġcat = 11 14; the model continues 15 (Ġa)
// and ends with EOS.
std::string TinyTokenizerJson() {
  return testing::ReadRaw(std::string(BT_SOURCE_DIR) +
                          "/runtime/bpe/test/data/tiny16/tokenizer.json");
}

TEST_F(GenerateCommandTest, PromptsAreTokenizedWithATokenizerJson) {
  testing::GenArtifactOptions go;
  go.tokenizer = TinyTokenizerJson();
  ASSERT_THAT(testing::WriteGenArtifact(dir_.File("json.btart"), go), IsOk());
  auto m = Model::Open(dir_.File("json.btart"));
  ASSERT_THAT(m.status(), IsOk());
  EXPECT_EQ((*m)->manifest().tokenizer_kind(), proto::TOKENIZER_HF_JSON);
  auto o = Parse({"--prompt", "the cat", "--max-new-tokens", "6"});
  ASSERT_THAT(o.status(), IsOk());
  std::ostringstream out, log;
  ASSERT_THAT(RunGenerateCommand(**m, *o, out, log), IsOk());
  EXPECT_EQ(out.str(), "the cat a\n");
}

TEST_F(GenerateCommandTest, LauncherMainRunsGenerate) {
  std::vector<std::string> args = {"model", "--artifact", dir_.File("fake.btart"), "generate",
                                   "--inputs", dir_.File("prompt.safetensors"), "-o",
                                   dir_.File("lm.safetensors"), "--max-new-tokens", "4"};
  std::vector<const char *> argv;
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  std::ostringstream out, err;
  EXPECT_EQ(LauncherMain(static_cast<int>(argv.size()), argv.data(), out, err), 0) << err.str();
  auto f = SafetensorsFile::Open(dir_.File("lm.safetensors"));
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(testing::I64Values(*f->Get("new_tokens")),
            std::vector<int64_t>({10, 11, 12, 13, 6, 7, 8, 9}));
  argv.resize(4);
  argv.push_back("--greedy");
  std::ostringstream out2, err2;
  EXPECT_EQ(LauncherMain(static_cast<int>(argv.size()), argv.data(), out2, err2), 2);
  EXPECT_THAT(err2.str(), HasSubstr("generate: give either --inputs"));
  EXPECT_THAT(err2.str(), HasSubstr("usage:"));
}

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

// The standalone executable (the static bt-launcher + an artifact), as a
// process: the kernels resolve _mlir_ciface_bt_rt_sample against it, and
// --prompt loads libsentencepiece through the embedded shim.
TEST_F(GenerateCommandTest, StandaloneExecutable) {
  testing::GenArtifactOptions o;
  o.tokenizer = TinyTokenizer();
  o.prefix = BT_LAUNCHER;
  const std::string exe = dir_.File("fake-model");
  ASSERT_THAT(testing::WriteGenArtifact(exe, o), IsOk());
  std::string out;
  ASSERT_EQ(Shell(exe + " generate --inputs " + dir_.File("prompt.safetensors") + " -o " +
                      dir_.File("exe.safetensors") + " --max-new-tokens 9",
                  &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("decode_block: 2 call(s), 3 rows"));
  auto f = SafetensorsFile::Open(dir_.File("exe.safetensors"));
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(testing::I64Values(*f->Get("new_tokens")),
            std::vector<int64_t>({10, 11, 12, 13, 14, 15, 0, 1, 0,  //
                                  6, 7, 8, 9, 10, 11, 12, 13, 14}));
  ASSERT_EQ(Shell("(" + exe + " generate --prompt 'the cats' --max-new-tokens 3 2>/dev/null)", &out), 0)
      << out;
  EXPECT_EQ(out, "the cats\n");
  // Sampling with a seed is reproducible across processes.
  std::string a, b;
  const std::string sample = "(" + exe + " generate --prompt 'a hat' --temperature 3 --seed 7 "
                                   "--max-new-tokens 8 2>/dev/null)";
  ASSERT_EQ(Shell(sample, &a), 0) << a;
  ASSERT_EQ(Shell(sample, &b), 0) << b;
  EXPECT_EQ(a, b);
  EXPECT_EQ(Shell(exe + " generate --prompt x --top-p 2", &out), 2);
  EXPECT_THAT(out, HasSubstr("top-p must be in (0, 1]"));
}

// The same with a tokenizer.json: bt_bpe (PCRE2, utf8proc) is linked into the
// static launcher.
TEST_F(GenerateCommandTest, StandaloneExecutableWithATokenizerJson) {
  testing::GenArtifactOptions o;
  o.tokenizer = TinyTokenizerJson();
  o.prefix = BT_LAUNCHER;
  const std::string exe = dir_.File("json-model");
  ASSERT_THAT(testing::WriteGenArtifact(exe, o), IsOk());
  std::string out;
  ASSERT_EQ(Shell("(" + exe + " generate --prompt 'the cat' --max-new-tokens 6 2>/dev/null)", &out),
            0)
      << out;
  EXPECT_EQ(out, "the cat a\n");
  ASSERT_EQ(Shell(exe + " info", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("(tokenizer.json)"));
}

} // namespace
} // namespace bt::rt
