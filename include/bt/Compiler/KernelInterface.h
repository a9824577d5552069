//===- KernelInterface.h - the entry points of a kernel library -*- C++ -*-===//
//
// What the compiler tells the runtime about the kernels it built
// (docs/abi.md): each entry point's symbol, the parameters its leading
// arguments take and the tensor specs of its inputs and outputs (among them
// the KV-cache layout: the in-out kv_cache [B, Ly, 2, H, C, hd] and kv_valid
// [B, C], static sizes and dim names as bt-lower-kv-caches made them), and
// the KV-cache memory plan. Produced by the compile phases (Compiler.h, after
// Phase::Linalg) as data; std-only, so that the runtime side
// (tools/bt-run/RuntimeBridge.cpp, built with exceptions) copies it into the
// artifact's manifest as is, and generation reads both from there.
//
//===----------------------------------------------------------------------===//

#ifndef BT_COMPILER_KERNELINTERFACE_H
#define BT_COMPILER_KERNELINTERFACE_H

#include <cstdint>
#include <string>
#include <vector>

namespace bt {

/// A tensor argument or result of an entry point (bt.proto TensorSpec).
struct TensorSpec {
  std::string name;                  ///< bt.name: input_ids, logits, ...
  std::string dtype;                 ///< "F32", "I64", "I32", "BF16", "F16"
  std::vector<int64_t> shape;        ///< -1 = dynamic
  std::vector<std::string> dimNames; ///< bt.dims; "" = unnamed
  /// In-out argument (inputs only; bt.inout): a runtime-owned buffer the
  /// kernel updates in place (kv_cache, kv_valid; docs/generation.md).
  bool inout = false;
  /// A rank-0 input passed by value in host memory (inputs only;
  /// bt.host_scalar, bt/Codegen/HostScalars.h): only the host code reads it.
  bool hostScalar = false;
};

/// An entry point of the kernel library (bt.proto EntryPoint).
struct EntryPoint {
  std::string name;   ///< the function: eval, prefill, decode_block, ...
  std::string symbol; ///< bt_entry_<name>
  /// The parameters the leading arguments take, in order (bt.params).
  std::vector<std::string> params;
  /// Each parameter's dtype as the kernels take it ("F32", or "BF16" after
  /// bt-bf16-gemms), parallel to `params`.
  std::vector<std::string> paramDTypes;
  /// The other arguments, and the results that are not in-out arguments.
  std::vector<TensorSpec> inputs, outputs;
};

/// The KV-cache memory plan as the artifact carries it (bt.proto
/// KVMemoryPlan): the per-sequence coefficients of bt-plan-kv-memory's plan
/// (bt::KVPlan, include/bt/Transforms/KVPlan.h), which the runtime evaluates
/// for given lengths and a memory budget (rt::PlanKV). Sizes in bytes.
struct KVMemoryPlan {
  /// L_B; 1 for vanilla GPT-NeoX (one entry per token); 0: no plan (the
  /// manifest gets none).
  int64_t blockLength = 0;
  /// Key + value of one global-cache entry, all layers:
  /// layers · 2 · heads · head_dim · sizeof(elt).
  int64_t globalBytesPerEntry = 0;
  /// The token decoder's local scratch per sequence (0 for vanilla).
  int64_t localBytesPerSequence = 0;
  /// The weights as the entry points take them (one copy per parameter at
  /// its bt.param argument's element type; bf16 matrices after
  /// bt-bf16-gemms): the device memory they hold next to the caches.
  int64_t weightBytes = 0;
  /// "kv-cache lifetimes" | "model ops" (bt::KVPlan::source).
  std::string source;
};

/// The entry points of a kernel library, in module order, and the plan of
/// its KV caches.
struct KernelInterface {
  std::vector<EntryPoint> entryPoints;
  KVMemoryPlan kvPlan;
};

} // namespace bt

#endif // BT_COMPILER_KERNELINTERFACE_H
