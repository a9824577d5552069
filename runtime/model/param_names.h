//===- ParamNames.h - official parameter names and shapes -------*- C++ -*-===//
//
// The parameter tensors of the models bt compiles, under their official
// checkpoint names (official `model.state_dict()` keys of itsnamgyu/
// block-transformer @ 17842dd, HF `GPTNeoXForCausalLM` for vanilla), with
// their shapes. Header-only and dependency-free (std only): shared by the
// compiler (dialect verifiers, import) and the runtime (checkpoint
// validation), which must not depend on LLVM.
//
// Layouts are PyTorch's: Linear weight [out, in], Conv1d weight [out, in, 1].
//
//===----------------------------------------------------------------------===//

#ifndef BT_MODEL_PARAMNAMES_H
#define BT_MODEL_PARAMNAMES_H

#include <cstdint>
#include <string>
#include <vector>

namespace bt {

/// One parameter tensor: official name and shape.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
};

/// The tensors of a GPT-NeoX stack (HF `GPTNeoXModel` without `embed_in`)
/// under `prefix` (e.g. "block_decoder.gpt_neox"), width `hidden`, `layers`
/// layers, MLP width `intermediate`:
///   {prefix}.layers.{l}.input_layernorm.{weight,bias}            [hidden]
///   {prefix}.layers.{l}.post_attention_layernorm.{weight,bias}   [hidden]
///   {prefix}.layers.{l}.attention.query_key_value.weight         [3*hidden, hidden]
///   {prefix}.layers.{l}.attention.query_key_value.bias           [3*hidden]
///   {prefix}.layers.{l}.attention.dense.{weight [hidden, hidden], bias [hidden]}
///   {prefix}.layers.{l}.mlp.dense_h_to_4h.{weight [I, hidden], bias [I]}
///   {prefix}.layers.{l}.mlp.dense_4h_to_h.{weight [hidden, I], bias [hidden]}
///   {prefix}.final_layer_norm.{weight,bias}                      [hidden]
inline std::vector<ParamSpec> neoxStackParams(const std::string &prefix,
                                              int64_t hidden, int64_t layers,
                                              int64_t intermediate) {
  std::vector<ParamSpec> specs;
  const int64_t d = hidden, i = intermediate;
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = prefix + ".layers." + std::to_string(l) + ".";
    specs.push_back({p + "input_layernorm.weight", {d}});
    specs.push_back({p + "input_layernorm.bias", {d}});
    specs.push_back({p + "post_attention_layernorm.weight", {d}});
    specs.push_back({p + "post_attention_layernorm.bias", {d}});
    specs.push_back({p + "attention.query_key_value.weight", {3 * d, d}});
    specs.push_back({p + "attention.query_key_value.bias", {3 * d}});
    specs.push_back({p + "attention.dense.weight", {d, d}});
    specs.push_back({p + "attention.dense.bias", {d}});
    specs.push_back({p + "mlp.dense_h_to_4h.weight", {i, d}});
    specs.push_back({p + "mlp.dense_h_to_4h.bias", {i}});
    specs.push_back({p + "mlp.dense_4h_to_h.weight", {d, i}});
    specs.push_back({p + "mlp.dense_4h_to_h.bias", {d}});
  }
  specs.push_back({prefix + ".final_layer_norm.weight", {d}});
  specs.push_back({prefix + ".final_layer_norm.bias", {d}});
  return specs;
}

/// The token decoder's own tensors (besides its stack) under `prefix`
/// (e.g. "token_decoder"): the token table and the Conv1d(k=1) expansion
/// layer D -> P*T of the prefix strategy (official `expansion_layer`):
///   {prefix}.gpt_neox.embed_in.weight   [V, T]
///   {prefix}.expansion_layer.weight     [P*T, D, 1]
///   {prefix}.expansion_layer.bias       [P*T]
/// (The LM head `{prefix}.embed_out.weight` [V, T] is listed separately.)
inline std::vector<ParamSpec> tokenDecoderInputParams(const std::string &prefix,
                                                      int64_t vocab,
                                                      int64_t width,
                                                      int64_t contextWidth,
                                                      int64_t prefixLength) {
  return {
      {prefix + ".gpt_neox.embed_in.weight", {vocab, width}},
      {prefix + ".expansion_layer.weight", {prefixLength * width, contextWidth, 1}},
      {prefix + ".expansion_layer.bias", {prefixLength * width}},
  };
}

/// Architecture numbers that determine the parameter list.
struct ParamShapeConfig {
  int64_t vocab = 0;
  int64_t blockLength = 0;   // L_B
  int64_t embedderWidth = 0; // E = D / L_B
  int64_t blockWidth = 0, blockLayers = 0, blockIntermediate = 0; // D
  int64_t tokenWidth = 0, tokenLayers = 0, tokenIntermediate = 0; // T
  int64_t prefixLength = 0;  // P
  /// Official `projection_method: projection_layer` (uptraining): the block
  /// vector is a Conv1d(E -> D, kernel = stride = L_B) over the block's token
  /// embeddings instead of their concatenation.
  bool projectionLayer = false;
};

/// The projection-layer embedder's parameters (official
/// `model/embedder/lookup.py`, `projection_layer = Conv1d(E, D, L_B, L_B)`):
///   embedder.projection_layer.weight  [D, E, L_B]
///   embedder.projection_layer.bias    [D]
inline std::vector<ParamSpec> embedderProjectionParams(int64_t blockWidth,
                                                       int64_t embedderWidth,
                                                       int64_t blockLength) {
  return {{"embedder.projection_layer.weight",
           {blockWidth, embedderWidth, blockLength}},
          {"embedder.projection_layer.bias", {blockWidth}}};
}

/// Every parameter of a Block Transformer in official state_dict order
/// (embedder, token decoder, block decoder), excluding the unused
/// `block_decoder.gpt_neox.embed_in.weight` (see blockTransformerUnusedParams).
inline std::vector<ParamSpec> blockTransformerParams(const ParamShapeConfig &c) {
  std::vector<ParamSpec> specs;
  specs.push_back({"embedder.embeddings.weight", {c.vocab, c.embedderWidth}});
  if (c.projectionLayer)
    for (ParamSpec &s :
         embedderProjectionParams(c.blockWidth, c.embedderWidth, c.blockLength))
      specs.push_back(std::move(s));
  std::vector<ParamSpec> td = tokenDecoderInputParams(
      "token_decoder", c.vocab, c.tokenWidth, c.blockWidth, c.prefixLength);
  specs.push_back(td[0]);
  for (ParamSpec &s : neoxStackParams("token_decoder.gpt_neox", c.tokenWidth,
                                      c.tokenLayers, c.tokenIntermediate))
    specs.push_back(std::move(s));
  specs.push_back({"token_decoder.embed_out.weight", {c.vocab, c.tokenWidth}});
  specs.push_back(td[1]);
  specs.push_back(td[2]);
  for (ParamSpec &s : neoxStackParams("block_decoder.gpt_neox", c.blockWidth,
                                      c.blockLayers, c.blockIntermediate))
    specs.push_back(std::move(s));
  return specs;
}

/// Tensors present in official Block Transformer checkpoints that the model
/// never reads: the block decoder's `embed_in` (inputs come from the
/// embedder). Importers ignore them with a notice.
inline std::vector<ParamSpec>
blockTransformerUnusedParams(const ParamShapeConfig &c) {
  return {{"block_decoder.gpt_neox.embed_in.weight", {c.vocab, c.blockWidth}}};
}

/// Every parameter of a vanilla HF GPTNeoXForCausalLM (untied embed_out, no
/// bias), in state_dict order.
inline std::vector<ParamSpec> vanillaParams(int64_t vocab, int64_t hidden,
                                            int64_t layers,
                                            int64_t intermediate) {
  std::vector<ParamSpec> specs;
  specs.push_back({"gpt_neox.embed_in.weight", {vocab, hidden}});
  for (ParamSpec &s : neoxStackParams("gpt_neox", hidden, layers, intermediate))
    specs.push_back(std::move(s));
  specs.push_back({"embed_out.weight", {vocab, hidden}});
  return specs;
}

} // namespace bt

#endif // BT_MODEL_PARAMNAMES_H
