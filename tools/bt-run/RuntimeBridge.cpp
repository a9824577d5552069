//===- RuntimeBridge.cpp - bt-run's interface to the runtime ---------------===//
//
// Built with the runtime's flags (exceptions, RTTI); see RuntimeBridge.h.
//
//===----------------------------------------------------------------------===//

#include "RuntimeBridge.h"

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/exec/drivers.h"
#include "bt/runtime/exec/model.h"
#include "bt/runtime/tooling/bench.h"
#include "bt/runtime/model/artifact.h"
#include "bt/runtime/model/checkpoint.h"
#include "bt/runtime/tooling/commands.h"
#include "bt/runtime/model/config.h"
#include "bt/runtime/model/init_from_vanilla.h"
#include "bt/runtime/model/random_init.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/safetensors.h"
#include "bt/runtime/base/tensor.h"
#include "bt/runtime/device/cpu/cpu_device.h"
#include "bt/runtime/model/tokenizer.h"
#include "bt/runtime/tooling/train.h"
#include "bt/runtime/train/trainer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <optional>
#include <iostream>
#include <random>
#include <string_view>

namespace bt::bridge {

struct Model::Impl {
  proto::ModelConfig config;
  ModelSpec spec;
  std::vector<std::string> paramNames;
  std::map<std::string, rt::Tensor> weights;
  std::vector<std::string> notices;
  std::vector<std::string> warnings;
  bool hasWeights = false;
  /// The seed of randomModel (rt::RandomInitWeights); absent otherwise.
  std::optional<uint64_t> randomInitSeed;
};

Model::~Model() = default;
const ModelSpec &Model::spec() const { return impl->spec; }
std::string Model::describe() const {
  return rt::DescribeModelConfig(impl->config);
}
const std::vector<std::string> &Model::notices() const { return impl->notices; }
const std::vector<std::string> &Model::warnings() const { return impl->warnings; }
bool Model::hasWeights() const { return impl->hasWeights; }

namespace {

StackSpec toStack(const proto::NeoXConfig &c) {
  StackSpec s;
  s.hidden = c.hidden_size();
  s.layers = c.num_layers();
  s.heads = c.num_heads();
  s.headDim = c.head_dim();
  s.intermediate = c.intermediate_size();
  s.rotaryDims = c.rotary_dims();
  s.rotaryBase = c.rotary_base();
  s.eps = c.layer_norm_eps();
  return s;
}

ModelSpec toSpec(const proto::ModelConfig &c) {
  ModelSpec s;
  s.kind = c.kind() == proto::ModelConfig::VANILLA
               ? ModelSpec::Kind::Vanilla
               : ModelSpec::Kind::BlockTransformer;
  s.name = c.name();
  s.vocab = c.vocab_size();
  s.blockLength = c.block_length();
  s.embedderWidth = c.embedder_width();
  s.projectionLayer =
      c.embedder_projection() == proto::ModelConfig::PROJECTION_LAYER;
  s.block = toStack(c.block_decoder());
  s.token = toStack(c.token_decoder());
  s.strategy = c.strategy() == proto::ModelConfig::SUMMATION
                   ? ModelSpec::Strategy::Summation
                   : ModelSpec::Strategy::Prefix;
  s.prefixLength = c.prefix_length();
  s.padTokenId = c.pad_token_id();
  s.eosTokenId = c.eos_token_id();
  s.bosTokenId = c.bos_token_id();
  if (s.kind == ModelSpec::Kind::Vanilla) {
    s.blockLength = 1;
    s.embedderWidth = s.block.hidden;
  }
  return s;
}

std::unique_ptr<Model> fromConfig(proto::ModelConfig config) {
  auto model = std::make_unique<Model>();
  model->impl = std::make_unique<Model::Impl>();
  model->impl->spec = toSpec(config);
  for (const ParamSpec &p : rt::ExpectedParams(config))
    model->impl->paramNames.push_back(p.name);
  model->impl->config = std::move(config);
  return model;
}

/// Whether `path` exists (stat: opening it could block on a FIFO; the
/// loaders then say what is wrong with it).
bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

rt::DType parseDType(const std::string &name) {
  absl::StatusOr<rt::DType> d = rt::ParseDTypeName(name);
  return d.ok() ? *d : rt::DType::DTYPE_UNSPECIFIED;
}

} // namespace

std::unique_ptr<Model> loadModel(const CheckpointPaths &paths, bool withWeights,
                                 std::string &error) {
  std::string configPath =
      paths.configPath.empty() ? paths.path : paths.configPath;
  absl::StatusOr<proto::ModelConfig> config = rt::LoadModelConfig(configPath);
  if (!config.ok()) {
    error = std::string(config.status().message());
    // A released checkpoint folder (checkpoint-<step>/) holds only the
    // weights: its config is the trainer YAML, given with --config.
    if (paths.configPath.empty() && absl::IsNotFound(config.status()) &&
        exists(paths.path + "/model.safetensors"))
      error += "; a folder with only model.safetensors (a released "
               "checkpoint-<step>/) needs its trainer YAML: --config FILE";
    return nullptr;
  }
  std::string weights = paths.weightsPath;
  if (weights.empty()) {
    // The weights sit next to the config: dir/model.safetensors.
    std::string dir = paths.path;
    if (!exists(dir + "/model.safetensors") && !paths.configPath.empty())
      dir = paths.configPath.substr(0, paths.configPath.find_last_of('/'));
    weights = dir + "/model.safetensors";
    if (!exists(weights)) {
      // A config file given as the checkpoint: look beside it.
      std::string beside = paths.path.substr(0, paths.path.find_last_of('/'));
      if (exists(beside + "/model.safetensors"))
        weights = beside + "/model.safetensors";
    }
  }
  if (!withWeights) {
    // The dtype of the weights file, from its header (no data is read).
    std::unique_ptr<Model> model = fromConfig(*config);
    if (exists(weights)) {
      absl::StatusOr<rt::SafetensorsFile> f = rt::SafetensorsFile::Open(weights);
      if (f.ok()) {
        for (const ParamSpec &p : rt::ExpectedParams(*config))
          if (const rt::SafetensorsEntry *e = f->Find(p.name)) {
            model->impl->config.set_checkpoint_dtype(e->dtype);
            break;
          }
      }
    }
    return model;
  }
  absl::StatusOr<rt::Checkpoint> ckpt = rt::LoadCheckpoint(*config, {weights});
  if (!ckpt.ok()) {
    error = std::string(ckpt.status().message());
    return nullptr;
  }
  // The file, not the config's training precision, says what the weights are.
  if (ckpt->file_dtype != proto::DTYPE_UNSPECIFIED)
    config->set_checkpoint_dtype(ckpt->file_dtype);
  std::unique_ptr<Model> model = fromConfig(*config);
  model->impl->weights = std::move(ckpt->weights);
  model->impl->paramNames = std::move(ckpt->param_names);
  model->impl->notices = std::move(ckpt->notices);
  model->impl->warnings = std::move(ckpt->warnings);
  if (ckpt->file_dtype != proto::F32 &&
      ckpt->file_dtype != proto::DTYPE_UNSPECIFIED)
    model->impl->notices.push_back(
        weights + " holds " + rt::DTypeName(ckpt->file_dtype) +
        " weights; converted to f32 at load (the CPU target computes in f32)");
  model->impl->hasWeights = true;
  return model;
}

bool initFromVanilla(const std::string &vanillaDir, const std::string &configPath,
                     const std::string &outDir, uint64_t seed, std::string &error) {
  absl::Status st = rt::InitFromVanillaCommand(vanillaDir, configPath, outDir, seed);
  if (!st.ok())
    error = std::string(st.message());
  return st.ok();
}

std::unique_ptr<Model> vanillaInitModel(const std::string &configPath,
                                        const std::string &vanillaDir,
                                        uint64_t seed, std::string &error,
                                        const std::string &trainerYaml) {
  absl::StatusOr<proto::ModelConfig> config = rt::LoadModelConfig(configPath);
  if (!config.ok()) {
    error = std::string(config.status().message());
    return nullptr;
  }
  absl::StatusOr<rt::Checkpoint> vanilla =
      rt::LoadVanillaCheckpoint(vanillaDir,
                                trainerYaml.empty() ? configPath : trainerYaml);
  if (!vanilla.ok()) {
    error = std::string(vanilla.status().message());
    return nullptr;
  }
  absl::StatusOr<std::map<std::string, rt::Tensor>> weights =
      rt::InitBlockFromVanilla(*config, vanilla->config, vanilla->weights, seed);
  if (!weights.ok()) {
    error = std::string(weights.status().message());
    return nullptr;
  }
  config->set_checkpoint_dtype(proto::F32);
  std::unique_ptr<Model> model = fromConfig(*config);
  for (const ParamSpec &p : rt::ExpectedParams(*config))
    model->impl->weights.emplace(p.name, std::move(weights->at(p.name)));
  model->impl->notices.push_back(
      "initialized from the vanilla checkpoint " + vanillaDir +
      " (partition, mean embedder projection, identity expansion layer)");
  model->impl->hasWeights = true;
  return model;
}

std::unique_ptr<Model> randomModel(const std::string &configPath,
                                   uint64_t seed, std::string &error) {
  absl::StatusOr<proto::ModelConfig> config = rt::LoadModelConfig(configPath);
  if (!config.ok()) {
    error = std::string(config.status().message());
    return nullptr;
  }
  config->set_checkpoint_dtype(proto::F32); // what we generate
  absl::StatusOr<std::map<std::string, rt::Tensor>> weights =
      rt::RandomInitWeights(*config, seed);
  if (!weights.ok()) {
    error = std::string(weights.status().message());
    return nullptr;
  }
  std::unique_ptr<Model> model = fromConfig(*config);
  for (auto &[name, t] : *weights)
    model->impl->weights.emplace(name, std::move(t));
  model->impl->randomInitSeed = seed;
  model->impl->notices.push_back("random initialization, seed " +
                                 std::to_string(seed));
  model->impl->hasWeights = true;
  return model;
}

namespace {

/// The writer of the artifact of `model` and `parts` (its manifest, kernels,
/// sections and weights), before it is written or serialized. Null with
/// `error` set.
std::unique_ptr<rt::ArtifactWriter> makeWriter(const Model &model,
                                               const ArtifactParts &parts,
                                               std::string &error) {
  const KVMemoryPlan &kvPlan = parts.interface.kvPlan;
  const GPUArtifactInfo &gpu = parts.gpu;
  proto::Manifest manifest;
  if (kvPlan.blockLength > 0) {
    proto::KVMemoryPlan *p = manifest.mutable_kv_plan();
    p->set_block_length(kvPlan.blockLength);
    p->set_global_bytes_per_entry(kvPlan.globalBytesPerEntry);
    p->set_local_bytes_per_sequence(kvPlan.localBytesPerSequence);
    p->set_weight_bytes(kvPlan.weightBytes);
    p->set_source(kvPlan.source);
  }
  manifest.set_target(gpu.ptx.empty() ? "cpu" : "cuda");
  manifest.set_cpu(parts.cpu);
  manifest.set_gpu_chip(gpu.chip);
  manifest.set_producer("bt-run");
  *manifest.mutable_config() = model.impl->config;
  for (const EntryPoint &e : parts.interface.entryPoints) {
    proto::EntryPoint *ep = manifest.add_entry_points();
    ep->set_name(e.name);
    ep->set_symbol(e.symbol);
    for (const std::string &p : e.params)
      ep->add_params(p);
    // Recorded only where a parameter is not passed as stored (F32).
    if (absl::c_any_of(e.paramDTypes,
                     [](const std::string &d) { return d != "F32"; }))
      for (const std::string &d : e.paramDTypes)
        ep->add_param_dtypes(parseDType(d));
    auto fill = [](proto::TensorSpec *spec, const TensorSpec &t) {
      spec->set_name(t.name);
      spec->set_dtype(parseDType(t.dtype));
      for (int64_t d : t.shape)
        spec->add_shape(d);
      for (const std::string &n : t.dimNames)
        spec->add_dim_names(n);
      spec->set_inout(t.inout);
      spec->set_host_scalar(t.hostScalar);
    };
    for (const TensorSpec &t : e.inputs)
      fill(ep->add_inputs(), t);
    for (const TensorSpec &t : e.outputs)
      fill(ep->add_outputs(), t);
  }
  auto writer = std::make_unique<rt::ArtifactWriter>(std::move(manifest));
  writer->SetKernels(parts.kernels);
  if (!gpu.ptx.empty())
    writer->SetPtx(gpu.ptx);
  if (!gpu.cudaEmu.empty())
    writer->SetCudaEmu(gpu.cudaEmu);
  if (!parts.tokenizer.empty())
    writer->SetTokenizer(parts.tokenizer,
                         rt::DetectTokenizerKind(parts.tokenizer));
  if (parts.seededWeights) {
    if (!model.impl->randomInitSeed) {
      error = "--seeded-weights needs --random-init (the artifact stores the "
              "seed of the random weights, not weights)";
      return nullptr;
    }
    writer->SetRandomInit(*model.impl->randomInitSeed);
  }
  for (const std::string &name : model.impl->paramNames) {
    auto it = model.impl->weights.find(name);
    if (it == model.impl->weights.end()) {
      error = "internal error: no weights for parameter " + name;
      return nullptr;
    }
    absl::Status s = writer->AddWeight(name, it->second);
    if (!s.ok()) {
      error = std::string(s.message());
      return nullptr;
    }
  }
  return writer;
}

} // namespace

bool writeArtifact(const Model &model, const ArtifactParts &parts,
                   const std::string &launcherPath, const std::string &outPath,
                   std::string &error) {
  std::unique_ptr<rt::ArtifactWriter> writer = makeWriter(model, parts, error);
  if (!writer)
    return false;
  if (!launcherPath.empty())
    writer->SetPrefixFile(launcherPath);
  absl::Status s = writer->Write(outPath);
  if (!s.ok()) {
    error = std::string(s.message());
    return false;
  }
  return true;
}

bool readTokenizer(const Model &model, const std::string &path,
                   std::string &bytes, std::string &error) {
  absl::StatusOr<std::string> read = rt::ReadFile(path);
  if (!read.ok()) {
    error = "cannot read the tokenizer: " + std::string(read.status().message());
    return false;
  }
  bytes = std::move(*read);
  absl::StatusOr<std::unique_ptr<rt::Tokenizer>> t =
      rt::Tokenizer::Load(rt::DetectTokenizerKind(bytes), bytes);
  if (!t.ok()) {
    error = path + ": " + std::string(t.status().message());
    return false;
  }
  const int64_t vocab = model.impl->config.vocab_size();
  if ((*t)->vocab_size() > vocab) {
    error = path + ": the tokenizer has " + std::to_string((*t)->vocab_size()) +
            " pieces, more than the model's vocabulary (" + std::to_string(vocab) +
            ")";
    return false;
  }
  return true;
}

bool prepareTraining(const std::vector<std::string> &loopArgs,
                     const std::string &configPath,
                     const std::string &tokenizerPath, int64_t vocabSize,
                     const std::string &spmModelType,
                     std::string &compileConfig, std::string &tokenizerFile,
                     std::string &outputDir, std::string &error,
                     bool &usageError) {
  usageError = false;
  absl::StatusOr<rt::TrainOptions> opts = rt::ParseTrainArgs(loopArgs);
  if (!opts.ok()) {
    usageError = true;
    error = std::string(opts.status().message());
    return false;
  }
  rt::TrainModelSetup setup;
  setup.config_path = configPath;
  setup.tokenizer_path = tokenizerPath;
  setup.spm.vocab_size = vocabSize;
  setup.spm.model_type = spmModelType;
  setup.spm.seed = static_cast<uint32_t>(opts->seed);
  setup.train = *opts;
  absl::StatusOr<rt::TrainModelFiles> files =
      rt::PrepareTrainingModel(setup, std::cerr);
  if (!files.ok()) {
    usageError = files.status().code() == absl::StatusCode::kInvalidArgument &&
                 absl::StartsWith(files.status().message(), "train");
    error = std::string(files.status().message());
    return false;
  }
  compileConfig = files->config_path;
  tokenizerFile = files->tokenizer_path;
  outputDir = opts->output_dir;
  return true;
}

std::string trainLoopUsage() { return rt::TrainUsage(); }

bool isArtifact(const std::string &path) {
  return rt::Artifact::Open(path).ok();
}

std::string damagedArtifactError(const std::string &path) {
  absl::StatusOr<rt::ScopedFd> fd = rt::OpenRegularFileForReading(path);
  if (!fd.ok())
    return ""; // a directory (checkpoint), or missing: the loaders say so
  char head[4096];
  const ssize_t n = ::read(fd->get(), head, sizeof head);
  if (n <= 0)
    return "";
  const std::string_view bytes(head, static_cast<size_t>(n));
  // YAML and JSON configs are text: a NUL byte, an ELF header or the
  // artifact magic mean a (damaged) artifact or executable.
  const bool binary = bytes.find('\0') != std::string_view::npos ||
                      bytes.substr(0, 4) == "\x7f" "ELF" || bytes.substr(0, 7) == "BTARTIF";
  if (!binary)
    return "";
  absl::Status s = rt::Artifact::Open(path).status();
  if (s.ok())
    return "";
  return path + ": not a YAML/JSON config (binary data), and not a valid bt artifact or "
                "executable: " + std::string(s.message());
}

bool checkCheckpointOutputDir(const std::string &dir, std::string &error) {
  absl::Status s = rt::CheckCheckpointOutputDir(dir);
  if (!s.ok())
    error = std::string(s.message());
  return s.ok();
}

bool writeOutputFile(const std::string &path, const std::string &bytes,
                     std::string &error) {
  absl::Status s = rt::WriteFileAtomically(path, bytes);
  if (!s.ok())
    error = std::string(s.message());
  return s.ok();
}

void setThreads(unsigned threads) {
  rt::SetBlasThreads(static_cast<int>(threads));
}

int runLauncher(const std::string &artifactPath,
                const std::vector<std::string> &args) {
  std::vector<const char *> argv = {"bt-run", "--artifact", artifactPath.c_str()};
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  return rt::LauncherMain(static_cast<int>(argv.size()), argv.data(), std::cout,
                          std::cerr);
}

//===----------------------------------------------------------------------===//
// Running a compiled model in process
//===----------------------------------------------------------------------===//

struct CompiledArtifact::Impl {
  std::shared_ptr<const rt::Artifact> artifact;
};

CompiledArtifact::~CompiledArtifact() = default;

namespace {

std::unique_ptr<CompiledArtifact>
compiledArtifact(absl::StatusOr<std::shared_ptr<const rt::Artifact>> opened,
                 std::string &error) {
  if (!opened.ok()) {
    error = std::string(opened.status().message());
    return nullptr;
  }
  auto a = std::make_unique<CompiledArtifact>();
  a->impl = std::make_unique<CompiledArtifact::Impl>();
  a->impl->artifact = std::move(*opened);
  return a;
}

/// The exit status of a command as bt-launcher gives it: 0; 2 after a usage
/// error (InvalidArgument from parsing the options); 1 after another error.
int finish(const absl::Status &s, bool usageError = false) {
  if (s.ok())
    return 0;
  std::cerr << "bt-run: " << s.message() << "\n";
  return usageError ? 2 : 1;
}

/// The model of `artifact` on `device` (empty: the artifact's; checked by
/// checkDevice). Errors: those of rt::Model::Open.
absl::StatusOr<std::unique_ptr<rt::Model>>
openModel(const CompiledArtifact &artifact, const std::string &device) {
  rt::DeviceOptions options;
  options.device = device;
  return rt::Model::Open(artifact.impl->artifact, options);
}

/// Exit status 2 after a message for an unknown device name; -1 to go on.
int checkDevice(const std::string &device) {
  if (device.empty() || absl::c_linear_search(rt::DeviceNames(), device))
    return -1;
  return finish(absl::InvalidArgumentError(
                    absl::StrCat("--device ", device, ": expected ",
                                 absl::StrJoin(rt::DeviceNames(), "|"))),
                /*usageError=*/true);
}

} // namespace

std::unique_ptr<CompiledArtifact> openArtifact(const std::string &path,
                                               std::string &error) {
  return compiledArtifact(rt::Artifact::Open(path), error);
}

bool checkArtifactDType(const CompiledArtifact &artifact,
                        const std::string &dtype, std::string &error) {
  absl::Status s = rt::CheckArtifactDType(*artifact.impl->artifact, dtype);
  if (s.ok())
    return true;
  error = std::string(s.message());
  return false;
}

std::unique_ptr<CompiledArtifact> buildArtifact(const Model &model,
                                                const ArtifactParts &parts,
                                                std::string &error) {
  std::unique_ptr<rt::ArtifactWriter> writer = makeWriter(model, parts, error);
  if (!writer)
    return nullptr;
  absl::StatusOr<std::string> bytes = writer->Serialize();
  if (!bytes.ok()) {
    error = std::string(bytes.status().message());
    return nullptr;
  }
  writer.reset();
  return compiledArtifact(
      rt::Artifact::FromBytes(model.spec().name + " (compiled in memory)",
                              *bytes),
      error);
}

int runEval(const CompiledArtifact &artifact, const std::string &device,
            const std::string &inputs, const std::string &output, bool grad) {
  if (int rc = checkDevice(device); rc >= 0)
    return rc;
  absl::StatusOr<std::unique_ptr<rt::Model>> model = openModel(artifact, device);
  if (!model.ok())
    return finish(model.status());
  return finish(grad ? rt::RunGradCommand(**model, inputs, output, std::cerr)
                     : rt::RunEvalCommand(**model, inputs, output, std::cerr));
}

int runInfo(const CompiledArtifact &artifact, const std::string &device) {
  if (int rc = checkDevice(device); rc >= 0)
    return rc;
  rt::DeviceOptions options;
  options.device = device;
  return finish(rt::RunInfoCommand(artifact.impl->artifact, options, std::cout));
}

namespace {

/// `run(model, options)` on the model of `artifact` on `device`, with the
/// command's `options` as the runtime parsed them: exit status 2 after a bad
/// device or bad options (before the model opens), 1 after a runtime error.
template <typename Options, typename Run>
int runWithOptions(const CompiledArtifact &artifact, const std::string &device,
                   const absl::StatusOr<Options> &options, Run run) {
  if (int rc = checkDevice(device); rc >= 0)
    return rc;
  if (!options.ok())
    return finish(options.status(), /*usageError=*/true);
  absl::StatusOr<std::unique_ptr<rt::Model>> model = openModel(artifact, device);
  if (!model.ok())
    return finish(model.status());
  return finish(run(**model, *options));
}

} // namespace

int runTrainStep(const CompiledArtifact &artifact, const std::string &device,
                 const std::vector<std::string> &args) {
  return runWithOptions(
      artifact, device, rt::ParseTrainStepArgs(args),
      [](const rt::Model &model, const rt::TrainStepCommandOptions &o) {
        return rt::RunTrainStepCommand(model, o, std::cout);
      });
}

int runGenerate(const CompiledArtifact &artifact, const std::string &device,
                const rt::GenerateCommandFlags &flags) {
  return runWithOptions(
      artifact, device, rt::ResolveGenerateFlags(flags),
      [](const rt::Model &model, const rt::GenerateCommandOptions &o) {
        return rt::RunGenerateCommand(model, o, std::cout, std::cerr);
      });
}

namespace {

/// bt-run's bench options as the runtime's (SetBenchOption for the texts
/// whose syntax is the runtime's), checked (FinishBenchCommandOptions).
absl::StatusOr<rt::BenchCommandOptions>
benchCommandOptions(const BenchRequest &r) {
  rt::BenchCommandOptions o;
  o.bench.iters = static_cast<int>(r.iters);
  o.bench.warmup = static_cast<int>(r.warmup);
  o.bench.threads = static_cast<int>(r.threads);
  o.bench.seed = r.seed;
  o.seq_blocks = r.seqBlocks;
  o.tokens = r.tokens;
  o.gen_tokens = r.genTokens;
  const std::pair<const char *, const std::string *> texts[] = {
      {"--batch", &r.batches},          {"--setting", &r.settings},
      {"--prompt", &r.promptTokens},    {"--memory", &r.memory},
      {"--csv", &r.csv},                {"--baseline", &r.baseline},
      {"--torch-script", &r.torchScript}, {"--python", &r.python},
      {"--torch-malloc", &r.torchMalloc}, {"--progress", &r.progress},
      {"--emu-lengths", &r.emuLengths}};
  for (const auto &[name, value] : texts)
    if (!value->empty())
      BT_RETURN_IF_ERROR(rt::SetBenchOption(name, *value, o));
  BT_RETURN_IF_ERROR(rt::FinishBenchCommandOptions(o));
  return o;
}

} // namespace

int runBench(const CompiledArtifact &artifact, const std::string &device,
             const BenchRequest &request) {
  if (int rc = checkDevice(device); rc >= 0)
    return rc;
  absl::StatusOr<rt::BenchCommandOptions> command = benchCommandOptions(request);
  if (!command.ok())
    return finish(command.status(), /*usageError=*/true);
  absl::StatusOr<std::unique_ptr<rt::Model>> model = openModel(artifact, device);
  if (!model.ok())
    return finish(model.status());
  absl::StatusOr<rt::BenchOptions> options =
      rt::ResolveBenchOptions(**model, *command);
  if (!options.ok())
    return finish(options.status(), absl::IsInvalidArgument(options.status()));
  return finish(rt::RunBenchCommand(**model, *options, std::cout, std::cerr));
}

} // namespace bt::bridge
