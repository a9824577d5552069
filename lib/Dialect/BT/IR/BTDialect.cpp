//===- BTDialect.cpp - bt dialect, attributes and types --------------------===//

#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace bt;

#include "bt/Dialect/BT/IR/BTDialect.cpp.inc"
#include "bt/Dialect/BT/IR/BTEnums.cpp.inc"
#include "bt/Dialect/BT/IR/BTInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "bt/Dialect/BT/IR/BTAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "bt/Dialect/BT/IR/BTTypes.cpp.inc"

void BTDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "bt/Dialect/BT/IR/BTAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "bt/Dialect/BT/IR/BTTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "bt/Dialect/BT/IR/BTOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Discardable attributes of function arguments and results
//===----------------------------------------------------------------------===//

namespace {
SmallVector<StringRef> namesOf(ArrayAttr array) {
  SmallVector<StringRef> names;
  if (array)
    for (Attribute a : array)
      if (auto s = dyn_cast<StringAttr>(a))
        names.push_back(s.getValue());
  return names;
}
} // namespace

StringAttr BTDialect::getArgName(FunctionOpInterface fn, unsigned i) {
  return fn.getArgAttrOfType<StringAttr>(i, getNameAttrName());
}

StringAttr BTDialect::getResultName(FunctionOpInterface fn, unsigned i) {
  return fn.getResultAttrOfType<StringAttr>(i, getNameAttrName());
}

SmallVector<StringRef> BTDialect::getArgDims(FunctionOpInterface fn,
                                             unsigned i) {
  return namesOf(fn.getArgAttrOfType<ArrayAttr>(i, getDimsAttrName()));
}

SmallVector<StringRef> BTDialect::getResultDims(FunctionOpInterface fn,
                                                unsigned i) {
  return namesOf(fn.getResultAttrOfType<ArrayAttr>(i, getDimsAttrName()));
}

bool BTDialect::isInOutArg(FunctionOpInterface fn, unsigned i) {
  Attribute io = fn.getArgAttr(i, getInOutAttrName());
  if (auto flag = dyn_cast_or_null<BoolAttr>(io))
    return flag.getValue();
  return static_cast<bool>(io);
}

StringAttr BTDialect::getResultInOutArg(FunctionOpInterface fn, unsigned i) {
  return fn.getResultAttrOfType<StringAttr>(i, getInOutArgAttrName());
}

StringAttr BTDialect::getArgParam(FunctionOpInterface fn, unsigned i) {
  return fn.getArgAttrOfType<StringAttr>(i, getParamAttrName());
}

SmallVector<StringRef> BTDialect::getParams(Operation *fn) {
  return namesOf(fn->getAttrOfType<ArrayAttr>(ParamsAttrHelper::getNameStr()));
}

//===----------------------------------------------------------------------===//
// #bt.neox
//===----------------------------------------------------------------------===//

double NeoXConfigAttr::getAttentionScale() const {
  return 1.0 / std::sqrt(static_cast<double>(getHeadDim()));
}

LogicalResult NeoXConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                     int64_t hidden, int64_t layers, int64_t heads,
                                     int64_t headDim, int64_t intermediate,
                                     int64_t rotaryDims, APFloat rotaryBase,
                                     APFloat eps) {
  auto positive = [&](StringRef name, int64_t v) -> LogicalResult {
    if (v >= 1)
      return success();
    return emitError() << "#bt.neox: '" << name << "' must be >= 1, got " << v;
  };
  if (failed(positive("hidden", hidden)) || failed(positive("layers", layers)) ||
      failed(positive("heads", heads)) || failed(positive("head_dim", headDim)) ||
      failed(positive("intermediate", intermediate)))
    return failure();
  if (heads * headDim != hidden)
    return emitError() << "#bt.neox: hidden (" << hidden
                       << ") must equal heads (" << heads << ") * head_dim ("
                       << headDim << ")";
  if (rotaryDims < 0 || rotaryDims > headDim || rotaryDims % 2 != 0)
    return emitError() << "#bt.neox: rotary_dims (" << rotaryDims
                       << ") must be even and in [0, head_dim = " << headDim
                       << "]";
  if (!(rotaryBase.convertToDouble() > 0.0))
    return emitError() << "#bt.neox: rotary_base must be > 0";
  if (!(eps.convertToDouble() > 0.0))
    return emitError() << "#bt.neox: eps must be > 0";
  return success();
}

/// Parses `name = <integer>`.
static ParseResult parseIntField(AsmParser &p, StringRef name, int64_t &v) {
  return failure(p.parseKeyword(name) || p.parseEqual() || p.parseInteger(v));
}

/// Parses `name = <float>`. As everywhere in MLIR, a decimal integer literal
/// is rejected ("add a trailing dot"): write `10000.0`, not `10000`.
static ParseResult parseFloatField(AsmParser &p, StringRef name, APFloat &v) {
  double d;
  if (p.parseKeyword(name) || p.parseEqual() || p.parseFloat(d))
    return failure();
  v = APFloat(d);
  return success();
}

Attribute NeoXConfigAttr::parse(AsmParser &p, Type type) {
  SMLoc loc = p.getCurrentLocation();
  // `#bt.neox<...> : T` is how MLIR spells a typed attribute; this one has no
  // type. Seen when the attribute is written in full right before an op's
  // `: types` (the parser takes them as the attribute's type).
  if (type && !llvm::isa<NoneType>(type)) {
    p.emitError(loc) << "#bt.neox takes no type, got " << type
                     << "; if this is the op's type list, move the config "
                        "before other keywords or use an alias (#cfg = ...)";
    return {};
  }
  int64_t hidden, layers, heads, headDim, intermediate, rotaryDims;
  APFloat base(0.0), eps(0.0);
  if (p.parseLess() || parseIntField(p, "hidden", hidden) || p.parseComma() ||
      parseIntField(p, "layers", layers) || p.parseComma() ||
      parseIntField(p, "heads", heads) || p.parseComma() ||
      parseIntField(p, "head_dim", headDim) || p.parseComma() ||
      parseIntField(p, "intermediate", intermediate) || p.parseComma() ||
      parseIntField(p, "rotary_dims", rotaryDims) || p.parseComma() ||
      parseFloatField(p, "rotary_base", base) || p.parseComma() ||
      parseFloatField(p, "eps", eps) || p.parseGreater())
    return {};
  return getChecked([&] { return p.emitError(loc); }, p.getContext(), hidden,
                    layers, heads, headDim, intermediate, rotaryDims, base, eps);
}

void NeoXConfigAttr::print(AsmPrinter &p) const {
  p << "<hidden = " << getHidden() << ", layers = " << getLayers()
    << ", heads = " << getHeads() << ", head_dim = " << getHeadDim()
    << ", intermediate = " << getIntermediate()
    << ", rotary_dims = " << getRotaryDims() << ", rotary_base = ";
  p.printFloat(getRotaryBase());
  p << ", eps = ";
  p.printFloat(getEps());
  p << ">";
}

//===----------------------------------------------------------------------===//
// !bt.kv_cache
//===----------------------------------------------------------------------===//

int64_t KVCacheType::getBytesPerEntry() const {
  int64_t bits = getElementType().getIntOrFloatBitWidth();
  return 2 * getLayers() * getHeads() * getHeadDim() * bits / 8;
}

int64_t KVCacheType::getBytesPerSequence() const {
  if (!hasStaticCapacity())
    return ShapedType::kDynamic;
  return getCapacity() * getBytesPerEntry();
}

LogicalResult KVCacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  CacheScope scope, int64_t batch, int64_t layers,
                                  int64_t heads, int64_t capacity, int64_t headDim,
                                  Type elementType) {
  if (!ShapedType::isDynamic(batch) && batch < 1)
    return emitError() << "!bt.kv_cache: batch must be >= 1 or '?', got "
                       << batch;
  auto positive = [&](StringRef name, int64_t v) -> LogicalResult {
    if (v >= 1)
      return success();
    return emitError() << "!bt.kv_cache: " << name << " must be >= 1, got " << v;
  };
  if (failed(positive("layers", layers)) || failed(positive("heads", heads)) ||
      failed(positive("head_dim", headDim)))
    return failure();
  if (ShapedType::isDynamic(capacity)) {
    if (scope == CacheScope::local)
      return emitError() << "!bt.kv_cache: a local cache must have a static "
                            "capacity (at most P + L_B entries)";
  } else if (failed(positive("capacity", capacity))) {
    return failure();
  }
  if (!elementType.isF32() && !elementType.isBF16() && !elementType.isF16())
    return emitError() << "!bt.kv_cache: element type must be f32, bf16 or "
                          "f16, got "
                       << elementType;
  return success();
}

Type KVCacheType::parse(AsmParser &p) {
  SMLoc loc = p.getCurrentLocation();
  StringRef scopeName;
  if (p.parseLess() || p.parseKeyword(&scopeName))
    return {};
  std::optional<CacheScope> scope = symbolizeCacheScope(scopeName);
  if (!scope) {
    p.emitError(loc, "expected cache scope 'global' or 'local', got '")
        << scopeName << "'";
    return {};
  }
  int64_t batch, layers, heads, capacity, headDim;
  // `name = <integer> | ?`.
  auto parseDim = [&](StringRef name, int64_t &v) -> ParseResult {
    if (p.parseKeyword(name) || p.parseEqual())
      return failure();
    if (succeeded(p.parseOptionalQuestion())) {
      v = ShapedType::kDynamic;
      return success();
    }
    return p.parseInteger(v);
  };
  Type elementType;
  if (p.parseComma() || parseDim("batch", batch) || p.parseComma() ||
      parseIntField(p, "layers", layers) || p.parseComma() ||
      parseIntField(p, "heads", heads) || p.parseComma() ||
      parseDim("capacity", capacity) || p.parseComma() ||
      parseIntField(p, "head_dim", headDim) || p.parseComma() ||
      p.parseType(elementType) || p.parseGreater())
    return {};
  return getChecked([&] { return p.emitError(loc); }, p.getContext(), *scope,
                    batch, layers, heads, capacity, headDim, elementType);
}

void KVCacheType::print(AsmPrinter &p) const {
  p << "<" << stringifyCacheScope(getScope()) << ", batch = ";
  if (hasStaticBatch())
    p << getBatch();
  else
    p << "?";
  p << ", layers = " << getLayers() << ", heads = " << getHeads()
    << ", capacity = ";
  if (hasStaticCapacity())
    p << getCapacity();
  else
    p << "?";
  p << ", head_dim = " << getHeadDim()
    << ", " << getElementType() << ">";
}
