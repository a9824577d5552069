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

#endif // BT_INTERFACES_TD
