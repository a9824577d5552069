//===- Import.h - model description → bt model-level IR ---------*- C++ -*-===//
//
// Builds the model-level bt IR of a checkpoint: one `bt.param` per weight
// under its official name (include/bt/Model/ParamNames.h) and the entry
// functions of docs/abi.md. Weights themselves never enter the IR; the
// runtime binds them by name.
//
//===----------------------------------------------------------------------===//

#ifndef BT_IMPORT_IMPORT_H
#define BT_IMPORT_IMPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <string>
#include <vector>

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

/// The architecture to import. A plain struct (no protobuf) so that the
/// compiler, built without exceptions/RTTI like LLVM, does not include
/// runtime headers; tools translate bt::proto::ModelConfig into it.
struct ModelSpec {
  enum class Kind { BlockTransformer, Vanilla };
  enum class Strategy { Prefix, Summation };
  Kind kind = Kind::BlockTransformer;
  std::string name;
  int64_t vocab = 0;
  int64_t blockLength = 1;   // L_B (1 for vanilla)
  int64_t embedderWidth = 0; // E = D / L_B
  StackSpec block;           // block decoder; for vanilla, the GPT-NeoX stack
  StackSpec token;           // token decoder (unused for vanilla)
  Strategy strategy = Strategy::Prefix;
  int64_t prefixLength = 1;  // P
  int64_t padTokenId = 0;    // data padding id (official pad_token_id)
  int64_t eosTokenId = 0;    // official fill value of skipped padding blocks
  int64_t bosTokenId = 0;    // token decoder BOS placeholder (summation)
};

/// Which entry points to build (docs/abi.md, "Entry points").
struct ImportOptions {
  bool eval = true;     // logits
  bool evalLoss = true; // logits and loss given labels
};

/// Returns a module with the `bt.param` declarations of `spec` and the
/// requested entry functions, verified. Shapes: block models take
/// `input_ids`/`attention_mask` [B, N_blk, L_B] i64 and
/// `block_attention_mask` [B, N_blk] i64 with dynamic B and N_blk, and return
/// `logits` [B, N_blk-1, L_B, V] f32 (official BlockTransformer.forward in
/// eval mode: positions whose target is padding are 0, blocks skipped as
/// padding are filled with eos_token_id) and, for `eval_loss`, `loss` []
/// (mean token cross-entropy over labels[:, 1:] != -100). Vanilla models take
/// [B, T] tensors and return logits [B, T, V] and the HF shifted loss.
/// Returns null and emits a diagnostic if the spec is inconsistent.
mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext *context,
                                              const ModelSpec &spec,
                                              const ImportOptions &options = {});

/// The parameter names of `spec` in official state_dict order (the order of
/// the `bt.param` ops importModel creates).
std::vector<std::string> getParamNames(const ModelSpec &spec);

} // namespace bt

#endif // BT_IMPORT_IMPORT_H
