//===- TestUtils.h - shared helpers of the bt unit tests --------*- C++ -*-===//
//
// A fixture with an MLIRContext that has the bt dialect (and func, scf, arith,
// cf) loaded, a capture of every diagnostic emitted in that context, and a
// builder of a small but complete Block Transformer model-level function
// (every official parameter declared with bt.param).
//
//===----------------------------------------------------------------------===//

#ifndef BT_TEST_UNIT_TESTUTILS_H
#define BT_TEST_UNIT_TESTUTILS_H

#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Dialect/BT/IR/BTOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace bt::test {

/// One diagnostic as emitted, with its notes.
struct CapturedDiagnostic {
  mlir::DiagnosticSeverity severity;
  std::string message;
  mlir::Location loc;
  std::vector<std::string> notes;
  std::vector<mlir::Location> noteLocs;
};

/// Records every diagnostic emitted in a context while alive (and stops them
/// from reaching stderr).
class DiagnosticCapture {
public:
  explicit DiagnosticCapture(mlir::MLIRContext &ctx);

  const std::vector<CapturedDiagnostic> &all() const { return captured; }
  std::vector<const CapturedDiagnostic *> errors() const;
  size_t numErrors() const { return errors().size(); }
  /// The first error whose message contains `text`, or null.
  const CapturedDiagnostic *findError(llvm::StringRef text) const;
  void clear() { captured.clear(); }
  /// Every diagnostic, one per line, for failure messages.
  std::string dump() const;

private:
  std::vector<CapturedDiagnostic> captured;
  mlir::ScopedDiagnosticHandler handler;
};

/// gtest predicate: some captured error contains `text`.
::testing::AssertionResult hasError(const DiagnosticCapture &diags,
                                    llvm::StringRef text);
/// gtest predicate: some captured error contains `text` and is located at `loc`.
::testing::AssertionResult hasErrorAt(const DiagnosticCapture &diags,
                                      llvm::StringRef text, mlir::Location loc);

/// Base fixture: a context with the dialects loaded and a diagnostic capture.
class BTTest : public ::testing::Test {
protected:
  BTTest();

  mlir::Location loc(llvm::StringRef name);
  mlir::RankedTensorType tensor(llvm::ArrayRef<int64_t> shape,
                                mlir::Type elt = {});
  mlir::Type f32();
  mlir::Type i64();

  mlir::MLIRContext ctx;
  DiagnosticCapture diags{ctx};
};

/// Declares `bt.param` ops for `specs` at the builder's insertion point;
/// dynamic dims (the vocabulary of embed_in) are replaced by `vocab`.
void declareParams(mlir::OpBuilder &b, mlir::Location loc,
                   llvm::ArrayRef<ParamSpec> specs, int64_t vocab,
                   mlir::Type elt);

/// A small Block Transformer: B = 2, N_blk = 3, L_B = 4, V = 128, E = 16,
/// D = 64 (block decoder: 2 layers, 2 heads of 32), T = 32 (token decoder:
/// 1 layer, 2 heads of 16), P = 2.
struct TinyModelSpec {
  int64_t batch = 2, blocks = 3, blockLen = 4, vocab = 128, embedWidth = 16;
  int64_t prefixLength = 2;
  TokenDecoderStrategy strategy = TokenDecoderStrategy::prefix;
  /// Shapes of the optional block / token attention masks (function args).
  std::optional<llvm::SmallVector<int64_t>> blockMaskShape, tokenMaskShape;
  /// Shape of the labels (default [B, N_blk, L_B]).
  std::optional<llvm::SmallVector<int64_t>> labelsShape;

  int64_t blockWidth() const { return blockLen * embedWidth; }
  NeoXConfigAttr blockConfig(mlir::MLIRContext *ctx) const;
  NeoXConfigAttr tokenConfig(mlir::MLIRContext *ctx) const;
};

/// The names of the parameters of a tiny model, by role.
inline constexpr const char *kEmbedderTable = "embedder.embeddings.weight";
inline constexpr const char *kBlockParams = "block_decoder.gpt_neox";
inline constexpr const char *kTokenParams = "token_decoder";
inline constexpr const char *kLMHeadWeight = "token_decoder.embed_out.weight";

/// The model-level function
///   embedder → block_decoder → token_decoder → lm_head → cross_entropy
/// in a module that declares every parameter. Each model-level op has a
/// NameLoc with its mnemonic ("embedder", "block_decoder", ...).
struct TinyModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
  EmbedderOp embedder;
  BlockDecoderOp blockDecoder;
  TokenDecoderOp tokenDecoder;
  LMHeadOp lmHead;
  CrossEntropyOp loss;

  /// The bt.param named `name` (null if absent).
  ParamOp param(llvm::StringRef name);
};
TinyModel buildTinyModel(mlir::MLIRContext &ctx,
                         const TinyModelSpec &spec = TinyModelSpec());

/// Prints an op (custom form, no debug info), a type or an attribute.
std::string print(mlir::Operation *op);
std::string print(mlir::Type type);
std::string print(mlir::Attribute attr);

} // namespace bt::test

#endif // BT_TEST_UNIT_TESTUTILS_H
