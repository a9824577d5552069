//===- bench.cc - throughput benchmarks of a compiled model ---------------===//

#include "bt/runtime/tooling/bench.h"
#include "bt/runtime/tooling/efficiency.h"
#include "bt/runtime/tooling/roofline.h"
#include "bt/runtime/tooling/child_process.h"
#include "bt/runtime/tooling/progress.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/model/kv_plan.h"
#include "bt/runtime/base/safetensors.h"
#include "bt/runtime/base/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

extern char **environ;

namespace bt::rt {
namespace {

using Clock = std::chrono::steady_clock;

/// Resets the peak resident set (VmHWM) of this process to its current
/// resident set (Linux >= 4.0; silently nothing elsewhere).
void ResetPeakRss() {
  (void)WriteFileAtomically("/proc/self/clear_refs", "5"); // in place (procfs)
}

/// VmHWM of this process in MiB, or 0 if unknown.
double ProcessPeakRssMb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::strtod(line.c_str() + 6, nullptr) / 1024.0; // kB
  return 0;
}

/// A temporary directory, removed with its content on destruction unless
/// released.
class ScratchDir {
public:
  static absl::StatusOr<ScratchDir> Create() {
    const char *tmp = getenv("TMPDIR");
    std::string tmpl =
        absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/bt-bench.XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr)
      return ErrnoToStatus(errno, absl::StrCat("mkdtemp ", tmpl));
    ScratchDir d;
    d.path_ = tmpl;
    return d;
  }
  ScratchDir() = default;
  ScratchDir(ScratchDir &&o) noexcept : path_(std::move(o.path_)) {
    o.path_.clear();
  }
  ~ScratchDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  /// The path; the caller now removes the directory.
  std::string Release() { return std::exchange(path_, std::string()); }

private:
  std::string path_;
};

bool IsExecutable(const std::string &path) {
  return access(path.c_str(), X_OK) == 0;
}
bool IsReadable(const std::string &path) {
  return access(path.c_str(), R_OK) == 0;
}

/// The torch result of `setting` in `torch`, or nullptr.
const BenchResult *Match(const BenchResult &r,
                         const std::vector<BenchResult> &torch) {
  for (const BenchResult &t : torch)
    if (t.setting.name == r.setting.name && t.setting.batch == r.setting.batch &&
        t.setting.prompt_tokens == r.setting.prompt_tokens &&
        t.setting.gen_tokens == r.setting.gen_tokens &&
        t.setting.max_batch == r.setting.max_batch)
      return &t;
  return nullptr;
}

std::string CsvField(const std::string &s) {
  if (s.find_first_of(",\"\n") == std::string::npos)
    return s;
  std::string q = "\"";
  for (char c : s)
    q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

} // namespace

// --- bt ----------------------------------------------------------------------

absl::Status BtRunner::Prepare(const BenchSetting &setting) {
  inputs_.clear();
  outputs_.clear();
  entry_.clear();
  counters_ = GenerateCounters();
  constant_params_.reset(); // before a train setting writes the weights
  trainer_.reset();
  setting_ = setting;
  if (setting.name == kTrainSetting) {
    if (model_.FindEntryPoint(train_abi::kTrainStepEntry) == nullptr)
      return absl::NotFoundError(absl::StrCat(
          model_.artifact().path(), ": no '", train_abi::kTrainStepEntry,
          "' entry point for the train setting (it has: ",
          absl::StrJoin(model_.EntryPointNames(), ", "),
          "); compile it with the training entry points (bt-run compile "
          "--train)"));
    BT_ASSIGN_OR_RETURN(TensorMap all,
                        ForwardInputs(model_.config(), setting, seed_));
    Tensor labels = all.at("input_ids").Share();
    all.emplace("labels", std::move(labels));
    BT_ASSIGN_OR_RETURN(trainer_, Trainer::Create(model_));
    inputs_ = std::move(all);
    entry_ = train_abi::kTrainStepEntry;
    ResetPeakRss();
    return absl::OkStatus();
  }
  if (IsGenerationSetting(setting.name)) {
    const bool vanilla =
        model_.config().kind() == proto::ModelConfig::VANILLA;
    const std::vector<std::string> need =
        vanilla ? std::vector<std::string>{"prefill", "decode_step"}
                : std::vector<std::string>{"prefill", "decode_tokens",
                                           "decode_block"};
    for (const std::string &n : need)
      if (model_.FindEntryPoint(n) == nullptr)
        return absl::NotFoundError(absl::StrCat(
            model_.artifact().path(), ": no '", n, "' entry point for the ",
            setting.name, " setting (it has: ",
            absl::StrJoin(model_.EntryPointNames(), ", "),
            "); compile it with a bt-run that emits the generation entry "
            "points (docs/generation.md)"));
    BT_ASSIGN_OR_RETURN(Tensor ids,
                        GenerationPrompt(model_.config(), setting, seed_));
    inputs_.emplace("input_ids", std::move(ids));
    entry_ = "generate";
    constant_params_ = std::make_unique<ConstantParamsScope>(model_.device());
    ResetPeakRss();
    return absl::OkStatus();
  }
  if (setting.name != kForwardSetting)
    return absl::InvalidArgumentError(absl::StrCat(
        "bench: unknown setting '", setting.name, "'"));
  const proto::EntryPoint *ep = model_.FindEntryPoint("eval");
  if (ep == nullptr)
    return absl::NotFoundError(absl::StrCat(
        model_.artifact().path(), ": no 'eval' entry point to benchmark (it has: ",
        absl::StrJoin(model_.EntryPointNames(), ", "), ")"));
  BT_ASSIGN_OR_RETURN(TensorMap all,
                      ForwardInputs(model_.config(), setting, seed_));
  // Exactly the entry's inputs (a vanilla entry has no block mask).
  for (const proto::TensorSpec &s : ep->inputs()) {
    auto it = all.find(s.name());
    if (it == all.end()) {
      inputs_.clear();
      return absl::InvalidArgumentError(absl::StrCat(
          "bench: entry point 'eval' takes '", s.name(),
          "', which the forward benchmark does not provide"));
    }
    inputs_.emplace(s.name(), std::move(it->second));
  }
  entry_ = "eval";
  ResetPeakRss();
  return absl::OkStatus();
}

absl::StatusOr<CallStats> BtRunner::Call(const ProgressFn &progress) {
  if (entry_.empty())
    return absl::FailedPreconditionError("bench: Call() before Prepare()");
  outputs_.clear(); // free the previous outputs before the next call
  CallStats stats;
  if (entry_ == "generate") {
    GenerateOptions o;
    o.max_new_tokens = setting_.gen_tokens;
    o.stop_at_eos = false;       // fixed work per call
    o.keep_step_logits = false;  // [N, B, V] floats would dwarf the caches
    o.on_progress = progress;
    const auto t0 = Clock::now();
    absl::StatusOr<GenerateResult> r =
        Generate(model_, inputs_.at("input_ids"), Tensor(), o);
    stats.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!r.ok())
      return r.status();
    counters_ = r->counters;
    stats.traffic = counters_.decode_traffic;
    outputs_.emplace("new_tokens", std::move(r->new_tokens));
    stats.prefill_seconds = counters_.prefill_seconds;
    stats.kv_bytes_per_sample =
        counters_.cache_bytes_initial / std::max<int64_t>(setting_.batch, 1);
    return stats;
  }
  const DeviceTraffic traffic0 = model_.device().traffic();
  const auto t0 = Clock::now();
  if (trainer_ != nullptr) {
    BT_ASSIGN_OR_RETURN(TrainerStepResult r, trainer_->Step(inputs_));
    stats.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    stats.traffic = model_.device().traffic().Since(traffic0);
    if (!std::isfinite(r.loss))
      return absl::InternalError(absl::StrCat(
          "bench: train step ", r.step, ": the loss is ", r.loss));
    return stats;
  }
  BT_ASSIGN_OR_RETURN(outputs_, model_.Run(entry_, inputs_));
  stats.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  stats.traffic = model_.device().traffic().Since(traffic0);
  return stats;
}

absl::StatusOr<double> BtRunner::PeakRssMb() { return ProcessPeakRssMb(); }

absl::StatusOr<std::vector<int64_t>> BtRunner::GeneratedTokens() {
  auto it = outputs_.find("new_tokens");
  if (entry_ != "generate" || it == outputs_.end())
    return std::vector<int64_t>();
  const int64_t *p = it->second.data_as<int64_t>();
  return std::vector<int64_t>(p, p + it->second.num_elements());
}

// --- torch -------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TorchRunner>>
TorchRunner::Start(const Model &model, const BenchOptions &opts,
                   std::ostream &progress) {
  const std::string script = BaselineScript(opts.torch_script);
  const std::string python = BaselinePython(opts.python);
  if (!IsReadable(script))
    return absl::UnavailableError(absl::StrCat(
        "the PyTorch baseline script ", script,
        " is not readable (pass --torch-script <bench/bt_torch.py>)"));
  if (python.find('/') != std::string::npos && !IsExecutable(python))
    return absl::UnavailableError(absl::StrCat(
        "no Python interpreter at ", python, " (pass --python)"));

  std::unique_ptr<TorchRunner> r(new TorchRunner());
  r->config_ = model.config();
  r->seed_ = opts.seed;
  {
    BT_ASSIGN_OR_RETURN(ScratchDir dir, ScratchDir::Create());
    r->dir_ = dir.Release();
  }
  auto file = [&](const char *name) { return r->dir_ + "/" + name; };
  // Configuration (bt.proto ModelConfig as JSON) and weights.
  std::string config_json;
  google::protobuf::util::JsonPrintOptions jopts;
  jopts.preserve_proto_field_names = true;
  jopts.always_print_primitive_fields = true;
  auto js = google::protobuf::util::MessageToJsonString(model.config(),
                                                        &config_json, jopts);
  if (!js.ok())
    return absl::InternalError(
        absl::StrCat("cannot serialize the model config: ", js.ToString()));
  BT_RETURN_IF_ERROR(WriteFileAtomically(file("bt_config.json"), config_json));
  progress << "[torch] writing the model's weights for the baseline ... "
           << std::flush;
  {
    std::vector<Tensor> held;
    std::vector<NamedTensorRef> refs;
    held.reserve(model.manifest().weights_size());
    for (const proto::Weight &w : model.manifest().weights()) {
      BT_ASSIGN_OR_RETURN(Tensor t, model.artifact().GetWeight(w.name()));
      held.push_back(std::move(t));
    }
    for (int i = 0; i < model.manifest().weights_size(); ++i)
      refs.emplace_back(model.manifest().weights(i).name(), &held[i]);
    BT_RETURN_IF_ERROR(WriteSafetensors(file("model.safetensors"), refs));
  }
  progress << "done\n" << std::flush;

  const std::string threads = absl::StrCat(opts.threads);
  std::map<std::string, std::string> env = {
      {"OMP_NUM_THREADS", threads},
      {"OPENBLAS_NUM_THREADS", threads},
      {"MKL_NUM_THREADS", threads},
      {"OMP_WAIT_POLICY", "PASSIVE"},
      {"PYTHONUNBUFFERED", "1"}};
  if (opts.torch_malloc == "tuned") {
    env["MALLOC_MMAP_MAX_"] = "0";
    env["MALLOC_TRIM_THRESHOLD_"] = "18446744073709551615";
  }
  std::vector<std::string> argv = {python,        script,
                                   "--serve",     "--model-dir",
                                   r->dir_,       "--threads",
                                   threads,       "--seed",
                                   absl::StrCat(opts.seed)};
  // On a GPU the baseline runs on the same GPU: in f32 against an f32
  // artifact, in bf16 (weights and activations) against a `--dtype bf16`
  // one (its GEMMs take bf16; docs/codegen-cuda.md "bf16"). The emulated
  // device has no GPU for torch: there it runs on the CPU.
  if (opts.device == "cuda")
    argv.insert(argv.end(),
                {"--device", "cuda", "--dtype",
                 MatrixWeightBytes(model.manifest()) == 2 ? "bf16" : "f32"});
  // The first line: {"ready": ...} or {"unavailable": ...}.
  std::string hello;
  absl::StatusOr<std::unique_ptr<JsonLineChild>> child =
      JsonLineChild::Start(argv, env, &hello);
  if (!child.ok())
    return absl::UnavailableError(absl::StrCat(
        python, " ", script, " --serve: ", child.status().message()));
  r->child_ = std::move(*child);
  nlohmann::json j = nlohmann::json::parse(hello, nullptr, false);
  if (j.is_object() && j.contains("unavailable"))
    return absl::UnavailableError(j["unavailable"].is_string()
                                      ? j["unavailable"].get<std::string>()
                                      : j["unavailable"].dump());
  if (!j.is_object() || !j.contains("ready"))
    return absl::InternalError(absl::StrCat(
        script, " --serve: unexpected first line '", hello, "'"));
  r->description_ = j.value("description", std::string("torch"));
  // The child holds the weights now: remove their copy at once, so that a
  // long benchmark stopped by a signal leaves no model-sized file behind
  // (an open or mapped file stays readable after unlink).
  std::remove(file("model.safetensors").c_str());
  return r;
}

TorchRunner::~TorchRunner() {
  child_.reset(); // EOF: the script exits; wait for it before removing dir_
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

absl::StatusOr<std::string> TorchRunner::Request(const std::string &line,
                                                 const ProgressFn &progress) {
  if (child_ == nullptr)
    return absl::FailedPreconditionError("the PyTorch baseline is not running");
  absl::Status sent = child_->Send(line);
  if (!sent.ok())
    return absl::InternalError(absl::StrCat("PyTorch baseline: ", sent.message()));
  for (;;) {
    absl::StatusOr<std::string> reply = child_->ReadReply();
    if (!reply.ok())
      return absl::InternalError(absl::StrCat("PyTorch baseline: ", reply.status().message()));
    nlohmann::json j = nlohmann::json::parse(*reply, nullptr, false);
    // {"progress": done, "total": n} lines precede a generation's reply.
    if (j.is_object() && j.contains("progress")) {
      if (progress && j["progress"].is_number() && j.contains("total") &&
          j["total"].is_number())
        progress(j["progress"].get<int64_t>(), j["total"].get<int64_t>());
      continue;
    }
    if (j.is_object() && j.contains("error"))
      return absl::InternalError(absl::StrCat("PyTorch baseline: ",
                                              j["error"].is_string()
                                                  ? j["error"].get<std::string>()
                                                  : j["error"].dump()));
    return reply;
  }
}

namespace {
absl::StatusOr<double> NumberField(const std::string &reply, const char *key) {
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  if (!j.is_object() || !j.contains(key) || !j[key].is_number())
    return absl::InternalError(absl::StrCat(
        "PyTorch baseline: expected a reply with '", key, "', got '", reply, "'"));
  return j[key].get<double>();
}
} // namespace

absl::Status TorchRunner::Prepare(const BenchSetting &setting) {
  nlohmann::json req = {{"cmd", "prepare"},
                        {"setting", setting.name},
                        {"batch", setting.batch},
                        {"prompt_tokens", setting.prompt_tokens},
                        {"gen_tokens", setting.gen_tokens}};
  generation_ = IsGenerationSetting(setting.name);
  if (generation_) {
    // The same prompts as bt's (same generator and seed).
    BT_ASSIGN_OR_RETURN(Tensor ids, GenerationPrompt(config_, setting, seed_));
    const std::string path = dir_ + "/prompt.safetensors";
    TensorMap m;
    m.emplace("input_ids", std::move(ids));
    BT_RETURN_IF_ERROR(WriteSafetensors(path, m));
    req["prompt"] = path;
  }
  BT_ASSIGN_OR_RETURN(std::string reply, Request(req.dump()));
  (void)reply;
  return absl::OkStatus();
}

absl::StatusOr<CallStats> TorchRunner::Call(const ProgressFn &progress) {
  BT_ASSIGN_OR_RETURN(std::string reply,
                      Request(R"({"cmd": "call"})", progress));
  CallStats stats;
  BT_ASSIGN_OR_RETURN(stats.seconds, NumberField(reply, "seconds"));
  if (generation_) {
    BT_ASSIGN_OR_RETURN(stats.prefill_seconds,
                        NumberField(reply, "prefill_seconds"));
    BT_ASSIGN_OR_RETURN(double kv, NumberField(reply, "kv_bytes_per_sample"));
    stats.kv_bytes_per_sample = static_cast<int64_t>(kv);
  }
  return stats;
}

absl::StatusOr<double> TorchRunner::PeakRssMb() {
  BT_ASSIGN_OR_RETURN(std::string reply, Request(R"({"cmd": "peak"})"));
  return NumberField(reply, "peak_rss_mb");
}

absl::StatusOr<std::vector<int64_t>> TorchRunner::GeneratedTokens() {
  if (!generation_)
    return std::vector<int64_t>();
  const std::string out = dir_ + "/new_tokens.safetensors";
  nlohmann::json req = {{"cmd", "tokens"}, {"output", out}};
  BT_ASSIGN_OR_RETURN(std::string reply, Request(req.dump()));
  (void)reply;
  BT_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(out));
  BT_ASSIGN_OR_RETURN(Tensor t, f.Get("new_tokens"));
  if (t.dtype() != proto::I64)
    return absl::InternalError(absl::StrCat(
        "PyTorch baseline: new_tokens is ", t.DebugString(), ", expected I64"));
  const int64_t *p = t.data_as<int64_t>();
  return std::vector<int64_t>(p, p + t.num_elements());
}

absl::StatusOr<Tensor> TorchRunner::Logits(const TensorMap &inputs) {
  const std::string in = dir_ + "/check_inputs.safetensors";
  const std::string out = dir_ + "/check_logits.safetensors";
  BT_RETURN_IF_ERROR(WriteSafetensors(in, inputs));
  nlohmann::json req = {{"cmd", "logits"}, {"inputs", in}, {"output", out}};
  BT_ASSIGN_OR_RETURN(std::string reply, Request(req.dump()));
  (void)reply;
  BT_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(out));
  BT_ASSIGN_OR_RETURN(Tensor t, f.Get("logits"));
  return t.Clone(); // the file is overwritten by the next request
}

// --- the timing loop ---------------------------------------------------------

absl::StatusOr<std::vector<std::vector<BenchResult>>>
RunSettings(const std::vector<BenchRunner *> &runners, const BenchOptions &opts,
            const std::string &model_name, std::ostream &progress,
            absl::Status *secondary_error) {
  std::vector<std::vector<BenchResult>> results(runners.size());
  std::vector<bool> alive(runners.size(), true);
  ProgressDisplay line(progress, opts.progress, "dots");
  auto drop = [&](size_t k, const absl::Status &s) -> absl::Status {
    if (k == 0)
      return s;
    line.NewLine();
    line.Print(absl::StrCat("[", runners[k]->impl(), "] failed: ", s.message(),
                            "; continuing without it"));
    line.NewLine();
    if (secondary_error != nullptr && secondary_error->ok())
      *secondary_error = s;
    alive[k] = false;
    return absl::OkStatus();
  };
  const bool turns = runners.size() > 1;
  for (const BenchSetting &setting : opts.settings) {
    const bool generation = IsGenerationSetting(setting.name);
    std::vector<bool> runs(runners.size());
    for (size_t k = 0; k < runners.size(); ++k)
      runs[k] = alive[k] && runners[k]->Runs(setting);
    std::vector<BenchResult> current(runners.size());
    std::vector<std::vector<double>> prefill(runners.size()),
        decode(runners.size());
    for (size_t k = 0; k < runners.size(); ++k) {
      if (!runs[k] || !alive[k])
        continue;
      BenchResult &r = current[k];
      r.setting = setting;
      r.impl = runners[k]->impl();
      r.device = opts.device;
      r.model = model_name;
      if (generation) {
        r.tokens = setting.batch * setting.gen_tokens;
        r.total_tokens =
            setting.batch * (setting.prompt_tokens + setting.gen_tokens);
      } else {
        r.tokens = r.total_tokens = setting.batch * setting.prompt_tokens;
      }
      absl::Status s = runners[k]->Prepare(setting);
      if (!s.ok())
        BT_RETURN_IF_ERROR(drop(k, s));
    }
    line.Print(absl::StrFormat("%s batch %d%s x %d tokens", setting.name,
                               setting.batch,
                               setting.max_batch ? " (planned max)" : "",
                               setting.prompt_tokens));
    if (setting.gen_tokens > 0)
      line.Print(absl::StrFormat(" + %d generated", setting.gen_tokens));
    line.Print(":");
    line.NewLine();
    for (int i = 0; i < opts.warmup + opts.iters; ++i) {
      const bool warm = i < opts.warmup;
      line.Print(warm ? absl::StrFormat("  warmup %d/%d:", i + 1, opts.warmup)
                      : absl::StrFormat("  call %d/%d:", i - opts.warmup + 1,
                                        opts.iters));
      for (size_t k = 0; k < runners.size(); ++k) {
        if (!runs[k] || !alive[k])
          continue;
        if (turns)
          std::this_thread::sleep_for(
              std::chrono::duration<double>(opts.switch_pause));
        line.Print(" " + runners[k]->impl());
        absl::StatusOr<CallStats> t = runners[k]->Call(line.TaskCallback("tokens"));
        line.EndTask();
        if (!t.ok()) {
          BT_RETURN_IF_ERROR(drop(k, t.status()));
          continue;
        }
        if (!warm) {
          current[k].run_seconds.push_back(t->seconds);
          current[k].traffic = t->traffic;
          if (t->prefill_seconds >= 0) {
            prefill[k].push_back(t->prefill_seconds);
            decode[k].push_back(t->seconds - t->prefill_seconds);
          }
        }
        current[k].kv_bytes_per_sample = t->kv_bytes_per_sample;
        line.Print(absl::StrFormat(" %.3gs", t->seconds));
      }
      line.NewLine();
    }
    for (size_t k = 0; k < runners.size(); ++k) {
      if (!runs[k] || !alive[k])
        continue;
      BenchResult &r = current[k];
      absl::StatusOr<double> peak = runners[k]->PeakRssMb();
      if (!peak.ok()) {
        BT_RETURN_IF_ERROR(drop(k, peak.status()));
        continue;
      }
      if (generation) {
        absl::StatusOr<std::vector<int64_t>> toks = runners[k]->GeneratedTokens();
        if (!toks.ok()) {
          BT_RETURN_IF_ERROR(drop(k, toks.status()));
          continue;
        }
        r.new_tokens = std::move(*toks);
        r.prefill_seconds = Median(prefill[k]);
        r.decode_seconds = Median(decode[k]);
        r.decode_tokens_per_s =
            r.decode_seconds > 0 ? r.tokens / r.decode_seconds : 0;
      }
      r.peak_rss_mb = *peak;
      r.seconds = Median(r.run_seconds);
      r.tokens_per_s = r.seconds > 0 ? r.tokens / r.seconds : 0;
      r.total_tokens_per_s = r.seconds > 0 ? r.total_tokens / r.seconds : 0;
      if (generation)
        line.Print(absl::StrFormat(
            "  %-6s %.1f tok/s generated (median %.4g s: prefill %.4g s + "
            "decode %.4g s = %.1f tok/s), KV %s per sample",
            r.impl, r.tokens_per_s, r.seconds, r.prefill_seconds,
            r.decode_seconds, r.decode_tokens_per_s,
            FormatBytes(r.kv_bytes_per_sample)) +
            // Cache misses of the CUDA pool in the timed call's decoding
            // (cuMemFree synchronizes the device; the emulator caches none).
            (r.traffic.driver_allocations + r.traffic.driver_frees > 0
                 ? absl::StrFormat("; decode: %d device allocations, %d frees "
                                   "by the driver",
                                   r.traffic.driver_allocations,
                                   r.traffic.driver_frees)
                 : std::string()));
      else
        line.Print(absl::StrFormat("  %-6s %.1f tok/s (median %.4g s)", r.impl,
                                   r.tokens_per_s, r.seconds));
      line.NewLine();
      results[k].push_back(std::move(r));
    }
  }
  return results;
}

namespace {
std::string BatchLabel(const BenchSetting &s) {
  return absl::StrCat(s.batch, s.max_batch ? "*" : "");
}
} // namespace

std::string FormatBenchTable(const std::vector<BenchResult> &bt,
                             const std::vector<BenchResult> &torch) {
  std::string s = absl::StrFormat(
      "%-13s %6s %7s %6s %12s %12s %9s %9s %9s %10s %10s\n", "setting",
      "batch", "prompt", "gen", "bt tok/s", "torch tok/s", "bt/torch",
      "bt s", "torch s", "bt MiB", "torch MiB");
  bool generation = false, planned = false;
  for (const BenchResult &r : bt) {
    generation |= IsGenerationSetting(r.setting.name);
    planned |= r.setting.max_batch;
    const BenchResult *t = Match(r, torch);
    const std::string tps = t ? absl::StrFormat("%.1f", t->tokens_per_s) : "-";
    const std::string ratio =
        t && t->tokens_per_s > 0
            ? absl::StrFormat("%.2fx", r.tokens_per_s / t->tokens_per_s)
            : "-";
    const std::string tsec = t ? absl::StrFormat("%.4f", t->seconds) : "-";
    const std::string tmem = t ? absl::StrFormat("%.0f", t->peak_rss_mb) : "-";
    absl::StrAppend(
        &s, absl::StrFormat("%-13s %6s %7d %6d %12.1f %12s %9s %9.4f %9s %10.0f %10s\n",
                            r.setting.name, BatchLabel(r.setting),
                            r.setting.prompt_tokens, r.setting.gen_tokens,
                            r.tokens_per_s, tps, ratio, r.seconds, tsec,
                            r.peak_rss_mb, tmem));
  }
  if (!generation)
    return s;
  // Generation details: prefill and decode, memory per sample.
  absl::StrAppend(
      &s, "\n",
      absl::StrFormat("%-13s %6s %7s %6s %10s %10s %11s %11s %11s %11s %11s\n",
                      "generation", "batch", "prompt", "gen", "bt pref s",
                      "torch pref", "bt dec/s", "torch dec/s", "plan KV/smp",
                      "bt KV/smp", "torch KV/smp"));
  for (const BenchResult &r : bt) {
    if (!IsGenerationSetting(r.setting.name))
      continue;
    const BenchResult *t = Match(r, torch);
    absl::StrAppend(
        &s, absl::StrFormat(
                "%-13s %6s %7d %6d %10.4f %10s %11.1f %11s %11s %11s %11s\n",
                r.setting.name, BatchLabel(r.setting), r.setting.prompt_tokens,
                r.setting.gen_tokens, r.prefill_seconds,
                t ? absl::StrFormat("%.4f", t->prefill_seconds) : "-",
                r.decode_tokens_per_s,
                t ? absl::StrFormat("%.1f", t->decode_tokens_per_s) : "-",
                r.setting.planned_kv_bytes_per_sample > 0
                    ? FormatBytes(r.setting.planned_kv_bytes_per_sample)
                    : "-",
                FormatBytes(r.kv_bytes_per_sample),
                t ? FormatBytes(t->kv_bytes_per_sample) : "-"));
  }
  absl::StrAppend(
      &s,
      "tok/s: forward = batch x tokens / call; prefill-heavy, decode-heavy = "
      "generated tokens (batch x gen) / call, prefill included (the paper's "
      "throughput)\n"
      "pref s: median prefill seconds per call; dec/s: batch x gen / (call - "
      "prefill), generated tokens only\n"
      "KV/smp: KV-cache bytes per sequence: plan = bt-plan-kv-memory (global "
      "+ local scratch); bt = allocated by the runtime (kv_cache + kv_valid); "
      "torch = its key/value tensors. MiB: peak resident set of the process "
      "(docs/bench.md)\n");
  if (planned)
    absl::StrAppend(&s, "*: the planned max batch for the memory budget "
                        "(bt-plan-kv-memory: KV caches and weights only)\n");
  return s;
}

std::string FormatTokensCheck(const std::vector<BenchResult> &bt,
                              const std::vector<BenchResult> &torch) {
  std::string s;
  for (const BenchResult &r : bt) {
    const BenchResult *t = Match(r, torch);
    if (!IsGenerationSetting(r.setting.name) || t == nullptr ||
        r.new_tokens.empty() || t->new_tokens.empty())
      continue;
    const int64_t B = r.setting.batch, N = r.setting.gen_tokens;
    absl::StrAppend(&s, "tokens check ", r.setting.name, " batch ", B, ": ");
    if (static_cast<int64_t>(r.new_tokens.size()) != B * N ||
        t->new_tokens.size() != r.new_tokens.size()) {
      absl::StrAppend(&s, "bt has ", r.new_tokens.size(), " tokens, torch ",
                      t->new_tokens.size(), ", expected ", B * N, "\n");
      continue;
    }
    int64_t same = 0, first_row = -1, first_step = -1;
    for (int64_t b = 0; b < B; ++b) {
      int64_t k = 0;
      while (k < N && r.new_tokens[b * N + k] == t->new_tokens[b * N + k])
        ++k;
      if (k == N)
        ++same;
      else if (first_row < 0)
        first_row = b, first_step = k;
    }
    absl::StrAppend(&s, same, "/", B, " rows identical");
    if (first_row >= 0)
      absl::StrAppend(&s, " (row ", first_row, " first differs at token ",
                      first_step, ")");
    absl::StrAppend(&s, "\n");
  }
  return s;
}

absl::Status WriteBenchCsv(const std::string &path,
                           const std::vector<BenchResult> &bt,
                           const std::vector<BenchResult> &torch) {
  std::string csv = "setting,device,model,batch,tokens,seconds,tokens_per_s,"
                    "impl,ratio_vs_torch,peak_rss_mb,prompt_tokens,gen_tokens,"
                    "total_tokens,total_tokens_per_s,prefill_seconds,"
                    "decode_tokens_per_s,kv_bytes_per_sample,"
                    "planned_kv_bytes_per_sample,max_batch\n";
  auto row = [&](const BenchResult &r, const std::string &ratio) {
    const bool gen = IsGenerationSetting(r.setting.name);
    absl::StrAppend(
        &csv, CsvField(r.setting.name), ",", CsvField(r.device), ",",
        CsvField(r.model), ",", r.setting.batch, ",", r.tokens, ",",
        absl::StrFormat("%.6f", r.seconds), ",",
        absl::StrFormat("%.2f", r.tokens_per_s), ",", CsvField(r.impl), ",",
        ratio, ",", absl::StrFormat("%.1f", r.peak_rss_mb), ",",
        r.setting.prompt_tokens, ",", r.setting.gen_tokens, ",",
        r.total_tokens, ",", absl::StrFormat("%.2f", r.total_tokens_per_s),
        ",", gen ? absl::StrFormat("%.6f", r.prefill_seconds) : "", ",",
        gen ? absl::StrFormat("%.2f", r.decode_tokens_per_s) : "", ",",
        gen ? absl::StrCat(r.kv_bytes_per_sample) : "", ",",
        gen && r.setting.planned_kv_bytes_per_sample > 0
            ? absl::StrCat(r.setting.planned_kv_bytes_per_sample)
            : "",
        ",", r.setting.max_batch ? 1 : 0, "\n");
  };
  for (const BenchResult &r : bt) {
    const BenchResult *t = Match(r, torch);
    row(r, t && t->tokens_per_s > 0
               ? absl::StrFormat("%.4f", r.tokens_per_s / t->tokens_per_s)
               : std::string());
  }
  for (const BenchResult &t : torch)
    row(t, "1.0000");
  return WriteFileAtomically(path, csv);
}

absl::Status RunBenchCommand(const Model &model, const BenchOptions &opts,
                             std::ostream &out, std::ostream &err) {
  if (opts.device != model.device().name())
    return absl::InvalidArgumentError(absl::StrCat(
        "bench --device ", opts.device, ": the artifact runs on '",
        model.device().name(), "' (bt-run compile --target ", opts.device,
        " makes one for '", opts.device, "')"));
  if (opts.baseline != "torch" && opts.baseline != "none")
    return absl::InvalidArgumentError(absl::StrCat(
        "bench --baseline ", opts.baseline, ": expected 'torch' or 'none'"));
  if (opts.progress != "bar" && opts.progress != "dots" &&
      opts.progress != "none")
    return absl::InvalidArgumentError(absl::StrCat(
        "bench --progress ", opts.progress, ": expected bar, dots or none"));
  if (opts.torch_malloc != "tuned" && opts.torch_malloc != "default")
    return absl::InvalidArgumentError(absl::StrCat(
        "bench --torch-malloc ", opts.torch_malloc,
        ": expected 'tuned' or 'default'"));
  if (opts.iters < 1 || opts.warmup < 0)
    return absl::InvalidArgumentError(
        "bench: --iters must be >= 1 and --warmup >= 0");
  if (opts.settings.empty())
    return absl::InvalidArgumentError("bench: no setting to run");
  const int threads = model.device().SetThreads(opts.threads);
  out << absl::StrFormat(
      "bench: model %s, device %s (%s), %d thread(s), %d warmup + %d "
      "timed call(s) per setting, median\n",
      model.config().name(), opts.device,
      model.device().Describe(),
      threads,
      opts.warmup, opts.iters);
  for (const std::string &note : opts.notes)
    out << note << "\n";
  out << std::flush;
  // The roofline's machine bounds, measured before the baseline starts.
  std::optional<MachineBounds> machine;
  if (opts.device == "cpu")
    machine = MeasureMachineBounds(threads);

  BtRunner bt(model, opts.seed);
  std::unique_ptr<TorchRunner> torch;
  if (opts.baseline == "torch") {
    absl::StatusOr<std::unique_ptr<TorchRunner>> t =
        TorchRunner::Start(model, opts, err);
    if (t.ok()) {
      torch = std::move(*t);
      out << "torch baseline: " << torch->description()
          << ", fp32, no_grad, same weights, "
          << (opts.torch_malloc == "tuned"
                  ? "glibc malloc tuned as bt's (no mmap, no trim)"
                  : "glibc malloc defaults")
          << "; bt and torch take turns call by call\n"
          << std::flush;
    } else if (absl::IsUnavailable(t.status())) {
      err << "bench: PyTorch baseline unavailable: " << t.status().message()
          << "\nbench: continuing with bt-only numbers (--baseline none skips "
             "the baseline)\n";
      out << "torch baseline: unavailable (" << t.status().message() << ")\n";
    } else {
      return t.status();
    }
  }
  std::vector<BenchRunner *> runners = {&bt};
  if (torch)
    runners.push_back(torch.get());
  absl::Status torch_status;
  BT_ASSIGN_OR_RETURN(
      std::vector<std::vector<BenchResult>> results,
      RunSettings(runners, opts, model.config().name(), err, &torch_status));
  std::vector<BenchResult> torch_results;
  if (torch && torch_status.ok())
    torch_results = std::move(results[1]);

  // Logits check on the smallest-batch forward setting.
  std::optional<double> diff;
  double scale = 0;
  int64_t check_batch = 0;
  if (torch && torch_status.ok()) {
    const BenchSetting *cs = nullptr;
    for (const BenchSetting &s : opts.settings)
      if (s.name == kForwardSetting && (cs == nullptr || s.batch < cs->batch))
        cs = &s;
    if (cs != nullptr) {
      err << "logits check: batch " << cs->batch << " on both sides ... "
          << std::flush;
      BT_RETURN_IF_ERROR(bt.Prepare(*cs));
      BT_RETURN_IF_ERROR(bt.Call(nullptr).status());
      absl::StatusOr<Tensor> theirs = torch->Logits(bt.inputs());
      auto mine = bt.outputs().find("logits");
      if (!theirs.ok()) {
        torch_status = theirs.status();
      } else if (mine == bt.outputs().end() || theirs->dtype() != proto::F32 ||
                 theirs->shape() != mine->second.shape()) {
        torch_status = absl::InternalError(absl::StrCat(
            "the baseline's logits are ", theirs->DebugString(), ", bt's are ",
            mine == bt.outputs().end() ? std::string("missing")
                                       : mine->second.DebugString()));
      } else {
        const float *a = mine->second.data_as<float>();
        const float *b = theirs->data_as<float>();
        double d = 0;
        for (int64_t i = 0; i < mine->second.num_elements(); ++i) {
          const double x = std::fabs(static_cast<double>(a[i]) - b[i]);
          d = std::isnan(x) || x > d ? x : d;
          scale = std::max(scale, std::fabs(static_cast<double>(a[i])));
        }
        diff = d;
        check_batch = cs->batch;
      }
      err << "done\n";
    }
  }
  if (!torch_status.ok())
    err << "bench: PyTorch baseline failed: " << torch_status.message() << "\n";

  out << "\n" << FormatBenchTable(results[0], torch_results);
  if (diff)
    out << absl::StrFormat(
        "logits check (batch %d): max|bt - torch| = %.3g (max|logits| %.3g)\n",
        check_batch, *diff, scale);
  out << FormatTokensCheck(results[0], torch_results);
  if (machine)
    out << FormatRoofline(*machine, model.config(),
                          model.manifest().kv_plan().global_bytes_per_entry(),
                          results[0]);
  out << FormatEfficiency(model.config(),
                          model.manifest().kv_plan().global_bytes_per_entry(),
                          results[0], MatrixWeightBytes(model.manifest()),
                          opts.derived);
  out << std::flush;
  if (!opts.csv_path.empty()) {
    BT_RETURN_IF_ERROR(WriteBenchCsv(opts.csv_path, results[0], torch_results));
    out << "wrote " << (results[0].size() + torch_results.size())
        << " row(s) to " << opts.csv_path << "\n";
  }
  return torch_status;
}

} // namespace bt::rt
