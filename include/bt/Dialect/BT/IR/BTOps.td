//===- BTOps.td - bt operations -----------------------------*- tablegen -*-===//
//
// Ops of the bt dialect: parameters, model-level ops (paper §2), layer-level
// ops they decompose into, and KV-cache ops with explicit lifetimes.
//
//===----------------------------------------------------------------------===//

#ifndef BT_OPS_TD
#define BT_OPS_TD

include "bt/Dialect/BT/IR/BTDialect.td"
include "bt/Dialect/BT/IR/BTAttrs.td"
include "bt/Dialect/BT/IR/BTTypes.td"
include "bt/Dialect/BT/IR/BTInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class BT_Op<string mnemonic, list<Trait> traits = []>
    : Op<BT_Dialect, mnemonic, traits>;

// Activations and weights: f32 (fixture checks, CPU), bf16 / f16 (GPU).
def BT_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
// Token ids and labels.
def BT_IdTensor : RankedTensorOf<[I32, I64]>;
// Attention / key-padding masks: 1 = attend, 0 = masked (official convention).
def BT_MaskTensor : RankedTensorOf<[I1, I32, I64]>;
// Positions (RoPE indices).
def BT_PositionTensor : RankedTensorOf<[I32, I64]>;
// `tensor<f32>` scalars (losses, norms, learning rates); buildable, so an
// assembly format need not spell their type.
def BT_F32ScalarTensor : 0DTensorOf<[F32]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getF32Type())";
}

// Ops that are independent along leading ("block") dimensions.
def BT_BlockLocal : DeclareOpInterfaceMethods<BT_BlockLocalOpInterface>;
def BT_CacheUser : DeclareOpInterfaceMethods<BT_KVCacheUserOpInterface>;
def BT_ParamUser : DeclareOpInterfaceMethods<SymbolUserOpInterface>;
// Ops with a vector-Jacobian rule (reverse-mode differentiation).
def BT_Differentiable : DeclareOpInterfaceMethods<BT_DifferentiableOpInterface>;

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

def BT_ParamOp : BT_Op<"param", [Symbol]> {
  let summary = "Declares a model parameter (weight) under its checkpoint name";
  let description = [{
    Declares one trainable tensor of the model. The symbol name is the
    official checkpoint tensor name (official `model.state_dict()` keys, e.g.
    `@"block_decoder.gpt_neox.layers.0.attention.dense.weight"`), so importing a
    checkpoint binds `model.safetensors` entries 1:1 to `bt.param` ops; the
    runtime looks weights up by this name. Layouts follow PyTorch (Linear
    weight `[out, in]`, Conv1d weight `[out, in, 1]`).

    The type is a statically shaped tensor of f32, bf16 or f16.

    Example:
    ```mlir
    bt.param @"embedder.embeddings.weight" : tensor<512x16xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<BT_FloatTensor>:$type);
  let assemblyFormat = "$sym_name attr-dict `:` $type";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def BT_ParamRefOp : BT_Op<"param_ref", [Pure, BT_ParamUser, BT_Differentiable]> {
  let summary = "Reads a parameter declared with bt.param";
  let description = [{
    Returns the current value of the parameter `@name`. The result type must
    equal the declared type of the `bt.param` (error otherwise, located here).

    Example:
    ```mlir
    %w = bt.param_ref @"token_decoder.embed_out.weight" : tensor<512x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Model level (paper §2)
//===----------------------------------------------------------------------===//

def BT_EmbedderOp : BT_Op<"embedder", [Pure, BT_BlockLocal, BT_ParamUser]> {
  let summary = "Lookup embedder: token embeddings of each block, concatenated or projected";
  let description = [{
    Paper §2.2 (official `model/embedder/lookup.py`): looks every token of a
    block up in the table `@table` (`[V, E]`) and forms the block vector
    from the L_B embeddings. Padding ids are embedded like any token; there
    is no positional term.

    - `projection_method: concat` (no `projection`): token-major
      concatenation, `block = [E(t_0) | E(t_1) | ... | E(t_(L_B-1))]`,
      D = L_B · E.
    - `projection_method: projection_layer` (`projection` and
      `projection_bias` name the official `embedder.projection_layer.weight`
      `[D, E, L_B]` and `.bias` `[D]`; paper §3.5 uptraining): a Conv1d with
      kernel = stride = L_B over the token embeddings,
      `block[o] = bias[o] + Σ_k Σ_i W[o, i, k] · E(t_k)[i]`.

    - `ids`: `[B, N_blk, L_B]` i64/i32 token ids.
    - result: `[B, N_blk, D]`, element type of the table.

    A vanilla GPT-NeoX is the L_B = 1 concat case (`@table` =
    `gpt_neox.embed_in.weight`).

    Errors: rank ≠ 3, batch/blocks mismatch, concat: D ≠ L_B · E; projection:
    weight ≠ `[D, E, L_B]` or bias ≠ `[D]`, or only one of the two given;
    element type ≠ the table's, parameter not declared.

    Example:
    ```mlir
    %x = bt.embedder %ids table @"embedder.embeddings.weight"
           : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
    %y = bt.embedder %ids table @"embedder.embeddings.weight"
           projection @"embedder.projection_layer.weight"
           bias @"embedder.projection_layer.bias"
           : tensor<2x6x4xi64> -> tensor<2x6x64xf32>
    ```
  }];
  let arguments = (ins BT_IdTensor:$ids, FlatSymbolRefAttr:$table,
                       OptionalAttr<FlatSymbolRefAttr>:$projection,
                       OptionalAttr<FlatSymbolRefAttr>:$projection_bias);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `table` $table (`projection` $projection^)?
    (`bias` $projection_bias^)? attr-dict `:` type($ids) `->` type($result)
  }];
  let builders = [
    // The concat embedder (no projection).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$ids,
                   "::llvm::StringRef":$table), [{
      build($_builder, $_state, result, ids, table,
            ::mlir::FlatSymbolRefAttr(), ::mlir::FlatSymbolRefAttr());
    }]>
  ];
  let hasVerifier = 1;
}

def BT_BlockDecoderOp : BT_Op<"block_decoder",
    [AttrSizedOperandSegments, BT_ParamUser, BT_CacheUser,
     DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "GPT-NeoX stack over blocks with global causal attention";
  let description = [{
    Paper §2.3 (official `model/block_decoder/gpt_neo_x.py`,
    `GPTNeoXBlockDecoder`): a causal GPT-NeoX stack over the sequence of
    block embeddings, with the final LayerNorm and no LM head. The output at
    block i is the **context embedding** from which the token decoder decodes
    block i + 1. RoPE position = block index.

    - `input`: `[B, N_blk, D]` block embeddings (the embedder's output).
    - `mask` (optional): `[B, N_blk]` block attention mask (official
      `block_attention_mask`; 1 = attend, 0 = padding block, masked as a key).
    - `positions` (optional): `[B, N_blk]` i64/i32 RoPE position of every
      row's blocks. Default: the block index `0 .. N_blk-1`, offset by the
      cache length in the cache form. Needed by vanilla generation (L_B = 1),
      where HF uses per-row positions `cumsum(mask) - 1` (pads at 1) that
      continue from each row's last position (docs/generation.md).
    - `cache` (optional): a `global` `!bt.kv_cache` holding the keys/values
      of earlier blocks. The N_blk new blocks are appended to it (positions
      continue after the cached entries unless `positions` is given) and the
      updated cache is returned as a second result; the operand is consumed.
      This is the prefill / decode-block form used by generation.
    - result: `[B, N_blk, D]` context embeddings (final-LayerNorm output).

    Parameters (official names, prefix `params`, e.g. `block_decoder.gpt_neox`):
    `{params}.layers.{l}.input_layernorm.{weight,bias}` `[D]`,
    `.post_attention_layernorm.{weight,bias}` `[D]`,
    `.attention.query_key_value.weight` `[3D, D]` (rows `[H, 3, hd]`),
    `.attention.query_key_value.bias` `[3D]`, `.attention.dense.{weight [D, D], bias [D]}`,
    `.mlp.dense_h_to_4h.{weight [I, D], bias [I]}`, `.mlp.dense_4h_to_h.{weight [D, I], bias [D]}`,
    `{params}.final_layer_norm.{weight,bias}` `[D]`.

    Errors: config width ≠ D, shapes of mask/positions/cache, cache
    scope/layers/heads/head_dim/element type ≠ config, a static N_blk above a
    static cache capacity, a missing or mis-shaped parameter.

    Example:
    ```mlir
    %ctx = bt.block_decoder %x config #cfg params "block_decoder.gpt_neox"
             : tensor<2x6x64xf32> -> tensor<2x6x64xf32>
    %ctx1, %c1 = bt.block_decoder %x1 cache %c0 config #cfg
             params "block_decoder.gpt_neox" : tensor<2x1x64xf32>,
             !bt.kv_cache<global, ...> -> tensor<2x1x64xf32>, !bt.kv_cache<global, ...>
    %h, %c2 = bt.block_decoder %x2 mask %m positions %p cache %c1 config #cfg
             params "gpt_neox" : tensor<2x7x64xf32>, tensor<2x7xi64>,
             tensor<2x7xi64>, !bt.kv_cache<global, ...> -> tensor<2x7x64xf32>, !bt.kv_cache<global, ...>
    ```

    `config` and `params` may be written in either order; the printer puts
    `params` last (a `#bt.neox<...>` written in full right before the `:` would
    otherwise take the type list as its own type).
  }];
  let arguments = (ins BT_FloatTensor:$input,
                       Optional<BT_MaskTensor>:$mask,
                       Optional<BT_PositionTensor>:$positions,
                       Optional<BT_KVCacheType>:$cache,
                       StrAttr:$params,
                       BT_NeoXConfigAttr:$config);
  let results = (outs BT_FloatTensor:$result,
                      Optional<BT_KVCacheType>:$result_cache);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let builders = [
    // Without positions (the default block-index positions).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Type":$resultCache,
                   "::mlir::Value":$input, "::mlir::Value":$mask,
                   "::mlir::Value":$cache, "::llvm::StringRef":$params,
                   "::bt::NeoXConfigAttr":$config)>
  ];
}

def BT_TokenDecoderOp : BT_Op<"token_decoder",
    [Pure, BT_BlockLocal, BT_ParamUser]> {
  let summary = "GPT-NeoX token decoder over each block, fed by the context embedding";
  let description = [{
    Paper §2.4 (official `model/token_decoder/base.py`, `gpt_neo_x.py`): for
    every block independently, decodes the block's L_B tokens from the
    context embedding of the previous block. Attention never crosses a block
    boundary, which makes the op block-local along B and N_blk.

    - `context_embedding`: `[B, N_blk, D]` context embeddings; `context_embedding[:, i]` is the
      block decoder's output for the block *before* the one decoded.
    - `ids`: `[B, N_blk, L_B]` token ids of the decoded blocks. Only
      `t_0 .. t_{L_B-2}` are inputs (teacher forcing); `t_{L_B-1}` is ignored.
    - `mask` (optional): `[B, N_blk, L_B]` token attention mask of `ids`
      (0 = padding, masked as a key); the projected vectors are never masked.
    - result: `[B, N_blk, L_B, T]` final-LayerNorm hidden states;
      `result[:, i, j]` predicts token `t_j` of block i.

    Strategies (`#bt.strategy`, official `decoding_strategy`):
    - `prefix`: a Conv1d(k=1) `D → P·T` projects the context embedding into
      `prefix_length` = P vectors; the input sequence is
      `[P_0 .. P_{P-1}, E(t_0) .. E(t_{L_B-2})]` (length P + L_B - 1) and the
      outputs at positions P-1 .. P+L_B-2 are the result. RoPE positions
      0 .. P+L_B-2 (training positions).
    - `summation` (MEGABYTE): the projection yields L_B vectors
      (`prefix_length` must equal L_B) added position-wise to
      `[E(bos), E(t_0) .. E(t_{L_B-2})]`, with `bos_token_id` (default 0).

    Parameters (prefix `params`, e.g. `token_decoder`):
    `{params}.gpt_neox.embed_in.weight` `[V, T]`, the GPT-NeoX stack under
    `{params}.gpt_neox` (as in `bt.block_decoder`),
    `{params}.expansion_layer.weight` `[P·T, D, 1]`, `.bias` `[P·T]`.
    The LM head is `bt.lm_head`.

    Errors: ranks, B/N_blk mismatch, config width ≠ T, prefix_length < 1,
    summation with prefix_length ≠ L_B, missing or mis-shaped parameters.
  }];
  let arguments = (ins BT_FloatTensor:$context_embedding,
                       BT_IdTensor:$ids,
                       Optional<BT_MaskTensor>:$mask,
                       StrAttr:$params,
                       BT_NeoXConfigAttr:$config,
                       BT_TokenDecoderStrategyAttr:$strategy,
                       I64Attr:$prefix_length,
                       DefaultValuedAttr<I64Attr, "0">:$bos_token_id);
  let results = (outs BT_FloatTensor:$result);
  // `strategy` is followed by an empty literal: the enum attribute prints its
  // own leading space (EnumAttr format "$value"), so the op must not add one.
  let assemblyFormat = [{
    $context_embedding `,` $ids (`mask` $mask^)? `params` $params `config` $config
    `strategy` `` $strategy `prefix_length` $prefix_length attr-dict
    `:` type($context_embedding) `,` type($ids) (`,` type($mask)^)? `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// Entries of the local KV cache when one block of L_B = `blockLength`
    /// tokens is decoded: the token decoder's inputs S_in = P + L_B - 1
    /// (prefix: P projected vectors, then t_0 .. t_{L_B-2}) or L_B
    /// (summation). The last token t_{L_B-1} is never an input, so no later
    /// position attends to it and it needs no cache entry. decode_tokens
    /// (bt-generate-entry-points) allocates this capacity and
    /// bt-plan-kv-memory plans it.
    int64_t getLocalCacheEntries(int64_t blockLength) {
      if (getStrategy() == ::bt::TokenDecoderStrategy::summation)
        return blockLength;
      return getPrefixLength() + blockLength - 1;
    }
  }];
  let hasVerifier = 1;
}

def BT_TokenDecoderStepOp : BT_Op<"token_decoder_step",
    [BT_ParamUser, BT_CacheUser, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "One incremental step of the token decoder's stack with a local KV cache";
  let description = [{
    Paper §2.4 and appendix (inference of the Block Transformer; official
    `BlockTransformer.generate`, where HF `generate` runs the token decoder
    with `use_cache=True`): runs the token decoder's GPT-NeoX stack (layers
    and final LayerNorm, no LM head) over S new input vectors of the block
    being decoded, attending to the block's earlier inputs held in a `local`
    KV cache and to themselves (causally). Their keys/values are appended to
    the cache, which is returned as a second result; the operand is
    consumed. Decoding one block of L_B tokens is: step 0 over the P prefix
    vectors (the expansion layer's output for the context embedding), then
    one step per token t_0 .. t_{L_B-2} (its `embed_in` embedding); the
    output of each step's last position predicts the next token. No key is
    masked (a block's inputs are all valid).

    - `input`: `[B, S, T]` input vectors (T = config hidden).
    - `positions`: `[S]` i64/i32 RoPE positions of the S inputs: training
      positions continue `0 .. P+L_B-2` over the block; the official generate
      uses `[0]*P, 1, 2, ...` (fixtures README).
    - `cache`: a `local` `!bt.kv_cache` with the config's layers, heads and
      head_dim, batch B and a static capacity ≥ the block's inputs.
    - result: `[B, S, T]` final-LayerNorm hidden states; result cache.

    Parameters (prefix `params` as `bt.token_decoder`, e.g. `token_decoder`):
    the GPT-NeoX stack under `{params}.gpt_neox` (as `bt.block_decoder`).
    `embed_in` and the expansion layer are applied by the caller.

    `bt-decompose` lowers it like the cache form of `bt.block_decoder`: per
    layer `bt.kv_append` (no key mask) and `bt.kv_attend` with the given
    positions.

    Errors: ranks, config width ≠ T, positions ≠ `[S]`, cache scope not
    `local`, cache layers/heads/head_dim/element type/batch ≠ config and
    input, static S above the capacity, a missing or mis-shaped parameter.

    Example:
    ```mlir
    %h, %c1 = bt.token_decoder_step %x, %pos cache %c0 config #td
                params "token_decoder" : tensor<?x2x64xf32>, tensor<2xi64>,
                !bt.kv_cache<local, ...> -> tensor<?x2x64xf32>, !bt.kv_cache<local, ...>
    ```
  }];
  let arguments = (ins BT_FloatTensor:$input,
                       BT_PositionTensor:$positions,
                       BT_KVCacheType:$cache,
                       StrAttr:$params,
                       BT_NeoXConfigAttr:$config);
  let results = (outs BT_FloatTensor:$result, BT_KVCacheType:$result_cache);
  let assemblyFormat = [{
    $input `,` $positions `cache` $cache `config` $config `params` $params
    attr-dict `:` type($input) `,` type($positions) `,` qualified(type($cache))
    `->` type($result) `,` qualified(type($result_cache))
  }];
  let hasVerifier = 1;
}

def BT_SampleOp : BT_Op<"sample", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Samples one token per row from next-token logits (runtime sampler)";
  let description = [{
    Chooses the next token of every row from its logits by calling the
    runtime's sampler (docs/generation.md, "Sampling"): greedy (argmax, lowest
    id on ties), temperature / top-k / top-p with a per-sequence generator,
    and EOS bookkeeping (after a row emitted EOS the sampler returns the
    generation pad id for the rest of the block). The policy and its state
    live in the runtime; `sampler` is an opaque handle the runtime passes to
    the entry point. The op has side effects (the sampler's state): calls
    are neither merged nor reordered.

    - `logits`: `[B, V]` f32, or bf16 (the CUDA target's `--dtype bf16`
      decode entries, whose LM head writes bf16 logits: bt-bf16-gemm-outputs);
      `sampler`: i64 handle; result: `[B]` i64. The sampler chooses from the
      values the logits hold (bf16 extended exactly to f32).

    Code generation (CPU): bufferized into a call of the external C function
    `_mlir_ciface_bt_rt_sample(int64_t sampler, StridedMemRefType<float, 2>
    *logits, StridedMemRefType<int64_t, 1> *tokens)` (`bt_rt_sample` with
    `llvm.emit_c_interface`), left undefined in the kernel library and
    resolved against the process like `cblas_sgemm`. The logits are dense
    row-major; the callee writes the B tokens. bf16 logits call
    `_mlir_ciface_bt_rt_sample_bf16` (`StridedMemRefType<uint16_t, 2>`, the
    bf16 bits) instead; the CUDA target maps both to its device samplers.

    Errors: logits not rank 2, result not `[B]`.

    Example:
    ```mlir
    %t = bt.sample %logits, %s : tensor<?x512xf32> -> tensor<?xi64>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32, BF16]>:$logits, I64:$sampler);
  let results = (outs RankedTensorOf<[I64]>:$tokens);
  let assemblyFormat = [{
    $logits `,` $sampler attr-dict `:` type($logits) `->` type($tokens)
  }];
  let hasVerifier = 1;
}

def BT_LMHeadOp : BT_Op<"lm_head", [Pure, BT_BlockLocal, BT_ParamUser]> {
  let summary = "Untied output projection to vocabulary logits (no bias)";
  let description = [{
    `logits = hidden · Wᵀ` with `W = @weight` `[V, T]` (official
    `token_decoder.embed_out`, `nn.Linear(T, V, bias=False)`, untied).

    - `hidden`: `[..., T]`; result `[..., V]`, same element type.

    Errors: last dim ≠ T, result shape, element type, undeclared weight.
  }];
  let arguments = (ins BT_FloatTensor:$hidden, FlatSymbolRefAttr:$weight);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = [{
    $hidden `weight` $weight attr-dict `:` type($hidden) `->` type($result)
  }];
  let hasVerifier = 1;
}

def BT_CrossEntropyOp : BT_Op<"cross_entropy", [Pure, BT_Differentiable]> {
  let summary = "Mean token cross-entropy over non-ignored targets";
  let description = [{
    `loss = mean over {j : labels[j] ≠ ignore_index} of
    (logsumexp(logits[j, :]) - logits[j, labels[j]])`, computed in f32
    (PyTorch `CrossEntropyLoss(reduction='mean', ignore_index=-100)`).
    For the Block Transformer the targets are the tokens of blocks
    1 .. N_blk-1 (block 0 is never predicted; official
    `BlockTransformer.forward`).

    - `logits`: `[..., V]`; `labels`: `[...]` i64/i32; result: `tensor<f32>`.
    - If every label is ignored the result is NaN (as PyTorch).

    Errors: labels shape ≠ logits shape without the last dim.
  }];
  let arguments = (ins BT_FloatTensor:$logits, BT_IdTensor:$labels,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs BT_F32ScalarTensor:$loss);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` type($logits) `,` type($labels) `->` type($loss)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Layer level
//===----------------------------------------------------------------------===//

def BT_LayerNormOp : BT_Op<"layer_norm", [Pure, BT_BlockLocal, BT_Differentiable]> {
  let summary = "LayerNorm over the last dimension";
  let description = [{
    `y = (x - mean(x)) / sqrt(var(x) + eps) · weight + bias` over the last
    dim (biased variance, PyTorch `nn.LayerNorm`).

    - `input`: `[..., C]`; `weight`, `bias`: `[C]`; result: same as input.
    - `eps` (f64): 1e-5 in GPT-NeoX.

    Errors: weight/bias shape ≠ `[C]`, result type ≠ input type, eps ≤ 0.
  }];
  let arguments = (ins BT_FloatTensor:$input, BT_FloatTensor:$weight,
                       BT_FloatTensor:$bias, F64Attr:$eps);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `eps` $eps attr-dict `:` type($input) `,`
    type($weight) `,` type($bias) `->` type($result)
  }];
  let hasVerifier = 1;
}

def BT_LinearOp : BT_Op<"linear", [Pure, BT_BlockLocal, BT_Differentiable]> {
  let summary = "Affine map with a PyTorch-layout weight";
  let description = [{
    `y = x · Wᵀ + b` (PyTorch `nn.Linear`, and Conv1d with kernel 1 when the
    weight is `[N, K, 1]`).

    - `input`: `[..., K]`; `weight`: `[N, K]` or `[N, K, 1]`; `bias`
      (optional): `[N]`; result: `[..., N]`.

    Errors: K mismatch, bias ≠ `[N]`, result shape or element type.
  }];
  let arguments = (ins BT_FloatTensor:$input, BT_FloatTensor:$weight,
                       Optional<BT_FloatTensor>:$bias);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,`
    type($weight) (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def BT_GeluOp : BT_Op<"gelu", [Pure, BT_BlockLocal, BT_Differentiable,
    SameOperandsAndResultType]> {
  let summary = "Exact (erf) GELU";
  let description = [{
    `y = x/2 · (1 + erf(x/√2))` elementwise (HF `ACT2FN["gelu"]`, PyTorch
    `gelu(approximate='none')`). Any shape.
  }];
  let arguments = (ins BT_FloatTensor:$input);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def BT_EmbeddingLookupOp : BT_Op<"embedding_lookup", [Pure, BT_BlockLocal,
    BT_Differentiable]> {
  let summary = "Row gather from an embedding table";
  let description = [{
    `result[..., :] = table[ids[...], :]`.

    - `ids`: `[...]` i64/i32; `table`: `[V, E]`; result: `[..., E]`.
    - Ids outside `[0, V)` are a runtime error in generated code.

    Errors: result shape ≠ ids shape + `[E]`, element type ≠ table's.
  }];
  let arguments = (ins BT_IdTensor:$ids, BT_FloatTensor:$table);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table attr-dict `:` type($ids) `,` type($table) `->` type($result)
  }];
  let hasVerifier = 1;
}

def BT_PrefixProjectionOp : BT_Op<"prefix_projection", [Pure, BT_BlockLocal,
    BT_Differentiable]> {
  let summary = "Projects context embeddings into P prefix vectors of width T";
  let description = [{
    Paper §2.4 (official `BaseTokenDecoder.expand_block_embeddings`,
    `expansion_method: expansion_layer`): a Conv1d with kernel 1, `D → P·T`,
    whose output is split into P consecutive vectors:
    `prefix[..., k, :] = (ctx · Wᵀ + b)[..., k·T : (k+1)·T]`.

    - `context_embedding`: `[..., D]`; `weight`: `[P·T, D, 1]` (Conv1d) or `[P·T, D]`;
      `bias`: `[P·T]`; result: `[..., P, T]` with P = `prefix_length`.

    Errors: prefix_length < 1, weight rows ≠ P·T, D mismatch, shapes.
  }];
  let arguments = (ins BT_FloatTensor:$context_embedding, BT_FloatTensor:$weight,
                       BT_FloatTensor:$bias, I64Attr:$prefix_length);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = [{
    $context_embedding `,` $weight `,` $bias `prefix_length` $prefix_length attr-dict
    `:` type($context_embedding) `,` type($weight) `,` type($bias) `->` type($result)
  }];
  let hasVerifier = 1;
}

def BT_SplitQKVOp : BT_Op<"split_qkv", [Pure, BT_BlockLocal, BT_Differentiable]> {
  let summary = "Splits a fused GPT-NeoX QKV projection into per-head q, k, v";
  let description = [{
    GPT-NeoX lays out `query_key_value` rows per head: `[H, 3, hd]`. This op
    views `qkv` `[..., H·3·hd]` as `[..., H, 3, hd]` and returns
    `q = [..., H, 0, :]`, `k = [..., H, 1, :]`, `v = [..., H, 2, :]`, each
    `[..., H, hd]` (HF `GPTNeoXAttention._split_heads`-equivalent).

    Errors: last dim ≠ 3·H·hd, result shapes, element types.
  }];
  let arguments = (ins BT_FloatTensor:$qkv, I64Attr:$heads, I64Attr:$head_dim);
  let results = (outs BT_FloatTensor:$q, BT_FloatTensor:$k, BT_FloatTensor:$v);
  let assemblyFormat = [{
    $qkv `heads` $heads `head_dim` $head_dim attr-dict `:` type($qkv) `->`
    type($q) `,` type($k) `,` type($v)
  }];
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$qkv, "int64_t":$heads, "int64_t":$headDim)>
  ];
}

def BT_RotaryOp : BT_Op<"rotary", [Pure, BT_BlockLocal, BT_Differentiable]> {
  let summary = "Partial rotary position embedding, GPT-NeoX rotate-half";
  let description = [{
    Applies RoPE to the first `rotary_dims` dims of each head (the rest pass
    through), GPT-NeoX style (rotate-half, not interleaved): with
    `r = rotary_dims`, `inv_freq[i] = base^(-2i/r)`, `θ = pos · inv_freq`,
    `cos/sin = [cos θ, cos θ]`, `y[:r] = x[:r]·cos + rotate_half(x[:r])·sin`,
    `rotate_half([a, b]) = [-b, a]` (HF `GPTNeoXRotaryEmbedding`,
    `apply_rotary_pos_emb`).

    - `input`: `[..., S, H, hd]`; `positions`: `[S]` or `[..., S]` (the
      leading dims of input up to S) i64/i32; result: same as input.
    - Positions are operands so that both training positions and the official
      `generate` positions can be expressed.

    Errors: rotary_dims odd, 0 or > hd, base ≤ 0, positions shape.
  }];
  let arguments = (ins BT_FloatTensor:$input, BT_PositionTensor:$positions,
                       I64Attr:$rotary_dims, F64Attr:$base);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions `rotary_dims` $rotary_dims `base` $base attr-dict
    `:` type($input) `,` type($positions) `->` type($result)
  }];
  let hasVerifier = 1;
}

def BT_AttentionOp : BT_Op<"attention", [Pure, BT_Differentiable,
    AllTypesMatch<["q", "k", "v", "result"]>]> {
  let summary = "Global causal multi-head attention (block decoder, vanilla)";
  let description = [{
    `out[b, s, h] = softmax_t(q[b,s,h]·k[b,t,h] · scale + m[b,s,t]) · v[b,t,h]`
    over keys `t ≤ s`, where `m = 0` for attended keys and the most negative
    finite value for keys with `key_mask = 0` (HF eager GPT-NeoX). Used by
    the block decoder in training / eval (one position per block) and by
    vanilla GPT-NeoX. The cached form used in generation is `bt.kv_attend`.

    - `q`, `k`, `v`: `[B, S, H, hd]`; `key_mask` (optional): `[B, S]`;
      result: `[B, S, H, hd]`.
    - `scale`: 1/√hd for GPT-NeoX.

    Errors: operand shapes differ, mask shape, scale ≤ 0.
  }];
  let arguments = (ins BT_FloatTensor:$q, BT_FloatTensor:$k, BT_FloatTensor:$v,
                       Optional<BT_MaskTensor>:$key_mask, F64Attr:$scale);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`key_mask` $key_mask^)? `scale` $scale attr-dict `:`
    type($q) (`,` type($key_mask)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def BT_LocalAttentionOp : BT_Op<"local_attention", [Pure, BT_BlockLocal,
    BT_Differentiable,
    AllTypesMatch<["q", "k", "v", "result"]>]> {
  let summary = "Block-local causal attention (token decoder)";
  let description = [{
    Causal multi-head attention restricted to one block: every block
    `[b, n]` attends only to its own ≤ P + L_B positions (paper §2.4, "attention
    only inside the block"). Semantics per block as `bt.attention`.

    - `q`, `k`, `v`: `[B, N_blk, S, H, hd]` with S ≤ P + L_B; `key_mask`
      (optional): `[B, N_blk, S]`; result: `[B, N_blk, S, H, hd]`.

    Errors: shapes differ, mask shape, scale ≤ 0.
  }];
  let arguments = (ins BT_FloatTensor:$q, BT_FloatTensor:$k, BT_FloatTensor:$v,
                       Optional<BT_MaskTensor>:$key_mask, F64Attr:$scale);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`key_mask` $key_mask^)? `scale` $scale attr-dict `:`
    type($q) (`,` type($key_mask)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def BT_FusedLocalAttentionOp : BT_Op<"fused_local_attention",
    [Pure, BT_BlockLocal, BT_Differentiable]> {
  let summary = "QKV split + partial rotary + block-local causal attention, fused";
  let description = [{
    Produced by `bt-fuse-local-attention` from `bt.split_qkv` →
    `bt.rotary` (q and k) → `bt.local_attention`: one op (and one kernel) in
    which a head's whole local attention over ≤ P + L_B positions stays in
    registers / shared memory. Numerically identical to the unfused chain.

    - `qkv`: `[B, N_blk, S, H·3·hd]` (fused QKV projection output, per-head
      interleaved rows); `positions`: `[S]` or `[B, N_blk, S]`; `key_mask`
      (optional): `[B, N_blk, S]`; result: `[B, N_blk, S, H, hd]`.

    Errors: as `bt.split_qkv`, `bt.rotary` and `bt.local_attention`.
  }];
  let arguments = (ins BT_FloatTensor:$qkv, BT_PositionTensor:$positions,
                       Optional<BT_MaskTensor>:$key_mask,
                       I64Attr:$heads, I64Attr:$head_dim, I64Attr:$rotary_dims,
                       F64Attr:$base, F64Attr:$scale);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = [{
    $qkv `,` $positions (`key_mask` $key_mask^)? `heads` $heads `head_dim`
    $head_dim `rotary_dims` $rotary_dims `base` $base `scale` $scale attr-dict
    `:` type($qkv) `,` type($positions) (`,` type($key_mask)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer (layer level; BTOptimizerOps.td)
//===----------------------------------------------------------------------===//

include "bt/Dialect/BT/IR/BTOptimizerOps.td"

//===----------------------------------------------------------------------===//
// Backward (reverse-mode differentiation, bt-generate-gradients)
//===----------------------------------------------------------------------===//

// The vector-Jacobian products that would be poor as a composition of other
// ops. Emitted by the buildVJP rules (BT_DifferentiableOpInterface) and lowered
// by bt-lower-backward. Everything else (linear, GELU, rotary, QKV split,
// shape ops) is differentiated into existing bt ops, linalg and tensor ops.

def BT_LayerNormGradOp : BT_Op<"layer_norm_grad", [Pure,
    AllTypesMatch<["input", "result_grad", "input_grad"]>,
    AllTypesMatch<["weight", "weight_grad", "bias_grad"]>]> {
  let summary = "Backward of bt.layer_norm: input, weight and bias gradients";
  let description = [{
    For `y = bt.layer_norm(x, weight, bias, eps)` over the last dim C, with
    `dy` the gradient of the loss w.r.t. `y` (PyTorch `native_layer_norm_backward`;
    statistics recomputed from `x`):

    ```
    rstd = 1 / sqrt(var_C(x) + eps)        (biased variance)
    x̂    = (x - mean_C(x)) · rstd
    g    = dy · weight
    dx   = rstd · (g - mean_C(g) - x̂ · mean_C(g · x̂))
    dweight = Σ_rows dy · x̂,   dbias = Σ_rows dy   (rows = all leading dims)
    ```

    - `input`, `result_grad`: `[..., C]`; `weight`: `[C]`;
      results `input_grad` `[..., C]`, `weight_grad`, `bias_grad` `[C]`.

    Errors: weight shape ≠ `[C]`, element types differ, eps ≤ 0.

    Example:
    ```mlir
    %dx, %dw, %db = bt.layer_norm_grad %x, %w, %dy eps 1.0e-05
        : tensor<2x6x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins BT_FloatTensor:$input, BT_FloatTensor:$weight,
                       BT_FloatTensor:$result_grad, F64Attr:$eps);
  let results = (outs BT_FloatTensor:$input_grad, BT_FloatTensor:$weight_grad,
                      BT_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $result_grad `eps` $eps attr-dict `:` type($input)
    `,` type($weight)
  }];
  let hasVerifier = 1;
}

def BT_EmbeddingGradOp : BT_Op<"embedding_grad", [Pure]> {
  let summary = "Backward of bt.embedding_lookup: scatter-add into the table";
  let description = [{
    For `y = bt.embedding_lookup(ids, table)` with `dy` the gradient w.r.t.
    `y`: `table_grad[v, :] = Σ_{i : ids[i] = v} dy[i, :]`, summed in the
    row-major order of `ids` (PyTorch `embedding_backward`, dense). Rows of
    ids that do not occur are exactly zero. Ids outside `[0, V)` are a runtime
    error in generated code, as in the forward.

    - `ids`: `[...]` i64/i32; `result_grad`: `[..., E]`;
      result `table_grad`: `[V, E]` with a static V (the table's).

    Errors: result_grad shape ≠ ids shape + `[E]`, result not rank 2, dynamic
    V, element types differ.

    Example:
    ```mlir
    %dt = bt.embedding_grad %ids, %dy : tensor<2x6x4xi64>, tensor<2x6x4x16xf32> -> tensor<512x16xf32>
    ```
  }];
  let arguments = (ins BT_IdTensor:$ids, BT_FloatTensor:$result_grad);
  let results = (outs BT_FloatTensor:$table_grad);
  let assemblyFormat = [{
    $ids `,` $result_grad attr-dict `:` type($ids) `,` type($result_grad) `->`
    type($table_grad)
  }];
  let hasVerifier = 1;
}

def BT_AttentionGradOp : BT_Op<"attention_grad", [Pure,
    AllTypesMatch<["q", "k", "v", "result_grad", "q_grad", "k_grad", "v_grad"]>]> {
  let summary = "Backward of bt.attention / bt.local_attention";
  let description = [{
    Gradients of `o = bt.attention(q, k, v, key_mask, scale)` (rank 4,
    `[B, S, H, hd]`) or `bt.local_attention` (rank 5, `[B, N_blk, S, H, hd]`,
    every block on its own) w.r.t. q, k and v, given `dO` = `result_grad`.
    The probabilities are recomputed with the forward's HF-eager numerics; per
    batch element (and block) and head, with `m` the key mask:

    ```
    s[i, j]  = where(j ≤ i, q_i · k_j · scale, MIN) + (1 - m[j]) · MIN
    P        = softmax_j(s)                      (MIN = finfo(f32).min)
    dV       = Pᵀ · dO
    dP       = dO · Vᵀ
    dS[i, j] = where(j ≤ i, P[i, j] · (dP[i, j] - Σ_j' dP[i, j'] · P[i, j']), 0)
    dQ       = scale · dS · K,      dK = scale · dSᵀ · Q
    ```

    The additive key mask is a constant, so gradients flow through masked
    causal scores exactly as in PyTorch autograd of HF's
    `torch.where(causal, scores, MIN) + attention_mask`; the non-causal
    entries are cut by the `where`.

    - `q`, `k`, `v`, `result_grad` and the three results share one type;
      `key_mask` (optional): `[B, S]` (rank 4) or `[B, N_blk, S]` (rank 5).

    Errors: rank not 4 or 5, mask shape, scale ≤ 0.

    Example:
    ```mlir
    %dq, %dk, %dv = bt.attention_grad %q, %k, %v, %do key_mask %m
        scale 0.17677669529663687 : tensor<2x6x2x32xf32>, tensor<2x6xi64>
    ```
  }];
  let arguments = (ins BT_FloatTensor:$q, BT_FloatTensor:$k, BT_FloatTensor:$v,
                       BT_FloatTensor:$result_grad,
                       Optional<BT_MaskTensor>:$key_mask, F64Attr:$scale);
  let results = (outs BT_FloatTensor:$q_grad, BT_FloatTensor:$k_grad,
                      BT_FloatTensor:$v_grad);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $result_grad (`key_mask` $key_mask^)? `scale` $scale
    attr-dict `:` type($q) (`,` type($key_mask)^)?
  }];
  let hasVerifier = 1;
}

def BT_CrossEntropyGradOp : BT_Op<"cross_entropy_grad", [Pure,
    AllTypesMatch<["logits", "logits_grad"]>]> {
  let summary = "Backward of bt.cross_entropy";
  let description = [{
    Gradient of `loss = bt.cross_entropy(logits, labels, ignore_index)` (mean
    over the n non-ignored rows) w.r.t. the logits, given the scalar
    `loss_grad`:

    ```
    logits_grad[j, :] = loss_grad / n · (softmax(logits[j, :]) - onehot(labels[j]))
                        for labels[j] ≠ ignore_index,
    logits_grad[j, :] = 0 for ignored rows (all rows when n = 0).
    ```

    - `logits`: `[..., V]`; `labels`: `[...]` i64/i32; `loss_grad`:
      `tensor<f32>`; result: the type of `logits`. Labels outside `[0, V)`
      are a runtime error in generated code, as in the forward.

    Errors: labels shape ≠ logits shape without the last dim.

    Example:
    ```mlir
    %dl = bt.cross_entropy_grad %logits, %labels, %dloss
        : tensor<2x5x4x512xf32>, tensor<2x5x4xi64>, tensor<f32>
    ```
  }];
  let arguments = (ins BT_FloatTensor:$logits, BT_IdTensor:$labels,
                       BT_F32ScalarTensor:$loss_grad,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs BT_FloatTensor:$logits_grad);
  let assemblyFormat = [{
    $logits `,` $labels `,` $loss_grad attr-dict `:` type($logits) `,`
    type($labels) `,` type($loss_grad)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// KV caches
//===----------------------------------------------------------------------===//

def BT_KVAllocOp : BT_Op<"kv_alloc", [AttrSizedOperandSegments,
    MemoryEffects<[MemAlloc]>]> {
  let summary = "Allocates an empty KV cache";
  let description = [{
    Starts the lifetime of a `!bt.kv_cache` value: storage for
    `[layers, 2, batch, heads, capacity, head_dim]` elements, every layer's
    fill length 0. `batch` is the dynamic batch size when the type's batch is
    `?` and must be absent otherwise; likewise `capacity` for a dynamic
    capacity (global caches only). The value must be released
    (`bt.kv_release`) on every path.

    Example:
    ```mlir
    %c = bt.kv_alloc : !bt.kv_cache<local, batch = 2, layers = 2, heads = 2, capacity = 6, head_dim = 32, f32>
    %g = bt.kv_alloc batch %n : !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = 512, head_dim = 32, f32>
    %h = bt.kv_alloc batch %n capacity %m : !bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = ?, head_dim = 32, f32>
    ```
  }];
  let arguments = (ins Optional<Index>:$batch, Optional<Index>:$capacity);
  let results = (outs BT_KVCacheType:$cache);
  let assemblyFormat = [{
    (`batch` $batch^)? (`capacity` $capacity^)? attr-dict `:` qualified(type($cache))
  }];
  let hasVerifier = 1;
  let builders = [
    // Static capacity: `batch` is null for a static batch.
    OpBuilder<(ins "::mlir::Type":$cache, "::mlir::Value":$batch)>
  ];
}

def BT_KVAppendOp : BT_Op<"kv_append", [BT_CacheUser,
    MemoryEffects<[MemRead, MemWrite]>, AllTypesMatch<["cache", "result"]>,
    AllTypesMatch<["key", "value"]>]> {
  let summary = "Appends keys/values of one layer; returns the new cache value";
  let description = [{
    Writes S new entries at the end of layer `layer` of the cache and
    returns the updated cache. The operand cache value is consumed: any later
    use of it is an error (`bt-verify-kv-lifetimes`). Appending past
    `capacity` is a runtime error.

    - `key`, `value`: `[B, S, H, hd]` with H, hd and element type of the
      cache and B its batch; `key_mask` (optional): `[B, S]`, the key-padding
      flags stored with the entries (default: all valid).
    - `layer`: 0 ≤ layer < layers.

    Example:
    ```mlir
    %c1 = bt.kv_append %c0[0], %k, %v : !bt.kv_cache<...>, tensor<2x1x2x32xf32>
    ```
  }];
  let arguments = (ins BT_KVCacheType:$cache, I64Attr:$layer,
                       BT_FloatTensor:$key, BT_FloatTensor:$value,
                       Optional<BT_MaskTensor>:$key_mask);
  let results = (outs BT_KVCacheType:$result);
  let assemblyFormat = [{
    $cache `[` $layer `]` `,` $key `,` $value (`key_mask` $key_mask^)? attr-dict
    `:` qualified(type($cache)) `,` type($key) (`,` type($key_mask)^)?
  }];
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$cache, "int64_t":$layer,
                   "::mlir::Value":$key, "::mlir::Value":$value)>
  ];
}

def BT_KVAttendOp : BT_Op<"kv_attend", [BT_CacheUser,
    MemoryEffects<[MemRead]>]> {
  let summary = "Causal attention of new queries over one layer of a KV cache";
  let description = [{
    The global (or local) causal attention with a cache operand. With `len`
    the layer's fill length (the S queries' own keys must already be
    appended), query s attends to entries `t ≤ len - S + s` whose key-padding
    flag is set, with the semantics of `bt.attention`. Reads the cache; the
    operand stays live.

    - `query`: `[B, S, H, hd]`; result: `[B, S, H, hd]`.

    Example:
    ```mlir
    %o = bt.kv_attend %q, %c1[0] scale 0.17677669529663687
           : tensor<2x1x2x32xf32>, !bt.kv_cache<...> -> tensor<2x1x2x32xf32>
    ```
  }];
  let arguments = (ins BT_FloatTensor:$query, BT_KVCacheType:$cache,
                       I64Attr:$layer, F64Attr:$scale);
  let results = (outs BT_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $cache `[` $layer `]` `scale` $scale attr-dict `:` type($query)
    `,` qualified(type($cache)) `->` type($result)
  }];
  let hasVerifier = 1;
}

def BT_KVLengthOp : BT_Op<"kv_length", [BT_CacheUser,
    MemoryEffects<[MemRead]>]> {
  let summary = "Number of filled entries of one layer of a KV cache";
  let description = [{
    Returns the fill length of layer `layer` (the RoPE position of the next
    appended entry for a global cache). Reads the cache; the operand stays live.
  }];
  let arguments = (ins BT_KVCacheType:$cache, I64Attr:$layer);
  let results = (outs Index:$length);
  let assemblyFormat = [{
    $cache `[` $layer `]` attr-dict `:` qualified(type($cache))
  }];
  let hasVerifier = 1;
}

def BT_KVReleaseOp : BT_Op<"kv_release", [BT_CacheUser,
    MemoryEffects<[MemFree]>]> {
  let summary = "Ends the lifetime of a KV cache";
  let description = [{
    Frees the cache storage. The operand is consumed; using it afterwards, or
    releasing it twice, is an error (`bt-verify-kv-lifetimes`).
  }];
  let arguments = (ins BT_KVCacheType:$cache);
  let assemblyFormat = "$cache attr-dict `:` qualified(type($cache))";
}

#endif // BT_OPS_TD
