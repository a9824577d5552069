//===- BTInterfaces.td - bt op interfaces -------------------*- tablegen -*-===//

#ifndef BT_INTERFACES_TD
#define BT_INTERFACES_TD

include "mlir/IR/OpBase.td"

def BT_BlockLocalOpInterface : OpInterface<"BlockLocalOpInterface"> {
  let cppNamespace = "::bt";
  let description = [{
    Marks an op whose results are computed independently along a "block"
    dimension: for a block dimension `d` of the results, the slice
    `result[..., i, ...]` (index `i` on dim `d`) depends only on the slices
    `operand[..., i, ...]` of the operands that are partitioned along `d`
    (on the operand's own corresponding dim) and on the operands that are
    shared by all blocks (weights).

    This is the property of the token decoder that the paper exploits
    (§2.4: "each block is processed independently, relying on the context
    embedding as the sole source of information on previous input blocks";
    "the prefill stage [can] be skipped entirely — except for the most recent
    block"). `bt-eliminate-dead-prefill` pushes slices of a result through
    ops implementing this interface.

    Every result of the op must have the block dimension at the same index.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Returns true if result dimension `dim` is a block dimension
        of this op (results are independent along it).}],
      /*retTy=*/"bool",
      /*methodName=*/"isBlockLocalAlong",
      /*args=*/(ins "int64_t":$dim)>,
    InterfaceMethod<
      /*desc=*/[{For a block dimension `dim` of the results, returns the
        dimension of operand `operandIndex` that is partitioned the same way,
        or std::nullopt if that operand is shared by all blocks (e.g. a
        weight). Only valid when `isBlockLocalAlong(dim)`.}],
      /*retTy=*/"std::optional<int64_t>",
      /*methodName=*/"getOperandBlockDim",
      /*args=*/(ins "unsigned":$operandIndex, "int64_t":$dim)>,
  ];
}

def BT_KVCacheUserOpInterface : OpInterface<"KVCacheUserOpInterface"> {
  let cppNamespace = "::bt";
  let description = [{
    Describes how an op uses its `!bt.kv_cache` operands, for
    `bt-verify-kv-lifetimes`: a *consuming* use ends the operand's lifetime
    (`bt.kv_append`, `bt.kv_release`, `bt.block_decoder` with a cache); a
    *reading* use requires the operand to be live and leaves it live
    (`bt.kv_attend`, `bt.kv_length`). Cache results of an op are new live
    values.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/"Returns true if the use of cache operand `operand` consumes it.",
      /*retTy=*/"bool",
      /*methodName=*/"consumesCache",
      /*args=*/(ins "::mlir::OpOperand &":$operand)>,
  ];
}

def BT_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::bt";
  let description = [{
    Declares the vector-Jacobian product (VJP) of an op, the rule of
    reverse-mode differentiation (`include/bt/Transforms/Autodiff.h`,
    `bt-generate-gradients`). Every op that can lie on a path from a
    parameter (`bt.param_ref`) to the loss of a training graph implements it:
    the bt layer-level ops (in ODS) and the upstream ops that `bt-decompose`
    and the importer emit (`tensor.extract_slice`, `tensor.concat`,
    `tensor.collapse_shape`, `arith.addf`, ...; external models registered by
    `bt::registerAutodiffInterfaces`). An op without the interface on such a
    path is an error ("op 'x' has no vector-Jacobian rule"), never a silent
    zero gradient.

    `buildVJP` is called once per op during the backward sweep, with the
    builder's insertion point where the backward code goes (after the whole
    forward computation, so every forward value may be read):

    - `resultGrads` has one entry per result: the gradient of the loss with
      respect to that result (same type as the result), or a null Value when
      no gradient flows into it (treated as zero). At least one is non-null.
    - On success `operandGrads` holds one entry per operand: the gradient
      with respect to that operand (type equal to the operand's, or
      cast-compatible: static vs dynamic dims), or null for an operand that
      is not differentiable (ids, masks, positions, sizes). A rule never
      returns null for a floating-point operand it can differentiate; a
      float operand it cannot handle is a failure with a diagnostic.
    - The rule only creates ops (it does not modify or erase the forward);
      unused gradients are removed as dead code by the caller.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Builds the gradients of the operands from the gradients of
        the results (see the interface description). Returns failure, after
        emitting a diagnostic, if the op's configuration is not supported.}],
      /*retTy=*/"::mlir::LogicalResult",
      /*methodName=*/"buildVJP",
      /*args=*/(ins "::mlir::OpBuilder &":$builder,
                    "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
                    "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // BT_INTERFACES_TD
