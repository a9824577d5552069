//===- config.cc - model configurations -----------------------------------===//
//
// See config.h for the forms and the official resolution rules implemented
// here (util/config.py, model/utils.py, model/embedder/lookup.py,
// model/token_decoder/base.py of itsnamgyu/block-transformer @ 17842dd).
// This file: validation, LoadModelConfig and the derived views; the readers
// are config_yaml.cc (official trainer YAML) and config_json.cc (JSON forms).
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/model/config.h"
#include "bt/runtime/model/config_internal.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/status_macros.h"

namespace bt::rt {
namespace config_internal {
namespace {

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
  const int64_t rd = config_internal::RotaryDims(hd, s.rotary_pct());
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

} // namespace

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

// int(head_dim * rotary_pct) (HF GPTNeoXAttention's rotary_ndims) for
// head_dim >= 0; 0 where rotary_pct is outside [0, 1] or NaN (the stack's
// validation then names the field) and where the product does not fit an
// int64 (the float-to-integer conversion would be undefined).
int64_t RotaryDims(int64_t head_dim, double rotary_pct) {
  if (!(rotary_pct >= 0.0 && rotary_pct <= 1.0) || head_dim < 0)
    return 0;
  const double v = static_cast<double>(head_dim) * rotary_pct;
  return v < 9.2e18 ? static_cast<int64_t>(v) : 0;
}

// Derived stack fields.
void FillDerived(proto::NeoXConfig &s) {
  if (s.num_heads() > 0 && s.hidden_size() % s.num_heads() == 0) {
    s.set_head_dim(s.hidden_size() / s.num_heads());
    s.set_rotary_dims(config_internal::RotaryDims(s.head_dim(), s.rotary_pct()));
  }
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

} // namespace config_internal

namespace {

using namespace config_internal;

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
