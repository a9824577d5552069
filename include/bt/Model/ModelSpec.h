//===- ModelSpec.h - the architecture of a model -----------------*- C++ -*-===//
//
// A plain description of the models bt compiles, shared by the importer
// (compiler, built like LLVM without exceptions/RTTI) and the tools that read
// checkpoints through the runtime (bt::proto::ModelConfig). Std only.
//
//===----------------------------------------------------------------------===//

#ifndef BT_MODEL_MODELSPEC_H
#define BT_MODEL_MODELSPEC_H

#include <cstdint>
#include <string>

namespace bt {

/// One GPT-NeoX stack (resolved HF GPTNeoXConfig fields).
struct StackSpec {
  int64_t hidden = 0;       // width (D or T)
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t headDim = 0;      // hidden / heads
  int64_t intermediate = 0; // MLP width
  int64_t rotaryDims = 0;   // rotary_pct * head_dim
  double rotaryBase = 10000.0;
  double eps = 1e-5;
};

/// The architecture of a model (paper §2; official config fields resolved).
struct ModelSpec {
  enum class Kind { BlockTransformer, Vanilla };
  enum class Strategy { Prefix, Summation };
  Kind kind = Kind::BlockTransformer;
  std::string name;
  int64_t vocab = 0;
  int64_t blockLength = 1;   // L_B (1 for vanilla)
  int64_t embedderWidth = 0; // E (= D / L_B for the concat embedder)
  /// Official `projection_method: projection_layer`: block vector =
  /// Conv1d(E -> D, kernel = stride = L_B, bias) over the token embeddings.
  bool projectionLayer = false;
  StackSpec block;           // block decoder; for vanilla, the GPT-NeoX stack
  StackSpec token;           // token decoder (unused for vanilla)
  Strategy strategy = Strategy::Prefix;
  int64_t prefixLength = 1;  // P
  int64_t padTokenId = 0;    // data padding id (official pad_token_id)
  int64_t eosTokenId = 0;    // official fill value of skipped padding blocks
  int64_t bosTokenId = 0;    // token decoder BOS placeholder (summation)
};

} // namespace bt

#endif // BT_MODEL_MODELSPEC_H
