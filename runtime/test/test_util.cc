//===- test_util.cc - helpers for the runtime tests -----------------------===//

#include "test_util.h"

#include "bt/runtime/model/artifact.h"
#include "bt/runtime/model/config.h"
#include "bt/runtime/model/tokenizer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <ftw.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace bt::rt::testing {

std::string FixturesDir() {
  const char *env = std::getenv("BT_FIXTURES_DIR");
  if (env != nullptr && *env != '\0')
    return env;
  return BT_FIXTURES_DIR;
}

std::vector<std::string> FixtureCases() {
  const std::string dir = FixturesDir();
  std::vector<std::string> cases;
  DIR *d = ::opendir(dir.c_str());
  if (d == nullptr) {
    ADD_FAILURE() << "fixtures directory " << dir
                  << " is missing (set BT_FIXTURES_DIR)";
    return cases;
  }
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..")
      continue;
    std::string p = dir + "/" + name;
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      cases.push_back(p);
  }
  ::closedir(d);
  std::sort(cases.begin(), cases.end());
  if (cases.empty())
    ADD_FAILURE() << "fixtures directory " << dir << " has no case folders";
  return cases;
}

std::string BaseName(const std::string &path) {
  size_t s = path.rfind('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

TempDir::TempDir() {
  const char *t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t && *t ? t : "/tmp") + "/btrt-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    ADD_FAILURE() << "mkdtemp failed: " << std::strerror(errno);
  path_ = tmpl;
}

TempDir::~TempDir() {
  if (path_.empty())
    return;
  ::nftw(
      path_.c_str(),
      [](const char *p, const struct stat *, int, struct FTW *) {
        ::chmod(p, 0700);
        return ::remove(p);
      },
      16, FTW_DEPTH | FTW_PHYS);
}

void WriteRaw(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << "cannot write " << path;
}

std::string ReadRaw(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Tensor MakeF32(std::vector<int64_t> shape, const std::vector<float> &values) {
  auto t = Tensor::Allocate(proto::F32, std::move(shape));
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(static_cast<size_t>(t->num_elements()), values.size());
  std::copy(values.begin(), values.end(), t->data_as<float>());
  return std::move(t).value();
}

Tensor MakeI64(std::vector<int64_t> shape, const std::vector<int64_t> &values) {
  auto t = Tensor::Allocate(proto::I64, std::move(shape));
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(static_cast<size_t>(t->num_elements()), values.size());
  std::copy(values.begin(), values.end(), t->data_as<int64_t>());
  return std::move(t).value();
}

std::vector<float> F32Values(const Tensor &t) {
  EXPECT_EQ(t.dtype(), proto::F32);
  std::vector<float> v(static_cast<size_t>(t.num_elements()));
  if (!v.empty())
    std::memcpy(v.data(), t.data(), v.size() * sizeof(float));
  return v;
}

std::vector<int64_t> I64Values(const Tensor &t) {
  EXPECT_EQ(t.dtype(), proto::I64);
  std::vector<int64_t> v(static_cast<size_t>(t.num_elements()));
  if (!v.empty())
    std::memcpy(v.data(), t.data(), v.size() * sizeof(int64_t));
  return v;
}

namespace {
proto::TensorSpec Spec(const std::string &name, DType dtype, std::vector<int64_t> shape,
                       std::vector<std::string> dims = {}) {
  proto::TensorSpec s;
  s.set_name(name);
  s.set_dtype(dtype);
  for (int64_t d : shape)
    s.add_shape(d);
  for (const std::string &d : dims)
    s.add_dim_names(d);
  return s;
}
} // namespace

absl::Status WriteToyArtifact(const std::string &path, const std::string &prefix,
                              const std::string &target) {
  proto::Manifest m;
  m.set_target(target);
  m.set_cpu("x86-64");
  m.set_producer("btrt-tests");
  auto cases = FixtureCases();
  if (cases.empty())
    return absl::NotFoundError("no fixtures");
  auto config = LoadModelConfig(cases[0]);
  if (!config.ok())
    return config.status();
  *m.mutable_config() = *config;
  proto::EntryPoint *eval = m.add_entry_points();
  eval->set_name("eval");
  eval->set_symbol("bt_entry_eval");
  eval->add_params("w");
  *eval->add_inputs() = Spec("input_ids", proto::I64, {-1, -1}, {"B", "T"});
  *eval->add_inputs() = Spec("attention_mask", proto::I64, {-1, -1}, {"B", "T"});
  *eval->add_outputs() = Spec("logits", proto::F32, {-1, -1, 5}, {"B", "T", "V"});
  proto::EntryPoint *loss = m.add_entry_points();
  *loss = *eval;
  loss->set_name("eval_loss");
  loss->set_symbol("bt_entry_eval_loss");
  *loss->add_inputs() = Spec("labels", proto::I64, {-1, -1}, {"B", "T"});
  *loss->add_outputs() = Spec("loss", proto::F32, {});
  proto::EntryPoint *add = m.add_entry_points();
  add->set_name("add");
  add->set_symbol("bt_entry_add");
  *add->add_inputs() = Spec("a", proto::F32, {-1, 3});
  *add->add_inputs() = Spec("b", proto::F32, {-1, 3});
  *add->add_outputs() = Spec("sum", proto::F32, {-1, 3});
  proto::EntryPoint *wrong = m.add_entry_points();
  wrong->set_name("wrong_shape");
  wrong->set_symbol("bt_entry_wrong_shape");
  *wrong->add_inputs() = Spec("x", proto::F32, {-1, -1}, {"N", "M"});
  *wrong->add_outputs() = Spec("y", proto::F32, {-1, -1}, {"N", "M"});
  ArtifactWriter w(m);
  w.SetKernels(ReadRaw(BT_TEST_KERNELS));
  Tensor weight = MakeF32({5}, {1, 2, 3, 4, 5});
  absl::Status s = w.AddWeight("w", weight);
  if (!s.ok())
    return s;
  if (!prefix.empty())
    w.SetPrefixFile(prefix);
  return w.Write(path);
}

absl::Status WriteTrainArtifact(const std::string &path, int64_t vocab,
                                const std::string &tokenizer, const std::string &prefix) {
  proto::Manifest m;
  m.set_target("cpu");
  m.set_cpu("x86-64");
  m.set_producer("btrt-tests");
  auto cases = FixtureCases();
  if (cases.empty())
    return absl::NotFoundError("no fixtures");
  auto config = LoadModelConfig(cases[0]);
  if (!config.ok())
    return config.status();
  config->set_vocab_size(vocab);
  config->set_name("fake_bigram");
  *m.mutable_config() = *config;
  const int64_t L = config->block_length();
  auto batch = [&](proto::EntryPoint *ep) {
    *ep->add_inputs() = Spec("input_ids", proto::I64, {-1, -1, L}, {"B", "N_blk", "L_B"});
    *ep->add_inputs() = Spec("attention_mask", proto::I64, {-1, -1, L}, {"B", "N_blk", "L_B"});
    *ep->add_inputs() = Spec("block_attention_mask", proto::I64, {-1, -1}, {"B", "N_blk"});
    *ep->add_inputs() = Spec("labels", proto::I64, {-1, -1, L}, {"B", "N_blk", "L_B"});
  };
  proto::EntryPoint *ts = m.add_entry_points();
  ts->set_name("train_step");
  ts->set_symbol("bt_entry_train_step");
  batch(ts);
  *ts->add_inputs() = Spec("step", proto::I64, {});
  *ts->add_inputs() = Spec("peak_lr", proto::F32, {});
  *ts->add_inputs() = Spec("warmup_steps", proto::I64, {});
  *ts->add_inputs() = Spec("total_steps", proto::I64, {});
  for (const char *name : {"param.bigram", "adam_m.bigram", "adam_v.bigram"}) {
    proto::TensorSpec s = Spec(name, proto::F32, {vocab, vocab});
    s.set_inout(true);
    *ts->add_inputs() = s;
  }
  for (const char *name : {"loss", "grad_norm", "lr"})
    *ts->add_outputs() = Spec(name, proto::F32, {});
  proto::EntryPoint *ev = m.add_entry_points();
  ev->set_name("eval_loss");
  ev->set_symbol("bt_entry_eval_loss");
  ev->add_params("bigram");
  batch(ev);
  *ev->add_outputs() = Spec("logits", proto::F32, {-1, -1, L, vocab}, {"B", "", "L_B", "V"});
  *ev->add_outputs() = Spec("loss", proto::F32, {});
  ArtifactWriter w(m);
  w.SetKernels(ReadRaw(BT_TEST_TRAIN_KERNELS));
  w.SetTokenizer(tokenizer, DetectTokenizerKind(tokenizer));
  Tensor bigram = MakeF32({vocab, vocab}, std::vector<float>(vocab * vocab, 0.0f));
  // A weight no entry trains (as the block decoder's embed_in).
  Tensor untrained = MakeF32({2, 3}, {1, 2, 3, 4, 5, 6});
  for (auto &[name, t] : {std::pair<const char *, Tensor *>{"bigram", &bigram},
                          {"untrained", &untrained}}) {
    absl::Status s = w.AddWeight(name, *t);
    if (!s.ok())
      return s;
  }
  if (!prefix.empty())
    w.SetPrefixFile(prefix);
  return w.Write(path);
}

absl::Status WriteGenArtifact(const std::string &path,
                              const GenArtifactOptions &o) {
  proto::Manifest m;
  m.set_target("cpu");
  m.set_cpu("x86-64");
  m.set_producer("btrt-tests");
  proto::ModelConfig &c = *m.mutable_config();
  c.set_kind(o.vanilla ? proto::ModelConfig::VANILLA
                       : proto::ModelConfig::BLOCK_TRANSFORMER);
  c.set_name(o.vanilla ? "fake_vanilla" : "fake_block");
  c.set_vocab_size(kFakeVocab);
  c.set_block_length(o.vanilla ? 1 : kFakeBlock);
  c.set_prefix_length(o.vanilla ? 0 : kFakePrefix);
  c.set_embedder_width(1);
  for (proto::NeoXConfig *n : {c.mutable_block_decoder(), c.mutable_token_decoder()}) {
    n->set_hidden_size(4);
    n->set_num_layers(1);
    n->set_num_heads(1);
    n->set_head_dim(2);
    n->set_max_position_embeddings(kFakePositions);
  }
  c.set_pad_token_id(0);
  c.set_eos_token_id(0);
  c.set_bos_token_id(0);
  c.set_generation_pad_token_id(o.vanilla ? 0 : 1);

  auto kv = [&o](proto::EntryPoint *ep) {
    proto::TensorSpec s =
        Spec("kv_cache", proto::F32,
             o.dynamic_kv_layout ? std::vector<int64_t>{-1, -1, 2, -1, -1, -1}
                                 : std::vector<int64_t>{-1, 1, 2, 1, -1, 2},
             {"B", "", "", "", "C", ""});
    s.set_inout(true);
    *ep->add_inputs() = s;
    s = Spec("kv_valid", proto::I64, {-1, -1}, {"B", "C"});
    s.set_inout(true);
    *ep->add_inputs() = s;
    s = Spec("cache_length", proto::I64, {});
    s.set_inout(o.inout_length);
    *ep->add_inputs() = s;
  };
  const std::string pre = o.vanilla ? "bt_entry_vanilla_" : "bt_entry_block_";
  auto entry = [&](const std::string &name, const std::string &symbol) {
    proto::EntryPoint *ep = m.add_entry_points();
    ep->set_name(name);
    ep->set_symbol(pre + symbol);
    ep->add_params("peak");
    return ep;
  };
  if (!o.vanilla) {
    proto::EntryPoint *ep = entry("prefill", "prefill");
    *ep->add_inputs() = Spec("input_ids", proto::I64, {-1, -1, 4}, {"B", "N_blk", "L_B"});
    *ep->add_inputs() = Spec("block_attention_mask", proto::I64, {-1, -1}, {"B", "N_blk"});
    kv(ep);
    *ep->add_outputs() = Spec("context", proto::F32, {-1, 4}, {"B", "D"});
    ep = entry("decode_tokens",
               o.short_decode_tokens ? "decode_tokens_short" : "decode_tokens");
    *ep->add_inputs() = Spec("context", proto::F32, {-1, 4}, {"B", "D"});
    *ep->add_inputs() = Spec("positions", proto::I64, {kFakePrefix + kFakeBlock - 1});
    *ep->add_inputs() = Spec("sampler", proto::I64, {});
    *ep->add_outputs() = Spec("tokens", proto::I64, {-1, 4}, {"B", "L_B"});
    *ep->add_outputs() = Spec("step_logits", proto::F32, {-1, 4, kFakeVocab}, {"B", "L_B", "V"});
    if (!o.without_decode) {
      ep = entry("decode_block", "decode_block");
      *ep->add_inputs() = Spec("input_ids", proto::I64, {-1, 1, 4}, {"B", "", "L_B"});
      kv(ep);
      *ep->add_outputs() = Spec("context", proto::F32, {-1, 4}, {"B", "D"});
    }
  } else {
    proto::EntryPoint *ep = entry("prefill", "prefill");
    for (const char *n : {"input_ids", "attention_mask", "positions"})
      *ep->add_inputs() = Spec(n, proto::I64, {-1, -1}, {"B", "T"});
    kv(ep);
    *ep->add_outputs() = Spec("logits", proto::F32, {-1, kFakeVocab}, {"B", "V"});
    if (!o.without_decode) {
      ep = entry("decode_step", "decode_step");
      for (const char *n : {"input_ids", "left_padding"})
        *ep->add_inputs() = Spec(n, proto::I64, {-1, 1}, {"B", ""});
      *ep->add_inputs() = Spec("sampler", proto::I64, {});
      kv(ep);
      *ep->add_outputs() = Spec("tokens", proto::I64, {-1, 1}, {"B", ""});
      *ep->add_outputs() = Spec("logits", proto::F32, {-1, kFakeVocab}, {"B", "V"});
    }
  }
  ArtifactWriter w(m);
  w.SetKernels(ReadRaw(BT_TEST_GEN_KERNELS));
  if (!o.tokenizer.empty())
    w.SetTokenizer(o.tokenizer, DetectTokenizerKind(o.tokenizer));
  Tensor peak = MakeF32({1}, {kFakePeak});
  absl::Status s = w.AddWeight("peak", peak);
  if (!s.ok())
    return s;
  if (!o.prefix.empty())
    w.SetPrefixFile(o.prefix);
  return w.Write(path);
}

absl::Status WriteReplayArtifact(const std::string &path,
                                 const proto::ModelConfig &config,
                                 const Tensor &logits) {
  proto::Manifest m;
  m.set_target("cpu");
  m.set_producer("btrt-tests");
  *m.mutable_config() = config;
  const int64_t L = config.block_length(), P = config.prefix_length();
  const int64_t V = config.vocab_size();
  auto kv = [](proto::EntryPoint *ep) {
    proto::TensorSpec s = Spec("kv_cache", proto::F32, {-1, 1, 2, 1, -1, 2},
                               {"B", "", "", "", "C", ""});
    s.set_inout(true);
    *ep->add_inputs() = s;
    s = Spec("kv_valid", proto::I64, {-1, -1}, {"B", "C"});
    s.set_inout(true);
    *ep->add_inputs() = s;
    *ep->add_inputs() = Spec("cache_length", proto::I64, {});
  };
  auto entry = [&](const std::string &name) {
    proto::EntryPoint *ep = m.add_entry_points();
    ep->set_name(name);
    ep->set_symbol("bt_entry_replay_" + name);
    ep->add_params("replay.logits");
    ep->add_params("replay.shape");
    return ep;
  };
  proto::EntryPoint *ep = entry("prefill");
  *ep->add_inputs() = Spec("input_ids", proto::I64, {-1, -1, L}, {"B", "N_blk", "L_B"});
  *ep->add_inputs() = Spec("block_attention_mask", proto::I64, {-1, -1}, {"B", "N_blk"});
  kv(ep);
  *ep->add_outputs() = Spec("context", proto::F32, {-1, 4}, {"B", "D"});
  ep = entry("decode_tokens");
  *ep->add_inputs() = Spec("context", proto::F32, {-1, 4}, {"B", "D"});
  // The token decoder's positions, as bt-generate-entry-points sizes them:
  // P + L_B - 1 (prefix), L_B (summation: no prefix slots).
  const int64_t S_in =
      config.strategy() == proto::ModelConfig::SUMMATION ? L : P + L - 1;
  *ep->add_inputs() = Spec("positions", proto::I64, {S_in});
  *ep->add_inputs() = Spec("sampler", proto::I64, {});
  *ep->add_outputs() = Spec("tokens", proto::I64, {-1, L}, {"B", "L_B"});
  *ep->add_outputs() = Spec("step_logits", proto::F32, {-1, L, V}, {"B", "L_B", "V"});
  ep = entry("decode_block");
  *ep->add_inputs() = Spec("input_ids", proto::I64, {-1, 1, L}, {"B", "", "L_B"});
  kv(ep);
  *ep->add_outputs() = Spec("context", proto::F32, {-1, 4}, {"B", "D"});
  ArtifactWriter w(m);
  w.SetKernels(ReadRaw(BT_TEST_GEN_KERNELS));
  absl::Status s = w.AddWeight("replay.logits", logits);
  if (!s.ok())
    return s;
  Tensor shape = MakeF32({2}, {static_cast<float>(L), static_cast<float>(P)});
  s = w.AddWeight("replay.shape", shape);
  if (!s.ok())
    return s;
  return w.Write(path);
}

} // namespace bt::rt::testing
