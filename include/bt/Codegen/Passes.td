//===- Passes.td - bt code generation passes ----------------*- tablegen -*-===//
//
// The target-neutral passes that lower layer-level bt IR to code
// (docs/design.md §2, lib/Codegen/Common), shared by `bt-cpu-pipeline`
// (include/bt/Codegen/CPU/CPUCodegen.h) and `bt-cuda-pipeline`
// (include/bt/Codegen/CUDA/CUDACodegen.h). The CUDA target's own passes are
// in include/bt/Codegen/CUDA/Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_PASSES_TD
#define BT_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def BTLowerKVCaches : Pass<"bt-lower-kv-caches", "::mlir::ModuleOp"> {
  let summary = "Rewrite !bt.kv_cache values into destination-passing tensors";
  let description = [{
    The first step of the CPU pipeline (docs/generation.md, "KV caches
    across the ABI"). Every `!bt.kv_cache<scope, batch = B, layers = Ly,
    heads = H, capacity = C, head_dim = hd, elt>` value becomes

    - its storage `kv`: `tensor<B x Ly x 2 x H x C x hd x elt>`
      (batch-major: one sequence's cache is contiguous; index 2 selects
      key | value);
    - its key-valid flags `valid`: `tensor<B x C x i64>` (shared by the
      layers);
    - one fill length per layer, an `index` (the same for every row), tracked
      by the pass (layers are appended one after the other).

    Ops:

    - `bt.kv_alloc` → `tensor.empty` storage, flags `linalg.fill` 0, lengths
      0.
    - `bt.kv_append %c[l], k, v key_mask m` (S new entries at `len`) →
      `cf.assert len + S <= C`; k and v are written with a `linalg.generic`
      (the `[B, S, H, hd] → [B, H, S, hd]` transpose) into
      `tensor.extract_slice kv[0, l, 0|1, 0, len, 0] [B, 1, 1, H, S, hd]` and
      put back with `tensor.insert_slice` at the same place; the flags
      `valid[:, len : len+S]` get the mask as i64 (1 without a mask);
      `len(l) += S`. One-shot bufferization updates the storage in place:
      an append writes O(S) entries, never a copy of the cache.
    - `bt.kv_attend q, %c[l]` → the causal attention of `bt.attention`
      (HF eager numerics, one loop over the B·H heads) of the S queries over
      the views `kv[:, l, 0|1, :, 0 : len(l), :]` (`[B, H, len, hd]`, no copy)
      with the flags `valid[:, 0 : len(l)]`; query s sits at `len - S + s`.
    - `bt.kv_length %c[l]` → `len(l)`; `bt.kv_release` → nothing.
    - A function argument of cache type becomes three arguments: the storage
      (`bt.name` = the cache's name, default `kv_cache`, `bt.dims`
      `[B, Ly, "", H, C, hd]`), the flags (`kv_valid`, `[B, C]`) and the fill
      length `tensor<i64>` (`cache_length`; every layer starts there). A
      returned cache becomes two results, the storage and the flags. When a
      returned cache is the updated value of a cache argument, both storage
      and flags arguments get `bt.inout` (writable, updated in place) and the
      two results `bt.inout_arg = "<bt.name of that argument>"` (a name,
      not an index: bt-params-to-arguments inserts leading arguments):
      `bt-drop-inout-results` removes them after bufferization.

    - An `scf.for` that carries caches carries, for each, its storage, its
      flags and one fill length per layer (`index`); its `scf.yield` yields
      the updated values (decode_tokens' steps).

    Limits (errors): caches may be used in the entry block of a function and
    in `scf.for` bodies nested in it only (no other regions, no branches,
    no calls with caches).

    The ops are rewritten by conversion patterns
    (`bt::populateBTKVCacheToTensorPatterns`,
    include/bt/Codegen/KVCachesToTensors.h) that share the state of the
    function's caches; function arguments and results are rewritten before
    and after them.

    With `target=<name>`, the registered code-generation target of that name
    (include/bt/Codegen/CodegenTarget.h) adds its own patterns: `cuda` lowers
    `bt.kv_attend` to the CUDA target's attention kernels over the same views
    (head-major keys and values, the key flags, the causal offset `len − S`):
    split-K (FlashDecoding) for decode-like queries (static S ≤ 4), the tiled
    online-softmax kernel otherwise (docs/codegen-cuda.md, "Attention
    kernels"); head dims above 128 keep the head loop.

    With `device-cache-length`, the length of every cache argument stays in
    device memory (CUDA graphs of `decode_block`, docs/codegen-cuda.md): the
    `cache_length` argument is only read as `tensor.extract` where an entry
    is placed or counted (the append's offsets, the views of `bt.kv_attend`,
    `bt.kv_length`), the per-layer lengths the pass tracks count the entries
    appended in the function (constants in the entry points), and a returned
    cache also returns its updated length, `cache_length + appended`,
    written in place by a 0-d `linalg.generic` (`cache_length` gets
    `bt.inout`, the result `bt.inout_arg`). No capacity check is emitted for
    such a cache (it would read the length on the host): the caller, which
    keeps the length, checks it. The CUDA target's patterns then read the
    length in their kernels and size their grids by the capacity, and
    `bt-gpu-sink-device-scalars` moves the remaining reads (the append's
    offsets) into the kernels that use them, so that no host code depends
    on the length. Error: a returned cache whose layers were appended
    different numbers of entries.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "Code-generation target whose patterns take precedence "
           "(registered name, e.g. cuda; empty: target-neutral)">,
    Option<"deviceCacheLength", "device-cache-length", "bool",
           /*default=*/"false",
           "Keep the cache arguments' lengths in device memory: read only "
           "where entries are placed or counted, returned updated in place, "
           "never checked on the host">,
  ];
  let dependentDialects = [
    "::mlir::affine::AffineDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def BTConstantGlobals : Pass<"bt-constant-globals", "::mlir::ModuleOp"> {
  let summary = "Create the globals of tensor constants in a reproducible order";
  let description = [{
    Creates the `memref.global` of every tensor-typed `arith.constant` in the
    module's functions, in the order of a walk of the module, as One-Shot
    Bufferize would (bufferization::getGlobalFor: private, constant,
    `__constant_<shape>x<type>[_N]`, alignment `alignment`, inserted at the
    start of the module). The constants themselves are unchanged; One-Shot
    Bufferize then finds these globals and reuses them.

    Why: MLIR 19's One-Shot Module Bufferize visits the functions in an
    order that depends on pointer values (getFuncOpsOrderedByCalls iterates
    a DenseMap keyed by func.func), so it creates the globals, and numbers
    their names, in an order that changes from run to run. The same model
    then compiles to different LLVM IR, which breaks reproducible
    artifacts and the compile cache's keys (bt/Codegen/CompileCache.h).

    Runs right before `one-shot-bufferize`; `alignment` must be its
    `bufferAlignment` (64 by default), or the globals are not reused.

    Example: two functions with `arith.constant dense<[0, 1]> :
    tensor<2xi64>` → one `memref.global "private" constant
    @__constant_2xi64 : memref<2xi64> = dense<[0, 1]> {alignment = 64}`.
  }];
  let options = [
    Option<"alignment", "alignment", "uint64_t", /*default=*/"64",
           "The globals' alignment in bytes (One-Shot Bufferize's "
           "bufferAlignment)">,
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def BTLocalReshapeShapes : Pass<"bt-local-reshape-shapes"> {
  let summary = "Give each tensor.reshape its own shape tensor, built right "
                "before it (before bufferization)";
  let description = [{
    Works around LLVM 19's bufferization of `tensor.reshape`: its
    `BufferizableOpInterface` lists the shape operand, not only the source,
    as aliasing the result (fixed upstream by llvm-project#128590, LLVM 21).
    One-Shot Analysis then sees every op that writes into the source's
    buffer as a write into the shape tensor too, so

    - a GEMM writing its init in place (`linalg.fill` or
      `linalg.broadcast` → `linalg.matmul_transpose_b` → `tensor.reshape`,
      LayerEmitter::expand's `[B·N, D]` → `[B, N, D]`) conflicts with the
      reshape's read of a shape tensor defined before the GEMM: the GEMM
      goes out of place (an allocation and a copy of the filled init);
    - two reshapes of one shape tensor (CSE merges the equal
      `tensor.from_elements` of every linear of a stack) alias each other:
      an in-place write into one result conflicts with reads of the other.

    For each `tensor.reshape` whose shape is a `tensor.from_elements`, this
    pass builds a copy of that `tensor.from_elements` right before the
    reshape (its operands dominate it) and uses it; a shape left without
    users is erased. Nothing writes between the definition and the read,
    so neither conflict arises. Shapes of other producers are left alone.

    Runs first in the bufferization stage (PipelineStages.h), before
    `bt-eliminate-fresh-inits`, whose One-Shot Analysis would see the
    same conflicts; no CSE may run between it and `one-shot-bufferize`.

    Example (f32 prefill of block_tiny, each linear): `%s = from_elements
    %B, %N, %c64` shared by four reshapes, each GEMM's init filled, copied
    into a second buffer and the GEMM run on the copy → one fresh shape per
    reshape and the GEMM on the filled buffer (5 copies fewer in prefill,
    40 in train_step).

    Errors: none.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def BTEliminateFreshInits : Pass<"bt-eliminate-fresh-inits", "::mlir::ModuleOp"> {
  let summary = "Let ops write their results straight into the slice that "
                "a tensor.insert_slice later fills (before bufferization)";
  let description = [{
    The lowerings create each op's init as a `bufferization.alloc_tensor`
    without operands but its dynamic sizes (LinalgUtils.h freshEmpty: a
    tensor.empty that CSE cannot merge with another). Upstream
    `eliminate-empty-tensors` only looks for `tensor.empty`, so a result
    later inserted into a larger tensor (decode_tokens' LM head into
    `step_logits` [B, L_B, V], one row of a concatenation) was computed in a
    fresh buffer and copied. This pass turns every such `alloc_tensor`
    (no `copy`, no `size_hint`, no `memory_space`) back into a
    `tensor.empty` of the same type and sizes, gives each use of a
    `tensor.empty` its own copy (CSE merged equal ones, e.g. the inits of
    the rotated key and of the value's transpose that both go into the KV
    cache; upstream replaces a `tensor.empty` for all its users with one
    insertion's slice), gives each op that takes a `linalg.fill` of a
    `tensor.empty` as its init (destination) a fill of its own (CSE merged
    the equal zero fills of reductions and GEMMs, and bufferization copied
    the filled buffer for every writer but one, or for all of them when
    another op reads the fill, which keeps the original), then runs
    upstream's
    `bufferization::eliminateEmptyTensors` on the module: where One-Shot
    Analysis finds that an insertion's destination slice can serve as the
    init, the init becomes that `tensor.extract_slice` and the insertion a
    self-copy that bufferization drops. The other inits stay `tensor.empty`
    and bufferize to an allocation as the `alloc_tensor` did.

    Runs right before `bt-constant-globals` and `one-shot-bufferize`: no CSE
    may run between (it would merge the `tensor.empty` inits). Replaces
    `eliminate-empty-tensors` in the bufferization stage (PipelineStages.h).

    Example (decode_tokens, one token-decoder step):
    `%e = bufferization.alloc_tensor(%B) : tensor<?x512xf32>`, a fill and
    `linalg.matmul_transpose_b` into it, `bt.sample` of the result and
    `tensor.insert_slice %r into %logits[0, %k, 0] [%B, 1, 512]` →
    the fill and GEMM write `tensor.extract_slice %logits[0, %k, 0]`, the
    sampler reads that slice (strided), and no copy remains.

    Errors: those of One-Shot Analysis (bufferization's own, located).
  }];
  let dependentDialects = [
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def BTDropInOutResults : Pass<"bt-drop-inout-results", "::mlir::ModuleOp"> {
  let summary = "Remove the results of in-out arguments after bufferization";
  let description = [{
    After one-shot bufferization, every function result marked
    `bt.inout_arg = "<name>"` (bt-lower-kv-caches) must be the argument with
    `bt.inout` and `bt.name = "<name>"` itself (the buffer was updated in
    place): the result is removed from the function
    and from its `func.return`s (docs/abi.md: in-out arguments are not
    returned). Callers are not updated (entry points have none).

    Errors: such a result that is not that argument (bufferization inserted a
    copy, e.g. because the argument is not writable or is read after an
    update), located at the `func.return`.
  }];
}

def BTLowerToLinalg : Pass<"bt-lower-to-linalg"> {
  let summary = "Lower layer-level bt ops to linalg, tensor, arith and math on tensors";
  let description = [{
    Rewrites every layer-level bt op into destination-style ops on tensors,
    following the op semantics of the ODS descriptions (the numerics of HF
    GPT-NeoX in eager mode, fp32):

    | op | lowering |
    |---|---|
    | `bt.embedding_lookup` | `linalg.generic` gather (`tensor.extract` of the table row); an id outside `[0, V)` fails a `cf.assert` |
    | `bt.layer_norm` | row sum, row sum of squared deviations (biased variance), then `(x·rstd + (−rstd·mean))·w + b` with `rstd = 1/sqrt(var + eps)` |
    | `bt.linear` | leading dims collapsed to `M`; `linalg.matmul_transpose_b` (`x · Wᵀ`) whose init is the bias broadcast to `[M, N]` (zero without bias), so the GEMM accumulates onto it; a Conv1d weight `[N, K, 1]` is collapsed to `[N, K]` |
    | `bt.gelu` | `x · 0.5 · (1 + erf(x · 1/√2))` with `math.erf`, in place when the input is a temporary only the GELU reads |
    | `bt.prefix_projection` | as `bt.linear`, then the last dim `P·T` expanded to `[P, T]` |
    | `bt.split_qkv` | `tensor.expand_shape` to `[..., H, 3, hd]` and three rank-reducing `tensor.extract_slice` (views, no copy) |
    | `bt.rotary` | one cos/sin table `[positions..., r/2]` per distinct positions operand (inv_freq = 1/base^(2i/r) evaluated in f32 at compile time, angle = f32(pos)·inv_freq), then one elementwise pass: element `j < r` reads its partner `x[(j + r/2) mod r]` and the table at `j mod r/2`, `y = x·cos − partner·sin` (`j < r/2`), `x·cos + partner·sin` (`j < r`), `y = x` beyond `r` |
    | `bt.attention`, `bt.local_attention` | one `scf.for` over the B·H (B·N_blk·H) heads; per head the strided `[S, hd]` slices of q, k, v (no transposes: BLAS reads them in place), scores by `linalg.matmul_transpose_b` into one `[S, S]` buffer that the softmax updates in place; with more than 64 query rows (or S dynamic) an inner `scf.for` over chunks of 64 rows, chunk `[r0, r0 + n)` (`n = affine.min(64, S − r0)`) against keys `[0, r0 + n + Sk − S)` only, the ones its causal mask lets it see (the hidden keys' probabilities are exactly 0: same result, about half the score, softmax and `· v` work for S = Sk = 512), except that a chunk whose first row has no valid causal key (before the first valid key of the mask row, found per head) keeps all Sk keys; HF eager masking in f32 `where(t ≤ s, q·k·scale, MIN) + (1 − key_mask)·MIN` with `MIN = finfo(f32).min`; softmax with max subtraction (`exp(v − max)`, exactly 0 below −104 like PyTorch's Sleef expf, times `1/sum`); `linalg.matmul` with v into the output slice. Like HF, a query without any valid causal key is uniform over the keys whose score is exactly MIN (its masked causal keys and the valid non-causal ones; masked non-causal keys are `MIN + MIN = −inf`) |
    | `bt.fused_local_attention` | one kernel: one `scf.for` over the B·N_blk·H heads; per head, the S rows of q, k, v are strided views of the QKV projection (no split), q and k are rotated (the `bt.rotary` payload and table) into `[S, hd]` stack buffers, the scores `[S, S]` and the row max and sum `[S]` (the reciprocal overwrites the sum) live in stack buffers (`memref.alloca` at the function entry, used through `bufferization.to_tensor restrict writable`), softmax and `· v` as for `bt.local_attention`, and only the `[S, hd]` result is written. The same arithmetic as the unfused chain (results may differ in the last bits where LLVM vectorizes the exp loops differently). With `fused-kernel=false`, or S or hd dynamic: the unfused chain `bt.split_qkv` → `bt.rotary` (q, k; one shared table) → `bt.local_attention` |
    | `bt.cross_entropy` | per row `−((x[label] − max) − log Σ exp(x − max))` (PyTorch log_softmax order), summed in f64 over labels `≠ ignore_index`, divided by their count in f32 (`0/0 = NaN` when all are ignored) |
    | `bt.global_norm` | per tensor, Σ x² in f32 (`reassoc` additions) as two `linalg.generic` reductions of the flattened tensor viewed as `[n/K, K]` (K: the divisor of n nearest below √n; dynamic shapes: one reduction), its `math.sqrt`; then `sqrt(Σ_t n_t²)` over the tensors in operand order |
    | `bt.clip_coefficient` | `min(1, (1 / (norm + eps)) · max_norm)` in f32 (torch's `max_norm / tensor` is `reciprocal() * max_norm`), `arith.minimumf` (NaN propagates) |
    | `bt.lr_schedule` | the op's formula in f64 scalar arith (`math.cos`), rounded to f32 |
    | `bt.adamw` | the step's scalars once (f64: `math.powf` bias corrections, then rounded to f32), then one `linalg.generic` with `ins(grad) outs(param, m, v)` computing the op's f32 formula from the outs' block arguments; bufferization writes param, m and v in place when their buffers are writable (in-out arguments) |

    Dynamic dims (batch, number of blocks, sequence) are supported; shapes are
    read with `tensor.dim`. f16/bf16 activations are computed in f32 and
    rounded back (matmuls stay in the element type).

    The ops are rewritten by conversion patterns, one file per family of
    ops (`bt::populateBTLayerToLinalgPatterns`,
    `bt::populateBTOptimizerToLinalgPatterns`,
    include/bt/Codegen/LayerToLinalg.h), to a conversion target where the bt
    dialect is illegal but for the ops below.

    With `target=<name>`, the registered code-generation target of that name
    (include/bt/Codegen/CodegenTarget.h) adds its own patterns with a higher
    benefit. `cuda` lowers the attention ops to dedicated GPU kernels
    (docs/codegen-cuda.md, "Attention kernels"), emitted at tensor level as
    `gpu.launch` ops on `bufferization.to_memref ... read_only` views of the
    operands writing a `memref.alloc` returned through
    `bufferization.to_tensor restrict writable`: `bt.fused_local_attention` →
    one kernel, one block per (block, head), q and k rotated into shared
    memory with v, a warp per query row (f32, static S and hd with the three
    [S, hd + 1] arrays within 48 KiB; else the unfused chain with the kernel
    below); `bt.attention` / `bt.local_attention` → the tiled online-softmax
    kernel (a block per 4 query rows of a head, keys and values in
    shared-memory tiles of 32, a lane per key), or split-K for static S ≤ 4.
    Head dims above 128 keep the head loop.

    `bt.param_ref` is left alone (`bt-params-to-arguments` replaces it), and
    so is `bt.sample`, which one-shot bufferization turns into a call of the
    runtime's sampler `bt_rt_sample` (its `BufferizableOpInterface` model is
    registered by `bt::registerCPUCodegenDialects`).
    `tensor.concat` is decomposed into `tensor.insert_slice`s so that it can
    be bufferized. Model-level and KV-cache ops are not handled: run
    `bt-decompose` and `bt-lower-kv-caches` first; any remaining bt op other
    than `bt.param` / `bt.param_ref` / `bt.sample` is an error.
  }];
  let options = [
    Option<"fusedKernel", "fused-kernel", "bool", /*default=*/"true",
           "Lower bt.fused_local_attention to one kernel (false: the unfused chain)">,
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "Code-generation target whose patterns take precedence "
           "(registered name, e.g. cuda; empty: target-neutral)">,
  ];
  let dependentDialects = [
    "::mlir::affine::AffineDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def BTLowerBackward : Pass<"bt-lower-backward"> {
  let summary = "Lower the backward bt ops to linalg, tensor, scf, arith and math on tensors";
  let description = [{
    Rewrites the layer-level backward ops that the vector-Jacobian rules of
    `bt-generate-gradients` (bt/Transforms/Autodiff.h) emit, following their
    ODS formulas; runs in `bt-cpu-pipeline` right before
    `bt-lower-to-linalg` (the rest of a backward sweep is already linalg,
    tensor and existing bt ops). f32 only.

    | op | lowering |
    |---|---|
    | `bt.layer_norm_grad` | row mean and rstd recomputed as in the forward; per-row sums `Σ dy·w` and `Σ dy·w·x̂` (one reduction), `dx = rstd·(dy·w − Σ₁/C − x̂·Σ₂/C)`; `dweight = Σ_rows dy·x̂` and `dbias = Σ_rows dy` (one reduction over all leading dims) |
    | `bt.embedding_grad` | zero `[V, E]` table, then one `scf.for` over the rows of `ids` (row-major) adding `dy[i, :]` to `table[ids[i], :]` in place; an id outside `[0, V)` fails a `cf.assert` |
    | `bt.attention_grad` | one `scf.for` over the B·H (B·N_blk·H) heads carrying dq, dk, dv; per head the strided `[S, hd]` slices, the probabilities recomputed with the forward's masking and softmax numerics, `dV = Pᵀ·dO` (`linalg.matmul_transpose_a`), `dP = dO·Vᵀ` (`linalg.matmul_transpose_b`), `dS = where(t ≤ s, P·(dP − Σ_t dP·P), 0)·scale` in place of dP, `dQ = dS·K` (`linalg.matmul`), `dK = dSᵀ·Q` (`linalg.matmul_transpose_a`) into the output slices |
    | `bt.cross_entropy_grad` | row max and `log Σ exp(x − max)` as in the forward, the count n of labels `≠ ignore_index` (labels outside `[0, V)` fail a `cf.assert`), then `loss_grad/n · (exp(x − max − log Σ) − [c = label])` on counted rows and 0 on ignored ones |

    A code-generation target (`target=`, CodegenTarget.h) may lower some of
    them itself: the CUDA target lowers `bt.embedding_grad` to one kernel
    (a thread per column of the table, the ids in the same row-major
    order), since the `scf.for` above would run on the host and read
    every id from device memory.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "Code-generation target whose patterns take precedence "
           "(registered name, e.g. cuda; empty: target-neutral)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def BTParamsToArguments : Pass<"bt-params-to-arguments", "::mlir::ModuleOp"> {
  let summary = "Turn bt.param references into leading function arguments";
  let description = [{
    Gives every `func.func` that reads parameters (through `bt.param_ref`,
    directly or through the functions it calls) one extra **leading**
    argument per parameter it needs, replaces each `bt.param_ref` by the
    corresponding argument, passes the arguments along at `func.call` sites,
    records the order in the function attribute
    `bt.params = ["name", ...]`, and erases every `bt.param`.

    **Order:** the parameters of a function are ordered as their `bt.param`
    declarations appear in the module (module declaration order), restricted
    to the ones the function uses. The runtime passes weights in this order
    (docs/abi.md, `EntryPoint.params`). Each parameter argument carries
    `bt.param = "name"` as an argument attribute.

    Errors: a `bt.param` symbol still used by another op than `bt.param_ref`
    (a model-level op: run `bt-decompose` first), or a function whose
    parameter needs cannot be propagated (a call through a non-`func.call`
    op).
  }];
}

def BTMarkEntryPoints : Pass<"bt-mark-entry-points", "::mlir::ModuleOp"> {
  let summary = "Prepare public functions for the kernel ABI";
  let description = [{
    For every public `func.func` with a body (an entry point of the kernel
    library, docs/abi.md):
    - sets `llvm.emit_c_interface`, so that `convert-func-to-llvm` emits the
      `_mlir_ciface_<name>` wrapper taking pointers to memref descriptors
      that `bt-emit-entry-wrappers` calls;
    - marks every tensor argument `bufferization.writable = false`:
      weights and inputs belong to the caller, and one-shot bufferization
      must never write into them (it copies instead) — except in-out
      arguments (`bt.inout`, the KV cache of the generation entry points),
      which are `bufferization.writable = true` and updated in place.
  }];
}

def BTFuseElementwise : Pass<"bt-fuse-elementwise"> {
  let summary = "Fuse elementwise linalg.generic producers into consumers where it pays";
  let description = [{
    Runs linalg's elementwise producer/consumer fusion on tensors with a
    cost guard: a producer is fused only if

    - it has a single use (no duplicated work), and
    - the consumer reads it through a permutation map, i.e. it is not
      broadcast; fusing a broadcast producer (e.g. per-row statistics into a
      per-element consumer) would recompute it for every broadcast element.

    Fill/generic folding and scalar-constant folding of the upstream pattern
    set are included.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def BTGemmToBlas : Pass<"bt-gemm-to-blas", "::mlir::ModuleOp"> {
  let summary = "Rewrite f32 GEMMs on memrefs into cblas_sgemm calls";
  let description = [{
    After bufferization, rewrites `linalg.matmul`, `linalg.matmul_transpose_b`,
    `linalg.batch_matmul` and `linalg.batch_matmul_transpose_b` on f32
    memrefs into calls to `cblas_sgemm` (row-major, `CblasNoTrans` for A,
    `CblasNoTrans` or `CblasTrans` for B, `alpha = 1`, `beta = 1` since the
    output already holds the init, e.g. the bias of `bt.linear`). When the
    init is a `linalg.fill` of zero right before the GEMM into a fresh
    allocation that no input aliases, the fill is removed and `beta = 0`.
    Batched forms become an `scf.for` over the batch with one call per
    matrix.

    Pointers are `memref.extract_aligned_pointer_as_index` plus the offset of
    `memref.extract_strided_metadata`, scaled to bytes, cast to `!llvm.ptr`;
    `lda`/`ldb`/`ldc` are the row strides (at least the row length, as BLAS
    requires). `cblas_sgemm` is declared as a private external `func.func`
    and left undefined in the kernel library (docs/abi.md: resolved against
    the process, which links OpenBLAS).

    A GEMM is left to the loop lowering when an operand's innermost stride
    is not statically 1, the element types are not all f32, or all of
    M, N, K are static and `M·N·K < min-mnk` (tiny local-attention products,
    where the call overhead dominates).

    `callee` names the function called (default `cblas_sgemm`). The CUDA
    pipeline uses `bt_gpu_sgemm`, the runtime's cuBLAS wrapper with the
    same signature and semantics on device pointers (docs/abi.md, "Kernel
    library (CUDA target)"). With `bf16-callee` set, a GEMM whose inputs
    are bf16 memrefs and whose output is f32 (made by `bt-bf16-gemms`)
    calls that function instead, with the same signature and A, B pointing
    to bf16 elements (`bt_gpu_gemm_bf16`: bf16 inputs, f32 accumulation).
    With `bf16-out-callee` set too, such a GEMM into a fresh f32 buffer
    that only a generic marked `bt.bf16_gemm_output` reads (the rounding of
    its product to bf16, made by `bt-bf16-gemm-outputs`) calls that function
    with C pointing to the rounding's bf16 buffer (`bt_gpu_gemm_bf16_out`:
    cublasGemmEx with a CUDA_R_16BF C, the f32 accumulation rounded once to
    nearest even): beta = 0 when the f32 buffer was zero-filled; beta = 1
    when a generic marked `bt.bf16_gemm_init` (the bias broadcast, rounded to
    bf16) wrote it, which then writes the bf16 buffer instead (rounding its
    value, exact). The f32 buffer, its fill and the rounding are removed,
    the bf16 buffer's allocation moves in front of the first writer if it
    came after it, and nothing between that writer and the rounding may
    touch the bf16 buffer (otherwise nothing is folded).
    With `bf16-bias-out-callee` set as well, such a GEMM whose bias init
    broadcasts a bf16 vector `[N]` with unit stride (the QKV projection's
    bias, a bf16 parameter since `bt-bf16-gemm-outputs`) calls that function
    instead, with beta = 0 and the vector's address as a 15th argument
    (`bt_gpu_gemm_bf16_bias_out`: cublasLtMatmul with the bias epilogue,
    `bf16(op(A)·op(B) + bias)`, the same values as the bf16 C with beta = 1):
    the init generic is removed, so the broadcast `[M, N]` is neither
    written nor read.
  }];
  let options = [
    Option<"minMNK", "min-mnk", "int64_t", /*default=*/"4096",
           "Static GEMMs with M*N*K below this stay loops (0: all to BLAS)">,
    Option<"callee", "callee", "std::string", /*default=*/"\"cblas_sgemm\"",
           "The function called, with cblas_sgemm's signature">,
    Option<"bf16Callee", "bf16-callee", "std::string", /*default=*/"\"\"",
           "The function called for GEMMs with bf16 inputs and an f32 "
           "output, with cblas_sgemm's signature (A and B point to bf16); "
           "empty: those GEMMs stay loops">,
    Option<"bf16OutCallee", "bf16-out-callee", "std::string",
           /*default=*/"\"\"",
           "The function called for bf16 GEMMs whose product is rounded to "
           "bf16 (bt.bf16_gemm_output), with C pointing to bf16; empty: "
           "the rounding stays a kernel">,
    Option<"bf16BiasOutCallee", "bf16-bias-out-callee", "std::string",
           /*default=*/"\"\"",
           "The function called for bf16 GEMMs with a bf16 product whose "
           "init broadcasts a bf16 bias vector: cblas_sgemm's signature "
           "plus the bias pointer, beta = 0; empty: the broadcast is "
           "written into C (beta = 1)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def BTEarlyDealloc : Pass<"bt-early-dealloc"> {
  let summary = "Move each memref.dealloc to just after the buffer's last use";
  let description = [{
    Upstream's ownership-based buffer deallocation puts the `memref.dealloc`
    of a straight-line function's buffers at the end of their block, so all
    intermediates of a forward pass stay allocated until it returns (peak
    memory = the sum of the activations; block_main_b4_300's prefill at
    batch 256 asked an H100 for more than 80 GB). For each `memref.dealloc`
    of a `memref.alloc` in the same block, this pass finds the last op of
    that block that uses the buffer or any memref derived from it (every
    result of an op taking an alias: views, casts, calls; the op of a region
    counts as the use of what its region uses) and moves the dealloc just
    after it (after the alloc when nothing uses it). Left in place: a buffer
    that a terminator of its block passes on (returned, yielded) and one
    whose address leaves SSA (`memref.extract_aligned_pointer_as_index`).

    Asynchronous devices: the CUDA target's host code launches kernels on
    one stream and frees into a stream-ordered pool (a freed block is only
    reused by later launches), so a dealloc after the last launch that
    reads a buffer is safe; the CPU target's kernels are synchronous. Runs
    right after the buffer deallocation pipeline (both targets).
  }];
}

def BTStridedCopiesToLinalg : Pass<"bt-strided-copies-to-linalg"> {
  let summary = "Rewrite memref.copy of non-contiguous memrefs into linalg.copy";
  let description = [{
    `finalize-memref-to-llvm` lowers a `memref.copy` between contiguous
    memrefs to `llvm.memcpy`, but any other copy (e.g. a strided view cloned
    for a function result, or a slice of `bt.split_qkv`) to a call to
    `memrefCopy` of the MLIR C runner utils, which the kernel library must
    not depend on (docs/abi.md: only libm and libc). This pass turns those
    copies into `linalg.copy`, which the loop lowering expands in place.

    With `contiguous` (the CUDA pipeline), contiguous copies become
    `linalg.copy` too: every buffer is device memory, and `bt-linalg-to-gpu`
    turns the copy into a kernel.
  }];
  let options = [
    Option<"contiguous", "contiguous", "bool", /*default=*/"false",
           "Rewrite copies between identity-layout memrefs as well">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def BTParallelWorkThreshold : Pass<"bt-parallel-work-threshold"> {
  let summary = "Run small OpenMP parallel loops on the calling thread";
  let description = [{
    Gives every `omp.parallel` whose body is one worksharing loop
    (`omp.wsloop` of `convert-scf-to-openmp`) an `if` clause: the loop runs
    on the thread pool only when its estimated work, the iteration count of
    the parallel dims times the largest product of trip counts along a chain
    of `scf.for` nested inside them, is at least `min-work` iterations;
    otherwise the region runs serialized on the calling thread (libomp: no
    fork, no barrier). An inner loop's trip count is its constant one, else,
    when its bounds and step are defined in front of the region (attention's
    query rows and keys inside its loop over heads), computed there at run
    time; else, for an upper bound computed inside (attention's chunks of
    query rows: `min(64, S - r0)` rows against `r0 + rows` keys), from the
    largest value of that bound in terms of values defined in front, as
    `ValueBoundsOpInterface` derives it (64 rows, S keys; the lower bound and
    step constant or defined in front); else 1. Dynamic bounds give a run-time
    condition computed in front of the region; static ones fold to a
    constant, and a region that is always large enough keeps no clause.
    GEMM library calls inside the loop do not count.

    Why (issue 15): a decode step of block_main_b4_5 at batch 8 runs a few
    thousand parallel regions of a few hundred iterations each; their fork
    and join cost more than the work, and on a 2-core machine `--threads 2`
    decoded 2x slower than `--threads 1` before this pass.

    The result does not depend on the thread count either way (each
    iteration keeps its sequential reductions, bt-parallel-outer-loops).
    Example: `omp.parallel { omp.wsloop { omp.loop_nest (%i) : index = (%c0)
    to (%n) ... } }` with an inner `scf.for` of 256 iterations and
    `min-work=32768` → `%big = arith.cmpi sge, %trips, %c128` and
    `omp.parallel if(%big)`; with an inner `scf.for` to `%m` instead,
    `%big = arith.cmpi sge, %trips * max(1, %m), %c32768`.
  }];
  let options = [
    Option<"minWork", "min-work", "int64_t", /*default=*/"32768",
           "Least estimated iterations for a loop to run on the thread pool">,
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::omp::OpenMPDialect"];
}

def BTOmpStaticPartition : Pass<"bt-omp-static-partition", "::mlir::ModuleOp"> {
  let summary = "Split OpenMP worksharing loops among the threads without libomp's scheduler";
  let description = [{
    Rewrites each plain static `omp.wsloop` that is the whole body of an
    `omp.parallel` (no reduction, linear, ordered, order, simd or chunk
    clause; as `convert-scf-to-openmp` builds them for the CPU pipeline)
    into the calling thread's share of the iterations: with the nest's
    collapsed trip count N = Π ceil((ub - lb) / step) (row-major, the last
    dim fastest), T = `omp_get_num_threads()` and t =
    `omp_get_thread_num()`, thread t runs the linear iterations
    [t ceil(N / T), min((t + 1) ceil(N / T), N)) in an `scf.for` and
    delinearizes each back to the nest's induction variables (a remainder
    and a division per parallel dim but the first). The same partition as
    libomp's static schedule up to the remainder's placement; the
    iterations are independent, so the results do not change. The
    `omp.parallel` keeps its `if` clause (serialized: T = 1, t = 0) and its
    join barrier, which replaces the worksharing loop's implicit one.
    Declares `func.func private @omp_get_thread_num() -> i32` and
    `@omp_get_num_threads() -> i32` (libomp's API) when a loop is rewritten.

    Why (issue 15): Debian's libomp 19 formats a debug message with
    vsnprintf in every `__kmpc_for_static_init` call before it checks the
    trace level: a quarter of a 1024-iteration parallel loop's time in a
    microbenchmark, and 13 % of a block_main_b4_5 training step (printf
    internals in the profile), where thousands of loops start per step.

    Example: `omp.parallel { omp.wsloop { omp.loop_nest (%i, %j) : index =
    (%c0, %c0) to (%n, %m) step (%c1, %c1) { BODY } } }` → `omp.parallel {
    %t = call @omp_get_thread_num() ... scf.for %l = %begin to %end step
    %c1 { %j = %l mod %m, %i = %l / %m; BODY } }`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::omp::OpenMPDialect",
                           "::mlir::scf::SCFDialect"];
}

def BTParallelOuterLoops : Pass<"bt-parallel-outer-loops"> {
  let summary = "Keep one scf.parallel per loop nest, the innermost dim a loop";
  let description = [{
    Prepares the `scf.parallel` nests of `convert-linalg-to-parallel-loops`
    for `convert-scf-to-openmp` (the CPU pipeline's thread pool,
    docs/codegen.md "Threads"):

    - an `scf.parallel` nested inside another becomes a nest of `scf.for`
      (one OpenMP fork per kernel, none per outer iteration);
    - of an outermost `scf.parallel` with n > 1 dims, dims 0..n-2 stay
      parallel (OpenMP collapses them and gives each thread a contiguous
      chunk) and the innermost dim (the contiguous one of a row-major
      `[..., D]` operand) becomes an `scf.for`, a loop LLVM's loop vectorizer
      takes;
    - a 1-dim outermost `scf.parallel` stays as it is;
    - first, an `scf.for` marked `bt.independent_iterations` (Passes.h:
      its iterations write disjoint slices; bt-lower-to-linalg marks
      attention's loop over the B·H heads) with no `iter_args` left after
      bufferization and no `scf.parallel` around it becomes a 1-dim
      `scf.parallel` (the rules above then make the parallel loops of its
      body sequential): each thread runs whole heads. A marked loop that
      still carries values stays a loop.

    Every iteration of a parallel dim keeps its own sequential reduction
    loops (linalg reduction dims are `scf.for` already), so the result does
    not depend on the number of threads. Loops with reductions
    (`init` values) are left unchanged.

    Example (`[B, S, D]` elementwise):
    `scf.parallel (%b, %s, %d)` → `scf.parallel (%b, %s) { scf.for %d }`.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
}

def BTMathApproximation : Pass<"bt-math-approximation"> {
  let summary = "Replace f32 math.erf and math.tanh by polynomial approximations";
  let description = [{
    Rewrites `math.erf` and `math.tanh` on f32 (scalars or vectors) with
    MLIR's polynomial approximations (`populatePolynomialApproximateErfPattern`,
    `populatePolynomialApproximateTanhPattern`): plain arith/math ops, so the
    loops around them (GELU: `0.5·x·(1 + erf(x/√2))`) vectorize, where a call
    of libm's scalar `erff` kept them scalar (LLVM 19 has no vector `erff`).
    Accuracy: within the fixture tolerances of docs/codegen.md, "Numerics"
    (`test/bt-run/fixtures*.test` run with it). `exp` keeps libmvec's vector
    `expf` (convert-math-to-llvm + the loop vectorizer), which is exact to
    1 ulp and flushes to 0 below −104 as PyTorch's does.

    `exclude`: functions (by symbol name) whose ops stay as they are, to be
    lowered to libm; every other function in the operation is rewritten.
    The CPU pipeline excludes the entry points that compute gradients
    (`grad`, `train_step`): there the backward pass and AdamW amplify the
    approximation's rounding in ill-conditioned elements (on megabyte_tiny
    one AdamW element moved 2.2e-4 from the fixture, past its bound).
  }];
  let options = [
    ListOption<"exclude", "exclude", "std::string",
               "Functions left exact (symbol names, comma-separated)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def BTEmitEntryWrappers : Pass<"bt-emit-entry-wrappers", "::mlir::ModuleOp"> {
  let summary = "Emit the bt_entry_<name>(argv) functions of the kernel ABI";
  let description = [{
    Runs on the LLVM dialect, after `convert-func-to-llvm`. For every
    function `<name>` that has a C interface wrapper `_mlir_ciface_<name>`
    (public functions marked `llvm.emit_c_interface`, see
    `bt-mark-entry-points`), emits

    ```c
    void bt_entry_<name>(void **argv);
    ```

    which loads `argv[0]` (the result block: the memref descriptors of all
    results, consecutive, filled in by the callee) if the function has
    results, then one memref descriptor pointer per argument, and calls the
    wrapper with them (docs/abi.md). Also emits
    `int32_t bt_kernel_abi_version(void)` returning 1.

    With `internalize` (default), every other defined function gets internal
    linkage, so only the ABI symbols are exported and LLVM may inline freely.

    External functions marked `bt.weak_import` (the runtime's sampler
    `_mlir_ciface_bt_rt_sample`, see `bt.sample`) get `extern_weak` linkage:
    the library also loads in a process that does not define them, and each
    call first compares the function's address with null and, if it is
    missing, prints `bt kernels: <symbol> is not defined in this process`
    and aborts.

    Errors: a wrapper with a non-pointer parameter (a non-memref argument)
    or a non-void return, which the ABI cannot express.
  }];
  let options = [
    Option<"internalize", "internalize", "bool", /*default=*/"true",
           "Give every defined function other than the ABI entry points internal linkage">,
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // BT_CODEGEN_PASSES_TD
