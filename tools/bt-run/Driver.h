//===- Driver.h - bt-run's commands -----------------------------*- C++ -*-===//
//
// What bt-run's commands share: the model to compile (a checkpoint, or a
// config with --random-init), the compile options the command line asks
// for, and the compile into an artifact (lib/Compiler's phases, then the
// runtime's artifact writer through RuntimeBridge.h). The commands that run
// a model (eval, grad, generate, bench, train-step, train) are in
// RuntimeCommands.cpp; compile, plan and info in bt-run.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef BT_TOOLS_BTRUN_DRIVER_H
#define BT_TOOLS_BTRUN_DRIVER_H

#include "Options.h"
#include "RuntimeBridge.h"

#include "bt/Compiler/Compiler.h"

#include "mlir/IR/MLIRContext.h"

#include <memory>
#include <string>
#include <vector>

namespace bt::run {

/// The state of one bt-run invocation.
struct Tool {
  const char *argv0;
  mlir::MLIRContext &context;
  const RunOptions &options;
};

/// Which training entry points a compile builds (bt-generate-train-step).
struct TrainingEntries {
  bool trainStep = false;
  bool applyGradients = false;
};

/// Loads the model of `input` (a checkpoint, or the config of --config with
/// --random-init / --weights) with or without its weights; prints the
/// loader's notices. Null after a message.
/// A diagnostic handler for bt-run's MLIRContexts: prints warnings and
/// remarks (e.g. a compile cache that cannot be used) to stderr as MLIR
/// prints errors when no handler is installed ("<loc>: warning: <message>",
/// without the notes); returns failure for errors, which MLIR then prints as
/// always. Install with mlir::ScopedDiagnosticHandler.
mlir::LogicalResult printWarning(mlir::Diagnostic &diagnostic);

std::unique_ptr<bridge::Model> loadModel(const Tool &tool,
                                         const std::string &input,
                                         bool withWeights);

/// The compile options of the command line. `thisMachine`: the result runs
/// here and now (the host CPU unless --cpu says otherwise). `withGrad`: build
/// the `grad` entry point. Fails after a message when the target does not
/// support what is asked.
mlir::FailureOr<compiler::Options>
compileOptions(const Tool &tool, bool withGrad, bool thisMachine,
               TrainingEntries training);

/// Compiles `model` into the parts of an artifact besides its weights
/// (kernels, interface, KV plan; the tokenizer of --tokenizer, checked
/// first). Fails after a message.
mlir::FailureOr<bridge::ArtifactParts>
compileArtifactParts(const Tool &tool, const bridge::Model &model,
                     const compiler::Options &options);

/// Compiles `model` into an artifact at `path` (prefixed by the runtime
/// launcher when `executable`), with the tokenizer of --tokenizer.
mlir::LogicalResult compileArtifact(const Tool &tool,
                                    const bridge::Model &model,
                                    const compiler::Options &options,
                                    const std::string &path, bool executable);

/// The artifact a command runs: `input` opened as is when it is an artifact
/// or executable; else the model of `input` compiled for this machine in
/// memory (with the grad entry point when `withGrad`, and `training`'s),
/// never written to disk; `progress` reports the compile on stderr. Null
/// after a message.
std::unique_ptr<bridge::CompiledArtifact>
compiledForThisMachine(const Tool &tool, const std::string &input,
                       bool withGrad, bool progress = false,
                       TrainingEntries training = {});

// The commands that run a model (RuntimeCommands.cpp).
int evalCommand(const Tool &tool, const std::string &input);
int gradCommand(const Tool &tool, const std::string &input);
int generateCommand(const Tool &tool, const std::string &input);
int benchCommand(const Tool &tool, const std::string &input);
int trainStepCommand(const Tool &tool, const std::string &input);
/// `bt-run train`, with a command line of its own.
int trainCommand(int argc, char **argv);

} // namespace bt::run

#endif // BT_TOOLS_BTRUN_DRIVER_H
