//===- ModelVerifyTest.cpp - model-level IR built with builders ------------===//
//
// Builds embedder → block_decoder → token_decoder → lm_head → cross_entropy
// with every official parameter declared, checks that it verifies, then
// breaks one thing at a time and checks the diagnostic (text and location).
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <set>

using namespace mlir;
using namespace bt;
using namespace bt::test;

namespace {

class ModelVerifyTest : public BTTest {};

TEST_F(ModelVerifyTest, TinyModelVerifies) {
  TinyModel model = buildTinyModel(ctx);
  ASSERT_TRUE(succeeded(verify(*model.module))) << diags.dump();
  EXPECT_TRUE(diags.all().empty()) << diags.dump();
}

TEST_F(ModelVerifyTest, DeclaresEveryOfficialParameterOnce) {
  TinyModelSpec spec;
  TinyModel model = buildTinyModel(ctx, spec);
  std::set<std::string> names;
  for (ParamOp p : model.module->getOps<ParamOp>())
    EXPECT_TRUE(names.insert(p.getSymName().str()).second)
        << "duplicate parameter " << p.getSymName().str();
  // embedder table + block stack (12 per layer + final LN) + token decoder
  // (embed_in + stack + expansion weight/bias) + untied LM head.
  EXPECT_EQ(names.size(), 1u + (12 * 2 + 2) + (1 + 12 * 1 + 2 + 2) + 1);
  for (const char *name :
       {"embedder.embeddings.weight",
        "block_decoder.gpt_neox.layers.1.attention.query_key_value.weight",
        "block_decoder.gpt_neox.final_layer_norm.bias",
        "token_decoder.gpt_neox.embed_in.weight",
        "token_decoder.gpt_neox.layers.0.mlp.dense_4h_to_h.weight",
        "token_decoder.expansion_layer.weight", "token_decoder.expansion_layer.bias",
        "token_decoder.embed_out.weight"})
    EXPECT_TRUE(names.count(name)) << name;
  // Shapes that follow from the configs: QKV [3D, D], expansion Conv1d
  // [P·T, D, 1], embed_in [V, T].
  EXPECT_EQ(model.param("block_decoder.gpt_neox.layers.1.attention."
                        "query_key_value.weight")
                .getTensorType()
                .getShape(),
            llvm::ArrayRef<int64_t>({192, 64}));
  EXPECT_EQ(model.param("token_decoder.expansion_layer.weight")
                .getTensorType()
                .getShape(),
            llvm::ArrayRef<int64_t>({64, 64, 1}));
  EXPECT_EQ(model.param("token_decoder.gpt_neox.embed_in.weight")
                .getTensorType()
                .getShape(),
            llvm::ArrayRef<int64_t>({128, 32}));
}

TEST_F(ModelVerifyTest, NeoXStackParamsFollowTheOfficialStateDict) {
  auto config = NeoXConfigAttr::get(&ctx, 64, 1, 2, 256, 8, 10000.0, 1e-5);
  std::vector<ParamSpec> specs = getNeoXStackParams("p", config);
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"p.layers.0.input_layernorm.weight", {64}},
      {"p.layers.0.input_layernorm.bias", {64}},
      {"p.layers.0.post_attention_layernorm.weight", {64}},
      {"p.layers.0.post_attention_layernorm.bias", {64}},
      {"p.layers.0.attention.query_key_value.weight", {192, 64}},
      {"p.layers.0.attention.query_key_value.bias", {192}},
      {"p.layers.0.attention.dense.weight", {64, 64}},
      {"p.layers.0.attention.dense.bias", {64}},
      {"p.layers.0.mlp.dense_h_to_4h.weight", {256, 64}},
      {"p.layers.0.mlp.dense_h_to_4h.bias", {256}},
      {"p.layers.0.mlp.dense_4h_to_h.weight", {64, 256}},
      {"p.layers.0.mlp.dense_4h_to_h.bias", {64}},
      {"p.final_layer_norm.weight", {64}},
      {"p.final_layer_norm.bias", {64}},
  };
  ASSERT_EQ(specs.size(), expected.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].name, expected[i].first);
    EXPECT_EQ(std::vector<int64_t>(specs[i].shape.begin(), specs[i].shape.end()),
              expected[i].second)
        << specs[i].name;
  }

  std::vector<ParamSpec> td =
      getTokenDecoderParams("token_decoder", config, /*contextWidth=*/96,
                            /*prefixLength=*/3);
  ASSERT_EQ(td.size(), 1 + expected.size() + 2);
  EXPECT_EQ(td.front().name, "token_decoder.gpt_neox.embed_in.weight");
  EXPECT_TRUE(ShapedType::isDynamic(td.front().shape[0]));
  EXPECT_EQ(td.front().shape[1], 64);
  EXPECT_EQ(td[1].name, "token_decoder.gpt_neox.layers.0.input_layernorm.weight");
  EXPECT_EQ(td[td.size() - 2].name, "token_decoder.expansion_layer.weight");
  EXPECT_EQ(std::vector<int64_t>(td[td.size() - 2].shape.begin(),
                                 td[td.size() - 2].shape.end()),
            (std::vector<int64_t>{3 * 64, 96, 1}));
  EXPECT_EQ(td.back().name, "token_decoder.expansion_layer.bias");
  EXPECT_EQ(std::vector<int64_t>(td.back().shape.begin(), td.back().shape.end()),
            (std::vector<int64_t>{3 * 64}));
}

TEST_F(ModelVerifyTest, PrintedModelParsesBackIdentically) {
  TinyModelSpec spec;
  spec.blockMaskShape = llvm::SmallVector<int64_t>{2, 3};
  spec.tokenMaskShape = llvm::SmallVector<int64_t>{2, 3, 4};
  TinyModel model = buildTinyModel(ctx, spec);
  ASSERT_TRUE(succeeded(verify(*model.module))) << diags.dump();
  std::string text = print(*model.module);
  EXPECT_NE(text.find("bt.block_decoder"), std::string::npos);
  EXPECT_NE(text.find("prefix_length 2"), std::string::npos) << text;
  OwningOpRef<ModuleOp> reparsed = parseSourceString<ModuleOp>(text, &ctx);
  ASSERT_TRUE(reparsed) << diags.dump();
  ASSERT_TRUE(succeeded(verify(*reparsed))) << diags.dump();
  EXPECT_EQ(print(*reparsed), text);
}

// --- one mutation at a time ------------------------------------------------

TEST_F(ModelVerifyTest, MissingParameterIsReportedAtItsUser) {
  struct Case {
    const char *name;
    const char *user;
    const char *message;
  };
  const Case cases[] = {
      {"block_decoder.gpt_neox.layers.1.attention.dense.weight", "block_decoder",
       "expects parameter @\"block_decoder.gpt_neox.layers.1.attention.dense."
       "weight\" of shape [64, 64], but no bt.param of that name is declared"},
      {"block_decoder.gpt_neox.final_layer_norm.weight", "block_decoder",
       "expects parameter @\"block_decoder.gpt_neox.final_layer_norm.weight\" "
       "of shape [64], but no bt.param"},
      {"token_decoder.expansion_layer.bias", "token_decoder",
       "expects parameter @\"token_decoder.expansion_layer.bias\" of shape "
       "[64], but no bt.param"},
      {"token_decoder.gpt_neox.embed_in.weight", "token_decoder",
       "expects parameter @\"token_decoder.gpt_neox.embed_in.weight\" of shape "
       "[?, 32], but no bt.param"},
      {"embedder.embeddings.weight", "embedder",
       "table @embedder.embeddings.weight does not name a bt.param"},
      {"token_decoder.embed_out.weight", "lm_head",
       "weight @token_decoder.embed_out.weight does not name a bt.param"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    diags.clear();
    TinyModel model = buildTinyModel(ctx);
    ParamOp param = model.param(c.name);
    ASSERT_TRUE(param);
    param.erase();
    EXPECT_TRUE(failed(verify(*model.module)));
    EXPECT_TRUE(hasErrorAt(diags, c.message, loc(c.user)));
  }
}

TEST_F(ModelVerifyTest, WrongParameterShapeIsReportedWithANoteAtTheDeclaration) {
  TinyModel model = buildTinyModel(ctx);
  ParamOp param =
      model.param("block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h.weight");
  ASSERT_TRUE(param);
  param->setLoc(loc("the_param"));
  param.setType(tensor({256, 32}));
  EXPECT_TRUE(failed(verify(*model.module)));
  ASSERT_TRUE(hasErrorAt(
      diags,
      "expects parameter @\"block_decoder.gpt_neox.layers.0.mlp.dense_h_to_4h."
      "weight\" of shape [256, 64], but it is declared as [256, 32]",
      loc("block_decoder")));
  const CapturedDiagnostic *d = diags.findError("but it is declared as");
  ASSERT_EQ(d->notes.size(), 1u);
  EXPECT_EQ(d->notes[0], "declared here");
  EXPECT_EQ(d->noteLocs[0], loc("the_param"));
}

TEST_F(ModelVerifyTest, WrongParameterElementTypeIsRejected) {
  TinyModel model = buildTinyModel(ctx);
  ParamOp param = model.param("token_decoder.expansion_layer.weight");
  ASSERT_TRUE(param);
  param.setType(tensor({64, 64, 1}, BFloat16Type::get(&ctx)));
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(diags,
                         "expects parameter @\"token_decoder.expansion_layer."
                         "weight\" of element type 'f32', but it is declared "
                         "as 'bf16'",
                         loc("token_decoder")));
}

TEST_F(ModelVerifyTest, WrongParameterRankForTheEmbedderTable) {
  TinyModel model = buildTinyModel(ctx);
  model.param(kEmbedderTable).setType(tensor({128, 16, 1}));
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(diags,
                         "table @embedder.embeddings.weight must be rank 2 "
                         "[V, E], got [128, 16, 1]",
                         loc("embedder")));
}

TEST_F(ModelVerifyTest, EmbedderWidthTimesBlockLengthMustBeTheBlockWidth) {
  TinyModel model = buildTinyModel(ctx);
  model.param(kEmbedderTable).setType(tensor({128, 8}));
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(diags,
                         "embedder width E (8) * L_B (4) = 32 must equal the "
                         "block width D (64)",
                         loc("embedder")));
}

TEST_F(ModelVerifyTest, BlockDecoderConfigWidthMustBeD) {
  TinyModel model = buildTinyModel(ctx);
  // A valid config (96 = 3 · 32) of the wrong width.
  model.blockDecoder.setConfigAttr(
      NeoXConfigAttr::get(&ctx, 96, 2, 3, 384, 8, 10000.0, 1e-5));
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(
      diags, "config hidden (96) must equal the block-decoder width D (64)",
      loc("block_decoder")));
}

TEST_F(ModelVerifyTest, TokenDecoderConfigWidthMustBeT) {
  TinyModel model = buildTinyModel(ctx);
  model.tokenDecoder.setConfigAttr(
      NeoXConfigAttr::get(&ctx, 48, 1, 3, 192, 4, 10000.0, 1e-5));
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(diags,
                         "result must have shape [2, 3, 4, 48], got [2, 3, 4, 32]",
                         loc("token_decoder")));
}

TEST_F(ModelVerifyTest, PrefixLengthZeroIsRejected) {
  TinyModel model = buildTinyModel(ctx);
  model.tokenDecoder.setPrefixLength(0);
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(diags, "prefix_length must be >= 1, got 0",
                         loc("token_decoder")));
}

// Regression: `prefix_length` is an I64Attr whose generated accessor returns
// uint64_t; the verifier must read it as signed so that -1 is rejected here
// (and not later, with a misleading message about the expansion layer).
TEST_F(ModelVerifyTest, NegativePrefixLengthIsRejected) {
  TinyModel model = buildTinyModel(ctx);
  model.tokenDecoder.setPrefixLength(static_cast<uint64_t>(-1));
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(diags, "prefix_length must be >= 1, got -1",
                         loc("token_decoder")));
}

TEST_F(ModelVerifyTest, SummationNeedsPrefixLengthEqualToBlockLength) {
  TinyModel model = buildTinyModel(ctx);
  model.tokenDecoder.setStrategy(TokenDecoderStrategy::summation);
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(diags,
                         "the summation strategy projects one vector per token: "
                         "prefix_length (2) must equal the block length L_B (4)",
                         loc("token_decoder")));
}

TEST_F(ModelVerifyTest, SummationWithPrefixLengthEqualToBlockLengthVerifies) {
  TinyModelSpec spec;
  spec.strategy = TokenDecoderStrategy::summation;
  spec.prefixLength = spec.blockLen;
  TinyModel model = buildTinyModel(ctx, spec);
  EXPECT_TRUE(succeeded(verify(*model.module))) << diags.dump();
  // The expansion layer then projects to L_B · T.
  EXPECT_EQ(model.param("token_decoder.expansion_layer.weight")
                .getTensorType()
                .getDimSize(0),
            4 * 32);
}

TEST_F(ModelVerifyTest, ChangingPrefixLengthRequiresMatchingExpansionLayer) {
  // prefix_length 3 is valid for the op, but the declared expansion layer is
  // for P = 2.
  TinyModel model = buildTinyModel(ctx);
  model.tokenDecoder.setPrefixLength(3);
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(diags,
                         "expects parameter @\"token_decoder.expansion_layer."
                         "weight\" of shape [96, 64, 1], but it is declared as "
                         "[64, 64, 1]",
                         loc("token_decoder")));
}

TEST_F(ModelVerifyTest, BlockMaskOfMatchingShapeVerifies) {
  TinyModelSpec spec;
  spec.blockMaskShape = llvm::SmallVector<int64_t>{2, 3};
  spec.tokenMaskShape = llvm::SmallVector<int64_t>{2, 3, 4};
  TinyModel model = buildTinyModel(ctx, spec);
  EXPECT_TRUE(succeeded(verify(*model.module))) << diags.dump();
  EXPECT_TRUE(model.blockDecoder.getMask());
  EXPECT_TRUE(model.tokenDecoder.getMask());
}

TEST_F(ModelVerifyTest, BlockMaskShapeMismatchIsRejected) {
  TinyModelSpec spec;
  spec.blockMaskShape = llvm::SmallVector<int64_t>{2, 4};
  TinyModel model = buildTinyModel(ctx, spec);
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(diags, "mask must have shape [2, 3], got [2, 4]",
                         loc("block_decoder")));
}

TEST_F(ModelVerifyTest, TokenMaskShapeMismatchIsRejected) {
  TinyModelSpec spec;
  spec.tokenMaskShape = llvm::SmallVector<int64_t>{2, 3, 5};
  TinyModel model = buildTinyModel(ctx, spec);
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(diags, "mask must have shape [2, 3, 4], got [2, 3, 5]",
                         loc("token_decoder")));
}

TEST_F(ModelVerifyTest, LabelsShapeMustMatchLogits) {
  TinyModelSpec spec;
  spec.labelsShape = llvm::SmallVector<int64_t>{2, 3, 5};
  TinyModel model = buildTinyModel(ctx, spec);
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(diags, "labels must have shape [2, 3, 4], got [2, 3, 5]",
                         loc("cross_entropy")));
}

TEST_F(ModelVerifyTest, LMHeadWeightMustBeVocabByT) {
  TinyModel model = buildTinyModel(ctx);
  model.param(kLMHeadWeight).setType(tensor({128, 16}));
  EXPECT_TRUE(failed(verify(*model.module)));
  EXPECT_TRUE(hasErrorAt(diags,
                         "weight [128, 16] must be [V, T] with T = 32 and V = 128",
                         loc("lm_head")));
}

// A verifier must reject malformed IR, not crash on it.
//
// Regression: with a static block length L_B = 0 (ids tensor<2x3x0xi64>, a
// legal tensor type) the verifier once computed `res[2] % ids[2]` (SIGFPE).
TEST_F(ModelVerifyTest, EmbedderWithZeroBlockLengthIsRejectedNotACrash) {
  OpBuilder b(&ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc("m"));
  b.setInsertionPointToEnd(module->getBody());
  b.create<ParamOp>(loc("p"), kEmbedderTable, tensor({128, 16}));
  auto fn = b.create<func::FuncOp>(
      loc("f"), "f", b.getFunctionType({tensor({2, 3, 0}, i64())}, {}));
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  b.create<EmbedderOp>(loc("embedder"), tensor({2, 3, 0}), entry->getArgument(0),
                       kEmbedderTable);
  b.create<func::ReturnOp>(loc("r"));
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_GE(diags.numErrors(), 1u) << diags.dump();
}

TEST_F(ModelVerifyTest, ParamRefTypeMustMatchTheDeclaration) {
  OpBuilder b(&ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc("m"));
  b.setInsertionPointToEnd(module->getBody());
  b.create<ParamOp>(loc("decl"), kLMHeadWeight, tensor({128, 32}));
  auto fn = b.create<func::FuncOp>(loc("f"), "f", b.getFunctionType({}, {}));
  b.setInsertionPointToStart(fn.addEntryBlock());
  auto ref = b.create<ParamRefOp>(loc("ref"), tensor({128, 32}), kLMHeadWeight);
  b.create<func::ReturnOp>(loc("r"));
  ASSERT_TRUE(succeeded(verify(*module))) << diags.dump();

  ref.getResult().setType(tensor({32, 128}));
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_TRUE(hasErrorAt(diags,
                         "result type 'tensor<32x128xf32>' does not match the "
                         "declared type 'tensor<128x32xf32>'",
                         loc("ref")));
  diags.clear();
  ref.setName("no.such.param");
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_TRUE(hasErrorAt(diags, "'@no.such.param' does not name a bt.param",
                         loc("ref")));
}

TEST_F(ModelVerifyTest, ParamMustBeStaticallyShaped) {
  OpBuilder b(&ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc("m"));
  b.setInsertionPointToEnd(module->getBody());
  b.create<ParamOp>(loc("decl"), "w", tensor({ShapedType::kDynamic, 32}));
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_TRUE(hasErrorAt(diags, "parameter type must be statically shaped",
                         loc("decl")));
}

} // namespace
