//===- Import.h - model description → bt model-level IR ---------*- C++ -*-===//
//
// Builds the model-level bt IR of a checkpoint: one `bt.param` per weight
// under its official name (runtime/model/param_names.h) and the entry
// functions of docs/abi.md. Weights themselves never enter the IR; the
// runtime binds them by name.
//
//===----------------------------------------------------------------------===//

#ifndef BT_IMPORT_IMPORT_H
#define BT_IMPORT_IMPORT_H

#include "bt/Model/ModelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>
#include <vector>

namespace bt {

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
