//===- RuntimeBridge.h - bt-run's interface to the runtime ------*- C++ -*-===//
//
// The runtime (runtime/, protobuf + abseil, built with exceptions and RTTI)
// and the compiler (LLVM/MLIR, built without) meet in bt-run through this
// std-only interface. RuntimeBridge.cpp is the only bt-run file that
// includes runtime headers.
//
//===----------------------------------------------------------------------===//

#ifndef BT_TOOLS_BTRUN_RUNTIMEBRIDGE_H
#define BT_TOOLS_BTRUN_RUNTIMEBRIDGE_H

#include "bt/Compiler/KernelInterface.h"
#include "bt/Model/ModelSpec.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bt::bridge {

/// A model loaded from a checkpoint: its configuration and, when loaded
/// with weights, its validated f32 weights.
class Model {
public:
  ~Model();
  const ModelSpec &spec() const;
  /// Human-readable configuration (DescribeModelConfig).
  std::string describe() const;
  /// Notices from loading (e.g. ignored unused tensors).
  const std::vector<std::string> &notices() const;
  /// Warnings from loading (e.g. NaN/Inf weights; rt::Checkpoint::warnings).
  const std::vector<std::string> &warnings() const;
  bool hasWeights() const;

  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// Where a checkpoint is: a directory (config.yaml preferred over
/// config.json, model.safetensors) or explicit files.
struct CheckpointPaths {
  std::string path;         // directory or config file
  std::string configPath;   // --config: overrides the directory's config
  std::string weightsPath;  // --weights: overrides dir/model.safetensors
};

/// Loads the configuration (and, if `withWeights`, the weights, validated
/// against the official parameter list) of a checkpoint. On error returns
/// null and sets `error` to a located message (file, field or tensor).
std::unique_ptr<Model> loadModel(const CheckpointPaths &paths,
                                 bool withWeights, std::string &error);

/// Loads only a configuration file (YAML/JSON) and fills the weights with a
/// seeded random initialization like the official one (normal(0, 0.02)
/// linear/embedding weights, zero biases, unit LayerNorm weights, expansion
/// layer normal(0, D^-1/2)), as the paper's throughput script does.
std::unique_ptr<Model> randomModel(const std::string &configPath,
                                   uint64_t seed, std::string &error);

/// The Block Transformer of `configPath` initialized from the vanilla
/// checkpoint directory `vanillaDir` the official uptraining way
/// (bt::rt::InitBlockFromVanilla; `seed` fills the unused tensors only).
/// A released vanilla folder (only model.safetensors) takes its config from
/// `load_from_vanilla.config_path` of the trainer YAML `trainerYaml`
/// (default: `configPath`; bt::rt::LoadVanillaCheckpoint).
std::unique_ptr<Model> vanillaInitModel(const std::string &configPath,
                                        const std::string &vanillaDir,
                                        uint64_t seed, std::string &error,
                                        const std::string &trainerYaml = "");

/// The KV-cache memory plan stored in the manifest (bt.proto KVMemoryPlan):
/// per-sequence coefficients of bt-plan-kv-memory (bt::KVPlan), bytes.
struct KVPlanInfo {
  int64_t blockLength = 0; ///< 0: no plan (the manifest gets none)
  int64_t globalBytesPerEntry = 0;
  int64_t localBytesPerSequence = 0;
  int64_t weightBytes = 0;
  std::string source;
};

/// Writes an artifact (docs/abi.md) for `model` with the compiled kernels
/// (`kernels`, the shared object, with the entry points of `interface`);
/// with `launcherPath` non-empty, prefixes the launcher to make a standalone
/// executable; `tokenizer` (a SentencePiece model proto or a tokenizer.json,
/// see readTokenizer) becomes the tokenizer section, its kind detected
/// (rt::DetectTokenizerKind); `kvPlan` the manifest's kv_plan; `gpu`
/// the CUDA target's parts (docs/abi.md, "Kernel library (CUDA target)":
/// then `kernels` is the host code). Atomic (temp file + rename).
struct GPUArtifactInfo {
  std::string ptx;  // non-empty: target "cuda", the ptx section
  std::string chip; // e.g. "sm_90"
  std::string cudaEmu; // the cuda_emu section: the kernels for the emulator
};
bool writeArtifact(const Model &model, const KernelInterface &interface,
                   const std::string &kernels, const std::string &cpu,
                   const std::string &launcherPath, const std::string &outPath,
                   std::string &error, const std::string &tokenizer = "",
                   const KVPlanInfo &kvPlan = {},
                   const GPUArtifactInfo &gpu = {});

/// Reads a tokenizer file into `bytes` and checks it: a SentencePiece model
/// (spm_train's .model, loaded with libsentencepiece) or a Hugging Face
/// tokenizer.json (byte-level BPE, bt_bpe), with at most the model's
/// vocabulary size of ids. On error returns false with `error` set.
bool readTokenizer(const Model &model, const std::string &path,
                   std::string &bytes, std::string &error);

/// `bt-run train` before compiling: parses the training loop's arguments
/// (`loopArgs`, bt/runtime/train.h ParseTrainArgs) and runs
/// PrepareTrainingModel: the config to compile (`compileConfig`, in the
/// output directory: vocab_size = the tokenizer's) and the tokenizer to
/// embed (`tokenizerFile`): the SentencePiece model trained on the text with
/// `vocabSize` pieces (0: the config's vocab_size) and `spmModelType`
/// (unigram|bpe) unless `tokenizerPath` names one (a SentencePiece model or
/// a tokenizer.json). With --resume both come
/// from the checkpoint. On error returns false with `error` set
/// (`usageError` true for bad arguments).
bool prepareTraining(const std::vector<std::string> &loopArgs,
                     const std::string &configPath,
                     const std::string &tokenizerPath, int64_t vocabSize,
                     const std::string &spmModelType,
                     std::string &compileConfig, std::string &tokenizerFile,
                     std::string &outputDir, std::string &error,
                     bool &usageError);

/// Usage text of the training loop's arguments (TrainUsage).
std::string trainLoopUsage();

/// True if `path` ends with a bt artifact trailer (artifact or executable).
bool isArtifact(const std::string &path);

/// For a regular file that holds binary data (a NUL byte, an ELF header or
/// the artifact magic in its first 4 KiB) but does not open as an artifact:
/// the artifact loader's error, naming `path` (a truncated or damaged
/// artifact, rather than "invalid YAML"). Otherwise "".
std::string damagedArtifactError(const std::string &path);

/// The checks train-step's checkpoint output `dir` gets before it is
/// written (rt::CheckCheckpointOutputDir: a new or empty directory, or a
/// checkpoint; never another directory), for bt-run to make before the
/// compile. False with `error`.
bool checkCheckpointOutputDir(const std::string &dir, std::string &error);

/// Writes `bytes` to `path` through the runtime's AtomicFileWriter
/// (bt/runtime/base/file_util.h: symbolic links followed, devices and FIFOs
/// written in place, directories and inputs refused). False with `error`.
bool writeOutputFile(const std::string &path, const std::string &bytes,
                     std::string &error);

/// `bt-run init-from-vanilla`: bt::rt::InitFromVanillaCommand (uptraining
/// init, bt/runtime/model/init_from_vanilla.h). Returns false with `error` set.
bool initFromVanilla(const std::string &vanillaDir, const std::string &configPath,
                     const std::string &outDir, uint64_t seed, std::string &error);

/// Sets the CPU threads of this process (generated kernels and OpenBLAS,
/// rt::SetBlasThreads): bt-run's --threads for every command.
void setThreads(unsigned threads);

/// Runs a launcher command (`info`, `eval --inputs X -o Y`, ...) on the
/// artifact at `artifactPath`, exactly as the standalone executable would.
/// Returns the process exit code.
int runLauncher(const std::string &artifactPath,
                const std::vector<std::string> &args);

} // namespace bt::bridge

#endif // BT_TOOLS_BTRUN_RUNTIMEBRIDGE_H
