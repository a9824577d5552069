//===- KVPlan.h - KV-cache memory plan ---------------------------*- C++ -*-===//
//
// The memory plan of `bt-plan-kv-memory` (docs/design.md §3): bytes per sequence
// of the global (block-decoder) cache and of the bounded local (token-
// decoder) scratch, and the largest batch that fits a memory budget next to
// the weights. The runtime sizes its caches from this plan instead of
// bisecting to an out-of-memory error; `bt-run plan` prints it.
//
//===----------------------------------------------------------------------===//

#ifndef BT_TRANSFORMS_KVPLAN_H
#define BT_TRANSFORMS_KVPLAN_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace bt {

/// The cache geometry of one decoder stack.
struct KVStackGeometry {
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t headDim = 0;
  int64_t eltBytes = 0;
  /// Key + value of one entry (a block for the global cache, a position for
  /// the local one) in one layer: 2 · heads · head_dim · sizeof(elt).
  int64_t bytesPerEntryPerLayer() const { return 2 * heads * headDim * eltBytes; }
  /// The same for all layers.
  int64_t bytesPerEntry() const { return layers * bytesPerEntryPerLayer(); }
  bool empty() const { return layers == 0; }
};

/// What to plan for.
struct KVPlanRequest {
  int64_t promptTokens = 0; ///< prompt length in tokens (left-padded to blocks)
  int64_t genTokens = 0;    ///< tokens to generate
  int64_t memoryBytes = 0;  ///< device memory budget; 0: no max batch
  int64_t batch = 0;        ///< a batch to check against the budget; 0: none
  /// Element size of weights and caches; 0: the IR's (f32 → 4). E.g. 2 to
  /// plan a bf16 deployment of an f32 module.
  int64_t eltBytes = 0;
  /// Element size of the caches alone (weights as `eltBytes` says); 0: as
  /// `eltBytes`. E.g. 2 for the bf16 KV caches of an f32 module
  /// (bt-generate-entry-points kv-dtype=bf16, before it has run).
  int64_t cacheEltBytes = 0;
};

/// The plan. All sizes in bytes; `-1` where not applicable.
struct KVPlan {
  /// Where the cache geometry came from: "kv-cache lifetimes" (the
  /// !bt.kv_cache values of the generation functions) or "model ops" (the
  /// configs of bt.block_decoder / bt.token_decoder).
  std::string source;
  bool vanilla = false;      ///< no token decoder (GPT-NeoX, L_B = 1)
  int64_t blockLength = 1;   ///< L_B
  int64_t prefixLength = 0;  ///< P
  KVStackGeometry global;    ///< block decoder (vanilla: the stack)
  KVStackGeometry local;     ///< token decoder (empty for vanilla)
  int64_t eltBytes = 4;

  int64_t weightParams = 0;  ///< number of parameters (bt.param elements)
  int64_t weightBytes = 0;   ///< their bytes at eltBytes

  int64_t promptTokens = 0, genTokens = 0;
  int64_t promptBlocks = 0;  ///< ceil(prompt / L_B)
  int64_t genBlocks = 0;     ///< ceil(gen / L_B)
  int64_t globalBlocks = 0;  ///< C = promptBlocks + genBlocks

  /// Global cache: C · layers · 2 · H · hd · sizeof.
  int64_t globalBytesPerSequence = 0;
  /// Entries of the local cache: P + L_B.
  int64_t localCapacity = 0;
  /// Peak of the local caches live at once, per sequence:
  /// 2 · layers_T · H_T · (P + L_B) · hd_T · sizeof for one local cache.
  int64_t localBytesPerSequence = 0;
  /// Global + local.
  int64_t bytesPerSequence = 0;

  int64_t memoryBytes = 0;   ///< budget (0: none)
  /// floor((memory − weights) / bytesPerSequence); -1 without a budget.
  int64_t maxBatch = -1;
  int64_t batch = 0;         ///< the requested batch (0: none)
  int64_t batchBytes = 0;    ///< weights + batch · bytesPerSequence

  /// A vanilla GPT-NeoX of the same total size: layers_B + layers_T layers
  /// with the block decoder's heads and head dim, caching every token of
  /// every layer: (prompt + gen) · layers · 2 · H · hd · sizeof.
  int64_t vanillaLayers = 0;
  int64_t vanillaTokens = 0;
  int64_t vanillaBytesPerSequence = 0;
  int64_t vanillaMaxBatch = -1;
};

/// Computes the plan of `module`: the cache geometry from the lifetimes of
/// the !bt.kv_cache values of its functions (allocations, arguments and
/// results; the local scratch is the peak of the local caches live at the
/// same time), or, when it has none, from its bt.block_decoder /
/// bt.token_decoder ops; L_B and P from its bt.embedder / bt.token_decoder
/// ops; the weights from its bt.param ops. Emits an error on `module` and
/// fails if the module has neither caches nor a block decoder, or no block
/// length.
mlir::FailureOr<KVPlan> computeKVPlan(mlir::ModuleOp module,
                                      const KVPlanRequest &request);

/// The plan as the `bt.kv_plan` dictionary attribute (i64 entries, sizes in
/// bytes; names in docs/generation.md).
mlir::DictionaryAttr kvPlanToAttr(mlir::MLIRContext *context,
                                  const KVPlan &plan);

/// Prints the plan for people: human units and the terms of each formula.
void printKVPlan(llvm::raw_ostream &os, const KVPlan &plan,
                 llvm::StringRef modelName = "");

/// "19.13 MiB" (binary units).
std::string formatBytes(int64_t bytes);

/// Parses a byte size: "80GiB", "80G" and "80 GiB" are binary (80 · 2^30),
/// "80GB" is decimal (80 · 10^9), a plain number is bytes; K, M, G, T units,
/// fractions allowed ("1.5TiB"). Returns false on a malformed string. The
/// parser is the runtime's (bt::rt::ParseByteSizeText, runtime/base/
/// byte_size.h: std-only), so both sides read sizes alike.
bool parseByteSize(llvm::StringRef text, int64_t &bytes);

} // namespace bt

#endif // BT_TRANSFORMS_KVPLAN_H
