//===- BTAttrs.td - bt attributes and enums -----------------*- tablegen -*-===//

#ifndef BT_ATTRS_TD
#define BT_ATTRS_TD

include "bt/Dialect/BT/IR/BTDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def BT_CacheScope : I32EnumAttr<"CacheScope", "scope of a KV cache", [
    I32EnumAttrCase<"global", 0>,
    I32EnumAttrCase<"local", 1>
  ]> {
  let cppNamespace = "::bt";
  let genSpecializedAttr = 0;
}

def BT_TokenDecoderStrategy : I32EnumAttr<"TokenDecoderStrategy",
    "how the token decoder consumes the context embedding", [
    // Paper §2.4 / appendix 'Token decoder methods': the context embedding is
    // projected into P prefix vectors that the token decoder attends to.
    I32EnumAttrCase<"prefix", 0>,
    // MEGABYTE (Yu et al. 2023): the context embedding is projected into L_B
    // vectors added to the token embeddings at each input position.
    I32EnumAttrCase<"summation", 1>
  ]> {
  let cppNamespace = "::bt";
  let genSpecializedAttr = 0;
}

def BT_TokenDecoderStrategyAttr : EnumAttr<BT_Dialect, BT_TokenDecoderStrategy,
                                           "strategy"> {
  let assemblyFormat = "$value";
}

//===----------------------------------------------------------------------===//
// #bt.neox: the architecture of one GPT-NeoX stack
//===----------------------------------------------------------------------===//

def BT_NeoXConfigAttr : AttrDef<BT_Dialect, "NeoXConfig"> {
  let mnemonic = "neox";
  let summary = "Architecture of a GPT-NeoX decoder stack";
  let description = [{
    The hyper-parameters of a GPT-NeoX stack as used by the Block Transformer
    block decoder and token decoder (paper appendix 'Experimental settings',
    official `model/block_decoder/gpt_neo_x.py`, `model/token_decoder/gpt_neo_x.py`,
    HF `GPTNeoXConfig`): parallel residual `x + attn(LN1 x) + mlp(LN2 x)`,
    exact-erf GELU, LayerNorm with `eps`, partial rotary embedding on the first
    `rotary_dims` dims of each head (NeoX rotate-half) with base `rotary_base`,
    fused QKV projection with per-head interleaved rows `[H, 3, hd]`, and a
    final LayerNorm.

    | field | meaning | constraint |
    |---|---|---|
    | hidden | model width (D or T) | = heads · head_dim |
    | layers | number of layers | ≥ 1 |
    | heads | attention heads H | ≥ 1 |
    | head_dim | hd | ≥ 1 |
    | intermediate | MLP width (official autofill: 4 · hidden) | ≥ 1 |
    | rotary_dims | dims rotated per head (rotary_pct · hd) | even, ≤ head_dim |
    | rotary_base | RoPE base θ (10000) | > 0 |
    | eps | LayerNorm epsilon (1e-5) | > 0 |

    Example:
    ```mlir
    #bt.neox<hidden = 64, layers = 2, heads = 2, head_dim = 32,
             intermediate = 256, rotary_dims = 8, rotary_base = 10000.0,
             eps = 1.0e-05>
    ```
  }];
  let parameters = (ins
    "int64_t":$hidden,
    "int64_t":$layers,
    "int64_t":$heads,
    "int64_t":$headDim,
    "int64_t":$intermediate,
    "int64_t":$rotaryDims,
    APFloatParameter<"RoPE base">:$rotaryBase,
    APFloatParameter<"LayerNorm epsilon">:$eps
  );
  let hasCustomAssemblyFormat = 1;
  let builders = [
    AttrBuilder<(ins "int64_t":$hidden, "int64_t":$layers, "int64_t":$heads,
                     "int64_t":$intermediate, "int64_t":$rotaryDims,
                     "double":$rotaryBase, "double":$eps), [{
      return $_get($_ctxt, hidden, layers, heads,
                   heads > 0 ? hidden / heads : 0, intermediate, rotaryDims,
                   ::llvm::APFloat(rotaryBase), ::llvm::APFloat(eps));
    }]>
  ];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The attention scale 1/sqrt(head_dim) used by GPT-NeoX.
    double getAttentionScale() const;
    double getRotaryBaseValue() const { return getRotaryBase().convertToDouble(); }
    double getEpsValue() const { return getEps().convertToDouble(); }
  }];
}

#endif // BT_ATTRS_TD
