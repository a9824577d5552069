//===- OptDriver.cpp - bt-opt's driver: limits, stack, atomic output ------===//

#include "OptDriver.h"

#include "bt/runtime/base/file_util.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/thread.h"

#include <optional>
#include <string>

using namespace mlir;

long bt::findNestingBeyond(llvm::StringRef text, unsigned limit) {
  unsigned depth = 0;
  const size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    const char c = text[i];
    const char next = i + 1 < n ? text[i + 1] : '\0';
    switch (c) {
    case '"': // a string literal; \" and \\ are escapes
      for (++i; i < n && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      break;
    case '/': // a // comment
      if (next == '/')
        while (i < n && text[i] != '\n')
          ++i;
      break;
    case '-': // ->
      if (next == '>')
        ++i;
      break;
    case '<':
      if (next == '=') { // <=
        ++i;
        break;
      }
      [[fallthrough]];
    case '(':
    case '[':
    case '{':
      if (++depth > limit)
        return static_cast<long>(i);
      break;
    case '>':
      if (next == '=') { // >=
        ++i;
        break;
      }
      [[fallthrough]];
    case ')':
    case ']':
    case '}':
      if (depth > 0)
        --depth;
      break;
    default:
      break;
    }
  }
  return -1;
}

LogicalResult bt::checkIRNesting(llvm::StringRef text, llvm::StringRef name,
                                 llvm::raw_ostream &os, unsigned limit) {
  long at = findNestingBeyond(text, limit);
  if (at < 0)
    return success();
  // file:line:col as MLIR's diagnostics print it (no source line: it can be
  // megabytes long).
  llvm::StringRef before = text.take_front(static_cast<size_t>(at));
  size_t line = before.count('\n') + 1;
  size_t lineStart = before.rfind('\n');
  size_t col = lineStart == llvm::StringRef::npos ? before.size() + 1
                                                  : before.size() - lineStart;
  os << name << ":" << line << ":" << col << ": error: the IR nests brackets "
     << "more than " << limit << " levels deep here; bt-opt refuses it (the "
     << "parser recurses once per level)\n";
  return failure();
}

void bt::runOnLargeStack(llvm::function_ref<void()> fn, unsigned stackBytes) {
  llvm::thread worker(std::optional<unsigned>(stackBytes), [&] { fn(); });
  worker.join();
}

int bt::btOptMain(int argc, char **argv, DialectRegistry &registry) {
  llvm::InitLLVM init(argc, argv);
  auto [inputFilename, outputFilename] =
      registerAndParseCLIOptions(argc, argv, "bt optimizer driver\n", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) {
    llvm::outs() << "Available Dialects: ";
    llvm::interleave(registry.getDialectNames(), llvm::outs(), ",");
    llvm::outs() << "\n";
    return 0;
  }
  // A pass option that does not parse (--bt-plan-kv-memory="prompt-tokens=abc")
  // is reported by llvm::cl on stderr, and MLIR then emits an error with an
  // empty message; say what it is.
  MlirOptMainConfig withPipeline = config;
  config.setPassPipelineSetupFn([withPipeline](PassManager &pm) {
    ScopedDiagnosticHandler handler(pm.getContext(), [](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error && d.str().empty())
        d << "invalid pass pipeline: a pass option does not parse (the "
             "option parser's message is above)";
      return failure(); // on to the next handler, which prints it
    });
    return withPipeline.setupPassPipeline(pm);
  });

  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(inputFilename, &errorMessage);
  if (!file) {
    llvm::WithColor::error(llvm::errs(), "bt-opt") << errorMessage << "\n";
    return 1;
  }
  if (failed(checkIRNesting(file->getBuffer(), file->getBufferIdentifier(),
                            llvm::errs())))
    return 1;

  // stdout streams (partial output of --split-input-file stays visible on
  // failure, as in mlir-opt); a file is written atomically on success only.
  const bool toStdout = outputFilename == "-";
  std::string text;
  llvm::raw_string_ostream buffered(text);
  llvm::raw_ostream &os =
      toStdout ? static_cast<llvm::raw_ostream &>(llvm::outs()) : buffered;
  LogicalResult result = failure();
  runOnLargeStack([&] {
    result = MlirOptMain(os, std::move(file), registry, config);
  });
  if (failed(result))
    return 1;
  if (toStdout)
    return 0;
  buffered.flush();
  absl::Status written = rt::WriteFileAtomically(outputFilename, text);
  if (!written.ok()) {
    llvm::WithColor::error(llvm::errs(), "bt-opt")
        << std::string(written.message()) << "\n";
    return 1;
  }
  return 0;
}
