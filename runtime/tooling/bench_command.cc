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
#include "bt/runtime/device/cuda_emu/cuda_emu.h"
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
  } else if (a == "--emu-lengths") {
    const std::vector<std::string> parts = absl::StrSplit(v, '/');
    int64_t prompt = 0, gen = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &prompt) ||
        !absl::SimpleAtoi(parts[1], &gen) || prompt < 1 || gen < 1)
      return Usage(absl::StrCat("--emu-lengths ", v,
                                ": expected PROMPT/GEN with positive token "
                                "counts, e.g. 4/8"));
    o.emu_prompt_tokens = prompt;
    o.emu_gen_tokens = gen;
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
      "--progress", "--emu-lengths"};
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
  auto located = [&](const absl::Status &s) {
    if (absl::IsInvalidArgument(s))
      return s;
    return absl::Status(s.code(), absl::StrCat(model.artifact().path(), ": ",
                                               s.message()));
  };
  // The emulated device counts short runs; its planned max batches are
  // derived from them (BenchOptions::derived), not run.
  const bool emulated = opts.device == cuda_emu::kDeviceName;
  const bool short_runs = command.emu_gen_tokens > 0;
  if (short_runs && !emulated)
    return absl::InvalidArgumentError(absl::StrCat(
        "bench --emu-lengths applies to --device ", cuda_emu::kDeviceName,
        " (the artifact runs on '", opts.device, "')"));
  std::vector<BenchSettingSpec> counted = command.specs;
  if (short_runs)
    for (BenchSettingSpec &sp : counted)
      if (IsGenerationSetting(sp.name)) {
        sp.prompt_tokens = command.emu_prompt_tokens;
        sp.gen_tokens = command.emu_gen_tokens;
      }
  const bool derive = emulated && command.with_max;
  if (derive && command.batches.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        "bench --device ", cuda_emu::kDeviceName,
        " derives the planned max batch from a counted batch of the same "
        "setting instead of running it: add one to --batch, e.g. --batch "
        "256,max"));
  absl::StatusOr<std::vector<BenchSetting>> settings = BenchSettingsFor(
      model.manifest(), counted, command.batches, tokens,
      command.with_max && !derive, memory_bytes, memory_source, &opts.notes);
  if (!settings.ok())
    return located(settings.status());
  opts.settings = std::move(*settings);
  if (derive) {
    std::vector<BenchSettingSpec> generation;
    for (const BenchSettingSpec &sp : command.specs)
      if (IsGenerationSetting(sp.name))
        generation.push_back(sp);
    absl::StatusOr<std::vector<BenchSetting>> planned = BenchSettingsFor(
        model.manifest(), generation, {}, tokens, /*with_max=*/true,
        memory_bytes, memory_source, &opts.notes);
    if (!planned.ok())
      return located(planned.status());
    opts.derived = std::move(*planned);
  }
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
