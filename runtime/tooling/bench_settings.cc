//===- bench_settings.cc - the settings of the bench ----------------------===//
//
// Median, ParseBenchSettings, GenerationSettings, GenerationPrompt,
// ForwardSettings, BenchSettingsFor, ForwardInputs (bench.h).
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/tooling/bench.h"
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

double Median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

bool IsGenerationSetting(const std::string &name) {
  return name == kPrefillHeavySetting || name == kDecodeHeavySetting;
}

bool IsSequenceSetting(const std::string &name) {
  return name == kForwardSetting || name == kTrainSetting;
}

absl::StatusOr<std::vector<BenchSettingSpec>>
ParseBenchSettings(const std::string &list, int64_t prompt_tokens,
                   int64_t gen_tokens) {
  std::vector<BenchSettingSpec> out;
  const std::string known =
      absl::StrCat(kForwardSetting, ", ", kPrefillHeavySetting, ", ",
                   kDecodeHeavySetting, ", ", kTrainSetting);
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    std::vector<std::string> parts = absl::StrSplit(item, absl::MaxSplits('=', 1));
    BenchSettingSpec spec;
    spec.name = parts[0];
    if (!IsSequenceSetting(spec.name) && !IsGenerationSetting(spec.name))
      return absl::InvalidArgumentError(absl::StrCat(
          "--setting ", list, ": unknown setting '", spec.name,
          "' (expected ", known, ")"));
    for (const BenchSettingSpec &o : out)
      if (o.name == spec.name)
        return absl::InvalidArgumentError(absl::StrCat(
            "--setting ", list, ": '", spec.name, "' is given twice"));
    if (IsSequenceSetting(spec.name)) {
      if (parts.size() > 1)
        return absl::InvalidArgumentError(absl::StrCat(
            "--setting ", list, ": '", spec.name,
            "' takes no lengths (its length is --tokens / --seq-blocks)"));
      out.push_back(spec);
      continue;
    }
    const bool prefill = spec.name == kPrefillHeavySetting;
    spec.prompt_tokens = prompt_tokens > 0 ? prompt_tokens : prefill ? 2048 : 128;
    spec.gen_tokens = gen_tokens > 0 ? gen_tokens : prefill ? 128 : 2048;
    if (parts.size() > 1) {
      std::vector<std::string> len = absl::StrSplit(parts[1], '/');
      if (len.size() != 2 || !absl::SimpleAtoi(len[0], &spec.prompt_tokens) ||
          !absl::SimpleAtoi(len[1], &spec.gen_tokens) ||
          spec.prompt_tokens < 1 || spec.gen_tokens < 1)
        return absl::InvalidArgumentError(absl::StrCat(
            "--setting ", list, ": '", item,
            "': expected NAME=PROMPT/GEN with positive token counts, e.g. ",
            kPrefillHeavySetting, "=2048/128"));
    }
    out.push_back(spec);
  }
  if (out.empty())
    return absl::InvalidArgumentError("--setting: no setting given");
  return out;
}

absl::StatusOr<std::vector<BenchSetting>>
GenerationSettings(const BenchSettingSpec &spec,
                   const std::vector<int64_t> &batches, int64_t max_batch) {
  if (!IsGenerationSetting(spec.name))
    return absl::InvalidArgumentError(absl::StrCat(
        "bench: '", spec.name, "' is not a generation setting"));
  if (spec.prompt_tokens < 1 || spec.gen_tokens < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "bench: ", spec.name, " needs at least 1 prompt and 1 generated "
        "token, got ", spec.prompt_tokens, "/", spec.gen_tokens));
  if (batches.empty() && max_batch <= 0)
    return absl::InvalidArgumentError("bench: no batch size given");
  std::vector<BenchSetting> out;
  auto add = [&](int64_t b, bool max) -> absl::Status {
    if (b < 1)
      return absl::InvalidArgumentError(
          absl::StrCat("bench: batch size ", b, " must be >= 1"));
    BenchSetting s;
    s.name = spec.name;
    s.batch = b;
    s.prompt_tokens = spec.prompt_tokens;
    s.gen_tokens = spec.gen_tokens;
    s.max_batch = max;
    out.push_back(s);
    return absl::OkStatus();
  };
  for (int64_t b : batches)
    BT_RETURN_IF_ERROR(add(b, false));
  if (max_batch > 0)
    BT_RETURN_IF_ERROR(add(max_batch, true));
  return out;
}

absl::StatusOr<Tensor> GenerationPrompt(const proto::ModelConfig &config,
                                        const BenchSetting &setting,
                                        uint64_t seed) {
  const int64_t B = setting.batch, T = setting.prompt_tokens;
  const int64_t V = config.vocab_size();
  if (B < 1 || T < 1 || V < 3)
    return absl::InvalidArgumentError(absl::StrCat(
        "bench: cannot build prompts for batch ", B, ", ", T,
        " tokens, vocabulary ", V));
  BT_ASSIGN_OR_RETURN(Tensor ids, Tensor::Allocate(proto::I64, {B, T}));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(2, V - 1);
  int64_t *id = ids.data_as<int64_t>();
  for (int64_t i = 0; i < ids.num_elements(); ++i)
    id[i] = dist(rng);
  return ids;
}

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30))
    return absl::StrFormat("%.2f GiB", b / (1 << 30));
  if (bytes >= (int64_t{1} << 20))
    return absl::StrFormat("%.2f MiB", b / (1 << 20));
  if (bytes >= (int64_t{1} << 10))
    return absl::StrFormat("%.2f KiB", b / (1 << 10));
  return absl::StrFormat("%d B", bytes);
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

absl::StatusOr<std::vector<BenchSetting>>
BenchSettingsFor(const proto::Manifest &manifest,
                 const std::vector<BenchSettingSpec> &specs,
                 const std::vector<int64_t> &batches, int64_t forward_tokens,
                 bool with_max, int64_t memory_bytes,
                 const std::string &memory_source,
                 std::vector<std::string> *notes) {
  bool any_generation = false;
  for (const BenchSettingSpec &sp : specs)
    any_generation |= IsGenerationSetting(sp.name);
  if (with_max && !any_generation)
    return absl::InvalidArgumentError(
        "bench --batch max applies to the generation settings (prefill-heavy, "
        "decode-heavy)");
  std::vector<BenchSetting> out;
  for (const BenchSettingSpec &sp : specs) {
    std::vector<BenchSetting> settings;
    if (IsSequenceSetting(sp.name)) {
      if (batches.empty())
        continue; // `--batch max` alone: generation settings only
      BT_ASSIGN_OR_RETURN(settings, ForwardSettings(manifest.config(), batches,
                                                    forward_tokens));
      for (BenchSetting &s : settings)
        s.name = sp.name;
    } else {
      int64_t planned = 0, max_batch = 0;
      if (manifest.has_kv_plan() || with_max) {
        BT_ASSIGN_OR_RETURN(PlannedKV plan,
                            PlanKV(manifest, sp.prompt_tokens, sp.gen_tokens));
        planned = plan.bytes_per_sequence;
        if (with_max) {
          BT_ASSIGN_OR_RETURN(max_batch, PlannedMaxBatch(plan, memory_bytes));
          const std::string explain = absl::StrCat(
              "floor((", FormatBytes(memory_bytes), " ", memory_source, " - ",
              FormatBytes(plan.weight_bytes), " weights) / ",
              FormatBytes(plan.bytes_per_sequence), " KV cache per sequence)");
          if (max_batch < 1)
            return absl::InvalidArgumentError(absl::StrCat(
                "bench --batch max for ", sp.name, " (", sp.prompt_tokens,
                " + ", sp.gen_tokens, " tokens): ", explain,
                " is 0: the budget does not fit one sequence"));
          if (notes != nullptr)
            notes->push_back(absl::StrCat(
                "planned max batch for ", sp.name, " (", sp.prompt_tokens,
                " + ", sp.gen_tokens, " tokens): ", explain, " = ", max_batch,
                " (bt-plan-kv-memory: ", plan.entries, " global entries x ",
                FormatBytes(manifest.kv_plan().global_bytes_per_entry()),
                " + ", FormatBytes(plan.local_bytes), " local scratch)"));
        }
      }
      BT_ASSIGN_OR_RETURN(settings, GenerationSettings(sp, batches, max_batch));
      for (BenchSetting &s : settings)
        s.planned_kv_bytes_per_sample = planned;
    }
    out.insert(out.end(), settings.begin(), settings.end());
  }
  if (out.empty())
    return absl::InvalidArgumentError("bench: no setting to run");
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

} // namespace bt::rt
