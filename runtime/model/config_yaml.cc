//===- config_yaml.cc - the official trainer YAML -------------------------===//
//
// ParseOfficialYamlConfig (config.h): the official Hydra trainer configs and
// their resolution rules (util/config.py, model/utils.py,
// model/embedder/lookup.py, model/token_decoder/base.py of
// itsnamgyu/block-transformer @ 17842dd).
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/model/config.h"
#include "bt/runtime/model/config_internal.h"

#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/base/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace bt::rt {
namespace {

using namespace config_internal;

constexpr absl::string_view kInherited =
    "inherited from EleutherAI/pythia-410m-deduped";

//===----------------------------------------------------------------------===//
// (a) Official Hydra trainer YAML.
//===----------------------------------------------------------------------===//

class YamlReader {
public:
  explicit YamlReader(std::string file) : file_(std::move(file)) {}
  const std::string &file() const { return file_; }

  absl::Status Error(const std::string &path, absl::string_view msg) const {
    return Invalid(file_, absl::StrCat(path, ": ", msg));
  }
  absl::Status Missing(const std::string &path, absl::string_view what) const {
    return Invalid(file_, absl::StrCat(path, ": missing (", what, ")"));
  }

  // `node` must be a mapping (or absent/null when `optional`).
  absl::Status ExpectMap(const YAML::Node &node, const std::string &path,
                         bool optional) const {
    if (!node.IsDefined() || node.IsNull()) {
      if (optional)
        return absl::OkStatus();
      return Missing(path, "expected a mapping");
    }
    if (!node.IsMap())
      return Error(path, absl::StrCat("expected a mapping, got ",
                                      Describe(node)));
    return absl::OkStatus();
  }

  static bool Present(const YAML::Node &parent, const std::string &key) {
    if (!parent.IsDefined() || !parent.IsMap())
      return false;
    YAML::Node n = parent[key];
    return n.IsDefined() && !n.IsNull();
  }

  template <typename T>
  absl::StatusOr<std::optional<T>> Opt(const YAML::Node &parent,
                                       const std::string &key,
                                       const std::string &path) const {
    if (!Present(parent, key))
      return std::optional<T>();
    YAML::Node n = parent[key];
    if (!n.IsScalar())
      return Error(path, absl::StrCat("expected ", TypeName<T>(), ", got ",
                                      Describe(n)));
    try {
      return std::optional<T>(n.as<T>());
    } catch (const YAML::Exception &) {
      return Error(path, absl::StrCat("expected ", TypeName<T>(), ", got '",
                                      n.Scalar(), "'"));
    }
  }

  template <typename T>
  absl::StatusOr<T> Req(const YAML::Node &parent, const std::string &key,
                        const std::string &path, absl::string_view why) const {
    BT_ASSIGN_OR_RETURN(std::optional<T> v, Opt<T>(parent, key, path));
    if (!v)
      return Missing(path, why);
    return *v;
  }

private:
  template <typename T> static const char *TypeName() {
    if constexpr (std::is_same_v<T, int64_t>)
      return "an integer";
    else if constexpr (std::is_same_v<T, double>)
      return "a number";
    else if constexpr (std::is_same_v<T, bool>)
      return "a boolean";
    else
      return "a string";
  }
  static std::string Describe(const YAML::Node &n) {
    if (n.IsMap())
      return "a mapping";
    if (n.IsSequence())
      return "a sequence";
    if (n.IsScalar())
      return absl::StrCat("'", n.Scalar(), "'");
    return "null";
  }
  std::string file_;
};

// GPTNeoXConfig / PretrainedConfig attributes the official loaders accept
// (setattr after hasattr) that do not change the architecture bt compiles.
bool IsHarmlessNeoXKey(absl::string_view k) {
  static const char *kKeys[] = {
      "hidden_dropout",    "attention_dropout", "classifier_dropout",
      "initializer_range", "use_cache",         "pad_token_id",
      "torch_dtype",       "architectures",     "sep_token_id",
      "decoder_start_token_id", "is_decoder",   "max_length",
      "output_hidden_states", "output_attentions", "return_dict",
      "use_bfloat16",      "transformers_version", "model_type",
      "_name_or_path",     "name_or_path"};
  for (const char *key : kKeys)
    if (k == key)
      return true;
  return false;
}

struct StackResult {
  proto::NeoXConfig cfg;
  int64_t vocab = kPythiaVocabSize;
  int64_t bos = kPythiaEosTokenId, eos = kPythiaEosTokenId;
  bool tie = false;
};

// Resolves one GPT-NeoX stack: pythia-410m-deduped values, overridden by the
// `config_node` entries (unless use_pretrained), then the block-mode autofill.
// `section` is e.g. "block_decoder", `cfg_path` "block_decoder.config",
// `proto_prefix` the ModelConfig field ("block_decoder"/"token_decoder").
absl::StatusOr<StackResult>
ResolveStack(const YamlReader &r, const YAML::Node &config_node,
             const std::string &cfg_path, const std::string &proto_prefix,
             bool use_pretrained, bool autofill, bool has_lm_head, Labels &L) {
  StackResult out;
  out.cfg = PythiaBaseConfig();
  auto key = [&](const char *f) { return absl::StrCat(proto_prefix, ".", f); };
  auto lab = [&](const char *f) { return absl::StrCat(cfg_path, ".", f); };
  const std::string note =
      use_pretrained ? absl::StrCat(kInherited, ", use_pretrained_weights")
                     : std::string(kInherited);
  L.Set(key("hidden_size"), lab("hidden_size"), note);
  L.Set(key("num_layers"), lab("num_hidden_layers"), note);
  L.Set(key("num_heads"), lab("num_attention_heads"), note);
  L.Set(key("head_dim"), absl::StrCat(cfg_path, " head_dim"),
        "hidden_size / num_attention_heads");
  L.Set(key("intermediate_size"), lab("intermediate_size"), note);
  L.Set(key("rotary_pct"), lab("rotary_pct"), note);
  L.Set(key("rotary_dims"), absl::StrCat(cfg_path, " rotary dims"),
        "int(head_dim * rotary_pct)");
  L.Set(key("rotary_base"), lab("rotary_emb_base"), note);
  L.Set(key("layer_norm_eps"), lab("layer_norm_eps"), note);
  L.Set(key("max_position_embeddings"), lab("max_position_embeddings"), note);
  L.Set(key("use_parallel_residual"), lab("use_parallel_residual"), note);
  L.Set(key("hidden_act"), lab("hidden_act"), note);

  const bool has_config = config_node.IsDefined() && !config_node.IsNull();
  if (has_config && !use_pretrained) {
    BT_RETURN_IF_ERROR(r.ExpectMap(config_node, cfg_path, true));
    for (auto it = config_node.begin(); it != config_node.end(); ++it) {
      const std::string k = it->first.as<std::string>();
      const std::string path = absl::StrCat(cfg_path, ".", k);
      auto setInt = [&](const char *field, auto setter) -> absl::Status {
        BT_ASSIGN_OR_RETURN(std::optional<int64_t> v,
                            r.Opt<int64_t>(config_node, k, path));
        if (v) {
          setter(*v);
          L.Set(key(field), path);
        }
        return absl::OkStatus();
      };
      auto setDouble = [&](const char *field, auto setter) -> absl::Status {
        BT_ASSIGN_OR_RETURN(std::optional<double> v,
                            r.Opt<double>(config_node, k, path));
        if (v) {
          setter(*v);
          L.Set(key(field), path);
        }
        return absl::OkStatus();
      };
      proto::NeoXConfig &c = out.cfg;
      if (k == "hidden_size") {
        BT_RETURN_IF_ERROR(setInt("hidden_size", [&](int64_t v) { c.set_hidden_size(v); }));
      } else if (k == "num_hidden_layers") {
        BT_RETURN_IF_ERROR(setInt("num_layers", [&](int64_t v) { c.set_num_layers(v); }));
      } else if (k == "num_attention_heads") {
        BT_RETURN_IF_ERROR(setInt("num_heads", [&](int64_t v) { c.set_num_heads(v); }));
      } else if (k == "intermediate_size") {
        BT_RETURN_IF_ERROR(setInt("intermediate_size", [&](int64_t v) { c.set_intermediate_size(v); }));
      } else if (k == "max_position_embeddings") {
        BT_RETURN_IF_ERROR(setInt("max_position_embeddings", [&](int64_t v) { c.set_max_position_embeddings(v); }));
      } else if (k == "rotary_pct") {
        BT_RETURN_IF_ERROR(setDouble("rotary_pct", [&](double v) { c.set_rotary_pct(v); }));
      } else if (k == "rotary_emb_base") {
        BT_RETURN_IF_ERROR(setDouble("rotary_base", [&](double v) { c.set_rotary_base(v); }));
      } else if (k == "layer_norm_eps") {
        BT_RETURN_IF_ERROR(setDouble("layer_norm_eps", [&](double v) { c.set_layer_norm_eps(v); }));
      } else if (k == "vocab_size") {
        BT_ASSIGN_OR_RETURN(std::optional<int64_t> v, r.Opt<int64_t>(config_node, k, path));
        if (v) {
          out.vocab = *v;
          L.Set(absl::StrCat(proto_prefix, ".vocab_size"), path);
        }
      } else if (k == "bos_token_id" || k == "eos_token_id") {
        BT_ASSIGN_OR_RETURN(std::optional<int64_t> v, r.Opt<int64_t>(config_node, k, path));
        if (v)
          (k == "bos_token_id" ? out.bos : out.eos) = *v;
      } else if (k == "hidden_act") {
        BT_ASSIGN_OR_RETURN(std::optional<std::string> v, r.Opt<std::string>(config_node, k, path));
        if (v) {
          c.set_hidden_act(*v);
          L.Set(key("hidden_act"), path);
        }
      } else if (k == "use_parallel_residual") {
        BT_ASSIGN_OR_RETURN(std::optional<bool> v, r.Opt<bool>(config_node, k, path));
        if (v) {
          c.set_use_parallel_residual(*v);
          L.Set(key("use_parallel_residual"), path);
        }
      } else if (k == "tie_word_embeddings") {
        BT_ASSIGN_OR_RETURN(std::optional<bool> v, r.Opt<bool>(config_node, k, path));
        if (v)
          out.tie = *v;
      } else if (k == "attention_bias") {
        BT_ASSIGN_OR_RETURN(std::optional<bool> v, r.Opt<bool>(config_node, k, path));
        if (v && !*v)
          return Unsupported(r.file(), absl::StrCat(path, " (false) is not supported "
                                                    "(bt expects attention biases)"));
      } else if (k == "rope_scaling") {
        if (YamlReader::Present(config_node, k))
          return Unsupported(r.file(), absl::StrCat(path, ": rope scaling is not supported"));
      } else if (IsHarmlessNeoXKey(k)) {
        // Accepted by the official loader; no effect on the compiled model.
      } else {
        return r.Error(path, "not a field of GPTNeoXConfig (the official "
                             "loader rejects it: \"Config key not found\")");
      }
    }
  }

  // util/config.py preprocess_config: block-mode autofill, only when a
  // `config:` section exists (it reads model.config.hidden_size).
  if (autofill && has_config) {
    if (!YamlReader::Present(config_node, "num_attention_heads")) {
      if (!YamlReader::Present(config_node, "hidden_size"))
        return r.Missing(lab("hidden_size"),
                         "needed to autofill num_attention_heads");
      const int64_t h = out.cfg.hidden_size();
      const int64_t hd = h <= 256 ? 32 : (h <= 1536 ? 64 : 128);
      if (h % hd != 0)
        return Invalid(r.file(),
                       absl::StrCat(lab("hidden_size"), " (", h,
                                    ") must be divisible by ", hd,
                                    " to autofill num_attention_heads (head "
                                    "dim 32 up to 256, 64 up to 1536, else "
                                    "128)"));
      out.cfg.set_num_heads(h / hd);
      L.Set(key("num_heads"), lab("num_attention_heads"),
            absl::StrCat("autofilled hidden_size / ", hd));
    }
    if (!YamlReader::Present(config_node, "intermediate_size")) {
      out.cfg.set_intermediate_size(4 * out.cfg.hidden_size());
      L.Set(key("intermediate_size"), lab("intermediate_size"),
            "autofilled 4 * hidden_size");
    }
  }
  if (out.tie && has_lm_head)
    return Unsupported(r.file(),
                       absl::StrCat(lab("tie_word_embeddings"),
                                    " (true) is not supported (bt expects an "
                                    "untied embed_out)"));
  FillDerived(out.cfg);
  return out;
}

// The hidden size a stack section will resolve to (for the structural checks
// that must come before the autofill).
absl::StatusOr<std::pair<int64_t, std::string>>
PeekHidden(const YamlReader &r, const YAML::Node &config_node,
           const std::string &cfg_path, bool use_pretrained) {
  if (!use_pretrained && config_node.IsDefined() && config_node.IsMap()) {
    BT_ASSIGN_OR_RETURN(
        std::optional<int64_t> v,
        r.Opt<int64_t>(config_node, "hidden_size",
                       absl::StrCat(cfg_path, ".hidden_size")));
    if (v)
      return std::make_pair(*v, absl::StrCat(cfg_path, ".hidden_size (", *v, ")"));
  }
  int64_t h = PythiaBaseConfig().hidden_size();
  return std::make_pair(h, absl::StrCat(cfg_path, ".hidden_size (", h, ", ",
                                        kInherited, ")"));
}

absl::Status CheckBaseModel(const YamlReader &r, const YAML::Node &section,
                            const std::string &path) {
  BT_ASSIGN_OR_RETURN(std::optional<std::string> base,
                      r.Opt<std::string>(section, "model_name_or_path", path));
  if (!base)
    return r.Missing(path, absl::StrCat("the base HF config, e.g. ",
                                        kPythiaBaseName));
  if (*base != kPythiaBaseName)
    return Unsupported(r.file(),
                       absl::StrCat(path, " ('", *base, "') is not supported: "
                                    "bt resolves configs against ",
                                    kPythiaBaseName, " only"));
  return absl::OkStatus();
}

absl::Status CheckPythiaTokenizer(const YamlReader &r, const YAML::Node &node,
                                  const std::string &path) {
  if (!node.IsDefined() || node.IsNull())
    return absl::OkStatus();
  if (!node.IsScalar())
    return r.Error(path, "expected a tokenizer name");
  if (node.Scalar() != "pythia")
    return Unsupported(r.file(),
                       absl::StrCat(path, " ('", node.Scalar(),
                                    "') is not supported: bt knows the token "
                                    "ids of the 'pythia' tokenizer only"));
  return absl::OkStatus();
}

// Training hyper-parameters and precision (informational).
absl::Status ReadTrainerFields(const YamlReader &r, const YAML::Node &root,
                               proto::ModelConfig &c) {
  BT_ASSIGN_OR_RETURN(auto lr, r.Opt<double>(root, "learning_rate", "learning_rate"));
  BT_ASSIGN_OR_RETURN(auto wd, r.Opt<double>(root, "weight_decay", "weight_decay"));
  BT_ASSIGN_OR_RETURN(auto b1, r.Opt<double>(root, "adam_beta1", "adam_beta1"));
  BT_ASSIGN_OR_RETURN(auto b2, r.Opt<double>(root, "adam_beta2", "adam_beta2"));
  BT_ASSIGN_OR_RETURN(auto ml, r.Opt<int64_t>(root, "max_length", "max_length"));
  c.set_learning_rate(lr.value_or(0));
  c.set_weight_decay(wd.value_or(0));
  c.set_adam_beta1(b1.value_or(0));
  c.set_adam_beta2(b2.value_or(0));
  c.set_max_length(ml.value_or(0));
  BT_ASSIGN_OR_RETURN(auto prec, r.Opt<std::string>(root, "precision", "precision"));
  const std::string p = prec.value_or("fp32");
  if (p == "fp32")
    c.set_checkpoint_dtype(proto::F32);
  else if (p == "bf16")
    c.set_checkpoint_dtype(proto::BF16);
  else if (p == "fp16")
    c.set_checkpoint_dtype(proto::F16);
  else
    return r.Error("precision",
                   absl::StrCat("'", p, "' is not one of fp32, fp16, bf16"));
  BT_ASSIGN_OR_RETURN(auto name, r.Opt<std::string>(root, "name", "name"));
  if (name)
    c.set_name(*name);
  return absl::OkStatus();
}

// Label of "<prefix>.vocab_size" (set by ResolveStack when overridden).
void SetVocabLabel(Labels &L, const std::string &prefix,
                   const std::string &cfg_path) {
  const std::string key = prefix + ".vocab_size";
  if (!L.Has(key))
    L.Set(key, cfg_path + ".vocab_size", std::string(kInherited));
}

absl::StatusOr<bool> UsePretrained(const YamlReader &r, const YAML::Node &section,
                                   const std::string &path) {
  BT_ASSIGN_OR_RETURN(std::optional<bool> v,
                      r.Opt<bool>(section, "use_pretrained_weights", path));
  return v.value_or(false);
}

/// The block length L_B (util/config.py: block_length -> a fixed
/// block_split); sets c.block_length. Errors: missing, non-positive, a
/// non-fixed block_split or one whose length differs.
absl::StatusOr<int64_t> ReadBlockLength(const YamlReader &r,
                                        const YAML::Node &root,
                                        proto::ModelConfig &c, Labels &L) {
  BT_ASSIGN_OR_RETURN(int64_t lb,
                      r.Req<int64_t>(root, "block_length", "block_length",
                                     "the fixed block length L_B"));
  c.set_block_length(lb);
  L.Set("block_length", "block_length");
  YAML::Node split = root["block_split"];
  if (YamlReader::Present(root, "block_split")) {
    BT_RETURN_IF_ERROR(r.ExpectMap(split, "block_split", false));
    BT_ASSIGN_OR_RETURN(std::string dist,
                        r.Req<std::string>(split, "distribution",
                                           "block_split.distribution",
                                           "e.g. 'fixed'"));
    if (dist != "fixed")
      return Unsupported(r.file(),
                         absl::StrCat("block_split.distribution ('", dist,
                                      "') is not supported: bt compiles fixed "
                                      "block lengths"));
    YAML::Node kw = split["distribution_kwargs"];
    BT_RETURN_IF_ERROR(r.ExpectMap(kw, "block_split.distribution_kwargs", true));
    BT_ASSIGN_OR_RETURN(std::optional<int64_t> len,
                        r.Opt<int64_t>(kw, "length",
                                       "block_split.distribution_kwargs.length"));
    if (len && *len != lb)
      return r.Error("block_split.distribution_kwargs.length",
                     absl::StrCat("(", *len, ") must equal block_length (", lb,
                                  ")"));
  }
  if (lb <= 0)
    return r.Error("block_length", absl::StrCat("(", lb, ") must be positive"));
  return lb;
}

/// The embedder section of a block config (model/embedder/lookup.py).
struct LookupEmbedder {
  int64_t n_embedding_tokens = 1;
  int64_t vocab_size = 0;
  std::optional<int64_t> hidden_size; // embedder.config.hidden_size, if given
  bool projection_layer = false;       // projection_method: projection_layer
};

/// Reads the embedder section: the lookup embedder with one embedding
/// token and concat or projection_layer projection (anything else is
/// Unimplemented).
absl::StatusOr<LookupEmbedder> ReadLookupEmbedder(const YamlReader &r,
                                                  const YAML::Node &emb) {
  BT_ASSIGN_OR_RETURN(std::string ecls,
                      r.Req<std::string>(emb, "cls", "embedder.cls", "e.g. 'lookup'"));
  if (ecls != "lookup")
    return Unsupported(r.file(),
                       absl::StrCat("embedder.cls ('", ecls,
                                    "') is not supported: bt implements the "
                                    "lookup embedder"));
  BT_ASSIGN_OR_RETURN(int64_t n_emb,
                      r.Req<int64_t>(emb, "n_embedding_tokens",
                                     "embedder.n_embedding_tokens",
                                     "tokens per block embedding, 1"));
  if (n_emb != 1)
    return Unsupported(r.file(),
                       absl::StrCat("embedder.n_embedding_tokens (", n_emb,
                                    ") is not supported: bt implements 1"));
  BT_ASSIGN_OR_RETURN(std::optional<std::string> proj,
                      r.Opt<std::string>(emb, "projection_method",
                                         "embedder.projection_method"));
  if (proj && *proj != "concat" && *proj != "projection_layer")
    return Unsupported(r.file(),
                       absl::StrCat("embedder.projection_method ('", *proj,
                                    "') is not supported: bt implements "
                                    "'concat' (the lookup default) and "
                                    "'projection_layer'"));
  YAML::Node ecfg = emb["config"];
  BT_RETURN_IF_ERROR(r.ExpectMap(ecfg, "embedder.config", false));
  BT_ASSIGN_OR_RETURN(int64_t evocab,
                      r.Req<int64_t>(ecfg, "vocab_size", "embedder.config.vocab_size",
                                     "the lookup embedder needs its vocabulary size"));
  BT_ASSIGN_OR_RETURN(std::optional<int64_t> ehidden,
                      r.Opt<int64_t>(ecfg, "hidden_size", "embedder.config.hidden_size"));
  return LookupEmbedder{n_emb, evocab, ehidden,
                        proj && *proj == "projection_layer"};
}

/// Checks the class, base model and config mapping of the block and token
/// decoder sections (gpt-neo-x only).
absl::Status CheckDecoderSections(const YamlReader &r, const YAML::Node &bd,
                                  const YAML::Node &td) {
  for (const auto &[node, name] :
       {std::make_pair(bd, "block_decoder"), std::make_pair(td, "token_decoder")}) {
    const std::string s(name);
    BT_ASSIGN_OR_RETURN(std::string cls,
                        r.Req<std::string>(node, "cls", s + ".cls", "e.g. 'gpt-neo-x'"));
    if (cls != "gpt-neo-x")
      return Unsupported(r.file(),
                         absl::StrCat(s, ".cls ('", cls,
                                      "') is not supported: bt implements "
                                      "'gpt-neo-x'"));
    BT_RETURN_IF_ERROR(CheckBaseModel(r, node, s + ".model_name_or_path"));
    BT_RETURN_IF_ERROR(r.ExpectMap(node["config"], s + ".config", true));
  }
  return absl::OkStatus();
}

/// The token decoder's input (model/token_decoder/base.py): the expansion
/// layer and the decoding strategy; sets c.strategy and c.prefix_length
/// (n_emb * expansion_ratio; summation defaults the ratio to `lb`).
absl::Status ReadTokenDecoderInput(const YamlReader &r, const YAML::Node &td,
                                   int64_t lb, int64_t n_emb,
                                   proto::ModelConfig &c, Labels &L) {
  BT_ASSIGN_OR_RETURN(std::optional<std::string> em,
                      r.Opt<std::string>(td, "expansion_method",
                                         "token_decoder.expansion_method"));
  if (!em || *em != "expansion_layer")
    return Unsupported(r.file(),
                       absl::StrCat("token_decoder.expansion_method (",
                                    em ? absl::StrCat("'", *em, "'") : "null",
                                    ") is not supported: bt implements "
                                    "'expansion_layer'"));
  BT_ASSIGN_OR_RETURN(std::string strategy,
                      r.Req<std::string>(td, "decoding_strategy",
                                         "token_decoder.decoding_strategy",
                                         "'prefix' or 'summation'"));
  BT_ASSIGN_OR_RETURN(std::optional<int64_t> ratio,
                      r.Opt<int64_t>(td, "expansion_ratio",
                                     "token_decoder.expansion_ratio"));
  if (strategy == "prefix") {
    c.set_strategy(proto::ModelConfig::PREFIX);
    if (!ratio)
      return r.Missing("token_decoder.expansion_ratio",
                       "required for decoding_strategy 'prefix'");
  } else if (strategy == "summation") {
    c.set_strategy(proto::ModelConfig::SUMMATION);
    if (!ratio)
      ratio = lb; // official default for summation
  } else {
    return Unsupported(r.file(),
                       absl::StrCat("token_decoder.decoding_strategy ('", strategy,
                                    "') is not supported: bt implements "
                                    "'prefix' and 'summation'"));
  }
  if (*ratio <= 0)
    return r.Error("token_decoder.expansion_ratio",
                   absl::StrCat("(", *ratio, ") must be positive"));
  c.set_prefix_length(n_emb * *ratio);
  L.Set("prefix_length",
        "prefix length embedder.n_embedding_tokens * token_decoder.expansion_ratio");
  return absl::OkStatus();
}

/// Token ids of the pythia tokenizer: eos from the token decoder's config,
/// pad := eos; the official loader sets the token decoder's generation pad
/// to 1 for GPTNeoXTokenizerFast.
void SetPythiaTokenIds(const StackResult &tstack, proto::ModelConfig &c,
                       Labels &L) {
  c.set_eos_token_id(tstack.eos);
  c.set_pad_token_id(tstack.eos);
  c.set_bos_token_id(tstack.bos);
  c.set_generation_pad_token_id(1);
  L.Set("eos_token_id", "token_decoder.config.eos_token_id");
  L.Set("bos_token_id", "token_decoder.config.bos_token_id");
  L.Set("pad_token_id", "pad token id (= eos)");
  L.Set("generation_pad_token_id", "generation pad token id (1 for pythia)");
}

absl::StatusOr<proto::ModelConfig> ParseBlockYaml(const YamlReader &r,
                                                  const YAML::Node &root) {
  proto::ModelConfig c;
  Labels L;
  c.set_kind(proto::ModelConfig::BLOCK_TRANSFORMER);
  c.set_source("official-yaml");
  BT_RETURN_IF_ERROR(ReadTrainerFields(r, root, c));

  // Block length (util/config.py: block_length -> fixed block_split).
  BT_ASSIGN_OR_RETURN(const int64_t lb, ReadBlockLength(r, root, c, L));

  // Tokenizers: the official code maps between different tokenizers with a
  // TokenMapper; bt supports the shared pythia tokenizer.
  YAML::Node tok = root["tokenizer"];
  if (tok.IsDefined() && tok.IsMap()) {
    BT_RETURN_IF_ERROR(CheckPythiaTokenizer(r, tok["embedder"], "tokenizer.embedder"));
    BT_RETURN_IF_ERROR(
        CheckPythiaTokenizer(r, tok["token_decoder"], "tokenizer.token_decoder"));
  } else {
    BT_RETURN_IF_ERROR(CheckPythiaTokenizer(r, tok, "tokenizer"));
  }

  // Sections.
  YAML::Node emb = root["embedder"], bd = root["block_decoder"],
             td = root["token_decoder"];
  BT_RETURN_IF_ERROR(r.ExpectMap(emb, "embedder", false));
  BT_RETURN_IF_ERROR(r.ExpectMap(bd, "block_decoder", false));
  BT_RETURN_IF_ERROR(r.ExpectMap(td, "token_decoder", false));

  // Embedder: lookup, concat, one embedding token.
  BT_ASSIGN_OR_RETURN(const LookupEmbedder embedder, ReadLookupEmbedder(r, emb));
  const int64_t n_emb = embedder.n_embedding_tokens, evocab = embedder.vocab_size;
  const std::optional<int64_t> &ehidden = embedder.hidden_size;
  const bool projLayer = embedder.projection_layer;
  if (projLayer)
    c.set_embedder_projection(proto::ModelConfig::PROJECTION_LAYER);

  // Decoder sections.
  BT_RETURN_IF_ERROR(CheckDecoderSections(r, bd, td));
  BT_ASSIGN_OR_RETURN(bool bd_pre, UsePretrained(r, bd, "block_decoder.use_pretrained_weights"));
  BT_ASSIGN_OR_RETURN(bool td_pre, UsePretrained(r, td, "token_decoder.use_pretrained_weights"));

  // Structural checks first (they explain most mistakes better than the
  // head-count autofill would).
  BT_ASSIGN_OR_RETURN(auto dpeek, PeekHidden(r, bd["config"], "block_decoder.config", bd_pre));
  const int64_t d = dpeek.first;
  if (d <= 0)
    return Invalid(r.file(), absl::StrCat(dpeek.second, " must be positive"));
  if (!projLayer && d % lb != 0)
    return Invalid(r.file(), absl::StrCat(dpeek.second,
                                          " must be divisible by block_length (",
                                          lb, ")"));
  if (projLayer) {
    // Conv1d(E -> D): E is the lookup width, D the block decoder's width
    // (official projection_hidden_size); without hidden_size the lookup
    // table is as wide as the block decoder.
    c.set_embedder_width(ehidden.value_or(d));
    L.Set("embedder_width", "embedder.config.hidden_size",
          ehidden ? "" : "autofilled block_decoder hidden_size (projection_layer)");
    if (c.embedder_width() <= 0)
      return Invalid(r.file(), "embedder.config.hidden_size must be positive");
  } else if (ehidden) {
    if (*ehidden * lb != d)
      return Invalid(r.file(),
                     absl::StrCat("embedder.config.hidden_size (", *ehidden,
                                  ") * block_length (", lb, ") = ", *ehidden * lb,
                                  " must equal ", dpeek.second,
                                  " (concat of the block's token embeddings)"));
    c.set_embedder_width(*ehidden);
    L.Set("embedder_width", "embedder.config.hidden_size");
  } else {
    c.set_embedder_width(d / lb);
    L.Set("embedder_width", "embedder.config.hidden_size",
          "autofilled block_decoder hidden_size / block_length");
  }

  BT_ASSIGN_OR_RETURN(StackResult bstack,
                      ResolveStack(r, bd["config"], "block_decoder.config",
                                   "block_decoder", bd_pre, /*autofill=*/true,
                                   /*has_lm_head=*/false, L));
  BT_ASSIGN_OR_RETURN(StackResult tstack,
                      ResolveStack(r, td["config"], "token_decoder.config",
                                   "token_decoder", td_pre, /*autofill=*/true,
                                   /*has_lm_head=*/true, L));
  *c.mutable_block_decoder() = bstack.cfg;
  *c.mutable_token_decoder() = tstack.cfg;

  // Vocabulary: one for the whole model (the LM head's).
  c.set_vocab_size(tstack.vocab);
  SetVocabLabel(L, "token_decoder", "token_decoder.config");
  SetVocabLabel(L, "block_decoder", "block_decoder.config");
  L.Copy("token_decoder.vocab_size", "vocab_size");
  if (evocab != tstack.vocab)
    return Invalid(r.file(), absl::StrCat("embedder.config.vocab_size (", evocab,
                                          ") must equal ",
                                          L.Fmt("vocab_size", tstack.vocab)));
  if (bstack.vocab != tstack.vocab)
    return Invalid(r.file(),
                   absl::StrCat(L.Fmt("block_decoder.vocab_size", bstack.vocab),
                                " must equal ", L.Fmt("vocab_size", tstack.vocab)));

  // Token decoder input: expansion layer + strategy (model/token_decoder/base.py).
  BT_RETURN_IF_ERROR(ReadTokenDecoderInput(r, td, lb, n_emb, c, L));

  // Token ids (pythia tokenizer).
  SetPythiaTokenIds(tstack, c, L);

  BT_RETURN_IF_ERROR(ValidateWithLabels(c, r.file(), L));
  return c;
}

absl::StatusOr<proto::ModelConfig> ParseVanillaYaml(const YamlReader &r,
                                                    const YAML::Node &root) {
  proto::ModelConfig c;
  Labels L;
  c.set_kind(proto::ModelConfig::VANILLA);
  c.set_source("official-yaml");
  BT_RETURN_IF_ERROR(ReadTrainerFields(r, root, c));
  BT_ASSIGN_OR_RETURN(std::string model,
                      r.Req<std::string>(root, "model", "model",
                                         "the model class, 'gpt-neo-x' (or "
                                         "block_length for a Block Transformer)"));
  if (model != "gpt-neo-x")
    return Unsupported(r.file(), absl::StrCat("model ('", model,
                                              "') is not supported: bt "
                                              "implements 'gpt-neo-x'"));
  BT_RETURN_IF_ERROR(CheckBaseModel(r, root, "model_name_or_path"));
  BT_RETURN_IF_ERROR(CheckPythiaTokenizer(r, root["tokenizer"], "tokenizer"));
  BT_ASSIGN_OR_RETURN(bool pre, UsePretrained(r, root, "use_pretrained_weights"));
  BT_RETURN_IF_ERROR(r.ExpectMap(root["model_config"], "model_config", true));
  // load_vanilla_model_from_config: overrides only, no autofill.
  BT_ASSIGN_OR_RETURN(StackResult s,
                      ResolveStack(r, root["model_config"], "model_config",
                                   "block_decoder", pre, /*autofill=*/false,
                                   /*has_lm_head=*/true, L));
  *c.mutable_block_decoder() = s.cfg;
  c.set_block_length(1);
  c.set_vocab_size(s.vocab);
  SetVocabLabel(L, "block_decoder", "model_config");
  L.Copy("block_decoder.vocab_size", "vocab_size");
  c.set_eos_token_id(s.eos);
  c.set_pad_token_id(s.eos);
  c.set_bos_token_id(s.bos);
  // inference_demo.py sets generation_config.pad_token_id = eos.
  c.set_generation_pad_token_id(s.eos);
  BT_RETURN_IF_ERROR(ValidateWithLabels(c, r.file(), L));
  return c;
}

/// A mapping that names a key twice is an error at the second one (issue 14:
/// yaml-cpp silently keeps the first value; PyYAML, which the official code
/// uses, keeps the last: either way the file does not mean one thing).
absl::Status CheckNoDuplicateKeys(const YAML::Node &node, const std::string &path) {
  if (node.IsSequence())
    for (const YAML::Node &child : node)
      BT_RETURN_IF_ERROR(CheckNoDuplicateKeys(child, path));
  if (!node.IsMap())
    return absl::OkStatus();
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (it->first.IsScalar() && !seen.insert(it->first.Scalar()).second) {
      const YAML::Mark m = it->first.Mark();
      return absl::InvalidArgumentError(absl::StrCat(path, ":", m.line + 1, ":", m.column + 1,
                                                     ": duplicate key '", it->first.Scalar(),
                                                     "' (each key may appear once)"));
    }
    BT_RETURN_IF_ERROR(CheckNoDuplicateKeys(it->second, path));
  }
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<proto::ModelConfig>
ParseOfficialYamlConfig(absl::string_view text, const std::string &path) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception &e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", e.mark.line + 1, ":", e.mark.column + 1,
                     ": invalid YAML: ", e.msg));
  }
  YamlReader r(path);
  if (!root.IsDefined() || !root.IsMap())
    return Invalid(path, "expected a mapping at the top level (an official "
                         "trainer config)");
  BT_RETURN_IF_ERROR(CheckNoDuplicateKeys(root, path));
  absl::StatusOr<proto::ModelConfig> c;
  try {
    const bool block = YamlReader::Present(root, "block_length") ||
                       YamlReader::Present(root, "block_split");
    c = block ? ParseBlockYaml(r, root) : ParseVanillaYaml(r, root);
  } catch (const YAML::Exception &e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", e.mark.line + 1, ":", e.mark.column + 1,
                     ": unexpected YAML structure: ", e.msg));
  }
  if (c.ok() && c->name().empty())
    c->set_name(ParentDirName(path));
  return c;
}

} // namespace bt::rt
