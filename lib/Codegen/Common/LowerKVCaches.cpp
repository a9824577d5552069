//===- LowerKVCaches.cpp - bt-lower-kv-caches -----------------------------===//
//
// bt-lower-kv-caches: every !bt.kv_cache value becomes its storage tensor,
// its key-valid flags and per-layer fill lengths (docs/generation.md, "KV
// caches across the ABI"). Per function: the structure is checked, the cache
// arguments are expanded (lowerKVCacheArguments), the cache ops and the
// control flow that carries caches are rewritten by a partial dialect
// conversion with the patterns of KVCachesToTensors.cpp (and those of the
// code-generation target, if any), and the results and in-place ties are
// fixed up (finishKVCacheSignature). See the pass description in
// include/bt/Codegen/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "CodegenTargets.h"

#include "bt/Codegen/CodegenTarget.h"
#include "bt/Codegen/KVCachesToTensors.h"
#include "bt/Codegen/Passes.h"
#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

namespace bt {
#define GEN_PASS_DEF_BTLOWERKVCACHES
#include "bt/Codegen/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

bool isCacheType(Type t) { return isa<KVCacheType>(t); }

/// Caches may be used in the entry block of `fn` and in scf.for bodies nested
/// in it only, by the cache ops, scf.for / scf.yield and func.return.
LogicalResult checkStructure(func::FuncOp fn) {
  Block *entry = &fn.getBody().front();
  WalkResult r = fn.walk([&](Operation *op) -> WalkResult {
    bool usesCache = llvm::any_of(op->getOperandTypes(), isCacheType) ||
                     llvm::any_of(op->getResultTypes(), isCacheType);
    if (!usesCache)
      return WalkResult::advance();
    // The entry block, or the bodies of scf.for ops nested in it.
    for (Block *block = op->getBlock(); block != entry;
         block = block->getParentOp()->getBlock()) {
      if (!isa<scf::ForOp>(block->getParentOp())) {
        op->emitOpError()
            << "uses a KV cache inside a '"
            << block->getParentOp()->getName()
            << "'; bt-lower-kv-caches supports straight-line cache code and "
               "scf.for loops only";
        return WalkResult::interrupt();
      }
    }
    if (!isa<KVAllocOp, KVAppendOp, KVAttendOp, KVLengthOp, KVReleaseOp,
             func::ReturnOp, scf::ForOp, scf::YieldOp>(op)) {
      op->emitOpError() << "uses a KV cache; bt-lower-kv-caches handles only "
                           "the KV-cache ops, scf.for and func.return (run "
                           "bt-decompose first)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (r.wasInterrupted())
    return failure();
  for (Block &block : fn.getBody())
    if (&block != entry &&
        llvm::any_of(block.getArgumentTypes(), isCacheType))
      return fn.emitOpError() << "has a KV cache block argument; "
                                 "bt-lower-kv-caches supports straight-line "
                                 "cache code only";
  return success();
}

/// The conversion target of one function: no cache op, no scf.for / scf.yield
/// / func.return that carries a cache. Every op a pattern creates must be
/// legal, so the dialects the lowerings emit (e.g. the scf.if of a target's
/// attention kernel) are legal; scf.for / scf.yield are legal when they carry
/// no cache.
ConversionTarget cacheFreeTarget(MLIRContext *ctx) {
  ConversionTarget target(*ctx);
  codegen::addLinalgLevelLegalDialects(target);
  target.addLegalOp<UnrealizedConversionCastOp>();
  target.addIllegalOp<KVAllocOp, KVAppendOp, KVAttendOp, KVLengthOp,
                      KVReleaseOp>();
  target.addDynamicallyLegalOp<scf::ForOp>([](scf::ForOp loop) {
    return llvm::none_of(loop.getInitArgs().getTypes(), isCacheType);
  });
  target.addDynamicallyLegalOp<scf::YieldOp, func::ReturnOp>(
      [](Operation *op) {
        return llvm::none_of(op->getOperandTypes(), isCacheType);
      });
  return target;
}

/// Reports a bt.kv_attend over a cache whose element type differs from its
/// queries' (a bf16 cache of f32 activations) that `hooks` (null: no target)
/// does not lower: the target-neutral head loop computes in one type.
LogicalResult checkMixedPrecision(func::FuncOp fn, const CodegenTarget *hooks) {
  WalkResult r = fn.walk([&](KVAttendOp attend) {
    Type cacheElt =
        cast<KVCacheType>(attend.getCache().getType()).getElementType();
    auto query = cast<RankedTensorType>(attend.getQuery().getType());
    if (cacheElt == query.getElementType() ||
        (hooks && hooks->attendsMixedPrecisionCache(query)))
      return WalkResult::advance();
    attend.emitOpError() << "attention over a " << cacheElt
                         << " KV cache of " << query.getElementType()
                         << " queries is not supported by "
                         << (hooks ? "target '" + hooks->getName().str() + "'"
                                   : std::string("the target-neutral lowering"))
                         << " (the CUDA target's attention kernels read bf16 "
                            "caches, up to head dim 128; --dtype bf16 is for "
                            "--target cuda)";
    return WalkResult::interrupt();
  });
  return failure(r.wasInterrupted());
}

struct LowerKVCachesPass
    : public codegen::TargetedLoweringPass<LowerKVCachesPass,
                                           bt::impl::BTLowerKVCachesBase> {
  using TargetedLoweringPass::TargetedLoweringPass;

  /// Whether `fn` has caches to lower; an error for a declaration with cache
  /// arguments or results (calls are not lowered).
  static FailureOr<bool> hasCaches(func::FuncOp fn) {
    if (fn.isExternal()) {
      if (llvm::any_of(fn.getArgumentTypes(), isCacheType) ||
          llvm::any_of(fn.getResultTypes(), isCacheType))
        return fn.emitOpError() << "declares KV cache arguments or results; "
                                   "bt-lower-kv-caches does not lower calls";
      return false;
    }
    bool any = llvm::any_of(fn.getArgumentTypes(), isCacheType);
    fn.walk([&](Operation *op) {
      any |= llvm::any_of(op->getResultTypes(), isCacheType);
    });
    return any;
  }

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    const CodegenTarget *hooks;
    if (failed(resolveHooks(hooks)))
      return signalPassFailure();
    KVCacheLowering lowering;
    RewritePatternSet patterns(ctx);
    populateBTKVCacheToTensorPatterns(patterns, lowering);
    ConversionTarget conversion = cacheFreeTarget(ctx);
    if (hooks) {
      hooks->populateKVCacheToTensorPatterns(patterns, lowering);
      hooks->configureConversionTarget(conversion);
    }
    FrozenRewritePatternSet frozen(std::move(patterns));
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      FailureOr<bool> any = hasCaches(fn);
      if (failed(any))
        return signalPassFailure();
      if (!*any)
        continue;
      if (failed(checkStructure(fn)) || failed(checkMixedPrecision(fn, hooks)))
        return signalPassFailure();
      lowering.reset();
      lowerKVCacheArguments(fn, lowering, deviceCacheLength);
      if (failed(applyPartialConversion(fn, conversion, frozen)))
        return signalPassFailure();
      finishKVCacheSignature(fn, lowering);
    }
  }
};

} // namespace

std::unique_ptr<Pass>
bt::createBTLowerKVCaches(const BTLowerKVCachesOptions &options,
                          const CodegenTarget *target) {
  return std::make_unique<LowerKVCachesPass>(options, target);
}
