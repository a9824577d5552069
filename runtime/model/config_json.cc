//===- config_json.cc - the JSON config forms -----------------------------===//
//
// ParseConfigJson (config.h): the fixtures' config.json (block and vanilla)
// and Hugging Face GPTNeoXConfig files.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/model/config.h"
#include "bt/runtime/model/config_internal.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace bt::rt {
namespace {

using namespace config_internal;
using json = nlohmann::json;

//===----------------------------------------------------------------------===//
// (b), (c) JSON.
//===----------------------------------------------------------------------===//

class JsonReader {
public:
  explicit JsonReader(std::string file) : file_(std::move(file)) {}
  const std::string &file() const { return file_; }

  absl::Status Error(const std::string &path, absl::string_view msg) const {
    return Invalid(file_, absl::StrCat(path, ": ", msg));
  }

  absl::StatusOr<const json *> Obj(const json &parent, const std::string &key,
                                   const std::string &path) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null())
      return Error(path, "missing (expected an object)");
    if (!it->is_object())
      return Error(path, absl::StrCat("expected an object, got ", it->dump()));
    return &*it;
  }

  template <typename T>
  absl::StatusOr<std::optional<T>> Opt(const json &parent, const std::string &key,
                                       const std::string &path) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null())
      return std::optional<T>();
    const json &v = *it;
    if constexpr (std::is_same_v<T, int64_t>) {
      if (!v.is_number_integer())
        return Error(path, absl::StrCat("expected an integer, got ", v.dump()));
      return std::optional<T>(v.get<int64_t>());
    } else if constexpr (std::is_same_v<T, double>) {
      if (!v.is_number())
        return Error(path, absl::StrCat("expected a number, got ", v.dump()));
      return std::optional<T>(v.get<double>());
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean())
        return Error(path, absl::StrCat("expected a boolean, got ", v.dump()));
      return std::optional<T>(v.get<bool>());
    } else {
      if (!v.is_string())
        return Error(path, absl::StrCat("expected a string, got ", v.dump()));
      return std::optional<T>(v.get<std::string>());
    }
  }

  template <typename T>
  absl::StatusOr<T> Req(const json &parent, const std::string &key,
                        const std::string &path) const {
    BT_ASSIGN_OR_RETURN(std::optional<T> v, Opt<T>(parent, key, path));
    if (!v)
      return Error(path, "missing");
    return *v;
  }

private:
  std::string file_;
};

// A resolved stack in the fixture config.json form (HF field names).
absl::StatusOr<proto::NeoXConfig> ReadJsonStack(const JsonReader &r,
                                                const json &o,
                                                const std::string &p,
                                                const std::string &proto_prefix,
                                                Labels &L) {
  proto::NeoXConfig s;
  auto path = [&](const char *f) { return absl::StrCat(p, ".", f); };
  auto key = [&](const char *f) { return absl::StrCat(proto_prefix, ".", f); };
  BT_ASSIGN_OR_RETURN(int64_t hidden, r.Req<int64_t>(o, "hidden_size", path("hidden_size")));
  BT_ASSIGN_OR_RETURN(int64_t layers, r.Req<int64_t>(o, "num_hidden_layers", path("num_hidden_layers")));
  BT_ASSIGN_OR_RETURN(int64_t heads, r.Req<int64_t>(o, "num_attention_heads", path("num_attention_heads")));
  BT_ASSIGN_OR_RETURN(int64_t inter, r.Req<int64_t>(o, "intermediate_size", path("intermediate_size")));
  BT_ASSIGN_OR_RETURN(double pct, r.Req<double>(o, "rotary_pct", path("rotary_pct")));
  BT_ASSIGN_OR_RETURN(double base, r.Req<double>(o, "rotary_emb_base", path("rotary_emb_base")));
  BT_ASSIGN_OR_RETURN(int64_t maxpos, r.Req<int64_t>(o, "max_position_embeddings", path("max_position_embeddings")));
  BT_ASSIGN_OR_RETURN(double eps, r.Req<double>(o, "layer_norm_eps", path("layer_norm_eps")));
  BT_ASSIGN_OR_RETURN(std::string act, r.Req<std::string>(o, "hidden_act", path("hidden_act")));
  BT_ASSIGN_OR_RETURN(bool par, r.Req<bool>(o, "use_parallel_residual", path("use_parallel_residual")));
  BT_ASSIGN_OR_RETURN(std::optional<int64_t> hd, r.Opt<int64_t>(o, "head_dim", path("head_dim")));
  BT_ASSIGN_OR_RETURN(std::optional<int64_t> rd, r.Opt<int64_t>(o, "rotary_ndims", path("rotary_ndims")));
  BT_ASSIGN_OR_RETURN(std::optional<bool> tie, r.Opt<bool>(o, "tie_word_embeddings", path("tie_word_embeddings")));
  BT_ASSIGN_OR_RETURN(std::optional<bool> bias, r.Opt<bool>(o, "attention_bias", path("attention_bias")));
  // The block decoder has no LM head, so tying is meaningless there.
  if (tie && *tie && p != "block_decoder")
    return Unsupported(r.file(), absl::StrCat(path("tie_word_embeddings"),
                                              " (true) is not supported (bt "
                                              "expects an untied embed_out)"));
  if (bias && !*bias)
    return Unsupported(r.file(), absl::StrCat(path("attention_bias"),
                                              " (false) is not supported"));
  auto rs = o.find("rope_scaling");
  if (rs != o.end() && !rs->is_null())
    return Unsupported(r.file(), absl::StrCat(path("rope_scaling"),
                                              ": rope scaling is not supported"));
  s.set_hidden_size(hidden);
  s.set_num_layers(layers);
  s.set_num_heads(heads);
  s.set_intermediate_size(inter);
  s.set_rotary_pct(pct);
  s.set_rotary_base(base);
  s.set_max_position_embeddings(maxpos);
  s.set_layer_norm_eps(eps);
  s.set_hidden_act(act);
  s.set_use_parallel_residual(par);
  FillDerived(s);
  if (hd)
    s.set_head_dim(*hd);
  if (rd)
    s.set_rotary_dims(*rd);
  L.Set(key("hidden_size"), path("hidden_size"));
  L.Set(key("num_layers"), path("num_hidden_layers"));
  L.Set(key("num_heads"), path("num_attention_heads"));
  L.Set(key("head_dim"), path("head_dim"));
  L.Set(key("intermediate_size"), path("intermediate_size"));
  L.Set(key("rotary_pct"), path("rotary_pct"));
  L.Set(key("rotary_dims"), path("rotary_ndims"));
  L.Set(key("rotary_base"), path("rotary_emb_base"));
  L.Set(key("max_position_embeddings"), path("max_position_embeddings"));
  L.Set(key("layer_norm_eps"), path("layer_norm_eps"));
  L.Set(key("hidden_act"), path("hidden_act"));
  L.Set(key("use_parallel_residual"), path("use_parallel_residual"));
  return s;
}

void ReadJsonTraining(const json &root, const std::string &dtype,
                      proto::ModelConfig &c) {
  if (dtype == "float32")
    c.set_checkpoint_dtype(proto::F32);
  else if (dtype == "bfloat16")
    c.set_checkpoint_dtype(proto::BF16);
  else if (dtype == "float16")
    c.set_checkpoint_dtype(proto::F16);
  auto opt = root.find("optimizer_fixture");
  if (opt == root.end() || !opt->is_object())
    return;
  auto num = [&](const char *k) -> double {
    auto it = opt->find(k);
    return it != opt->end() && it->is_number() ? it->get<double>() : 0.0;
  };
  c.set_learning_rate(num("lr"));
  c.set_weight_decay(num("weight_decay"));
  auto betas = opt->find("betas");
  if (betas != opt->end() && betas->is_array() && betas->size() == 2 &&
      (*betas)[0].is_number() && (*betas)[1].is_number()) {
    c.set_adam_beta1((*betas)[0].get<double>());
    c.set_adam_beta2((*betas)[1].get<double>());
  }
}

std::string ProvenanceDtype(const json &root) {
  auto p = root.find("provenance");
  if (p == root.end() || !p->is_object())
    return "";
  auto d = p->find("dtype");
  return d != p->end() && d->is_string() ? d->get<std::string>() : "";
}

absl::StatusOr<proto::ModelConfig> ParseFixtureBlockJson(const JsonReader &r,
                                                         const json &root) {
  proto::ModelConfig c;
  Labels L;
  c.set_kind(proto::ModelConfig::BLOCK_TRANSFORMER);
  c.set_source("config-json");
  BT_ASSIGN_OR_RETURN(std::optional<std::string> name, r.Opt<std::string>(root, "case", "case"));
  if (name)
    c.set_name(*name);
  BT_ASSIGN_OR_RETURN(int64_t lb, r.Req<int64_t>(root, "block_length", "block_length"));
  BT_ASSIGN_OR_RETURN(int64_t n_emb, r.Req<int64_t>(root, "n_embedding_tokens", "n_embedding_tokens"));
  BT_ASSIGN_OR_RETURN(int64_t vocab, r.Req<int64_t>(root, "vocab_size", "vocab_size"));
  if (n_emb != 1)
    return Unsupported(r.file(), absl::StrCat("n_embedding_tokens (", n_emb,
                                              ") is not supported: bt implements 1"));
  c.set_block_length(lb);
  c.set_vocab_size(vocab);
  L.Set("block_length", "block_length");
  L.Set("vocab_size", "vocab_size");
  BT_ASSIGN_OR_RETURN(int64_t pad, r.Req<int64_t>(root, "pad_token_id", "pad_token_id"));
  BT_ASSIGN_OR_RETURN(int64_t eos, r.Req<int64_t>(root, "eos_token_id", "eos_token_id"));
  BT_ASSIGN_OR_RETURN(std::optional<int64_t> bos,
                      r.Opt<int64_t>(root, "token_decoder_bos_placeholder_id",
                                     "token_decoder_bos_placeholder_id"));
  BT_ASSIGN_OR_RETURN(std::optional<int64_t> gpad,
                      r.Opt<int64_t>(root, "generation_pad_token_id",
                                     "generation_pad_token_id"));
  c.set_pad_token_id(pad);
  c.set_eos_token_id(eos);
  c.set_bos_token_id(bos.value_or(eos));
  c.set_generation_pad_token_id(gpad.value_or(1));
  L.Set("bos_token_id", "token_decoder_bos_placeholder_id");

  BT_ASSIGN_OR_RETURN(const json *emb, r.Obj(root, "embedder", "embedder"));
  BT_ASSIGN_OR_RETURN(int64_t ew, r.Req<int64_t>(*emb, "hidden_size", "embedder.hidden_size"));
  BT_ASSIGN_OR_RETURN(int64_t evocab, r.Req<int64_t>(*emb, "vocab_size", "embedder.vocab_size"));
  BT_ASSIGN_OR_RETURN(std::optional<std::string> proj,
                      r.Opt<std::string>(*emb, "projection_method", "embedder.projection_method"));
  if (proj && *proj != "concat" && *proj != "projection_layer")
    return Unsupported(r.file(), absl::StrCat("embedder.projection_method ('", *proj,
                                              "') is not supported"));
  if (proj && *proj == "projection_layer")
    c.set_embedder_projection(proto::ModelConfig::PROJECTION_LAYER);
  if (evocab != vocab)
    return r.Error("embedder.vocab_size",
                   absl::StrCat("(", evocab, ") must equal vocab_size (", vocab, ")"));
  c.set_embedder_width(ew);
  L.Set("embedder_width", "embedder.hidden_size");

  BT_ASSIGN_OR_RETURN(const json *bd, r.Obj(root, "block_decoder", "block_decoder"));
  BT_ASSIGN_OR_RETURN(const json *td, r.Obj(root, "token_decoder", "token_decoder"));
  BT_ASSIGN_OR_RETURN(*c.mutable_block_decoder(),
                      ReadJsonStack(r, *bd, "block_decoder", "block_decoder", L));
  BT_ASSIGN_OR_RETURN(*c.mutable_token_decoder(),
                      ReadJsonStack(r, *td, "token_decoder", "token_decoder", L));
  for (const auto &[o, p] : {std::make_pair(bd, "block_decoder"),
                             std::make_pair(td, "token_decoder")}) {
    BT_ASSIGN_OR_RETURN(std::optional<int64_t> v,
                        r.Opt<int64_t>(*o, "vocab_size", absl::StrCat(p, ".vocab_size")));
    if (v && *v != vocab)
      return r.Error(absl::StrCat(p, ".vocab_size"),
                     absl::StrCat("(", *v, ") must equal vocab_size (", vocab, ")"));
  }
  BT_ASSIGN_OR_RETURN(std::string strategy,
                      r.Req<std::string>(*td, "decoding_strategy",
                                         "token_decoder.decoding_strategy"));
  if (strategy == "prefix")
    c.set_strategy(proto::ModelConfig::PREFIX);
  else if (strategy == "summation")
    c.set_strategy(proto::ModelConfig::SUMMATION);
  else
    return Unsupported(r.file(), absl::StrCat("token_decoder.decoding_strategy ('",
                                              strategy, "') is not supported"));
  BT_ASSIGN_OR_RETURN(std::optional<std::string> em,
                      r.Opt<std::string>(*td, "expansion_method",
                                         "token_decoder.expansion_method"));
  if (!em || *em != "expansion_layer")
    return Unsupported(r.file(), "token_decoder.expansion_method: bt implements "
                                 "'expansion_layer'");
  BT_ASSIGN_OR_RETURN(int64_t p, r.Req<int64_t>(*td, "prefix_length",
                                                "token_decoder.prefix_length"));
  BT_ASSIGN_OR_RETURN(std::optional<int64_t> ratio,
                      r.Opt<int64_t>(*td, "expansion_ratio", "token_decoder.expansion_ratio"));
  if (c.strategy() == proto::ModelConfig::SUMMATION) {
    // Official summation has no prefix (config.json prefix_length 0): the
    // n_emb * expansion_ratio expansion slots (default L_B) are added to the
    // token embeddings. bt's prefix_length counts those slots.
    if (p != 0)
      return r.Error("token_decoder.prefix_length",
                     absl::StrCat("(", p, ") must be 0 for decoding_strategy 'summation'"));
    const int64_t slots = n_emb * ratio.value_or(c.block_length());
    c.set_prefix_length(slots);
    L.Set("prefix_length", "expansion slots n_embedding_tokens * "
                           "token_decoder.expansion_ratio (summation)");
  } else {
    if (ratio && *ratio * n_emb != p)
      return r.Error("token_decoder.prefix_length",
                     absl::StrCat("(", p, ") must equal n_embedding_tokens (", n_emb,
                                  ") * token_decoder.expansion_ratio (", *ratio, ")"));
    c.set_prefix_length(p);
    L.Set("prefix_length", "token_decoder.prefix_length");
  }
  ReadJsonTraining(root, ProvenanceDtype(root), c);
  BT_RETURN_IF_ERROR(ValidateWithLabels(c, r.file(), L));
  return c;
}

absl::StatusOr<proto::ModelConfig> ParseFixtureVanillaJson(const JsonReader &r,
                                                           const json &root) {
  proto::ModelConfig c;
  Labels L;
  c.set_kind(proto::ModelConfig::VANILLA);
  c.set_source("config-json");
  BT_ASSIGN_OR_RETURN(std::optional<std::string> name, r.Opt<std::string>(root, "case", "case"));
  if (name)
    c.set_name(*name);
  BT_ASSIGN_OR_RETURN(int64_t vocab, r.Req<int64_t>(root, "vocab_size", "vocab_size"));
  BT_ASSIGN_OR_RETURN(int64_t eos, r.Req<int64_t>(root, "eos_token_id", "eos_token_id"));
  BT_ASSIGN_OR_RETURN(std::optional<int64_t> gpad,
                      r.Opt<int64_t>(root, "pad_token_id_generation", "pad_token_id_generation"));
  BT_ASSIGN_OR_RETURN(const json *m, r.Obj(root, "model", "model"));
  BT_ASSIGN_OR_RETURN(*c.mutable_block_decoder(), ReadJsonStack(r, *m, "model", "block_decoder", L));
  BT_ASSIGN_OR_RETURN(std::optional<int64_t> mv,
                      r.Opt<int64_t>(*m, "vocab_size", "model.vocab_size"));
  if (mv && *mv != vocab)
    return r.Error("model.vocab_size",
                   absl::StrCat("(", *mv, ") must equal vocab_size (", vocab, ")"));
  BT_ASSIGN_OR_RETURN(std::optional<int64_t> bos, r.Opt<int64_t>(*m, "bos_token_id", "model.bos_token_id"));
  c.set_vocab_size(vocab);
  c.set_block_length(1);
  c.set_eos_token_id(eos);
  c.set_pad_token_id(eos);
  c.set_bos_token_id(bos.value_or(eos));
  c.set_generation_pad_token_id(gpad.value_or(eos));
  ReadJsonTraining(root, ProvenanceDtype(root), c);
  BT_RETURN_IF_ERROR(ValidateWithLabels(c, r.file(), L));
  return c;
}

// (c) HF GPTNeoXConfig (transformers 4.39.3 defaults for absent fields).
absl::StatusOr<proto::ModelConfig> ParseHfNeoXJson(const JsonReader &r,
                                                   const json &root) {
  proto::ModelConfig c;
  Labels L;
  c.set_kind(proto::ModelConfig::VANILLA);
  c.set_source("hf-gpt-neox");
  proto::NeoXConfig s;
  auto i64 = [&](const char *k, int64_t dflt) -> absl::StatusOr<int64_t> {
    BT_ASSIGN_OR_RETURN(std::optional<int64_t> v, r.Opt<int64_t>(root, k, k));
    return v.value_or(dflt);
  };
  auto f64 = [&](const char *k, double dflt) -> absl::StatusOr<double> {
    BT_ASSIGN_OR_RETURN(std::optional<double> v, r.Opt<double>(root, k, k));
    return v.value_or(dflt);
  };
  BT_ASSIGN_OR_RETURN(int64_t vocab, i64("vocab_size", 50432));
  BT_ASSIGN_OR_RETURN(int64_t hidden, i64("hidden_size", 6144));
  BT_ASSIGN_OR_RETURN(int64_t layers, i64("num_hidden_layers", 44));
  BT_ASSIGN_OR_RETURN(int64_t heads, i64("num_attention_heads", 64));
  BT_ASSIGN_OR_RETURN(int64_t inter, i64("intermediate_size", 24576));
  BT_ASSIGN_OR_RETURN(int64_t maxpos, i64("max_position_embeddings", 2048));
  BT_ASSIGN_OR_RETURN(int64_t bos, i64("bos_token_id", 0));
  BT_ASSIGN_OR_RETURN(int64_t eos, i64("eos_token_id", 2));
  BT_ASSIGN_OR_RETURN(double pct, f64("rotary_pct", 0.25));
  BT_ASSIGN_OR_RETURN(double base, f64("rotary_emb_base", 10000));
  BT_ASSIGN_OR_RETURN(double eps, f64("layer_norm_eps", 1e-5));
  BT_ASSIGN_OR_RETURN(std::optional<std::string> act, r.Opt<std::string>(root, "hidden_act", "hidden_act"));
  BT_ASSIGN_OR_RETURN(std::optional<bool> par, r.Opt<bool>(root, "use_parallel_residual", "use_parallel_residual"));
  BT_ASSIGN_OR_RETURN(std::optional<bool> tie, r.Opt<bool>(root, "tie_word_embeddings", "tie_word_embeddings"));
  BT_ASSIGN_OR_RETURN(std::optional<bool> bias, r.Opt<bool>(root, "attention_bias", "attention_bias"));
  BT_ASSIGN_OR_RETURN(std::optional<std::string> dtype, r.Opt<std::string>(root, "torch_dtype", "torch_dtype"));
  if (tie && *tie)
    return Unsupported(r.file(), "tie_word_embeddings (true) is not supported "
                                 "(bt expects an untied embed_out)");
  if (bias && !*bias)
    return Unsupported(r.file(), "attention_bias (false) is not supported");
  auto rs = root.find("rope_scaling");
  if (rs != root.end() && !rs->is_null())
    return Unsupported(r.file(), "rope_scaling: rope scaling is not supported");
  s.set_hidden_size(hidden);
  s.set_num_layers(layers);
  s.set_num_heads(heads);
  s.set_intermediate_size(inter);
  s.set_rotary_pct(pct);
  s.set_rotary_base(base);
  s.set_max_position_embeddings(maxpos);
  s.set_layer_norm_eps(eps);
  s.set_hidden_act(act.value_or("gelu"));
  s.set_use_parallel_residual(par.value_or(true));
  FillDerived(s);
  for (const char *f : {"hidden_size", "intermediate_size", "rotary_pct",
                        "max_position_embeddings", "layer_norm_eps",
                        "hidden_act", "use_parallel_residual"})
    L.Set(absl::StrCat("block_decoder.", f), f);
  L.Set("block_decoder.num_layers", "num_hidden_layers");
  L.Set("block_decoder.num_heads", "num_attention_heads");
  L.Set("block_decoder.rotary_base", "rotary_emb_base");
  *c.mutable_block_decoder() = s;
  c.set_vocab_size(vocab);
  c.set_block_length(1);
  c.set_eos_token_id(eos);
  c.set_pad_token_id(eos);
  c.set_bos_token_id(bos);
  c.set_generation_pad_token_id(eos);
  ReadJsonTraining(json::object(), dtype.value_or(""), c);
  c.set_name(ParentDirName(r.file()));
  BT_RETURN_IF_ERROR(ValidateWithLabels(c, r.file(), L));
  return c;
}

} // namespace

absl::StatusOr<proto::ModelConfig> ParseConfigJson(absl::string_view text,
                                                   const std::string &path) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception &e) {
    return Invalid(path, absl::StrCat("not valid JSON: ", e.what()));
  }
  if (!root.is_object())
    return Invalid(path, "expected a JSON object");
  JsonReader r(path);
  BT_ASSIGN_OR_RETURN(std::optional<std::string> mt,
                      r.Opt<std::string>(root, "model_type", "model_type"));
  if (!mt)
    return r.Error("model_type", "missing (expected 'block_transformer', "
                                 "'gpt_neox_vanilla' or 'gpt_neox')");
  absl::StatusOr<proto::ModelConfig> c;
  try {
    if (*mt == "block_transformer")
      c = ParseFixtureBlockJson(r, root);
    else if (*mt == "gpt_neox_vanilla")
      c = ParseFixtureVanillaJson(r, root);
    else if (*mt == "gpt_neox")
      c = ParseHfNeoXJson(r, root);
    else
      return Unsupported(path, absl::StrCat("model_type ('", *mt,
                                            "') is not supported (expected "
                                            "'block_transformer', "
                                            "'gpt_neox_vanilla' or 'gpt_neox')"));
  } catch (const json::exception &e) {
    return Invalid(path, absl::StrCat("unexpected JSON structure: ", e.what()));
  }
  if (c.ok() && c->name().empty())
    c->set_name(ParentDirName(path));
  return c;
}

} // namespace bt::rt
