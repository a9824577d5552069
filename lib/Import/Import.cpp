//===- Import.cpp - model description → bt model-level IR ------------------===//

#include "bt/Import/Import.h"

#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/runtime/model/param_names.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;

namespace bt {
namespace {

ParamShapeConfig shapeConfig(const ModelSpec &s) {
  ParamShapeConfig c;
  c.vocab = s.vocab;
  c.blockLength = s.blockLength;
  c.embedderWidth = s.embedderWidth;
  c.blockWidth = s.block.hidden;
  c.blockLayers = s.block.layers;
  c.blockIntermediate = s.block.intermediate;
  c.tokenWidth = s.token.hidden;
  c.tokenLayers = s.token.layers;
  c.tokenIntermediate = s.token.intermediate;
  c.prefixLength = s.prefixLength;
  c.projectionLayer = s.projectionLayer;
  return c;
}

std::vector<ParamSpec> paramSpecs(const ModelSpec &s) {
  if (s.kind == ModelSpec::Kind::Vanilla)
    return vanillaParams(s.vocab, s.block.hidden, s.block.layers,
                         s.block.intermediate);
  return blockTransformerParams(shapeConfig(s));
}

NeoXConfigAttr stackAttr(MLIRContext *ctx, const StackSpec &s) {
  return NeoXConfigAttr::get(ctx, s.hidden, s.layers, s.heads, s.headDim,
                             s.intermediate, s.rotaryDims,
                             llvm::APFloat(s.rotaryBase), llvm::APFloat(s.eps));
}

/// Builds entry functions into a module.
class Importer {
public:
  Importer(MLIRContext *ctx, const ModelSpec &spec, ModuleOp module)
      : ctx(ctx), spec(spec), b(ctx), f32(b.getF32Type()), i64(b.getI64Type()) {
    b.setInsertionPointToEnd(module.getBody());
  }

  void buildBlockEval(bool withLoss);
  void buildVanillaEval(bool withLoss);

private:
  static constexpr int64_t kDyn = ShapedType::kDynamic;

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type elt) {
    return RankedTensorType::get(shape, elt);
  }
  Location loc(StringRef name) {
    return NameLoc::get(b.getStringAttr(name));
  }
  Value dim(Location l, Value v, int64_t d) {
    return b.create<tensor::DimOp>(l, v, d);
  }
  /// `v[o0 : o0+s0, o1 : o1+s1, ...]` with unit strides.
  Value slice(Location l, Value v, ArrayRef<OpFoldResult> offsets,
              ArrayRef<OpFoldResult> sizes) {
    SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
    return b.create<tensor::ExtractSliceOp>(l, v, offsets, sizes, strides);
  }
  /// A named tensor of an entry point: fixture name and symbolic dim names
  /// (docs/abi.md; "" for a dim that has no name).
  struct Named {
    StringRef name;
    SmallVector<StringRef> dims;
  };
  func::FuncOp beginFunc(StringRef name, ArrayRef<Type> inputs,
                         ArrayRef<Type> results, ArrayRef<Named> args,
                         ArrayRef<Named> outs);
  Value zeroRedundantLogits(Location l, Value logits, Value blockMaskNext,
                            Value targetIds, Value targetMask);

  MLIRContext *ctx;
  const ModelSpec &spec;
  OpBuilder b;
  Type f32, i64;
};

func::FuncOp Importer::beginFunc(StringRef name, ArrayRef<Type> inputs,
                                 ArrayRef<Type> results, ArrayRef<Named> args,
                                 ArrayRef<Named> outs) {
  auto fn = b.create<func::FuncOp>(loc(spec.name + "." + name.str()), name,
                                   b.getFunctionType(inputs, results));
  // Tensor names and symbolic dims of docs/abi.md (the fixtures' names), for
  // the artifact manifest and for readers.
  auto dims = [&](const Named &n) {
    SmallVector<Attribute> d;
    for (StringRef s : n.dims)
      d.push_back(b.getStringAttr(s));
    return b.getArrayAttr(d);
  };
  for (auto [i, n] : llvm::enumerate(args)) {
    fn.setArgAttr(i, bt::BTDialect::getNameAttrName(), b.getStringAttr(n.name));
    fn.setArgAttr(i, bt::BTDialect::getDimsAttrName(), dims(n));
  }
  for (auto [i, n] : llvm::enumerate(outs)) {
    fn.setResultAttr(i, bt::BTDialect::getNameAttrName(), b.getStringAttr(n.name));
    fn.setResultAttr(i, bt::BTDialect::getDimsAttrName(), dims(n));
  }
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  return fn;
}

/// Official BlockTransformer.forward(labels=None) returns exact zeros for
/// targets that are padding (id == pad and mask == 0; token_decoder/base.py
/// `discard_redundant_tokens`) and fills blocks skipped as padding
/// (block_attention_mask == 0; `skip_padding_blocks`) with eos_token_id.
Value Importer::zeroRedundantLogits(Location l, Value logits,
                                    Value blockMaskNext, Value targetIds,
                                    Value targetMask) {
  auto type = cast<RankedTensorType>(logits.getType());
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, l, logits);
  Value init = b.create<tensor::EmptyOp>(l, sizes, f32);
  AffineExpr d0, d1, d2, d3;
  bindDims(ctx, d0, d1, d2, d3);
  SmallVector<AffineMap> maps = {
      AffineMap::get(4, 0, {d0, d1, d2, d3}, ctx), // logits
      AffineMap::get(4, 0, {d0, d1}, ctx),         // block mask of the target block
      AffineMap::get(4, 0, {d0, d1, d2}, ctx),     // target ids
      AffineMap::get(4, 0, {d0, d1, d2}, ctx),     // target attention mask
      AffineMap::get(4, 0, {d0, d1, d2, d3}, ctx)};
  SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
  double eosFill = static_cast<double>(spec.eosTokenId);
  int64_t pad = spec.padTokenId;
  auto generic = b.create<linalg::GenericOp>(
      l, TypeRange{type}, ValueRange{logits, blockMaskNext, targetIds, targetMask},
      ValueRange{init}, maps, iters,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value zeroI = nb.create<arith::ConstantIntOp>(nl, 0, 64);
        Value oneI = nb.create<arith::ConstantIntOp>(nl, 1, 64);
        Value padI = nb.create<arith::ConstantIntOp>(nl, pad, 64);
        Value zeroF = nb.create<arith::ConstantFloatOp>(nl, APFloat(0.0f), nb.getF32Type());
        Value eosF = nb.create<arith::ConstantFloatOp>(
            nl, APFloat(static_cast<float>(eosFill)), nb.getF32Type());
        Value blockKept = nb.create<arith::CmpIOp>(nl, arith::CmpIPredicate::ne, args[1], zeroI);
        Value notPad = nb.create<arith::CmpIOp>(nl, arith::CmpIPredicate::ne, args[2], padI);
        Value attended = nb.create<arith::CmpIOp>(nl, arith::CmpIPredicate::eq, args[3], oneI);
        Value content = nb.create<arith::OrIOp>(nl, notPad, attended);
        Value tokenValue = nb.create<arith::SelectOp>(nl, content, args[0], zeroF);
        Value v = nb.create<arith::SelectOp>(nl, blockKept, tokenValue, eosF);
        nb.create<linalg::YieldOp>(nl, v);
      });
  return generic.getResult(0);
}

void Importer::buildBlockEval(bool withLoss) {
  const int64_t lb = spec.blockLength, d = spec.block.hidden, v = spec.vocab;
  Type ids = tensor({kDyn, kDyn, lb}, i64);
  Type blockMask = tensor({kDyn, kDyn}, i64);
  Type logitsType = tensor({kDyn, kDyn, lb, v}, f32);
  SmallVector<Type> inputs = {ids, ids, blockMask};
  SmallVector<Named> args = {{"input_ids", {"B", "N_blk", "L_B"}},
                             {"attention_mask", {"B", "N_blk", "L_B"}},
                             {"block_attention_mask", {"B", "N_blk"}}};
  SmallVector<Type> results = {logitsType};
  // logits has N_blk - 1 blocks, which has no name of its own.
  SmallVector<Named> outs = {{"logits", {"B", "", "L_B", "V"}}};
  if (withLoss) {
    inputs.push_back(ids);
    args.push_back({"labels", {"B", "N_blk", "L_B"}});
    results.push_back(tensor({}, f32));
    outs.push_back({"loss", {}});
  }
  OpBuilder::InsertionGuard guard(b);
  func::FuncOp fn = beginFunc(withLoss ? "eval_loss" : "eval", inputs, results,
                              args, outs);
  Value inputIds = fn.getArgument(0), mask = fn.getArgument(1),
        blockMaskArg = fn.getArgument(2);

  Location embLoc = loc("embedder");
  Value x = b.create<EmbedderOp>(embLoc, tensor({kDyn, kDyn, d}, f32), inputIds,
                                 "embedder.embeddings.weight");
  if (spec.projectionLayer) {
    std::vector<ParamSpec> proj = embedderProjectionParams(
        d, spec.embedderWidth, spec.blockLength);
    auto e = x.getDefiningOp<EmbedderOp>();
    e.setProjectionAttr(FlatSymbolRefAttr::get(ctx, proj[0].name));
    e.setProjectionBiasAttr(FlatSymbolRefAttr::get(ctx, proj[1].name));
  }
  Location bdLoc = loc("block_decoder");
  Value ctxEmb =
      b.create<BlockDecoderOp>(bdLoc, tensor({kDyn, kDyn, d}, f32), Type(), x,
                               blockMaskArg, Value(), "block_decoder.gpt_neox",
                               stackAttr(ctx, spec.block))
          .getResult();

  // The context embedding of block i decodes block i + 1 (blocks 1..N-1).
  Location tdLoc = loc("token_decoder");
  Value batch = dim(tdLoc, inputIds, 0);
  Value nBlocks = dim(tdLoc, inputIds, 1);
  Value one = b.create<arith::ConstantIndexOp>(tdLoc, 1);
  Value nPred = b.create<arith::SubIOp>(tdLoc, nBlocks, one);
  OpFoldResult zero = b.getIndexAttr(0), oneAttr = b.getIndexAttr(1);
  Value prev = slice(tdLoc, ctxEmb, {zero, zero, zero},
                     {batch, nPred, b.getIndexAttr(d)});
  Value targetIds = slice(tdLoc, inputIds, {zero, oneAttr, zero},
                          {batch, nPred, b.getIndexAttr(lb)});
  Value targetMask = slice(tdLoc, mask, {zero, oneAttr, zero},
                           {batch, nPred, b.getIndexAttr(lb)});
  auto strategy = spec.strategy == ModelSpec::Strategy::Prefix
                      ? TokenDecoderStrategy::prefix
                      : TokenDecoderStrategy::summation;
  Value hidden = b.create<TokenDecoderOp>(
      tdLoc, tensor({kDyn, kDyn, lb, spec.token.hidden}, f32), prev, targetIds,
      targetMask, "token_decoder", stackAttr(ctx, spec.token), strategy,
      static_cast<uint64_t>(spec.prefixLength),
      static_cast<uint64_t>(spec.bosTokenId));
  Location headLoc = loc("lm_head");
  Value logits = b.create<LMHeadOp>(headLoc, logitsType, hidden,
                                    "token_decoder.embed_out.weight");
  Value blockMaskNext = slice(headLoc, blockMaskArg, {zero, oneAttr},
                              {batch, nPred});
  SmallVector<Value> returned = {
      zeroRedundantLogits(headLoc, logits, blockMaskNext, targetIds, targetMask)};
  if (withLoss) {
    Location lossLoc = loc("loss");
    Value labels = slice(lossLoc, fn.getArgument(3), {zero, oneAttr, zero},
                         {batch, nPred, b.getIndexAttr(lb)});
    returned.push_back(b.create<CrossEntropyOp>(lossLoc, tensor({}, f32),
                                                logits, labels, -100));
  }
  b.create<func::ReturnOp>(loc("return"), returned);
}

void Importer::buildVanillaEval(bool withLoss) {
  const int64_t d = spec.block.hidden, v = spec.vocab;
  Type ids = tensor({kDyn, kDyn}, i64);
  Type logitsType = tensor({kDyn, kDyn, v}, f32);
  SmallVector<Type> inputs = {ids, ids};
  SmallVector<Named> args = {{"input_ids", {"B", "T"}},
                             {"attention_mask", {"B", "T"}}};
  SmallVector<Type> results = {logitsType};
  SmallVector<Named> outs = {{"logits", {"B", "T", "V"}}};
  if (withLoss) {
    inputs.push_back(ids);
    args.push_back({"labels", {"B", "T"}});
    results.push_back(tensor({}, f32));
    outs.push_back({"loss", {}});
  }
  OpBuilder::InsertionGuard guard(b);
  func::FuncOp fn = beginFunc(withLoss ? "eval_loss" : "eval", inputs, results,
                              args, outs);
  Value inputIds = fn.getArgument(0), mask = fn.getArgument(1);

  // A vanilla GPT-NeoX is the L_B = 1 case: one token per "block".
  Location embLoc = loc("embed_in");
  Value ids3 = b.create<tensor::ExpandShapeOp>(
      embLoc, tensor({kDyn, kDyn, 1}, i64), inputIds,
      ArrayRef<ReassociationIndices>{{0}, {1, 2}});
  Value x = b.create<EmbedderOp>(embLoc, tensor({kDyn, kDyn, d}, f32), ids3,
                                 "gpt_neox.embed_in.weight");
  Value hidden =
      b.create<BlockDecoderOp>(loc("gpt_neox"), tensor({kDyn, kDyn, d}, f32),
                               Type(), x, mask, Value(), "gpt_neox",
                               stackAttr(ctx, spec.block))
          .getResult();
  Location headLoc = loc("embed_out");
  Value logits = b.create<LMHeadOp>(headLoc, logitsType, hidden, "embed_out.weight");
  SmallVector<Value> returned = {logits};
  if (withLoss) {
    // HF GPTNeoXForCausalLM: logits[:, :-1] predict labels[:, 1:].
    Location lossLoc = loc("loss");
    Value batch = dim(lossLoc, inputIds, 0);
    Value len = dim(lossLoc, inputIds, 1);
    Value one = b.create<arith::ConstantIndexOp>(lossLoc, 1);
    Value lenPred = b.create<arith::SubIOp>(lossLoc, len, one);
    OpFoldResult zero = b.getIndexAttr(0), oneAttr = b.getIndexAttr(1);
    Value shifted = slice(lossLoc, logits, {zero, zero, zero},
                          {batch, lenPred, b.getIndexAttr(v)});
    Value labels = slice(lossLoc, fn.getArgument(2), {zero, oneAttr},
                         {batch, lenPred});
    returned.push_back(b.create<CrossEntropyOp>(lossLoc, tensor({}, f32),
                                                shifted, labels, -100));
  }
  b.create<func::ReturnOp>(loc("return"), returned);
}

} // namespace

std::vector<std::string> getParamNames(const ModelSpec &spec) {
  std::vector<std::string> names;
  for (const ParamSpec &p : paramSpecs(spec))
    names.push_back(p.name);
  return names;
}

OwningOpRef<ModuleOp> importModel(MLIRContext *context, const ModelSpec &spec,
                                  const ImportOptions &options) {
  context->loadDialect<BTDialect, func::FuncDialect, tensor::TensorDialect,
                       arith::ArithDialect, linalg::LinalgDialect>();
  Location moduleLoc = NameLoc::get(StringAttr::get(context, spec.name));
  OwningOpRef<ModuleOp> module = ModuleOp::create(moduleLoc);
  OpBuilder b(context);
  b.setInsertionPointToEnd(module->getBody());
  for (const ParamSpec &p : paramSpecs(spec))
    b.create<ParamOp>(moduleLoc, p.name,
                      RankedTensorType::get(p.shape, b.getF32Type()));
  Importer importer(context, spec, *module);
  bool vanilla = spec.kind == ModelSpec::Kind::Vanilla;
  if (options.eval)
    vanilla ? importer.buildVanillaEval(false) : importer.buildBlockEval(false);
  if (options.evalLoss)
    vanilla ? importer.buildVanillaEval(true) : importer.buildBlockEval(true);
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace bt
