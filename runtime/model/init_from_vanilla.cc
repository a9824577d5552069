//===- init_from_vanilla.cc - uptraining init from a vanilla GPT-NeoX -----===//
//
// The official partition init (model/utils.py, load_block_from_vanilla_checkpoint
// at itsnamgyu/block-transformer @ 17842dd); see init_from_vanilla.h.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/model/init_from_vanilla.h"

#include "bt/runtime/model/checkpoint.h"
#include "bt/runtime/model/config.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/safetensors.h"
#include "bt/runtime/base/status_macros.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "yaml-cpp/yaml.h"

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <random>
#include <sys/stat.h>

namespace bt::rt {
namespace {

absl::Status Mismatch(absl::string_view field, int64_t block, int64_t vanilla) {
  return absl::InvalidArgumentError(absl::StrCat(
      "init-from-vanilla: ", field, " of the block model (", block,
      ") must equal the vanilla model's (", vanilla, ")"));
}

/// A copy of vanilla tensor `from` (checked against `shape`).
absl::StatusOr<Tensor> CopyOf(const std::map<std::string, Tensor> &vanilla,
                              const std::string &from,
                              const std::vector<int64_t> &shape) {
  auto it = vanilla.find(from);
  if (it == vanilla.end())
    return absl::NotFoundError(
        absl::StrCat("init-from-vanilla: the vanilla checkpoint has no tensor ", from));
  const Tensor &src = it->second;
  if (src.dtype() != DType::F32 || src.shape() != shape)
    return absl::InvalidArgumentError(absl::StrCat(
        "init-from-vanilla: vanilla tensor ", from, " must be F32 [",
        absl::StrJoin(shape, ", "), "], got [", absl::StrJoin(src.shape(), ", "),
        "]"));
  BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DType::F32, shape));
  std::memcpy(t.data(), src.data(), src.nbytes());
  return t;
}

/// The vanilla name of a block-model stack tensor `name` (under `prefix`,
/// layer offset `offset`), or "" for the stack's final LayerNorm.
std::string VanillaStackName(const std::string &name, const std::string &prefix,
                             int64_t offset) {
  std::string rest = name.substr(prefix.size()); // ".layers.<l>.<...>"
  const std::string layers = ".layers.";
  if (rest.compare(0, layers.size(), layers) != 0)
    return "gpt_neox" + rest; // final_layer_norm
  size_t dot = rest.find('.', layers.size());
  int64_t l = std::stoll(rest.substr(layers.size(), dot - layers.size()));
  return absl::StrCat("gpt_neox.layers.", l + offset, rest.substr(dot));
}

absl::Status CreateEmptyDir(const std::string &dir) {
  if (::mkdir(dir.c_str(), 0755) == 0)
    return absl::OkStatus();
  if (errno != EEXIST)
    return ErrnoToStatus(errno, absl::StrCat("cannot create ", dir));
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return absl::AlreadyExistsError(
        absl::StrCat(dir, " exists and is not a directory (not overwritten)"));
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return ErrnoToStatus(errno, absl::StrCat("cannot read ", dir));
  bool empty = true;
  while (dirent *e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      empty = false;
  ::closedir(d);
  if (!empty)
    return absl::AlreadyExistsError(absl::StrCat(
        dir, " is not empty; init-from-vanilla writes a new checkpoint "
             "directory and overwrites nothing"));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<std::map<std::string, Tensor>>
InitBlockFromVanilla(const proto::ModelConfig &block,
                     const proto::ModelConfig &vanilla,
                     const std::map<std::string, Tensor> &vanilla_weights,
                     uint64_t seed) {
  if (block.kind() != proto::ModelConfig::BLOCK_TRANSFORMER)
    return absl::InvalidArgumentError(
        "init-from-vanilla: --config must describe a Block Transformer");
  if (vanilla.kind() != proto::ModelConfig::VANILLA)
    return absl::InvalidArgumentError(
        "init-from-vanilla: the source checkpoint must be a vanilla GPT-NeoX");
  if (block.embedder_projection() != proto::ModelConfig::PROJECTION_LAYER)
    return absl::InvalidArgumentError(
        "init-from-vanilla: embedder.projection_method must be "
        "'projection_layer' (initialize_mean_embedder_projection)");
  if (block.strategy() != proto::ModelConfig::PREFIX)
    return absl::InvalidArgumentError(
        "init-from-vanilla: token_decoder.decoding_strategy must be 'prefix' "
        "(initialize_identity_expansion_layer)");
  const proto::NeoXConfig &v = vanilla.block_decoder();
  const int64_t nb = block.block_decoder().num_layers(),
                nt = block.token_decoder().num_layers();
  if (nb + nt != v.num_layers())
    return absl::InvalidArgumentError(absl::StrCat(
        "init-from-vanilla: method partition needs block_decoder layers (", nb,
        ") + token_decoder layers (", nt, ") = vanilla layers (",
        v.num_layers(), ")"));
  BT_RETURN_IF_ERROR(block.vocab_size() == vanilla.vocab_size()
                         ? absl::OkStatus()
                         : Mismatch("vocab_size", block.vocab_size(),
                                    vanilla.vocab_size()));
  BT_RETURN_IF_ERROR(block.embedder_width() == v.hidden_size()
                         ? absl::OkStatus()
                         : Mismatch("embedder.config.hidden_size",
                                    block.embedder_width(), v.hidden_size()));
  for (const auto &[name, s] :
       {std::make_pair("block_decoder", &block.block_decoder()),
        std::make_pair("token_decoder", &block.token_decoder())}) {
    const std::pair<const char *, std::pair<int64_t, int64_t>> fields[] = {
        {"hidden_size", {s->hidden_size(), v.hidden_size()}},
        {"num_attention_heads", {s->num_heads(), v.num_heads()}},
        {"intermediate_size", {s->intermediate_size(), v.intermediate_size()}},
        {"rotary_dims", {s->rotary_dims(), v.rotary_dims()}}};
    for (const auto &[field, values] : fields)
      if (values.first != values.second)
        return Mismatch(absl::StrCat(name, ".", field), values.first,
                        values.second);
  }

  const int64_t d = v.hidden_size(), lb = block.block_length(),
                p = block.prefix_length();
  std::map<std::string, Tensor> out;
  for (const ParamSpec &spec : ExpectedParams(block)) {
    const std::string &n = spec.name;
    std::string from;
    if (n == "embedder.embeddings.weight" ||
        n == "token_decoder.gpt_neox.embed_in.weight")
      from = "gpt_neox.embed_in.weight";
    else if (n == "token_decoder.embed_out.weight")
      from = "embed_out.weight";
    else if (n.rfind("block_decoder.gpt_neox.layers.", 0) == 0)
      from = VanillaStackName(n, "block_decoder.gpt_neox", 0);
    else if (n.rfind("token_decoder.gpt_neox.", 0) == 0)
      from = VanillaStackName(n, "token_decoder.gpt_neox", nb);
    if (!from.empty()) {
      BT_ASSIGN_OR_RETURN(Tensor t, CopyOf(vanilla_weights, from, spec.shape));
      out.emplace(n, std::move(t));
      continue;
    }
    BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DType::F32, spec.shape));
    float *w = t.data_as<float>();
    if (n == "embedder.projection_layer.weight") {
      // [D, E, L_B]: (o == i) / L_B at every kernel position k.
      const float mean = 1.0f / static_cast<float>(lb);
      const int64_t e = block.embedder_width(); // == d, checked above
      for (int64_t o = 0; o < d; ++o)
        for (int64_t k = 0; k < lb; ++k)
          w[(o * e + o) * lb + k] = mean;
    } else if (n == "token_decoder.expansion_layer.weight") {
      // [P·T, D, 1]: identity for every prefix slot s.
      for (int64_t s = 0; s < p; ++s)
        for (int64_t o = 0; o < d; ++o)
          w[(s * d + o) * d + o] = 1.0f;
    } else if (n == "block_decoder.gpt_neox.final_layer_norm.weight") {
      std::fill(w, w + t.num_elements(), 1.0f);
    } else if (n != "embedder.projection_layer.bias" &&
               n != "token_decoder.expansion_layer.bias" &&
               n != "block_decoder.gpt_neox.final_layer_norm.bias") {
      return absl::InternalError(
          absl::StrCat("init-from-vanilla: no rule for parameter ", n));
    }
    out.emplace(n, std::move(t));
  }
  // The unused block-decoder embed_in of the official layout: the fresh
  // model's HF init, normal(0, 0.02).
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (const ParamSpec &spec : KnownUnusedParams(block)) {
    BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DType::F32, spec.shape));
    float *w = t.data_as<float>();
    for (int64_t i = 0; i < t.num_elements(); ++i)
      w[i] = dist(rng);
    out.emplace(spec.name, std::move(t));
  }
  return out;
}

absl::StatusOr<Checkpoint> LoadVanillaCheckpoint(const std::string &vanilla_dir,
                                                 const std::string &block_config) {
  auto exists = [](const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  };
  if (exists(vanilla_dir + "/config.yaml") || exists(vanilla_dir + "/config.json"))
    return LoadCheckpoint(vanilla_dir);
  // A released folder: the config comes from the block trainer YAML.
  BT_ASSIGN_OR_RETURN(std::string text, ReadFile(block_config));
  std::string named;
  try {
    YAML::Node node = YAML::Load(text)["load_from_vanilla"]["config_path"];
    if (node && node.IsScalar())
      named = node.as<std::string>();
  } catch (const YAML::Exception &) {
    // LoadModelConfig(block_config) reports YAML errors with their location.
  }
  if (named.empty())
    return absl::NotFoundError(absl::StrCat(
        vanilla_dir,
        ": no config.yaml or config.json (a released checkpoint folder holds "
        "only model.safetensors), and ",
        block_config,
        " has no load_from_vanilla.config_path naming the vanilla model's "
        "trainer YAML"));
  std::vector<std::string> tried;
  if (named.front() == '/') {
    tried.push_back(named);
  } else {
    size_t slash = block_config.find_last_of('/');
    tried.push_back(slash == std::string::npos
                        ? named
                        : block_config.substr(0, slash + 1) + named);
    tried.push_back(named);
  }
  for (const std::string &path : tried) {
    if (!exists(path))
      continue;
    BT_ASSIGN_OR_RETURN(proto::ModelConfig config, LoadModelConfig(path));
    return LoadCheckpoint(config, {vanilla_dir + "/model.safetensors"});
  }
  return absl::NotFoundError(absl::StrCat(
      block_config, ": load_from_vanilla.config_path '", named,
      "' (the config of the released vanilla checkpoint ", vanilla_dir,
      ") names no file: tried ", absl::StrJoin(tried, ", ")));
}

absl::Status InitFromVanillaCommand(const std::string &vanilla_dir,
                                    const std::string &block_config,
                                    const std::string &out_dir, uint64_t seed) {
  BT_ASSIGN_OR_RETURN(proto::ModelConfig block, LoadModelConfig(block_config));
  BT_ASSIGN_OR_RETURN(Checkpoint vanilla,
                      LoadVanillaCheckpoint(vanilla_dir, block_config));
  BT_ASSIGN_OR_RETURN(std::string yaml, ReadFile(block_config));
  BT_ASSIGN_OR_RETURN(
      auto weights,
      InitBlockFromVanilla(block, vanilla.config, vanilla.weights, seed));
  BT_RETURN_IF_ERROR(CreateEmptyDir(out_dir));
  BT_RETURN_IF_ERROR(WriteFileAtomically(out_dir + "/config.yaml", yaml));
  return WriteSafetensors(
      out_dir + "/model.safetensors", weights,
      {{"format", "pt"},
       {"bt_init", absl::StrCat("init-from-vanilla ", vanilla_dir,
                                " (partition, mean embedder projection, "
                                "identity expansion layer)")}});
}

} // namespace bt::rt
