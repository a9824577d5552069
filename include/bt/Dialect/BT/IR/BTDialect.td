//===- BTDialect.td - the bt dialect ------------------------*- tablegen -*-===//
//
// The `bt` dialect models the Block Transformer (Ho et al., NeurIPS 2024,
// "Block Transformer: Global-to-Local Language Modeling for Fast Inference").
//
//===----------------------------------------------------------------------===//

#ifndef BT_DIALECT_TD
#define BT_DIALECT_TD

include "mlir/IR/OpBase.td"

def BT_Dialect : Dialect {
  let name = "bt";
  let cppNamespace = "::bt";
  let summary = "The Block Transformer: embedder, block decoder, token decoder "
                "and their KV caches";
  let description = [{
    The `bt` dialect describes a Block Transformer (paper §2) at two levels.

    **Model level.** `bt.embedder` (paper §2.2), `bt.block_decoder` (§2.3),
    `bt.token_decoder` (§2.4), `bt.lm_head` and `bt.cross_entropy` operate on
    whole blocks. Weights are declared once with `bt.param` under the
    official checkpoint tensor names (e.g.
    `@"token_decoder.gpt_neox.layers.0.attention.query_key_value.weight"`)
    and are referenced by symbol, so a checkpoint maps 1:1 onto the IR.

    **Layer level.** The model-level ops decompose into `bt.layer_norm`,
    `bt.linear`, `bt.gelu`, `bt.rotary`, `bt.split_qkv`, `bt.attention`,
    `bt.local_attention`, `bt.prefix_projection`, `bt.embedding_lookup`, ...

    **KV caches** are SSA values of type `!bt.kv_cache` with an explicit
    lifetime: `bt.kv_alloc` → `bt.kv_append` (returns the new cache value;
    the old one is dead) / `bt.kv_attend` (reads) → `bt.kv_release`. The
    `global` scope is the block decoder's cache (one entry per block, lives
    for a sequence); the `local` scope is the token decoder's cache (its inputs of
    one block: P + L_B - 1 entries, L_B for summation; lives for one block). `bt-verify-kv-lifetimes` checks
    that every cache value is used linearly and released on every path.

    Symbols: B batch, N_blk blocks, L_B block length, D block-decoder width,
    T token-decoder width, E = D / L_B embedder width, P prefix length,
    V vocabulary, H heads, hd head dimension.
  }];
  // The discardable attributes of the bt dialect (docs/abi.md, "Entry
  // points"). On operations: `bt.params` (ArrayAttr of StringAttr) on a
  // function, the parameters its leading arguments take, in order
  // (bt-params-to-arguments); `bt.weak_import` (UnitAttr) on an external
  // function, a weak symbol (bt-emit-entry-wrappers); `bt.kv_plan`
  // (DictionaryAttr) on a module, the KV-cache memory plan
  // (bt-plan-kv-memory). Each has a generated helper, e.g.
  // `getParamsAttrHelper().getAttr(fn)`.
  let discardableAttrs = (ins
    "::mlir::ArrayAttr":$params,
    "::mlir::UnitAttr":$weak_import,
    "::mlir::DictionaryAttr":$kv_plan
  );
  let extraClassDeclaration = [{
    // The discardable attributes of function arguments and results (the
    // tensor specs of docs/abi.md): their names, as LLVMDialect's
    // getNoAliasAttrName(), and typed accessors.

    /// `bt.name` (StringAttr): the tensor name of an argument or result, an
    /// official fixture / checkpoint name (input_ids, logits, kv_cache, ...).
    static constexpr ::llvm::StringLiteral getNameAttrName() {
      return "bt.name";
    }
    /// `bt.dims` (ArrayAttr of StringAttr): the names of the dims of an
    /// argument or result (B, N_blk, L_B, ...; "" for an unnamed dim).
    static constexpr ::llvm::StringLiteral getDimsAttrName() {
      return "bt.dims";
    }
    /// `bt.inout` (UnitAttr, or a BoolAttr): an in-out argument, a buffer of
    /// the caller's that the function updates in place (a KV cache, the
    /// weights and moments of train_step).
    static constexpr ::llvm::StringLiteral getInOutAttrName() {
      return "bt.inout";
    }
    /// `bt.inout_arg` (StringAttr): on a result, the bt.name of the in-out
    /// argument it is the updated value of (bt-drop-inout-results drops it).
    static constexpr ::llvm::StringLiteral getInOutArgAttrName() {
      return "bt.inout_arg";
    }
    /// `bt.param` (StringAttr): on an argument, the parameter it is
    /// (bt-params-to-arguments).
    static constexpr ::llvm::StringLiteral getParamAttrName() {
      return "bt.param";
    }

    /// The bt.name of argument / result `i` of `fn`, or null.
    static ::mlir::StringAttr getArgName(::mlir::FunctionOpInterface fn,
                                         unsigned i);
    static ::mlir::StringAttr getResultName(::mlir::FunctionOpInterface fn,
                                            unsigned i);
    /// The bt.dims of argument / result `i` of `fn` (empty if absent).
    static ::llvm::SmallVector<::llvm::StringRef>
    getArgDims(::mlir::FunctionOpInterface fn, unsigned i);
    static ::llvm::SmallVector<::llvm::StringRef>
    getResultDims(::mlir::FunctionOpInterface fn, unsigned i);
    /// Whether argument `i` of `fn` is in-out (bt.inout present and not
    /// `false`).
    static bool isInOutArg(::mlir::FunctionOpInterface fn, unsigned i);
    /// The bt.inout_arg of result `i` of `fn`, or null.
    static ::mlir::StringAttr getResultInOutArg(::mlir::FunctionOpInterface fn,
                                                unsigned i);
    /// The bt.param of argument `i` of `fn`, or null.
    static ::mlir::StringAttr getArgParam(::mlir::FunctionOpInterface fn,
                                          unsigned i);
    /// The names of the bt.params of `fn` (empty if absent).
    static ::llvm::SmallVector<::llvm::StringRef>
    getParams(::mlir::Operation *fn);
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let usePropertiesForAttributes = 1;
}

#endif // BT_DIALECT_TD
