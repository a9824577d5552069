//===- Passes.td - bt transformation passes -----------------*- tablegen -*-===//

#ifndef BT_TRANSFORMS_PASSES_TD
#define BT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def BTVerifyKVLifetimes : Pass<"bt-verify-kv-lifetimes"> {
  let summary = "Verify that every !bt.kv_cache value has a linear, complete lifetime";
  let description = [{
    Checks the explicit KV-cache lifetimes of the bt dialect (docs/design.md §3) on
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
    - `@decode_step(input_ids [B, 1] i64, left_padding [B, 1] i64,
      sampler [] i64, kv_cache) -> (tokens [B, 1] i64, logits [B, V],
      kv_cache)`: the new token's RoPE position is `bt.kv_length` minus the
      row's left padding (HF's cumsum(mask) - 1), and `tokens` is sampled
      from the logits (`bt.sample`), so that the runtime feeds it back
      without reading it first.

    The global cache is a function argument of type
    `!bt.kv_cache<global, batch = ?, layers, heads, capacity = ?, head_dim>`
    (capacity chosen by the runtime) that is returned updated: the argument
    carries `bt.inout`, the result `bt.inout_arg = "kv_cache"` (the
    argument's `bt.name`). Every
    other argument and result carries `bt.name` and `bt.dims` (tensor names
    and symbolic dims of docs/generation.md, as the importer sets them). The
    result passes `bt-verify-kv-lifetimes`.

    The caches hold the activations' element type, or with `kv-dtype=bf16`
    (f32 models; the CUDA target's `--dtype bf16`) bf16: the keys and values
    are rounded to nearest even as they are appended and read back exactly
    (half the cache bytes; `!bt.kv_cache`).

    Errors: no forward found, a model-level op missing from it, an entry
    point name already defined, `kv-dtype` other than `bf16` or empty, or
    `bf16` for a model whose activations are not f32.
  }];
  let options = [
    Option<"kvDType", "kv-dtype", "std::string", /*default=*/"\"\"",
           "Element type of the KV caches: empty (the activations') or bf16">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def BTGenerateTrainStep : Pass<"bt-generate-train-step", "::mlir::ModuleOp"> {
  let summary = "Build the training entry points: train_step (forward, backward, AdamW) and apply_gradients";
  let description = [{
    Issue "Training"; docs/training.md. From the model-level forward with
    loss, the function `eval_loss` the importer builds (its result named
    `loss`, `bt.cross_entropy`), adds:

    - `@train_step` (option `train-step`): one optimizer step. A copy of
      `eval_loss` is decomposed to layer level (`bt-decompose`'s rewriting)
      and narrowed to what the loss reads (`bt-eliminate-dead-prefill`'s
      rewriting: after its last attention, the token decoder computes only
      the L_B positions P-1 .. P+L_B-2 that predict tokens, not the P-1
      discarded ones), the reverse sweep of
      `include/bt/Transforms/Autodiff.h` gives the
      gradient of the loss with respect to every parameter the loss reads,
      and the optimizer below updates them. Arguments (`bt.name`):
      the batch (`eval_loss`'s inputs: `input_ids`, `attention_mask`,
      `block_attention_mask`, `labels`; vanilla `input_ids`,
      `attention_mask`, `labels`), then the schedule and optimizer scalars,
      then the in-out state. Results: `loss`, `grad_norm`, `lr` (all
      `tensor<f32>`), then the in-out results.
    - `@apply_gradients` (option `apply-gradients`): the same optimizer
      step with the gradients given as inputs `grad.<name>` (the fixtures'
      names, `outputs.safetensors`), before the scalars; results
      `grad_norm`, `lr`, then the in-out results. It checks the optimizer
      against stored gradients independently of differentiation.

    Scalars: `step` (`tensor<i64>`, 1-based count of this step: the first
    step is 1), `peak_lr` (`tensor<f32>`), `warmup_steps`, `total_steps`
    (`tensor<i64>`); the learning rate is computed in the entry point
    (`bt.lr_schedule`) and returned as `lr`.

    In-out state, f32, for every parameter the loss depends on (module
    declaration order = official state_dict order; a declared parameter the
    forward never reads, e.g. the Block Transformer's
    `block_decoder.gpt_neox.embed_in.weight`, has no gradient and is not
    part of the step, as torch skips a parameter whose grad is None):
    `param.<name>`, then `adam_m.<name>`, then `adam_v.<name>`. Each
    argument carries `bt.inout` and the matching result
    `bt.inout_arg = "<that name>"`, as the KV caches of generation:
    the parameters are read by the forward and the backward, then written
    in place by `bt.adamw` (its results are the updated buffers), and
    `bt-drop-inout-results` removes the results after bufferization (it
    fails if bufferization copied a parameter). In these functions the
    weights are these arguments, not `bt.param_ref`s: the runtime owns
    writable buffers for them.

    The step (torch 1.13 `clip_grad_norm_` + single-tensor `AdamW`, one
    parameter group with weight decay on everything, as the fixtures'
    `adamw_step` and the official DeepSpeed config):

    ```
    grad_norm = bt.global_norm(grads)                    (pre-clip, f32)
    clip      = bt.clip_coefficient(grad_norm, max-grad-norm)
    lr        = bt.lr_schedule(step, peak_lr, warmup_steps, total_steps)
    p, m, v   = bt.adamw(p, g, m, v, lr, step, clip)     (every parameter)
    ```

    Every argument and result has `bt.name`; the batch arguments and
    `loss` keep `eval_loss`'s `bt.dims`.

    Errors: no `eval_loss`, or no result named `loss`; an entry point name
    already defined; a model-level op that cannot be decomposed; the loss
    cannot be differentiated.
  }];
  let options = [
    Option<"trainStep", "train-step", "bool", /*default=*/"true",
           "Build train_step (forward + backward + optimizer)">,
    Option<"applyGradients", "apply-gradients", "bool", /*default=*/"true",
           "Build apply_gradients (the optimizer on given gradients)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "AdamW beta1 (official adam_beta1)">,
    Option<"beta2", "beta2", "double", /*default=*/"0.95",
           "AdamW beta2 (official adam_beta2)">,
    Option<"eps", "eps", "double", /*default=*/"1e-8",
           "AdamW eps (HF adam_epsilon)">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.1",
           "AdamW weight decay, applied to every parameter">,
    Option<"maxGradNorm", "max-grad-norm", "double", /*default=*/"1.0",
           "Gradient clipping norm (HF max_grad_norm)">,
    Option<"cosMinRatio", "cos-min-ratio", "double", /*default=*/"0.1",
           "LR floor as a fraction of the peak (DeepSpeed cos_min_ratio)">,
    Option<"warmupMinRatio", "warmup-min-ratio", "double", /*default=*/"0.0",
           "LR at the start of warmup as a fraction of the peak">,
    Option<"initialLRRatio", "initial-lr-ratio", "double", /*default=*/"1.0",
           "LR of step 1 as a fraction of the peak (1: DeepSpeed <= 0.15.2, "
           "as the official runs; 0: DeepSpeed >= 0.15.3)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::tensor::TensorDialect"];
}

def BTGenerateGradients : Pass<"bt-generate-gradients", "::mlir::ModuleOp"> {
  let summary = "Derive the `grad` entry point (loss and parameter gradients) from `eval_loss`";
  let description = [{
    Reverse-mode differentiation of the training graph (issue "Training"):
    clones the layer-level function `eval_loss` (option `from`; the
    importer's forward with `bt.cross_entropy`, after `bt-decompose`) into a
    new function `grad` (option `name`) with the same arguments (and their
    `bt.name` / `bt.dims`), builds the backward sweep of its `loss` result
    (the result whose `bt.name` is "loss") with the C++ API
    `bt::buildParamGradients` (include/bt/Transforms/Autodiff.h) and returns

    - `loss` (`tensor<f32>`, its attributes copied),
    - one `grad.<param>` per parameter the forward reads, in `bt.param`
      declaration order (official state_dict order): d loss / d param, raw
      (before clipping), the type of the parameter, `bt.name =
      "grad.<param>"` and `bt.dims` of empty names. These are the fixture
      names of `outputs.safetensors`.

    The forward values that only fed the other results (e.g. the logits
    zeroing of `eval_loss`) are removed from `grad`.

    Every op on a path from a parameter to the loss must implement
    `bt::DifferentiableOpInterface` (BTInterfaces.td): the layer-level bt ops
    do, with backward ops `bt.layer_norm_grad`, `bt.embedding_grad`,
    `bt.attention_grad`, `bt.cross_entropy_grad` where a composition would be
    poor, and so do the upstream tensor / arith ops bt-decompose emits
    (external models). Any other op on such a path is an error located at it
    ("op 'x' has no vector-Jacobian rule"), as are model-level ops (run
    `bt-decompose` first).

    Errors: no function `from`, a function `name` already defined, no result
    named "loss", an op without a rule on a parameter → loss path.
  }];
  let options = [
    Option<"from", "from", "std::string", /*default=*/"\"eval_loss\"",
           "The forward function with a `loss` result">,
    Option<"name", "name", "std::string", /*default=*/"\"grad\"",
           "Name of the generated function">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
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
      (token-major concatenation). With `projection` (the projection-layer
      embedder, Conv1d kernel = stride = L_B): for k = 0 .. L_B-1 a
      `bt.linear` of `tensor.extract_slice` `lookup[:, :, k, :]` `[B, N, E]`
      with `W[:, :, k]` `[D, E]` (the bias in k = 0), summed in k order by
      `arith.addf` → `[B, N, D]`.
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

def BTEliminateDeadPrefill : Pass<"bt-eliminate-dead-prefill"> {
  let summary = "Remove the token-decoder work of blocks whose outputs are unused";
  let description = [{
    Paper §2.4 ("the prefill stage [can] be skipped entirely — except for the
    most recent block"), docs/design.md §4. Given a naive form in which the token
    decoder runs over every prompt block (as in the training graph) and only
    some blocks' outputs are used, removes the work of every other block, at
    model level (`bt.embedder`, `bt.token_decoder`, `bt.lm_head`) and at layer
    level (every layer op implements `BlockLocalOpInterface`).

    **Narrowing.** An op whose results are only read through
    `tensor.extract_slice`, `tensor.extract` (and `tensor.dim`) is recomputed
    on the hull of the ranges its users read along each of its block dims
    (`isBlockLocalAlong`): every operand partitioned along that dim
    (`getOperandBlockDim`) is sliced, shared operands (weights, 1-D
    positions) are left alone, and the users re-slice the narrowed result.
    Besides the interface ops, the upstream ops `bt-decompose` emits between
    them are narrowed with their own block structure: elementwise `arith` /
    `math` ops on tensors (every dim), `tensor.cast` (every dim),
    `tensor.concat` (every dim but the concatenated one),
    `tensor.collapse_shape` / `tensor.expand_shape` (the dims that are not
    merged or split). Applied greedily, slices move from the used outputs up
    to the first op that is not block-local (the block decoder, whose global
    attention needs every block; a function argument), and everything they
    no longer read is erased as dead. Consecutive slices are merged, slices
    of splat constants / `tensor.splat` / `tensor.empty` are folded, a slice
    that reads all of its source is removed.

    The hull along a dim is the min/max of the users' ranges when they are
    static, the common range when every user reads the same (dynamic)
    offset and size, and otherwise the whole dim (nothing is narrowed).
    Strided reads, and offsets/sizes that do not dominate the op, keep the
    whole dim. Leading dims other than B and N_blk are block dims of
    row-wise ops as well: at layer level the positions a token decoder
    discards (its first P-1 outputs) are not computed after its last
    attention, and the block decoder's last block is not normalized when
    only blocks 0 .. N-2 are read (eval).

    **Dead caches.** A KV-cache chain `bt.kv_alloc → (bt.kv_append |
    bt.block_decoder with cache)* → bt.kv_release` whose reads
    (`bt.kv_attend`, `bt.kv_length`, the block decoder's tensor result) are
    all unused is erased, and with it the work that only fed its appends. A
    chain that flows into anything else (a loop, a terminator, a call) is
    kept.

    **Report.** Per function: ops rewritten; token-decoder blocks removed
    and remaining (B · N_blk of each `bt.token_decoder`, or of each
    `bt.prefix_projection` at layer level, static shapes only); rewrites of
    token decoders with dynamic shapes; local and global caches removed; ops
    removed (net). They are pass statistics (`--mlir-pass-statistics`) and,
    with `report`, a remark on each function:

    ```
    remark: bt-eliminate-dead-prefill: 2 ops rewritten; token-decoder blocks:
      14 removed, 2 remaining, 0 dynamic rewrites; KV caches removed: 0 local,
      0 global; 1 ops removed
    ```

    (LLVM release builds without `LLVM_ENABLE_STATS`, such as Debian's
    LLVM 19, print no pass statistics at all; `report` works everywhere.)
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark per function with what was removed">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numRewritten", "rewritten",
              "Ops rewritten to compute only the blocks their users read">,
    Statistic<"numRemovedBlocks", "removed-blocks",
              "Token-decoder blocks removed (B*N_blk, static shapes)">,
    Statistic<"numRemainingBlocks", "remaining-blocks",
              "Token-decoder blocks computed after the pass (B*N_blk, static shapes)">,
    Statistic<"numDynamicRewrites", "dynamic-rewrites",
              "Token decoders narrowed with dynamic block counts">,
    Statistic<"numLocalCachesRemoved", "removed-local-caches",
              "Local KV caches removed (chains feeding nothing live)">,
    Statistic<"numGlobalCachesRemoved", "removed-global-caches",
              "Global KV caches removed (chains feeding nothing live)">,
    Statistic<"numOpsRemoved", "removed-ops",
              "Ops removed (net: erased minus created)">,
  ];
}

def BTFuseLocalAttention : Pass<"bt-fuse-local-attention"> {
  let summary = "Fuse split_qkv → rotary → local_attention into bt.fused_local_attention";
  let description = [{
    docs/design.md §4 ("Local attention fusion"). Rewrites the token decoder's
    attention chain, as `bt-decompose` emits it,

    ```mlir
    %q, %k, %v = bt.split_qkv %qkv heads H head_dim hd
    %qr = bt.rotary %q, %pos rotary_dims r base θ
    %kr = bt.rotary %k, %pos rotary_dims r base θ
    %o = bt.local_attention %qr, %kr, %v [key_mask %m] scale s
    ```

    into `%o = bt.fused_local_attention %qkv, %pos [key_mask %m] heads H
    head_dim hd rotary_dims r base θ scale s`, which the code generators
    lower to one kernel per (block, head) that reads the fused QKV
    projection directly (no rotated q/k tensors in memory).

    Matched exactly: q, k and v are the results of one `bt.split_qkv` whose
    input has rank 4 (`[B, N_blk, S, H·3·hd]`) and are used as q (rotated),
    k (rotated) and v (not rotated) of the attention, in these roles; q and
    k are rotated by two `bt.rotary` ops with the same positions value, the
    same `rotary_dims` and the same base; none of the split's results or
    the rotaries' results has another use. Heads, head_dim, key mask and
    scale are carried over. Anything else — no rotary (rotary_dims = 0),
    one operand not rotated, q/k swapped, different positions, dims or
    base, a rotated v, global `bt.attention`, an intermediate that is also
    used elsewhere — is left alone.

    Statistic: `fused`, the number of attentions fused.
  }];
  let statistics = [
    Statistic<"numFused", "fused", "Local attentions fused">,
  ];
}

def BTPlanKVMemory : Pass<"bt-plan-kv-memory", "::mlir::ModuleOp"> {
  let summary = "Plan KV-cache memory: bytes per sequence and the largest batch";
  let description = [{
    docs/design.md §3. Computes the memory plan of the module and attaches it as
    the module attribute `bt.kv_plan = {...}` (i64 entries, sizes in bytes);
    the same computation is the C++ API `bt::computeKVPlan`
    (include/bt/Transforms/KVPlan.h), which `bt-run plan` prints.

    - **Cache geometry** from the lifetimes of the `!bt.kv_cache` values of
      the module's functions (allocations, arguments, results): the global
      cache's layers, heads, head dim and element type, and the local
      caches' peak — the largest total of local caches live at the same
      time, allocation to release, per sequence. Without any cache value
      (no generation function yet), from the configs of the model-level
      `bt.block_decoder` and `bt.token_decoder`. L_B comes from `bt.embedder`
      (or `bt.token_decoder`), P from `bt.token_decoder`.
    - **Global cache per sequence**: `C · layers · 2 · H · hd · sizeof(elt)`
      with `C = ceil(prompt / L_B) + ceil(gen / L_B)` blocks.
    - **Local scratch per sequence**: `2 · layers_T · H_T · (P + L_B) · hd_T ·
      sizeof(elt)` for one local cache (bounded: independent of the length).
    - **Weights**: the elements of every `bt.param`.
    - **Max batch**: `floor((memory − weights) / (global + local))`.

    Attribute entries: `source`, `block_length`, `prefix_length`,
    `element_bytes`, `global_{layers,heads,head_dim}`,
    `global_bytes_per_block` (all layers), `global_blocks` (C),
    `global_bytes_per_sequence`, `local_{layers,heads,head_dim}`,
    `local_capacity` (P + L_B), `local_bytes_per_sequence`,
    `bytes_per_sequence`, `weight_bytes`, `prompt_tokens`, `gen_tokens`;
    with a budget `memory_bytes`, `max_batch`; with a batch `batch`,
    `batch_bytes` (weights + batch · bytes_per_sequence).

    Errors: no block length, or neither a global cache nor a block decoder;
    a malformed `memory`.
  }];
  let options = [
    Option<"promptTokens", "prompt-tokens", "int64_t", /*default=*/"0",
           "Prompt length in tokens">,
    Option<"genTokens", "gen-tokens", "int64_t", /*default=*/"0",
           "Number of tokens to generate">,
    Option<"memory", "memory", "std::string", /*default=*/"\"\"",
           "Memory budget, e.g. 80GiB (binary), 80GB (decimal), or bytes">,
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "A batch size to check against the budget">,
    Option<"elementBytes", "element-bytes", "int64_t", /*default=*/"0",
           "Element size of weights and caches (0: the IR's)">,
  ];
}

#endif // BT_TRANSFORMS_PASSES_TD
