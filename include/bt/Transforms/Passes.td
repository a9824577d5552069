//===- Passes.td - bt transformation passes -----------------*- tablegen -*-===//

#ifndef BT_TRANSFORMS_PASSES_TD
#define BT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def BTVerifyKVLifetimes : Pass<"bt-verify-kv-lifetimes"> {
  let summary = "Verify that every !bt.kv_cache value has a linear, complete lifetime";
  let description = [{
    Checks the explicit KV-cache lifetimes of the bt dialect (DESIGN.md §3) on
    every function-like op (and on the op it runs on) by an abstract
    interpretation of the IR that follows `scf.if`, `scf.for`, `scf.while`,
    `scf.execute_region` and unstructured control flow (`cf.br`,
    `cf.cond_br`, any branch op) between blocks:

    1. **Linearity.** A cache value is *consumed* by exactly one op on every
       path: `bt.kv_append` (which returns the next value), `bt.kv_release`,
       `bt.block_decoder` with a cache, a loop that takes it as an init, a
       region terminator that yields it, a branch that passes it to a
       successor, `func.return` or `func.call`. A second consumption is
       reported at the second consumer ("uses a KV cache after it was
       consumed by ..." or "KV cache released twice"), with a note at the
       first. A cache defined outside a loop (`scf.for`, `scf.while`, or a
       loop of blocks) cannot be consumed inside it, since it would be
       consumed once per iteration: carry it through the loop instead.
    2. **No use after release.** Reads (`bt.kv_attend`, `bt.kv_length`) must
       happen while the value is live ("uses a KV cache after it was
       released"), with a note at the release.
    3. **No leak.** Every value allocated (or received as an argument or
       from a call) is consumed on every path before its function returns; a
       value consumed on one branch of an `scf.if` (or one exit of an
       `scf.execute_region`, or one edge into a block) must be consumed on
       all of them. Leaks are reported at the terminator of the leaking path
       (for an `scf.if` without `else` that consumes a value in `then`: at the
       `scf.if`), with a note at the definition of the value or where another
       path consumed it.
    4. **Local caches stay local.** A `local` cache may flow into nested
       regions but never out of the region that allocated it: it cannot be
       yielded by that region's terminator, returned, passed to a call,
       returned by a call, or be a function argument. (A local cache lives for
       one block of the token decoder, paper §2.4.) A value that may hold
       caches of several allocations (an `scf.if` or `scf.execute_region`
       result, a loop-carried value, a block argument) counts as allocated in
       the innermost of their regions.
    5. **Only KV-cache ops, control flow and calls use caches.** Any other
       op that takes a cache operand, or produces a cache other than
       `bt.kv_alloc`, is an error: only ops that implement
       `KVCacheUserOpInterface`, the control flow above and calls may use
       caches. Caches cannot be used inside the regions of other ops (e.g.
       `linalg.generic`, `scf.index_switch`, `scf.forall`), whose control
       flow the pass does not interpret.

    Each function gets at most one error (the first violation found).
    Function declarations are not checked; calls to them are.

    Ops without cache values are not affected. The pass does not modify IR.
  }];
}

def BTGenerateEntryPoints : Pass<"bt-generate-entry-points", "::mlir::ModuleOp"> {
  let summary = "Derive the generation entry points from the model-level forward";
  let description = [{
    Finds the model-level forward of the module (the function `eval` that
    the importer builds, else the first function with a `bt.embedder`, a
    `bt.block_decoder` without cache and a `bt.lm_head`), reads the model
    from its ops (`bt.embedder` table and L_B, `bt.block_decoder` config and
    parameter prefix, `bt.token_decoder` config / strategy / prefix length /
    BOS, `bt.lm_head` weight) and adds the generation functions of
    docs/generation.md at model level (paper §2.4 and appendix "Analysis on
    the inference efficiency"; official `BlockTransformer.generate`).

    Block Transformer (a `bt.token_decoder` is present):

    - `@prefill(input_ids [B, N, L_B] i64, block_attention_mask [B, N] i64,
      kv_cache) -> (context [B, D], kv_cache)`: `bt.embedder` →
      `bt.block_decoder ... mask ... cache` → the output of block N-1.
    - `@decode_block(input_ids [B, 1, L_B] i64, kv_cache) -> (context [B, D],
      kv_cache)`: the same for one new block (all keys valid).
    - `@decode_tokens(context [B, D], positions [P + L_B - 1] i64,
      sampler [] i64) -> (tokens [B, L_B] i64, step_logits [B, L_B, V])`:
      allocates a `local` cache (capacity P + L_B - 1, batch B), then runs
      the token decoder over the L_B steps of one block: step 0 feeds the P
      prefix vectors (`bt.prefix_projection` of the context with the
      expansion layer), steps k = 1 .. L_B-1 (one `scf.for` that carries the
      cache, `tokens` and `step_logits`) the `embed_in` embedding of token
      k-1 (read back from `tokens`), each through `bt.token_decoder_step`
      (positions `positions[0 : P]`, then `positions[P+k-1]`); the last
      hidden state of each step goes through `bt.lm_head` and `bt.sample`,
      and the logits and token are inserted at column k of `step_logits` and
      `tokens`; the local cache is released at the end. For the summation
      strategy (MEGABYTE) the inputs are `E(bos | t_{k-1}) + e_k` and
      `positions` has L_B entries.

    Vanilla GPT-NeoX (no token decoder, L_B = 1; HF semantics):

    - `@prefill(input_ids [B, T] i64, attention_mask [B, T] i64,
      positions [B, T] i64, kv_cache) -> (logits [B, V], kv_cache)`: the
      logits of the last position.
    - `@decode_step(input_ids [B, 1] i64, positions [B, 1] i64, kv_cache)
      -> (logits [B, V], kv_cache)`.

    The global cache is a function argument of type
    `!bt.kv_cache<global, batch = ?, layers, heads, capacity = ?, head_dim>`
    (capacity chosen by the runtime) that is returned updated: the argument
    carries `bt.inout`, the result `bt.inout_arg = "kv_cache"` (the
    argument's `bt.name`). Every
    other argument and result carries `bt.name` and `bt.dims` (tensor names
    and symbolic dims of docs/generation.md, as the importer sets them). The
    result passes `bt-verify-kv-lifetimes`.

    Errors: no forward found, a model-level op missing from it, an entry
    point name already defined.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def BTDecompose : Pass<"bt-decompose", "::mlir::ModuleOp"> {
  let summary = "Rewrite model-level bt ops into layer-level bt ops";
  let description = [{
    Replaces every `bt.embedder`, `bt.block_decoder`, `bt.token_decoder`,
    `bt.token_decoder_step` and `bt.lm_head` by the layer-level ops it is
    made of (`bt.layer_norm`, `bt.linear`, `bt.split_qkv`, `bt.rotary`,
    `bt.attention`,
    `bt.local_attention`, `bt.gelu`, `bt.embedding_lookup`,
    `bt.prefix_projection`, the KV-cache ops) plus upstream `tensor` and
    `arith` ops. Weights become `bt.param_ref`s of their official names.
    `bt.cross_entropy` is kept (it is lowered later as a primitive). The
    result computes exactly what the official forward computes (HF
    transformers 4.39.3 GPT-NeoX, itsnamgyu/block-transformer @ 17842dd).

    Output form (S = sequence length of the stack, C = its width):

    - `bt.embedder`: `bt.embedding_lookup` `[B, N, L_B] → [B, N, L_B, E]`,
      then `tensor.collapse_shape [[0], [1], [2, 3]]` → `[B, N, D]`
      (token-major concatenation).
    - One GPT-NeoX layer `l` (`{p}` = the stack's parameter prefix), on
      `x` `[B, (N,) S, C]`:
      `h1 = bt.layer_norm(x, input_layernorm)`,
      `qkv = bt.linear(h1, attention.query_key_value)`,
      `q, k, v = bt.split_qkv(qkv)` `[..., S, H, hd]`,
      `q, k = bt.rotary(q | k, positions)` (omitted, with the
      positions, when rotary_dims = 0),
      attention (below), `tensor.collapse_shape` of the heads → `[..., S, C]`,
      `a = bt.linear(·, attention.dense)`,
      `h2 = bt.layer_norm(x, post_attention_layernorm)`,
      `m = bt.linear(bt.gelu(bt.linear(h2, mlp.dense_h_to_4h)), mlp.dense_4h_to_h)`,
      `x' = arith.addf(arith.addf(m, a), x)` (HF order
      `mlp_output + attn_output + hidden_states`). After the last layer,
      `bt.layer_norm(x, final_layer_norm)`.
    - Positions are a 1-D `tensor<S x i64>`: an `arith.constant`
      `dense<[0, .., S-1]>` when S is static and there is no cache;
      otherwise a `tensor.generate` whose body is
      `arith.index_cast(offset + i)` (offset 0, or the cache length).
    - `bt.block_decoder` without cache: positions `0 .. N-1`, `bt.attention`
      with `key_mask` = the block mask (if any), scale `1/sqrt(hd)`.
    - `bt.block_decoder` with cache: `len = bt.kv_length %cache[0]` before
      any append, positions `len + (0 .. N-1)`; per layer `l`
      `c' = bt.kv_append c[l], k, v (key_mask = the block mask)` and
      `bt.kv_attend q, c'[l]`; the last append's result replaces the
      op's cache result.
    - `bt.token_decoder`, `prefix`: `bt.prefix_projection` `[B, N, P, T]`,
      `bt.embedding_lookup` of `ids[:, :, 0 : L_B-1]`, `tensor.concat` along
      dim 2 (prefix first) → `[B, N, S = P+L_B-1, T]`, positions
      `0 .. S-1`, key mask `concat(ones [B, N, P], mask[:, :, 0 : L_B-1])`,
      `bt.local_attention`, result
      `tensor.extract_slice hidden[:, :, P-1 : P-1+L_B, :]`.
    - `bt.token_decoder`, `summation`: `bt.prefix_projection` with L_B
      vectors `e`; ids `concat(bos [B, N, 1], ids[:, :, 0 : L_B-1])`,
      input `arith.addf(embedding_lookup(ids'), e)`, S = L_B, key mask
      `concat(ones [B, N, 1], mask[:, :, 0 : L_B-1])`, the result is all L_B
      outputs.
    - `bt.block_decoder` with `positions`: those positions instead of the
      block index (no `bt.kv_length` is read for them).
    - `bt.token_decoder_step`: the stack under `{params}.gpt_neox` over its
      input with its positions, per layer `c' = bt.kv_append c[l], k, v`
      (no key mask) and `bt.kv_attend q, c'[l]`; the last append's result
      replaces the op's cache result.
    - `bt.lm_head`: `bt.linear(hidden, param_ref weight)` without bias.

    Every created op has the location `"<module>"(loc of the model op)`,
    where `<module>` is the official module path (e.g.
    `block_decoder.gpt_neox.layers.0.attention.dense`).

    Errors: a parameter that is not declared, a summation `bos_token_id`
    outside the token table.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // BT_TRANSFORMS_PASSES_TD
