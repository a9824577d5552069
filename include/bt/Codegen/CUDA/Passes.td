//===- Passes.td - bt CUDA code generation passes -----------*- tablegen -*-===//
//
// The passes of the CUDA target (lib/Codegen/CUDA, `bt-cuda-pipeline`,
// docs/codegen-cuda.md): buffers become device memory, linalg ops and the
// attention ops become kernels, and the host code calls the bt runtime's
// GPU ABI. The target-neutral passes are in include/bt/Codegen/Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_CUDA_PASSES_TD
#define BT_CODEGEN_CUDA_PASSES_TD

include "mlir/Pass/PassBase.td"

def BTReshapesToViews : Pass<"bt-reshapes-to-views"> {
  let summary = "Turn memref.reshape with a stored shape into memref.reinterpret_cast";
  let description = [{
    `bt-lower-to-linalg` emits an expansion whose reassociation group has two
    dynamic dims (e.g. `[B·N·S, K]` → `[B, N, S, K]`) as `tensor.reshape`
    with a `tensor.from_elements` shape. One-shot bufferization turns the
    shape into a small buffer filled by `memref.store`s that
    `memref.reshape` reads when the view is built. On the CUDA target
    every buffer is device memory, which the host can neither write nor
    read, so this pass (run right after bufferization) reads the sizes
    from the stores and builds the same view with
    `memref.reinterpret_cast` (offset 0, row-major strides: the source of a
    `memref.reshape` has an identity layout). The shape buffer may be
    filled through a `memref.copy` (bufferization copies a shape used
    twice). Shape buffers that only stores and copies touch afterwards are
    removed.

    Errors: a `memref.reshape` whose shape operand is not a static 1-D
    `memref.alloc`/`memref.alloca` (or the target of a copy from one) whose
    elements are each written by exactly one `memref.store` with a constant
    index that dominates the reshape.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def BTScalarsToKernels : Pass<"bt-scalars-to-kernels", "::mlir::ModuleOp"> {
  let summary = "Compute the host code's scalars that depend on device values in 0-d linalg.generics";
  let description = [{
    On the CUDA target every tensor is device memory, so a scalar computed
    on the host from a 0-d tensor (`tensor.extract %t[]`) would need a
    synchronous device→host copy, and a 0-d tensor built on the host
    (`tensor.from_elements %s`) a host store into device memory, which
    `bt-gpu-host-accesses` rejects. The optimizer ops of `train_step` are
    such code (`bt-lower-to-linalg`, OptimizerToLinalg.cpp): the global
    gradient norm (a square root per tensor, then of their sum), the clip
    coefficient, the learning-rate schedule and AdamW's bias corrections
    (f64) are scalar arith / math on extracted 0-d tensors.

    Run on tensors, after `bt-lower-to-linalg` and before bufferization,
    in the body of each `func.func` (top level only). A *device scalar* is
    the result of `tensor.extract` of a 0-d tensor, or of a region-free
    arith / math op on scalars one of whose operands is a device scalar.
    Each device scalar that is

    - the element of a 0-d `tensor.from_elements`,
    - an input operand of a `linalg.fill` / `linalg.generic`, or
    - captured by the payload of a `linalg.generic` (e.g. AdamW's clip
      coefficient, step size and bias correction)

    is materialized once as a 0-d `linalg.generic` (one thread on the
    GPU after `bt-linalg-to-gpu`) that takes the extracted 0-d tensors as
    inputs and repeats the scalar ops in program order (the same ops, so
    the same numerics as the host code of the CPU target). The
    `from_elements` is replaced by it, a fill becomes a generic reading it,
    and a consumer generic reads it as an extra input with the broadcast
    map `(d0, ..., dn) -> ()`. Scalar ops left without uses are erased.
    Host values the slice reads that are not device scalars (constants,
    `tensor.dim`) stay captured.

    Other uses of device scalars (e.g. a host `scf.if`) are left alone:
    `bt-gpu-host-accesses` turns their loads into device→host copies.

    Then every rank-0 argument of a public function whose uses are all
    `tensor.extract`s in host code (not in a linalg payload or a
    `gpu.launch`) gets the unit attribute `bt.host_scalar`
    (bt/Codegen/HostScalars.h): the KV cache's `cache_length`,
    decode_tokens' `sampler`. The manifest marks such an input
    (`TensorSpec.host_scalar`), the runtime passes it by value in host
    memory, and `bt-gpu-host-accesses` reads it with a host load instead of
    a device→host copy (docs/abi.md).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def BTBF16Gemms : Pass<"bt-bf16-gemms", "::mlir::ModuleOp"> {
  let summary = "Weights used only as GEMM operands become bf16; their GEMMs take bf16 inputs and accumulate in f32";
  let description = [{
    The first step of `--dtype bf16` on the CUDA target (issue 13 item 2;
    docs/codegen-cuda.md, "bf16"). Run on linalg on tensors, after
    `bt-params-to-arguments` and before `bt-fuse-elementwise`. A parameter
    (an argument with `bt.param`) of type `tensor<N x K x f32>` whose every
    use, in every function of the module, is the second input of a
    `linalg.matmul_transpose_b` or `linalg.matmul` with f32 operands (the
    weight of `bt.linear`: the projections, the MLP, the LM head) becomes a
    `tensor<N x K x bf16>` argument in every function. Each such GEMM's first
    input (the activation `[M, K]`) is rounded to bf16 by a new elementwise
    `linalg.generic` (f32 → bf16 round-to-nearest-even with integer ops,
    NaN → quiet NaN: the same rounding as the runtime's weight conversion,
    `bt::rt::F32ToBf16`). Where the activation is the output of a dedicated
    kernel (the LayerNorm and attention kernels: a `bufferization.to_tensor`
    of a `memref.alloc` that `gpu.launch` bodies only store into, reached
    through reshapes that nothing else reads), the rounding moves into that
    kernel instead: the buffer becomes bf16 and each store rounds its value,
    so no extra launch remains; an elementwise producer (the MLP's bias +
    GELU) is merged with it by `bt-fuse-elementwise`. An activation that
    reaches the GEMM through a `tensor.collapse_shape` (the token decoder's
    `[B, 1, T]` → `[B, T]`) is rounded before the collapse, in the
    producer's shape (elementwise fusion does not look through reshapes). The GEMM keeps its f32 init and result: linalg's
    matmul extends both bf16 inputs to f32, i.e. bf16 inputs with f32
    accumulation, what `bt-gemm-to-blas{bf16-callee=bt_gpu_gemm_bf16}` hands
    to cuBLAS (`cublasGemmEx`, CUDA_R_16BF inputs, CUBLAS_COMPUTE_32F).

    Parameters with any other use (LayerNorm weights, biases, embedding
    tables, the expansion layer, anything a training step updates) stay f32.
    The kernel interface (manifest `EntryPoint.param_dtypes`) records BF16
    for the converted parameters, and the runtime converts those weights
    once, when it uploads them (runtime/exec/model.cc).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def BTBF16GemmOutputs : Pass<"bt-bf16-gemm-outputs", "::mlir::ModuleOp"> {
  let summary = "bf16 GEMM products inside the layers are stored in bf16";
  let description = [{
    The second step of `--dtype bf16` on the CUDA target (issue 13 item 2;
    docs/codegen-cuda.md, "bf16"). Run on linalg on tensors after
    `bt-fuse-elementwise` (so that the kernels are formed; elementwise fusion
    would otherwise merge the rounding back into its readers). A GEMM made by
    `bt-bf16-gemms` (`linalg.matmul_transpose_b` or `linalg.matmul` with bf16
    inputs and an f32 `[M, N]` result) whose product is read only as inputs
    of `linalg.generic` ops or by `tensor.extract` (the dedicated kernels'
    element reads), directly or through `tensor.expand_shape` /
    `tensor.collapse_shape` / `tensor.reshape` / `tensor.extract_slice`, and
    whose init is
      - a `linalg.fill` of zero: the attention output projection (`dense`)
        and the MLP (`dense_h_to_4h`, `dense_4h_to_h`), whose bias the reader
        adds (the CUDA lowering of `bt.linear`): `y = bf16(x · W) + b`, the
        bias and the reader's arithmetic in f32; or
      - a `linalg.broadcast` of an f32 bias `[N]` over the rows (cuBLAS's C,
        beta = 1: the QKV projection): the broadcast becomes a generic marked
        `bt.bf16_gemm_init` that broadcasts the bias rounded to bf16, so
        `y = bf16(x · W + bf16(b))`, PyTorch's bf16 `nn.Linear`; a broadcast
        that CSE shared between GEMMs is given to each narrowed GEMM anew,
    gets:
      - its product rounded to bf16 (round to nearest even; the f32
        accumulation rounded once, as cuBLAS rounds a CUDA_R_16BF C) by a
        generic marked `bt.bf16_gemm_output`, right after the GEMM;
      - the reshapes and slices retyped to bf16;
      - each reader's block argument of that input made bf16 and extended
        exactly to f32 at the top of its body, and each extracted element
        extended right after its `tensor.extract` (the readers then compute
        in f32 on the rounded product).
    So the product `[M, N]` crosses global memory in 2 bytes per element
    instead of 4, and `bt-gemm-to-blas{bf16-out-callee=...}` makes cuBLAS write
    it directly (the marked rounding and the f32 buffer disappear; a marked
    bias init writes the bf16 C). bench/bt_torch.py `use_bf16_gemms`, the
    reference, rounds the same products.

    The sampled logits of the decode entries: a bf16 GEMM into a zero fill
    whose product `bt.sample` reads and which reaches the function's results
    only through `tensor.insert_slice`s into a `tensor.empty`, `scf.for`
    iter_args and `func.return` (decode_tokens' `step_logits`
    `[B, L_B, V]`, one LM-head product per step; a vanilla decode_step's
    `logits` `[B, V]`) is rounded to bf16 once (marked
    `bt.bf16_gemm_output`), and every tensor of that network — hence the
    entry's result — gets bf16 elements: the sampler chooses from the bf16
    logits (`bt.sample` of bf16, `bt_rt_sample_bf16`), the entry returns
    them (the runtime extends them to f32 when the caller keeps them), and
    the logits cross global memory in 2 bytes per element, written by
    cuBLAS and read by the sampler kernel. PyTorch's bf16 LM head returns
    bf16 logits alike.

    Bias parameters: a rank-1 f32 parameter that, in every function, only
    such bias inits read (the QKV projections' biases) becomes a bf16
    argument (`param_dtypes`: the runtime rounds it at upload, as it does
    the weights), and each init broadcasts it extended exactly — the values
    it broadcast before — so that `bt-gemm-to-blas{bf16-bias-out-callee}`
    can hand the vector to cuBLASLt's bias epilogue instead of writing the
    broadcast into C.

    Products that keep f32: those a named op or an init reads, and those
    whose readers compute a function result without being sampled
    (directly or through reshapes and slices) — the logits that eval
    returns through a masking generic, and prefill's, which the host
    samples; the token decoder's expansion layer (f32 weight) is no bf16
    GEMM.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def BTBF16Activations : Pass<"bt-bf16-activations", "::mlir::ModuleOp"> {
  let summary = "Activations that only kernels read are stored in bf16";
  let description = [{
    The third step of `--dtype bf16` on the CUDA target (issue 13 item 2:
    activations in bf16, statistics and arithmetic in fp32;
    docs/codegen-cuda.md, "bf16"). Run after `bt-bf16-gemm-outputs`, on
    linalg on tensors with the kernels formed. The f32 result of a bf16
    GEMM's elementwise epilogue — an all-parallel `linalg.generic` one of
    whose inputs is a product that `bt-bf16-gemm-outputs` rounded (marked
    `bt.bf16_gemm_output`, directly or through reshapes and slices) — that
    writes a `tensor.empty` its body does not read and that only
    `linalg.generic` inputs and `tensor.extract`s (the dedicated kernels'
    element reads: LayerNorm, attention) read, through reshapes and slices,
    none of them computing a function result, is rounded to bf16 once (round
    to nearest even, in integer ops, at the end of the generic's body) and
    written as bf16; each reader loads bf16 and extends it exactly, so it
    computes on the same f32 values as it would on the rounded f32 tensor.
    In the GPT-NeoX layers that is the residual add (each layer's output
    `[B, S, D]`, read by the next layer's two LayerNorm kernels and its
    residual add, or by the final LayerNorm) and the rotary embedding of the
    query and, where the attention kernel reads it from there rather than
    from a KV cache, of the key (`[B, S, H, hd]`; the token decoder's fused
    local attention of eval rotates in registers and has none).
    `bench/bt_torch.py use_bf16_gemms(activations=True)`, the reference,
    rounds the same tensors. What keeps f32: the outputs of generics that are
    no such epilogue (the stacks' inputs: embeddings, prefix vectors; the
    rotary tables), results a named op (a GEMM), an init, a loop or an
    insert reads, results whose readers compute a function result (eval's
    logits), reductions.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def BTLinalgToGPU : Pass<"bt-linalg-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Map every linalg op on memrefs in host code to a gpu.launch";
  let description = [{
    The CUDA pipeline's lowering of the non-GEMM kernels (everything that
    `bt-gemm-to-blas{callee=bt_gpu_sgemm}` left: layer norm statistics and
    normalization, GELU, rotary tables and rotations, residual adds and the
    other fused elementwise generics, the embedder gather, cross-entropy,
    fills, copies, broadcasts, small matmuls). After bufferization, each
    `linalg` op outside a kernel becomes

    ```mlir
    scf.if %points > 0 {
      gpu.launch blocks(ceildiv(%points, bs), 1, 1) threads(min(%points, bs), 1, 1) {
        %id = block_id.x * bs + thread_id.x
        scf.if %id < %points {
          // parallel ivs = delinearize(%id) (last parallel dim fastest)
          // outputs loaded once, scf.for over the reduction dims carrying
          // them, the payload per point, the results stored once
        }
      }
    }
    ```

    with `points` the product of the parallel loop sizes (read on the host
    from the memref descriptors; dynamic shapes are supported) and
    `bs = block-size`. Indexing maps are expanded to arith
    (`affine::expandAffineMap`); `linalg.index` becomes the iv; values the
    payload captures (e.g. the embedding table of a gather) become kernel
    arguments when the launch is outlined. A `cf.assert` in a payload
    (token id / label range checks) becomes `gpu.printf` of its message and
    `llvm.intr.trap` when the condition fails (cf.assert lowers to a host
    abort only); so does a `cf.assert` in a kernel emitted before
    bufferization (the embedding gradient's id check). Other ops already
    inside a `gpu.launch` / `gpu.func` are left alone (dedicated kernels).

    The reduction order is the sequential order of the CPU loops, except
    for a row reduction that one thread block shares: one output, one
    reduction dim that is the innermost of the first input, its extent
    dynamic or >= 64, a payload yielding `combiner(x, acc)` with an
    associative, commutative arith combiner that has a neutral element
    (addf / mulf only with `fastmath<reassoc>`; maximumf, addi, ...) on
    f32 / f64 / i32 / i64, and a power-of-two block-size >= 32 (LayerNorm
    statistics, cross-entropy's log-sum-exp). Then the grid is one block per
    output point, thread t folds the reduction points t, t + bs, ... from
    the neutral element, a fixed tree over `bs` elements of dynamic shared
    memory combines the threads (deterministic), and thread 0 stores
    `combiner(result, init)`. (Profiled on an H100 before this: one thread
    per LayerNorm row at batch 1 made 31 single-thread kernels, 266 µs of
    b4_85's decode step.)

    Errors: a linalg op with tensor semantics (run after bufferization).
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block (1..1024)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def BTGPUDeviceAllocs : Pass<"bt-gpu-device-allocs", "::mlir::ModuleOp"> {
  let summary = "Turn the host code's buffers into device allocations";
  let description = [{
    In the CUDA pipeline every buffer of the bufferized program is device
    memory. Run after the deallocation pipeline and before
    `convert-bufferization-to-memref` (when every `memref.alloc` is a data
    buffer), outside kernels:

    - `memref.alloc` → `gpu.alloc` (lowered to `bt_gpu_alloc` by
      `bt-gpu-host-to-runtime`);
    - `bufferization.clone %m` (ownership-based deallocation clones
      returned views) → `gpu.alloc` + `memref.copy` (a kernel after
      `bt-strided-copies-to-linalg{contiguous}` and `bt-linalg-to-gpu`); a
      static strided layout gets a 1-D allocation covering offset + extent
      viewed with `memref.reinterpret_cast`, a dynamic one a row-major
      allocation and `memref.cast`;
    - `memref.dealloc` → `gpu.dealloc`.

    Errors: `memref.alloca` / `memref.realloc` in host code (device
    buffers are allocations), a `memref.alloc` with a layout or memory
    space.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect"];
}

def BTGPUSinkDeviceScalars
    : Pass<"bt-gpu-sink-device-scalars", "::mlir::ModuleOp"> {
  let summary = "Read the host code's device scalars in the kernels that use them";
  let description = [{
    Run after `bt-linalg-to-gpu` and before `bt-gpu-host-accesses` in the
    CUDA pipeline. A *device scalar* is a `memref.load` in host code of a
    rank-0 function argument without `bt.host_scalar` (device memory: the
    KV cache's `cache_length` under bt-lower-kv-caches
    `device-cache-length`), or the result of a host op without memory
    effects or regions computed from one (index arithmetic, casts, the
    `memref.subview` of a KV-cache append at that length). A device scalar
    that a `gpu.launch` body uses (captures) is recomputed at the start of
    that body: the ops it depends on are cloned there (the load becomes a
    load of the argument in the kernel, every thread reading the same
    element), so the kernel needs no value the host read from device
    memory. Host copies left without users are erased; device scalars that
    the host itself still needs (a grid size, a branch condition) stay and
    `bt-gpu-host-accesses` copies them to the host.

    A load is only moved into a kernel when no op between it and the
    kernel, nor the kernel itself, may write the argument (a kernel that
    stores into it, any other host use than a load): the kernel reads the
    value the host code would have read. The in-place update of the length
    at the end of `decode_block` is such a write; the reads before it move.

    With this, `decode_block`'s host code does not depend on the cache
    length (the CUDA target's attention kernels read it themselves and are
    launched for the capacity), so one capture of it replays for every
    block (docs/codegen-cuda.md, "Known gaps", CUDA graphs).
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect"];
}

def BTGPUHostAccesses : Pass<"bt-gpu-host-accesses", "::mlir::ModuleOp"> {
  let summary = "Sort the host code's memory accesses into host and device memory";
  let description = [{
    Run after `convert-bufferization-to-memref` in the CUDA pipeline. A
    buffer is host memory if it is (a view of) a `memref.alloc` or
    `memref.alloca` (by then only the pointer arrays of the lowered
    deallocation code), device memory otherwise (function arguments,
    `gpu.alloc`, views of them). Outside kernels:

    - `memref.dealloc` of device memory → `gpu.dealloc`;
    - `memref.load` of device memory (the scalars that steer the host, e.g.
      the `cache_length` of a KV cache) → a host temporary filled by
      `bt_gpu_memcpy_dtoh(dst, src, bytes)` (synchronous, docs/abi.md), then
      loaded.

    Errors: `memref.store` into device memory or `memref.copy` in host code
    (both must be kernels), a load of an element type without a byte size.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

def BTGPUSamplerKernels : Pass<"bt-gpu-sampler-kernels", "::mlir::ModuleOp"> {
  let summary = "Add the kernels the runtime samples with on the device";
  let description = [{
    When the host code calls the runtime's sampler (`bt_rt_sample`, the
    bufferization of `bt.sample`), adds `gpu.module @bt_sampler_kernels`
    with the kernels the runtime's callback `_mlir_ciface_bt_gpu_sample`
    launches by name (docs/generation.md, "Sampling on the device"), so
    that the logits stay on the device:

    `bt_sample_greedy(logits F32 [B', V] (strided), tokens I64 [B']
    (strided), state I64 [B'', 2], step i64, first i64, eos i64, pad i64)`,
    one block of 256 threads per row (grid B', 3072 bytes of dynamic shared
    memory): each thread scans a strided share of V, a shared-memory tree
    combines them; argmax with the lowest id among equal maxima (the
    CPU sampler's choice), `pad` after the row's EOS in the block
    (`state[r, 0]`, reset at step 0; eos < 0: no EOS handling), `pad` and
    `state[r, 1] = 1` for a row with a NaN logit (`first` != 0 zeroes
    `state[r, 1]` first).

    `bt_sample(logits, tokens, state, rng I64 [B''], step, first, eos, pad,
    inv_t f64, top_k i64, top_p f64)`, same launch with 4096 bytes of
    shared memory: a draw from the CPU sampler's distribution
    (runtime/generate/sampler.cc: temperature, top-k with ties kept, top-p
    in probability-then-id order) with the row's SplitMix64 state
    `rng[r]`, advanced once per drawn token; error codes in `state[r, 1]`
    (1 NaN, 2 +inf, 3 no finite logit). Each thread scans a contiguous
    chunk of ids; top-k and top-p thresholds by bisection over the logits'
    order-preserving 32-bit keys.

    When the host code calls the sampler of bf16 logits
    (`bt_rt_sample_bf16`: `--dtype bf16` decode entries), the module also
    gets `bt_sample_greedy_bf16` and `bt_sample_bf16`, which
    `_mlir_ciface_bt_gpu_sample_bf16` launches: the same kernels with
    logits BF16 [B', V] (strided), each loaded logit extended exactly to
    f32 (its bits shifted left by 16), so they choose as the f32 kernels
    would from those values; and `bt_lm_head_argmax_bf16(x I32 [M, K/2],
    w I32 [N, K/2], pv F32 [M, ceil(N/64)], pi I32 [M, ceil(N/64)])`, the
    bf16 LM head on the tensor cores (mma.sync m16n8k16) with the greedy
    argmax as its epilogue: per row and tile of 64 ids the largest
    bf16-rounded logit and its lowest id, so that a greedy step need not
    store the logits (lib/Codegen/CUDA/GPUKernelText.h documents its
    launch); and `bt_sample_greedy_partials(pv, pi, tokens, state, step,
    first, eos, pad)`, bt_sample_greedy over those per-tile maxima (pv
    takes the logits' place, pi their ids; same launch), which together
    make the greedy step of `_mlir_ciface_bt_gpu_lm_head_sample_bf16`
    (bt-gpu-lm-head-sampling).

    Run after `gpu-kernel-outlining` and before `bt-merge-gpu-modules`
    (which moves the kernels into the one module). A module without a
    sampler call is left unchanged.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def BTGPULMHeadSampling
    : Pass<"bt-gpu-lm-head-sampling", "::mlir::ModuleOp"> {
  let summary = "Fuse a bf16 decode step's LM head GEMM into its sampler call";
  let description = [{
    In a `--dtype bf16` decode entry the LM head is the cuBLAS call
    `bt_gpu_gemm_bf16_out(101, 111, 112, M, N, K, 1.0, x, lda, w, ldb, 0.0,
    logits, ldc)` (bt-gemm-to-blas: logits BF16 [M, N] = x BF16 [M, K] ·
    w BF16 [N, K]ᵀ) and its logits are read by the sampler call
    `bt_rt_sample_bf16(sampler, logits, tokens)` after it. When only pure
    ops and frees of other buffers lie between the two (same block), they
    become

      %pv = memref.alloc(M, ceil(N / 64)) : memref<?x?xf32>
      %pi = memref.alloc(M, ceil(N / 64)) : memref<?x?xi32>
      func.call @bt_gpu_lm_head_sample_bf16(sampler, x, w, logits, tokens,
                                            pv, pi)
      memref.dealloc %pv, %pi

    at the sampler's place (every memref cast to a strided layout; the
    declaration is private, `llvm.emit_c_interface`, weak like the
    sampler's). The runtime's `_mlir_ciface_bt_gpu_lm_head_sample_bf16`
    (runtime/device/cuda/cuda.h) then chooses per step: a greedy device step
    whose logits the caller does not keep runs `bt_lm_head_argmax_bf16` into
    pv / pi and `bt_sample_greedy_partials` (bt-gpu-sampler-kernels) and
    leaves `logits` unwritten; any other step runs the same GEMM and
    sampler as before. A call pair that does not match is left unchanged.

    Run after bt-gemm-to-blas and before bt-gpu-device-allocs (which turns
    the two allocations into device memory).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
}

def BTMergeGPUModules : Pass<"bt-merge-gpu-modules", "::mlir::ModuleOp"> {
  let summary = "Move all kernels into one gpu.module";
  let description = [{
    `gpu-kernel-outlining` creates one `gpu.module` per kernel. The CUDA
    artifact carries a single PTX module that the runtime loads once
    (docs/abi.md), so this pass moves the symbols of every `gpu.module`
    into one module named `module-name` (renaming a symbol that clashes
    with one already moved) and retargets every `gpu.launch_func`.

    Errors: gpu.modules with different targets, a non-symbol op in a
    gpu.module, a launch of a kernel no gpu.module defines, another symbol
    with the name `module-name`.
  }];
  let options = [
    Option<"moduleName", "module-name", "std::string",
           /*default=*/"\"bt_kernels\"", "Name of the merged gpu.module">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def BTGPUHostToRuntime : Pass<"bt-gpu-host-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Lower the host side's GPU ops to calls of the bt runtime's C ABI";
  let description = [{
    Runs on the host code after it has been converted to the LLVM dialect
    (the kernels are in a `gpu.binary` or `gpu.module` by then). Debian ships
    no `libmlir_cuda_runtime`, and the bt runtime owns the CUDA context,
    stream, PTX module and memory pool, so the host talks to the GPU only
    through (docs/abi.md, "Kernel library (CUDA target)"):

    - `gpu.launch_func @m::@k blocks(gx, gy, gz) threads(bx, by, bz)
      dynamic_shared_memory_size s args(...)` →
      `bt_gpu_launch("k", gx, gy, gz, bx, by, bz, s, params, n)`: `params`
      is an array of `n` pointers to the parameter values in the order of
      the NVVM kernel signature (each memref operand unpacked into
      allocated pointer, aligned pointer, offset, sizes, strides; index as
      i64). The value storage and the array are `llvm.alloca`s at the
      function entry; the name is a NUL-terminated internal global.
    - `gpu.alloc(sizes)` → `bt_gpu_alloc(bytes)` and a memref descriptor
      on the returned pointer (identity layout).
    - `gpu.dealloc %m` → `bt_gpu_free(allocated pointer of %m)`.
    - The sampler callbacks `_mlir_ciface_bt_rt_sample` and
      `_mlir_ciface_bt_rt_sample_bf16` (bt.sample of f32 / bf16 logits) are
      renamed `_mlir_ciface_bt_gpu_sample` / `_mlir_ciface_bt_gpu_sample_bf16`:
      on this target their logits and tokens are device memory.

    Errors (conversion failures): async launches or allocations, clusters,
    `host_shared` allocations, non-identity layouts of `gpu.alloc`.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def BTGPUExternSharedMemory
    : Pass<"bt-gpu-extern-shared-memory", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Declare the dynamic shared memory as CUDA does (.extern .shared)";
  let description = [{
    Runs on the NVVM gpu.module after `convert-gpu-to-nvvm`, which gives
    `gpu.dynamic_shared_memory` a zero-length *internal* global in address
    space 3 (`.shared .align 16 .b8 __dynamic_shmem__0[]` in PTX: a definition
    of zero bytes, so ptxas warns of a potential out-of-bounds access on
    every access). CUDA declares dynamic shared memory as an external array
    sized by the launch (`extern __shared__`): every zero-length global of
    address space 3 becomes an external declaration with its alignment
    (`.extern .shared .align 16 .b8 __dynamic_shmem__0[]`).

    Errors: a zero-length shared global with an initializer.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def BTNVVMToHost : Pass<"bt-nvvm-to-host", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Rewrite the NVVM kernels into host LLVM IR for the CUDA emulator";
  let description = [{
    Takes a `gpu.module` exactly as it goes to PTX (LLVM dialect + NVVM ops,
    after `convert-gpu-to-nvvm`; `bt-cuda-pipeline{binary=false}`) and
    rewrites it, in place, into host LLVM dialect that the CUDA emulator
    runs on the CPU (docs/cuda-emulator.md). The contract with the emulator
    is `runtime/device/cuda_emu/bt_emu_abi.h`:

    - `nvvm.read.ptx.sreg.{tid,ntid,ctaid,nctaid}.{x,y,z}`, `laneid`,
      `warpsize` → i32 loads of the current thread's state
      (`bt_emu_thread()`, called once at the entry of each function);
    - `nvvm.barrier0` → `bt_emu_barrier(t, site)`;
    - `nvvm.shfl.sync bfly|idx|up|down` (i32 or f32, with or without the
      validity flag) → `bt_emu_shfl(t, kind, mask, value, b, c, site, &ok)`
      (PTX mask/clamp semantics in the emulator);
    - every `llvm.load` / `llvm.store` whose address is not derived from an
      `llvm.alloca` or a constant global → the same access at the address
      returned by `bt_emu_load/store(t, addr, bytes, site)`, which checks it;
    - the dynamic shared memory global (`addr_space = 3`, `!llvm.array<0 x
      i8>`) → the block's buffer `t->smem`;
    - `vprintf` → `bt_emu_vprintf(t, fmt, args)`, `llvm.intr.trap` →
      `bt_emu_trap(t, site)`;
    - libdevice `__nv_<f>` → libm's `<f>` (expf, erff, sqrtf, ...);
    - every address space → 0.

    Each kernel `K` (`nvvm.kernel` / `gpu.kernel`) becomes the internal
    function `K.bt_emu_body`, called by a new external entry
    `void K(void **params)` that loads every parameter from `params[i]` (the
    `kernelParams` of `cuLaunchKernel`, in the NVVM kernel order); the
    constant `K__bt_emu_flags` is 1 when K may reach a barrier or a shuffle,
    and `K__bt_emu_param_bytes` (i32 array) holds the parameter count and
    each parameter's size in bytes (pointers 8, integers and floats their
    width), which a stream capture copies out of `kernelParams`
    (emulator ABI version 2).
    `bt_emu_site_table` (NUL-separated strings) and `bt_emu_num_sites` name
    every site: the kernel, the kind of site, the location and the op as it
    reads in the input (value names numbered per function).
    `nvvm.*` / `gpu.*` attributes are dropped; the caller moves the body of
    the gpu.module into a builtin.module and compiles it for the CPU
    (`bt::buildEmulatorKernels`).

    Errors (naming the op): an NVVM op or libdevice function without a host
    lowering, a call of another external function, an indirect call,
    atomics, inline assembly, `llvm.call_intrinsic`, static shared memory,
    and a load or store of a type other than integers, floats, pointers and
    their vectors; a kernel parameter of another type than a pointer,
    integer or float (no size for a captured launch).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // BT_CODEGEN_CUDA_PASSES_TD
