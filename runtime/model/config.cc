//===- config.cc - model configurations -----------------------------------===//
//
// See config.h for the forms and the official resolution rules implemented
// here (util/config.py, model/utils.py, model/embedder/lookup.py,
// model/token_decoder/base.py of itsnamgyu/block-transformer @ 17842dd).
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/model/config.h"

#include <set>
#include <cmath>
#include <optional>
#include <sys/stat.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/status_macros.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace bt::rt {
namespace {

using json = nlohmann::json;

constexpr absl::string_view kInherited =
    "inherited from EleutherAI/pythia-410m-deduped";

//===----------------------------------------------------------------------===//
// Field labels: how a ModelConfig field is spelled in its source file.
//===----------------------------------------------------------------------===//

struct Label {
  std::string path; // e.g. "block_decoder.config.hidden_size"
  std::string note; // e.g. "inherited from ..." (may be empty)
};

// Keyed by proto path: "block_length", "block_decoder.hidden_size", ...
class Labels {
public:
  void Set(const std::string &key, std::string path, std::string note = "") {
    m_[key] = Label{std::move(path), std::move(note)};
  }
  // "<path> (<value>)" or "<path> (<value>, <note>)".
  template <typename T> std::string Fmt(const std::string &key, T value) const {
    auto it = m_.find(key);
    std::string path = it == m_.end() ? key : it->second.path;
    std::string v = FormatValue(value);
    if (it != m_.end() && !it->second.note.empty())
      return absl::StrCat(path, " (", v, ", ", it->second.note, ")");
    return absl::StrCat(path, " (", v, ")");
  }
  bool Has(const std::string &key) const { return m_.contains(key); }
  void Copy(const std::string &from, const std::string &to) {
    auto it = m_.find(from);
    if (it != m_.end()) {
      Label l = it->second;
      m_[to] = std::move(l);
    }
  }
  std::string Path(const std::string &key) const {
    auto it = m_.find(key);
    return it == m_.end() ? key : it->second.path;
  }

private:
  static std::string FormatValue(int64_t v) { return absl::StrCat(v); }
  static std::string FormatValue(double v) { return absl::StrFormat("%g", v); }
  static std::string FormatValue(const std::string &v) {
    return absl::StrCat("'", v, "'");
  }
  absl::flat_hash_map<std::string, Label> m_;
};

absl::Status Invalid(absl::string_view where, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", msg));
}
absl::Status Unsupported(absl::string_view where, absl::string_view msg) {
  return absl::UnimplementedError(absl::StrCat(where, ": ", msg));
}

//===----------------------------------------------------------------------===//
// Validation of a resolved config (shared by every source).
//===----------------------------------------------------------------------===//

absl::Status ValidateStack(const proto::NeoXConfig &s, const std::string &p,
                           absl::string_view where, const Labels &L) {
  auto k = [&](const char *field) { return absl::StrCat(p, ".", field); };
  if (s.hidden_size() <= 0)
    return Invalid(where, absl::StrCat(L.Fmt(k("hidden_size"), s.hidden_size()),
                                       " must be positive"));
  if (s.num_layers() <= 0)
    return Invalid(where, absl::StrCat(L.Fmt(k("num_layers"), s.num_layers()),
                                       " must be positive"));
  if (s.num_heads() <= 0)
    return Invalid(where, absl::StrCat(L.Fmt(k("num_heads"), s.num_heads()),
                                       " must be positive"));
  if (s.hidden_size() % s.num_heads() != 0)
    return Invalid(where,
                   absl::StrCat(L.Fmt(k("num_heads"), s.num_heads()),
                                " must divide ",
                                L.Fmt(k("hidden_size"), s.hidden_size())));
  const int64_t hd = s.hidden_size() / s.num_heads();
  if (s.head_dim() != hd)
    return Invalid(where, absl::StrCat(L.Fmt(k("head_dim"), s.head_dim()),
                                       " must equal hidden_size / num_heads = ",
                                       hd));
  if (s.intermediate_size() <= 0)
    return Invalid(where,
                   absl::StrCat(L.Fmt(k("intermediate_size"),
                                      s.intermediate_size()),
                                " must be positive"));
  if (!(s.rotary_pct() >= 0.0 && s.rotary_pct() <= 1.0))
    return Invalid(where, absl::StrCat(L.Fmt(k("rotary_pct"), s.rotary_pct()),
                                       " must be in [0, 1]"));
  // HF GPTNeoXAttention: rotary_ndims = int(head_size * rotary_pct).
  const int64_t rd = static_cast<int64_t>(static_cast<double>(hd) * s.rotary_pct());
  if (s.rotary_dims() != rd)
    return Invalid(where,
                   absl::StrCat(L.Fmt(k("rotary_dims"), s.rotary_dims()),
                                " must equal int(head_dim * rotary_pct) = int(",
                                hd, " * ", absl::StrFormat("%g", s.rotary_pct()),
                                ") = ", rd));
  if (rd % 2 != 0)
    return Invalid(where,
                   absl::StrCat("rotary dims int(head_dim * rotary_pct) = int(",
                                hd, " * ", absl::StrFormat("%g", s.rotary_pct()),
                                ") = ", rd, " for ", p,
                                " must be even (NeoX rotate-half splits them "
                                "in two halves); check ",
                                L.Path(k("rotary_pct")), " and ",
                                L.Path(k("num_heads"))));
  if (!(s.rotary_base() > 0))
    return Invalid(where, absl::StrCat(L.Fmt(k("rotary_base"), s.rotary_base()),
                                       " must be positive"));
  if (!(s.layer_norm_eps() > 0))
    return Invalid(where,
                   absl::StrCat(L.Fmt(k("layer_norm_eps"), s.layer_norm_eps()),
                                " must be positive"));
  if (s.max_position_embeddings() <= 0)
    return Invalid(where, absl::StrCat(L.Fmt(k("max_position_embeddings"),
                                             s.max_position_embeddings()),
                                       " must be positive"));
  if (s.hidden_act() != "gelu")
    return Unsupported(where,
                       absl::StrCat(L.Fmt(k("hidden_act"), s.hidden_act()),
                                    " is not supported (bt implements 'gelu', "
                                    "exact erf)"));
  if (!s.use_parallel_residual())
    return Unsupported(where,
                       absl::StrCat(L.Path(k("use_parallel_residual")),
                                    " (false) is not supported (bt implements "
                                    "the parallel residual of Pythia)"));
  return absl::OkStatus();
}

absl::Status ValidateWithLabels(const proto::ModelConfig &c,
                                absl::string_view where, const Labels &L) {
  if (c.vocab_size() <= 0)
    return Invalid(where, absl::StrCat(L.Fmt("vocab_size", c.vocab_size()),
                                       " must be positive"));
  if (!c.has_block_decoder())
    return Invalid(where, "missing block_decoder (the GPT-NeoX stack)");
  if (c.kind() == proto::ModelConfig::BLOCK_TRANSFORMER) {
    if (c.block_length() <= 0)
      return Invalid(where, absl::StrCat(L.Fmt("block_length", c.block_length()),
                                         " must be positive"));
    const int64_t d = c.block_decoder().hidden_size();
    if (c.embedder_projection() == proto::ModelConfig::CONCAT &&
        d % c.block_length() != 0)
      return Invalid(where,
                     absl::StrCat(L.Fmt("block_decoder.hidden_size", d),
                                  " must be divisible by ",
                                  L.Fmt("block_length", c.block_length())));
    if (c.embedder_projection() == proto::ModelConfig::CONCAT &&
        c.embedder_width() * c.block_length() != d)
      return Invalid(where,
                     absl::StrCat(L.Fmt("embedder_width", c.embedder_width()),
                                  " * ", L.Fmt("block_length", c.block_length()),
                                  " = ", c.embedder_width() * c.block_length(),
                                  " must equal ",
                                  L.Fmt("block_decoder.hidden_size", d),
                                  " (concat of the block's token embeddings)"));
    BT_RETURN_IF_ERROR(ValidateStack(c.block_decoder(), "block_decoder", where, L));
    if (!c.has_token_decoder())
      return Invalid(where, "missing token_decoder");
    BT_RETURN_IF_ERROR(ValidateStack(c.token_decoder(), "token_decoder", where, L));
    if (c.prefix_length() <= 0)
      return Invalid(where, absl::StrCat(L.Fmt("prefix_length", c.prefix_length()),
                                         " must be positive"));
    if (c.strategy() == proto::ModelConfig::SUMMATION &&
        c.prefix_length() != c.block_length())
      return Invalid(where,
                     absl::StrCat(L.Fmt("prefix_length", c.prefix_length()),
                                  " must equal ",
                                  L.Fmt("block_length", c.block_length()),
                                  " for the summation strategy"));
  } else if (c.kind() == proto::ModelConfig::VANILLA) {
    if (c.block_length() != 1)
      return Invalid(where, absl::StrCat("block_length (", c.block_length(),
                                         ") must be 1 for a vanilla model"));
    if (c.has_token_decoder() || c.embedder_width() != 0 ||
        c.prefix_length() != 0)
      return Invalid(where, "a vanilla model has no embedder, token decoder "
                            "or prefix");
    BT_RETURN_IF_ERROR(ValidateStack(c.block_decoder(), "block_decoder", where, L));
  } else {
    return Invalid(where, "kind must be BLOCK_TRANSFORMER or VANILLA");
  }
  const std::pair<const char *, int64_t> ids[] = {
      {"pad_token_id", c.pad_token_id()},
      {"eos_token_id", c.eos_token_id()},
      {"bos_token_id", c.bos_token_id()},
      {"generation_pad_token_id", c.generation_pad_token_id()}};
  for (const auto &[name, id] : ids)
    if (id < 0 || id >= c.vocab_size())
      return Invalid(where, absl::StrCat(L.Fmt(name, id), " must be in [0, ",
                                         L.Fmt("vocab_size", c.vocab_size()),
                                         ")"));
  return absl::OkStatus();
}

// Derived stack fields.
void FillDerived(proto::NeoXConfig &s) {
  if (s.num_heads() > 0 && s.hidden_size() % s.num_heads() == 0) {
    s.set_head_dim(s.hidden_size() / s.num_heads());
    s.set_rotary_dims(static_cast<int64_t>(
        static_cast<double>(s.head_dim()) * s.rotary_pct()));
  }
}

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

absl::StatusOr<proto::ModelConfig> ParseBlockYaml(const YamlReader &r,
                                                  const YAML::Node &root) {
  proto::ModelConfig c;
  Labels L;
  c.set_kind(proto::ModelConfig::BLOCK_TRANSFORMER);
  c.set_source("official-yaml");
  BT_RETURN_IF_ERROR(ReadTrainerFields(r, root, c));

  // Block length (util/config.py: block_length -> fixed block_split).
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
  const bool projLayer = proj && *proj == "projection_layer";
  if (projLayer)
    c.set_embedder_projection(proto::ModelConfig::PROJECTION_LAYER);
  YAML::Node ecfg = emb["config"];
  BT_RETURN_IF_ERROR(r.ExpectMap(ecfg, "embedder.config", false));
  BT_ASSIGN_OR_RETURN(int64_t evocab,
                      r.Req<int64_t>(ecfg, "vocab_size", "embedder.config.vocab_size",
                                     "the lookup embedder needs its vocabulary size"));
  BT_ASSIGN_OR_RETURN(std::optional<int64_t> ehidden,
                      r.Opt<int64_t>(ecfg, "hidden_size", "embedder.config.hidden_size"));

  // Decoder sections.
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

  // Token ids (pythia tokenizer: eos 0, pad := eos; the official loader sets
  // the token decoder's generation pad to 1 for GPTNeoXTokenizerFast).
  c.set_eos_token_id(tstack.eos);
  c.set_pad_token_id(tstack.eos);
  c.set_bos_token_id(tstack.bos);
  c.set_generation_pad_token_id(1);
  L.Set("eos_token_id", "token_decoder.config.eos_token_id");
  L.Set("bos_token_id", "token_decoder.config.bos_token_id");
  L.Set("pad_token_id", "pad token id (= eos)");
  L.Set("generation_pad_token_id", "generation pad token id (1 for pythia)");

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

std::string ParentDirName(const std::string &path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  size_t slash = p.rfind('/');
  std::string dir = slash == std::string::npos ? "." : p.substr(0, slash);
  if (dir == "." || dir.empty()) {
    char buf[4096];
    if (::realpath(".", buf) != nullptr)
      dir = buf;
  }
  size_t s2 = dir.rfind('/');
  return s2 == std::string::npos ? dir : dir.substr(s2 + 1);
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

bool IsDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool IsFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

} // namespace

proto::NeoXConfig PythiaBaseConfig() {
  proto::NeoXConfig s;
  s.set_hidden_size(1024);
  s.set_num_layers(24);
  s.set_num_heads(16);
  s.set_intermediate_size(4096);
  s.set_rotary_pct(0.25);
  s.set_rotary_base(10000);
  s.set_layer_norm_eps(1e-5);
  s.set_max_position_embeddings(2048);
  s.set_use_parallel_residual(true);
  s.set_hidden_act("gelu");
  FillDerived(s);
  return s;
}

namespace {

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

absl::StatusOr<proto::ModelConfig> LoadModelConfig(const std::string &path) {
  std::string file = path;
  if (IsDirectory(path)) {
    std::string dir = path;
    if (!dir.empty() && dir.back() != '/')
      dir += '/';
    if (IsFile(dir + "config.yaml"))
      file = dir + "config.yaml";
    else if (IsFile(dir + "config.json"))
      file = dir + "config.json";
    else
      return absl::NotFoundError(absl::StrCat(
          path, ": no config.yaml (official trainer config) or config.json"));
  }
  BT_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  if (absl::EndsWith(file, ".yaml") || absl::EndsWith(file, ".yml"))
    return ParseOfficialYamlConfig(text, file);
  if (absl::EndsWith(file, ".json"))
    return ParseConfigJson(text, file);
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{')
    return ParseConfigJson(text, file);
  return ParseOfficialYamlConfig(text, file);
}

absl::Status ValidateModelConfig(const proto::ModelConfig &config,
                                 absl::string_view where) {
  return ValidateWithLabels(config, where, Labels());
}

ParamShapeConfig ParamShapesOf(const proto::ModelConfig &c) {
  ParamShapeConfig p;
  p.vocab = c.vocab_size();
  p.blockLength = c.block_length();
  p.embedderWidth = c.embedder_width();
  p.blockWidth = c.block_decoder().hidden_size();
  p.blockLayers = c.block_decoder().num_layers();
  p.blockIntermediate = c.block_decoder().intermediate_size();
  p.tokenWidth = c.token_decoder().hidden_size();
  p.tokenLayers = c.token_decoder().num_layers();
  p.tokenIntermediate = c.token_decoder().intermediate_size();
  p.prefixLength = c.prefix_length();
  p.projectionLayer =
      c.embedder_projection() == proto::ModelConfig::PROJECTION_LAYER;
  return p;
}

std::vector<ParamSpec> ExpectedParams(const proto::ModelConfig &c) {
  if (c.kind() == proto::ModelConfig::VANILLA)
    return vanillaParams(c.vocab_size(), c.block_decoder().hidden_size(),
                         c.block_decoder().num_layers(),
                         c.block_decoder().intermediate_size());
  return blockTransformerParams(ParamShapesOf(c));
}

std::vector<ParamSpec> KnownUnusedParams(const proto::ModelConfig &c) {
  if (c.kind() == proto::ModelConfig::VANILLA)
    return {};
  return blockTransformerUnusedParams(ParamShapesOf(c));
}

std::string DescribeModelConfig(const proto::ModelConfig &c) {
  auto stack = [](const proto::NeoXConfig &s) {
    return absl::StrFormat(
        "%d layers x %d, %d heads of %d, MLP %d, rotary %d dims (base %g), "
        "eps %g, %s, max positions %d",
        s.num_layers(), s.hidden_size(), s.num_heads(), s.head_dim(),
        s.intermediate_size(), s.rotary_dims(), s.rotary_base(),
        s.layer_norm_eps(), s.hidden_act(), s.max_position_embeddings());
  };
  std::string out;
  if (c.kind() == proto::ModelConfig::VANILLA) {
    absl::StrAppend(&out, "model: ", c.name(), " (vanilla GPT-NeoX)\n");
    absl::StrAppend(&out, "  vocab: ", c.vocab_size(), "\n");
    absl::StrAppend(&out, "  stack: ", stack(c.block_decoder()), "\n");
  } else {
    absl::StrAppend(&out, "model: ", c.name(), " (Block Transformer)\n");
    absl::StrAppend(&out, "  vocab: ", c.vocab_size(),
                    ", block length L_B: ", c.block_length(),
                    ", embedder width E: ", c.embedder_width(),
                    c.embedder_projection() == proto::ModelConfig::PROJECTION_LAYER
                        ? ", embedder: projection_layer (Conv1d E -> D, kernel L_B)"
                        : ", embedder: concat",
                    "\n");
    absl::StrAppend(&out, "  block decoder: ", stack(c.block_decoder()), "\n");
    absl::StrAppend(&out, "  token decoder: ", stack(c.token_decoder()), "\n");
    absl::StrAppend(&out, "  strategy: ",
                    c.strategy() == proto::ModelConfig::PREFIX ? "prefix"
                                                               : "summation",
                    ", prefix length P: ", c.prefix_length(), "\n");
  }
  absl::StrAppend(&out, "  token ids: eos ", c.eos_token_id(), ", bos ",
                  c.bos_token_id(), ", pad ", c.pad_token_id(),
                  ", generation pad ", c.generation_pad_token_id(), "\n");
  absl::StrAppend(&out, "  checkpoint dtype: ",
                  proto::DType_Name(c.checkpoint_dtype()), ", source: ",
                  c.source(), "\n");
  return out;
}

} // namespace bt::rt
