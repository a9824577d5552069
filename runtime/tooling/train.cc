//===- train.cc - the training loop ---------------------------------------===//
//
// RunTraining (train.h): the loop, its log, checkpoints and the PyTorch
// baseline in turns; PrepareTrainingModel.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/tooling/train.h"
#include "bt/runtime/tooling/progress.h"
#include "bt/runtime/tooling/train_internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bt/runtime/tooling/bench.h"
#include "bt/runtime/tooling/child_process.h"
#include "bt/runtime/model/config.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/safetensors.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/model/tokenizer.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace bt::rt {

// TrainUsage, ParseTrainArgs, HeldOutLoss, OfficialTrainerYaml:
// train_args.cc; the run directory's files: train_files.cc.

namespace {

using namespace train_internal;

//===----------------------------------------------------------------------===//
// The loss log (CSV) and plot.
//===----------------------------------------------------------------------===//

constexpr char kCsvHeader[] =
    "step,epoch,samples,tokens,loss,grad_norm,lr,seconds,tokens_per_s,elapsed_s,"
    "eval_loss,eval_ppl";

struct LogRow {
  int64_t step = 0;
  std::string text; // without the eval columns
  std::string eval; // ",eval_loss,eval_ppl" or ",,"
};

class LossLog {
public:
  LossLog(std::string dir) : dir_(std::move(dir)) {}

  /// Keeps the rows of `path` with step <= max_step (a resumed run).
  void LoadPrefix(const std::string &path, int64_t max_step) {
    absl::StatusOr<std::string> text = ReadFile(path);
    if (!text.ok())
      return; // no log to continue (a fresh log is written)
    bool header = true;
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      if (header) {
        header = false;
        continue;
      }
      std::vector<std::string> cols = absl::StrSplit(line, ',');
      int64_t step = 0;
      if (cols.size() != 12 || !absl::SimpleAtoi(cols[0], &step) || step > max_step)
        continue;
      LogRow r;
      r.step = step;
      r.text = absl::StrJoin(cols.begin(), cols.begin() + 10, ",");
      r.eval = absl::StrCat(",", cols[10], ",", cols[11]);
      rows_.push_back(std::move(r));
    }
  }

  void Add(int64_t step, std::string text) {
    rows_.push_back({step, std::move(text), ",,"});
  }
  /// Sets the eval columns of step's row (adding a row for step 0).
  void SetEval(int64_t step, double loss) {
    const std::string e = absl::StrFormat(",%.9g,%.9g", loss, std::exp(loss));
    for (auto it = rows_.rbegin(); it != rows_.rend(); ++it)
      if (it->step == step) {
        it->eval = e;
        return;
      }
    rows_.push_back({step, absl::StrCat(step, ",0,0,0,,,,,,0"), e});
  }

  absl::Status Write() const {
    std::string s = absl::StrCat(kCsvHeader, "\n");
    for (const LogRow &r : rows_)
      absl::StrAppend(&s, r.text, r.eval, "\n");
    return WriteFileAtomically(dir_ + "/log.csv", s);
  }

  /// loss.png from log.csv through gnuplot, written atomically. Returns a
  /// note when gnuplot is missing or fails (not an error).
  std::string Plot(const std::string &title) const {
    return RenderGnuplot(
        dir_, "loss.png",
        absl::StrCat(
            "set datafile separator ','\n",
            "set title '", title, "' noenhanced\n",
            "set xlabel 'step'\nset ylabel 'loss (nats/token)'\nset grid\nset key top right\n",
            "plot '", dir_, "/log.csv' every ::1 using 1:($5 > 0 ? $5 : NaN) with lines lc rgb '#7f7fcf' title 'train (batch)', \\\n",
            "     '' every ::1 using 1:($11 > 0 ? $11 : NaN) with linespoints lw 2 pt 7 lc rgb '#cf3f3f' title 'held-out'\n"));
  }

private:
  std::string dir_;
  std::vector<LogRow> rows_;
};

//===----------------------------------------------------------------------===//
// Progress text.
//===----------------------------------------------------------------------===//

/// The progress text of training step `step` of `total`: loss, tokens/s,
/// elapsed and remaining seconds.
std::string StepProgressText(int64_t step, int64_t total, double loss,
                             double tok_s, double elapsed_s, double eta_s) {
  return absl::StrFormat(
      "step %*d/%d  loss %.4f  %s tok/s  elapsed %s  ETA %s",
      static_cast<int>(absl::StrCat(total).size()), step, total, loss,
      FormatRate(tok_s), FormatDuration(elapsed_s), FormatDuration(eta_s));
}

//===----------------------------------------------------------------------===//
// Checkpoints.
//===----------------------------------------------------------------------===//

/// Test hook (kPauseInCheckpointEnv): pause in the write of `step`.
void MaybePauseInCheckpoint(int64_t step) {
  const char *v = getenv(kPauseInCheckpointEnv);
  if (v == nullptr || *v == '\0')
    return;
  std::vector<std::string> parts = absl::StrSplit(v, absl::MaxSplits(':', 1));
  int64_t at = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &at) || at != step)
    return;
  (void)WriteFileAtomically(parts[1], absl::StrCat("paused in the checkpoint write of step ", step, "\n"));
  for (;;)
    std::this_thread::sleep_for(std::chrono::seconds(1));
}

struct CheckpointContents {
  int64_t step = 0;
  const Trainer *trainer = nullptr;
  /// Official config file copied into the checkpoint (OUT/config.yaml).
  std::string config_path;
  /// Artifact weights that are not trained (e.g. the block decoder's unused
  /// embed_in), written unchanged so the checkpoint has every official name.
  const std::map<std::string, Tensor> *extra = nullptr;
  nlohmann::json trainer_state;
  std::string tokenizer; // the artifact's tokenizer bytes, or empty
  std::string tokenizer_file = "tokenizer.model"; // TokenizerFileName of its kind
};

/// Writes OUT/step-NNNNNN atomically and points OUT/latest at it; removes
/// the previous checkpoint unless `keep`. Returns the checkpoint path.
///
/// The checkpoint is assembled in OUT/.tmp-step-NNNNNN: Trainer::SaveCheckpoint
/// (config.yaml, model.safetensors; itself atomic), then
/// Trainer::SaveState (optimizer.safetensors), trainer_state.json and the
/// tokenizer (each written atomically), the directory fsync'ed and
/// renamed; then the `latest` symlink is replaced by rename.
absl::StatusOr<std::string> WriteCheckpoint(const std::string &out,
                                            const CheckpointContents &c, bool keep) {
  const std::string name = CheckpointName(c.step);
  const std::string tmp = absl::StrCat(out, "/.tmp-", name);
  BT_RETURN_IF_ERROR(RemoveTree(tmp));
  auto cleanup = [&](absl::Status s) {
    (void)RemoveTree(tmp);
    return s;
  };
  {
    CheckpointWriteOptions w;
    w.config_path = c.config_path;
    w.extra = c.extra;
    absl::Status s = c.trainer->SaveCheckpoint(tmp, w);
    if (!s.ok())
      return cleanup(s);
  }
  MaybePauseInCheckpoint(c.step);
  {
    absl::Status s = c.trainer->SaveState(tmp + "/optimizer.safetensors");
    if (!s.ok())
      return cleanup(s);
  }
  for (const auto &[file, bytes] :
       std::vector<std::pair<std::string, std::string>>{
           {"trainer_state.json", c.trainer_state.dump(2) + "\n"},
           {c.tokenizer_file, c.tokenizer}}) {
    if (file == c.tokenizer_file && bytes.empty())
      continue;
    absl::Status s = WriteFileAtomically(tmp + "/" + file, bytes);
    if (!s.ok())
      return cleanup(s);
  }
  FsyncDir(tmp);
  const std::string final_dir = out + "/" + name;
  const std::string previous = ReadLink(out + "/latest");
  if (Exists(final_dir) && previous != name)
    (void)RemoveTree(final_dir); // a stale one from an interrupted run
  if (Exists(final_dir)) {
    // The same step again (resumed right at a checkpoint): keep the old.
    (void)RemoveTree(tmp);
    return final_dir;
  }
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0)
    return cleanup(ErrnoToStatus(errno, absl::StrCat("cannot rename ", tmp, " to ", final_dir)));
  FsyncDir(out);
  const std::string link_tmp = out + "/.latest.tmp";
  ::unlink(link_tmp.c_str());
  if (::symlink(name.c_str(), link_tmp.c_str()) != 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot create ", link_tmp));
  if (::rename(link_tmp.c_str(), (out + "/latest").c_str()) != 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot replace ", out, "/latest"));
  FsyncDir(out);
  if (!keep && !previous.empty() && previous != name)
    (void)RemoveTree(out + "/" + previous);
  return final_dir;
}

/// Removes leftovers of interrupted checkpoint writes.
void RemoveStaleTemporaries(const std::string &out) {
  for (const std::string &n : ListDir(out))
    // .tmp-step-*: ours; ..tmp-step-*: Trainer::SaveCheckpoint's own
    // temporary directory next to it.
    if (absl::StartsWith(n, ".tmp-step-") || absl::StartsWith(n, "..tmp-step-") ||
        n == ".latest.tmp" ||
        n == ".loss.png.tmp" || n == ".loss.png.gp")
      (void)RemoveTree(out + "/" + n);
}

/// Same file or directory (st_dev, st_ino), after symbolic links.
bool SameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

} // namespace

absl::Status CheckTrainOutputDir(const TrainOptions &o, bool after_prepare) {
  if (o.output_dir.empty())
    return absl::InvalidArgumentError("train: missing -o DIR");
  struct stat st;
  if (::stat(o.output_dir.c_str(), &st) != 0)
    return absl::OkStatus(); // created by the run
  if (!S_ISDIR(st.st_mode))
    return absl::FailedPreconditionError(
        absl::StrCat("train: -o ", o.output_dir, " exists and is not a directory"));
  if (o.overwrite)
    return absl::OkStatus();
  if (!o.resume_dir.empty()) {
    // Continuing a run in its own directory.
    absl::StatusOr<std::string> ckpt = ResolveCheckpoint(o.resume_dir);
    if (ckpt.ok() && SameFile(RunDirOf(*ckpt), o.output_dir))
      return absl::OkStatus();
  }
  std::vector<std::string> others;
  for (const std::string &n : ListDir(o.output_dir)) {
    // What `bt-run train` writes into OUT before the loop runs.
    // (the tokenizer under the file name of either kind).
    if (after_prepare &&
        (n == "model-config.yaml" || n == "model.btart" ||
         n == TokenizerFileName(proto::TokenizerKind::TOKENIZER_SENTENCEPIECE) ||
         n == TokenizerFileName(proto::TokenizerKind::TOKENIZER_HF_JSON)))
      continue;
    others.push_back(n);
  }
  if (others.empty())
    return absl::OkStatus();
  std::sort(others.begin(), others.end());
  if (others.size() > 4)
    others.resize(4), others.back() = "...";
  return absl::FailedPreconditionError(absl::StrCat(
      "train: -o ", o.output_dir, " is not empty (", absl::StrJoin(others, ", "),
      ") and is not the directory of the run being resumed; it would be overwritten. Pass "
      "--resume ", o.output_dir, " to continue that run, --overwrite to write over it, or "
      "choose a new directory"));
}

namespace {

//===----------------------------------------------------------------------===//
// Batches for the PyTorch baseline.
//===----------------------------------------------------------------------===//

class BatchDump {
public:
  void Add(const TensorMap &batch) {
    for (const auto &[name, t] : batch) {
      const char *p = static_cast<const char *>(t.data());
      bytes_[name].append(p, t.nbytes());
      shape_[name] = t.shape();
    }
    ++count_;
  }
  int64_t count() const { return count_; }
  absl::Status Write(const std::string &path) const {
    std::map<std::string, Tensor> tensors;
    for (const auto &[name, bytes] : bytes_) {
      std::vector<int64_t> shape = {count_};
      shape.insert(shape.end(), shape_.at(name).begin(), shape_.at(name).end());
      BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(proto::I64, shape));
      std::memcpy(t.data(), bytes.data(), bytes.size());
      tensors.emplace(name, std::move(t));
    }
    return WriteSafetensors(path, tensors, {{"producer", "bt train --dump-batches"}});
  }

private:
  std::map<std::string, std::string> bytes_;
  std::map<std::string, std::vector<int64_t>> shape_;
  int64_t count_ = 0;
};

/// The PyTorch baseline of `train --baseline torch`: bench/bt_torch.py
/// --train-serve on the dumped batches and initial weights; after each of
/// bt's first dump_steps steps, the same step in PyTorch at bt's learning
/// rate. The two take turns step by step (with a pause before each, so that
/// the other side's BLAS threads are asleep), so load on a shared machine
/// hits both alike.
class TorchTrainBaseline {
public:
  /// Pause before each step of either side while the baseline runs (s).
  static constexpr double kSwitchPause = 0.2;

  /// Starts the script. Returns nullptr with `note` set when torch is
  /// unavailable (the run goes on without a baseline).
  static absl::StatusOr<std::unique_ptr<TorchTrainBaseline>>
  Start(const TrainOptions &o, const std::string &out_dir, std::string *note) {
    const CompiledOptimizerSettings opt;
    const std::string python = BaselinePython(o.python),
                      script = BaselineScript(o.torch_script);
    const std::string t = absl::StrCat(o.threads > 0 ? o.threads : 2);
    std::string hello;
    absl::StatusOr<std::unique_ptr<JsonLineChild>> child = JsonLineChild::Start(
        {python, script, "--train-serve", "--model-dir", out_dir + "/initial", "--batches",
         o.dump_batches, "--threads", t, "--beta1", Num(opt.beta1), "--beta2", Num(opt.beta2),
         "--eps", Num(opt.eps), "--weight-decay", Num(opt.weight_decay), "--clip",
         Num(opt.max_grad_norm)},
        {{"OMP_NUM_THREADS", t},
         {"OPENBLAS_NUM_THREADS", t},
         {"MKL_NUM_THREADS", t},
         {"OMP_WAIT_POLICY", "PASSIVE"},
         {"MALLOC_MMAP_MAX_", "0"},
         {"MALLOC_TRIM_THRESHOLD_", "18446744073709551615"},
         {"PYTHONUNBUFFERED", "1"}},
        &hello);
    if (!child.ok()) {
      *note = absl::StrCat("no PyTorch baseline: ", child.status().message());
      return nullptr;
    }
    nlohmann::json j = nlohmann::json::parse(hello, nullptr, false);
    if (j.is_object() && j.contains("unavailable")) {
      *note = absl::StrCat("no PyTorch baseline: ", j["unavailable"].dump());
      return nullptr;
    }
    if (!j.is_object() || !j.contains("ready"))
      return absl::InternalError(
          absl::StrCat(script, " --train-serve: unexpected first line '", hello, "'"));
    std::unique_ptr<TorchTrainBaseline> b(new TorchTrainBaseline());
    b->child_ = std::move(*child);
    b->description_ = j.value("description", std::string("torch"));
    return b;
  }

  const std::string &description() const { return description_; }

  static void Pause() {
    std::this_thread::sleep_for(std::chrono::duration<double>(kSwitchPause));
  }

  /// Records bt's step and runs torch's.
  absl::Status Step(int64_t step, double bt_loss, double bt_seconds, double lr) {
    nlohmann::json req = {{"cmd", "step"}, {"step", step}, {"lr", lr}};
    Pause();
    absl::StatusOr<std::string> reply = child_->Request(req.dump());
    if (!reply.ok())
      return absl::InternalError(
          absl::StrCat("PyTorch baseline, step ", step, ": ", reply.status().message()));
    nlohmann::json j = nlohmann::json::parse(*reply, nullptr, false);
    if (!j.is_object() || !j.contains("loss") || !j.contains("seconds"))
      return absl::InternalError(absl::StrCat("PyTorch baseline: unexpected reply '", *reply, "'"));
    rows_.push_back({step, bt_loss, j["loss"].get<double>(), bt_seconds,
                     j["seconds"].get<double>(), lr, j.value("grad_norm", 0.0)});
    return absl::OkStatus();
  }

  /// Ends the child (after its last step).
  void Stop() { child_.reset(); }

  /// Ends the child; writes torch_log.csv, compare.csv and compare.png into
  /// `dir` and prints the comparison.
  absl::Status Finish(const std::string &dir, int64_t batch, int64_t seq_len, int threads,
                      std::ostream &out) {
    const int64_t tokens_per_step = batch * seq_len;
    child_.reset();
    std::string torch_csv = "step,loss,grad_norm,lr,seconds,tokens_per_s\n";
    std::string csv = "step,bt_loss,torch_loss,abs_diff,bt_seconds,torch_seconds\n";
    double max_diff = 0;
    std::vector<double> bt_sec, torch_sec;
    for (const Row &r : rows_) {
      const double d = std::fabs(r.bt_loss - r.torch_loss);
      max_diff = std::max(max_diff, d);
      bt_sec.push_back(r.bt_seconds);
      torch_sec.push_back(r.torch_seconds);
      absl::StrAppend(&torch_csv, absl::StrFormat("%d,%.9g,%.9g,%.9g,%.6f,%.1f\n", r.step,
                                                  r.torch_loss, r.torch_grad_norm, r.lr,
                                                  r.torch_seconds,
                                                  tokens_per_step / r.torch_seconds));
      absl::StrAppend(&csv, absl::StrFormat("%d,%.9g,%.9g,%.3g,%.6f,%.6f\n", r.step, r.bt_loss,
                                            r.torch_loss, d, r.bt_seconds, r.torch_seconds));
    }
    BT_RETURN_IF_ERROR(WriteFileAtomically(dir + "/torch_log.csv", torch_csv));
    BT_RETURN_IF_ERROR(WriteFileAtomically(dir + "/compare.csv", csv));
    if (rows_.empty())
      return absl::InternalError("the PyTorch baseline ran no step");
    // The plot is optional: without gnuplot there is compare.csv only.
    (void)RenderGnuplot(
        dir, "compare.png",
        absl::StrCat(
            "set datafile separator ','\n",
            "set title 'bt vs PyTorch: same model, initial weights, batches, AdamW, LR' noenhanced\n",
            "set xlabel 'step'\nset ylabel 'train loss (nats/token)'\nset grid\n",
            "plot '", dir, "/compare.csv' every ::1 using 1:2 with lines lw 3 title 'bt', ",
            "'' every ::1 using 1:3 with lines dt 2 lw 2 title 'PyTorch'\n"));
    const double bt_rate = tokens_per_step / Median(bt_sec);
    const double torch_rate = tokens_per_step / Median(torch_sec);
    out << absl::StrFormat(
        "train loss bt vs PyTorch over %d steps: max |diff| %.3g, at step %d %.3g "
        "(%s/compare.csv, compare.png)\n"
        "train tokens/s (median step, bt and PyTorch in turns, %d x %d tokens, %d threads): "
        "bt %.0f, PyTorch %.0f, ratio bt/torch %.2f\n",
        rows_.size(), max_diff, rows_.back().step,
        std::fabs(rows_.back().bt_loss - rows_.back().torch_loss), dir, batch, seq_len,
        threads, bt_rate, torch_rate, bt_rate / torch_rate);
    return absl::OkStatus();
  }

private:
  struct Row {
    int64_t step;
    double bt_loss, torch_loss, bt_seconds, torch_seconds, lr, torch_grad_norm;
  };
  TorchTrainBaseline() = default;
  std::unique_ptr<JsonLineChild> child_;
  std::string description_;
  std::vector<Row> rows_;
};

} // namespace

//===----------------------------------------------------------------------===//
// The command.
//===----------------------------------------------------------------------===//

namespace {

/// Checks that `model` can be trained with `o` (a block model with the
/// train_step and eval_loss entries) and fills o.seq_len (default: the
/// config's max_length, else 256). Errors: Unimplemented, NotFound,
/// InvalidArgument for a --seq-len that is not a multiple of L_B or gives
/// fewer than 2 blocks.
absl::Status CheckTrainable(const Model &model, TrainOptions &o) {
  const proto::ModelConfig &config = model.config();
  if (config.kind() != proto::ModelConfig::BLOCK_TRANSFORMER)
    return absl::UnimplementedError("train: only Block Transformer models are supported");
  for (const char *entry : {train_abi::kTrainStepEntry, "eval_loss"})
    if (model.FindEntryPoint(entry) == nullptr)
      return absl::NotFoundError(absl::StrCat(
          model.artifact().path(), ": no '", entry,
          "' entry point (compile with `bt-run compile --train`, or let `bt-run train` compile)"));
  return ResolveSeqLen(config, o.seq_len, model.artifact().path());
}

/// --dump-batches: the inputs of the PyTorch baseline (bench/bt_torch.py
/// --train-serve) in `dir`/initial: the initial weights as a checkpoint
/// (with the untrained tensors `untrained`), the config as bt_config.json,
/// and the batches of steps 1..--dump-steps (the order is a pure function
/// of the seed) in o.dump_batches. Errors: those of the writes.
absl::Status DumpBaselineInputs(const Trainer &trainer, const PackedDataset &train,
                                const TrainOptions &o, const proto::ModelConfig &config,
                                const std::string &dir, const std::string &config_path,
                                const std::map<std::string, Tensor> &untrained) {
  BatchDump dump;
  const std::string init = dir + "/initial";
  BT_RETURN_IF_ERROR(MakeDirs(init));
  CheckpointWriteOptions w;
  w.config_path = config_path;
  w.extra = &untrained;
  BT_RETURN_IF_ERROR(trainer.SaveCheckpoint(init, w));
  std::string cj;
  google::protobuf::util::JsonPrintOptions jo;
  jo.always_print_primitive_fields = true;
  jo.preserve_proto_field_names = true; // bench/bt_torch.py model_from_bt_config
  (void)google::protobuf::util::MessageToJsonString(config, &cj, jo);
  BT_RETURN_IF_ERROR(WriteFileAtomically(init + "/bt_config.json", cj));
  // The batches of steps 1..dump_steps (the order is a pure function of
  // the seed), written before training so that the baseline can take
  // turns with it.
  SampleOrder dump_order(train.size(), o.seed);
  for (int64_t step = 1; step <= o.dump_steps; ++step) {
    std::vector<int64_t> idx(static_cast<size_t>(o.batch));
    for (int64_t b = 0; b < o.batch; ++b)
      idx[b] = dump_order.At((step - 1) * o.batch + b);
    BT_ASSIGN_OR_RETURN(TensorMap batch, MakeBatch(train, idx));
    dump.Add(batch);
  }
  BT_RETURN_IF_ERROR(dump.Write(o.dump_batches));
  return absl::OkStatus();
}

/// The trainer of `model` (Trainer::Create with o.schedule); with --resume
/// (`resume_ckpt`, its trainer state `resumed`) at the checkpoint's step,
/// moments and schedule (which replaces o.schedule: the original run's
/// continues). Errors: those of Trainer::Create and LoadState;
/// InvalidArgument when the optimizer state and the trainer state disagree.
absl::StatusOr<std::unique_ptr<Trainer>> CreateTrainer(const Model &model,
                                                       const std::string &resume_ckpt,
                                                       const nlohmann::json &resumed,
                                                       TrainOptions &o) {
  BT_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(model, o.schedule));
  if (resume_ckpt.empty())
    return trainer;
  BT_RETURN_IF_ERROR(trainer->LoadState(resume_ckpt + "/optimizer.safetensors"));
  if (trainer->step() != resumed["step"].get<int64_t>())
    return absl::InvalidArgumentError(absl::StrCat(
        resume_ckpt, ": optimizer.safetensors is at step ", trainer->step(),
        ", trainer_state.json at ", resumed["step"].get<int64_t>()));
  o.schedule = trainer->schedule();
  return trainer;
}

/// The artifact's weights that `trainer` does not train (the block
/// decoder's embed_in), by name. Errors: those of Artifact::GetWeight.
absl::StatusOr<std::map<std::string, Tensor>> UntrainedWeights(const Model &model,
                                                               const Trainer &trainer) {
  std::map<std::string, Tensor> untrained;
  for (const proto::Weight &w : model.artifact().manifest().weights()) {
    const std::vector<std::string> &trained = trainer.param_names();
    if (std::find(trained.begin(), trained.end(), w.name()) != trained.end())
      continue;
    BT_ASSIGN_OR_RETURN(Tensor t, model.artifact().GetWeight(w.name()));
    untrained.emplace(w.name(), std::move(t));
  }
  return untrained;
}

/// trainer_state.json of a checkpoint at `step` after `elapsed` seconds of
/// training, with the last held-out loss `eval_loss` (<= 0: none yet).
nlohmann::json TrainerStateJson(const TrainOptions &o, const TrainingData &data,
                                int64_t step, double elapsed, double eval_loss) {
  const int64_t train_size = static_cast<int64_t>(data.train.size());
  nlohmann::json j;
  j["step"] = step;
  j["samples_seen"] = step * o.batch;
  j["epoch"] = static_cast<double>(step * o.batch) / static_cast<double>(train_size);
  j["batch"] = o.batch;
  j["seq_len"] = o.seq_len;
  j["seed"] = o.seed;
  j["pad_seed"] = o.pad_seed;
  j["steps"] = o.steps;
  j["elapsed_s"] = elapsed;
  j["train_fingerprint"] = Hex(data.train_fingerprint);
  j["train_samples"] = train_size;
  j["heldout_samples"] = data.held_samples;
  j["data"] = {{"files", o.data_paths},
               {"split", DocumentSplitName(o.split)},
               {"holdout_fraction", o.holdout_fraction}};
  j["schedule"] = {{"peak_lr", o.schedule.peak_lr},
                   {"warmup_steps", o.schedule.warmup_steps},
                   {"total_steps", o.schedule.total_steps}};
  if (eval_loss > 0)
    j["last_eval"] = {{"loss", eval_loss}, {"perplexity", std::exp(eval_loss)}};
  for (const auto &[k, v] : o.notes)
    j["notes"][k] = v;
  return j;
}

/// Writes the run's tokenizer (TokenizerFileName) and config.yaml (the
/// official trainer's, OfficialTrainerYaml) into o.output_dir, atomically.
/// Returns the config's path. Errors: those of WriteFileAtomically.
absl::StatusOr<std::string> WriteRunFiles(const proto::ModelConfig &config,
                                          const TrainOptions &o,
                                          proto::TokenizerKind tokenizer_kind,
                                          const std::string &tokenizer_bytes) {
  const std::string &dir = o.output_dir;
  const std::string tokenizer_file = TokenizerFileName(tokenizer_kind);
  BT_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + tokenizer_file, tokenizer_bytes));
  const std::string config_path = dir + "/config.yaml";
  BT_RETURN_IF_ERROR(WriteFileAtomically(
      config_path,
      OfficialTrainerYaml(config, o,
                          absl::StrCat(TokenizerKindName(tokenizer_kind), ", ", tokenizer_file,
                                       " next to this file (EOS = pad = ",
                                       config.eos_token_id(), ")"))));
  return config_path;
}

/// Seconds per step, averaged over the last 50 steps (the progress line's
/// rate and remaining time).
class StepTimes {
public:
  /// Adds a step of `sec` seconds; returns the average.
  double Add(double sec) {
    recent_.push_back(sec);
    sum_ += sec;
    if (recent_.size() > 50) {
      sum_ -= recent_.front();
      recent_.pop_front();
    }
    return sum_ / static_cast<double>(recent_.size());
  }

private:
  std::deque<double> recent_;
  double sum_ = 0;
};

/// The line announcing a run: steps, batch, schedule, eval and save
/// intervals, output directory.
std::string TrainingPlanLine(const proto::ModelConfig &config, const TrainOptions &o,
                             int64_t start_step) {
  return absl::StrFormat(
      "training %s: steps %d..%d, batch %d x %d tokens, lr %g (warmup %d, cosine to "
      "0.1x at step %d), eval every %d, save every %d -> %s",
      config.name(), start_step + 1, o.steps, o.batch, o.seq_len, o.schedule.peak_lr,
      o.schedule.warmup_steps, o.schedule.total_steps, o.eval_every, o.save_every,
      o.output_dir);
}

/// The host<->device traffic and launches of `steps` training steps (the
/// Trainer::Step calls), per step: a line for a device that moves or
/// launches anything (cuda, cuda-emu), else empty. On the resident path
/// (Trainer::resident_state) a step moves its batch up and the loss,
/// grad_norm and lr down; otherwise the parameters and both moments go up
/// and down as well.
std::string FormatStepTraffic(const DeviceTraffic &t, int64_t steps, bool resident) {
  if (steps <= 0 || (t.bytes() == 0 && t.kernel_launches == 0))
    return "";
  const double n = static_cast<double>(steps);
  return absl::StrFormat(
      "device traffic per training step (%s state, %d steps): host->device %.0f bytes in "
      "%.1f copies, device->host %.0f bytes in %.1f copies; %.1f kernel launches, %.1f "
      "GEMMs\n",
      resident ? "resident" : "host", steps, t.to_device_bytes / n, t.to_device_copies / n,
      t.to_host_bytes / n, t.to_host_copies / n, t.kernel_launches / n, t.gemm_calls / n);
}

/// The closing lines of a run on `out`: the throughput over this run's
/// steps (from `start_step`, `elapsed_before` seconds already trained), the
/// last held-out loss, where the checkpoint and the log are.
void PrintTrainingSummary(std::ostream &out, const proto::ModelConfig &config,
                          const TrainOptions &o, int64_t start_step, double elapsed,
                          double elapsed_before, double last_eval, int64_t eval_targets,
                          const std::string &last_ckpt) {
  const std::string &dir = o.output_dir;
  const int64_t tokens_per_step = o.batch * o.seq_len;
  out << absl::StrFormat("trained %s to step %d in %s (%s train tokens/s)\n", config.name(),
                         o.steps, FormatDuration(elapsed),
                         FormatRate(static_cast<double>(tokens_per_step) *
                                    static_cast<double>(std::max<int64_t>(o.steps - start_step, 1)) /
                                    std::max(elapsed - elapsed_before, 1e-9)));
  if (last_eval > 0)
    out << absl::StrFormat("held-out loss %.4f nats/token, perplexity %.2f (%d tokens)\n",
                           last_eval, std::exp(last_eval), eval_targets);
  out << "checkpoint: " << last_ckpt << " (" << dir << "/latest), log: " << dir
      << "/log.csv, plot: " << dir << "/loss.png\n";
}

/// The held-out loss (HeldOutLoss) of the trainer's parameters at `step`
/// over data.eval_batches (non-empty): logged in `csv` and on `progress`,
/// and plotted with --plot (which a failed plot turns off, with a note).
/// Errors: those of HeldOutLoss and LossLog::Write.
absl::StatusOr<double> EvaluateHeldOut(const Model &model, const Trainer &trainer,
                                       const TrainingData &data, int64_t step,
                                       LossLog &csv, ProgressDisplay &progress,
                                       TrainOptions &o) {
  const auto t0 = std::chrono::steady_clock::now();
  BT_ASSIGN_OR_RETURN(const TensorMap params, trainer.Parameters());
  BT_ASSIGN_OR_RETURN(const double loss, HeldOutLoss(model, params, data.eval_batches));
  csv.SetEval(step, loss);
  BT_RETURN_IF_ERROR(csv.Write());
  progress.Message(absl::StrFormat(
      "eval @ step %d: held-out loss %.4f, perplexity %.2f (%d targets, %.1f s)", step,
      loss, std::exp(loss), data.eval_targets,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
  if (o.plot) {
    std::string note = csv.Plot(absl::StrCat(model.config().name(), ": loss"));
    if (!note.empty()) {
      progress.Message(absl::StrCat("note: ", note));
      o.plot = false;
    }
  }
  return loss;
}

/// --baseline torch: the PyTorch training baseline in a child process
/// (TorchTrainBaseline::Start), announced on `progress`; null without
/// --baseline torch or when it cannot start (the reason on `progress`).
/// Errors: those of TorchTrainBaseline::Start.
absl::StatusOr<std::unique_ptr<TorchTrainBaseline>>
StartTorchBaseline(const TrainOptions &o, ProgressDisplay &progress) {
  if (o.baseline != "torch")
    return nullptr;
  std::string note;
  BT_ASSIGN_OR_RETURN(std::unique_ptr<TorchTrainBaseline> torch,
                      TorchTrainBaseline::Start(o, o.output_dir, &note));
  progress.Message(torch ? absl::StrCat("[torch] ", torch->description(),
                                        ": takes turns with bt on steps 1..", o.dump_steps,
                                        " (", BaselineScript(o.torch_script), " --train-serve)")
                         : note);
  return torch;
}

} // namespace

absl::Status RunTraining(const Model &model, const TrainOptions &opts_in,
                         std::ostream &out, std::ostream &log) {
  TrainOptions o = opts_in;
  BT_RETURN_IF_ERROR(CheckTrainable(model, o));
  const proto::ModelConfig &config = model.config();
  BT_RETURN_IF_ERROR(CheckTrainOutputDir(o, /*after_prepare=*/true));
  model.device().SetThreads(o.threads);
  ProgressDisplay progress(log, o.progress, "lines");

  // --- Resume: the checkpoint and its options. ------------------------------
  std::string resume_ckpt;
  nlohmann::json resumed;
  BT_RETURN_IF_ERROR(ReadResumeState(o, resume_ckpt, resumed));

  BT_ASSIGN_OR_RETURN(TrainingData data,
                      LoadTrainingData(model, o, resume_ckpt, resumed, progress));
  const proto::TokenizerKind tokenizer_kind = data.tokenizer_kind;
  const PackedDataset &train = data.train;
  const std::vector<TensorMap> &eval_batches = data.eval_batches;
  const int64_t eval_targets = data.eval_targets;

  // --- The trainer (bt/runtime/trainer.h). ----------------------------------
  BT_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                      CreateTrainer(model, resume_ckpt, resumed, o));
  // Artifact weights the trainer does not train (the block decoder's
  // embed_in): copied into every checkpoint unchanged.
  using TensorsByName = std::map<std::string, Tensor>;
  BT_ASSIGN_OR_RETURN(const TensorsByName untrained, UntrainedWeights(model, *trainer));
  const int64_t start_step = trainer->step();
  double elapsed_before = resumed.is_null() ? 0.0 : resumed.value("elapsed_s", 0.0);
  if (start_step > o.steps)
    return absl::InvalidArgumentError(absl::StrCat(
        "--resume: the checkpoint is at step ", start_step, ", past --steps ", o.steps));

  const std::string dir = o.output_dir;
  BT_RETURN_IF_ERROR(MakeDirs(dir));
  RemoveStaleTemporaries(dir);
  LossLog csv(dir);
  if (!resume_ckpt.empty())
    csv.LoadPrefix(RunDirOf(resume_ckpt) + "/log.csv", start_step);
  const std::string tokenizer_bytes(model.artifact().tokenizer());
  const std::string tokenizer_file = TokenizerFileName(tokenizer_kind);
  BT_ASSIGN_OR_RETURN(const std::string config_path,
                      WriteRunFiles(config, o, tokenizer_kind, tokenizer_bytes));

  std::string last_ckpt;
  double last_eval = -1;
  auto save = [&](int64_t step, double elapsed) -> absl::Status {
    CheckpointContents c;
    c.step = step;
    c.trainer = trainer.get();
    c.config_path = config_path;
    c.extra = &untrained;
    c.trainer_state = TrainerStateJson(o, data, step, elapsed, last_eval);
    c.tokenizer = tokenizer_bytes;
    c.tokenizer_file = tokenizer_file;
    BT_ASSIGN_OR_RETURN(last_ckpt, WriteCheckpoint(dir, c, o.keep_checkpoints));
    BT_RETURN_IF_ERROR(csv.Write());
    progress.Message(absl::StrCat("checkpoint: ", last_ckpt, " (", dir, "/latest)"));
    return absl::OkStatus();
  };
  auto evaluate = [&](int64_t step) -> absl::Status {
    if (eval_batches.empty())
      return absl::OkStatus();
    BT_ASSIGN_OR_RETURN(last_eval,
                        EvaluateHeldOut(model, *trainer, data, step, csv, progress, o));
    return absl::OkStatus();
  };

  // --- Baseline inputs. -----------------------------------------------------
  if (!o.dump_batches.empty())
    BT_RETURN_IF_ERROR(
        DumpBaselineInputs(*trainer, train, o, config, dir, config_path, untrained));
  BT_ASSIGN_OR_RETURN(std::unique_ptr<TorchTrainBaseline> torch,
                      StartTorchBaseline(o, progress));

  // --- The loop. ------------------------------------------------------------
  progress.Message(TrainingPlanLine(config, o, start_step));
  if (start_step == 0 && o.eval_every > 0)
    BT_RETURN_IF_ERROR(evaluate(0));
  SampleOrder order(train.size(), o.seed);
  const int64_t tokens_per_step = o.batch * o.seq_len;
  StepTimes step_times;
  DeviceTraffic step_traffic; // of the steps only (not eval, not saving)
  double elapsed = elapsed_before;
  auto last_csv_write = std::chrono::steady_clock::now();
  for (int64_t step = start_step + 1; step <= o.steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int64_t> idx(static_cast<size_t>(o.batch));
    for (int64_t b = 0; b < o.batch; ++b)
      idx[b] = order.At((step - 1) * o.batch + b);
    BT_ASSIGN_OR_RETURN(TensorMap batch, MakeBatch(train, idx));
    const bool in_turns = torch != nullptr && step <= o.dump_steps;
    if (in_turns) {
      TorchTrainBaseline::Pause();
      t0 = std::chrono::steady_clock::now(); // the batch is built before the pause
    }
    const DeviceTraffic traffic0 = model.device().traffic();
    absl::StatusOr<TrainerStepResult> r = trainer->Step(batch);
    step_traffic += model.device().traffic().Since(traffic0);
    if (!r.ok())
      return absl::Status(r.status().code(),
                          absl::StrCat("step ", step, ": ", r.status().message()));
    if (!std::isfinite(r->loss))
      return absl::InternalError(absl::StrCat("step ", step, ": the loss is ", r->loss));
    const double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    elapsed += sec;
    const double avg = step_times.Add(sec);
    const double rate = static_cast<double>(tokens_per_step) / sec;
    csv.Add(step, absl::StrFormat("%d,%d,%d,%d,%.9g,%.9g,%.9g,%.6f,%.1f,%.3f", step,
                                  order.EpochOf((step - 1) * o.batch), step * o.batch,
                                  step * tokens_per_step, r->loss, r->grad_norm, r->lr, sec,
                                  rate, elapsed));
    progress.Update(step, o.steps,
                    StepProgressText(step, o.steps, r->loss,
                                     static_cast<double>(tokens_per_step) / avg,
                                     elapsed,
                                     avg * static_cast<double>(o.steps - step)));
    if (in_turns) {
      BT_RETURN_IF_ERROR(torch->Step(step, r->loss, sec, r->lr));
      if (step == o.dump_steps)
        torch->Stop();
    }
    const bool last = step == o.steps;
    if ((o.eval_every > 0 && step % o.eval_every == 0) || last)
      BT_RETURN_IF_ERROR(evaluate(step));
    if ((o.save_every > 0 && step % o.save_every == 0) || last)
      BT_RETURN_IF_ERROR(save(step, elapsed));
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - last_csv_write)
            .count() > 10) {
      BT_RETURN_IF_ERROR(csv.Write());
      last_csv_write = std::chrono::steady_clock::now();
    }
  }
  progress.Finish();
  if (start_step == o.steps) {
    // Nothing to train: evaluate the checkpoint as it is.
    BT_RETURN_IF_ERROR(evaluate(o.steps));
    BT_RETURN_IF_ERROR(save(o.steps, elapsed));
  }
  if (o.plot)
    (void)csv.Plot(absl::StrCat(config.name(), ": loss"));
  PrintTrainingSummary(out, config, o, start_step, elapsed, elapsed_before, last_eval,
                       eval_targets, last_ckpt);
  out << FormatStepTraffic(step_traffic, o.steps - start_step, trainer->resident_state());
  if (torch != nullptr)
    BT_RETURN_IF_ERROR(
        torch->Finish(dir, o.batch, o.seq_len, o.threads > 0 ? o.threads : 2, out));
  return absl::OkStatus();
}

} // namespace bt::rt
