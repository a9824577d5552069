//===- BTTypes.td - bt types --------------------------------*- tablegen -*-===//

#ifndef BT_TYPES_TD
#define BT_TYPES_TD

include "bt/Dialect/BT/IR/BTDialect.td"
include "bt/Dialect/BT/IR/BTAttrs.td"
include "mlir/IR/AttrTypeBase.td"

def BT_KVCacheType : TypeDef<BT_Dialect, "KVCache"> {
  let mnemonic = "kv_cache";
  let summary = "A key/value cache with an explicit, verified lifetime";
  let description = [{
    The keys and values of every layer of one decoder stack for a batch of
    sequences. Storage layout (row-major):
    `[layers, 2 (key|value), batch, heads, capacity, head_dim]` of
    `element_type`, plus one validity flag per `[batch, capacity]` entry (key
    padding) and one fill length per layer.

    - `global` scope: the block decoder's cache. One entry per **block**
      (paper §2.3: the KV cache is L_B times smaller than a vanilla
      transformer's), lives for a whole sequence; capacity = the maximum
      number of blocks.
    - `local` scope: the token decoder's cache. At most P + L_B entries
      (prefix plus the block's tokens; paper §2.4), lives for the decoding of
      one block and must not escape the region it was allocated in.

    `element_type` is the activations' (f32, bf16 or f16), or bf16 for f32
    activations: a storage type that halves the cache bytes (the CUDA
    target's `--dtype bf16`, bt-generate-entry-points `kv-dtype`).
    `bt.kv_append` then rounds the f32 keys and values to nearest even as it
    stores them, and `bt.kv_attend` reads them back exactly (attention
    computes in f32). The ops with a cache check this rule.

    `batch` may be dynamic (`?`). `capacity` may be dynamic (`?`) for a
    `global` cache: the runtime sizes the global cache of a generation to
    exactly the prompt plus the generated blocks (docs/generation.md), so the
    compiled entry points take its capacity from the buffer they are given; a
    `local` cache has a static capacity (≤ P + L_B). Every other size is static
    and positive.

    Example: `!bt.kv_cache<global, batch = ?, layers = 2, heads = 2,
    capacity = 512, head_dim = 32, f32>`,
    `!bt.kv_cache<global, batch = ?, layers = 2, heads = 2, capacity = ?,
    head_dim = 32, f32>`.

    Values of this type are linear: each value is consumed (by
    `bt.kv_append`, `bt.kv_release`, a region terminator or a call) exactly
    once on every path, and read (`bt.kv_attend`, `bt.kv_length`) only before
    that. `bt-verify-kv-lifetimes` enforces this.
  }];
  let parameters = (ins
    "::bt::CacheScope":$scope,
    "int64_t":$batch,
    "int64_t":$layers,
    "int64_t":$heads,
    "int64_t":$capacity,
    "int64_t":$headDim,
    "::mlir::Type":$elementType
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool isGlobal() const { return getScope() == ::bt::CacheScope::global; }
    bool isLocal() const { return getScope() == ::bt::CacheScope::local; }
    bool hasStaticBatch() const { return !::mlir::ShapedType::isDynamic(getBatch()); }
    bool hasStaticCapacity() const { return !::mlir::ShapedType::isDynamic(getCapacity()); }
    /// Bytes of key+value storage of one entry of one sequence, all layers:
    /// 2 · layers · heads · head_dim · sizeof(elt).
    int64_t getBytesPerEntry() const;
    /// Bytes of key+value storage for one sequence (one batch row), all
    /// layers, full capacity: capacity · getBytesPerEntry(), or
    /// ShapedType::kDynamic when the capacity is dynamic.
    int64_t getBytesPerSequence() const;
  }];
}

#endif // BT_TYPES_TD
