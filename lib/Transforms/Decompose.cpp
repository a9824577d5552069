//===- Decompose.cpp - bt-decompose ----------------------------------------===//
//
// Rewrites the model-level ops (bt.embedder, bt.block_decoder,
// bt.token_decoder, bt.lm_head) into layer-level bt ops plus upstream tensor
// and arith ops. The exact output form is the contract for the lowering and
// is documented in Passes.td; the numerics follow the official forward
// (itsnamgyu/block-transformer @ 17842dd on HF transformers 4.39.3
// GPT-NeoX):
//
// - embedder: lookup + collapse (official `model/embedder/lookup.py`, concat),
//   or lookup + one bt.linear per kernel position, summed (projection_layer);
// - GPT-NeoX layer: parallel residual, summed as HF does,
//   `mlp_output + attn_output + hidden_states` = (m + a) + x;
// - token decoder: official `BaseTokenDecoder._adapt_forward_inputs_for_prefix`
//   / `_for_summation` with the last input token discarded
//   (`discard_redundant_tokens`), then `hidden[:, P-1:]` for the prefix
//   strategy (`redundant_output_prefix_length = P - 1`).
//
// Parameter names come from the dialect (bt::getNeoXStackParams,
// bt::getTokenDecoderParams) and are not spelled here.
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Transforms/Decompose.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/TypeSwitch.h"

namespace bt {
#define GEN_PASS_DEF_BTDECOMPOSE
#include "bt/Transforms/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

/// Number of tensors per layer in the list of bt::getNeoXStackParams, and the
/// index of each inside a layer's group (the order documented there).
enum NeoXLayerParam : unsigned {
  kLn1Weight = 0,
  kLn1Bias,
  kLn2Weight,
  kLn2Bias,
  kQkvWeight,
  kQkvBias,
  kDenseWeight,
  kDenseBias,
  kH4hWeight,
  kH4hBias,
  k4hhWeight,
  k4hhBias,
  kParamsPerLayer
};

/// `a.b.c.weight` -> `a.b.c`: the module path of a parameter (or of a module).
StringRef parentModule(StringRef name) { return name.rsplit('.').first; }

RankedTensorType tensorType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

/// `type` with its last dimension replaced by `n`.
RankedTensorType withLastDim(RankedTensorType type, int64_t n) {
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = n;
  return RankedTensorType::get(shape, type.getElementType());
}

/// How a GPT-NeoX stack attends.
enum class AttentionKind {
  Global, // bt.attention over [B, S, H, hd]
  Local,  // bt.local_attention over [B, N, S, H, hd]
  Cached  // bt.kv_append + bt.kv_attend on a global cache
};

/// Emits the decomposition of one model-level op. All created ops get the
/// location `"<module path>"(loc of the model op)`.
class Decomposer {
public:
  Decomposer(Operation *op, SymbolTableCollection &tables)
      : op(op), b(op), tables(tables) {}

  LogicalResult decompose(EmbedderOp embedder);
  /// The projection-layer embedder's Conv1d on the lookup `[B, N_blk, L_B, E]`
  /// -> `[B, N_blk, D]`.
  FailureOr<Value> projectBlocks(EmbedderOp embedder, Value lookup);
  LogicalResult decompose(BlockDecoderOp decoder);
  LogicalResult decompose(TokenDecoderOp decoder);
  LogicalResult decompose(TokenDecoderStepOp step);
  LogicalResult decompose(LMHeadOp head);

private:
  Location loc(StringRef name) {
    return NameLoc::get(b.getStringAttr(name), op->getLoc());
  }

  /// A `bt.param_ref` of the declared parameter `name`, located at its module.
  FailureOr<Value> param(StringRef name);

  /// Casts `v` to `type` when they differ (only in static vs. dynamic dims).
  Value castTo(Value v, Type type, Location at) {
    if (v.getType() == type)
      return v;
    return b.create<tensor::CastOp>(at, type, v);
  }

  /// 1-D `tensor<S x i64>` positions `offset + (0 .. S-1)`; S is dim `dim` of
  /// `like`. A constant when S is static and there is no offset, otherwise a
  /// tensor.generate.
  Value positions(Value like, int64_t dim, Value offset, Location at);

  /// A tensor of shape `[dims 0, 1 of like] + [n]` filled with `value`, of
  /// element type `elt`: an arith.constant when static, else a tensor.splat.
  Value filled(Value like, int64_t n, Type elt, int64_t value, Location at);

  /// `v[..., 0 : n]` along its last dimension.
  Value sliceLast(Value v, int64_t offset, int64_t n, Location at);

  /// A GPT-NeoX stack (layers + final LayerNorm) over `x` `[..., S, C]` with
  /// the parameters `specs` (the list of bt::getNeoXStackParams). Returns the
  /// final-LayerNorm output; `cache` (Cached only) is replaced by the result
  /// of the last append.
  FailureOr<Value> stack(ArrayRef<ParamSpec> specs, NeoXConfigAttr config,
                         Value x, Value pos, Value keyMask, AttentionKind kind,
                         Value &cache);

  Operation *op;
  OpBuilder b;
  SymbolTableCollection &tables;
};

FailureOr<Value> Decomposer::param(StringRef name) {
  ParamOp decl = lookupParam(op, tables, name);
  if (!decl)
    return op->emitOpError() << "cannot be decomposed: parameter @\"" << name
                             << "\" is not declared";
  return b
      .create<ParamRefOp>(loc(parentModule(name)), decl.getTensorType(), name)
      .getResult();
}

Value Decomposer::positions(Value like, int64_t dim, Value offset,
                            Location at) {
  Type i64 = b.getI64Type();
  int64_t s = tensorType(like).getDimSize(dim);
  if (!ShapedType::isDynamic(s) && !offset) {
    SmallVector<int64_t> values(s);
    for (int64_t i = 0; i < s; ++i)
      values[i] = i;
    auto type = RankedTensorType::get({s}, i64);
    return b.create<arith::ConstantOp>(
        at, cast<TypedAttr>(
                DenseElementsAttr::get(type, ArrayRef<int64_t>(values))));
  }
  SmallVector<Value> extents;
  if (ShapedType::isDynamic(s))
    extents.push_back(b.create<tensor::DimOp>(at, like, dim));
  auto type = RankedTensorType::get({s}, i64);
  return b.create<tensor::GenerateOp>(
      at, type, extents, [&](OpBuilder &nb, Location l, ValueRange ivs) {
        Value i = ivs.front();
        if (offset)
          i = nb.create<arith::AddIOp>(l, offset, i);
        Value p = nb.create<arith::IndexCastOp>(l, i64, i);
        nb.create<tensor::YieldOp>(l, p);
      });
}

Value Decomposer::filled(Value like, int64_t n, Type elt, int64_t value,
                         Location at) {
  ArrayRef<int64_t> shape = tensorType(like).getShape();
  auto type = RankedTensorType::get({shape[0], shape[1], n}, elt);
  TypedAttr scalar =
      b.getIntegerAttr(elt, APInt(elt.getIntOrFloatBitWidth(), value));
  if (type.hasStaticShape())
    return b.create<arith::ConstantOp>(
        at, cast<TypedAttr>(DenseElementsAttr::get(type, scalar)));
  Value c = b.create<arith::ConstantOp>(at, scalar);
  SmallVector<Value> dynamic;
  for (int64_t d = 0; d < 2; ++d)
    if (ShapedType::isDynamic(shape[d]))
      dynamic.push_back(b.create<tensor::DimOp>(at, like, d));
  return b.create<tensor::SplatOp>(at, c, type, dynamic);
}

Value Decomposer::sliceLast(Value v, int64_t offset, int64_t n, Location at) {
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, at, v);
  int64_t rank = sizes.size();
  SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
  offsets.back() = b.getIndexAttr(offset);
  sizes.back() = b.getIndexAttr(n);
  return b.create<tensor::ExtractSliceOp>(at, v, offsets, sizes, strides);
}

FailureOr<Value> Decomposer::stack(ArrayRef<ParamSpec> specs,
                                   NeoXConfigAttr config, Value x, Value pos,
                                   Value keyMask, AttentionKind kind,
                                   Value &cache) {
  int64_t layers = config.getLayers();
  assert(static_cast<int64_t>(specs.size()) == layers * kParamsPerLayer + 2 &&
         "unexpected GPT-NeoX parameter list");
  int64_t heads = config.getHeads(), headDim = config.getHeadDim();
  int64_t width = config.getHidden(), inter = config.getIntermediate();
  FloatAttr eps = b.getF64FloatAttr(config.getEpsValue());
  FloatAttr scale = b.getF64FloatAttr(config.getAttentionScale());
  FloatAttr base = b.getF64FloatAttr(config.getRotaryBaseValue());
  IntegerAttr rotaryDims = b.getI64IntegerAttr(config.getRotaryDims());
  RankedTensorType xType = tensorType(x);

  for (int64_t l = 0; l < layers; ++l) {
    ArrayRef<ParamSpec> p = specs.slice(l * kParamsPerLayer, kParamsPerLayer);
    SmallVector<Value, kParamsPerLayer> w;
    for (const ParamSpec &spec : p) {
      FailureOr<Value> ref = param(spec.name);
      if (failed(ref))
        return failure();
      w.push_back(*ref);
    }
    StringRef attnModule = parentModule(parentModule(p[kQkvWeight].name));
    StringRef layerModule = parentModule(attnModule);
    StringRef mlpModule = parentModule(parentModule(p[kH4hWeight].name));
    Location attnLoc = loc(attnModule);

    // Attention branch on input_layernorm(x).
    Value h1 = b.create<LayerNormOp>(loc(parentModule(p[kLn1Weight].name)),
                                     xType, x, w[kLn1Weight], w[kLn1Bias], eps);
    Value qkv = b.create<LinearOp>(loc(parentModule(p[kQkvWeight].name)),
                                   withLastDim(xType, 3 * width), h1,
                                   w[kQkvWeight], w[kQkvBias]);
    auto split = b.create<SplitQKVOp>(attnLoc, qkv, heads, headDim);
    Value q = split.getQ(), k = split.getK(), v = split.getV();
    if (config.getRotaryDims() > 0) {
      q = b.create<RotaryOp>(attnLoc, q.getType(), q, pos, rotaryDims, base);
      k = b.create<RotaryOp>(attnLoc, k.getType(), k, pos, rotaryDims, base);
    }
    Value attn;
    switch (kind) {
    case AttentionKind::Global:
      attn = b.create<AttentionOp>(attnLoc, q.getType(), q, k, v, keyMask,
                                   scale);
      break;
    case AttentionKind::Local:
      attn = b.create<LocalAttentionOp>(attnLoc, q.getType(), q, k, v, keyMask,
                                        scale);
      break;
    case AttentionKind::Cached:
      cache = b.create<KVAppendOp>(attnLoc, cache.getType(), cache,
                                   b.getI64IntegerAttr(l), k, v, keyMask);
      attn = b.create<KVAttendOp>(attnLoc, q.getType(), q, cache,
                                  b.getI64IntegerAttr(l), scale);
      break;
    }
    int64_t rank = tensorType(attn).getRank();
    SmallVector<ReassociationIndices> merge;
    for (int64_t d = 0; d < rank - 2; ++d)
      merge.push_back({d});
    merge.push_back({rank - 2, rank - 1});
    Value merged = b.create<tensor::CollapseShapeOp>(attnLoc, attn, merge);
    Value a = b.create<LinearOp>(loc(parentModule(p[kDenseWeight].name)),
                                 xType, merged, w[kDenseWeight],
                                 w[kDenseBias]);

    // MLP branch on post_attention_layernorm(x) (parallel residual).
    Value h2 = b.create<LayerNormOp>(loc(parentModule(p[kLn2Weight].name)),
                                     xType, x, w[kLn2Weight], w[kLn2Bias], eps);
    RankedTensorType interType = withLastDim(xType, inter);
    Value up = b.create<LinearOp>(loc(parentModule(p[kH4hWeight].name)),
                                  interType, h2, w[kH4hWeight], w[kH4hBias]);
    Value act = b.create<GeluOp>(loc((mlpModule + ".act").str()), interType, up);
    Value m = b.create<LinearOp>(loc(parentModule(p[k4hhWeight].name)), xType,
                                 act, w[k4hhWeight], w[k4hhBias]);

    // HF GPTNeoXLayer: `mlp_output + attn_output + hidden_states`.
    Location resLoc = loc(layerModule);
    Value sum = b.create<arith::AddFOp>(resLoc, m, a);
    x = b.create<arith::AddFOp>(resLoc, sum, x);
  }

  const ParamSpec &lnW = specs[layers * kParamsPerLayer];
  const ParamSpec &lnB = specs[layers * kParamsPerLayer + 1];
  FailureOr<Value> w = param(lnW.name), bias = param(lnB.name);
  if (failed(w) || failed(bias))
    return failure();
  return b
      .create<LayerNormOp>(loc(parentModule(lnW.name)), xType, x, *w, *bias,
                           eps)
      .getResult();
}

LogicalResult Decomposer::decompose(EmbedderOp embedder) {
  StringRef table = embedder.getTable();
  Location at = loc(parentModule(table));
  FailureOr<Value> t = param(table);
  if (failed(t))
    return failure();
  RankedTensorType ids = tensorType(embedder.getIds());
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(tensorType(*t).getDimSize(1));
  auto lookupType =
      RankedTensorType::get(shape, tensorType(*t).getElementType());
  Value lookup = b.create<EmbeddingLookupOp>(at, lookupType,
                                             embedder.getIds(), *t);
  Value blocks;
  if (embedder.getProjectionAttr()) {
    FailureOr<Value> proj = projectBlocks(embedder, lookup);
    if (failed(proj))
      return failure();
    blocks = *proj;
  } else {
    SmallVector<ReassociationIndices> concat{{0}, {1}, {2, 3}};
    blocks = b.create<tensor::CollapseShapeOp>(at, lookup, concat);
  }
  embedder.getResult().replaceAllUsesWith(
      castTo(blocks, embedder.getType(), at));
  embedder.erase();
  return success();
}

FailureOr<Value> Decomposer::projectBlocks(EmbedderOp embedder, Value lookup) {
  StringRef wName = embedder.getProjectionAttr().getValue();
  Location at = loc(parentModule(wName));
  FailureOr<Value> w = param(wName),
                   bias = param(embedder.getProjectionBiasAttr().getValue());
  if (failed(w) || failed(bias))
    return failure();
  // Conv1d(E -> D, kernel = stride = L_B) over one block:
  // block = bias + sum_k E(t_k) . W[:, :, k]^T, one bt.linear per kernel
  // position k on the slices lookup[:, :, k, :] [B, N_blk, E] and
  // W[:, :, k] [D, E] (summed in order k = 0 .. L_B-1, bias in the first).
  RankedTensorType wType = tensorType(*w);
  const int64_t d = wType.getDimSize(0), e = wType.getDimSize(1),
                lb = wType.getDimSize(2);
  RankedTensorType lt = tensorType(lookup);
  auto sliceType = RankedTensorType::get({lt.getDimSize(0), lt.getDimSize(1), e},
                                         lt.getElementType());
  auto outType = RankedTensorType::get({lt.getDimSize(0), lt.getDimSize(1), d},
                                       lt.getElementType());
  auto wkType = RankedTensorType::get({d, e}, wType.getElementType());
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, at, lookup);
  sizes[2] = b.getIndexAttr(1);
  SmallVector<OpFoldResult> ones(4, b.getIndexAttr(1));
  SmallVector<OpFoldResult> wOnes(3, b.getIndexAttr(1));
  Value sum;
  for (int64_t k = 0; k < lb; ++k) {
    SmallVector<OpFoldResult> offsets(4, b.getIndexAttr(0));
    offsets[2] = b.getIndexAttr(k);
    Value xk = b.create<tensor::ExtractSliceOp>(at, sliceType, lookup, offsets,
                                                sizes, ones);
    SmallVector<OpFoldResult> wOffsets = {b.getIndexAttr(0), b.getIndexAttr(0),
                                          b.getIndexAttr(k)};
    SmallVector<OpFoldResult> wSizes = {b.getIndexAttr(d), b.getIndexAttr(e),
                                        b.getIndexAttr(1)};
    Value wk = b.create<tensor::ExtractSliceOp>(at, wkType, *w, wOffsets,
                                                wSizes, wOnes);
    Value yk = b.create<LinearOp>(at, outType, xk, wk,
                                  k == 0 ? *bias : Value());
    sum = k == 0 ? yk : b.create<arith::AddFOp>(at, sum, yk).getResult();
  }
  return sum;
}

LogicalResult Decomposer::decompose(BlockDecoderOp decoder) {
  StringRef prefix = decoder.getParams();
  Location at = loc(prefix);
  Value x = decoder.getInput();
  Value cache = decoder.getCache();
  // RoPE positions continue after the cached blocks (HF: past_length of
  // layer 0). Without rotary dims there are none.
  Value pos;
  if (decoder.getConfig().getRotaryDims() > 0) {
    if (decoder.getPositions()) {
      pos = decoder.getPositions();
    } else {
      Value offset;
      if (cache)
        offset = b.create<KVLengthOp>(at, b.getIndexType(), cache,
                                      b.getI64IntegerAttr(0));
      pos = positions(x, 1, offset, at);
    }
  }
  FailureOr<Value> out = stack(
      getNeoXStackParams(prefix, decoder.getConfig()), decoder.getConfig(), x,
      pos, decoder.getMask(),
      cache ? AttentionKind::Cached : AttentionKind::Global, cache);
  if (failed(out))
    return failure();
  decoder.getResult().replaceAllUsesWith(*out);
  if (cache)
    decoder.getResultCache().replaceAllUsesWith(cache);
  decoder.erase();
  return success();
}

LogicalResult Decomposer::decompose(TokenDecoderOp decoder) {
  NeoXConfigAttr config = decoder.getConfig();
  Value ctx = decoder.getContextEmbedding();
  Value ids = decoder.getIds();
  Value mask = decoder.getMask();
  int64_t blockLength = tensorType(ids).getDimSize(2);
  int64_t p = decoder.getPrefixLength();
  bool summation = decoder.getStrategy() == TokenDecoderStrategy::summation;
  Location at = loc(decoder.getParams());

  // [embed_in, stack..., expansion weight, expansion bias].
  std::vector<ParamSpec> specs = getTokenDecoderParams(
      decoder.getParams(), config, tensorType(ctx).getDimSize(2), p);
  const ParamSpec &embedSpec = specs.front();
  const ParamSpec &expWSpec = specs[specs.size() - 2];
  const ParamSpec &expBSpec = specs.back();
  ArrayRef<ParamSpec> stackSpecs = ArrayRef<ParamSpec>(specs).slice(
      1, specs.size() - 3);
  Location embedLoc = loc(parentModule(embedSpec.name));

  // Checked before anything is created: the BOS id must index the table.
  int64_t bos = decoder.getBosTokenId();
  if (summation) {
    if (ParamOp decl = lookupParam(op, tables, embedSpec.name)) {
      int64_t vocab = decl.getTensorType().getDimSize(0);
      if (bos < 0 || bos >= vocab)
        return decoder.emitOpError()
               << "cannot be decomposed: bos_token_id (" << bos
               << ") is outside the token table @\"" << embedSpec.name
               << "\" of " << vocab << " rows";
    }
  }
  FailureOr<Value> expW = param(expWSpec.name), expB = param(expBSpec.name);
  if (failed(expW) || failed(expB))
    return failure();
  FailureOr<Value> table = param(embedSpec.name);
  if (failed(table))
    return failure();

  // The context embedding projected into P vectors [B, N, P, T].
  ArrayRef<int64_t> ctxShape = tensorType(ctx).getShape();
  Type elt = tensorType(ctx).getElementType();
  int64_t t = config.getHidden();
  auto projType =
      RankedTensorType::get({ctxShape[0], ctxShape[1], p, t}, elt);
  Value proj = b.create<PrefixProjectionOp>(
      loc(parentModule(expWSpec.name)), projType, ctx, *expW, *expB,
      b.getI64IntegerAttr(p));

  // Teacher-forced token inputs t_0 .. t_{L_B-2} (the last id is discarded).
  Value inputIds = blockLength > 1 ? sliceLast(ids, 0, blockLength - 1, at)
                                   : Value();
  // Summation: the BOS token takes the first input position.
  Type idElt = tensorType(ids).getElementType();
  if (summation) {
    Value bosIds = filled(ids, 1, idElt, bos, at);
    inputIds = inputIds ? b.create<tensor::ConcatOp>(
                              at, 2, ValueRange{bosIds, inputIds})
                              .getResult()
                        : bosIds;
  }
  Value input;
  if (inputIds) {
    SmallVector<int64_t> shape(tensorType(inputIds).getShape());
    shape.push_back(t);
    Value tok = b.create<EmbeddingLookupOp>(
        embedLoc, RankedTensorType::get(shape, elt), inputIds, *table);
    if (summation)
      // Official `inputs_embeds + expanded_block_embeddings`.
      input = b.create<arith::AddFOp>(at, tok, castTo(proj, tok.getType(), at));
    else
      input = b.create<tensor::ConcatOp>(at, 2, ValueRange{proj, tok});
  } else {
    input = proj;
  }

  // Key mask: the projected / BOS positions are always attended.
  Value keyMask;
  if (mask && blockLength > 1) {
    Type maskElt = tensorType(mask).getElementType();
    Value ones = filled(mask, summation ? 1 : p, maskElt, 1, at);
    keyMask = b.create<tensor::ConcatOp>(
        at, 2, ValueRange{ones, sliceLast(mask, 0, blockLength - 1, at)});
  }

  Value pos;
  if (config.getRotaryDims() > 0)
    pos = positions(input, 2, Value(), at);
  Value noCache;
  FailureOr<Value> hidden = stack(stackSpecs, config, input, pos, keyMask,
                                  AttentionKind::Local, noCache);
  if (failed(hidden))
    return failure();

  // Prefix: positions P-1 .. P+L_B-2 predict t_0 .. t_{L_B-1}.
  Value result = *hidden;
  if (!summation) {
    SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, at, result);
    SmallVector<OpFoldResult> offsets(4, b.getIndexAttr(0));
    SmallVector<OpFoldResult> strides(4, b.getIndexAttr(1));
    offsets[2] = b.getIndexAttr(p - 1);
    sizes[2] = b.getIndexAttr(blockLength);
    result = b.create<tensor::ExtractSliceOp>(at, result, offsets, sizes,
                                              strides);
  }
  decoder.getResult().replaceAllUsesWith(
      castTo(result, decoder.getType(), at));
  decoder.erase();
  return success();
}

LogicalResult Decomposer::decompose(TokenDecoderStepOp step) {
  std::string prefix = (step.getParams() + ".gpt_neox").str();
  NeoXConfigAttr config = step.getConfig();
  Value cache = step.getCache();
  Value pos = config.getRotaryDims() > 0 ? step.getPositions() : Value();
  FailureOr<Value> out =
      stack(getNeoXStackParams(prefix, config), config, step.getInput(), pos,
            /*keyMask=*/Value(), AttentionKind::Cached, cache);
  if (failed(out))
    return failure();
  step.getResult().replaceAllUsesWith(*out);
  step.getResultCache().replaceAllUsesWith(cache);
  step.erase();
  return success();
}

LogicalResult Decomposer::decompose(LMHeadOp head) {
  StringRef name = head.getWeight();
  FailureOr<Value> w = param(name);
  if (failed(w))
    return failure();
  Value logits = b.create<LinearOp>(loc(parentModule(name)), head.getType(),
                                    head.getHidden(), *w, Value());
  head.getResult().replaceAllUsesWith(logits);
  head.erase();
  return success();
}

} // namespace

LogicalResult bt::decomposeModelOps(Operation *root) {
  SmallVector<Operation *> ops;
  root->walk([&](Operation *op) {
    if (isa<EmbedderOp, BlockDecoderOp, TokenDecoderOp, TokenDecoderStepOp,
            LMHeadOp>(op))
      ops.push_back(op);
  });
  SymbolTableCollection tables;
  bool failedAny = false;
  for (Operation *op : ops) {
    Decomposer d(op, tables);
    LogicalResult r =
        llvm::TypeSwitch<Operation *, LogicalResult>(op)
            .Case<EmbedderOp, BlockDecoderOp, TokenDecoderOp,
                  TokenDecoderStepOp, LMHeadOp>(
                [&](auto concrete) { return d.decompose(concrete); });
    failedAny |= failed(r);
  }
  return success(!failedAny);
}

namespace {

struct DecomposePass : public bt::impl::BTDecomposeBase<DecomposePass> {
  void runOnOperation() override {
    if (failed(decomposeModelOps(getOperation())))
      signalPassFailure();
  }
};

} // namespace
