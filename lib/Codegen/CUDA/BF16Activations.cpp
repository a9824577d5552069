//===- BF16Activations.cpp - activations between kernels in bf16 ----------===//
//
// bt-bf16-activations (CUDA/Passes.td): the f32 result of a bf16 GEMM's
// elementwise epilogue that only other kernels read — in the GPT-NeoX layers
// the residual stream between layers and the rotated queries and keys — is
// written in bf16 (rounded once, to nearest even, at the end of the kernel's
// body), and its readers load bf16 and extend it exactly, computing in f32
// as before. Half the bytes each such activation moves through global memory
// (issue 13 item 2: "activations in bf16, statistics in fp32";
// docs/codegen-cuda.md, "bf16").
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/BF16.h"
#include "bt/Codegen/CUDA/BF16Readers.h"
#include "bt/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"

namespace bt {
#define GEN_PASS_DEF_BTBF16ACTIVATIONS
#include "bt/Codegen/CUDA/Passes.h.inc"
} // namespace bt

using namespace mlir;

namespace {

/// Whether `v` is a bf16 GEMM product (the rounding bt-bf16-gemm-outputs
/// marks), directly or through reshapes and slices.
bool isBF16GemmProduct(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (bt::codegen::isElementView(def)) {
      v = def->getOperand(0);
      continue;
    }
    return def->hasAttr(bt::codegen::kBF16GemmOutputAttr);
  }
  return false;
}

/// Whether `generic` is the epilogue of a bf16 GEMM: one of its inputs is a
/// bf16 GEMM product. In the GPT-NeoX layers: the residual add (attention
/// and MLP outputs plus the layer input: the layer's output) and the rotary
/// embeddings of the query and the key (of the QKV product; a key that goes
/// into a KV cache is rounded by the cache's append, not here). Other
/// elementwise kernels
/// keep f32 outputs (the stack inputs: embeddings, prefix vectors; the
/// rotary tables).
bool isBF16GemmEpilogue(linalg::GenericOp generic) {
  return llvm::any_of(generic.getDpsInputs(), isBF16GemmProduct);
}

/// Whether result `i` of `generic` is an activation this pass stores in
/// bf16: an f32 tensor written by an all-parallel generic on tensors into a
/// `tensor.empty` its body does not read, not a bf16 GEMM's rounding or C
/// (bt-bf16-gemm-outputs), read only by generics and element reads
/// (collectBF16Readers, at least one) none of which computes a function
/// result. Fills `views` and `inputs` with its readers.
bool isStoredActivation(linalg::GenericOp generic, unsigned i,
                        SmallVectorImpl<Operation *> &views,
                        SmallVectorImpl<OpOperand *> &inputs) {
  Value result = generic->getResult(i);
  if (!cast<RankedTensorType>(result.getType()).getElementType().isF32())
    return false;
  OpOperand *init = generic.getDpsInitOperand(i);
  if (!init->get().getDefiningOp<tensor::EmptyOp>() ||
      generic.payloadUsesValueFromOperand(init))
    return false;
  if (!bt::codegen::collectBF16Readers(result, views, inputs) || inputs.empty())
    return false;
  return llvm::none_of(inputs, [](OpOperand *input) {
    return bt::codegen::computesFunctionResult(input->getOwner());
  });
}

/// Makes result `i` of `generic` bf16: a bf16 `tensor.empty` of the same
/// sizes as its init, the init's block argument bf16 (unused), and the
/// yielded value rounded (roundToBF16) right before the yield.
void narrowResult(linalg::GenericOp generic, unsigned i) {
  OpOperand *init = generic.getDpsInitOperand(i);
  auto empty = init->get().getDefiningOp<tensor::EmptyOp>();
  OpBuilder b(generic);
  auto narrowType = bt::codegen::withBF16(empty.getResult());
  Value narrowInit = b.create<tensor::EmptyOp>(
      empty.getLoc(), narrowType.getShape(), narrowType.getElementType(),
      empty.getDynamicSizes());
  init->set(narrowInit);
  generic.getMatchingBlockArgument(init).setType(b.getBF16Type());
  generic->getResult(i).setType(narrowType);
  auto yield = cast<linalg::YieldOp>(generic.getBody()->getTerminator());
  OpBuilder body(yield);
  yield->setOperand(i, bt::codegen::roundToBF16(body, yield.getLoc(),
                                                yield->getOperand(i)));
  if (empty->use_empty())
    empty->erase();
}

struct BF16ActivationsPass
    : public bt::impl::BTBF16ActivationsBase<BF16ActivationsPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp generic) {
      if (generic.hasPureTensorSemantics() &&
          !generic->hasAttr(bt::codegen::kBF16GemmOutputAttr) &&
          !generic->hasAttr(bt::codegen::kBF16GemmInitAttr) &&
          generic.getNumParallelLoops() == generic.getNumLoops() &&
          isBF16GemmEpilogue(generic))
        generics.push_back(generic);
    });
    for (linalg::GenericOp generic : generics) {
      for (unsigned i = 0, e = generic.getNumDpsInits(); i < e; ++i) {
        SmallVector<Operation *> views;
        SmallVector<OpOperand *> inputs;
        if (!isStoredActivation(generic, i, views, inputs))
          continue;
        narrowResult(generic, i);
        bt::codegen::readAsBF16(views, inputs);
      }
    }
  }
};

} // namespace
