//===- RuntimeBridge.h - bt-run's interface to the runtime ------*- C++ -*-===//
//
// The runtime (runtime/, protobuf + abseil, built with exceptions and RTTI)
// and the compiler (LLVM/MLIR, built without) meet in bt-run through this
// std-only interface. RuntimeBridge.cpp is the only bt-run file that
// includes the runtime's abseil/protobuf headers; this header includes only
// the runtime's std-only command_flags.h.
//
//===----------------------------------------------------------------------===//

#ifndef BT_TOOLS_BTRUN_RUNTIMEBRIDGE_H
#define BT_TOOLS_BTRUN_RUNTIMEBRIDGE_H

#include "bt/Compiler/KernelInterface.h"
#include "bt/Model/ModelSpec.h"
#include "bt/runtime/tooling/command_flags.h"

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

/// The CUDA target's parts of an artifact (docs/abi.md, "Kernel library
/// (CUDA target)"); all empty for the CPU target.
struct GPUArtifactInfo {
  std::string ptx;  // non-empty: target "cuda", the ptx section
  std::string chip; // e.g. "sm_90"
  std::string cudaEmu; // the cuda_emu section: the kernels for the emulator
};

/// What the compiler adds to a model's weights to make an artifact
/// (docs/abi.md): the kernels (`kernels`, the shared object; the host code
/// for CUDA) with the entry points of `interface`, the CPU they were built
/// for, the tokenizer section (`tokenizer`: a SentencePiece model proto or a
/// tokenizer.json, see readTokenizer; its kind detected by
/// rt::DetectTokenizerKind) and the CUDA parts. The interface's entry points
/// and KV plan become the manifest's entry_points and kv_plan.
struct ArtifactParts {
  KernelInterface interface;
  std::string kernels, cpu, tokenizer;
  GPUArtifactInfo gpu;
  /// Store the model's random-init seed instead of its weights
  /// (Manifest.random_init: the runtime draws the same weights at load,
  /// rt::RandomInitWeights). Only for a model of randomModel.
  bool seededWeights = false;
};

/// Writes the artifact of `model` and `parts` to `outPath`, atomically (temp
/// file + rename); with `launcherPath` non-empty, prefixed by the launcher
/// to make a standalone executable. On error returns false with `error` set.
bool writeArtifact(const Model &model, const ArtifactParts &parts,
                   const std::string &launcherPath, const std::string &outPath,
                   std::string &error);

/// An artifact ready to run in this process : one opened
/// from a file, or one built in memory (ArtifactWriter::Serialize, then
/// Artifact::FromBytes) that is never written to disk.
class CompiledArtifact {
public:
  ~CompiledArtifact();
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// Opens the artifact or executable at `path`. Null with `error` set.
std::unique_ptr<CompiledArtifact> openArtifact(const std::string &path,
                                               std::string &error);
/// Whether `artifact`'s kernels were compiled with `dtype` (f32 or bf16:
/// `--dtype` given with an artifact rather than a checkpoint). False with
/// `error` set (rt::CheckArtifactDType's message) otherwise.
bool checkArtifactDType(const CompiledArtifact &artifact,
                        const std::string &dtype, std::string &error);
/// The artifact of `model` and `parts` in memory, named "<model name>
/// (compiled in memory)" in messages. Null with `error` set.
std::unique_ptr<CompiledArtifact> buildArtifact(const Model &model,
                                                const ArtifactParts &parts,
                                                std::string &error);

// The commands that run a model in process , on `device`
// (cpu, cuda, cuda-emu; empty: the artifact's). Each opens the model
// (rt::Model::Open), calls the runtime's command function with its option
// struct and returns the exit status as bt-launcher would: 0, 1 after a
// runtime error, 2 after a usage error (messages on stderr).

/// `eval` (rt::RunEvalCommand) or, with `grad`, `grad` (rt::RunGradCommand)
/// on the safetensors file `inputs`, writing `output`.
int runEval(const CompiledArtifact &artifact, const std::string &device,
            const std::string &inputs, const std::string &output, bool grad);

/// `info` (rt::RunInfoCommand): the manifest; a CPU artifact is opened on
/// `device` first, so that kernels that do not load are reported.
int runInfo(const CompiledArtifact &artifact, const std::string &device);

/// `train-step`: `args` (the arguments after `train-step`, e.g. `--inputs
/// batch.safetensors -o out/ --lr 1e-3`) parsed by the runtime
/// (rt::ParseTrainStepArgs, the launcher's syntax), then
/// rt::RunTrainStepCommand.
int runTrainStep(const CompiledArtifact &artifact, const std::string &device,
                 const std::vector<std::string> &args);

/// `generate`: rt::ResolveGenerateFlags, then rt::RunGenerateCommand.
int runGenerate(const CompiledArtifact &artifact, const std::string &device,
                const rt::GenerateCommandFlags &flags);

/// bt-run's bench options (docs/bench.md); the texts are parsed by the
/// runtime (rt::SetBenchOption), empty or 0 where not given.
struct BenchRequest {
  std::string batches, settings, promptTokens, memory, csv, baseline,
      torchScript, python, torchMalloc, progress, emuLengths;
  unsigned iters = 5, warmup = 1, threads = 2, seqBlocks = 0, tokens = 0;
  uint64_t seed = 0;
  int64_t genTokens = 0;
};

/// `bench`: rt::FinishBenchCommandOptions, rt::ResolveBenchOptions, then
/// rt::RunBenchCommand (results on stdout, progress on stderr).
int runBench(const CompiledArtifact &artifact, const std::string &device,
             const BenchRequest &request);

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

/// Runs a launcher command on the artifact file at `artifactPath`, exactly
/// as the standalone executable would (bt-run train: `train` on the
/// OUT/model.btart it compiled). Returns the process exit code.
int runLauncher(const std::string &artifactPath,
                const std::vector<std::string> &args);

} // namespace bt::bridge

#endif // BT_TOOLS_BTRUN_RUNTIMEBRIDGE_H
