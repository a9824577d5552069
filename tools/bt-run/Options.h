//===- Options.h - bt-run's command line ------------------------*- C++ -*-===//
//
// Every option of bt-run in one struct, filled by one llvm::cl parse
// (Options.cpp). `--help` lists these; MLIR's pass-manager options
// (--mlir-print-ir-after-all, --mlir-timing, ...) apply to the compile and
// are listed by `--help-hidden`; LLVM's backend flags are not shown.
//
//===----------------------------------------------------------------------===//

#ifndef BT_TOOLS_BTRUN_OPTIONS_H
#define BT_TOOLS_BTRUN_OPTIONS_H

#include "RuntimeBridge.h"

#include "llvm/ADT/Twine.h"

#include <cstdint>
#include <string>
#include <vector>

namespace bt::run {

struct RunOptions {
  std::vector<std::string> positional; ///< <command> <input>
  std::string output;                  ///< -o

  // compile
  std::string emit = "executable";
  std::string target = "cpu";
  std::string cudaPath, gpuChip = "sm_90";
  std::string nvvmKernels; ///< --nvvm-kernels (cuda: replaces the gpu.module)
  std::string cpu; ///< empty: x86-64-v3 for files, native for runs here
  std::string launcher;
  bool trainEntries = false;
  bool gradEntry = true;
  bool gradEntryGiven = false;
  bool noBlas = false;
  bool fuseLocalAttention = true;
  std::string tokenizer;
  /// --cache-dir; empty: $BT_CACHE_DIR, or no compile cache.
  std::string cacheDir;

  // the model
  std::string config, weights;
  bool randomInit = false;
  bool seededWeights = false;
  uint64_t seed = 0;
  bool seedGiven = false;
  std::string inputs;

  // train-step
  std::string grads, learningRate = "1e-3", warmupSteps = "0",
                     totalSteps = "0", stateOut, stepOutputs;

  // generate: --prompt (also plan's and bench's prompt length), and the
  // flags that are generate's alone, as given (the runtime checks them;
  // its seed comes from --seed with sampling).
  std::vector<std::string> prompts;
  rt::GenerateCommandFlags generate;

  // plan, bench
  std::string memory;
  int64_t genTokens = 128;
  bool genTokensGiven = false;
  std::string planDType; ///< --dtype as given (empty: not given)
  /// The dtype code is compiled in: --dtype, else bf16 for inference on the
  /// GPU (`cuda`, issue 13 item 2) and f32 on the CPU and for gradients and
  /// training steps (`trains`), which are compiled in f32 only.
  std::string compileDType(bool cuda, bool trains) const {
    if (!planDType.empty())
      return planDType;
    return cuda && !trains ? "bf16" : "f32";
  }
  std::string device; ///< empty: the artifact's device
  std::string batches = "1,8";
  bool batchesGiven = false;
  /// BLAS / intra-op threads of bt and of the PyTorch baseline.
  unsigned threads = 2;
  bool threadsGiven = false;
  /// bench's own options, as given (the shared ones: batches, threads,
  /// seed, prompts, genTokens, memory above).
  bridge::BenchRequest bench;
};

/// The usage text of bt-run (its commands).
extern const char *const kUsage;

/// Prints "bt-run: error: <message>"; returns 1.
int fail(const llvm::Twine &message);
/// The same followed by the usage text; returns 2.
int usage(const llvm::Twine &message);

/// Registers bt-run's options and MLIR's pass-manager, context, printing and
/// timing options, hides the rest from --help, and parses `argv` (after
/// taking `--threads N` out: libLLVM registers a hidden `threads` option of
/// its own). Returns false after a message on a bad --threads value.
bool parseOptions(int &argc, char **argv, RunOptions &options);

/// Whether the parsed command line set one of MLIR's options (--mlir-timing,
/// --mlir-print-ir-*, --mlir-elide-*, ...: every registered option named
/// mlir-*), which watch or print the passes; a compile then runs them
/// instead of taking its whole result from the compile cache.
bool mlirOptionGiven();

/// Registers MLIR's options as parseOptions does and parses only
/// `compilerArgs` (bt-run train, whose other arguments are the training
/// loop's).
RunOptions parseCompilerOptions(const std::vector<std::string> &compilerArgs);

/// Removes `--threads N` / `--threads=N` (also with one dash) from the
/// arguments into `threads`. Returns false (after a message) on a bad value.
bool takeThreadsOption(int &argc, char **argv, unsigned &threads);

} // namespace bt::run

#endif // BT_TOOLS_BTRUN_OPTIONS_H
