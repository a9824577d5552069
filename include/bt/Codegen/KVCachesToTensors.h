//===- KVCachesToTensors.h - patterns of bt-lower-kv-caches ----*- C++ -*-===//
//
// bt-lower-kv-caches rewrites every `!bt.kv_cache` value of a function into
// its storage tensor [B, Ly, 2, H, C, hd], its key-valid flags [B, C] (i64)
// and one fill length per layer (docs/generation.md, "KV caches across the
// ABI"; the pass description in include/bt/Codegen/Passes.td). A cache value
// is 1:N (the tensors and the lengths, some of them compile-time constants),
// so the patterns share a KVCacheLowering that maps each original cache value
// to its tensors; they run in program order (the conversion driver's
// pre-order walk), function arguments are rewritten before them and the
// function's results after them (lib/Codegen/Common/KVCachesToTensors.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef BT_CODEGEN_KVCACHESTOTENSORS_H
#define BT_CODEGEN_KVCACHESTOTENSORS_H

#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <array>
#include <tuple>

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace bt {

/// The state of one function's KV caches while bt-lower-kv-caches rewrites
/// it.
class KVCacheLowering {
public:
  /// The tensors of one cache value.
  struct Cache {
    KVCacheType type;
    mlir::Value kv;    ///< [B, Ly, 2, H, C, hd]
    mlir::Value flags; ///< [B, C] i64
    /// Fill length per layer (layers are appended one after the other).
    llvm::SmallVector<mlir::OpFoldResult> len;
    mlir::OpFoldResult batch, capacity;
    /// Flag ranges already written (start, size, mask; null mask = ones):
    /// the flags are shared by the layers, which append the same entries
    /// one after the other, so only the first layer's append writes them.
    llvm::SmallVector<
        std::tuple<mlir::OpFoldResult, mlir::OpFoldResult, mlir::Value>>
        flagsWritten;
    /// The storage / flags arguments this value descends from (by appends),
    /// null for a cache allocated in the function.
    mlir::BlockArgument kvArg, flagsArg;
    /// With the lengths on the device (bt-lower-kv-caches
    /// `device-cache-length`), for a cache that descends from an argument:
    /// its length argument, a 0-d i64 tensor the host never reads; `len`
    /// then counts the entries appended in this function (host values,
    /// usually constants) and a layer's length is base + len (absolute()).
    /// Null: `len` are the lengths themselves.
    mlir::BlockArgument base;

    /// The fill length of `layer` as an index: `len[layer]`, or with a
    /// `base` the 0-d tensor's element (a tensor.extract, which device
    /// code reads: on the CUDA target only a fallback reads it on the
    /// host) plus `len[layer]`.
    mlir::OpFoldResult absolute(mlir::OpBuilder &b, mlir::Location l,
                                int64_t layer) const;
  };

  /// What `bt.kv_attend q, %c[l]` reads: the keys and values of layer l,
  /// [B, H, len, hd] views of the storage, and the key flags [B, len].
  struct AttendOperands {
    mlir::Value keys, values, flags;
  };

  /// A returned cache's storage or flags result that is the in-place update
  /// of an argument (bt.inout / bt.inout_arg).
  struct Tie {
    unsigned result;
    mlir::BlockArgument arg;
  };

  /// Forgets everything (before the next function).
  void reset();

  /// The tensors of the cache value `cache` (an original !bt.kv_cache
  /// value, lowered earlier in program order).
  const Cache &lookup(mlir::Value cache) const;
  void set(mlir::Value cache, Cache c) { caches[cache] = std::move(c); }

  /// Emits the views of `attend`'s layer (see AttendOperands); with
  /// `wholeCapacity`, of all C entries instead of the filled ones (for
  /// kernels that read a device length, Cache::base).
  AttendOperands emitAttendOperands(mlir::OpBuilder &b, KVAttendOp attend,
                                    bool wholeCapacity = false) const;

  /// The cache arguments of the function, each with the storage, flags and
  /// length arguments that replace it (lowerKVCacheArguments).
  llvm::SmallVector<std::pair<mlir::BlockArgument,
                              std::array<mlir::BlockArgument, 3>>>
      cacheArgs;
  /// The function's new results (set by the func.return pattern): their
  /// attributes and the in-place ties of returned caches.
  llvm::SmallVector<mlir::DictionaryAttr> resultAttrs;
  llvm::SmallVector<Tie> ties;
  bool returnLowered = false;
  /// Stand-ins of cache type for the old loop-carried values (see the
  /// scf.for pattern), erased by finishKVCacheSignature.
  llvm::SmallVector<mlir::Operation *> standIns;

private:
  llvm::DenseMap<mlir::Value, Cache> caches;
};

/// Adds the target-neutral patterns (benefit 1) of bt.kv_alloc,
/// bt.kv_append, bt.kv_attend (the head-loop attention,
/// codegen::emitAttention), bt.kv_length, bt.kv_release, and of the
/// scf.for / scf.yield / func.return ops that carry caches.
void populateBTKVCacheToTensorPatterns(mlir::RewritePatternSet &patterns,
                                       KVCacheLowering &lowering);

/// Before the patterns: inserts the storage, flags and length arguments of
/// each cache argument of `fn` (with bt.name / bt.dims) and records the
/// initial state of the cache (every layer filled up to the length). With
/// `deviceLength`, the length argument is the cache's `base` (see
/// KVCacheLowering::Cache) and the function returns the updated length
/// in place (bt.inout) with the storage and flags.
void lowerKVCacheArguments(mlir::func::FuncOp fn, KVCacheLowering &lowering,
                           bool deviceLength = false);

/// After the patterns: the function type and result attributes from the new
/// func.return, the cache arguments erased, bt.inout / bt.inout_arg on the
/// tied arguments and results.
void finishKVCacheSignature(mlir::func::FuncOp fn, KVCacheLowering &lowering);

} // namespace bt

#endif // BT_CODEGEN_KVCACHESTOTENSORS_H
