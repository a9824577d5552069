//===- BTOps.cpp - bt operations: verifiers, assembly, interfaces ----------===//

#include "bt/Dialect/BT/IR/BTOps.h"
#include "VerifierUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace bt;
using namespace bt::verifier;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static LogicalResult checkRank(Operation *op, StringRef what, Value v,
                               int64_t rank, StringRef layout) {
  int64_t actual = tensorType(v).getRank();
  if (actual == rank)
    return success();
  return op->emitOpError() << what << " must be rank " << rank << " " << layout
                           << ", got rank " << actual;
}

static LogicalResult checkMinRank(Operation *op, StringRef what, Value v,
                                  int64_t rank, StringRef layout) {
  int64_t actual = tensorType(v).getRank();
  if (actual >= rank)
    return success();
  return op->emitOpError() << what << " must have rank >= " << rank << " "
                           << layout << ", got rank " << actual;
}

static LogicalResult checkSameElementType(Operation *op, StringRef what, Value v,
                                          Type expected) {
  Type actual = tensorType(v).getElementType();
  if (actual == expected)
    return success();
  return op->emitOpError() << what << " element type must be " << expected
                           << ", got " << actual;
}

/// Whether a KV cache of element type `cache` holds the keys and values of
/// activations of element type `act`: the same type, or bf16 storage for f32
/// activations (!bt.kv_cache: appends round to nearest even, reads extend
/// exactly; the CUDA target's `--dtype bf16`).
static bool cacheHolds(Type cache, Type act) {
  return cache == act || (cache.isBF16() && act.isF32());
}

static LogicalResult checkPositive(Operation *op, StringRef what, double v) {
  if (v > 0.0)
    return success();
  return op->emitOpError() << what << " must be > 0, got " << v;
}

/// Checks the rotary attributes shared by bt.rotary and bt.fused_local_attention.
static LogicalResult checkRotary(Operation *op, int64_t rotaryDims,
                                 int64_t headDim, double base) {
  if (rotaryDims <= 0 || rotaryDims % 2 != 0 || rotaryDims > headDim)
    return op->emitOpError() << "rotary_dims (" << rotaryDims
                             << ") must be even, > 0 and <= head_dim ("
                             << headDim << ")";
  return checkPositive(op, "rotary base", base);
}

/// `prefix` of `shape` (all but the last `n` dims).
static SmallVector<int64_t> leading(ArrayRef<int64_t> shape, unsigned n) {
  return SmallVector<int64_t>(shape.drop_back(n));
}

static SmallVector<int64_t> concat(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  SmallVector<int64_t> r(a);
  r.append(b.begin(), b.end());
  return r;
}

//===----------------------------------------------------------------------===//
// Parameter tables
//===----------------------------------------------------------------------===//

std::vector<ParamSpec> bt::getNeoXStackParams(StringRef prefix,
                                              NeoXConfigAttr config) {
  return neoxStackParams(prefix.str(), config.getHidden(), config.getLayers(),
                         config.getIntermediate());
}

std::vector<ParamSpec> bt::getTokenDecoderParams(StringRef prefix,
                                                 NeoXConfigAttr config,
                                                 int64_t contextWidth,
                                                 int64_t prefixLength) {
  // Official state_dict order: embed_in, the stack, the expansion layer.
  std::vector<ParamSpec> inputs = tokenDecoderInputParams(
      prefix.str(), ShapedType::kDynamic, config.getHidden(), contextWidth,
      prefixLength);
  std::vector<ParamSpec> specs = {inputs[0]};
  for (ParamSpec &s : getNeoXStackParams((prefix + ".gpt_neox").str(), config))
    specs.push_back(std::move(s));
  specs.push_back(inputs[1]);
  specs.push_back(inputs[2]);
  return specs;
}

ParamOp bt::lookupParam(Operation *from, SymbolTableCollection &tables,
                        StringRef name) {
  return tables.lookupNearestSymbolFrom<ParamOp>(
      from, StringAttr::get(from->getContext(), name));
}

/// Verifies that every parameter in `specs` is declared with that shape and
/// element type `eltType`.
static LogicalResult verifyParams(Operation *op, SymbolTableCollection &tables,
                                  ArrayRef<ParamSpec> specs, Type eltType) {
  for (const ParamSpec &spec : specs) {
    ParamOp param = lookupParam(op, tables, spec.name);
    if (!param)
      return op->emitOpError() << "expects parameter @\"" << spec.name
                               << "\" of shape " << shapeStr(spec.shape)
                               << ", but no bt.param of that name is declared";
    RankedTensorType type = param.getTensorType();
    if (!shapesCompatible(type.getShape(), spec.shape)) {
      InFlightDiagnostic diag =
          op->emitOpError() << "expects parameter @\"" << spec.name
                            << "\" of shape " << shapeStr(spec.shape)
                            << ", but it is declared as "
                            << shapeStr(type.getShape());
      diag.attachNote(param.getLoc()) << "declared here";
      return diag;
    }
    if (type.getElementType() != eltType) {
      InFlightDiagnostic diag =
          op->emitOpError() << "expects parameter @\"" << spec.name
                            << "\" of element type " << eltType
                            << ", but it is declared as "
                            << type.getElementType();
      diag.attachNote(param.getLoc()) << "declared here";
      return diag;
    }
  }
  return success();
}

/// Looks up a single parameter referenced by `sym`, checking that it exists
/// and that its rank is `rank`.
static FailureOr<ParamOp> lookupParamOfRank(Operation *op,
                                            SymbolTableCollection &tables,
                                            FlatSymbolRefAttr sym, StringRef role,
                                            int64_t rank, StringRef layout) {
  ParamOp param = lookupParam(op, tables, sym.getValue());
  if (!param)
    return op->emitOpError() << role << " " << sym
                             << " does not name a bt.param";
  if (param.getTensorType().getRank() != rank) {
    InFlightDiagnostic diag = op->emitOpError()
                              << role << " " << sym << " must be rank " << rank
                              << " " << layout << ", got "
                              << shapeStr(param.getTensorType().getShape());
    diag.attachNote(param.getLoc()) << "declared here";
    return diag;
  }
  return param;
}

//===----------------------------------------------------------------------===//
// ParamOp / ParamRefOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (!getTensorType().hasStaticShape())
    return emitOpError() << "parameter type must be statically shaped, got "
                         << getType();
  return success();
}

LogicalResult ParamRefOp::verifySymbolUses(SymbolTableCollection &tables) {
  ParamOp param = lookupParam(*this, tables, getName());
  if (!param)
    return emitOpError() << "'" << getNameAttr()
                         << "' does not name a bt.param";
  if (param.getType() != getType()) {
    InFlightDiagnostic diag = emitOpError()
                              << "result type " << getType()
                              << " does not match the declared type "
                              << param.getType() << " of " << getNameAttr();
    diag.attachNote(param.getLoc()) << "declared here";
    return diag;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// EmbedderOp
//===----------------------------------------------------------------------===//

LogicalResult EmbedderOp::verify() {
  if (failed(checkRank(*this, "ids", getIds(), 3, "[B, N_blk, L_B]")) ||
      failed(checkRank(*this, "result", getResult(), 3, "[B, N_blk, D]")))
    return failure();
  ArrayRef<int64_t> ids = tensorType(getIds()).getShape();
  ArrayRef<int64_t> res = tensorType(getResult()).getShape();
  if (!dimsCompatible(ids[0], res[0]) || !dimsCompatible(ids[1], res[1]))
    return emitOpError() << "result must have the [B, N_blk] of ids "
                         << shapeStr(ids.take_front(2)) << ", got "
                         << shapeStr(res.take_front(2));
  if (ShapedType::isDynamic(ids[2]) || ShapedType::isDynamic(res[2]))
    return emitOpError() << "block length L_B and width D must be static";
  if (ids[2] < 1)
    return emitOpError() << "block length L_B must be >= 1, got " << ids[2];
  if (static_cast<bool>(getProjection()) !=
      static_cast<bool>(getProjectionBias()))
    return emitOpError() << "the projection-layer embedder needs both "
                            "'projection' [D, E, L_B] and 'bias' [D]";
  if (!getProjection() && res[2] % ids[2] != 0)
    return emitOpError() << "block width D (" << res[2]
                         << ") must be a multiple of the block length L_B ("
                         << ids[2] << ")";
  return success();
}

LogicalResult EmbedderOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<ParamOp> table =
      lookupParamOfRank(*this, tables, getTableAttr(), "table", 2, "[V, E]");
  if (failed(table))
    return failure();
  RankedTensorType tt = table->getTensorType();
  int64_t lb = tensorType(getIds()).getDimSize(2);
  int64_t d = tensorType(getResult()).getDimSize(2);
  int64_t e = tt.getDimSize(1);
  if (getProjectionAttr()) {
    FailureOr<ParamOp> w = lookupParamOfRank(
        *this, tables, getProjectionAttr(), "projection", 3, "[D, E, L_B]");
    FailureOr<ParamOp> bias = lookupParamOfRank(
        *this, tables, getProjectionBiasAttr(), "bias", 1, "[D]");
    if (failed(w) || failed(bias))
      return failure();
    SmallVector<int64_t> expect{d, e, lb};
    ArrayRef<int64_t> got = w->getTensorType().getShape();
    if (got != ArrayRef<int64_t>(expect))
      return emitOpError() << "projection " << getProjectionAttr()
                           << " must be [D, E, L_B] = " << shapeStr(expect)
                           << ", got " << shapeStr(got);
    if (bias->getTensorType().getDimSize(0) != d)
      return emitOpError() << "bias " << getProjectionBiasAttr()
                           << " must be [D] = [" << d << "], got "
                           << shapeStr(bias->getTensorType().getShape());
    if (w->getTensorType().getElementType() != tt.getElementType() ||
        bias->getTensorType().getElementType() != tt.getElementType())
      return emitOpError() << "projection and bias must have the table's "
                              "element type "
                           << tt.getElementType();
    return checkSameElementType(*this, "result", getResult(),
                                tt.getElementType());
  }
  if (e * lb != d)
    return emitOpError() << "embedder width E (" << e << ") * L_B (" << lb
                         << ") = " << e * lb << " must equal the block width D ("
                         << d << ")";
  return checkSameElementType(*this, "result", getResult(), tt.getElementType());
}

bool EmbedderOp::isBlockLocalAlong(int64_t dim) { return dim == 0 || dim == 1; }
std::optional<int64_t> EmbedderOp::getOperandBlockDim(unsigned, int64_t dim) {
  return dim;
}

//===----------------------------------------------------------------------===//
// BlockDecoderOp
//===----------------------------------------------------------------------===//

/// Checks that a cache type matches a NeoX config and activation type.
static LogicalResult checkCacheAgainstConfig(Operation *op, StringRef what,
                                             KVCacheType cache,
                                             NeoXConfigAttr config, Type eltType,
                                             int64_t batch) {
  if (cache.getLayers() != config.getLayers() ||
      cache.getHeads() != config.getHeads() ||
      cache.getHeadDim() != config.getHeadDim())
    return op->emitOpError()
           << what << " (layers = " << cache.getLayers()
           << ", heads = " << cache.getHeads()
           << ", head_dim = " << cache.getHeadDim()
           << ") does not match the config (layers = " << config.getLayers()
           << ", heads = " << config.getHeads()
           << ", head_dim = " << config.getHeadDim() << ")";
  if (!cacheHolds(cache.getElementType(), eltType))
    return op->emitOpError() << what << " element type "
                             << cache.getElementType()
                             << " does not match the activations' " << eltType
                             << " (expected " << eltType
                             << ", or bf16 for f32 activations)";
  if (!dimsCompatible(cache.getBatch(), batch))
    return op->emitOpError() << what << " batch (" << cache.getBatch()
                             << ") does not match the input batch B (" << batch
                             << ")";
  return success();
}

LogicalResult BlockDecoderOp::verify() {
  if (failed(checkRank(*this, "input", getInput(), 3, "[B, N_blk, D]")))
    return failure();
  RankedTensorType in = tensorType(getInput());
  if (getResult().getType() != in)
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal the input type " << in;
  int64_t d = in.getDimSize(2);
  if (getConfig().getHidden() != d)
    return emitOpError() << "config hidden (" << getConfig().getHidden()
                         << ") must equal the block-decoder width D ("
                         << dimStr(d) << ")";
  if (getMask() && failed(checkShape(*this, "mask", getMask(),
                                     in.getShape().take_front(2))))
    return failure();
  if (getPositions() && failed(checkShape(*this, "positions", getPositions(),
                                          in.getShape().take_front(2))))
    return failure();
  if (static_cast<bool>(getCache()) != static_cast<bool>(getResultCache()))
    return emitOpError()
           << "a cache operand requires a cache result and vice versa";
  if (!getCache())
    return success();
  auto cache = llvm::cast<KVCacheType>(getCache().getType());
  if (!cache.isGlobal())
    return emitOpError() << "the block decoder's cache must have 'global' "
                            "scope, got 'local'";
  if (getResultCache().getType() != cache)
    return emitOpError() << "result cache type " << getResultCache().getType()
                         << " must equal the operand cache type " << cache;
  if (failed(checkCacheAgainstConfig(*this, "cache", cache, getConfig(),
                                     in.getElementType(), in.getDimSize(0))))
    return failure();
  // The N_blk new blocks are appended: as for bt.kv_append, a static count
  // above the capacity can never fit.
  int64_t nBlk = in.getDimSize(1);
  if (!ShapedType::isDynamic(nBlk) && cache.hasStaticCapacity() &&
      nBlk > cache.getCapacity())
    return emitOpError() << "input has " << nBlk
                         << " blocks, more than the cache capacity ("
                         << cache.getCapacity() << ")";
  return success();
}

LogicalResult BlockDecoderOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyParams(*this, tables, getNeoXStackParams(getParams(), getConfig()),
                      tensorType(getInput()).getElementType());
}

bool BlockDecoderOp::consumesCache(OpOperand &) { return true; }

void BlockDecoderOp::build(OpBuilder &b, OperationState &state, Type result,
                           Type resultCache, Value input, Value mask,
                           Value cache, StringRef params,
                           NeoXConfigAttr config) {
  build(b, state, result, resultCache, input, mask, /*positions=*/Value(),
        cache, params, config);
}

void BlockDecoderOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  if (!getCache())
    return;
  effects.emplace_back(MemoryEffects::Read::get());
  effects.emplace_back(MemoryEffects::Write::get());
}

// bt.block_decoder %x [mask %m] [cache %c] config <...> params "<prefix>"
//   attr-dict : T(x) [, T(m)] [, T(c)] -> T(result) [, T(result cache)]
// `config` and `params` are accepted in either order. The printer puts
// `params` last: a dialect attribute written in full (`#bt.neox<...>`) right
// before the `:` of the type list would take that list as its own type.
ParseResult BlockDecoderOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::UnresolvedOperand input, mask, positions, cache;
  bool hasMask = false, hasPositions = false, hasCache = false;
  if (parser.parseOperand(input))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("mask"))) {
    hasMask = true;
    if (parser.parseOperand(mask))
      return failure();
  }
  if (succeeded(parser.parseOptionalKeyword("positions"))) {
    hasPositions = true;
    if (parser.parseOperand(positions))
      return failure();
  }
  if (succeeded(parser.parseOptionalKeyword("cache"))) {
    hasCache = true;
    if (parser.parseOperand(cache))
      return failure();
  }
  StringAttr params;
  NeoXConfigAttr config;
  // Pass a type so that a string does not take a trailing `: type`.
  Type none = parser.getBuilder().getNoneType();
  for (int i = 0; i < 2; ++i) {
    if (!params && succeeded(parser.parseOptionalKeyword("params"))) {
      if (parser.parseAttribute(params, none))
        return failure();
    } else if (!config && succeeded(parser.parseOptionalKeyword("config"))) {
      if (parser.parseCustomAttributeWithFallback(config, none))
        return failure();
    } else {
      return parser.emitError(parser.getCurrentLocation())
             << "expected '" << (params ? "config" : "params") << "'";
    }
  }
  if (parser.parseOptionalAttrDict(result.attributes))
    return failure();
  Properties &props = result.getOrAddProperties<Properties>();
  props.params = params;
  props.config = config;
  props.operandSegmentSizes = {1, hasMask ? 1 : 0, hasPositions ? 1 : 0,
                               hasCache ? 1 : 0};

  SmallVector<Type> operandTypes, resultTypes;
  SMLoc typesLoc = parser.getCurrentLocation();
  if (parser.parseColonTypeList(operandTypes) || parser.parseArrow() ||
      parser.parseTypeList(resultTypes))
    return failure();
  size_t numOperands = 1 + hasMask + hasPositions + hasCache;
  if (operandTypes.size() != numOperands)
    return parser.emitError(typesLoc)
           << "expected " << numOperands << " operand types, got "
           << operandTypes.size();
  if (resultTypes.size() != (hasCache ? 2u : 1u))
    return parser.emitError(typesLoc)
           << "expected " << (hasCache ? 2 : 1) << " result types, got "
           << resultTypes.size();
  SmallVector<OpAsmParser::UnresolvedOperand> operands{input};
  if (hasMask)
    operands.push_back(mask);
  if (hasPositions)
    operands.push_back(positions);
  if (hasCache)
    operands.push_back(cache);
  if (parser.resolveOperands(operands, operandTypes, typesLoc, result.operands))
    return failure();
  result.addTypes(resultTypes);
  return success();
}

void BlockDecoderOp::print(OpAsmPrinter &p) {
  p << " " << getInput();
  if (getMask())
    p << " mask " << getMask();
  if (getPositions())
    p << " positions " << getPositions();
  if (getCache())
    p << " cache " << getCache();
  p << " config ";
  p.printStrippedAttrOrType(getConfigAttr());
  p << " params ";
  p.printAttribute(getParamsAttr());
  p.printOptionalAttrDict((*this)->getAttrs(),
                          {"params", "config", "operandSegmentSizes"});
  p << " : ";
  llvm::interleaveComma((*this)->getOperandTypes(), p);
  p << " -> ";
  llvm::interleaveComma((*this)->getResultTypes(), p);
}

//===----------------------------------------------------------------------===//
// TokenDecoderOp
//===----------------------------------------------------------------------===//

LogicalResult TokenDecoderOp::verify() {
  if (failed(checkRank(*this, "context_embedding", getContextEmbedding(), 3, "[B, N_blk, D]")) ||
      failed(checkRank(*this, "ids", getIds(), 3, "[B, N_blk, L_B]")) ||
      failed(checkRank(*this, "result", getResult(), 4, "[B, N_blk, L_B, T]")))
    return failure();
  ArrayRef<int64_t> ctx = tensorType(getContextEmbedding()).getShape();
  ArrayRef<int64_t> ids = tensorType(getIds()).getShape();
  int64_t t = getConfig().getHidden();
  if (!dimsCompatible(ctx[0], ids[0]) || !dimsCompatible(ctx[1], ids[1]))
    return emitOpError() << "ids " << shapeStr(ids)
                         << " must have the [B, N_blk] of the context "
                         << shapeStr(ctx.take_front(2));
  if (getMask() && failed(checkShape(*this, "mask", getMask(), ids)))
    return failure();
  if (failed(checkShape(*this, "result", getResult(),
                        {ctx[0], ctx[1], ids[2], t})))
    return failure();
  if (failed(checkSameElementType(*this, "result", getResult(),
                                  tensorType(getContextEmbedding()).getElementType())))
    return failure();
  // Read the attribute as signed: the generated getter is unsigned.
  int64_t prefixLength = getPrefixLengthAttr().getInt();
  if (prefixLength < 1)
    return emitOpError() << "prefix_length must be >= 1, got " << prefixLength;
  if (ShapedType::isDynamic(ids[2]))
    return emitOpError() << "block length L_B must be static";
  if (getStrategy() == TokenDecoderStrategy::summation &&
      prefixLength != ids[2])
    return emitOpError() << "the summation strategy projects one vector per "
                            "token: prefix_length ("
                         << prefixLength
                         << ") must equal the block length L_B (" << ids[2]
                         << ")";
  return success();
}

LogicalResult TokenDecoderOp::verifySymbolUses(SymbolTableCollection &tables) {
  int64_t d = tensorType(getContextEmbedding()).getDimSize(2);
  return verifyParams(
      *this, tables,
      getTokenDecoderParams(getParams(), getConfig(), d, getPrefixLength()),
      tensorType(getContextEmbedding()).getElementType());
}

bool TokenDecoderOp::isBlockLocalAlong(int64_t dim) {
  return dim == 0 || dim == 1;
}
std::optional<int64_t> TokenDecoderOp::getOperandBlockDim(unsigned,
                                                          int64_t dim) {
  return dim;
}

//===----------------------------------------------------------------------===//
// TokenDecoderStepOp
//===----------------------------------------------------------------------===//

LogicalResult TokenDecoderStepOp::verify() {
  if (failed(checkRank(*this, "input", getInput(), 3, "[B, S, T]")))
    return failure();
  RankedTensorType in = tensorType(getInput());
  if (getResult().getType() != in)
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal the input type " << in;
  int64_t t = in.getDimSize(2);
  if (getConfig().getHidden() != t)
    return emitOpError() << "config hidden (" << getConfig().getHidden()
                         << ") must equal the token-decoder width T ("
                         << dimStr(t) << ")";
  if (failed(checkShape(*this, "positions", getPositions(),
                        {in.getDimSize(1)})))
    return failure();
  auto cache = llvm::cast<KVCacheType>(getCache().getType());
  if (!cache.isLocal())
    return emitOpError() << "the token decoder's cache must have 'local' "
                            "scope, got 'global'";
  if (getResultCache().getType() != cache)
    return emitOpError() << "result cache type " << getResultCache().getType()
                         << " must equal the operand cache type " << cache;
  if (failed(checkCacheAgainstConfig(*this, "cache", cache, getConfig(),
                                     in.getElementType(), in.getDimSize(0))))
    return failure();
  int64_t s = in.getDimSize(1);
  if (!ShapedType::isDynamic(s) && s > cache.getCapacity())
    return emitOpError() << "input has " << s
                         << " positions, more than the cache capacity ("
                         << cache.getCapacity() << ")";
  return success();
}

LogicalResult
TokenDecoderStepOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyParams(
      *this, tables,
      getNeoXStackParams((getParams() + ".gpt_neox").str(), getConfig()),
      tensorType(getInput()).getElementType());
}

bool TokenDecoderStepOp::consumesCache(OpOperand &) { return true; }

//===----------------------------------------------------------------------===//
// SampleOp
//===----------------------------------------------------------------------===//

LogicalResult SampleOp::verify() {
  if (failed(checkRank(*this, "logits", getLogits(), 2, "[B, V]")))
    return failure();
  return checkShape(*this, "result", getTokens(),
                    {tensorType(getLogits()).getDimSize(0)});
}

//===----------------------------------------------------------------------===//
// LMHeadOp / CrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult LMHeadOp::verify() {
  if (failed(checkMinRank(*this, "hidden", getHidden(), 1, "[..., T]")))
    return failure();
  RankedTensorType h = tensorType(getHidden());
  RankedTensorType r = tensorType(getResult());
  if (r.getRank() != h.getRank() ||
      !shapesCompatible(leading(h.getShape(), 1), leading(r.getShape(), 1)))
    return emitOpError() << "result " << shapeStr(r.getShape())
                         << " must have the leading dims of hidden "
                         << shapeStr(h.getShape()) << " and a last dim V";
  return checkSameElementType(*this, "result", getResult(), h.getElementType());
}

LogicalResult LMHeadOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<ParamOp> w =
      lookupParamOfRank(*this, tables, getWeightAttr(), "weight", 2, "[V, T]");
  if (failed(w))
    return failure();
  RankedTensorType wt = w->getTensorType();
  RankedTensorType h = tensorType(getHidden());
  RankedTensorType r = tensorType(getResult());
  if (!dimsCompatible(wt.getDimSize(1), h.getShape().back()) ||
      !dimsCompatible(wt.getDimSize(0), r.getShape().back()))
    return emitOpError() << "weight " << shapeStr(wt.getShape())
                         << " must be [V, T] with T = "
                         << dimStr(h.getShape().back()) << " and V = "
                         << dimStr(r.getShape().back());
  return checkSameElementType(*this, "hidden", getHidden(), wt.getElementType());
}

bool LMHeadOp::isBlockLocalAlong(int64_t dim) {
  return dim >= 0 && dim < tensorType(getResult()).getRank() - 1;
}
std::optional<int64_t> LMHeadOp::getOperandBlockDim(unsigned, int64_t dim) {
  return dim;
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(checkMinRank(*this, "logits", getLogits(), 1, "[..., V]")))
    return failure();
  return checkShape(*this, "labels", getLabels(),
                    leading(tensorType(getLogits()).getShape(), 1));
}

//===----------------------------------------------------------------------===//
// Layer-level ops
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::verify() {
  if (failed(checkMinRank(*this, "input", getInput(), 1, "[..., C]")))
    return failure();
  RankedTensorType in = tensorType(getInput());
  int64_t c = in.getShape().back();
  if (failed(checkShape(*this, "weight", getWeight(), {c})) ||
      failed(checkShape(*this, "bias", getBias(), {c})))
    return failure();
  if (getResult().getType() != in)
    return emitOpError() << "result type must equal the input type " << in;
  if (failed(checkSameElementType(*this, "weight", getWeight(),
                                  in.getElementType())) ||
      failed(checkSameElementType(*this, "bias", getBias(),
                                  in.getElementType())))
    return failure();
  return checkPositive(*this, "eps", getEps().convertToDouble());
}

bool LayerNormOp::isBlockLocalAlong(int64_t dim) {
  return dim >= 0 && dim < tensorType(getResult()).getRank() - 1;
}
std::optional<int64_t> LayerNormOp::getOperandBlockDim(unsigned idx,
                                                       int64_t dim) {
  if (idx == 0)
    return dim;
  return std::nullopt;
}

LogicalResult LinearOp::verify() {
  if (failed(checkMinRank(*this, "input", getInput(), 1, "[..., K]")))
    return failure();
  RankedTensorType in = tensorType(getInput());
  RankedTensorType w = tensorType(getWeight());
  if (!(w.getRank() == 2 || (w.getRank() == 3 && w.getDimSize(2) == 1)))
    return emitOpError() << "weight must be [N, K] or [N, K, 1], got "
                         << shapeStr(w.getShape());
  int64_t n = w.getDimSize(0), k = w.getDimSize(1);
  if (!dimsCompatible(in.getShape().back(), k))
    return emitOpError() << "input features (" << in.getShape().back()
                         << ") must equal the weight's K (" << k << ")";
  if (getBias() && failed(checkShape(*this, "bias", getBias(), {n})))
    return failure();
  if (failed(checkShape(*this, "result", getResult(),
                        concat(leading(in.getShape(), 1), {n}))))
    return failure();
  Type elt = in.getElementType();
  if (failed(checkSameElementType(*this, "weight", getWeight(), elt)) ||
      (getBias() && failed(checkSameElementType(*this, "bias", getBias(), elt))) ||
      failed(checkSameElementType(*this, "result", getResult(), elt)))
    return failure();
  return success();
}

bool LinearOp::isBlockLocalAlong(int64_t dim) {
  return dim >= 0 && dim < tensorType(getResult()).getRank() - 1;
}
std::optional<int64_t> LinearOp::getOperandBlockDim(unsigned idx, int64_t dim) {
  if (idx == 0)
    return dim;
  return std::nullopt;
}

bool GeluOp::isBlockLocalAlong(int64_t dim) {
  return dim >= 0 && dim < tensorType(getResult()).getRank();
}
std::optional<int64_t> GeluOp::getOperandBlockDim(unsigned, int64_t dim) {
  return dim;
}

LogicalResult EmbeddingLookupOp::verify() {
  if (failed(checkRank(*this, "table", getTable(), 2, "[V, E]")))
    return failure();
  RankedTensorType table = tensorType(getTable());
  if (failed(checkShape(*this, "result", getResult(),
                        concat(tensorType(getIds()).getShape(),
                               {table.getDimSize(1)}))))
    return failure();
  return checkSameElementType(*this, "result", getResult(),
                              table.getElementType());
}

bool EmbeddingLookupOp::isBlockLocalAlong(int64_t dim) {
  return dim >= 0 && dim < tensorType(getResult()).getRank() - 1;
}
std::optional<int64_t> EmbeddingLookupOp::getOperandBlockDim(unsigned idx,
                                                             int64_t dim) {
  if (idx == 0)
    return dim;
  return std::nullopt;
}

LogicalResult PrefixProjectionOp::verify() {
  if (failed(checkMinRank(*this, "context_embedding", getContextEmbedding(), 1, "[..., D]")) ||
      failed(checkMinRank(*this, "result", getResult(), 2, "[..., P, T]")))
    return failure();
  int64_t p = getPrefixLengthAttr().getInt();
  if (p < 1)
    return emitOpError() << "prefix_length must be >= 1, got " << p;
  RankedTensorType ctx = tensorType(getContextEmbedding());
  RankedTensorType res = tensorType(getResult());
  int64_t d = ctx.getShape().back(), t = res.getShape().back();
  if (failed(checkShape(*this, "result", getResult(),
                        concat(leading(ctx.getShape(), 1), {p, t}))))
    return failure();
  RankedTensorType w = tensorType(getWeight());
  if (w.getRank() != 2 && w.getRank() != 3)
    return emitOpError() << "weight must be [P*T, D, 1] (Conv1d) or [P*T, D], "
                            "got "
                         << shapeStr(w.getShape());
  SmallVector<int64_t> expectedW{p * t, d};
  if (w.getRank() == 3)
    expectedW.push_back(1);
  if (failed(checkShape(*this, "weight", getWeight(), expectedW)) ||
      failed(checkShape(*this, "bias", getBias(), {p * t})))
    return failure();
  Type elt = ctx.getElementType();
  if (failed(checkSameElementType(*this, "weight", getWeight(), elt)) ||
      failed(checkSameElementType(*this, "bias", getBias(), elt)) ||
      failed(checkSameElementType(*this, "result", getResult(), elt)))
    return failure();
  return success();
}

bool PrefixProjectionOp::isBlockLocalAlong(int64_t dim) {
  return dim >= 0 && dim < tensorType(getResult()).getRank() - 2;
}
std::optional<int64_t> PrefixProjectionOp::getOperandBlockDim(unsigned idx,
                                                              int64_t dim) {
  if (idx == 0)
    return dim;
  return std::nullopt;
}

void SplitQKVOp::build(OpBuilder &b, OperationState &state, Value qkv,
                       int64_t heads, int64_t headDim) {
  RankedTensorType in = tensorType(qkv);
  auto t = RankedTensorType::get(
      concat(leading(in.getShape(), 1), {heads, headDim}), in.getElementType());
  build(b, state, t, t, t, qkv, heads, headDim);
}

LogicalResult SplitQKVOp::verify() {
  if (failed(checkMinRank(*this, "qkv", getQkv(), 1, "[..., H*3*hd]")))
    return failure();
  RankedTensorType in = tensorType(getQkv());
  int64_t h = getHeads(), hd = getHeadDim();
  if (h < 1 || hd < 1)
    return emitOpError() << "heads and head_dim must be >= 1";
  if (!dimsCompatible(in.getShape().back(), 3 * h * hd))
    return emitOpError() << "qkv last dim (" << in.getShape().back()
                         << ") must equal 3 * heads * head_dim (" << 3 * h * hd
                         << ")";
  if (failed(checkShape(*this, "q", getQ(),
                        concat(leading(in.getShape(), 1), {h, hd}))) ||
      failed(checkSameElementType(*this, "q", getQ(), in.getElementType())))
    return failure();
  if (getK().getType() != getQ().getType() ||
      getV().getType() != getQ().getType())
    return emitOpError() << "q, k and v must have the same type";
  return success();
}

bool SplitQKVOp::isBlockLocalAlong(int64_t dim) {
  return dim >= 0 && dim < tensorType(getQ()).getRank() - 2;
}
std::optional<int64_t> SplitQKVOp::getOperandBlockDim(unsigned, int64_t dim) {
  return dim;
}

/// Positions are `[S]` or the leading dims of input up to and including S.
static LogicalResult checkPositions(Operation *op, Value positions,
                                    ArrayRef<int64_t> seqPrefix) {
  ArrayRef<int64_t> pos = tensorType(positions).getShape();
  if (pos.size() == 1 && dimsCompatible(pos[0], seqPrefix.back()))
    return success();
  if (shapesCompatible(pos, seqPrefix))
    return success();
  return op->emitOpError() << "positions must have shape ["
                           << (ShapedType::isDynamic(seqPrefix.back())
                                   ? std::string("?")
                                   : std::to_string(seqPrefix.back()))
                           << "] or " << shapeStr(seqPrefix) << ", got "
                           << shapeStr(pos);
}

LogicalResult RotaryOp::verify() {
  if (failed(checkMinRank(*this, "input", getInput(), 3, "[..., S, H, hd]")))
    return failure();
  RankedTensorType in = tensorType(getInput());
  if (getResult().getType() != in)
    return emitOpError() << "result type must equal the input type " << in;
  if (failed(checkRotary(*this, getRotaryDims(), in.getShape().back(),
                         getBase().convertToDouble())))
    return failure();
  return checkPositions(*this, getPositions(), leading(in.getShape(), 2));
}

bool RotaryOp::isBlockLocalAlong(int64_t dim) {
  return dim >= 0 && dim < tensorType(getResult()).getRank() - 3;
}
std::optional<int64_t> RotaryOp::getOperandBlockDim(unsigned idx, int64_t dim) {
  if (idx == 1 && tensorType(getPositions()).getRank() == 1)
    return std::nullopt;
  return dim;
}

/// Shared checks of bt.attention / bt.local_attention.
static LogicalResult verifyAttention(Operation *op, Value q, Value mask,
                                     double scale, int64_t rank,
                                     StringRef layout) {
  if (failed(checkRank(op, "q", q, rank, layout)))
    return failure();
  RankedTensorType qt = tensorType(q);
  if (mask && failed(checkShape(op, "key_mask", mask,
                                leading(qt.getShape(), 2))))
    return failure();
  return checkPositive(op, "scale", scale);
}

LogicalResult AttentionOp::verify() {
  return verifyAttention(*this, getQ(), getKeyMask(), getScale().convertToDouble(), 4,
                         "[B, S, H, hd]");
}

LogicalResult LocalAttentionOp::verify() {
  return verifyAttention(*this, getQ(), getKeyMask(), getScale().convertToDouble(), 5,
                         "[B, N_blk, S, H, hd]");
}

bool LocalAttentionOp::isBlockLocalAlong(int64_t dim) {
  return dim == 0 || dim == 1;
}
std::optional<int64_t> LocalAttentionOp::getOperandBlockDim(unsigned,
                                                            int64_t dim) {
  return dim;
}

LogicalResult FusedLocalAttentionOp::verify() {
  if (failed(checkRank(*this, "qkv", getQkv(), 4, "[B, N_blk, S, H*3*hd]")))
    return failure();
  RankedTensorType in = tensorType(getQkv());
  int64_t h = getHeads(), hd = getHeadDim();
  if (h < 1 || hd < 1)
    return emitOpError() << "heads and head_dim must be >= 1";
  if (!dimsCompatible(in.getShape().back(), 3 * h * hd))
    return emitOpError() << "qkv last dim (" << in.getShape().back()
                         << ") must equal 3 * heads * head_dim (" << 3 * h * hd
                         << ")";
  if (failed(checkRotary(*this, getRotaryDims(), hd,
                         getBase().convertToDouble())))
    return failure();
  // Owned: an ArrayRef would dangle (leading returns a temporary; the IR
  // fuzz target's ASan build found it).
  SmallVector<int64_t> bns = leading(in.getShape(), 1);
  if (failed(checkPositions(*this, getPositions(), bns)))
    return failure();
  if (getKeyMask() && failed(checkShape(*this, "key_mask", getKeyMask(), bns)))
    return failure();
  if (failed(checkShape(*this, "result", getResult(), concat(bns, {h, hd}))) ||
      failed(checkSameElementType(*this, "result", getResult(),
                                  in.getElementType())))
    return failure();
  return checkPositive(*this, "scale", getScale().convertToDouble());
}

bool FusedLocalAttentionOp::isBlockLocalAlong(int64_t dim) {
  return dim == 0 || dim == 1;
}
std::optional<int64_t> FusedLocalAttentionOp::getOperandBlockDim(unsigned idx,
                                                                 int64_t dim) {
  if (idx == 1 && tensorType(getPositions()).getRank() == 1)
    return std::nullopt;
  return dim;
}

//===----------------------------------------------------------------------===//
// KV-cache ops
//===----------------------------------------------------------------------===//

static LogicalResult checkLayer(Operation *op, KVCacheType cache, int64_t layer) {
  if (layer >= 0 && layer < cache.getLayers())
    return success();
  return op->emitOpError() << "layer " << layer << " is out of range for a "
                           << "cache of " << cache.getLayers() << " layers";
}

/// Checks a `[B, S, H, hd]` tensor against a cache's batch, heads, head_dim
/// and element type.
static LogicalResult checkAgainstCache(Operation *op, StringRef what, Value v,
                                       KVCacheType cache) {
  if (failed(checkRank(op, what, v, 4, "[B, S, H, hd]")))
    return failure();
  RankedTensorType t = tensorType(v);
  ArrayRef<int64_t> s = t.getShape();
  if (!dimsCompatible(s[0], cache.getBatch()) ||
      !dimsCompatible(s[2], cache.getHeads()) ||
      !dimsCompatible(s[3], cache.getHeadDim()))
    return op->emitOpError()
           << what << " " << shapeStr(s)
           << " does not match the cache [B, S, H, hd] = ["
           << (cache.hasStaticBatch() ? std::to_string(cache.getBatch()) : "?")
           << ", S, " << cache.getHeads() << ", " << cache.getHeadDim() << "]";
  if (!dimsCompatible(s[1], cache.getCapacity()) && s[1] > cache.getCapacity())
    return op->emitOpError() << what << " has " << s[1]
                             << " positions, more than the cache capacity ("
                             << cache.getCapacity() << ")";
  Type actual = t.getElementType();
  if (cacheHolds(cache.getElementType(), actual))
    return success();
  return op->emitOpError() << what << " element type " << actual
                           << " does not fit the cache's "
                           << cache.getElementType() << " (expected "
                           << cache.getElementType()
                           << (cache.getElementType().isBF16() ? " or f32"
                                                               : "")
                           << ")";
}

void KVAllocOp::build(OpBuilder &b, OperationState &state, Type cache,
                      Value batch) {
  build(b, state, cache, batch, /*capacity=*/Value());
}

LogicalResult KVAllocOp::verify() {
  auto type = llvm::cast<KVCacheType>(getCache().getType());
  if (type.hasStaticBatch() && getBatch())
    return emitOpError() << "batch operand given for a cache type with static "
                            "batch "
                         << type.getBatch();
  if (!type.hasStaticBatch() && !getBatch())
    return emitOpError() << "a cache type with dynamic batch '?' requires a "
                            "batch operand";
  if (type.hasStaticCapacity() && getCapacity())
    return emitOpError() << "capacity operand given for a cache type with "
                            "static capacity "
                         << type.getCapacity();
  if (!type.hasStaticCapacity() && !getCapacity())
    return emitOpError() << "a cache type with dynamic capacity '?' requires "
                            "a capacity operand";
  return success();
}

void KVAppendOp::build(OpBuilder &b, OperationState &state, Value cache,
                       int64_t layer, Value key, Value value) {
  build(b, state, cache.getType(), cache, layer, key, value, Value());
}

LogicalResult KVAppendOp::verify() {
  auto cache = llvm::cast<KVCacheType>(getCache().getType());
  if (failed(checkLayer(*this, cache, getLayer())))
    return failure();
  if (failed(checkAgainstCache(*this, "key", getKey(), cache)))
    return failure();
  if (getKeyMask() &&
      failed(checkShape(*this, "key_mask", getKeyMask(),
                        tensorType(getKey()).getShape().take_front(2))))
    return failure();
  return success();
}

bool KVAppendOp::consumesCache(OpOperand &) { return true; }

LogicalResult KVAttendOp::verify() {
  auto cache = llvm::cast<KVCacheType>(getCache().getType());
  if (failed(checkLayer(*this, cache, getLayer())) ||
      failed(checkAgainstCache(*this, "query", getQuery(), cache)))
    return failure();
  if (getResult().getType() != getQuery().getType())
    return emitOpError() << "result type must equal the query type "
                         << getQuery().getType();
  return checkPositive(*this, "scale", getScale().convertToDouble());
}

bool KVAttendOp::consumesCache(OpOperand &) { return false; }

LogicalResult KVLengthOp::verify() {
  return checkLayer(*this, llvm::cast<KVCacheType>(getCache().getType()),
                    getLayer());
}

bool KVLengthOp::consumesCache(OpOperand &) { return false; }

bool KVReleaseOp::consumesCache(OpOperand &) { return true; }

#define GET_OP_CLASSES
#include "bt/Dialect/BT/IR/BTOps.cpp.inc"
