//===- config_test.cc -----------------------------------------------------===//

#include "bt/runtime/model/config.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <sys/stat.h>

#include "bt/runtime/base/file_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "nlohmann/json.hpp"
#include "test_util.h"
#include "yaml-cpp/yaml.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;
using ::testing::HasSubstr;
using json = nlohmann::json;

bool Exists(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

json ReadJson(const std::string &path) {
  auto text = ReadFile(path);
  EXPECT_THAT(text.status(), IsOk());
  return json::parse(text.value_or("{}"));
}

// The fields a resolved config.json cannot carry (max_length) or that name
// the source form differ between the YAML and JSON forms of one checkpoint.
proto::ModelConfig Comparable(proto::ModelConfig c) {
  c.clear_source();
  c.clear_max_length();
  return c;
}

void ExpectSameConfig(const proto::ModelConfig &a, const proto::ModelConfig &b) {
  std::string diff;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(a, b)) << diff << "\nA:\n"
                               << a.DebugString() << "\nB:\n"
                               << b.DebugString();
}

// The resolved stack fields of a fixture config.json section.
void ExpectStackMatchesJson(const proto::NeoXConfig &s, const json &j) {
  EXPECT_EQ(s.hidden_size(), j.at("hidden_size").get<int64_t>());
  EXPECT_EQ(s.num_layers(), j.at("num_hidden_layers").get<int64_t>());
  EXPECT_EQ(s.num_heads(), j.at("num_attention_heads").get<int64_t>());
  EXPECT_EQ(s.head_dim(), j.at("head_dim").get<int64_t>());
  EXPECT_EQ(s.intermediate_size(), j.at("intermediate_size").get<int64_t>());
  EXPECT_EQ(s.rotary_pct(), j.at("rotary_pct").get<double>());
  EXPECT_EQ(s.rotary_dims(), j.at("rotary_ndims").get<int64_t>());
  EXPECT_EQ(s.rotary_base(), j.at("rotary_emb_base").get<double>());
  EXPECT_EQ(s.max_position_embeddings(), j.at("max_position_embeddings").get<int64_t>());
  EXPECT_EQ(s.layer_norm_eps(), j.at("layer_norm_eps").get<double>());
  EXPECT_EQ(s.hidden_act(), j.at("hidden_act").get<std::string>());
  EXPECT_EQ(s.use_parallel_residual(), j.at("use_parallel_residual").get<bool>());
}

// Every fixture: config.yaml (official form) and config.json (resolved form)
// give the same ModelConfig, and its values are the resolved config.json
// fields (read here independently of the parser).
TEST(Config, FixtureYamlAndJsonAgreeWithResolvedValues) {
  for (const std::string &c : testing::FixtureCases()) {
    SCOPED_TRACE(c);
    ASSERT_TRUE(Exists(c + "/config.yaml"));
    ASSERT_TRUE(Exists(c + "/config.json"));
    auto y = LoadModelConfig(c + "/config.yaml");
    ASSERT_THAT(y.status(), IsOk());
    auto j = LoadModelConfig(c + "/config.json");
    ASSERT_THAT(j.status(), IsOk());
    EXPECT_EQ(y->source(), "official-yaml");
    EXPECT_EQ(j->source(), "config-json");
    ExpectSameConfig(Comparable(*y), Comparable(*j));

    const json r = ReadJson(c + "/config.json");
    EXPECT_EQ(y->name(), r.at("case").get<std::string>());
    EXPECT_EQ(y->name(), testing::BaseName(c));
    EXPECT_EQ(y->vocab_size(), r.at("vocab_size").get<int64_t>());
    EXPECT_EQ(y->eos_token_id(), r.at("eos_token_id").get<int64_t>());
    EXPECT_EQ(y->checkpoint_dtype(), proto::F32);
    const json &opt = r.at("optimizer_fixture");
    EXPECT_EQ(y->learning_rate(), opt.at("lr").get<double>());
    EXPECT_EQ(y->weight_decay(), opt.at("weight_decay").get<double>());
    EXPECT_EQ(y->adam_beta1(), opt.at("betas")[0].get<double>());
    EXPECT_EQ(y->adam_beta2(), opt.at("betas")[1].get<double>());
    if (r.at("model_type") == "block_transformer") {
      EXPECT_EQ(y->kind(), proto::ModelConfig::BLOCK_TRANSFORMER);
      EXPECT_EQ(y->block_length(), r.at("block_length").get<int64_t>());
      EXPECT_EQ(y->embedder_width(), r.at("embedder").at("hidden_size").get<int64_t>());
      EXPECT_EQ(y->block_decoder().hidden_size(),
                r.at("embedder").at("projection_hidden_size").get<int64_t>());
      ExpectStackMatchesJson(y->block_decoder(), r.at("block_decoder"));
      ExpectStackMatchesJson(y->token_decoder(), r.at("token_decoder"));
      const json &td = r.at("token_decoder");
      if (td.at("decoding_strategy") == "summation") {
        // Official summation has no prefix (prefix_length 0); bt's
        // prefix_length counts the expansion slots added to the inputs.
        EXPECT_EQ(y->strategy(), proto::ModelConfig::SUMMATION);
        EXPECT_EQ(td.at("prefix_length").get<int64_t>(), 0);
        EXPECT_EQ(y->prefix_length(), td.at("expansion_ratio").get<int64_t>() *
                                          r.at("n_embedding_tokens").get<int64_t>());
      } else {
        EXPECT_EQ(y->strategy(), proto::ModelConfig::PREFIX);
        EXPECT_EQ(y->prefix_length(), td.at("prefix_length").get<int64_t>());
      }
      EXPECT_EQ(y->embedder_projection() == proto::ModelConfig::PROJECTION_LAYER,
                r.at("embedder").at("projection_method") == "projection_layer");
      EXPECT_EQ(y->pad_token_id(), r.at("pad_token_id").get<int64_t>());
      EXPECT_EQ(y->bos_token_id(), r.at("token_decoder_bos_placeholder_id").get<int64_t>());
      EXPECT_EQ(y->generation_pad_token_id(), r.at("generation_pad_token_id").get<int64_t>());
      EXPECT_EQ(y->max_length() % y->block_length(), 0);
    } else {
      EXPECT_EQ(r.at("model_type"), "gpt_neox_vanilla");
      EXPECT_EQ(y->kind(), proto::ModelConfig::VANILLA);
      EXPECT_EQ(y->block_length(), 1);
      EXPECT_FALSE(y->has_token_decoder());
      ExpectStackMatchesJson(y->block_decoder(), r.at("model"));
      EXPECT_EQ(y->generation_pad_token_id(),
                r.at("pad_token_id_generation").get<int64_t>());
    }
    // The state_dict keys listed in config.json are ExpectedParams plus the
    // known-unused tensors, with the same shapes.
    std::map<std::string, std::vector<int64_t>> keys;
    for (auto it = r.at("state_dict_keys").begin(); it != r.at("state_dict_keys").end(); ++it)
      keys[it.key()] = it.value().get<std::vector<int64_t>>();
    std::map<std::string, std::vector<int64_t>> ours;
    for (const ParamSpec &p : ExpectedParams(*y))
      ours[p.name] = p.shape;
    for (const ParamSpec &p : KnownUnusedParams(*y))
      ours[p.name] = p.shape;
    EXPECT_EQ(keys, ours);
  }
}

// A directory resolves to its config.yaml when present.
TEST(Config, DirectoryPrefersYamlThenJson) {
  for (const std::string &c : testing::FixtureCases()) {
    auto d = LoadModelConfig(c);
    ASSERT_THAT(d.status(), IsOk());
    EXPECT_EQ(d->source(), "official-yaml");
  }
  testing::TempDir dir;
  const std::string c = testing::FixtureCases().at(0);
  testing::WriteRaw(dir.File("config.json"), testing::ReadRaw(c + "/config.json"));
  auto j = LoadModelConfig(dir.path());
  ASSERT_THAT(j.status(), IsOk());
  EXPECT_EQ(j->source(), "config-json");
  testing::TempDir empty;
  EXPECT_THAT(LoadModelConfig(empty.path()).status(),
              StatusIs(absl::StatusCode::kNotFound, "no config.yaml"));
  EXPECT_THAT(LoadModelConfig(empty.File("nope.yaml")).status(),
              StatusIs(absl::StatusCode::kNotFound, "nope.yaml"));
}

// The hand-written base config equals the pythia-410m-deduped config the
// fixtures were generated with.
TEST(Config, PythiaBaseMatchesFixtureProvenance) {
  for (const std::string &c : testing::FixtureCases()) {
    SCOPED_TRACE(c);
    const json b = ReadJson(c + "/config.json").at("provenance").at("base_hf_config");
    EXPECT_EQ(b.at("name"), std::string(kPythiaBaseName));
    const json &j = b.at("config_json");
    const proto::NeoXConfig p = PythiaBaseConfig();
    EXPECT_EQ(p.hidden_size(), j.at("hidden_size").get<int64_t>());
    EXPECT_EQ(p.num_layers(), j.at("num_hidden_layers").get<int64_t>());
    EXPECT_EQ(p.num_heads(), j.at("num_attention_heads").get<int64_t>());
    EXPECT_EQ(p.intermediate_size(), j.at("intermediate_size").get<int64_t>());
    EXPECT_EQ(p.rotary_pct(), j.at("rotary_pct").get<double>());
    EXPECT_EQ(p.rotary_base(), j.at("rotary_emb_base").get<double>());
    EXPECT_EQ(p.max_position_embeddings(), j.at("max_position_embeddings").get<int64_t>());
    EXPECT_EQ(p.layer_norm_eps(), j.at("layer_norm_eps").get<double>());
    EXPECT_EQ(p.hidden_act(), j.at("hidden_act").get<std::string>());
    EXPECT_EQ(p.use_parallel_residual(), j.at("use_parallel_residual").get<bool>());
    EXPECT_EQ(kPythiaVocabSize, j.at("vocab_size").get<int64_t>());
    EXPECT_EQ(kPythiaEosTokenId, j.at("eos_token_id").get<int64_t>());
    EXPECT_FALSE(j.at("tie_word_embeddings").get<bool>());
  }
}

// Form (c): the HF GPTNeoXForCausalLM config.json of vanilla fixtures
// (stored under "hf_config") gives the same model as the YAML.
TEST(Config, HfGptNeoXConfigOfVanillaFixtures) {
  int seen = 0;
  for (const std::string &c : testing::FixtureCases()) {
    const json r = ReadJson(c + "/config.json");
    if (!r.contains("hf_config"))
      continue;
    SCOPED_TRACE(c);
    ++seen;
    testing::TempDir dir;
    const std::string sub = dir.path() + "/" + testing::BaseName(c);
    ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
    testing::WriteRaw(sub + "/config.json", r.at("hf_config").dump(2));
    auto h = LoadModelConfig(sub);
    ASSERT_THAT(h.status(), IsOk());
    EXPECT_EQ(h->source(), "hf-gpt-neox");
    auto y = LoadModelConfig(c + "/config.yaml");
    ASSERT_THAT(y.status(), IsOk());
    proto::ModelConfig a = Comparable(*y), b = Comparable(*h);
    for (proto::ModelConfig *m : {&a, &b}) {
      m->clear_learning_rate();
      m->clear_weight_decay();
      m->clear_adam_beta1();
      m->clear_adam_beta2();
    }
    ExpectSameConfig(a, b);
  }
  EXPECT_GT(seen, 0) << "no fixture with an hf_config (vanilla) found";
}

std::string DataFile(const std::string &name) {
  return std::string(BT_TEST_DATA_DIR) + "/official/" + name;
}

// The paper's 85M Block Transformer (conf/trainer/block_main_b4_85.yaml):
// D = T = 768, 6 + 6 layers, 12 heads (autofilled, head dim 64), L_B = 4,
// P = 2, E = 192, I = 3072, vocab 50304 (inherited), bf16.
TEST(Config, OfficialBlockMainB4_85) {
  auto c = LoadModelConfig(DataFile("block_main_b4_85.yaml"));
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_EQ(c->name(), "block_main_b4_85");
  EXPECT_EQ(c->kind(), proto::ModelConfig::BLOCK_TRANSFORMER);
  EXPECT_EQ(c->block_length(), 4);
  EXPECT_EQ(c->embedder_width(), 192);
  EXPECT_EQ(c->vocab_size(), 50304);
  EXPECT_EQ(c->prefix_length(), 2);
  EXPECT_EQ(c->strategy(), proto::ModelConfig::PREFIX);
  for (const proto::NeoXConfig *s : {&c->block_decoder(), &c->token_decoder()}) {
    EXPECT_EQ(s->hidden_size(), 768);
    EXPECT_EQ(s->num_layers(), 6);
    EXPECT_EQ(s->num_heads(), 12);
    EXPECT_EQ(s->head_dim(), 64);
    EXPECT_EQ(s->intermediate_size(), 3072);
    EXPECT_EQ(s->rotary_dims(), 16);
    EXPECT_EQ(s->max_position_embeddings(), 2048);
  }
  EXPECT_EQ(c->checkpoint_dtype(), proto::BF16);
  EXPECT_EQ(c->max_length(), 2048);
  EXPECT_DOUBLE_EQ(c->learning_rate(), 6e-4);
  EXPECT_EQ(c->generation_pad_token_id(), 1);
  // ~85M non-embedding parameters in the two stacks: 12 * 768^2 * 12 layers.
  int64_t stack = 0;
  for (const ParamSpec &p : ExpectedParams(*c)) {
    if (p.name.find(".layers.") == std::string::npos)
      continue;
    int64_t n = 1;
    for (int64_t d : p.shape)
      n *= d;
    stack += n;
  }
  EXPECT_NEAR(static_cast<double>(stack) / 1e6, 85.0, 0.2);
}

// MEGABYTE-style summation: expansion_ratio defaults to block_length.
TEST(Config, OfficialBlockMegabyteB4_85) {
  auto c = LoadModelConfig(DataFile("block_megabyte_b4_85.yaml"));
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_EQ(c->strategy(), proto::ModelConfig::SUMMATION);
  EXPECT_EQ(c->prefix_length(), 4);
  EXPECT_EQ(c->block_decoder().num_layers(), 11);
  EXPECT_EQ(c->token_decoder().hidden_size(), 512);
  EXPECT_EQ(c->token_decoder().num_heads(), 8);
}

// Wide model: head dim 128 above 1536.
TEST(Config, OfficialBlockMainB4_1_2B) {
  auto c = LoadModelConfig(DataFile("block_main_b4_1.2b.yaml"));
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_EQ(c->block_decoder().hidden_size(), 2048);
  EXPECT_EQ(c->block_decoder().num_heads(), 16);
  EXPECT_EQ(c->block_decoder().head_dim(), 128);
  EXPECT_EQ(c->block_decoder().rotary_dims(), 32);
  EXPECT_EQ(c->embedder_width(), 512);
}

// Vanilla: model_config overrides pythia-410m-deduped without autofill, so
// intermediate_size stays 4096 (as the official load_vanilla_model_from_config).
TEST(Config, OfficialVanilla31) {
  auto c = LoadModelConfig(DataFile("vanilla_31.yaml"));
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_EQ(c->kind(), proto::ModelConfig::VANILLA);
  EXPECT_EQ(c->block_decoder().hidden_size(), 256);
  EXPECT_EQ(c->block_decoder().num_layers(), 6);
  EXPECT_EQ(c->block_decoder().num_heads(), 8);
  EXPECT_EQ(c->block_decoder().intermediate_size(), 4096);
  EXPECT_EQ(c->vocab_size(), 50304);
  EXPECT_EQ(c->generation_pad_token_id(), 0);
}

//===----------------------------------------------------------------------===//
// Bad configs give located messages.
//===----------------------------------------------------------------------===//

std::string FixtureCase(const std::string &kind) {
  // The first fixture case of the given model_type.
  for (const std::string &c : testing::FixtureCases())
    if (ReadJson(c + "/config.json").at("model_type") == kind)
      return c;
  ADD_FAILURE() << "no fixture of model_type " << kind;
  return "";
}

// Loads the first block fixture's config.yaml, applies `edit`, writes it as
// <tmp>/config.yaml and loads it.
absl::Status LoadEditedYaml(const std::string &kind,
                            const std::function<void(YAML::Node &)> &edit,
                            std::string *path_out = nullptr) {
  static testing::TempDir *dir = new testing::TempDir();
  YAML::Node root = YAML::LoadFile(FixtureCase(kind) + "/config.yaml");
  edit(root);
  YAML::Emitter e;
  e << root;
  const std::string path = dir->File("config.yaml");
  testing::WriteRaw(path, e.c_str());
  if (path_out)
    *path_out = path;
  return LoadModelConfig(path).status();
}

struct BadYaml {
  const char *name;
  std::function<void(YAML::Node &)> edit;
  absl::StatusCode code;
  const char *message;
};

TEST(Config, BadBlockYamlGivesLocatedErrors) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const auto kUnimpl = absl::StatusCode::kUnimplemented;
  const std::vector<BadYaml> cases = {
      {"hidden_not_divisible_by_block_length",
       [](YAML::Node &r) { r["block_decoder"]["config"]["hidden_size"] = 63; }, kInvalid,
       "config.yaml: block_decoder.config.hidden_size (63) must be divisible by block_length (4)"},
      {"embedder_width_mismatch",
       [](YAML::Node &r) { r["embedder"]["config"]["hidden_size"] = 15; }, kInvalid,
       "config.yaml: embedder.config.hidden_size (15) * block_length (4) = 60 must equal "
       "block_decoder.config.hidden_size (64)"},
      {"missing_strategy",
       [](YAML::Node &r) { r["token_decoder"].remove("decoding_strategy"); }, kInvalid,
       "config.yaml: token_decoder.decoding_strategy: missing"},
      {"missing_block_decoder", [](YAML::Node &r) { r.remove("block_decoder"); }, kInvalid,
       "config.yaml: block_decoder: missing"},
      {"wrong_type",
       [](YAML::Node &r) { r["block_decoder"]["config"]["num_hidden_layers"] = "two"; }, kInvalid,
       "config.yaml: block_decoder.config.num_hidden_layers: expected an integer, got 'two'"},
      {"float_for_int",
       [](YAML::Node &r) { r["block_length"] = 4.5; }, kInvalid,
       "config.yaml: block_length: expected an integer, got '4.5'"},
      {"section_not_a_map", [](YAML::Node &r) { r["embedder"] = 5; }, kInvalid,
       "config.yaml: embedder: expected a mapping, got '5'"},
      {"heads_do_not_divide",
       [](YAML::Node &r) { r["token_decoder"]["config"]["num_attention_heads"] = 3; }, kInvalid,
       "config.yaml: token_decoder.config.num_attention_heads (3) must divide "
       "token_decoder.config.hidden_size (64)"},
      // Found by config_yaml_fuzzer: a NaN rotary_pct reached the
      // float-to-int64 conversion of the derived rotary dims (UBSan).
      {"nan_rotary_pct",
       [](YAML::Node &r) { r["block_decoder"]["config"]["rotary_pct"] = ".NAN"; }, kInvalid,
       "config.yaml: block_decoder.config.rotary_pct (nan) must be in [0, 1]"},
      {"odd_rotary_dims",
       [](YAML::Node &r) { r["token_decoder"]["config"]["rotary_pct"] = 0.1; }, kInvalid,
       "int(32 * 0.1) = 3 for token_decoder must be even"},
      {"autofill_head_dim",
       [](YAML::Node &r) {
         r["block_decoder"]["config"]["hidden_size"] = 80;
         r["embedder"]["config"]["hidden_size"] = 20;
       },
       kInvalid,
       "config.yaml: block_decoder.config.hidden_size (80) must be divisible by 32 to "
       "autofill num_attention_heads"},
      {"missing_embedder_vocab",
       [](YAML::Node &r) { r["embedder"]["config"].remove("vocab_size"); }, kInvalid,
       "config.yaml: embedder.config.vocab_size: missing"},
      {"unknown_neox_key",
       [](YAML::Node &r) { r["block_decoder"]["config"]["hiden_size"] = 64; }, kInvalid,
       "config.yaml: block_decoder.config.hiden_size: not a field of GPTNeoXConfig"},
      {"vocab_mismatch",
       [](YAML::Node &r) { r["token_decoder"]["config"]["vocab_size"] = 500; }, kInvalid,
       "config.yaml: embedder.config.vocab_size (512) must equal "
       "token_decoder.config.vocab_size (500)"},
      {"inherited_vocab_mismatch",
       [](YAML::Node &r) { r["token_decoder"]["config"].remove("vocab_size"); }, kInvalid,
       "token_decoder.config.vocab_size (50304, inherited from EleutherAI/pythia-410m-deduped)"},
      {"prefix_without_ratio",
       [](YAML::Node &r) { r["token_decoder"].remove("expansion_ratio"); }, kInvalid,
       "config.yaml: token_decoder.expansion_ratio: missing (required for decoding_strategy "
       "'prefix')"},
      {"block_split_mismatch",
       [](YAML::Node &r) { r["block_split"]["distribution_kwargs"]["length"] = 8; }, kInvalid,
       "config.yaml: block_split.distribution_kwargs.length: (8) must equal block_length (4)"},
      {"precision", [](YAML::Node &r) { r["precision"] = "fp8"; }, kInvalid,
       "config.yaml: precision: 'fp8' is not one of fp32, fp16, bf16"},
      {"roberta_embedder", [](YAML::Node &r) { r["embedder"]["cls"] = "roberta"; }, kUnimpl,
       "config.yaml: embedder.cls ('roberta') is not supported"},
      {"variable_blocks",
       [](YAML::Node &r) { r["block_split"]["distribution"] = "uniform"; }, kUnimpl,
       "config.yaml: block_split.distribution ('uniform') is not supported"},
      {"other_base",
       [](YAML::Node &r) { r["token_decoder"]["model_name_or_path"] = "EleutherAI/pythia-70m"; },
       kUnimpl, "config.yaml: token_decoder.model_name_or_path ('EleutherAI/pythia-70m')"},
      {"cross_attention",
       [](YAML::Node &r) { r["token_decoder"]["decoding_strategy"] = "cross_attention"; },
       kUnimpl, "config.yaml: token_decoder.decoding_strategy ('cross_attention')"},
      {"two_embedding_tokens", [](YAML::Node &r) { r["embedder"]["n_embedding_tokens"] = 2; },
       kUnimpl, "config.yaml: embedder.n_embedding_tokens (2) is not supported"},
      {"non_gelu",
       [](YAML::Node &r) { r["block_decoder"]["config"]["hidden_act"] = "relu"; }, kUnimpl,
       "config.yaml: block_decoder.config.hidden_act ('relu') is not supported"},
      {"tied_head",
       [](YAML::Node &r) { r["token_decoder"]["config"]["tie_word_embeddings"] = true; },
       kUnimpl, "config.yaml: token_decoder.config.tie_word_embeddings (true) is not supported"},
  };
  for (const BadYaml &b : cases) {
    SCOPED_TRACE(b.name);
    EXPECT_THAT(LoadEditedYaml("block_transformer", b.edit), StatusIs(b.code, b.message));
  }
}

TEST(Config, BadVanillaYamlGivesLocatedErrors) {
  EXPECT_THAT(LoadEditedYaml("gpt_neox_vanilla",
                             [](YAML::Node &r) { r["model_config"]["num_attention_heads"] = 5; }),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "config.yaml: model_config.num_attention_heads (5) must divide "
                       "model_config.hidden_size (64)"));
  // No autofill for vanilla: heads are inherited (16) and do not divide 40.
  EXPECT_THAT(LoadEditedYaml("gpt_neox_vanilla",
                             [](YAML::Node &r) {
                               r["model_config"].remove("num_attention_heads");
                               r["model_config"]["hidden_size"] = 40;
                             }),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "model_config.num_attention_heads (16, inherited from "
                       "EleutherAI/pythia-410m-deduped) must divide model_config.hidden_size (40)"));
  EXPECT_THAT(LoadEditedYaml("gpt_neox_vanilla", [](YAML::Node &r) { r["model"] = "gpt-neo"; }),
              StatusIs(absl::StatusCode::kUnimplemented, "config.yaml: model ('gpt-neo')"));
  EXPECT_THAT(LoadEditedYaml("gpt_neox_vanilla", [](YAML::Node &r) { r.remove("model"); }),
              StatusIs(absl::StatusCode::kInvalidArgument, "config.yaml: model: missing"));
}

TEST(Config, YamlSyntaxErrors) {
  testing::TempDir dir;
  testing::WriteRaw(dir.File("config.yaml"), "name: x\nblock_length: [4\n");
  EXPECT_THAT(LoadModelConfig(dir.File("config.yaml")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "invalid YAML"));
  testing::WriteRaw(dir.File("config.yaml"), "- a\n- b\n");
  EXPECT_THAT(LoadModelConfig(dir.File("config.yaml")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "expected a mapping at the top level"));
}

// Loads the first fixture of `kind`'s config.json, applies `edit`, loads it.
absl::Status LoadEditedJson(const std::string &kind, const std::function<void(json &)> &edit) {
  static testing::TempDir *dir = new testing::TempDir();
  json j = ReadJson(FixtureCase(kind) + "/config.json");
  edit(j);
  testing::WriteRaw(dir->File("config.json"), j.dump());
  return LoadModelConfig(dir->File("config.json")).status();
}

TEST(Config, BadJsonGivesLocatedErrors) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(LoadEditedJson("block_transformer",
                             [](json &j) { j["block_decoder"]["head_dim"] = 16; }),
              StatusIs(kInvalid, "config.json: block_decoder.head_dim (16) must equal "
                                 "hidden_size / num_heads = 32"));
  EXPECT_THAT(LoadEditedJson("block_transformer",
                             [](json &j) { j["token_decoder"].erase("hidden_size"); }),
              StatusIs(kInvalid, "config.json: token_decoder.hidden_size: missing"));
  EXPECT_THAT(LoadEditedJson("block_transformer",
                             [](json &j) { j["block_decoder"]["hidden_size"] = "64"; }),
              StatusIs(kInvalid, "config.json: block_decoder.hidden_size: expected an "
                                 "integer, got \"64\""));
  EXPECT_THAT(LoadEditedJson("block_transformer",
                             [](json &j) { j["embedder"]["hidden_size"] = 15; }),
              StatusIs(kInvalid, "config.json: embedder.hidden_size (15) * block_length (4) "
                                 "= 60 must equal block_decoder.hidden_size (64)"));
  EXPECT_THAT(LoadEditedJson("block_transformer",
                             [](json &j) { j["token_decoder"]["prefix_length"] = 3; }),
              StatusIs(kInvalid, "config.json: token_decoder.prefix_length: (3) must equal "
                                 "n_embedding_tokens (1) * token_decoder.expansion_ratio (2)"));
  EXPECT_THAT(LoadEditedJson("block_transformer",
                             [](json &j) { j["block_decoder"]["rotary_ndims"] = 6; }),
              StatusIs(kInvalid, "config.json: block_decoder.rotary_ndims (6) must equal "
                                 "int(head_dim * rotary_pct)"));
  EXPECT_THAT(LoadEditedJson("block_transformer", [](json &j) { j["eos_token_id"] = 9999; }),
              StatusIs(kInvalid, "config.json: eos_token_id (9999) must be in [0, "
                                 "vocab_size (512))"));
  EXPECT_THAT(LoadEditedJson("block_transformer", [](json &j) { j["model_type"] = "llama"; }),
              StatusIs(absl::StatusCode::kUnimplemented, "config.json: model_type ('llama')"));
  EXPECT_THAT(LoadEditedJson("gpt_neox_vanilla",
                             [](json &j) { j["model"]["num_attention_heads"] = 3; }),
              StatusIs(kInvalid, "config.json: model.num_attention_heads (3) must divide "
                                 "model.hidden_size (64)"));
  // HF form: defaults of GPTNeoXConfig for absent fields, located errors.
  EXPECT_THAT(LoadEditedJson("gpt_neox_vanilla",
                             [](json &j) {
                               json h = j["hf_config"];
                               h["num_attention_heads"] = 3;
                               j = h;
                             }),
              StatusIs(kInvalid, "config.json: num_attention_heads (3) must divide "
                                 "hidden_size (64)"));
  testing::TempDir dir;
  testing::WriteRaw(dir.File("config.json"), "{\"model_type\": ");
  EXPECT_THAT(LoadModelConfig(dir.File("config.json")).status(),
              StatusIs(kInvalid, "not valid JSON"));
}

TEST(Config, ValidateModelConfigUsesProtoFieldPaths) {
  auto c = LoadModelConfig(FixtureCase("block_transformer") + "/config.json");
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_THAT(ValidateModelConfig(*c), IsOk());
  proto::ModelConfig bad = *c;
  bad.set_embedder_width(15);
  EXPECT_THAT(ValidateModelConfig(bad, "manifest"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "manifest: embedder_width (15) * block_length (4) = 60 must equal "
                       "block_decoder.hidden_size (64)"));
  bad = *c;
  bad.mutable_token_decoder()->set_num_heads(0);
  EXPECT_THAT(ValidateModelConfig(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "token_decoder.num_heads (0) must be positive"));
  bad = *c;
  bad.set_kind(proto::ModelConfig::KIND_UNSPECIFIED);
  EXPECT_THAT(ValidateModelConfig(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, "kind"));
}

TEST(Config, DescribeMentionsTheShape) {
  auto c = LoadModelConfig(DataFile("block_main_b4_85.yaml"));
  ASSERT_THAT(c.status(), IsOk());
  const std::string d = DescribeModelConfig(*c);
  EXPECT_THAT(d, HasSubstr("Block Transformer"));
  EXPECT_THAT(d, HasSubstr("6 layers x 768, 12 heads of 64"));
  EXPECT_THAT(d, HasSubstr("prefix length P: 2"));
}

// issue 14: a key given twice is an error naming the second occurrence, at
// the top level and nested (it used to keep the first value silently).
TEST(Config, DuplicateYamlKeyIsAnError) {
  const std::string yaml = testing::ReadRaw(testing::FixturesDir() + "/block_tiny/config.yaml");
  ASSERT_THAT(ParseOfficialYamlConfig(yaml, "c.yaml").status(), IsOk());
  const int lines = static_cast<int>(std::count(yaml.begin(), yaml.end(), '\n'));
  EXPECT_THAT(ParseOfficialYamlConfig(yaml + "block_length: 8\n", "c.yaml").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("c.yaml:", lines + 1, ":1: duplicate key 'block_length'")));
  EXPECT_THAT(ParseOfficialYamlConfig("block_length: 4\nnested:\n  a: 1\n  a: 2\n", "n.yaml")
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "n.yaml:4:3: duplicate key 'a'"));
}

} // namespace
} // namespace bt::rt
