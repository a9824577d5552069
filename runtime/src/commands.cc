//===- commands.cc - launcher commands ------------------------------------===//

#include "bt/runtime/commands.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bt/runtime/bench.h"
#include "bt/runtime/compare.h"
#include "bt/runtime/config.h"
#include "bt/runtime/safetensors.h"
#include "bt/runtime/status_macros.h"

namespace bt::rt {
namespace {

std::string SpecString(const proto::TensorSpec &s) {
  std::vector<std::string> dims;
  for (int i = 0; i < s.shape_size(); ++i) {
    const int64_t d = s.shape(i);
    const std::string name = i < s.dim_names_size() ? s.dim_names(i) : "";
    dims.push_back(d >= 0 ? absl::StrCat(d) : (name.empty() ? "?" : name));
  }
  return absl::StrCat(s.name(), ": ", DTypeName(s.dtype()), "[",
                      absl::StrJoin(dims, ", "), "]");
}

std::string ScalarString(const Tensor &t) {
  switch (t.dtype()) {
  case proto::F32:
    return absl::StrFormat("%.8g", *t.data_as<float>());
  case proto::F64:
    return absl::StrFormat("%.12g", *t.data_as<double>());
  case proto::I64:
    return absl::StrCat(*t.data_as<int64_t>());
  case proto::I32:
    return absl::StrCat(*t.data_as<int32_t>());
  default:
    return t.DebugString();
  }
}

std::string Usage(const std::string &prog) {
  return absl::StrCat(
      "usage: ", prog, " [--artifact <path>] <command> [options]\n",
      "\n",
      "commands:\n",
      "  info                                   print the model configuration "
      "and entry points\n",
      "  eval --inputs <in.safetensors> -o <out.safetensors>\n",
      "                                         run 'eval_loss' (inputs with "
      "labels) or 'eval'\n",
      "                                         and write the outputs (logits, "
      "loss)\n",
      "  compare <actual> <reference> --check NAME:atol=X|NAME:rtol=X|NAME:equal ...\n",
      "                                         check tensors of two safetensors "
      "files against\n",
      "                                         tolerances (rtol: max|d| / max|ref|)"
      "\n",
      "  bench [--device cpu] [--batch 1,8] [--seq-blocks N | --tokens N]\n"
      "        [--iters K] [--warmup W] [--threads T] [--csv out.csv]\n"
      "        [--baseline torch|none] [--torch-script bt_torch.py] [--python PATH]\n"
      "        [--seed S] [--torch-malloc tuned|default]\n",
      "                                         forward ('eval') throughput in "
      "tokens/s per batch\n",
      "                                         size (median of K calls after W "
      "warmups; default\n",
      "                                         batches 1,8, 512 tokens, K 5, W 1, "
      "2 threads), side\n",
      "                                         by side with the PyTorch baseline "
      "bench/bt_torch.py\n",
      "\n",
      "The artifact is read from the end of this executable unless --artifact "
      "is given.\n");
}

} // namespace

absl::Status RunInfoCommand(const Model &model, std::ostream &out) {
  const proto::Manifest &m = model.manifest();
  out << "artifact: " << model.artifact().path() << "\n";
  out << "  format version " << m.format_version() << ", target " << m.target();
  if (!m.cpu().empty())
    out << " (" << m.cpu() << ")";
  if (!m.producer().empty())
    out << ", produced by " << m.producer();
  out << "\n";
  uint64_t weight_bytes = 0;
  for (const proto::Weight &w : m.weights())
    weight_bytes += w.nbytes();
  out << "  " << m.weights_size() << " weights (" << weight_bytes
      << " bytes), kernels " << m.kernels().size() << " bytes, tokenizer "
      << m.tokenizer().size() << " bytes\n";
  out << DescribeModelConfig(m.config());
  out << "entry points:\n";
  for (const proto::EntryPoint &ep : m.entry_points()) {
    out << "  " << ep.name() << " (" << ep.symbol() << ", "
        << ep.params_size() << " params)\n";
    for (const proto::TensorSpec &s : ep.inputs())
      out << "    in  " << SpecString(s) << "\n";
    for (const proto::TensorSpec &s : ep.outputs())
      out << "    out " << SpecString(s) << "\n";
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ChooseEvalEntry(const Model &model,
                                            bool has_labels) {
  if (has_labels && model.FindEntryPoint("eval_loss") != nullptr)
    return std::string("eval_loss");
  if (model.FindEntryPoint("eval") != nullptr)
    return std::string("eval");
  return absl::NotFoundError(absl::StrCat(
      model.artifact().path(), ": the artifact has no 'eval'",
      has_labels ? " or 'eval_loss'" : "", " entry point (it has: ",
      absl::StrJoin(model.EntryPointNames(), ", "), ")"));
}

absl::Status RunEvalCommand(const Model &model, const std::string &inputs_path,
                            const std::string &output_path, std::ostream &log) {
  BT_ASSIGN_OR_RETURN(SafetensorsFile in, SafetensorsFile::Open(inputs_path));
  BT_ASSIGN_OR_RETURN(std::string entry,
                      ChooseEvalEntry(model, in.contains("labels")));
  if (in.contains("labels") && entry == "eval")
    log << "note: " << inputs_path
        << " has labels, but the artifact has no eval_loss entry; running "
           "eval\n";
  const proto::EntryPoint *ep = model.FindEntryPoint(entry);
  TensorMap inputs;
  std::vector<std::string> used;
  for (const proto::TensorSpec &s : ep->inputs()) {
    if (!in.contains(s.name()))
      return absl::NotFoundError(absl::StrCat(
          inputs_path, ": no tensor '", s.name(), "' (entry point '", entry,
          "' needs ", DTypeName(s.dtype()),
          ShapeToString(std::vector<int64_t>(s.shape().begin(), s.shape().end())),
          ")"));
    BT_ASSIGN_OR_RETURN(Tensor t, in.Get(s.name()));
    inputs.emplace(s.name(), std::move(t));
    used.push_back(s.name());
  }
  std::vector<std::string> ignored;
  for (const std::string &n : in.names())
    if (!inputs.count(n))
      ignored.push_back(n);
  if (!ignored.empty())
    log << "note: ignoring " << absl::StrJoin(ignored, ", ") << " in "
        << inputs_path << " (not inputs of " << entry << ")\n";

  BT_ASSIGN_OR_RETURN(TensorMap outputs, model.Run(entry, inputs));
  for (const auto &[name, t] : outputs)
    if (t.rank() == 0)
      log << name << " = " << ScalarString(t) << "\n";
  std::map<std::string, std::string> metadata = {
      {"entry_point", entry},
      {"model", model.config().name()},
      {"inputs", absl::StrJoin(used, ",")}};
  if (!model.manifest().producer().empty())
    metadata["producer"] = model.manifest().producer();
  BT_RETURN_IF_ERROR(WriteSafetensors(output_path, outputs, metadata));
  log << "wrote " << outputs.size() << " tensor(s) of " << entry << " to "
      << output_path << "\n";
  return absl::OkStatus();
}

int LauncherMain(int argc, const char *const *argv, std::ostream &out,
                 std::ostream &err) {
  std::string prog = argc > 0 && argv[0] ? argv[0] : "bt-launcher";
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  std::string artifact = kSelfExe;
  size_t i = 0;
  auto usage_error = [&](const std::string &msg) {
    err << prog << ": " << msg << "\n\n" << Usage(prog);
    return 2;
  };
  while (i < args.size() && args[i].rfind("-", 0) == 0) {
    if (args[i] == "-h" || args[i] == "--help") {
      out << Usage(prog);
      return 0;
    }
    if (args[i] == "--artifact") {
      if (i + 1 >= args.size())
        return usage_error("--artifact needs a path");
      artifact = args[i + 1];
      i += 2;
      continue;
    }
    return usage_error(absl::StrCat("unknown option '", args[i], "'"));
  }
  if (i >= args.size())
    return usage_error("missing command");
  const std::string cmd = args[i++];

  if (cmd == "compare") {
    // compare <actual> <reference> --check NAME:atol=X ... (no model needed)
    std::vector<std::string> files;
    std::vector<TensorCheck> checks;
    for (; i < args.size(); ++i) {
      if (args[i] == "--check") {
        if (i + 1 >= args.size())
          return usage_error("--check needs NAME:atol=X, NAME:rtol=X or NAME:equal");
        absl::StatusOr<TensorCheck> check = ParseTensorCheck(args[++i]);
        if (!check.ok())
          return usage_error(std::string(check.status().message()));
        checks.push_back(*check);
      } else if (args[i].rfind("-", 0) == 0) {
        return usage_error(absl::StrCat("compare: unexpected option '", args[i], "'"));
      } else {
        files.push_back(args[i]);
      }
    }
    if (files.size() != 2 || checks.empty())
      return usage_error("compare needs <actual> <reference> and at least one --check");
    absl::StatusOr<std::vector<TensorCheckResult>> results =
        CompareTensors(files[0], files[1], checks, out);
    if (!results.ok()) {
      err << prog << ": " << results.status().message() << "\n";
      return 1;
    }
    for (const TensorCheckResult &r : *results)
      if (!r.passed) {
        err << prog << ": compare: " << r.check.tensor
            << " is outside its tolerance\n";
        return 1;
      }
    return 0;
  }

  if (cmd == "bench") {
    BenchOptions opts;
    std::vector<int64_t> batches = {1, 8};
    int64_t tokens = 0, seq_blocks = 0;
    for (; i < args.size(); ++i) {
      const std::string &a = args[i];
      if (a == "-h" || a == "--help") {
        out << Usage(prog);
        return 0;
      }
      static const std::set<std::string> kValued = {
          "--device", "--batch", "--seq-blocks", "--tokens", "--iters",
          "--warmup", "--threads", "--csv", "--baseline", "--torch-script",
          "--python", "--seed", "--torch-malloc"};
      if (!kValued.count(a))
        return usage_error(absl::StrCat("bench: unexpected argument '", a, "'"));
      if (i + 1 >= args.size())
        return usage_error(absl::StrCat(a, " needs a value"));
      const std::string v = args[++i];
      int64_t n = 0;
      if (a == "--device") {
        opts.device = v;
      } else if (a == "--batch") {
        batches.clear();
        for (absl::string_view b : absl::StrSplit(v, ',')) {
          int64_t x = 0;
          if (!absl::SimpleAtoi(b, &x) || x < 1)
            return usage_error(absl::StrCat(
                "--batch ", v, ": expected positive integers separated by commas"));
          batches.push_back(x);
        }
      } else if (a == "--csv") {
        opts.csv_path = v;
      } else if (a == "--baseline") {
        if (v != "torch" && v != "none")
          return usage_error(absl::StrCat("--baseline ", v, ": expected torch or none"));
        opts.baseline = v;
      } else if (a == "--torch-script") {
        opts.torch_script = v;
      } else if (a == "--python") {
        opts.python = v;
      } else if (a == "--torch-malloc") {
        if (v != "tuned" && v != "default")
          return usage_error(absl::StrCat("--torch-malloc ", v, ": expected tuned or default"));
        opts.torch_malloc = v;
      } else if (!absl::SimpleAtoi(v, &n) || n < 0 ||
                 (n == 0 && a != "--warmup" && a != "--seed")) {
        return usage_error(absl::StrCat(a, " ", v, ": expected a ",
                                        a == "--warmup" || a == "--seed"
                                            ? "non-negative"
                                            : "positive",
                                        " integer"));
      } else if (a == "--seq-blocks") {
        seq_blocks = n;
      } else if (a == "--tokens") {
        tokens = n;
      } else if (a == "--iters") {
        opts.iters = static_cast<int>(n);
      } else if (a == "--warmup") {
        opts.warmup = static_cast<int>(n);
      } else if (a == "--threads") {
        opts.threads = static_cast<int>(n);
      } else if (a == "--seed") {
        opts.seed = static_cast<uint64_t>(n);
      }
    }
    if (tokens > 0 && seq_blocks > 0)
      return usage_error("bench: give --seq-blocks or --tokens, not both");
    auto model = Model::Open(artifact);
    if (!model.ok()) {
      err << prog << ": " << model.status().message() << "\n";
      return 1;
    }
    const proto::ModelConfig &config = (*model)->config();
    const int64_t L = config.kind() == proto::ModelConfig::VANILLA
                          ? 1
                          : std::max<int64_t>(config.block_length(), 1);
    if (seq_blocks > 0)
      tokens = seq_blocks * L;
    else if (tokens == 0)
      tokens = (512 + L - 1) / L * L; // 512 tokens (128 blocks at L_B = 4)
    absl::StatusOr<std::vector<BenchSetting>> settings =
        ForwardSettings(config, batches, tokens);
    if (!settings.ok())
      return usage_error(std::string(settings.status().message()));
    opts.settings = std::move(*settings);
    absl::Status s = RunBenchCommand(**model, opts, out, err);
    if (!s.ok()) {
      err << prog << ": " << s.message() << "\n";
      return 1;
    }
    return 0;
  }

  std::string inputs, output;
  if (cmd == "info") {
    if (i < args.size())
      return usage_error(absl::StrCat("info takes no arguments, got '",
                                      args[i], "'"));
  } else if (cmd == "eval") {
    for (; i < args.size(); ++i) {
      const std::string &a = args[i];
      if (a == "-h" || a == "--help") {
        out << Usage(prog);
        return 0;
      }
      if (a == "--inputs" || a == "-o" || a == "--output") {
        if (i + 1 >= args.size())
          return usage_error(absl::StrCat(a, " needs a path"));
        (a == "--inputs" ? inputs : output) = args[++i];
      } else {
        return usage_error(absl::StrCat("eval: unexpected argument '", a, "'"));
      }
    }
    if (inputs.empty())
      return usage_error("eval: missing --inputs <inputs.safetensors>");
    if (output.empty())
      return usage_error("eval: missing -o <outputs.safetensors>");
  } else {
    return usage_error(absl::StrCat("unknown command '", cmd, "'"));
  }

  auto model = Model::Open(artifact);
  if (!model.ok()) {
    err << prog << ": " << model.status().message() << "\n";
    return 1;
  }
  absl::Status s = cmd == "info" ? RunInfoCommand(**model, out)
                                 : RunEvalCommand(**model, inputs, output, err);
  if (!s.ok()) {
    err << prog << ": " << s.message() << "\n";
    return 1;
  }
  return 0;
}

} // namespace bt::rt
