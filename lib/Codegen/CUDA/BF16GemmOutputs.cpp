//===- BF16GemmOutputs.cpp - bf16 GEMM products inside the layers ---------===//
//
// bt-bf16-gemm-outputs (CUDA/Passes.td): a bf16 GEMM (bf16 inputs, f32
// accumulation) into a zero fill or a bias broadcast whose product only
// elementwise kernels and the dedicated kernels' element reads consume is
// rounded to bf16 once (the bias, as cuBLAS's C, rounded to bf16 too), and
// the readers load the bf16 product and extend it; bt-gemm-to-blas then has
// cuBLAS write the bf16 product itself (cublasGemmEx with a CUDA_R_16BF C).
// Half the bytes written by the GEMM and read by its readers (issue 13 item
// 2, docs/codegen-cuda.md "bf16").
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/BF16.h"
#include "bt/Codegen/CUDA/BF16Readers.h"
#include "bt/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace bt {
#define GEN_PASS_DEF_BTBF16GEMMOUTPUTS
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;
using bt::codegen::collectBF16Readers;
using bt::codegen::computesFunctionResult;
using bt::codegen::extendBF16;
using bt::codegen::withBF16;
using bt::codegen::roundTensorToBF16;
using bt::codegen::roundToBF16;

namespace {

/// Whether `init` is a `linalg.fill` of +0.0 or -0.0 (the init of a
/// bt.linear whose bias an elementwise consumer adds, or of a GEMM without
/// bias).
bool isZeroFill(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  if (!fill)
    return false;
  auto cst = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
  auto value = cst ? dyn_cast<FloatAttr>(cst.getValue()) : FloatAttr();
  return value && value.getValue().isZero();
}

/// The `linalg.broadcast` of an f32 vector `[N]` over the rows of `[M, N]`
/// that is `init` (the bias of a bt.linear that the GEMM adds: cuBLAS's C
/// with beta = 1), or null. CSE may have merged equal broadcasts of GEMMs
/// with the same bias and shape (the token decoder's prefix step and its
/// later steps when P = 1): roundBias gives the GEMM its own.
linalg::BroadcastOp biasBroadcast(Value init) {
  auto broadcast = init.getDefiningOp<linalg::BroadcastOp>();
  if (!broadcast || !broadcast.hasPureTensorSemantics() ||
      broadcast.getDimensions() != ArrayRef<int64_t>{0})
    return nullptr;
  auto in = cast<RankedTensorType>(broadcast.getInput().getType());
  if (in.getRank() != 1 || !in.getElementType().isF32())
    return nullptr;
  return broadcast;
}

/// Whether `op` is a bf16 GEMM (bt-bf16-gemms: bf16 [M, K] and weight, f32
/// [M, N] result) on tensors into a zero fill or a bias (biasBroadcast).
bool isBF16Gemm(Operation *op) {
  if (!isa<linalg::MatmulTransposeBOp, linalg::MatmulOp>(op))
    return false;
  auto gemm = cast<linalg::LinalgOp>(op);
  if (!gemm.hasPureTensorSemantics())
    return false;
  auto elementOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  };
  Value init = op->getOperand(2);
  return elementOf(op->getOperand(0)).isBF16() &&
         elementOf(op->getOperand(1)).isBF16() &&
         elementOf(op->getResult(0)).isF32() &&
         (isZeroFill(init) || biasBroadcast(init));
}

/// The bias broadcast `broadcast`, `gemm`'s init, replaced for `gemm` by a
/// generic marked `bt.bf16_gemm_init` that broadcasts the bias rounded to
/// bf16 (as f32 values, exactly): cuBLAS adds a bf16 C. bt-gemm-to-blas
/// makes it write the bf16 buffer cuBLAS reads and writes. Other users of
/// the broadcast keep it.
void roundBias(Operation *gemm, linalg::BroadcastOp broadcast) {
  OpBuilder b(broadcast);
  Location l = broadcast.getLoc();
  MLIRContext *ctx = b.getContext();
  Value init = broadcast.getInit();
  SmallVector<AffineMap> maps = {
      AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx),
      AffineMap::getMultiDimIdentityMap(2, ctx)};
  auto generic = b.create<linalg::GenericOp>(
      l, TypeRange{init.getType()}, ValueRange{broadcast.getInput()},
      ValueRange{init}, maps,
      SmallVector<utils::IteratorType>(2, utils::IteratorType::parallel),
      [](OpBuilder &nb, Location nl, ValueRange a) {
        nb.create<linalg::YieldOp>(
            nl, extendBF16(nb, nl, roundToBF16(nb, nl, a[0])));
      });
  generic->setAttr(bt::codegen::kBF16GemmInitAttr, b.getUnitAttr());
  gemm->setOperand(2, generic.getResult(0));
  if (broadcast->use_empty())
    broadcast.erase();
}

/// Rounds `gemm`'s product to bf16 right after it (a generic marked
/// `bt.bf16_gemm_output`, which bt-gemm-to-blas folds into the cuBLAS call)
/// and makes every use of the product use the rounded tensor instead.
void roundProduct(Operation *gemm) {
  Value product = gemm->getResult(0);
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : product.getUses())
    uses.push_back(&use);
  OpBuilder b(gemm->getContext());
  b.setInsertionPointAfter(gemm);
  Value rounded = roundTensorToBF16(b, gemm->getLoc(), product);
  rounded.getDefiningOp()->setAttr(bt::codegen::kBF16GemmOutputAttr,
                                   b.getUnitAttr());
  for (OpOperand *use : uses)
    use->set(rounded);
}

/// Rounds `gemm`'s product to bf16 (roundProduct), and makes its readers
/// (`views` and `inputs` of collectBF16Readers) read it in bf16 and extend
/// it exactly, so they compute on the same f32 values as before.
void narrow(Operation *gemm, ArrayRef<Operation *> views,
            ArrayRef<OpOperand *> inputs) {
  roundProduct(gemm);
  bt::codegen::readAsBF16(views, inputs);
}

/// The sampled logits of a decode entry (decode_tokens' `step_logits`
/// [B, L_B, V], a vanilla decode_step's `logits` [B, V]): the LM-head
/// products, each read by `bt.sample`, and the tensors that hold them on
/// their way to the function's results — `tensor.insert_slice`s into a
/// `tensor.empty`, carried through `scf.for` iter_args, returned.
struct SampledLogits {
  llvm::SetVector<Value> values;      // every tensor of the network
  SmallVector<Operation *> products;  // the GEMMs whose results are in it
};

/// Adds to `work` the values tied to `v` through an `scf.for`: its init, its
/// region iter_arg, the yielded value and the loop's result.
void tieLoop(scf::ForOp loop, unsigned i, SmallVectorImpl<Value> &work) {
  work.push_back(loop.getInitArgs()[i]);
  work.push_back(loop.getRegionIterArgs()[i]);
  work.push_back(loop.getYieldedValues()[i]);
  work.push_back(loop.getResult(i));
}

/// The network of `product` (a bf16 GEMM's result) as SampledLogits, or
/// nullopt when a value of it is used or defined otherwise, when a product
/// of it is not a bf16 GEMM into a zero fill, or when no `bt.sample` reads
/// it (eval's logits, prefill's: not sampled on the device, kept f32).
std::optional<SampledLogits> sampledLogits(Value product) {
  SampledLogits n;
  SmallVector<Value> work = {product};
  bool sampled = false;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!n.values.insert(v))
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp());
      if (!loop || arg.getArgNumber() < loop.getNumInductionVars())
        return std::nullopt;
      tieLoop(loop, arg.getArgNumber() - loop.getNumInductionVars(), work);
    } else {
      Operation *def = v.getDefiningOp();
      if (auto loop = dyn_cast<scf::ForOp>(def)) {
        tieLoop(loop, cast<OpResult>(v).getResultNumber(), work);
      } else if (auto insert = dyn_cast<tensor::InsertSliceOp>(def)) {
        work.push_back(insert.getSource());
        work.push_back(insert.getDest());
      } else if (isBF16Gemm(def) && isZeroFill(def->getOperand(2))) {
        n.products.push_back(def);
      } else if (!isa<tensor::EmptyOp>(def)) {
        return std::nullopt;
      }
    }
    const bool isProduct = v.getDefiningOp() && isBF16Gemm(v.getDefiningOp());
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (isa<tensor::DimOp>(user))
        continue;
      // A result of an entry point; a function that is called keeps its
      // result types (its callers expect them).
      if (isa<func::ReturnOp>(user)) {
        auto fn = user->getParentOfType<func::FuncOp>();
        if (!fn || !SymbolTable::symbolKnownUseEmpty(
                       fn, fn->getParentOfType<ModuleOp>()))
          return std::nullopt;
        continue;
      }
      if (isa<bt::SampleOp>(user) && isProduct) {
        sampled = true;
        continue;
      }
      if (auto insert = dyn_cast<tensor::InsertSliceOp>(user)) {
        work.push_back(insert.getResult());
        continue;
      }
      if (auto yield = dyn_cast<scf::YieldOp>(user)) {
        auto loop = dyn_cast<scf::ForOp>(yield->getParentOp());
        if (!loop)
          return std::nullopt;
        tieLoop(loop, use.getOperandNumber(), work);
        continue;
      }
      if (auto loop = dyn_cast<scf::ForOp>(user)) {
        if (use.getOperandNumber() < loop.getNumControlOperands())
          return std::nullopt;
        tieLoop(loop, use.getOperandNumber() - loop.getNumControlOperands(),
                work);
        continue;
      }
      return std::nullopt;
    }
  }
  // An insert_slice reads its source only as an element copy: a product
  // must not be another network's container (it is inserted or returned).
  for (Operation *gemm : n.products)
    for (OpOperand &use : gemm->getResult(0).getUses())
      if (auto insert = dyn_cast<tensor::InsertSliceOp>(use.getOwner()))
        if (use.get() == insert.getDest())
          return std::nullopt;
  if (!sampled)
    return std::nullopt;
  return n;
}

/// Rounds every product of `n` to bf16 right after its GEMM (a generic
/// marked `bt.bf16_gemm_output`: cuBLAS writes the bf16 product), and gives
/// every other tensor of the network bf16 elements, so that the sampler and
/// the entry's result read the rounded logits. Updates the function types.
void narrowSampledLogits(SampledLogits &n) {
  llvm::SmallPtrSet<Operation *, 4> funcs;
  for (Value v : n.values)
    if (!llvm::is_contained(n.products, v.getDefiningOp()))
      v.setType(withBF16(v));
  for (Operation *gemm : n.products) {
    roundProduct(gemm);
    funcs.insert(gemm->getParentOfType<func::FuncOp>());
  }
  for (Operation *op : funcs) {
    auto fn = cast<func::FuncOp>(op);
    fn.walk([&](func::ReturnOp ret) {
      fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(),
                                   ret.getOperandTypes()));
    });
  }
}

/// Whether `use` is the bias a generic marked `bt.bf16_gemm_init` reads
/// (roundBias: its one input).
bool isBF16BiasInitUse(OpOperand &use) {
  auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
  return generic && generic->hasAttr(bt::codegen::kBF16GemmInitAttr) &&
         generic.getNumDpsInputs() == 1 && generic.isDpsInput(&use);
}

/// The parameters `[N]` that, in every function, only bias inits
/// (bt.bf16_gemm_init) read become bf16 arguments: the runtime rounds them
/// once at upload (param_dtypes), as it does the GEMM weights, and each
/// init broadcasts the bf16 bias extended exactly — the values it
/// broadcast before (bf16(b)), so bt-gemm-to-blas can hand the bias vector
/// to a GEMM epilogue (cuBLASLt) instead of a broadcast C.
void narrowBiasParameters(ModuleOp module) {
  for (SmallVector<BlockArgument> &args :
       bt::codegen::parametersUsedOnlyBy(module, 1, isBF16BiasInitUse)) {
    for (BlockArgument arg : args) {
      arg.setType(withBF16(arg));
      SmallVector<linalg::GenericOp> inits;
      for (Operation *user : arg.getUsers())
        inits.push_back(cast<linalg::GenericOp>(user));
      for (linalg::GenericOp init : inits) {
        OpBuilder b(init);
        auto next = b.create<linalg::GenericOp>(
            init.getLoc(), init.getResultTypes(), init.getDpsInputs(),
            init.getDpsInits(), init.getIndexingMapsArray(),
            init.getIteratorTypesArray(),
            [](OpBuilder &nb, Location nl, ValueRange a) {
              nb.create<linalg::YieldOp>(nl, extendBF16(nb, nl, a[0]));
            });
        next->setAttr(bt::codegen::kBF16GemmInitAttr, b.getUnitAttr());
        init->replaceAllUsesWith(next);
        init.erase();
      }
    }
  }
  for (auto fn : module.getOps<func::FuncOp>())
    if (!fn.isExternal())
      fn.setFunctionType(FunctionType::get(fn.getContext(),
                                           fn.getBody().getArgumentTypes(),
                                           fn.getFunctionType().getResults()));
}

struct BF16GemmOutputsPass
    : public bt::impl::BTBF16GemmOutputsBase<BF16GemmOutputsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> gemms;
    getOperation().walk([&](Operation *op) {
      if (isBF16Gemm(op))
        gemms.push_back(op);
    });
    // The sampled logits first: a decode entry's LM-head products and the
    // step logits that hold them become bf16 together.
    llvm::SmallPtrSet<Operation *, 8> done;
    for (Operation *gemm : gemms) {
      if (done.contains(gemm))
        continue;
      std::optional<SampledLogits> logits = sampledLogits(gemm->getResult(0));
      if (!logits)
        continue;
      done.insert(logits->products.begin(), logits->products.end());
      narrowSampledLogits(*logits);
    }
    for (Operation *gemm : gemms) {
      if (done.contains(gemm))
        continue;
      SmallVector<Operation *> views;
      SmallVector<OpOperand *> inputs;
      if (!collectBF16Readers(gemm->getResult(0), views, inputs) ||
          inputs.empty())
        continue;
      // Logits stay f32 wherever the entry point returns them unsampled
      // (eval's, through a masking generic).
      if (llvm::any_of(inputs, [](OpOperand *input) {
            return computesFunctionResult(input->getOwner());
          }))
        continue;
      if (linalg::BroadcastOp bias = biasBroadcast(gemm->getOperand(2)))
        roundBias(gemm, bias);
      narrow(gemm, views, inputs);
    }
    narrowBiasParameters(getOperation());
  }
};

} // namespace
