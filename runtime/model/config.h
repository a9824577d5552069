//===- config.h - model configurations --------------------------*- C++ -*-===//
//
// Loading and validating bt.proto.ModelConfig (runtime/proto/bt.proto) from
// the three forms a checkpoint comes with:
//
//  (a) an official Hydra trainer YAML (itsnamgyu/block-transformer @ 17842dd,
//      conf/trainer/*.yaml; the fixtures' config.yaml), block form
//      (block_length/block_split + embedder/block_decoder/token_decoder) or
//      vanilla form (model + model_config). Resolved as the official code
//      does (util/config.py preprocess_config, model/utils.py loaders):
//        - every GPT-NeoX field not given under `config:` / `model_config:` is
//          inherited from the HF config of EleutherAI/pythia-410m-deduped
//          (PythiaBaseConfig() below; the fixtures list the same values under
//          provenance.base_hf_config);
//        - block form only, when a `config:` section exists: a missing
//          num_attention_heads becomes hidden_size / head_dim with head_dim 32
//          (hidden <= 256), 64 (<= 1536) or 128, and a missing
//          intermediate_size becomes 4 * hidden_size;
//        - the lookup embedder's missing hidden_size becomes
//          block decoder hidden_size / (block_length / n_embedding_tokens);
//        - prefix length P = n_embedding_tokens * expansion_ratio; a missing
//          expansion_ratio is an error for `prefix` and block_length for
//          `summation` (model/token_decoder/base.py);
//        - with use_pretrained_weights: true the stack's config is the base
//          HF config and `config:` overrides are ignored (from_pretrained).
//  (b) the fixtures' resolved config.json (model_type "block_transformer" or
//      "gpt_neox_vanilla"; fixtures/official/README.md);
//  (c) an HF GPTNeoXForCausalLM config.json (model_type "gpt_neox"; vanilla),
//      with transformers 4.39.3 GPTNeoXConfig defaults for absent fields.
//
// Supported subset (anything else is an Unimplemented error naming the
// field): lookup embedder with concat projection and n_embedding_tokens 1,
// GPT-NeoX block/token decoders based on pythia-410m-deduped, prefix or
// summation strategy with an expansion layer, fixed block length, gelu,
// parallel residual, untied LM head, attention biases, no rope scaling.
//
// Error messages are located: "<file>: <field path> (<value>) <problem>",
// with the field path as spelled in that file, e.g.
//   config.yaml: block_decoder.config.hidden_size (63) must be divisible by
//   block_length (4)
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_CONFIG_H
#define BT_RUNTIME_CONFIG_H

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bt/runtime/model/param_names.h"
#include "bt/proto/bt.pb.h"

namespace bt::rt {

/// Name of the only base HF config the official trainer configs use.
inline constexpr absl::string_view kPythiaBaseName =
    "EleutherAI/pythia-410m-deduped";

/// The resolved values of the HF config of EleutherAI/pythia-410m-deduped
/// (published config.json; = provenance.base_hf_config.config_json of every
/// fixture): hidden 1024, 24 layers, 16 heads, intermediate 4096, rotary_pct
/// 0.25, rotary base 10000, max positions 2048, eps 1e-5, gelu, parallel
/// residual. Vocabulary 50304, bos = eos = 0, untied embeddings.
proto::NeoXConfig PythiaBaseConfig();
inline constexpr int64_t kPythiaVocabSize = 50304;
inline constexpr int64_t kPythiaEosTokenId = 0;

/// Loads a ModelConfig from `path`:
///  - a directory: its config.yaml when present, else its config.json;
///  - a .yaml/.yml file: form (a); a .json file: form (b) or (c) by its
///    model_type; other names are sniffed (JSON if it starts with '{').
/// The result is validated (ValidateModelConfig). `source` is set to
/// "official-yaml", "config-json" or "hf-gpt-neox"; `name` to the YAML
/// `name`, the fixture `case`, or else the containing directory's name.
/// Errors: NotFound (no such file / no config in the directory),
/// InvalidArgument (syntax, missing field, wrong type, inconsistent values),
/// Unimplemented (valid official config outside the supported subset); all
/// name the file and the field.
absl::StatusOr<proto::ModelConfig> LoadModelConfig(const std::string &path);

/// Form (a) from YAML text; `path` is used for messages and the default name.
absl::StatusOr<proto::ModelConfig>
ParseOfficialYamlConfig(absl::string_view text, const std::string &path);

/// Forms (b) and (c) from JSON text, told apart by `model_type`
/// ("block_transformer" / "gpt_neox_vanilla" vs "gpt_neox").
absl::StatusOr<proto::ModelConfig> ParseConfigJson(absl::string_view text,
                                                   const std::string &path);

/// Checks a resolved ModelConfig (from any source, e.g. an artifact
/// manifest): kind set; vocab, widths, layers, heads, intermediate > 0;
/// heads divide hidden_size and head_dim == hidden_size / num_heads;
/// rotary_dims == int(head_dim * rotary_pct), even and <= head_dim;
/// layer_norm_eps > 0; hidden_act "gelu"; parallel residual; block form:
/// embedder_width * block_length == block decoder hidden_size, prefix_length
/// >= 1, summation => prefix_length == block_length; token ids in [0, V).
/// Vanilla: block_length 1, no token decoder. Messages use proto field paths
/// ("block_decoder.num_heads") prefixed by `where` (e.g. a file name).
absl::Status ValidateModelConfig(const proto::ModelConfig &config,
                                 absl::string_view where = "model config");

/// Architecture numbers for runtime/model/param_names.h.
ParamShapeConfig ParamShapesOf(const proto::ModelConfig &config);

/// The parameter tensors `config` needs, official names and shapes, in
/// official state_dict order (blockTransformerParams / vanillaParams).
std::vector<ParamSpec> ExpectedParams(const proto::ModelConfig &config);

/// Tensors present in official checkpoints that the model never reads
/// (blockTransformerUnusedParams; none for vanilla).
std::vector<ParamSpec> KnownUnusedParams(const proto::ModelConfig &config);

/// Human-readable multi-line summary (used by `info`).
std::string DescribeModelConfig(const proto::ModelConfig &config);

} // namespace bt::rt

#endif // BT_RUNTIME_CONFIG_H
