//===- bench_command.cc - the bench command line --------------------------===//
//
// ParseBenchArgs (SetBenchOption per option, FinishBenchCommandOptions) and
// ResolveBenchOptions (bench.h): `bench`'s options from argv or an
// in-process caller, then resolved against a model into BenchOptions for
// RunBenchCommand.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/tooling/bench.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/model/kv_plan.h"

namespace bt::rt {
namespace {

absl::Status Usage(absl::string_view msg) {
  return absl::InvalidArgumentError(msg);
}

/// --batch: positive integers and 'max', separated by commas.
absl::Status ParseBatchList(const std::string &v, BenchCommandOptions &o) {
  o.batches.clear();
  o.with_max = false;
  for (absl::string_view b : absl::StrSplit(v, ',')) {
    int64_t x = 0;
    if (b == "max") {
      o.with_max = true;
      continue;
    }
    if (!absl::SimpleAtoi(b, &x) || x < 1)
      return Usage(absl::StrCat("--batch ", v,
                                ": expected positive integers separated by "
                                "commas (and 'max')"));
    o.batches.push_back(x);
  }
  return absl::OkStatus();
}

} // namespace

absl::Status SetBenchOption(const std::string &a, const std::string &v,
                            BenchCommandOptions &o) {
  BenchOptions &opts = o.bench;
  int64_t n = 0;
  if (a == "--batch")
    return ParseBatchList(v, o);
  if (a == "--csv") {
    opts.csv_path = v;
  } else if (a == "--setting") {
    o.setting_list = v;
  } else if (a == "--memory") {
    o.memory_source = v; // parsed in FinishBenchCommandOptions
  } else if (a == "--progress") {
    if (v != "auto" && v != "bar" && v != "dots" && v != "none")
      return Usage(absl::StrCat("--progress ", v,
                                ": expected auto, bar, dots or none"));
    o.progress = v;
  } else if (a == "--baseline") {
    if (v != "torch" && v != "none")
      return Usage(absl::StrCat("--baseline ", v, ": expected torch or none"));
    opts.baseline = v;
  } else if (a == "--torch-script") {
    opts.torch_script = v;
  } else if (a == "--python") {
    opts.python = v;
  } else if (a == "--torch-malloc") {
    if (v != "tuned" && v != "default")
      return Usage(absl::StrCat("--torch-malloc ", v,
                                ": expected tuned or default"));
    opts.torch_malloc = v;
  } else if (!absl::SimpleAtoi(v, &n) || n < 0 ||
             (n == 0 && a != "--warmup" && a != "--seed")) {
    return Usage(absl::StrCat(a, " ", v, ": expected a ",
                              a == "--warmup" || a == "--seed" ? "non-negative"
                                                               : "positive",
                              " integer"));
  } else if (a == "--seq-blocks") {
    o.seq_blocks = n;
  } else if (a == "--tokens") {
    o.tokens = n;
  } else if (a == "--prompt") {
    o.prompt_tokens = n;
  } else if (a == "--gen") {
    o.gen_tokens = n;
  } else if (a == "--iters") {
    opts.iters = static_cast<int>(n);
  } else if (a == "--warmup") {
    opts.warmup = static_cast<int>(n);
  } else if (a == "--threads") {
    opts.threads = static_cast<int>(n);
  } else if (a == "--seed") {
    opts.seed = static_cast<uint64_t>(n);
  } else {
    return Usage(absl::StrCat("bench: unknown option '", a, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<BenchCommandOptions>
ParseBenchArgs(const std::vector<std::string> &args) {
  static const std::set<std::string> kValued = {
      "--batch",   "--seq-blocks", "--tokens",       "--iters",
      "--warmup",  "--threads",    "--csv",          "--baseline",
      "--torch-script", "--python", "--seed",        "--torch-malloc",
      "--setting", "--prompt",     "--gen",          "--memory",
      "--progress"};
  BenchCommandOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "-h" || a == "--help") {
      o.help = true;
      return o;
    }
    if (!kValued.count(a))
      return Usage(absl::StrCat("bench: unexpected argument '", a, "'"));
    if (i + 1 >= args.size())
      return Usage(absl::StrCat(a, " needs a value"));
    BT_RETURN_IF_ERROR(SetBenchOption(a, args[++i], o));
  }
  BT_RETURN_IF_ERROR(FinishBenchCommandOptions(o));
  return o;
}

absl::Status FinishBenchCommandOptions(BenchCommandOptions &o) {
  if (o.bench.iters < 1 || o.bench.threads < 1 || o.bench.warmup < 0)
    return Usage("bench: --iters and --threads must be positive, --warmup "
                 "non-negative");
  if (o.tokens > 0 && o.seq_blocks > 0)
    return Usage("bench: give --seq-blocks or --tokens, not both");
  absl::StatusOr<std::vector<BenchSettingSpec>> specs =
      ParseBenchSettings(o.setting_list, o.prompt_tokens, o.gen_tokens);
  if (!specs.ok())
    return Usage(specs.status().message());
  o.specs = std::move(*specs);
  // The memory budget of --batch max (--memory; else what is available,
  // ResolveBenchOptions).
  if (!o.memory_source.empty()) {
    const std::string memory = o.memory_source;
    if (!o.with_max)
      return Usage("bench --memory is the budget of --batch max; add 'max' "
                   "to --batch");
    absl::StatusOr<int64_t> m = ParseByteSize(memory);
    if (!m.ok() || *m <= 0)
      return Usage(absl::StrCat(
          "--memory ", memory, ": expected a positive size such as 80GiB "
          "(binary), 80GB (decimal) or 1073741824 (bytes)"));
    o.memory_bytes = *m;
    o.memory_source = absl::StrCat("--memory ", memory);
  }
  return absl::OkStatus();
}

absl::StatusOr<BenchOptions> ResolveBenchOptions(const Model &model,
                                                 const BenchCommandOptions &command) {
  BenchOptions opts = command.bench;
  int64_t memory_bytes = command.memory_bytes;
  std::string memory_source = command.memory_source;
  if (command.with_max && memory_bytes == 0) {
    absl::StatusOr<int64_t> m = AvailableMemoryBytes();
    if (!m.ok())
      return absl::Status(absl::IsInvalidArgument(m.status())
                              ? absl::StatusCode::kFailedPrecondition
                              : m.status().code(),
                          absl::StrCat("bench --batch max: ", m.status().message()));
    memory_bytes = *m;
    memory_source = "available (MemAvailable)";
  }
  opts.device = model.device().name();
  const proto::ModelConfig &config = model.config();
  const int64_t L = config.kind() == proto::ModelConfig::VANILLA
                        ? 1
                        : std::max<int64_t>(config.block_length(), 1);
  int64_t tokens = command.tokens;
  if (command.seq_blocks > 0)
    tokens = command.seq_blocks * L;
  else if (tokens == 0)
    tokens = (512 + L - 1) / L * L; // 512 tokens (128 blocks at L_B = 4)
  absl::StatusOr<std::vector<BenchSetting>> settings = BenchSettingsFor(
      model.manifest(), command.specs, command.batches, tokens,
      command.with_max, memory_bytes, memory_source, &opts.notes);
  if (!settings.ok()) {
    if (absl::IsInvalidArgument(settings.status()))
      return settings.status();
    return absl::Status(settings.status().code(),
                        absl::StrCat(model.artifact().path(), ": ",
                                     settings.status().message()));
  }
  opts.settings = std::move(*settings);
  opts.progress = command.progress;
  if (opts.progress == "auto") {
    const char *term = getenv("TERM");
    opts.progress = isatty(STDERR_FILENO) && term != nullptr &&
                            std::string(term) != "dumb"
                        ? "bar"
                        : "dots";
  }
  return opts;
}

} // namespace bt::rt
