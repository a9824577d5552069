//===- GenerateEntryPoints.cpp - bt-generate-entry-points ------------------===//
//
// Derives the generation functions of docs/generation.md (prefill,
// decode_block, decode_tokens; vanilla prefill, decode_step) from the
// model-level forward that the importer builds. Everything about the model
// (tables, configs, parameter prefixes, strategy, prefix length) is read from
// the forward's ops; nothing is specific to one checkpoint.
//
//===----------------------------------------------------------------------===//

#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace bt {
#define GEN_PASS_DEF_BTGENERATEENTRYPOINTS
#include "bt/Transforms/Passes.h.inc"
} // namespace bt

using namespace mlir;
using namespace bt;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

/// `a.b.c.weight` -> `a.b.c`: the module path of a parameter.
StringRef parentModuleName(StringRef name) { return name.rsplit('.').first; }

/// The model read off the forward.
struct Model {
  func::FuncOp forward;
  EmbedderOp embedder;
  BlockDecoderOp blockDecoder;
  TokenDecoderOp tokenDecoder; // null for a vanilla GPT-NeoX
  LMHeadOp lmHead;

  bool isVanilla() { return !tokenDecoder; }
  Type elementType() {
    return cast<RankedTensorType>(embedder.getType()).getElementType();
  }
  int64_t blockLength() {
    return cast<RankedTensorType>(embedder.getIds().getType()).getDimSize(2);
  }
  int64_t blockWidth() { return blockDecoder.getConfig().getHidden(); }
  int64_t vocab() {
    return cast<RankedTensorType>(lmHead.getType()).getShape().back();
  }
};

/// Finds the forward: `eval`, else the first function with the three
/// model-level ops of a forward.
FailureOr<Model> findModel(ModuleOp module) {
  auto scan = [](func::FuncOp fn) {
    Model m;
    m.forward = fn;
    fn.walk([&](Operation *op) {
      if (auto e = dyn_cast<EmbedderOp>(op); e && !m.embedder)
        m.embedder = e;
      else if (auto d = dyn_cast<BlockDecoderOp>(op);
               d && !d.getCache() && !m.blockDecoder)
        m.blockDecoder = d;
      else if (auto t = dyn_cast<TokenDecoderOp>(op); t && !m.tokenDecoder)
        m.tokenDecoder = t;
      else if (auto h = dyn_cast<LMHeadOp>(op); h && !m.lmHead)
        m.lmHead = h;
    });
    return m;
  };
  func::FuncOp candidate = module.lookupSymbol<func::FuncOp>("eval");
  if (!candidate) {
    for (auto fn : module.getOps<func::FuncOp>()) {
      Model m = scan(fn);
      if (m.embedder && m.blockDecoder && m.lmHead) {
        candidate = fn;
        break;
      }
    }
  }
  if (!candidate)
    return module.emitError()
           << "bt-generate-entry-points: no model-level forward (a function "
              "'eval', or one with bt.embedder, bt.block_decoder and "
              "bt.lm_head)";
  Model m = scan(candidate);
  if (!m.embedder || !m.blockDecoder || !m.lmHead)
    return candidate.emitError()
           << "bt-generate-entry-points: the forward lacks a "
           << (!m.embedder       ? "bt.embedder"
               : !m.blockDecoder ? "bt.block_decoder (without cache)"
                                 : "bt.lm_head");
  if (m.isVanilla() && m.blockLength() != 1)
    return m.embedder.emitError()
           << "bt-generate-entry-points: a model without bt.token_decoder is "
              "a vanilla GPT-NeoX and must have L_B = 1, got "
           << m.blockLength();
  return m;
}

/// Builds the entry functions into the module.
class Generator {
public:
  /// `cacheElt`: the element type of the KV caches (null: the
  /// activations').
  Generator(ModuleOp module, Model model, Type cacheElt)
      : module(module), model(model), b(module.getContext()),
        ctx(module.getContext()), elt(model.elementType()),
        cacheElt(cacheElt ? cacheElt : elt), i64(b.getI64Type()) {}

  LogicalResult run();

private:
  struct Named {
    Type type;
    StringRef name;             // "" for a cache
    SmallVector<StringRef> dims;
  };

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type t) {
    return RankedTensorType::get(shape, t);
  }
  Location loc(StringRef name) { return NameLoc::get(b.getStringAttr(name)); }
  Value dim(Location l, Value v, int64_t d) {
    return b.create<tensor::DimOp>(l, v, d);
  }
  Value cidx(Location l, int64_t v) {
    return b.create<arith::ConstantIndexOp>(l, v);
  }
  /// `v[offsets][sizes]` with unit strides, of type `type` (rank-reducing
  /// when `type` drops unit dims).
  Value slice(Location l, RankedTensorType type, Value v,
              ArrayRef<OpFoldResult> offsets, ArrayRef<OpFoldResult> sizes) {
    SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
    return b.create<tensor::ExtractSliceOp>(l, type, v, offsets, sizes,
                                            strides);
  }
  Value insert(Location l, Value src, Value dst, ArrayRef<OpFoldResult> offsets,
               ArrayRef<OpFoldResult> sizes) {
    SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
    return b.create<tensor::InsertSliceOp>(l, src, dst, offsets, sizes,
                                           strides);
  }
  Value paramRef(Location l, StringRef name) {
    ParamOp decl = module.lookupSymbol<ParamOp>(name);
    return b.create<ParamRefOp>(l, decl.getTensorType(), name);
  }

  KVCacheType globalCacheType() {
    NeoXConfigAttr c = model.blockDecoder.getConfig();
    return KVCacheType::get(ctx, CacheScope::global, kDyn, c.getLayers(),
                            c.getHeads(), kDyn, c.getHeadDim(), cacheElt);
  }

  /// Creates `name(args) -> results` with bt.name / bt.dims on every tensor
  /// argument and result, and `bt.inout` / `bt.inout_arg` on the cache.
  func::FuncOp beginFunc(StringRef name, ArrayRef<Named> args,
                         ArrayRef<Named> results);

  /// `h[:, n - 1, :]` of `h` [B, n, W] as [B, W].
  Value lastRow(Location l, Value h);

  LogicalResult buildPrefill();
  LogicalResult buildDecodeBlock();
  LogicalResult buildDecodeTokens();
  LogicalResult buildVanillaPrefill();
  LogicalResult buildVanillaDecodeStep();

  ModuleOp module;
  Model model;
  OpBuilder b;
  MLIRContext *ctx;
  Type elt, cacheElt, i64;
};

func::FuncOp Generator::beginFunc(StringRef name, ArrayRef<Named> args,
                                  ArrayRef<Named> results) {
  SmallVector<Type> argTypes, resultTypes;
  for (const Named &a : args)
    argTypes.push_back(a.type);
  for (const Named &r : results)
    resultTypes.push_back(r.type);
  b.setInsertionPointToEnd(module.getBody());
  auto fn = b.create<func::FuncOp>(loc(name), name,
                                   b.getFunctionType(argTypes, resultTypes));
  auto dims = [&](const Named &n) {
    SmallVector<Attribute> d;
    for (StringRef s : n.dims)
      d.push_back(b.getStringAttr(s));
    return b.getArrayAttr(d);
  };
  for (auto [i, a] : llvm::enumerate(args)) {
    if (isa<KVCacheType>(a.type)) {
      fn.setArgAttr(i, bt::BTDialect::getNameAttrName(), b.getStringAttr("kv_cache"));
      fn.setArgAttr(i, bt::BTDialect::getInOutAttrName(), b.getUnitAttr());
      continue;
    }
    fn.setArgAttr(i, bt::BTDialect::getNameAttrName(), b.getStringAttr(a.name));
    fn.setArgAttr(i, bt::BTDialect::getDimsAttrName(), dims(a));
  }
  for (auto [i, r] : llvm::enumerate(results)) {
    if (isa<KVCacheType>(r.type)) {
      fn.setResultAttr(i, bt::BTDialect::getNameAttrName(), b.getStringAttr("kv_cache"));
      fn.setResultAttr(i, bt::BTDialect::getInOutArgAttrName(), b.getStringAttr("kv_cache"));
      continue;
    }
    fn.setResultAttr(i, bt::BTDialect::getNameAttrName(), b.getStringAttr(r.name));
    fn.setResultAttr(i, bt::BTDialect::getDimsAttrName(), dims(r));
  }
  b.setInsertionPointToStart(fn.addEntryBlock());
  return fn;
}

Value Generator::lastRow(Location l, Value h) {
  auto ht = cast<RankedTensorType>(h.getType());
  int64_t w = ht.getDimSize(2);
  OpFoldResult row;
  if (ht.isDynamicDim(1))
    row = b.create<arith::SubIOp>(l, dim(l, h, 1), cidx(l, 1)).getResult();
  else
    row = b.getIndexAttr(ht.getDimSize(1) - 1);
  OpFoldResult batch = ht.isDynamicDim(0) ? OpFoldResult(dim(l, h, 0))
                                          : b.getIndexAttr(ht.getDimSize(0));
  return slice(l, tensor({ht.getDimSize(0), w}, ht.getElementType()), h,
               {b.getIndexAttr(0), row, b.getIndexAttr(0)},
               {batch, b.getIndexAttr(1), b.getIndexAttr(w)});
}

/// prefill(input_ids [B, N, L_B], block_attention_mask [B, N], kv_cache)
///   -> (context [B, D], kv_cache)
LogicalResult Generator::buildPrefill() {
  int64_t lb = model.blockLength(), d = model.blockWidth();
  KVCacheType cache = globalCacheType();
  func::FuncOp fn = beginFunc(
      "prefill",
      {{tensor({kDyn, kDyn, lb}, i64), "input_ids", {"B", "N", "L_B"}},
       {tensor({kDyn, kDyn}, i64), "block_attention_mask", {"B", "N"}},
       {cache, "", {}}},
      {{tensor({kDyn, d}, elt), "context", {"B", "D"}}, {cache, "", {}}});
  Value ids = fn.getArgument(0), mask = fn.getArgument(1),
        c0 = fn.getArgument(2);
  Value x = b.create<EmbedderOp>(loc("embedder"), tensor({kDyn, kDyn, d}, elt),
                                 ids, model.embedder.getTableAttr(),
                                 model.embedder.getProjectionAttr(),
                                 model.embedder.getProjectionBiasAttr());
  BlockDecoderOp bd = model.blockDecoder;
  auto dec = b.create<BlockDecoderOp>(
      loc("block_decoder"), x.getType(), cache, x, mask, /*positions=*/Value(),
      c0, bd.getParams(), bd.getConfig());
  Value ctxEmb = lastRow(loc("context"), dec.getResult());
  b.create<func::ReturnOp>(loc("return"),
                           ValueRange{ctxEmb, dec.getResultCache()});
  return success();
}

/// decode_block(input_ids [B, 1, L_B], kv_cache) -> (context [B, D], kv_cache)
LogicalResult Generator::buildDecodeBlock() {
  int64_t lb = model.blockLength(), d = model.blockWidth();
  KVCacheType cache = globalCacheType();
  func::FuncOp fn = beginFunc(
      "decode_block",
      {{tensor({kDyn, 1, lb}, i64), "input_ids", {"B", "", "L_B"}},
       {cache, "", {}}},
      {{tensor({kDyn, d}, elt), "context", {"B", "D"}}, {cache, "", {}}});
  Value ids = fn.getArgument(0), c0 = fn.getArgument(1);
  Value x = b.create<EmbedderOp>(loc("embedder"), tensor({kDyn, 1, d}, elt),
                                 ids, model.embedder.getTableAttr(),
                                 model.embedder.getProjectionAttr(),
                                 model.embedder.getProjectionBiasAttr());
  BlockDecoderOp bd = model.blockDecoder;
  auto dec = b.create<BlockDecoderOp>(
      loc("block_decoder"), x.getType(), cache, x, /*mask=*/Value(),
      /*positions=*/Value(), c0, bd.getParams(), bd.getConfig());
  Value ctxEmb = lastRow(loc("context"), dec.getResult());
  b.create<func::ReturnOp>(loc("return"),
                           ValueRange{ctxEmb, dec.getResultCache()});
  return success();
}

/// decode_tokens(context [B, D], positions [S_in], sampler [])
///   -> (tokens [B, L_B], step_logits [B, L_B, V])
/// with S_in = P + L_B - 1 (prefix) or L_B (summation).
LogicalResult Generator::buildDecodeTokens() {
  TokenDecoderOp td = model.tokenDecoder;
  NeoXConfigAttr cfg = td.getConfig();
  int64_t lb = model.blockLength(), d = model.blockWidth(), v = model.vocab();
  int64_t t = cfg.getHidden();
  int64_t p = td.getPrefixLengthAttr().getInt();
  bool summation = td.getStrategy() == TokenDecoderStrategy::summation;
  // Inputs of one block: [P_0 .. P_{P-1}, t_0 .. t_{L_B-2}] (prefix) or
  // [bos + e_0, t_0 + e_1, ...] (summation).
  int64_t inputs = td.getLocalCacheEntries(lb);
  std::vector<ParamSpec> specs =
      getTokenDecoderParams(td.getParams(), cfg, d, p);
  StringRef embedName = specs.front().name;
  StringRef expWName = specs[specs.size() - 2].name;
  StringRef expBName = specs.back().name;

  func::FuncOp fn = beginFunc(
      "decode_tokens",
      {{tensor({kDyn, d}, elt), "context", {"B", "D"}},
       {tensor({inputs}, i64), "positions", {""}},
       {tensor({}, i64), "sampler", {}}},
      {{tensor({kDyn, lb}, i64), "tokens", {"B", "L_B"}},
       {tensor({kDyn, lb, v}, elt), "step_logits", {"B", "L_B", "V"}}});
  Value context = fn.getArgument(0), positions = fn.getArgument(1);
  Location l = loc("decode_tokens");
  Value sampler = b.create<tensor::ExtractOp>(l, fn.getArgument(2),
                                              ValueRange{});
  Value batch = dim(l, context, 0);
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);

  auto localType = KVCacheType::get(ctx, CacheScope::local, kDyn,
                                    cfg.getLayers(), cfg.getHeads(), inputs,
                                    cfg.getHeadDim(), cacheElt);
  Location tdLoc = loc(td.getParams());
  Value cache = b.create<KVAllocOp>(tdLoc, localType, batch);

  // The expansion layer: P (prefix) or L_B (summation) vectors [B, *, T].
  int64_t nProj = summation ? lb : p;
  Value proj = b.create<PrefixProjectionOp>(
      loc(parentModuleName(expWName)), tensor({kDyn, nProj, t}, elt), context,
      paramRef(l, expWName), paramRef(l, expBName), b.getI64IntegerAttr(p));

  Value tokens =
      b.create<tensor::EmptyOp>(l, ArrayRef<int64_t>{kDyn, lb}, i64,
                                ValueRange{batch});
  Value stepLogits =
      b.create<tensor::EmptyOp>(l, ArrayRef<int64_t>{kDyn, lb, v}, elt,
                                ValueRange{batch});
  // One step: the token decoder over `x` [B, S, T] at `pos` [S], then the
  // LM head on its last position, sampling, and the outputs' column `k`
  // (an index value). Returns the updated cache, tokens and step logits.
  auto step = [&](Location sl, Value x, Value pos, int64_t s, Value cacheIn,
                  OpFoldResult k, Value tokensIn, Value logitsIn) {
    auto st = b.create<TokenDecoderStepOp>(tdLoc, x.getType(), localType, x,
                                           pos, cacheIn, td.getParams(), cfg);
    // The last position predicts the next token.
    Value last = slice(sl, tensor({kDyn, t}, elt), st.getResult(),
                       {zero, b.getIndexAttr(s - 1), zero},
                       {batch, one, b.getIndexAttr(t)});
    Value logits = b.create<LMHeadOp>(loc("lm_head"), tensor({kDyn, v}, elt),
                                      last, model.lmHead.getWeightAttr());
    Value tok = b.create<SampleOp>(loc("sample"), tensor({kDyn}, i64), logits,
                                   sampler);
    Value logitsOut = insert(sl, logits, logitsIn, {zero, k, zero},
                             {batch, one, b.getIndexAttr(v)});
    Value tokensOut = insert(sl, tok, tokensIn, {zero, k}, {batch, one});
    return std::make_tuple(st.getResultCache(), tokensOut, logitsOut);
  };
  // The embedding of one id per row [B, 1] → [B, 1, T].
  auto embed = [&](Location sl, Value ids1) -> Value {
    return b.create<EmbeddingLookupOp>(sl, tensor({kDyn, 1, t}, elt), ids1,
                                       paramRef(sl, embedName));
  };

  // Step 0: the P prefix vectors (prefix), or E(bos) + e_0 (summation).
  {
    Location sl = loc("decode_tokens.step0");
    Value x, pos;
    int64_t s;
    if (!summation) {
      x = proj;
      s = p;
      pos = slice(sl, tensor({p}, i64), positions, {zero}, {b.getIndexAttr(p)});
    } else {
      Value bos = b.create<arith::ConstantOp>(
          sl, b.getI64IntegerAttr(static_cast<int64_t>(td.getBosTokenId())));
      Value ids1 = b.create<tensor::SplatOp>(sl, bos, tensor({kDyn, 1}, i64),
                                             ValueRange{batch});
      Value e0 = slice(sl, tensor({kDyn, 1, t}, elt), proj, {zero, zero, zero},
                       {batch, one, b.getIndexAttr(t)});
      x = b.create<arith::AddFOp>(sl, embed(sl, ids1), e0);
      s = 1;
      pos = slice(sl, tensor({1}, i64), positions, {zero}, {one});
    }
    std::tie(cache, tokens, stepLogits) =
        step(sl, x, pos, s, cache, zero, tokens, stepLogits);
  }

  // Steps k = 1 .. L_B-1, one loop (the cache, tokens and step logits are
  // carried): the embedding of token k-1 at positions[P + k - 1] (prefix),
  // or E(t_{k-1}) + e_k at positions[k] (summation).
  if (lb > 1) {
    Location sl = loc("decode_tokens.steps");
    Value lo = cidx(sl, 1), hi = cidx(sl, lb), st1 = cidx(sl, 1);
    auto loop = b.create<scf::ForOp>(
        sl, lo, hi, st1, ValueRange{cache, tokens, stepLogits},
        [&](OpBuilder &nb, Location, Value k, ValueRange iter) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          Value km1 = b.create<arith::SubIOp>(sl, k, st1);
          Value prev = slice(sl, tensor({kDyn, 1}, i64), iter[1], {zero, km1},
                             {batch, one});
          Value x = embed(sl, prev), pos;
          if (!summation) {
            Value at = b.create<arith::AddIOp>(sl, k, cidx(sl, p - 1));
            pos = slice(sl, tensor({1}, i64), positions, {at}, {one});
          } else {
            Value ek = slice(sl, tensor({kDyn, 1, t}, elt), proj, {zero, k, zero},
                             {batch, one, b.getIndexAttr(t)});
            x = b.create<arith::AddFOp>(sl, x, ek);
            pos = slice(sl, tensor({1}, i64), positions, {k}, {one});
          }
          auto [c1, t1, l1] = step(sl, x, pos, 1, iter[0], k, iter[1], iter[2]);
          b.create<scf::YieldOp>(sl, ValueRange{c1, t1, l1});
        });
    cache = loop.getResult(0);
    tokens = loop.getResult(1);
    stepLogits = loop.getResult(2);
  }
  b.create<KVReleaseOp>(tdLoc, cache);
  b.create<func::ReturnOp>(loc("return"), ValueRange{tokens, stepLogits});
  return success();
}

/// Vanilla prefill(input_ids [B, T], attention_mask [B, T], positions [B, T],
/// kv_cache) -> (logits [B, V] of the last position, kv_cache).
LogicalResult Generator::buildVanillaPrefill() {
  int64_t d = model.blockWidth(), v = model.vocab();
  KVCacheType cache = globalCacheType();
  func::FuncOp fn = beginFunc(
      "prefill",
      {{tensor({kDyn, kDyn}, i64), "input_ids", {"B", "T"}},
       {tensor({kDyn, kDyn}, i64), "attention_mask", {"B", "T"}},
       {tensor({kDyn, kDyn}, i64), "positions", {"B", "T"}},
       {cache, "", {}}},
      {{tensor({kDyn, v}, elt), "logits", {"B", "V"}}, {cache, "", {}}});
  Value ids = fn.getArgument(0), mask = fn.getArgument(1),
        pos = fn.getArgument(2), c0 = fn.getArgument(3);
  Location l = loc("embed_in");
  Value ids3 = b.create<tensor::ExpandShapeOp>(
      l, tensor({kDyn, kDyn, 1}, i64), ids,
      ArrayRef<ReassociationIndices>{{0}, {1, 2}},
      ArrayRef<OpFoldResult>{dim(l, ids, 0), dim(l, ids, 1),
                             b.getIndexAttr(1)});
  Value x = b.create<EmbedderOp>(l, tensor({kDyn, kDyn, d}, elt), ids3,
                                 model.embedder.getTableAttr(),
                                 model.embedder.getProjectionAttr(),
                                 model.embedder.getProjectionBiasAttr());
  BlockDecoderOp bd = model.blockDecoder;
  auto dec = b.create<BlockDecoderOp>(loc(bd.getParams()), x.getType(), cache,
                                      x, mask, pos, c0, bd.getParams(),
                                      bd.getConfig());
  Value last = lastRow(loc("last"), dec.getResult());
  Value logits = b.create<LMHeadOp>(loc("embed_out"), tensor({kDyn, v}, elt),
                                    last, model.lmHead.getWeightAttr());
  b.create<func::ReturnOp>(loc("return"),
                           ValueRange{logits, dec.getResultCache()});
  return success();
}

/// Vanilla decode_step(input_ids [B, 1], left_padding [B, 1], sampler [],
///   kv_cache) -> (tokens [B, 1], logits [B, V], kv_cache).
/// The new token's RoPE position is computed here: HF's cumsum(mask) - 1 of
/// a left-padded row is the cache length (entries before the new one) minus
/// the row's padding, so the caller uploads no positions per step. The
/// next token is sampled from the logits (bt.sample: the runtime's sampler,
/// on the device on the CUDA target), so that it can be fed back without a
/// round trip through the host.
LogicalResult Generator::buildVanillaDecodeStep() {
  int64_t d = model.blockWidth(), v = model.vocab();
  KVCacheType cache = globalCacheType();
  func::FuncOp fn = beginFunc(
      "decode_step",
      {{tensor({kDyn, 1}, i64), "input_ids", {"B", ""}},
       {tensor({kDyn, 1}, i64), "left_padding", {"B", ""}},
       {tensor({}, i64), "sampler", {}},
       {cache, "", {}}},
      {{tensor({kDyn, 1}, i64), "tokens", {"B", ""}},
       {tensor({kDyn, v}, elt), "logits", {"B", "V"}},
       {cache, "", {}}});
  Value ids = fn.getArgument(0), padding = fn.getArgument(1),
        c0 = fn.getArgument(3);
  Location l = loc("embed_in");
  Value batch = dim(l, ids, 0);
  // positions [B, 1] = kv_length - left_padding.
  Location pl = loc("positions");
  Value length = b.create<KVLengthOp>(pl, c0, b.getI64IntegerAttr(0));
  Value length64 = b.create<arith::IndexCastOp>(pl, i64, length);
  Value lengths = b.create<tensor::SplatOp>(pl, length64,
                                            tensor({kDyn, 1}, i64),
                                            ValueRange{batch});
  Value pos = b.create<arith::SubIOp>(pl, lengths, padding);
  Value ids3 = b.create<tensor::ExpandShapeOp>(
      l, tensor({kDyn, 1, 1}, i64), ids,
      ArrayRef<ReassociationIndices>{{0}, {1, 2}},
      ArrayRef<OpFoldResult>{batch, b.getIndexAttr(1), b.getIndexAttr(1)});
  Value x = b.create<EmbedderOp>(l, tensor({kDyn, 1, d}, elt), ids3,
                                 model.embedder.getTableAttr(),
                                 model.embedder.getProjectionAttr(),
                                 model.embedder.getProjectionBiasAttr());
  BlockDecoderOp bd = model.blockDecoder;
  auto dec = b.create<BlockDecoderOp>(loc(bd.getParams()), x.getType(), cache,
                                      x, /*mask=*/Value(), pos, c0,
                                      bd.getParams(), bd.getConfig());
  Value last = lastRow(loc("last"), dec.getResult());
  Value logits = b.create<LMHeadOp>(loc("embed_out"), tensor({kDyn, v}, elt),
                                    last, model.lmHead.getWeightAttr());
  Location sl = loc("sample");
  Value sampler = b.create<tensor::ExtractOp>(sl, fn.getArgument(2),
                                              ValueRange{});
  Value tok = b.create<SampleOp>(sl, tensor({kDyn}, i64), logits, sampler);
  Value tokens = b.create<tensor::ExpandShapeOp>(
      sl, tensor({kDyn, 1}, i64), tok, ArrayRef<ReassociationIndices>{{0, 1}},
      ArrayRef<OpFoldResult>{batch, b.getIndexAttr(1)});
  b.create<func::ReturnOp>(loc("return"),
                           ValueRange{tokens, logits, dec.getResultCache()});
  return success();
}

LogicalResult Generator::run() {
  SmallVector<StringRef> names =
      model.isVanilla()
          ? SmallVector<StringRef>{"prefill", "decode_step"}
          : SmallVector<StringRef>{"prefill", "decode_block", "decode_tokens"};
  for (StringRef name : names)
    if (Operation *existing = module.lookupSymbol(name))
      return existing->emitError()
             << "bt-generate-entry-points: the entry point '" << name
             << "' is already defined";
  if (model.isVanilla())
    return success(succeeded(buildVanillaPrefill()) &&
                   succeeded(buildVanillaDecodeStep()));
  return success(succeeded(buildPrefill()) && succeeded(buildDecodeBlock()) &&
                 succeeded(buildDecodeTokens()));
}

struct GenerateEntryPointsPass
    : public bt::impl::BTGenerateEntryPointsBase<GenerateEntryPointsPass> {
  using BTGenerateEntryPointsBase::BTGenerateEntryPointsBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<Model> model = findModel(module);
    if (failed(model))
      return signalPassFailure();
    Type cacheElt;
    if (kvDType == "bf16") {
      cacheElt = Builder(module.getContext()).getBF16Type();
      if (!model->elementType().isF32()) {
        module.emitError() << "bt-generate-entry-points: kv-dtype=bf16 needs "
                              "f32 activations, the model's are "
                           << model->elementType();
        return signalPassFailure();
      }
    } else if (!kvDType.empty()) {
      module.emitError() << "bt-generate-entry-points: kv-dtype must be "
                            "'bf16' or empty (the activations' type), got '"
                         << kvDType << "'";
      return signalPassFailure();
    }
    if (failed(Generator(module, *model, cacheElt).run()))
      return signalPassFailure();
  }
};

} // namespace
