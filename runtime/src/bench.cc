//===- bench.cc - throughput benchmarks of a compiled model ---------------===//

#include "bt/runtime/bench.h"
#include "bt/runtime/child_process.h"

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

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/file_util.h"
#include "bt/runtime/safetensors.h"
#include "bt/runtime/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

extern "C" {
// OpenBLAS (linked by the runtime; the kernels call its cblas_sgemm).
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}

extern char **environ;

namespace bt::rt {
namespace {

using Clock = std::chrono::steady_clock;

/// Resets the peak resident set (VmHWM) of this process to its current
/// resident set (Linux >= 4.0; silently nothing elsewhere).
void ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  if (f)
    f << "5";
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

std::string ResolveTorchScript(const BenchOptions &opts) {
  if (!opts.torch_script.empty())
    return opts.torch_script;
  const char *env = getenv("BT_TORCH_SCRIPT");
  if (env && *env)
    return env;
  return "bench/bt_torch.py";
}

std::string ResolvePython(const BenchOptions &opts) {
  if (!opts.python.empty())
    return opts.python;
  const char *env = getenv("BT_PYTHON");
  if (env && *env)
    return env;
  return "/usr/bin/python3";
}

/// The torch result of `setting` in `torch`, or nullptr.
const BenchResult *Match(const BenchResult &r,
                         const std::vector<BenchResult> &torch) {
  for (const BenchResult &t : torch)
    if (t.setting.name == r.setting.name && t.setting.batch == r.setting.batch &&
        t.setting.prompt_tokens == r.setting.prompt_tokens &&
        t.setting.gen_tokens == r.setting.gen_tokens)
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

double Median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

absl::StatusOr<std::vector<BenchSetting>>
ForwardSettings(const proto::ModelConfig &config,
                const std::vector<int64_t> &batches, int64_t tokens) {
  const bool vanilla = config.kind() == proto::ModelConfig::VANILLA;
  const int64_t L = vanilla ? 1 : std::max<int64_t>(config.block_length(), 1);
  if (batches.empty())
    return absl::InvalidArgumentError("bench: no batch size given");
  if (tokens < 1 || tokens % L != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "bench: --tokens ", tokens, " must be a positive multiple of the block "
        "length L_B = ", L, " (or use --seq-blocks)"));
  if (!vanilla && tokens / L < 2)
    return absl::InvalidArgumentError(absl::StrCat(
        "bench: --tokens ", tokens, " is ", tokens / L, " block(s); the forward "
        "needs at least 2 blocks (block 0 is never predicted)"));
  std::vector<BenchSetting> out;
  for (int64_t b : batches) {
    if (b < 1)
      return absl::InvalidArgumentError(
          absl::StrCat("bench: batch size ", b, " must be >= 1"));
    BenchSetting s;
    s.name = kForwardSetting;
    s.batch = b;
    s.prompt_tokens = tokens;
    out.push_back(s);
  }
  return out;
}

absl::StatusOr<TensorMap> ForwardInputs(const proto::ModelConfig &config,
                                        const BenchSetting &setting,
                                        uint64_t seed) {
  const bool vanilla = config.kind() == proto::ModelConfig::VANILLA;
  const int64_t B = setting.batch, T = setting.prompt_tokens;
  const int64_t L = vanilla ? 1 : config.block_length();
  const int64_t V = config.vocab_size();
  if (B < 1 || T < 1 || L < 1 || T % L != 0 || V < 3)
    return absl::InvalidArgumentError(absl::StrCat(
        "bench: cannot build inputs for batch ", B, ", ", T,
        " tokens, block length ", L, ", vocabulary ", V));
  const std::vector<int64_t> shape =
      vanilla ? std::vector<int64_t>{B, T} : std::vector<int64_t>{B, T / L, L};
  BT_ASSIGN_OR_RETURN(Tensor ids, Tensor::Allocate(proto::I64, shape));
  BT_ASSIGN_OR_RETURN(Tensor mask, Tensor::Allocate(proto::I64, shape));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(2, V - 1);
  int64_t *id = ids.data_as<int64_t>();
  int64_t *m = mask.data_as<int64_t>();
  for (int64_t i = 0; i < ids.num_elements(); ++i) {
    id[i] = dist(rng);
    m[i] = 1;
  }
  TensorMap inputs;
  inputs.emplace("input_ids", std::move(ids));
  inputs.emplace("attention_mask", std::move(mask));
  if (!vanilla) {
    BT_ASSIGN_OR_RETURN(Tensor bm, Tensor::Allocate(proto::I64, {B, T / L}));
    std::fill(bm.data_as<int64_t>(), bm.data_as<int64_t>() + bm.num_elements(), 1);
    inputs.emplace("block_attention_mask", std::move(bm));
  }
  return inputs;
}

int SetBenchThreads(int threads) {
  if (threads > 0)
    openblas_set_num_threads(threads);
  return openblas_get_num_threads();
}

// --- bt ----------------------------------------------------------------------

absl::Status BtRunner::Prepare(const BenchSetting &setting) {
  inputs_.clear();
  outputs_.clear();
  if (setting.name != kForwardSetting)
    return absl::UnimplementedError(absl::StrCat(
        "bench setting '", setting.name, "' needs the generation entry points "
        "(docs/generation.md); this version measures '", kForwardSetting, "'"));
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

absl::StatusOr<double> BtRunner::Call() {
  if (entry_.empty())
    return absl::FailedPreconditionError("bench: Call() before Prepare()");
  outputs_.clear(); // free the previous outputs before the next call
  const auto t0 = Clock::now();
  BT_ASSIGN_OR_RETURN(outputs_, model_.Run(entry_, inputs_));
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

absl::StatusOr<double> BtRunner::PeakRssMb() { return ProcessPeakRssMb(); }

// --- torch -------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TorchRunner>>
TorchRunner::Start(const Model &model, const BenchOptions &opts,
                   std::ostream &progress) {
  const std::string script = ResolveTorchScript(opts);
  const std::string python = ResolvePython(opts);
  if (!IsReadable(script))
    return absl::UnavailableError(absl::StrCat(
        "the PyTorch baseline script ", script,
        " is not readable (pass --torch-script <bench/bt_torch.py>)"));
  if (python.find('/') != std::string::npos && !IsExecutable(python))
    return absl::UnavailableError(absl::StrCat(
        "no Python interpreter at ", python, " (pass --python)"));

  std::unique_ptr<TorchRunner> r(new TorchRunner());
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
  return r;
}

TorchRunner::~TorchRunner() {
  child_.reset(); // EOF: the script exits; wait for it before removing dir_
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

absl::StatusOr<std::string> TorchRunner::Request(const std::string &line) {
  if (child_ == nullptr)
    return absl::FailedPreconditionError("the PyTorch baseline is not running");
  absl::StatusOr<std::string> reply = child_->Request(line);
  if (!reply.ok())
    return absl::InternalError(absl::StrCat("PyTorch baseline: ", reply.status().message()));
  return reply;
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
  BT_ASSIGN_OR_RETURN(std::string reply, Request(req.dump()));
  (void)reply;
  return absl::OkStatus();
}

absl::StatusOr<double> TorchRunner::Call() {
  BT_ASSIGN_OR_RETURN(std::string reply, Request(R"({"cmd": "call"})"));
  return NumberField(reply, "seconds");
}

absl::StatusOr<double> TorchRunner::PeakRssMb() {
  BT_ASSIGN_OR_RETURN(std::string reply, Request(R"({"cmd": "peak"})"));
  return NumberField(reply, "peak_rss_mb");
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
  auto drop = [&](size_t k, const absl::Status &s) -> absl::Status {
    if (k == 0)
      return s;
    progress << "\n[" << runners[k]->impl() << "] failed: " << s.message()
             << "; continuing without it\n";
    if (secondary_error != nullptr && secondary_error->ok())
      *secondary_error = s;
    alive[k] = false;
    return absl::OkStatus();
  };
  const bool turns = runners.size() > 1;
  for (const BenchSetting &setting : opts.settings) {
    std::vector<BenchResult> current(runners.size());
    for (size_t k = 0; k < runners.size(); ++k) {
      if (!alive[k])
        continue;
      BenchResult &r = current[k];
      r.setting = setting;
      r.impl = runners[k]->impl();
      r.device = opts.device;
      r.model = model_name;
      r.tokens = setting.batch * (setting.prompt_tokens + setting.gen_tokens);
      if (setting.name == kForwardSetting)
        r.tokens = setting.batch * setting.prompt_tokens;
      absl::Status s = runners[k]->Prepare(setting);
      if (!s.ok())
        BT_RETURN_IF_ERROR(drop(k, s));
    }
    progress << absl::StrFormat("%s batch %d x %d tokens", setting.name,
                                setting.batch, setting.prompt_tokens);
    if (setting.gen_tokens > 0)
      progress << absl::StrFormat(" + %d generated", setting.gen_tokens);
    progress << ":\n" << std::flush;
    for (int i = 0; i < opts.warmup + opts.iters; ++i) {
      const bool warm = i < opts.warmup;
      progress << (warm ? absl::StrFormat("  warmup %d/%d:", i + 1, opts.warmup)
                        : absl::StrFormat("  call %d/%d:", i - opts.warmup + 1,
                                          opts.iters))
               << std::flush;
      for (size_t k = 0; k < runners.size(); ++k) {
        if (!alive[k])
          continue;
        if (turns)
          std::this_thread::sleep_for(
              std::chrono::duration<double>(opts.switch_pause));
        absl::StatusOr<double> t = runners[k]->Call();
        if (!t.ok()) {
          BT_RETURN_IF_ERROR(drop(k, t.status()));
          continue;
        }
        if (!warm)
          current[k].run_seconds.push_back(*t);
        progress << absl::StrFormat(" %s %.3gs", runners[k]->impl(), *t)
                 << std::flush;
      }
      progress << "\n" << std::flush;
    }
    for (size_t k = 0; k < runners.size(); ++k) {
      if (!alive[k])
        continue;
      BenchResult &r = current[k];
      absl::StatusOr<double> peak = runners[k]->PeakRssMb();
      if (!peak.ok()) {
        BT_RETURN_IF_ERROR(drop(k, peak.status()));
        continue;
      }
      r.peak_rss_mb = *peak;
      r.seconds = Median(r.run_seconds);
      r.tokens_per_s = r.seconds > 0 ? r.tokens / r.seconds : 0;
      progress << absl::StrFormat("  %-6s %.1f tok/s (median %.4g s)\n",
                                  r.impl, r.tokens_per_s, r.seconds);
      results[k].push_back(std::move(r));
    }
    progress << std::flush;
  }
  return results;
}

std::string FormatBenchTable(const std::vector<BenchResult> &bt,
                             const std::vector<BenchResult> &torch) {
  std::string s = absl::StrFormat(
      "%-10s %5s %7s %6s %12s %12s %9s %9s %9s %10s %10s\n", "setting",
      "batch", "prompt", "gen", "bt tok/s", "torch tok/s", "bt/torch",
      "bt s", "torch s", "bt MiB", "torch MiB");
  for (const BenchResult &r : bt) {
    const BenchResult *t = Match(r, torch);
    const std::string tps = t ? absl::StrFormat("%.1f", t->tokens_per_s) : "-";
    const std::string ratio =
        t && t->tokens_per_s > 0
            ? absl::StrFormat("%.2fx", r.tokens_per_s / t->tokens_per_s)
            : "-";
    const std::string tsec = t ? absl::StrFormat("%.4f", t->seconds) : "-";
    const std::string tmem = t ? absl::StrFormat("%.0f", t->peak_rss_mb) : "-";
    absl::StrAppend(
        &s, absl::StrFormat("%-10s %5d %7d %6d %12.1f %12s %9s %9.4f %9s %10.0f %10s\n",
                            r.setting.name, r.setting.batch,
                            r.setting.prompt_tokens, r.setting.gen_tokens,
                            r.tokens_per_s, tps, ratio, r.seconds, tsec,
                            r.peak_rss_mb, tmem));
  }
  return s;
}

absl::Status WriteBenchCsv(const std::string &path,
                           const std::vector<BenchResult> &bt,
                           const std::vector<BenchResult> &torch) {
  std::string csv = "setting,device,model,batch,tokens,seconds,tokens_per_s,"
                    "impl,ratio_vs_torch,peak_rss_mb\n";
  auto row = [&](const BenchResult &r, const std::string &ratio) {
    absl::StrAppend(&csv, CsvField(r.setting.name), ",", CsvField(r.device),
                    ",", CsvField(r.model), ",", r.setting.batch, ",",
                    r.tokens, ",", absl::StrFormat("%.6f", r.seconds), ",",
                    absl::StrFormat("%.2f", r.tokens_per_s), ",",
                    CsvField(r.impl), ",", ratio, ",",
                    absl::StrFormat("%.1f", r.peak_rss_mb), "\n");
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
  if (opts.device != "cpu")
    return absl::UnimplementedError(absl::StrCat(
        "bench --device ", opts.device,
        ": this runtime runs 'cpu' artifacts only"));
  if (opts.baseline != "torch" && opts.baseline != "none")
    return absl::InvalidArgumentError(absl::StrCat(
        "bench --baseline ", opts.baseline, ": expected 'torch' or 'none'"));
  if (opts.torch_malloc != "tuned" && opts.torch_malloc != "default")
    return absl::InvalidArgumentError(absl::StrCat(
        "bench --torch-malloc ", opts.torch_malloc,
        ": expected 'tuned' or 'default'"));
  if (opts.iters < 1 || opts.warmup < 0)
    return absl::InvalidArgumentError(
        "bench: --iters must be >= 1 and --warmup >= 0");
  if (opts.settings.empty())
    return absl::InvalidArgumentError("bench: no setting to run");
  const int threads = SetBenchThreads(opts.threads);
  out << absl::StrFormat(
      "bench: model %s, device %s (%s), %d BLAS thread(s), %d warmup + %d "
      "timed call(s) per setting, median\n",
      model.config().name(), opts.device,
      model.manifest().cpu().empty() ? "cpu" : model.manifest().cpu(), threads,
      opts.warmup, opts.iters);
  out << std::flush;

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
      BT_RETURN_IF_ERROR(bt.Call().status());
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
  out << std::flush;
  if (!opts.csv_path.empty()) {
    BT_RETURN_IF_ERROR(WriteBenchCsv(opts.csv_path, results[0], torch_results));
    out << "wrote " << (results[0].size() + torch_results.size())
        << " row(s) to " << opts.csv_path << "\n";
  }
  return torch_status;
}

} // namespace bt::rt
