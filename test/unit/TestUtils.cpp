//===- TestUtils.cpp - shared helpers of the bt unit tests -----------------===//

#include "TestUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace bt::test {

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

DiagnosticCapture::DiagnosticCapture(MLIRContext &ctx)
    : handler(&ctx, [this](Diagnostic &diag) {
        CapturedDiagnostic captured{diag.getSeverity(), diag.str(),
                                    diag.getLocation(), {}, {}};
        for (Diagnostic &note : diag.getNotes()) {
          captured.notes.push_back(note.str());
          captured.noteLocs.push_back(note.getLocation());
        }
        this->captured.push_back(std::move(captured));
        return success();
      }) {}

std::vector<const CapturedDiagnostic *> DiagnosticCapture::errors() const {
  std::vector<const CapturedDiagnostic *> result;
  for (const CapturedDiagnostic &d : captured)
    if (d.severity == DiagnosticSeverity::Error)
      result.push_back(&d);
  return result;
}

const CapturedDiagnostic *
DiagnosticCapture::findError(llvm::StringRef text) const {
  for (const CapturedDiagnostic *d : errors())
    if (llvm::StringRef(d->message).contains(text))
      return d;
  return nullptr;
}

std::string DiagnosticCapture::dump() const {
  if (captured.empty())
    return "  (no diagnostics)\n";
  std::string s;
  llvm::raw_string_ostream os(s);
  for (const CapturedDiagnostic &d : captured) {
    os << "  " << d.loc << ": "
       << (d.severity == DiagnosticSeverity::Error ? "error: " : "diag: ")
       << d.message << "\n";
    for (const std::string &note : d.notes)
      os << "    note: " << note << "\n";
  }
  return os.str();
}

::testing::AssertionResult hasError(const DiagnosticCapture &diags,
                                    llvm::StringRef text) {
  if (diags.findError(text))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "no error containing \"" << text.str() << "\"; captured:\n"
         << diags.dump();
}

::testing::AssertionResult hasErrorAt(const DiagnosticCapture &diags,
                                      llvm::StringRef text, Location loc) {
  const CapturedDiagnostic *d = diags.findError(text);
  if (!d)
    return hasError(diags, text);
  if (d->loc == loc)
    return ::testing::AssertionSuccess();
  std::string expected;
  llvm::raw_string_ostream os(expected);
  os << loc;
  return ::testing::AssertionFailure()
         << "error \"" << d->message << "\" is located at the wrong place "
         << "(expected " << os.str() << "); captured:\n"
         << diags.dump();
}

//===----------------------------------------------------------------------===//
// Fixture
//===----------------------------------------------------------------------===//

BTTest::BTTest() {
  ctx.disableMultithreading();
  // Notes are then only those the verifiers attach themselves.
  ctx.printOpOnDiagnostic(false);
  ctx.loadDialect<BTDialect, func::FuncDialect, scf::SCFDialect,
                  arith::ArithDialect, cf::ControlFlowDialect>();
}

Location BTTest::loc(llvm::StringRef name) {
  return NameLoc::get(StringAttr::get(&ctx, name));
}

RankedTensorType BTTest::tensor(llvm::ArrayRef<int64_t> shape, Type elt) {
  return RankedTensorType::get(shape, elt ? elt : f32());
}

Type BTTest::f32() { return Float32Type::get(&ctx); }
Type BTTest::i64() { return IntegerType::get(&ctx, 64); }

//===----------------------------------------------------------------------===//
// Model builder
//===----------------------------------------------------------------------===//

void declareParams(OpBuilder &b, Location loc, llvm::ArrayRef<ParamSpec> specs,
                   int64_t vocab, Type elt) {
  for (const ParamSpec &spec : specs) {
    llvm::SmallVector<int64_t> shape(spec.shape.begin(), spec.shape.end());
    for (int64_t &d : shape)
      if (ShapedType::isDynamic(d))
        d = vocab;
    b.create<ParamOp>(loc, spec.name, RankedTensorType::get(shape, elt));
  }
}

NeoXConfigAttr TinyModelSpec::blockConfig(MLIRContext *ctx) const {
  return NeoXConfigAttr::get(ctx, /*hidden=*/blockWidth(), /*layers=*/2,
                             /*heads=*/2, /*intermediate=*/4 * blockWidth(),
                             /*rotaryDims=*/8, /*rotaryBase=*/10000.0,
                             /*eps=*/1e-5);
}

NeoXConfigAttr TinyModelSpec::tokenConfig(MLIRContext *ctx) const {
  return NeoXConfigAttr::get(ctx, /*hidden=*/32, /*layers=*/1, /*heads=*/2,
                             /*intermediate=*/128, /*rotaryDims=*/4,
                             /*rotaryBase=*/10000.0, /*eps=*/1e-5);
}

ParamOp TinyModel::param(llvm::StringRef name) {
  return module->lookupSymbol<ParamOp>(name);
}

TinyModel buildTinyModel(MLIRContext &ctx, const TinyModelSpec &spec) {
  auto named = [&](llvm::StringRef name) -> Location {
    return NameLoc::get(StringAttr::get(&ctx, name));
  };
  OpBuilder b(&ctx);
  Type f32 = b.getF32Type(), i64 = b.getI64Type();
  NeoXConfigAttr blockConfig = spec.blockConfig(&ctx);
  NeoXConfigAttr tokenConfig = spec.tokenConfig(&ctx);
  int64_t B = spec.batch, N = spec.blocks, LB = spec.blockLen, V = spec.vocab;
  int64_t D = spec.blockWidth(), T = tokenConfig.getHidden();

  TinyModel model;
  model.module = ModuleOp::create(named("module"));
  b.setInsertionPointToEnd(model.module->getBody());

  // Every official parameter.
  Location paramLoc = named("params");
  b.create<ParamOp>(paramLoc, kEmbedderTable,
                    RankedTensorType::get({V, spec.embedWidth}, f32));
  declareParams(b, paramLoc, getNeoXStackParams(kBlockParams, blockConfig), V,
                f32);
  declareParams(b, paramLoc,
                getTokenDecoderParams(kTokenParams, tokenConfig, D,
                                      spec.prefixLength),
                V, f32);
  b.create<ParamOp>(paramLoc, kLMHeadWeight, RankedTensorType::get({V, T}, f32));

  // func.func @forward(%ids, %labels [, %block_mask] [, %token_mask]) -> loss
  auto idsType = RankedTensorType::get({B, N, LB}, i64);
  auto labelsType = RankedTensorType::get(
      spec.labelsShape ? llvm::ArrayRef<int64_t>(*spec.labelsShape)
                       : llvm::ArrayRef<int64_t>{B, N, LB},
      i64);
  llvm::SmallVector<Type> argTypes{idsType, labelsType};
  if (spec.blockMaskShape)
    argTypes.push_back(RankedTensorType::get(*spec.blockMaskShape, i64));
  if (spec.tokenMaskShape)
    argTypes.push_back(RankedTensorType::get(*spec.tokenMaskShape, i64));
  auto lossType = RankedTensorType::get({}, f32);
  model.func = b.create<func::FuncOp>(named("forward"), "forward",
                                      b.getFunctionType(argTypes, {lossType}));
  Block *entry = model.func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Value ids = entry->getArgument(0), labels = entry->getArgument(1);
  unsigned next = 2;
  Value blockMask = spec.blockMaskShape ? entry->getArgument(next++) : Value();
  Value tokenMask = spec.tokenMaskShape ? entry->getArgument(next++) : Value();

  auto blocksType = RankedTensorType::get({B, N, D}, f32);
  model.embedder =
      b.create<EmbedderOp>(named("embedder"), blocksType, ids, kEmbedderTable);
  model.blockDecoder = b.create<BlockDecoderOp>(
      named("block_decoder"), blocksType, /*result_cache=*/Type(),
      model.embedder.getResult(), blockMask, /*cache=*/Value(), kBlockParams,
      blockConfig);
  model.tokenDecoder = b.create<TokenDecoderOp>(
      named("token_decoder"), RankedTensorType::get({B, N, LB, T}, f32),
      model.blockDecoder.getResult(), ids, tokenMask, kTokenParams,
      tokenConfig, spec.strategy, spec.prefixLength);
  model.lmHead = b.create<LMHeadOp>(named("lm_head"),
                                    RankedTensorType::get({B, N, LB, V}, f32),
                                    model.tokenDecoder.getResult(),
                                    kLMHeadWeight);
  model.loss = b.create<CrossEntropyOp>(named("cross_entropy"), lossType,
                                        model.lmHead.getResult(), labels);
  b.create<func::ReturnOp>(named("return"), model.loss.getLoss());
  return model;
}

std::string print(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->print(os);
  return os.str();
}

std::string print(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return os.str();
}

std::string print(Attribute attr) {
  std::string s;
  llvm::raw_string_ostream os(s);
  attr.print(os);
  return os.str();
}

} // namespace bt::test
