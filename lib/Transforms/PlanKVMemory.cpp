//===- PlanKVMemory.cpp - bt-plan-kv-memory --------------------------------===//
//
// The KV-cache memory plan (docs/design.md §3, include/bt/Transforms/KVPlan.h):
// global cache bytes per sequence, the bounded local scratch, and the
// largest batch that fits a memory budget next to the weights.
//
//===----------------------------------------------------------------------===//

#include "bt/Transforms/KVPlan.h"

#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Transforms/Passes.h"
#include "bt/runtime/base/byte_size.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace bt {
#define GEN_PASS_DEF_BTPLANKVMEMORY
#include "bt/Transforms/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

int64_t bytesOf(Type elt) {
  return std::max<int64_t>(1, elt.getIntOrFloatBitWidth() / 8);
}

/// ceil(a / b) for a >= 0 (no a + b - 1: it overflows near INT64_MAX).
int64_t ceilDiv(int64_t a, int64_t b) {
  return b > 0 ? a / b + (a % b != 0 ? 1 : 0) : 0;
}

/// Size arithmetic that records overflow of int64 bytes instead of wrapping
/// into negative sizes (issue 14: prompt-tokens near 2^63, vocabularies near
/// 2^63). The first overflowing term is named in the error.
struct CheckedSizes {
  const char *overflowed = nullptr;
  int64_t mul(int64_t a, int64_t b, const char *what) {
    int64_t r = 0;
    if (llvm::MulOverflow(a, b, r) && !overflowed)
      overflowed = what;
    return r;
  }
  int64_t add(int64_t a, int64_t b, const char *what) {
    int64_t r = 0;
    if (llvm::AddOverflow(a, b, r) && !overflowed)
      overflowed = what;
    return r;
  }
  /// KVStackGeometry::bytesPerEntryPerLayer / bytesPerEntry, checked.
  int64_t entryBytes(const KVStackGeometry &g, bool allLayers, const char *what) {
    int64_t perLayer = mul(mul(mul(2, g.heads, what), g.headDim, what), g.eltBytes, what);
    return allLayers ? mul(perLayer, g.layers, what) : perLayer;
  }
};

KVStackGeometry geometryOf(KVCacheType t) {
  return {t.getLayers(), t.getHeads(), t.getHeadDim(),
          bytesOf(t.getElementType())};
}

KVStackGeometry geometryOf(NeoXConfigAttr c, Type elt) {
  return {c.getLayers(), c.getHeads(), c.getHeadDim(), bytesOf(elt)};
}

/// The caches of a module, from their lifetimes.
struct CacheScan {
  KVStackGeometry global, local;
  bool hasGlobal = false, hasLocal = false;
  int64_t localCapacity = 0;
  /// Peak bytes (per sequence) of the local caches live at the same time.
  int64_t localPeak = 0;

  void note(KVCacheType t) {
    KVStackGeometry g = geometryOf(t);
    if (t.isGlobal()) {
      if (!hasGlobal || g.bytesPerEntry() > global.bytesPerEntry())
        global = g;
      hasGlobal = true;
    } else {
      if (!hasLocal || t.getBytesPerSequence() > local.bytesPerEntry() * localCapacity) {
        local = g;
        localCapacity = t.getCapacity();
      }
      hasLocal = true;
    }
  }

  void scan(ModuleOp module) {
    module.walk([&](FunctionOpInterface fn) {
      for (Type t : fn.getArgumentTypes())
        if (auto c = llvm::dyn_cast<KVCacheType>(t))
          note(c);
      for (Type t : fn.getResultTypes())
        if (auto c = llvm::dyn_cast<KVCacheType>(t))
          note(c);
      // Program order over structured control flow: a local cache is live
      // from its allocation to its release (appends update it in place).
      int64_t live = 0;
      fn->walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (auto alloc = dyn_cast<KVAllocOp>(op)) {
          auto t = llvm::cast<KVCacheType>(alloc.getType());
          note(t);
          if (t.isLocal()) {
            live += t.getBytesPerSequence();
            localPeak = std::max(localPeak, live);
          }
        } else if (auto release = dyn_cast<KVReleaseOp>(op)) {
          auto t = llvm::cast<KVCacheType>(release.getCache().getType());
          if (t.isLocal())
            live -= t.getBytesPerSequence();
        }
      });
    });
  }
};

} // namespace

FailureOr<KVPlan> bt::computeKVPlan(ModuleOp module,
                                    const KVPlanRequest &request) {
  KVPlan plan;
  for (auto [name, value] :
       {std::pair<const char *, int64_t>{"prompt-tokens", request.promptTokens},
        {"gen-tokens", request.genTokens},
        {"batch", request.batch},
        {"memory", request.memoryBytes},
        {"element-bytes", request.eltBytes}})
    if (value < 0)
      return module.emitError() << "bt-plan-kv-memory: " << name << "=" << value
                                << " must not be negative";
  CheckedSizes c;
  // Model structure: L_B, P and the stacks' configs.
  BlockDecoderOp blockDecoder;
  TokenDecoderOp tokenDecoder;
  EmbedderOp embedder;
  module.walk([&](Operation *op) {
    if (auto o = dyn_cast<BlockDecoderOp>(op); o && !blockDecoder)
      blockDecoder = o;
    if (auto o = dyn_cast<TokenDecoderOp>(op); o && !tokenDecoder)
      tokenDecoder = o;
    if (auto o = dyn_cast<EmbedderOp>(op); o && !embedder)
      embedder = o;
  });
  int64_t blockLength = 0;
  if (embedder)
    blockLength = llvm::cast<RankedTensorType>(embedder.getIds().getType())
                      .getDimSize(2);
  else if (tokenDecoder)
    blockLength = llvm::cast<RankedTensorType>(tokenDecoder.getIds().getType())
                      .getDimSize(2);
  if (blockLength <= 0)
    return module.emitError(
        "bt-plan-kv-memory: no bt.embedder or bt.token_decoder gives the "
        "block length L_B");
  plan.blockLength = blockLength;
  if (tokenDecoder)
    plan.prefixLength = tokenDecoder.getPrefixLengthAttr().getInt();

  CacheScan caches;
  caches.scan(module);
  if (caches.hasGlobal || caches.hasLocal) {
    plan.source = "kv-cache lifetimes";
    plan.global = caches.global;
    plan.local = caches.local;
    plan.localCapacity = caches.localCapacity;
    // Without the model op, P from the capacity C = P + L_B - 1 (prefix
    // strategy, as decode_tokens allocates it).
    if (!tokenDecoder && caches.hasLocal)
      plan.prefixLength = caches.localCapacity - blockLength + 1;
  } else {
    plan.source = "model ops";
  }
  if (!caches.hasGlobal) {
    if (!blockDecoder)
      return module.emitError("bt-plan-kv-memory: the module has no global "
                              "KV cache and no bt.block_decoder");
    plan.global = geometryOf(
        blockDecoder.getConfig(),
        llvm::cast<RankedTensorType>(blockDecoder.getInput().getType())
            .getElementType());
  }
  if (!caches.hasLocal && tokenDecoder) {
    plan.local = geometryOf(
        tokenDecoder.getConfig(),
        llvm::cast<RankedTensorType>(tokenDecoder.getContextEmbedding().getType())
            .getElementType());
    // The capacity decode_tokens allocates: P + L_B - 1 (prefix) or L_B
    // (summation) entries, not P + L_B (t_{L_B-1} is never an input).
    plan.localCapacity = tokenDecoder.getLocalCacheEntries(blockLength);
  }
  plan.vanilla = plan.local.empty();

  // Element size: the IR's, unless the request overrides it.
  plan.eltBytes = request.eltBytes > 0 ? request.eltBytes : plan.global.eltBytes;
  if (request.eltBytes > 0) {
    plan.global.eltBytes = request.eltBytes;
    plan.local.eltBytes = request.eltBytes;
  }
  if (request.cacheEltBytes > 0)
    plan.global.eltBytes = plan.local.eltBytes = request.cacheEltBytes;

  // Weights.
  for (ParamOp p : module.getOps<ParamOp>()) {
    RankedTensorType t = p.getTensorType();
    const int64_t n = t.getNumElements();
    plan.weightParams = c.add(plan.weightParams, n, "the parameter count");
    plan.weightBytes = c.add(
        plan.weightBytes,
        c.mul(n, request.eltBytes > 0 ? request.eltBytes : bytesOf(t.getElementType()),
              "the weight bytes"),
        "the weight bytes");
  }

  // Per sequence.
  plan.promptTokens = request.promptTokens;
  plan.genTokens = request.genTokens;
  plan.promptBlocks = ceilDiv(request.promptTokens, blockLength);
  plan.genBlocks = ceilDiv(request.genTokens, blockLength);
  plan.globalBlocks = c.add(plan.promptBlocks, plan.genBlocks, "the global blocks");
  plan.globalBytesPerSequence =
      c.mul(plan.globalBlocks, c.entryBytes(plan.global, true, "the global cache bytes"),
            "the global cache bytes per sequence");
  if (caches.hasLocal && caches.localPeak > 0)
    // The peak of the live local caches, at the requested element size.
    plan.localBytesPerSequence =
        c.mul(caches.localPeak / caches.local.eltBytes, plan.local.eltBytes,
              "the local cache bytes per sequence");
  else
    plan.localBytesPerSequence =
        c.mul(plan.localCapacity, c.entryBytes(plan.local, true, "the local cache bytes"),
              "the local cache bytes per sequence");
  plan.bytesPerSequence = c.add(plan.globalBytesPerSequence, plan.localBytesPerSequence,
                                "the bytes per sequence");

  // Batch.
  plan.memoryBytes = request.memoryBytes;
  auto maxBatch = [&](int64_t perSequence) -> int64_t {
    if (request.memoryBytes <= 0)
      return -1;
    int64_t available = request.memoryBytes - plan.weightBytes;
    if (available <= 0)
      return 0;
    if (perSequence <= 0)
      return std::numeric_limits<int64_t>::max();
    return available / perSequence;
  };
  plan.maxBatch = maxBatch(plan.bytesPerSequence);
  plan.batch = request.batch;
  plan.batchBytes = c.add(plan.weightBytes,
                          c.mul(request.batch, plan.bytesPerSequence, "the batch's bytes"),
                          "the batch's bytes");

  // A vanilla model of the same total size caches every token in every layer.
  plan.vanillaLayers = plan.global.layers + plan.local.layers;
  plan.vanillaTokens = c.add(request.promptTokens, request.genTokens, "the sequence length");
  plan.vanillaBytesPerSequence =
      c.mul(c.mul(plan.vanillaTokens, plan.vanillaLayers, "the vanilla cache bytes"),
            c.entryBytes(plan.global, false, "the vanilla cache bytes"),
            "the vanilla cache bytes");
  plan.vanillaMaxBatch = maxBatch(plan.vanillaBytesPerSequence);
  if (c.overflowed)
    return module.emitError()
           << "bt-plan-kv-memory: 64-bit overflow in " << c.overflowed << " (prompt-tokens="
           << request.promptTokens << ", gen-tokens=" << request.genTokens << ", batch="
           << request.batch << ", " << plan.weightParams << " parameters); the request or the "
           << "model is too large to plan";
  return plan;
}

DictionaryAttr bt::kvPlanToAttr(MLIRContext *context, const KVPlan &plan) {
  Builder b(context);
  SmallVector<NamedAttribute> entries;
  auto add = [&](StringRef name, int64_t v) {
    entries.push_back(b.getNamedAttr(name, b.getI64IntegerAttr(v)));
  };
  entries.push_back(b.getNamedAttr("source", b.getStringAttr(plan.source)));
  add("block_length", plan.blockLength);
  add("prefix_length", plan.prefixLength);
  add("element_bytes", plan.eltBytes);
  add("global_layers", plan.global.layers);
  add("global_heads", plan.global.heads);
  add("global_head_dim", plan.global.headDim);
  add("global_bytes_per_block", plan.global.bytesPerEntry());
  add("global_blocks", plan.globalBlocks);
  add("global_bytes_per_sequence", plan.globalBytesPerSequence);
  add("local_layers", plan.local.layers);
  add("local_heads", plan.local.heads);
  add("local_head_dim", plan.local.headDim);
  add("local_capacity", plan.localCapacity);
  add("local_bytes_per_sequence", plan.localBytesPerSequence);
  add("bytes_per_sequence", plan.bytesPerSequence);
  add("weight_bytes", plan.weightBytes);
  add("prompt_tokens", plan.promptTokens);
  add("gen_tokens", plan.genTokens);
  if (plan.memoryBytes > 0) {
    add("memory_bytes", plan.memoryBytes);
    add("max_batch", plan.maxBatch);
  }
  if (plan.batch > 0) {
    add("batch", plan.batch);
    add("batch_bytes", plan.batchBytes);
  }
  return b.getDictionaryAttr(entries);
}

std::string bt::formatBytes(int64_t bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0)
    return llvm::formatv("{0} B", bytes).str();
  return llvm::formatv("{0:F2} {1}", v, units[u]).str();
}

bool bt::parseByteSize(StringRef text, int64_t &bytes) {
  std::optional<int64_t> parsed =
      rt::ParseByteSizeText(std::string_view(text.data(), text.size()));
  if (!parsed)
    return false;
  bytes = *parsed;
  return true;
}

/// "173,164,032".
static std::string withCommas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

void bt::printKVPlan(llvm::raw_ostream &os, const KVPlan &plan,
                     StringRef modelName) {
  const KVStackGeometry &g = plan.global, &l = plan.local;
  // One line: a formula, then its value right-aligned.
  auto row = [&](const Twine &text, const std::string &value) {
    std::string t = text.str();
    os << llvm::formatv("  {0,-66} {1,14}\n", t, value);
  };
  auto bytes = [](int64_t b) { return formatBytes(b); };
  std::string elt = plan.eltBytes == 4   ? "f32"
                    : plan.eltBytes == 2 ? "bf16/f16"
                                         : std::to_string(plan.eltBytes * 8) + "-bit";
  os << "KV-cache memory plan";
  if (!modelName.empty())
    os << " for " << modelName;
  os << " (" << (plan.vanilla ? "vanilla GPT-NeoX" : "Block Transformer")
     << ", L_B = " << plan.blockLength;
  if (!plan.vanilla)
    os << ", P = " << plan.prefixLength;
  os << ", " << elt << ": " << plan.eltBytes << " B per element; geometry from "
     << plan.source << ")\n";
  row("weights: " + withCommas(plan.weightParams) + " parameters * " +
          Twine(plan.eltBytes) + " B",
      bytes(plan.weightBytes));
  if (plan.vanilla)
    row("sequence: " + Twine(plan.promptTokens) + " prompt + " +
            Twine(plan.genTokens) + " generated tokens",
        "C = " + std::to_string(plan.globalBlocks));
  else
    row("sequence: " + Twine(plan.promptTokens) + " prompt + " +
            Twine(plan.genTokens) + " generated tokens = " +
            Twine(plan.promptBlocks) + " + " + Twine(plan.genBlocks) +
            " blocks of L_B = " + Twine(plan.blockLength),
        "C = " + std::to_string(plan.globalBlocks));
  const char *unit = plan.vanilla ? "token" : "block";
  os << (plan.vanilla ? "  KV cache (one entry per token and layer), per sequence:\n"
                      : "  global cache (block decoder: one entry per block and "
                        "layer), per sequence:\n");
  row("  2 * H * hd * sizeof = 2 * " + Twine(g.heads) + " * " +
          Twine(g.headDim) + " * " + Twine(g.eltBytes) + " B, per " + unit +
          " per layer",
      bytes(g.bytesPerEntryPerLayer()));
  row("  * " + Twine(g.layers) + " layers, per " + unit,
      bytes(g.bytesPerEntry()));
  row("  * C = " + Twine(plan.globalBlocks) + " " + unit + "s",
      bytes(plan.globalBytesPerSequence));
  if (!plan.vanilla) {
    os << "  local scratch (token decoder, one block at a time: C_T = P + L_B "
          "- 1 entries, L_B for summation), per sequence:\n";
    os << "    2 * layers_T * H_T * C_T * hd_T * sizeof\n";
    row("    = 2 * " + Twine(l.layers) + " * " + Twine(l.heads) + " * " +
            Twine(plan.localCapacity) + " * " + Twine(l.headDim) + " * " +
            Twine(l.eltBytes) + " B",
        bytes(plan.localBytesPerSequence));
  }
  row(plan.vanilla ? "per sequence" : "per sequence: global + local",
      bytes(plan.bytesPerSequence));
  if (plan.memoryBytes > 0) {
    int64_t available = plan.memoryBytes - plan.weightBytes;
    row("memory budget " + bytes(plan.memoryBytes) + " - weights " +
            bytes(plan.weightBytes) + ", for caches",
        bytes(std::max<int64_t>(available, 0)));
    row("max batch = floor(" + bytes(std::max<int64_t>(available, 0)) + " / " +
            bytes(plan.bytesPerSequence) + ")",
        std::to_string(plan.maxBatch));
  }
  if (plan.batch > 0) {
    std::string verdict;
    if (plan.memoryBytes > 0)
      verdict = plan.batchBytes <= plan.memoryBytes ? " (fits)" : " (does NOT fit)";
    row("batch " + Twine(plan.batch) + ": weights + " + Twine(plan.batch) +
            " * " + bytes(plan.bytesPerSequence) + verdict,
        bytes(plan.batchBytes));
  }
  if (plan.memoryBytes > 0 || plan.batch > 0)
    os << "  (caches and weights only: activations and workspace come on top)\n";
  if (plan.vanilla)
    return;
  os << "  vanilla GPT-NeoX of the same total size (" << g.layers << " + "
     << l.layers << " = " << plan.vanillaLayers << " layers, H " << g.heads
     << ", hd " << g.headDim << "), one entry per token and layer:\n";
  row("  " + Twine(plan.vanillaTokens) + " tokens * " +
          Twine(plan.vanillaLayers) + " layers * " +
          bytes(g.bytesPerEntryPerLayer()) + ", per sequence",
      bytes(plan.vanillaBytesPerSequence));
  if (plan.memoryBytes > 0)
    row("  max batch (same weights)", std::to_string(plan.vanillaMaxBatch));
  if (plan.globalBlocks > 0 && plan.bytesPerSequence > 0) {
    row("global cache per layer: " + Twine(plan.globalBlocks) + " blocks vs " +
            Twine(plan.vanillaTokens) + " tokens (L_B, paper 2.3)",
        llvm::formatv("{0:F2}x smaller",
                      static_cast<double>(plan.vanillaTokens) /
                          static_cast<double>(plan.globalBlocks))
            .str());
    row("local cache per layer: " + Twine(plan.localCapacity) +
            " entries vs " + Twine(plan.vanillaTokens) +
            " tokens (L / L_B, paper 2.4)",
        llvm::formatv("{0:F1}x smaller",
                      static_cast<double>(plan.vanillaTokens) /
                          static_cast<double>(
                              std::max<int64_t>(plan.localCapacity, 1)))
            .str());
    row("whole model per sequence: " + bytes(plan.bytesPerSequence) + " vs " +
            bytes(plan.vanillaBytesPerSequence),
        llvm::formatv("{0:F2}x smaller",
                      static_cast<double>(plan.vanillaBytesPerSequence) /
                          static_cast<double>(plan.bytesPerSequence))
            .str());
  }
}

namespace {

struct PlanKVMemoryPass
    : public bt::impl::BTPlanKVMemoryBase<PlanKVMemoryPass> {
  using BTPlanKVMemoryBase::BTPlanKVMemoryBase;

  void runOnOperation() override {
    KVPlanRequest request;
    request.promptTokens = promptTokens;
    request.genTokens = genTokens;
    request.batch = batch;
    request.eltBytes = elementBytes;
    if (!memory.empty() && !parseByteSize(memory, request.memoryBytes)) {
      getOperation().emitError() << "bt-plan-kv-memory: cannot parse memory='"
                                 << memory << "'";
      return signalPassFailure();
    }
    FailureOr<KVPlan> plan = computeKVPlan(getOperation(), request);
    if (failed(plan))
      return signalPassFailure();
    getOperation()->setAttr(bt::BTDialect::KvPlanAttrHelper::getNameStr(),
                            kvPlanToAttr(&getContext(), *plan));
  }
};

} // namespace
