//===- trainer.cc - training state and optimizer steps ---------------------===//

#include "bt/runtime/train/trainer.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bt/runtime/model/checkpoint.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/safetensors.h"
#include "bt/runtime/base/status_macros.h"

namespace bt::rt {
using namespace train_abi;
namespace {

// The scalar inputs of both entries.
constexpr char kStep[] = "step";
constexpr char kPeakLr[] = "peak_lr";
constexpr char kWarmupSteps[] = "warmup_steps";
constexpr char kTotalSteps[] = "total_steps";

bool IsScheduleInput(const std::string &name) {
  return name == kStep || name == kPeakLr || name == kWarmupSteps ||
         name == kTotalSteps;
}

Tensor ScalarI64(int64_t v) {
  Tensor t = *Tensor::Allocate(DType::I64, {});
  *t.data_as<int64_t>() = v;
  return t;
}

Tensor ScalarF32(float v) {
  Tensor t = *Tensor::Allocate(DType::F32, {});
  *t.data_as<float>() = v;
  return t;
}

std::vector<int64_t> SpecShape(const proto::TensorSpec &s) {
  return std::vector<int64_t>(s.shape().begin(), s.shape().end());
}

/// The in-out specs of `ep` by name.
std::map<std::string, const proto::TensorSpec *>
InOutSpecs(const proto::EntryPoint &ep) {
  std::map<std::string, const proto::TensorSpec *> specs;
  for (const proto::TensorSpec &s : ep.inputs())
    if (s.inout())
      specs[s.name()] = &s;
  return specs;
}

absl::Status FsyncPath(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return ErrnoToStatus(errno, path);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0)
    return ErrnoToStatus(err, absl::StrCat("fsync ", path));
  return absl::OkStatus();
}

/// The file name a copied config gets inside a checkpoint directory.
std::string ConfigFileName(const std::string &path) {
  std::string base = std::filesystem::path(path).filename().string();
  if (base == "config.yaml" || base == "config.json")
    return base;
  if (absl::EndsWith(base, ".json"))
    return "config.json";
  return "config.yaml";
}

} // namespace

absl::StatusOr<std::unique_ptr<Trainer>>
Trainer::Create(const Model &model, const TrainerSchedule &schedule) {
  const proto::EntryPoint *train = model.FindEntryPoint(kTrainStepEntry);
  const proto::EntryPoint *apply = model.FindEntryPoint(kApplyGradientsEntry);
  if (train == nullptr && apply == nullptr)
    return absl::NotFoundError(absl::StrCat(
        model.artifact().path(), ": the artifact has no '", kTrainStepEntry,
        "' or '", kApplyGradientsEntry, "' entry point (it has: ",
        absl::StrJoin(model.EntryPointNames(), ", "),
        "); compile it with the training entry points (bt-run compile --train)"));
  const proto::EntryPoint &ep = train ? *train : *apply;
  auto specs = InOutSpecs(ep);
  if (train && apply) {
    auto other = InOutSpecs(*apply);
    bool same = other.size() == specs.size();
    for (const auto &[name, s] : specs)
      same = same && other.count(name) &&
             SpecShape(*other[name]) == SpecShape(*s);
    if (!same)
      return absl::InvalidArgumentError(absl::StrCat(
          model.artifact().path(), ": '", kTrainStepEntry, "' and '",
          kApplyGradientsEntry, "' have different in-out state"));
  }
  std::unique_ptr<Trainer> t(new Trainer(model));
  t->schedule_ = schedule;
  for (const proto::TensorSpec &s : ep.inputs()) {
    if (!s.inout())
      continue;
    if (s.dtype() != proto::F32)
      return absl::InvalidArgumentError(absl::StrCat(
          "entry point '", ep.name(), "': in-out '", s.name(), "' is ",
          DTypeName(s.dtype()), ", expected F32"));
    for (int64_t d : s.shape())
      if (d < 0)
        return absl::InvalidArgumentError(absl::StrCat(
            "entry point '", ep.name(), "': in-out '", s.name(),
            "' has a dynamic shape"));
    if (absl::StartsWith(s.name(), kParamPrefix))
      t->names_.push_back(s.name().substr(std::strlen(kParamPrefix)));
  }
  for (const std::string &name : t->names_) {
    const std::string p = kParamPrefix + name;
    for (const char *prefix : {kAdamMPrefix, kAdamVPrefix})
      if (!specs.count(prefix + name))
        return absl::InvalidArgumentError(absl::StrCat(
            "entry point '", ep.name(), "': '", p, "' has no '", prefix, name,
            "'"));
    BT_ASSIGN_OR_RETURN(Tensor w, model.artifact().GetWeight(name));
    BT_ASSIGN_OR_RETURN(Tensor copy, ConvertToF32(w, name));
    if (copy.shape() != SpecShape(*specs[p]))
      return absl::InvalidArgumentError(absl::StrCat(
          "weight '", name, "' has shape ", ShapeToString(copy.shape()),
          ", but entry point '", ep.name(), "' takes '", p, "' as ",
          ShapeToString(SpecShape(*specs[p]))));
    for (const char *prefix : {kAdamMPrefix, kAdamVPrefix}) {
      BT_ASSIGN_OR_RETURN(Tensor zero,
                          Tensor::Allocate(DType::F32, copy.shape()));
      t->state_.emplace(prefix + name, std::move(zero));
    }
    t->state_.emplace(p, std::move(copy));
  }
  if (t->state_.size() != specs.size())
    return absl::InvalidArgumentError(absl::StrCat(
        "entry point '", ep.name(), "': in-out arguments other than ",
        kParamPrefix, "*, ", kAdamMPrefix, "*, ", kAdamVPrefix, "*"));
  if (ResidentStateEnabled(model.device())) {
    for (const auto &[name, host] : t->state_) {
      BT_ASSIGN_OR_RETURN(DeviceTensor d, model.device().Upload(host));
      t->resident_.emplace(name, d);
    }
  }
  return t;
}

Trainer::~Trainer() {
  for (const auto &[name, d] : resident_)
    model_.device().Release(d);
}

absl::Status Trainer::SyncToHost() const {
  if (!host_stale_)
    return absl::OkStatus();
  for (auto &[name, host] : state_)
    BT_RETURN_IF_ERROR(model_.device().Download(resident_.at(name), host));
  host_stale_ = false;
  return absl::OkStatus();
}

absl::Status Trainer::SyncToDevice() {
  if (!device_stale_)
    return absl::OkStatus();
  for (auto &[name, host] : state_) {
    BT_ASSIGN_OR_RETURN(DeviceTensor d, model_.device().Upload(host));
    model_.device().Release(resident_.at(name));
    resident_[name] = d;
  }
  device_stale_ = false;
  return absl::OkStatus();
}

absl::StatusOr<TrainerStepResult> Trainer::Run(const std::string &entry,
                                        TensorMap inputs) {
  const int64_t next = step_ + 1;
  inputs.emplace(kStep, ScalarI64(next));
  inputs.emplace(kPeakLr, ScalarF32(static_cast<float>(schedule_.peak_lr)));
  inputs.emplace(kWarmupSteps, ScalarI64(schedule_.warmup_steps));
  inputs.emplace(kTotalSteps, ScalarI64(schedule_.total_steps));
  TensorMap out;
  if (resident_state()) {
    // The checks of Model::Run (the batch's dims and token ids; the in-out
    // state's shapes), then the call with the state in place on the device.
    const proto::EntryPoint *ep = model_.FindEntryPoint(entry);
    if (ep == nullptr)
      return absl::NotFoundError(absl::StrCat("no entry point '", entry, "'"));
    BT_RETURN_IF_ERROR(model_.CheckInputs(*ep, inputs, &state_));
    BT_RETURN_IF_ERROR(SyncToDevice());
    std::map<std::string, const DeviceTensor *> resident;
    for (const auto &[name, d] : resident_)
      resident.emplace(name, &d);
    BT_ASSIGN_OR_RETURN(auto dev_out, model_.RunResident(entry, inputs, resident));
    host_stale_ = true;
    absl::Status status;
    for (auto &[name, d] : dev_out) {
      if (status.ok()) {
        absl::StatusOr<Tensor> t = Tensor::Allocate(d.dtype, d.shape);
        status = t.status();
        if (status.ok())
          status = model_.device().Download(d, *t);
        if (status.ok())
          out.emplace(name, std::move(*t));
      }
      model_.device().Release(d);
    }
    BT_RETURN_IF_ERROR(status);
  } else {
    BT_ASSIGN_OR_RETURN(out, model_.Run(entry, inputs, &state_));
  }
  step_ = next;
  TrainerStepResult r;
  r.step = next;
  auto scalar = [&](const char *name) {
    auto it = out.find(name);
    return it == out.end() || it->second.dtype() != DType::F32
               ? std::nanf("")
               : *it->second.data_as<float>();
  };
  r.loss = scalar("loss");
  r.grad_norm = scalar("grad_norm");
  r.lr = scalar("lr");
  return r;
}

absl::StatusOr<TrainerStepResult> Trainer::Step(const TensorMap &batch) {
  if (model_.FindEntryPoint(kTrainStepEntry) == nullptr)
    return absl::NotFoundError(absl::StrCat(
        model_.artifact().path(), ": no '", kTrainStepEntry,
        "' entry point (it has: ", absl::StrJoin(model_.EntryPointNames(), ", "),
        ")"));
  TensorMap inputs;
  for (const auto &[name, t] : batch)
    inputs.emplace(name, t.Share());
  return Run(kTrainStepEntry, std::move(inputs));
}

absl::StatusOr<TrainerStepResult> Trainer::ApplyGradients(const TensorMap &grads) {
  if (model_.FindEntryPoint(kApplyGradientsEntry) == nullptr)
    return absl::NotFoundError(absl::StrCat(
        model_.artifact().path(), ": no '", kApplyGradientsEntry,
        "' entry point (it has: ", absl::StrJoin(model_.EntryPointNames(), ", "),
        ")"));
  TensorMap inputs;
  for (const std::string &name : names_) {
    const std::string g = kGradPrefix + name;
    auto it = grads.find(g);
    if (it == grads.end())
      return absl::NotFoundError(absl::StrCat("no gradient '", g, "'"));
    inputs.emplace(g, it->second.Share());
  }
  return Run(kApplyGradientsEntry, std::move(inputs));
}

const Tensor *Trainer::parameter(const std::string &name) const {
  if (!SyncToHost().ok())
    return nullptr;
  auto it = state_.find(kParamPrefix + name);
  return it == state_.end() ? nullptr : &it->second;
}
const Tensor *Trainer::exp_avg(const std::string &name) const {
  if (!SyncToHost().ok())
    return nullptr;
  auto it = state_.find(kAdamMPrefix + name);
  return it == state_.end() ? nullptr : &it->second;
}
const Tensor *Trainer::exp_avg_sq(const std::string &name) const {
  if (!SyncToHost().ok())
    return nullptr;
  auto it = state_.find(kAdamVPrefix + name);
  return it == state_.end() ? nullptr : &it->second;
}

absl::StatusOr<TensorMap> Trainer::Parameters() const {
  BT_RETURN_IF_ERROR(SyncToHost());
  TensorMap out;
  for (const std::string &name : names_)
    out.emplace(name, state_.at(kParamPrefix + name).Share());
  return out;
}

absl::Status Trainer::SetParameters(const TensorMap &params, bool require_all,
                                    std::vector<std::string> *ignored) {
  // Validate everything first, then copy: all or nothing.
  std::vector<std::pair<Tensor *, Tensor>> writes;
  for (const auto &[name, t] : params) {
    auto it = state_.find(kParamPrefix + name);
    if (it == state_.end()) {
      if (ignored)
        ignored->push_back(name);
      continue;
    }
    if (t.shape() != it->second.shape())
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter '", name, "' has shape ", ShapeToString(t.shape()),
          ", expected ", ShapeToString(it->second.shape())));
    BT_ASSIGN_OR_RETURN(Tensor f, ConvertToF32(t, name));
    writes.emplace_back(&it->second, std::move(f));
  }
  if (require_all)
    for (const std::string &name : names_)
      if (!params.count(name))
        return absl::NotFoundError(
            absl::StrCat("missing parameter '", name, "'"));
  // The moments stay as they are: bring the host copies up to date first.
  BT_RETURN_IF_ERROR(SyncToHost());
  for (auto &[dst, src] : writes)
    std::memcpy(dst->data(), src.data(), src.nbytes());
  device_stale_ = resident_state();
  return absl::OkStatus();
}

absl::Status CheckCheckpointOutputDir(const std::string &dir) {
  namespace fs = std::filesystem;
  fs::path target = fs::absolute(fs::path(dir)).lexically_normal();
  if (target.filename().empty())
    target = target.parent_path();
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(target, ec);
  if (!fs::exists(st))
    return absl::OkStatus();
  if (!fs::is_directory(st))
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": exists and is not a directory"));
  // Swapped out and deleted by SaveCheckpoint (issue 14, data loss:
  // `train-step -o .` or `-o ~` replaced the whole directory): only an empty
  // directory or a checkpoint, never the working directory or an ancestor.
  const fs::path real = fs::canonical(target, ec);
  const fs::path cwd = fs::current_path(ec);
  if (!real.empty() && !cwd.empty() &&
      std::mismatch(real.begin(), real.end(), cwd.begin(), cwd.end()).first ==
          real.end())
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to replace ", dir, ": it is the working directory or "
        "contains it (write the checkpoint to a new directory)"));
  std::vector<std::string> names;
  bool checkpoint = false;
  for (const fs::directory_entry &e : fs::directory_iterator(target, ec)) {
    const std::string name = e.path().filename().string();
    names.push_back(name);
    checkpoint |= absl::EndsWith(name, ".safetensors") && e.is_regular_file(ec);
  }
  if (ec)
    return ErrnoToStatus(ec.value(), absl::StrCat("cannot list ", dir));
  if (names.empty() || checkpoint)
    return absl::OkStatus();
  std::sort(names.begin(), names.end());
  if (names.size() > 5) {
    names.resize(5);
    names.push_back("...");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to replace ", dir, ": it is not empty (",
      absl::StrJoin(names, ", "),
      ") and is not a checkpoint directory (no *.safetensors file); "
      "write the checkpoint to a new or empty directory"));
}

absl::Status Trainer::SaveCheckpoint(const std::string &dir,
                                     const CheckpointWriteOptions &options) const {
  namespace fs = std::filesystem;
  BT_RETURN_IF_ERROR(SyncToHost());
  std::vector<NamedTensorRef> tensors;
  for (const std::string &name : names_)
    tensors.emplace_back(name, parameter(name));
  if (options.extra)
    for (const auto &[name, t] : *options.extra) {
      if (parameter(name) != nullptr)
        return absl::InvalidArgumentError(absl::StrCat(
            "extra tensor '", name, "' is a trained parameter"));
      tensors.emplace_back(name, &t);
    }
  std::string config;
  if (!options.config_path.empty()) {
    BT_ASSIGN_OR_RETURN(config, ReadFile(options.config_path));
  }

  fs::path target = fs::absolute(fs::path(dir)).lexically_normal();
  if (target.filename().empty())
    target = target.parent_path();
  BT_RETURN_IF_ERROR(CheckCheckpointOutputDir(dir));
  std::error_code ec;
  const bool exists = fs::exists(fs::symlink_status(target, ec));
  const fs::path parent = target.parent_path();
  fs::create_directories(parent, ec);
  std::string tmpl =
      (parent / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    return ErrnoToStatus(errno, absl::StrCat("mkdtemp ", tmpl));
  const std::string tmp = tmpl;
  auto cleanup = [&](absl::Status s) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    return s;
  };
  ::chmod(tmp.c_str(), 0755);
  absl::Status s = WriteSafetensors(
      tmp + "/model.safetensors", tensors,
      {{"format", "pt"},
       {"producer", "bt Trainer"},
       {"step", absl::StrCat(step_)}});
  if (!s.ok())
    return cleanup(s);
  if (!options.config_path.empty()) {
    s = WriteFileAtomically(tmp + "/" + ConfigFileName(options.config_path),
                            config);
    if (!s.ok())
      return cleanup(s);
  }
  s = FsyncPath(tmp);
  if (!s.ok())
    return cleanup(s);
  if (exists) {
    // Swap the new directory in; the old one is then at `tmp`.
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(),
                    RENAME_EXCHANGE) != 0) {
      int err = errno;
      if (err != EINVAL && err != ENOSYS)
        return cleanup(ErrnoToStatus(err, absl::StrCat("rename ", tmp, " <-> ",
                                                       target.string())));
      // No RENAME_EXCHANGE here: move the old one aside first.
      std::string old = tmp + ".old";
      if (::rename(target.c_str(), old.c_str()) != 0)
        return cleanup(ErrnoToStatus(errno, absl::StrCat("rename ", target.string())));
      if (::rename(tmp.c_str(), target.c_str()) != 0) {
        err = errno;
        ::rename(old.c_str(), target.c_str());
        return cleanup(ErrnoToStatus(err, absl::StrCat("rename ", tmp)));
      }
      fs::remove_all(old, ec);
    } else {
      fs::remove_all(tmp, ec);
    }
  } else if (::rename(tmp.c_str(), target.c_str()) != 0) {
    return cleanup(ErrnoToStatus(
        errno, absl::StrCat("rename ", tmp, " -> ", target.string())));
  }
  return FsyncPath(parent.string());
}

absl::Status Trainer::SaveState(const std::string &path) const {
  BT_RETURN_IF_ERROR(SyncToHost());
  std::vector<NamedTensorRef> tensors;
  for (const auto &[name, t] : state_)
    tensors.emplace_back(name, &t);
  Tensor step = ScalarI64(step_);
  Tensor peak = *Tensor::Allocate(DType::F64, {});
  *peak.data_as<double>() = schedule_.peak_lr;
  Tensor warmup = ScalarI64(schedule_.warmup_steps);
  Tensor total = ScalarI64(schedule_.total_steps);
  tensors.emplace_back(kStep, &step);
  tensors.emplace_back(kPeakLr, &peak);
  tensors.emplace_back(kWarmupSteps, &warmup);
  tensors.emplace_back(kTotalSteps, &total);
  return WriteSafetensors(path, tensors, {{"producer", "bt Trainer"}});
}

absl::Status Trainer::LoadState(const std::string &path) {
  BT_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(path));
  auto get = [&](const std::string &name, DType dtype,
                 const std::vector<int64_t> &shape) -> absl::StatusOr<Tensor> {
    if (!f.contains(name))
      return absl::NotFoundError(absl::StrCat(path, ": no tensor '", name, "'"));
    BT_ASSIGN_OR_RETURN(Tensor t, f.Get(name));
    if (t.dtype() != dtype || t.shape() != shape)
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor '", name, "' is ", t.DebugString(), ", expected ",
          DTypeName(dtype), ShapeToString(shape)));
    return t;
  };
  std::map<std::string, Tensor> loaded;
  for (const auto &[name, t] : state_) {
    BT_ASSIGN_OR_RETURN(Tensor x, get(name, DType::F32, t.shape()));
    loaded.emplace(name, std::move(x));
  }
  BT_ASSIGN_OR_RETURN(Tensor step, get(kStep, DType::I64, {}));
  BT_ASSIGN_OR_RETURN(Tensor peak, get(kPeakLr, DType::F64, {}));
  BT_ASSIGN_OR_RETURN(Tensor warmup, get(kWarmupSteps, DType::I64, {}));
  BT_ASSIGN_OR_RETURN(Tensor total, get(kTotalSteps, DType::I64, {}));
  if (*step.data_as<int64_t>() < 0)
    return absl::InvalidArgumentError(absl::StrCat(path, ": step is negative"));
  for (auto &[name, t] : state_)
    std::memcpy(t.data(), loaded.at(name).data(), t.nbytes());
  host_stale_ = false;
  device_stale_ = resident_state();
  step_ = *step.data_as<int64_t>();
  schedule_.peak_lr = *peak.data_as<double>();
  schedule_.warmup_steps = *warmup.data_as<int64_t>();
  schedule_.total_steps = *total.data_as<int64_t>();
  return absl::OkStatus();
}

absl::StatusOr<TrainStepCommandOptions>
ParseTrainStepArgs(const std::vector<std::string> &args) {
  TrainStepCommandOptions o;
  auto bad = [](const std::string &msg) {
    return absl::InvalidArgumentError(absl::StrCat("train-step: ", msg));
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    static const std::set<std::string> kValued = {
        "--inputs", "--grads", "-o", "--output", "--checkpoint", "--config-file",
        "--lr", "--warmup-steps", "--total-steps", "--state-out",
        "--step-outputs"};
    if (!kValued.count(a))
      return bad(absl::StrCat("unexpected argument '", a, "'"));
    if (i + 1 >= args.size())
      return bad(absl::StrCat(a, " needs a value"));
    const std::string &v = args[++i];
    if (a == "--inputs") {
      o.inputs_path = v;
    } else if (a == "--grads") {
      o.grads_path = v;
    } else if (a == "-o" || a == "--output") {
      o.output_dir = v;
    } else if (a == "--checkpoint") {
      o.checkpoint_dir = v;
    } else if (a == "--config-file") {
      o.config_path = v;
    } else if (a == "--state-out") {
      o.state_path = v;
    } else if (a == "--step-outputs") {
      o.outputs_path = v;
    } else if (a == "--lr") {
      if (!absl::SimpleAtod(v, &o.schedule.peak_lr) ||
          !(o.schedule.peak_lr >= 0) || !std::isfinite(o.schedule.peak_lr))
        return bad(absl::StrCat("--lr ", v, ": expected a non-negative number"));
    } else {
      int64_t n = 0;
      if (!absl::SimpleAtoi(v, &n) || n < 0)
        return bad(absl::StrCat(a, " ", v, ": expected a non-negative integer"));
      (a == "--warmup-steps" ? o.schedule.warmup_steps
                             : o.schedule.total_steps) = n;
    }
  }
  if (o.inputs_path.empty() == o.grads_path.empty())
    return bad("give --inputs <batch.safetensors> or --grads <grads.safetensors>");
  if (o.output_dir.empty())
    return bad("missing -o <checkpoint directory>");
  return o;
}

absl::Status RunTrainStepCommand(const Model &model,
                                 const TrainStepCommandOptions &options,
                                 std::ostream &log) {
  BT_RETURN_IF_ERROR(CheckCheckpointOutputDir(options.output_dir));
  BT_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                      Trainer::Create(model, options.schedule));
  std::map<std::string, Tensor> unused;
  std::string config = options.config_path;
  if (!options.checkpoint_dir.empty()) {
    BT_ASSIGN_OR_RETURN(Checkpoint ck, LoadCheckpoint(options.checkpoint_dir));
    BT_RETURN_IF_ERROR(trainer->SetParameters(ck.weights));
    unused = std::move(ck.unused);
    if (config.empty()) {
      for (const char *name : {"config.yaml", "config.json"}) {
        std::string p = (std::filesystem::path(options.checkpoint_dir) / name).string();
        if (std::filesystem::is_regular_file(p)) {
          config = p;
          break;
        }
      }
    }
  }
  TrainerStepResult r;
  if (!options.grads_path.empty()) {
    BT_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(options.grads_path));
    TensorMap grads;
    for (const std::string &name : trainer->param_names()) {
      const std::string g = kGradPrefix + name;
      if (!f.contains(g))
        return absl::NotFoundError(
            absl::StrCat(options.grads_path, ": no tensor '", g, "'"));
      BT_ASSIGN_OR_RETURN(Tensor t, f.Get(g));
      grads.emplace(g, std::move(t));
    }
    BT_ASSIGN_OR_RETURN(r, trainer->ApplyGradients(grads));
  } else {
    const proto::EntryPoint *ep = model.FindEntryPoint(kTrainStepEntry);
    if (ep == nullptr)
      return absl::NotFoundError(absl::StrCat(
          model.artifact().path(), ": no '", kTrainStepEntry,
          "' entry point (it has: ", absl::StrJoin(model.EntryPointNames(), ", "),
          ")"));
    BT_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(options.inputs_path));
    TensorMap batch;
    for (const proto::TensorSpec &s : ep->inputs()) {
      if (s.inout() || IsScheduleInput(s.name()))
        continue;
      if (!f.contains(s.name()))
        return absl::NotFoundError(absl::StrCat(
            options.inputs_path, ": no tensor '", s.name(), "' (",
            kTrainStepEntry, " takes it)"));
      BT_ASSIGN_OR_RETURN(Tensor t, f.Get(s.name()));
      batch.emplace(s.name(), std::move(t));
    }
    BT_ASSIGN_OR_RETURN(r, trainer->Step(batch));
  }
  log << absl::StrFormat("step %d: ", r.step);
  if (!std::isnan(r.loss))
    log << absl::StrFormat("loss = %.8g, ", r.loss);
  log << absl::StrFormat("grad_norm = %.8g, lr = %.8g\n", r.grad_norm, r.lr);
  CheckpointWriteOptions write;
  write.config_path = config;
  write.extra = &unused;
  BT_RETURN_IF_ERROR(trainer->SaveCheckpoint(options.output_dir, write));
  if (!options.state_path.empty())
    BT_RETURN_IF_ERROR(trainer->SaveState(options.state_path));
  if (!options.outputs_path.empty()) {
    std::map<std::string, Tensor> outs;
    if (!std::isnan(r.loss))
      outs.emplace("loss", ScalarF32(r.loss));
    outs.emplace("grad_norm", ScalarF32(r.grad_norm));
    outs.emplace("lr", ScalarF32(r.lr));
    outs.emplace("step", ScalarI64(r.step));
    BT_RETURN_IF_ERROR(WriteSafetensors(options.outputs_path, outs,
                                        {{"producer", "bt train-step"}}));
  }
  return absl::OkStatus();
}

} // namespace bt::rt
