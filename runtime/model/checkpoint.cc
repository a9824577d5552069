//===- checkpoint.cc - official checkpoints -------------------------------===//

#include "bt/runtime/model/checkpoint.h"

#include <cstring>
#include <memory>
#include <set>
#include <sys/stat.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/model/config.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/safetensors.h"
#include "bt/runtime/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace bt::rt {
namespace {

bool IsFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Collects problems and reports them together (the first 10 in full).
class Problems {
public:
  void Add(absl::StatusCode code, std::string msg) {
    if (code_ == absl::StatusCode::kOk)
      code_ = code;
    msgs_.push_back(std::move(msg));
  }
  bool empty() const { return msgs_.empty(); }
  absl::Status ToStatus(absl::string_view what) const {
    constexpr size_t kShown = 10;
    std::vector<std::string> shown(
        msgs_.begin(), msgs_.begin() + std::min(kShown, msgs_.size()));
    std::string msg =
        msgs_.size() == 1
            ? absl::StrCat(what, ": ", msgs_[0])
            : absl::StrCat(what, ": ", msgs_.size(), " problems: ",
                           absl::StrJoin(shown, "; "));
    if (msgs_.size() > kShown)
      absl::StrAppend(&msg, "; and ", msgs_.size() - kShown, " more");
    return absl::Status(code_, msg);
  }

private:
  absl::StatusCode code_ = absl::StatusCode::kOk;
  std::vector<std::string> msgs_;
};

// NaN and Inf values of an F32, BF16 or F16 tensor (all exponent bits set:
// NaN with a non-zero mantissa, Inf with a zero one), and the flat index of
// the first.
struct NonFinite {
  int64_t nan = 0, inf = 0, first = -1;
};

template <typename Bits>
NonFinite CountNonFinite(const void *data, int64_t n, Bits exponent,
                         Bits mantissa) {
  NonFinite r;
  const Bits *p = static_cast<const Bits *>(data);
  for (int64_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, p + i, sizeof b); // the mapping may be unaligned for F16
    if ((b & exponent) != exponent)
      continue;
    ++((b & mantissa) != 0 ? r.nan : r.inf);
    if (r.first < 0)
      r.first = i;
  }
  return r;
}

NonFinite CountNonFinite(const Tensor &t) {
  const int64_t n = t.num_elements();
  switch (t.dtype()) {
  case proto::F32:
    return CountNonFinite<uint32_t>(t.data(), n, 0x7f800000u, 0x007fffffu);
  case proto::BF16:
    return CountNonFinite<uint16_t>(t.data(), n, 0x7f80u, 0x007fu);
  case proto::F16:
    return CountNonFinite<uint16_t>(t.data(), n, 0x7c00u, 0x03ffu);
  default:
    return {};
  }
}

} // namespace

absl::StatusOr<Checkpoint>
LoadCheckpoint(const proto::ModelConfig &config,
               const std::vector<std::string> &paths,
               const CheckpointOptions &opts) {
  BT_RETURN_IF_ERROR(ValidateModelConfig(config, "checkpoint config"));
  if (paths.empty())
    return absl::InvalidArgumentError("LoadCheckpoint: no safetensors files given");

  // Open every shard; map tensor name -> shard.
  std::vector<SafetensorsFile> files;
  absl::flat_hash_map<std::string, size_t> where;
  Problems problems;
  for (const std::string &p : paths) {
    BT_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(p));
    for (const std::string &name : f.names()) {
      auto [it, inserted] = where.emplace(name, files.size());
      if (!inserted)
        problems.Add(absl::StatusCode::kInvalidArgument,
                     absl::StrCat("tensor '", name, "' appears in both ",
                                  files[it->second].path(), " and ", p));
    }
    files.push_back(std::move(f));
  }
  const std::string what = paths.size() == 1
                               ? paths[0]
                               : absl::StrCat(paths.size(), " safetensors shards (",
                                              absl::StrJoin(paths, ", "), ")");

  // Per-tensor file names only matter with several shards (the message
  // starts with the file otherwise).
  auto in = [&](const SafetensorsFile &f) {
    return paths.size() == 1 ? std::string() : absl::StrCat(" in ", f.path());
  };
  Checkpoint ck;
  ck.config = config;
  std::set<std::string> accounted;
  for (const ParamSpec &spec : ExpectedParams(config)) {
    ck.param_names.push_back(spec.name);
    accounted.insert(spec.name);
    auto it = where.find(spec.name);
    if (it == where.end()) {
      problems.Add(absl::StatusCode::kNotFound,
                   absl::StrCat("missing tensor '", spec.name, "' (expected ",
                                ShapeToString(spec.shape), ")"));
      continue;
    }
    const SafetensorsFile &f = files[it->second];
    const SafetensorsEntry *e = f.Find(spec.name);
    if (e->shape != spec.shape) {
      problems.Add(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("tensor '", spec.name, "'", in(f),
                                " has shape ", ShapeToString(e->shape),
                                ", expected ", ShapeToString(spec.shape)));
      continue;
    }
    if (e->dtype != proto::F32 && e->dtype != proto::BF16 &&
        e->dtype != proto::F16) {
      problems.Add(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("tensor '", spec.name, "'", in(f),
                                " has dtype ", DTypeName(e->dtype),
                                ", expected F32, BF16 or F16 (shape ",
                                ShapeToString(spec.shape), ")"));
      continue;
    }
    if (ck.file_dtype == proto::DTYPE_UNSPECIFIED)
      ck.file_dtype = e->dtype;
    BT_ASSIGN_OR_RETURN(Tensor t, f.Get(spec.name));
    // The official code (torch load_state_dict) loads NaN/Inf weights
    // without a word; they turn every output that reads them into NaN, so
    // they are reported (issue 14), but not refused.
    if (NonFinite nf = CountNonFinite(t); nf.first >= 0)
      ck.warnings.push_back(absl::StrCat(
          "tensor '", spec.name, "' ", ShapeToString(spec.shape), in(f),
          " holds ", nf.nan, " NaN and ", nf.inf,
          " infinite values (the first at flat index ", nf.first,
          "): outputs computed from it will be NaN or infinite"));
    if (opts.convert_to_f32 && t.dtype() != proto::F32) {
      BT_ASSIGN_OR_RETURN(t, ConvertToF32(t, spec.name));
    }
    ck.weights.emplace(spec.name, std::move(t));
  }
  for (const ParamSpec &spec : KnownUnusedParams(config)) {
    accounted.insert(spec.name);
    auto it = where.find(spec.name);
    if (it == where.end())
      continue;
    {
      const SafetensorsFile &f = files[it->second];
      BT_ASSIGN_OR_RETURN(Tensor t, f.Get(spec.name));
      if (opts.convert_to_f32 && t.dtype() != proto::F32 &&
          (t.dtype() == proto::BF16 || t.dtype() == proto::F16)) {
        BT_ASSIGN_OR_RETURN(t, ConvertToF32(t, spec.name));
      }
      ck.unused.emplace(spec.name, std::move(t));
    }
    ck.notices.push_back(absl::StrCat(
          "ignored unused tensor '", spec.name, "' ",
          ShapeToString(files[it->second].Find(spec.name)->shape), " in ",
          files[it->second].path(), " (the model never reads it)"));
  }
  std::vector<std::string> extra;
  for (const auto &[name, _] : where)
    if (!accounted.count(name))
      extra.push_back(name);
  std::sort(extra.begin(), extra.end());
  for (const std::string &name : extra)
    problems.Add(absl::StatusCode::kInvalidArgument,
                 absl::StrCat("unexpected tensor '", name, "' ",
                              ShapeToString(files[where[name]].Find(name)->shape),
                              " (not a parameter of this ",
                              config.kind() == proto::ModelConfig::VANILLA
                                  ? "vanilla GPT-NeoX"
                                  : "Block Transformer",
                              " config; wrong config or checkpoint?)"));
  if (!problems.empty())
    return problems.ToStatus(what);
  return ck;
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string &dir,
                                          const CheckpointOptions &opts) {
  BT_ASSIGN_OR_RETURN(proto::ModelConfig config, LoadModelConfig(dir));
  std::string d = dir;
  if (!d.empty() && d.back() != '/')
    d += '/';
  std::vector<std::string> paths;
  if (IsFile(d + "model.safetensors")) {
    paths.push_back(d + "model.safetensors");
  } else if (IsFile(d + "model.safetensors.index.json")) {
    const std::string index = d + "model.safetensors.index.json";
    BT_ASSIGN_OR_RETURN(std::string text, ReadFile(index));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      return absl::InvalidArgumentError(
          absl::StrCat(index, ": not a JSON object"));
    auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object())
      return absl::InvalidArgumentError(
          absl::StrCat(index, ": weight_map: missing (expected an object of "
                              "tensor name -> shard file)"));
    std::set<std::string> shards;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it->is_string())
        return absl::InvalidArgumentError(absl::StrCat(
            index, ": weight_map['", it.key(), "']: expected a file name"));
      const std::string shard = it->get<std::string>();
      if (shard.find('/') != std::string::npos)
        return absl::InvalidArgumentError(absl::StrCat(
            index, ": weight_map['", it.key(), "']: '", shard,
            "' must be a file name in the same directory"));
      shards.insert(shard);
    }
    for (const std::string &s : shards)
      paths.push_back(d + s);
  } else {
    return absl::NotFoundError(absl::StrCat(
        dir, ": no model.safetensors (or model.safetensors.index.json)"));
  }
  return LoadCheckpoint(config, paths, opts);
}

} // namespace bt::rt
