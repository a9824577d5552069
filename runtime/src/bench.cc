//===- bench.cc - throughput benchmarks of a compiled model ---------------===//

#include "bt/runtime/bench.h"

#include <fcntl.h>
#include <spawn.h>
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
double PeakRssMb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::strtod(line.c_str() + 6, nullptr) / 1024.0; // kB
  return 0;
}

const proto::TensorSpec *FindInput(const proto::EntryPoint &ep,
                                   const std::string &name) {
  for (const proto::TensorSpec &s : ep.inputs())
    if (s.name() == name)
      return &s;
  return nullptr;
}

std::string BatchesOf(const std::vector<BenchSetting> &settings) {
  std::vector<int64_t> b;
  for (const BenchSetting &s : settings)
    b.push_back(s.batch);
  return absl::StrJoin(b, ",");
}

/// A temporary directory, removed with its content on destruction.
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
  std::string File(const std::string &name) const {
    return path_ + "/" + name;
  }

private:
  std::string path_;
};

/// Runs `argv` with `env_overrides` added to this process's environment;
/// the child's stdout is returned in `captured`, its stderr is ours.
/// Returns the exit status (128 + signal for a killed child).
absl::StatusOr<int> RunChild(const std::vector<std::string> &argv,
                             const std::map<std::string, std::string> &env_overrides,
                             std::string &captured) {
  std::vector<std::string> env;
  for (char **e = environ; e && *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (!env_overrides.count(key))
      env.push_back(kv);
  }
  for (const auto &[k, v] : env_overrides)
    env.push_back(k + "=" + v);
  std::vector<char *> cargv, cenv;
  for (const std::string &a : argv)
    cargv.push_back(const_cast<char *>(a.c_str()));
  cargv.push_back(nullptr);
  for (const std::string &e : env)
    cenv.push_back(const_cast<char *>(e.c_str()));
  cenv.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return ErrnoToStatus(errno, "pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, cargv[0], &actions, nullptr, cargv.data(),
                       cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return ErrnoToStatus(rc, absl::StrCat("cannot run ", argv[0]));
  }
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      captured.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

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

absl::StatusOr<BenchResult> RunBtSetting(const Model &model,
                                         const BenchSetting &setting,
                                         const BenchOptions &opts,
                                         std::ostream &progress,
                                         TensorMap *keep_outputs) {
  if (setting.name != kForwardSetting)
    return absl::UnimplementedError(absl::StrCat(
        "bench setting '", setting.name, "' needs the generation entry points "
        "(docs/generation.md); this version measures '", kForwardSetting, "'"));
  const proto::EntryPoint *ep = model.FindEntryPoint("eval");
  if (ep == nullptr)
    return absl::NotFoundError(absl::StrCat(
        model.artifact().path(), ": no 'eval' entry point to benchmark (it has: ",
        absl::StrJoin(model.EntryPointNames(), ", "), ")"));
  BT_ASSIGN_OR_RETURN(TensorMap all,
                      ForwardInputs(model.config(), setting, opts.seed));
  // Exactly the entry's inputs (a vanilla entry has no block mask).
  TensorMap inputs;
  for (const proto::TensorSpec &s : ep->inputs()) {
    auto it = all.find(s.name());
    if (it == all.end())
      return absl::InvalidArgumentError(absl::StrCat(
          "bench: entry point 'eval' takes '", s.name(),
          "', which the forward benchmark does not provide"));
    inputs.emplace(s.name(), std::move(it->second));
  }

  BenchResult r;
  r.setting = setting;
  r.impl = "bt";
  r.device = opts.device;
  r.model = model.config().name();
  r.tokens = setting.batch * setting.prompt_tokens;
  progress << absl::StrFormat("[bt]    %s batch %d x %d tokens: ", setting.name,
                              setting.batch, setting.prompt_tokens)
           << std::flush;
  ResetPeakRss();
  TensorMap last;
  for (int i = 0; i < opts.warmup + opts.iters; ++i) {
    last.clear(); // free the previous outputs before the next call
    const auto t0 = Clock::now();
    BT_ASSIGN_OR_RETURN(last, model.Run("eval", inputs));
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i < opts.warmup) {
      progress << absl::StrFormat("warmup %.3gs, ", s) << std::flush;
    } else {
      r.run_seconds.push_back(s);
      progress << absl::StrFormat("%.3gs ", s) << std::flush;
    }
  }
  r.peak_rss_mb = PeakRssMb();
  r.seconds = Median(r.run_seconds);
  r.tokens_per_s = r.seconds > 0 ? r.tokens / r.seconds : 0;
  progress << absl::StrFormat("-> %.1f tok/s\n", r.tokens_per_s) << std::flush;
  if (keep_outputs != nullptr)
    *keep_outputs = std::move(last);
  return r;
}

absl::StatusOr<TorchBaseline> RunTorchBaseline(const Model &model,
                                               const BenchOptions &opts,
                                               const TensorMap *check_inputs,
                                               const Tensor *check_logits,
                                               std::ostream &progress) {
  const std::string script = ResolveTorchScript(opts);
  const std::string python = ResolvePython(opts);
  if (!IsReadable(script))
    return absl::UnavailableError(absl::StrCat(
        "the PyTorch baseline script ", script,
        " is not readable (pass --torch-script <bench/bt_torch.py>)"));
  if (!IsExecutable(python))
    return absl::UnavailableError(absl::StrCat(
        "no Python interpreter at ", python, " (pass --python)"));
  for (const BenchSetting &s : opts.settings)
    if (s.name != kForwardSetting)
      return absl::UnimplementedError(absl::StrCat(
          "the PyTorch baseline of setting '", s.name, "' is not implemented"));

  BT_ASSIGN_OR_RETURN(ScratchDir dir, ScratchDir::Create());
  // Configuration (bt.proto ModelConfig as JSON) and weights.
  std::string config_json;
  google::protobuf::util::JsonPrintOptions jopts;
  jopts.preserve_proto_field_names = true;
  jopts.always_print_primitive_fields = true;
  jopts.always_print_enums_as_ints = false;
  auto js = google::protobuf::util::MessageToJsonString(model.config(),
                                                        &config_json, jopts);
  if (!js.ok())
    return absl::InternalError(
        absl::StrCat("cannot serialize the model config: ", js.ToString()));
  BT_RETURN_IF_ERROR(WriteFileAtomically(dir.File("bt_config.json"), config_json));
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
    BT_RETURN_IF_ERROR(WriteSafetensors(dir.File("model.safetensors"), refs));
  }
  progress << "done\n" << std::flush;
  const bool check = check_inputs != nullptr && check_logits != nullptr;
  if (check)
    BT_RETURN_IF_ERROR(
        WriteSafetensors(dir.File("check_inputs.safetensors"), *check_inputs));

  int64_t tokens = opts.settings.empty() ? 0 : opts.settings[0].prompt_tokens;
  for (const BenchSetting &s : opts.settings)
    if (s.prompt_tokens != tokens)
      return absl::UnimplementedError(
          "the PyTorch baseline runs one sequence length per call");
  std::vector<std::string> argv = {
      python, script, "--bench",
      "--model-dir", dir.File(""),
      "--batch", BatchesOf(opts.settings),
      "--tokens", absl::StrCat(tokens),
      "--iters", absl::StrCat(opts.iters),
      "--warmup", absl::StrCat(opts.warmup),
      "--threads", absl::StrCat(opts.threads),
      "--seed", absl::StrCat(opts.seed)};
  if (check) {
    argv.push_back("--check-inputs");
    argv.push_back(dir.File("check_inputs.safetensors"));
    argv.push_back("--check-output");
    argv.push_back(dir.File("check_logits.safetensors"));
  }
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
  std::string captured;
  BT_ASSIGN_OR_RETURN(int rc, RunChild(argv, env, captured));

  TorchBaseline out;
  std::string unavailable;
  std::istringstream lines(captured);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '{')
      continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      continue;
    if (j.contains("unavailable")) {
      unavailable = j["unavailable"].is_string()
                        ? j["unavailable"].get<std::string>()
                        : j["unavailable"].dump();
      continue;
    }
    if (!j.contains("tokens_per_s"))
      continue;
    try {
      BenchResult r;
      r.impl = "torch";
      r.device = opts.device;
      r.model = model.config().name();
      r.setting.name = j.at("setting").get<std::string>();
      r.setting.batch = j.at("batch").get<int64_t>();
      r.setting.prompt_tokens = j.at("prompt_tokens").get<int64_t>();
      r.setting.gen_tokens = j.value("gen_tokens", int64_t{0});
      r.tokens = j.at("tokens").get<int64_t>();
      r.seconds = j.at("seconds").get<double>();
      r.tokens_per_s = j.at("tokens_per_s").get<double>();
      r.peak_rss_mb = j.value("peak_rss_mb", 0.0);
      if (j.contains("run_seconds"))
        r.run_seconds = j["run_seconds"].get<std::vector<double>>();
      out.results.push_back(std::move(r));
    } catch (const nlohmann::json::exception &e) {
      return absl::InternalError(absl::StrCat(
          script, ": malformed result line '", line, "': ", e.what()));
    }
  }
  if (!unavailable.empty())
    return absl::UnavailableError(unavailable);
  if (rc != 0)
    return absl::InternalError(
        absl::StrCat(python, " ", script, " --bench exited with status ", rc));
  if (out.results.size() != opts.settings.size())
    return absl::InternalError(absl::StrCat(
        script, " --bench reported ", out.results.size(), " result(s) for ",
        opts.settings.size(), " setting(s)"));
  if (check) {
    BT_ASSIGN_OR_RETURN(SafetensorsFile f,
                        SafetensorsFile::Open(dir.File("check_logits.safetensors")));
    BT_ASSIGN_OR_RETURN(Tensor torch_logits, f.Get("logits"));
    if (torch_logits.dtype() != proto::F32 ||
        torch_logits.shape() != check_logits->shape())
      return absl::InternalError(absl::StrCat(
          "the baseline's check logits are ", torch_logits.DebugString(),
          ", bt's are ", check_logits->DebugString()));
    const float *a = check_logits->data_as<float>();
    const float *b = torch_logits.data_as<float>();
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < check_logits->num_elements(); ++i) {
      const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
      diff = std::isnan(d) || d > diff ? d : diff;
      scale = std::max(scale, std::fabs(static_cast<double>(a[i])));
    }
    out.logits_max_abs_diff = diff;
    out.logits_max_abs = scale;
  }
  return out;
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
  if (opts.baseline == "torch")
    out << (opts.torch_malloc == "tuned"
                ? "torch baseline: fp32, no_grad, same weights and threads, "
                  "glibc malloc tuned as bt's (no mmap, no trim)\n"
                : "torch baseline: fp32, no_grad, same weights and threads, "
                  "glibc malloc defaults\n");
  out << std::flush;

  // bt first, keeping the logits of the smallest batch for the check.
  size_t check_index = 0;
  for (size_t i = 1; i < opts.settings.size(); ++i)
    if (opts.settings[i].batch < opts.settings[check_index].batch)
      check_index = i;
  std::vector<BenchResult> bt;
  TensorMap check_outputs;
  for (size_t i = 0; i < opts.settings.size(); ++i) {
    BT_ASSIGN_OR_RETURN(
        BenchResult r,
        RunBtSetting(model, opts.settings[i], opts, err,
                     i == check_index && opts.baseline == "torch" ? &check_outputs
                                                                  : nullptr));
    bt.push_back(std::move(r));
  }

  TorchBaseline torch;
  absl::Status torch_status = absl::OkStatus();
  if (opts.baseline == "torch") {
    const BenchSetting &cs = opts.settings[check_index];
    absl::StatusOr<TensorMap> check_inputs = ForwardInputs(model.config(), cs, opts.seed);
    auto logits = check_outputs.find("logits");
    const bool can_check = check_inputs.ok() && logits != check_outputs.end();
    if (can_check) {
      // Exactly the inputs bt ran on (a vanilla eval has no block mask).
      const proto::EntryPoint *ep = model.FindEntryPoint("eval");
      for (auto it = check_inputs->begin(); it != check_inputs->end();)
        it = ep && !FindInput(*ep, it->first) ? check_inputs->erase(it) : std::next(it);
    }
    absl::StatusOr<TorchBaseline> t = RunTorchBaseline(
        model, opts, can_check ? &*check_inputs : nullptr,
        can_check ? &logits->second : nullptr, err);
    if (t.ok()) {
      torch = std::move(*t);
    } else if (absl::IsUnavailable(t.status())) {
      err << "bench: PyTorch baseline unavailable: " << t.status().message()
          << "\nbench: continuing with bt-only numbers (--baseline none skips "
             "the baseline)\n";
      out << "torch baseline: unavailable (" << t.status().message() << ")\n";
    } else {
      torch_status = t.status();
      err << "bench: PyTorch baseline failed: " << t.status().message() << "\n";
    }
  }

  out << "\n" << FormatBenchTable(bt, torch.results);
  if (torch.logits_max_abs_diff)
    out << absl::StrFormat(
        "logits check (batch %d): max|bt - torch| = %.3g (max|logits| %.3g)\n",
        opts.settings[check_index].batch, *torch.logits_max_abs_diff,
        torch.logits_max_abs);
  out << std::flush;
  if (!opts.csv_path.empty()) {
    BT_RETURN_IF_ERROR(WriteBenchCsv(opts.csv_path, bt, torch.results));
    out << "wrote " << (bt.size() + torch.results.size()) << " row(s) to "
        << opts.csv_path << "\n";
  }
  return torch_status;
}

} // namespace bt::rt
