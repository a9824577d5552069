//===- ScalarsToKernels.cpp - device scalars → 0-d linalg.generic ---------===//
//
// bt-scalars-to-kernels (CUDA/Passes.td): the scalar arith / math that the
// host code computes from 0-d tensors (the optimizer ops of train_step:
// global norm, clip coefficient, learning-rate schedule, AdamW's bias
// corrections) becomes 0-d linalg.generics, so that on the GPU it runs in
// a kernel instead of reading device memory on the host (a synchronous
// copy per value) and writing a 0-d result there (not possible).
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CUDA/Passes.h"
#include "bt/Codegen/HostScalars.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace bt {
#define GEN_PASS_DEF_BTSCALARSTOKERNELS
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

bool isScalar(Type t) { return !isa<ShapedType>(t); }

/// `tensor.extract %t[]` of a 0-d tensor.
bool isZeroDExtract(Operation *op) {
  auto extract = dyn_cast<tensor::ExtractOp>(op);
  return extract && extract.getTensor().getType().getRank() == 0;
}

/// A region-free arith / math op on scalars with scalar results.
bool isScalarOp(Operation *op) {
  if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) ||
      op->getNumRegions() != 0)
    return false;
  return llvm::all_of(op->getOperandTypes(), isScalar) &&
         llvm::all_of(op->getResultTypes(), isScalar);
}

class ScalarsToKernels {
public:
  explicit ScalarsToKernels(Block &body) : body(body) {}

  void run() {
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (auto from = dyn_cast<tensor::FromElementsOp>(op))
        rewriteFromElements(from);
      else if (auto fill = dyn_cast<linalg::FillOp>(op))
        rewriteFill(fill);
      else if (auto generic = dyn_cast<linalg::GenericOp>(op))
        rewriteGeneric(generic);
    }
    // The host scalar code left without uses.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if ((isScalarOp(&op) || isZeroDExtract(&op)) && op.use_empty())
        op.erase();
  }

private:
  /// Whether `v` is a device scalar: the result of a 0-d extract or of a
  /// scalar op one of whose operands is a device scalar (in this block).
  bool onDevice(Value v) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &body || !isScalar(v.getType()))
      return false;
    auto it = deviceMemo.find(v);
    if (it != deviceMemo.end())
      return it->second;
    bool result = isZeroDExtract(def) ||
                  (isScalarOp(def) &&
                   llvm::any_of(def->getOperands(),
                                [&](Value o) { return onDevice(o); }));
    deviceMemo[v] = result;
    return result;
  }

  /// The device scalar `v` as a 0-d tensor computed by a 0-d
  /// linalg.generic right after its definition (built once per value).
  Value materialize(Value v) {
    auto it = materialized.find(v);
    if (it != materialized.end())
      return it->second;
    // The slice: every device-scalar op `v` depends on.
    llvm::SetVector<Operation *> slice;
    SmallVector<Value> worklist{v};
    while (!worklist.empty()) {
      Value w = worklist.pop_back_val();
      if (!onDevice(w))
        continue;
      Operation *def = w.getDefiningOp();
      if (!slice.insert(def))
        continue;
      if (!isZeroDExtract(def))
        llvm::append_range(worklist, def->getOperands());
    }
    SmallVector<Operation *> ordered(slice.begin(), slice.end());
    llvm::sort(ordered,
               [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    llvm::SetVector<Value> inputs;
    for (Operation *op : ordered)
      if (isZeroDExtract(op))
        inputs.insert(cast<tensor::ExtractOp>(op).getTensor());

    Operation *def = v.getDefiningOp();
    OpBuilder b(def->getContext());
    b.setInsertionPointAfter(def);
    Location loc = def->getLoc();
    auto type = RankedTensorType::get({}, v.getType());
    Value init = b.create<tensor::EmptyOp>(loc, type, ValueRange{});
    AffineMap scalarMap = AffineMap::get(0, 0, {}, b.getContext());
    auto generic = b.create<linalg::GenericOp>(
        loc, TypeRange{type}, inputs.getArrayRef(), ValueRange{init},
        SmallVector<AffineMap>(inputs.size() + 1, scalarMap),
        ArrayRef<utils::IteratorType>{},
        [&](OpBuilder &nb, Location l, ValueRange args) {
          IRMapping map;
          for (Operation *op : ordered) {
            if (isZeroDExtract(op)) {
              Value t = cast<tensor::ExtractOp>(op).getTensor();
              map.map(op->getResult(0), args[indexOf(inputs, t)]);
              continue;
            }
            nb.clone(*op, map);
          }
          nb.create<linalg::YieldOp>(l, map.lookup(v));
        });
    Value result = generic.getResult(0);
    materialized[v] = result;
    return result;
  }

  static unsigned indexOf(const llvm::SetVector<Value> &set, Value v) {
    return std::distance(set.begin(), llvm::find(set, v));
  }

  void rewriteFromElements(tensor::FromElementsOp op) {
    if (op.getType().getRank() != 0 || !onDevice(op.getElements()[0]))
      return;
    op.replaceAllUsesWith(materialize(op.getElements()[0]));
    op.erase();
  }

  void rewriteFill(linalg::FillOp op) {
    Value value = op.getInputs()[0];
    if (!onDevice(value) || !op.hasPureTensorSemantics())
      return;
    Value scalar = materialize(value);
    OpBuilder b(op);
    Value init = op.getOutputs()[0];
    auto type = cast<RankedTensorType>(init.getType());
    MLIRContext *ctx = b.getContext();
    auto generic = b.create<linalg::GenericOp>(
        op.getLoc(), TypeRange{type}, ValueRange{scalar}, ValueRange{init},
        ArrayRef<AffineMap>{AffineMap::get(type.getRank(), 0, {}, ctx),
                            AffineMap::getMultiDimIdentityMap(type.getRank(),
                                                              ctx)},
        SmallVector<utils::IteratorType>(type.getRank(),
                                         utils::IteratorType::parallel),
        [&](OpBuilder &nb, Location l, ValueRange args) {
          nb.create<linalg::YieldOp>(l, args[0]);
        });
    op->replaceAllUsesWith(generic->getResults());
    op.erase();
  }

  void rewriteGeneric(linalg::GenericOp op) {
    if (!op.hasPureTensorSemantics())
      return;
    MLIRContext *ctx = op.getContext();
    unsigned loops = op.getNumLoops();
    AffineMap broadcast = AffineMap::get(loops, 0, {}, ctx);
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    SmallVector<Value> inputs(op.getInputs());
    bool changed = false;
    // Scalar input operands that are device scalars: read as 0-d tensors.
    for (unsigned i = 0; i < inputs.size(); ++i)
      if (onDevice(inputs[i])) {
        inputs[i] = materialize(inputs[i]);
        maps[i] = broadcast;
        changed = true;
      }
    // Device scalars the payload captures: extra 0-d inputs.
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(op.getRegion(), captured);
    SmallVector<Value> extra;
    for (Value v : captured)
      if (onDevice(v))
        extra.push_back(v);
    if (!changed && extra.empty())
      return;
    unsigned numInputs = inputs.size();
    for (Value v : extra) {
      inputs.push_back(materialize(v));
      maps.insert(maps.begin() + inputs.size() - 1, broadcast);
    }
    OpBuilder b(op);
    auto rebuilt = b.create<linalg::GenericOp>(
        op.getLoc(), op.getResultTypes(), inputs, op.getOutputs(), maps,
        op.getIteratorTypesArray());
    rebuilt->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rebuilt.getRegion().takeBody(op.getRegion());
    Block &payload = rebuilt.getRegion().front();
    for (auto [i, v] : llvm::enumerate(extra)) {
      BlockArgument arg =
          payload.insertArgument(numInputs + i, v.getType(), v.getLoc());
      v.replaceUsesWithIf(arg, [&](OpOperand &use) {
        return rebuilt->isProperAncestor(use.getOwner());
      });
    }
    op->replaceAllUsesWith(rebuilt->getResults());
    op.erase();
  }

  Block &body;
  llvm::DenseMap<Value, bool> deviceMemo;
  llvm::DenseMap<Value, Value> materialized;
};

/// Whether every use of `arg` (a rank-0 tensor argument) is a
/// `tensor.extract` in host code: not in the payload of a linalg op, not in
/// a kernel built at tensor level (GPUAttention.h: a gpu.launch).
bool onlyReadOnHost(BlockArgument arg) {
  auto type = dyn_cast<RankedTensorType>(arg.getType());
  if (!type || type.getRank() != 0 || arg.use_empty())
    return false;
  return llvm::all_of(arg.getUsers(), [](Operation *user) {
    return isa<tensor::ExtractOp>(user) &&
           !user->getParentOfType<linalg::LinalgOp>() &&
           !user->getParentOfType<gpu::LaunchOp>();
  });
}

struct BTScalarsToKernelsPass
    : bt::impl::BTScalarsToKernelsBase<BTScalarsToKernelsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp fn) {
      if (fn.isExternal())
        return;
      ScalarsToKernels(fn.getBody().front()).run();
      // The scalars left to the host code: passed by value (HostScalars.h).
      if (!fn.isPublic())
        return;
      for (BlockArgument arg : fn.getArguments())
        if (onlyReadOnHost(arg))
          fn.setArgAttr(arg.getArgNumber(), bt::kHostScalarAttrName,
                        UnitAttr::get(fn.getContext()));
    });
  }
};

} // namespace
