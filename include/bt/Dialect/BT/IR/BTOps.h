//===- BTOps.h - bt operations ----------------------------------*- C++ -*-===//

#ifndef BT_DIALECT_BT_IR_BTOPS_H
#define BT_DIALECT_BT_IR_BTOPS_H

#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/runtime/model/param_names.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "bt/Dialect/BT/IR/BTOps.h.inc"

namespace bt {

/// The official GPT-NeoX parameter tensors of a stack under `prefix` (e.g.
/// "block_decoder.gpt_neox"), with their shapes for `config`:
/// `{prefix}.layers.{l}.{input_layernorm,post_attention_layernorm}.{weight,bias}`,
/// `.attention.query_key_value.{weight,bias}`, `.attention.dense.{weight,bias}`,
/// `.mlp.dense_h_to_4h.{weight,bias}`, `.mlp.dense_4h_to_h.{weight,bias}` and
/// `{prefix}.final_layer_norm.{weight,bias}`. Source: HF `GPTNeoXModel`
/// state_dict as used by the official `GPTNeoXBlockDecoder` / `GPTNeoXTokenDecoder`.
/// (Names and shapes come from runtime/model/param_names.h.)
std::vector<ParamSpec> getNeoXStackParams(llvm::StringRef prefix,
                                          NeoXConfigAttr config);

/// The parameters a `bt.token_decoder` with `params` = `prefix` expects:
/// `{prefix}.gpt_neox.embed_in.weight` [V, T], the stack under
/// `{prefix}.gpt_neox`, `{prefix}.expansion_layer.{weight [P·T, D, 1], bias [P·T]}`.
/// V is not known from the op alone; the embed_in shape is returned with
/// `ShapedType::kDynamic` for V.
std::vector<ParamSpec> getTokenDecoderParams(llvm::StringRef prefix,
                                             NeoXConfigAttr config,
                                             int64_t contextWidth,
                                             int64_t prefixLength);

/// Looks up the `bt.param` named `name` from `from` (nearest symbol table).
ParamOp lookupParam(mlir::Operation *from, mlir::SymbolTableCollection &tables,
                    llvm::StringRef name);

} // namespace bt

#endif // BT_DIALECT_BT_IR_BTOPS_H
