//===- commands.cc - launcher commands ------------------------------------===//

#include "bt/runtime/tooling/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/numbers.h"

#include "absl/strings/str_cat.h"
#include "absl/algorithm/container.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bt/runtime/tooling/bench.h"
#include "bt/runtime/model/kv_plan.h"
#include "bt/runtime/tooling/compare.h"
#include "bt/runtime/model/config.h"
#include "bt/runtime/device/cpu/cpu_device.h"
#include "bt/runtime/exec/drivers.h"
#include "bt/runtime/base/safetensors.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/model/tokenizer.h"
#include "bt/runtime/tooling/train.h"
#include "bt/runtime/train/trainer.h"

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
      "  grad --inputs <in.safetensors> -o <out.safetensors>\n",
      "                                         run 'grad' (inputs with labels) "
      "and write loss and\n",
      "                                         grad.<param> for every parameter "
      "(raw, unclipped)\n",
      "  generate (--inputs <prompt.safetensors> | --prompt TEXT...) [-o <out.safetensors>]\n",
      "           [--max-new-tokens N] [--greedy | --temperature T --top-k K --top-p P --seed S]\n",
      "           [--official-generate-positions] [--ignore-eos] [--no-step-logits]\n",
      "                                         generate N tokens per prompt (default 32, greedy):\n",
      "                                         --inputs reads prompt.input_ids and\n",
      "                                         prompt.attention_mask (left padding = 0) and -o\n",
      "                                         writes new_tokens [B, N] and step_logits [N, B, V];\n",
      "                                         --prompt tokenizes with the artifact's SentencePiece\n",
      "                                         model and prints the text\n",
      "  devices                                list the CPU and the CUDA GPU (or why "
      "none is usable)\n",
      "  train-step (--inputs <batch.safetensors> | --grads <grads.safetensors>) -o <dir>\n",
      "           [--checkpoint <dir>] [--config-file <file>] [--lr X] [--warmup-steps N]\n",
      "           [--total-steps N] [--state-out <state.safetensors>]\n",
      "           [--step-outputs <out.safetensors>]\n",
      "                                         one optimizer step ('train_step' on a batch,\n",
      "                                         or 'apply_gradients' on grad.<name> tensors) from\n",
      "                                         the weights with zero moments, step 1; writes the\n",
      "                                         parameters as a checkpoint directory (atomically)\n",
      "  ", TrainUsage(),
      "                                         train the model (entry points train_step,\n"
      "                                         eval_loss; docs/training.md) on text files:\n"
      "                                         checkpoints, held-out loss, log.csv, loss.png\n",
      "  compare <actual> <reference> --check NAME[=REFNAME]:atol=X|rtol=X|equal ...\n",
      "          [--mask-file <masks.safetensors>] [--absent-as-zero]\n",
      "                                         check tensors of two safetensors "
      "files against\n",
      "                                         tolerances (rtol: max|d| / max|ref|);"
      " NAME may be\n",
      "                                         * or PREFIX* (every matching "
      "reference tensor);\n",
      "                                         atol/rtol may add "
      ",where=|MASK|*F>T (or <=T):\n",
      "                                         only elements whose |MASK| * F "
      "exceeds T, MASK\n",
      "                                         from --mask-file (default: the "
      "reference), {} = NAME\n",
      "                                         --absent-as-zero: a tensor missing from "
      "<actual> counts as zeros\n",
      "  bench [--setting forward|prefill-heavy|decode-heavy[=P/G],...]\n"
      "        [--batch 1,8[,max]] [--memory 8GiB] [--prompt P] [--gen G]\n"
      "        [--seq-blocks N | --tokens N] [--iters K] [--warmup W] [--threads T]\n"
      "        [--csv out.csv] [--baseline torch|none] [--torch-script bt_torch.py]\n"
      "        [--python PATH] [--seed S] [--torch-malloc tuned|default]\n"
      "        [--progress auto|bar|dots|none]\n",
      "                                         tokens/s per setting and batch "
      "size, median of K calls\n",
      "                                         after W warmups (default: all "
      "three settings, batches\n",
      "                                         1,8, forward 512 tokens, K 5, W 1, "
      "2 threads), side by\n",
      "                                         side with the PyTorch baseline "
      "bench/bt_torch.py;\n",
      "                                         prefill-heavy (2048/128) and "
      "decode-heavy (128/2048)\n",
      "                                         generate greedily, EOS ignored "
      "(--prompt/--gen replace\n",
      "                                         the lengths); --batch max: the "
      "largest batch the\n",
      "                                         KV-cache plan fits in --memory "
      "(default: available)\n",
      "\n",
      "Every command that runs the model takes --device cpu|cuda|cuda-emu: "
      "cuda-emu runs a cuda\n"
      "artifact's kernels on the CPU in the CUDA emulator, with memory and "
      "synchronization\n"
      "checks (docs/cuda-emulator.md; also $BT_DEVICE=cuda-emu).\n"
      "Every command that runs the model also takes --threads N: the CPU "
      "threads of the\n"
      "compiled kernels and OpenBLAS "
      "(one OpenMP pool,\n"
      "docs/codegen.md; default: OMP_NUM_THREADS, else every core).\n"
      "The artifact is read from the end of this executable unless --artifact "
      "is given.\n");
}

} // namespace

absl::Status RunInfoCommand(const Model &model, std::ostream &out) {
  return RunInfoCommand(model.artifact(), out);
}

absl::Status RunInfoCommand(const Artifact &artifact, std::ostream &out) {
  const proto::Manifest &m = artifact.manifest();
  out << "artifact: " << artifact.path() << "\n";
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
      << m.tokenizer().size() << " bytes";
  if (m.tokenizer().size() > 0)
    out << " (" << TokenizerKindName(m.tokenizer_kind()) << ")";
  if (m.ptx().size() > 0)
    out << ", ptx " << m.ptx().size() << " bytes ("
        << (m.gpu_chip().empty() ? "?" : m.gpu_chip()) << ")";
  if (m.cuda_emu().size() > 0)
    out << ", cuda_emu " << m.cuda_emu().size() << " bytes";
  out << "\n";
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
  if (m.has_kv_plan()) {
    const proto::KVMemoryPlan &p = m.kv_plan();
    out << "kv-cache plan (bt-plan-kv-memory, " << p.source()
        << "): per sequence (ceil(prompt / " << p.block_length()
        << ") + ceil(gen / " << p.block_length() << ")) x "
        << FormatBytes(p.global_bytes_per_entry()) << " + "
        << FormatBytes(p.local_bytes_per_sequence()) << " local scratch; "
        << "weights " << FormatBytes(p.weight_bytes()) << "\n";
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

namespace {

/// Runs `entry` on the named inputs of `in` and writes its outputs to
/// `output_path` (RunEvalCommand, RunGradCommand).
absl::Status RunEntryOnFile(const Model &model, const std::string &entry,
                            const SafetensorsFile &in,
                            const std::string &inputs_path,
                            const std::string &output_path, std::ostream &log) {
  const proto::EntryPoint *ep = model.FindEntryPoint(entry);
  // Before the work: a refused output (a directory, the inputs) fails now.
  BT_RETURN_IF_ERROR(CheckOutputPath(output_path));
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
    // A dynamic dimension (the batch B, the length T) of size 0: nothing to
    // run on (issue 14: an empty batch printed `loss = -nan` and exited 0).
    for (int i = 0; i < s.shape_size() && i < t.rank(); ++i)
      if (s.shape(i) < 0 && t.dim(i) == 0)
        return absl::InvalidArgumentError(absl::StrCat(
            inputs_path, ": '", s.name(), "' is ", t.DebugString(), ": dimension ", i,
            " is empty (entry point '", entry, "' needs at least one sample and token)"));
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
  // The total L2 norm of the gradients (the fixtures' grad_norm_preclip).
  double sq = 0.0;
  int grads = 0;
  for (const auto &[name, t] : outputs)
    if (name.rfind("grad.", 0) == 0 && t.dtype() == proto::F32) {
      const float *d = t.data_as<float>();
      for (int64_t j = 0; j < t.num_elements(); ++j)
        sq += static_cast<double>(d[j]) * d[j];
      ++grads;
    }
  if (grads > 0)
    log << "grad norm = " << absl::StrFormat("%.8g", std::sqrt(sq)) << " ("
        << grads << " parameters)\n";
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

} // namespace

absl::Status RunEvalCommand(const Model &model, const std::string &inputs_path,
                            const std::string &output_path, std::ostream &log) {
  BT_ASSIGN_OR_RETURN(SafetensorsFile in, SafetensorsFile::Open(inputs_path));
  BT_ASSIGN_OR_RETURN(std::string entry,
                      ChooseEvalEntry(model, in.contains("labels")));
  if (in.contains("labels") && entry == "eval")
    log << "note: " << inputs_path
        << " has labels, but the artifact has no eval_loss entry; running "
           "eval\n";
  return RunEntryOnFile(model, entry, in, inputs_path, output_path, log);
}

absl::Status RunGradCommand(const Model &model, const std::string &inputs_path,
                            const std::string &output_path, std::ostream &log) {
  if (model.FindEntryPoint("grad") == nullptr)
    return absl::NotFoundError(absl::StrCat(
        model.artifact().path(), ": the artifact has no 'grad' entry point "
        "(it has: ", absl::StrJoin(model.EntryPointNames(), ", "),
        "); compile it with a bt-run that builds grad"));
  BT_ASSIGN_OR_RETURN(SafetensorsFile in, SafetensorsFile::Open(inputs_path));
  return RunEntryOnFile(model, "grad", in, inputs_path, output_path, log);
}

absl::StatusOr<GenerateCommandOptions>
ParseGenerateArgs(const std::vector<std::string> &args) {
  GenerateCommandOptions o;
  auto bad = [](const std::string &m) {
    return absl::InvalidArgumentError(absl::StrCat("generate: ", m));
  };
  bool greedy_flag = false, sampling = false, seed_given = false;
  double temperature = 1.0;
  bool temperature_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (i + 1 >= args.size())
        return bad(absl::StrCat(a, " needs a value"));
      return args[++i];
    };
    auto number = [&](auto *x) -> absl::Status {
      BT_ASSIGN_OR_RETURN(std::string v, value());
      bool ok;
      if constexpr (std::is_same_v<std::remove_pointer_t<decltype(x)>, double>)
        ok = absl::SimpleAtod(v, x);
      else if constexpr (std::is_same_v<std::remove_pointer_t<decltype(x)>, uint64_t>)
        ok = absl::SimpleAtoi(v, x);
      else
        ok = absl::SimpleAtoi(v, x);
      if (!ok)
        return bad(absl::StrCat(a, ": '", v, "' is not a number"));
      return absl::OkStatus();
    };
    if (a == "--inputs") {
      BT_ASSIGN_OR_RETURN(o.inputs_path, value());
    } else if (a == "--prompt") {
      BT_ASSIGN_OR_RETURN(std::string p, value());
      o.prompts.push_back(p);
    } else if (a == "-o" || a == "--output") {
      BT_ASSIGN_OR_RETURN(o.output_path, value());
    } else if (a == "--max-new-tokens") {
      BT_RETURN_IF_ERROR(number(&o.generate.max_new_tokens));
      if (o.generate.max_new_tokens < 0)
        return bad("--max-new-tokens must be >= 0");
    } else if (a == "--greedy") {
      greedy_flag = true;
    } else if (a == "--temperature") {
      BT_RETURN_IF_ERROR(number(&temperature));
      temperature_given = true;
      if (!(temperature >= 0))
        return bad("--temperature must be >= 0 (0 = greedy)");
    } else if (a == "--top-k") {
      BT_RETURN_IF_ERROR(number(&o.generate.sampling.top_k));
      sampling = true;
    } else if (a == "--top-p") {
      BT_RETURN_IF_ERROR(number(&o.generate.sampling.top_p));
      sampling = true;
    } else if (a == "--seed") {
      BT_RETURN_IF_ERROR(number(&o.generate.sampling.seed));
      seed_given = true;
    } else if (a == "--official-generate-positions") {
      o.generate.official_generate_positions = true;
    } else if (a == "--ignore-eos") {
      o.generate.stop_at_eos = false;
    } else if (a == "--no-step-logits") {
      o.generate.keep_step_logits = false;
    } else {
      return bad(absl::StrCat("unexpected argument '", a, "'"));
    }
  }
  if (o.inputs_path.empty() == o.prompts.empty())
    return bad("give either --inputs <prompt.safetensors> or --prompt TEXT");
  if (!o.inputs_path.empty() && o.output_path.empty())
    return bad("--inputs needs -o <out.safetensors>");
  if (temperature_given && temperature > 0)
    sampling = true;
  if (temperature_given && temperature == 0 && sampling)
    return bad("--temperature 0 (greedy) contradicts --top-k / --top-p");
  if (greedy_flag && (sampling || seed_given || temperature_given))
    return bad("--greedy contradicts --temperature / --top-k / --top-p / --seed");
  if (seed_given && !sampling)
    return bad("--seed needs sampling (--temperature, --top-k or --top-p)");
  o.generate.sampling.greedy = !sampling;
  o.generate.sampling.temperature = temperature_given && temperature > 0 ? temperature : 1.0;
  if (absl::Status v = ValidateSamplingOptions(o.generate.sampling); !v.ok())
    return bad(std::string(v.message()));
  return o;
}

absl::Status RunGenerateCommand(const Model &model,
                                const GenerateCommandOptions &options,
                                std::ostream &out, std::ostream &log) {
  const proto::ModelConfig &cfg = model.config();
  Tensor ids, mask;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<std::vector<int64_t>> prompt_ids;
  if (!options.inputs_path.empty()) {
    BT_ASSIGN_OR_RETURN(SafetensorsFile in, SafetensorsFile::Open(options.inputs_path));
    const bool prefixed = in.contains("prompt.input_ids");
    const std::string ids_name = prefixed ? "prompt.input_ids" : "input_ids";
    const std::string mask_name = prefixed ? "prompt.attention_mask" : "attention_mask";
    if (!in.contains(ids_name))
      return absl::NotFoundError(absl::StrCat(
          options.inputs_path, ": no tensor 'prompt.input_ids' (or 'input_ids'): "
                               "the prompt token ids I64[B, T]"));
    BT_ASSIGN_OR_RETURN(ids, in.Get(ids_name));
    if (in.contains(mask_name)) {
      BT_ASSIGN_OR_RETURN(mask, in.Get(mask_name));
    }
    if (ids.rank() != 2)
      return absl::InvalidArgumentError(absl::StrCat(
          options.inputs_path, ": '", ids_name, "' is ", ids.DebugString(),
          ", expected I64[B, T]"));
  } else {
    BT_ASSIGN_OR_RETURN(tokenizer, Tokenizer::FromArtifact(model.artifact()));
    if (tokenizer->vocab_size() > cfg.vocab_size())
      return absl::FailedPreconditionError(absl::StrCat(
          "the tokenizer has ", tokenizer->vocab_size(),
          " pieces, more than the model's vocabulary (", cfg.vocab_size(), ")"));
    for (const std::string &p : options.prompts) {
      BT_ASSIGN_OR_RETURN(std::vector<int64_t> t, tokenizer->Encode(p));
      if (t.empty())
        return absl::InvalidArgumentError(
            absl::StrCat("the prompt '", p, "' has no tokens"));
      prompt_ids.push_back(std::move(t));
    }
    BT_ASSIGN_OR_RETURN(auto padded, LeftPadPrompts(prompt_ids, cfg.pad_token_id()));
    ids = std::move(padded.first);
    mask = std::move(padded.second);
  }

  if (!options.output_path.empty())
    BT_RETURN_IF_ERROR(CheckOutputPath(options.output_path));
  BT_ASSIGN_OR_RETURN(GenerateResult r,
                      Generate(model, ids, mask, options.generate));
  log << FormatCounters(r.counters);

  if (tokenizer != nullptr) {
    const int64_t N = r.new_tokens.dim(1);
    for (size_t b = 0; b < prompt_ids.size(); ++b) {
      std::vector<int64_t> all = prompt_ids[b];
      const int64_t *row = r.new_tokens.data_as<int64_t>() + b * N;
      const int64_t n = r.finished[b] ? r.lengths[b] - 1 : r.lengths[b]; // no EOS
      all.insert(all.end(), row, row + n);
      BT_ASSIGN_OR_RETURN(std::string text, tokenizer->Decode(all));
      if (prompt_ids.size() > 1)
        out << "[" << b << "] ";
      out << text << "\n";
    }
  }
  if (!options.output_path.empty()) {
    const int64_t B = r.new_tokens.dim(0);
    BT_ASSIGN_OR_RETURN(Tensor finished, Tensor::Allocate(proto::I64, {B}));
    BT_ASSIGN_OR_RETURN(Tensor lengths, Tensor::Allocate(proto::I64, {B}));
    for (int64_t b = 0; b < B; ++b) {
      finished.data_as<int64_t>()[b] = r.finished[b] ? 1 : 0;
      lengths.data_as<int64_t>()[b] = r.lengths[b];
    }
    const SamplingOptions &so = options.generate.sampling;
    const GenerateCounters &c = r.counters;
    std::map<std::string, std::string> metadata = {
        {"command", "generate"},
        {"model", cfg.name()},
        {"max_new_tokens", absl::StrCat(options.generate.max_new_tokens)},
        {"sampling", so.greedy ? "greedy"
                               : absl::StrCat("temperature ", so.temperature,
                                              ", top-k ", so.top_k, ", top-p ",
                                              so.top_p, ", seed ", so.seed)},
        {"positions", cfg.kind() == proto::ModelConfig::VANILLA
                          ? "hf"
                          : options.generate.official_generate_positions
                                ? "official-generate"
                                : "training"},
        {"stop_at_eos", options.generate.stop_at_eos ? "true" : "false"},
        {"counters",
         absl::StrCat("blocks_prefilled=", c.blocks_prefilled,
                      " decode_tokens_calls=", c.decode_tokens_calls,
                      " token_decoder_steps=", c.token_decoder_steps,
                      " token_decoder_rows=", c.token_decoder_rows,
                      " decode_block_calls=", c.decode_block_calls,
                      " decode_block_rows=", c.decode_block_rows,
                      " decode_step_calls=", c.decode_step_calls,
                      " decode_step_rows=", c.decode_step_rows,
                      " rows_compacted=", c.rows_compacted)}};
    if (!model.manifest().producer().empty())
      metadata["producer"] = model.manifest().producer();
    std::vector<std::pair<std::string, const Tensor *>> tensors = {
        {"new_tokens", &r.new_tokens}, {"finished", &finished}, {"lengths", &lengths}};
    if (r.step_logits.valid())
      tensors.emplace_back("step_logits", &r.step_logits);
    BT_RETURN_IF_ERROR(WriteSafetensors(options.output_path, tensors, metadata));
    log << "wrote new_tokens " << ShapeToString(r.new_tokens.shape())
        << " and step_logits " << ShapeToString(r.step_logits.shape()) << " to "
        << options.output_path << "\n";
  }
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

  // --device cpu|cuda|cuda-emu, for every command that runs the model: the
  // artifact's device, or the CUDA emulator for a cuda artifact
  // (docs/cuda-emulator.md; also $BT_DEVICE=cuda-emu).
  DeviceOptions device_options;
  for (size_t k = i; k < args.size(); ++k) {
    if (args[k] != "--device")
      continue;
    const std::string names = absl::StrJoin(DeviceNames(), "|");
    if (k + 1 >= args.size())
      return usage_error(absl::StrCat("--device needs ", names));
    device_options.device = args[k + 1];
    if (!absl::c_linear_search(DeviceNames(), device_options.device))
      return usage_error(absl::StrCat("--device ", device_options.device,
                                      ": expected ", names));
    args.erase(args.begin() + k, args.begin() + k + 2);
    break;
  }
  // --threads N, for every command that runs the model: the CPU threads of
  // the generated kernels and OpenBLAS (SetBlasThreads). bench and train
  // parse it themselves (they hand it to the PyTorch baseline too).
  if (cmd != "bench" && cmd != "train") {
    for (size_t k = i; k < args.size(); ++k) {
      if (args[k] != "--threads")
        continue;
      int threads = 0;
      if (k + 1 >= args.size() || !absl::SimpleAtoi(args[k + 1], &threads) ||
          threads <= 0)
        return usage_error("--threads needs a positive integer");
      SetBlasThreads(threads);
      args.erase(args.begin() + k, args.begin() + k + 2);
      break;
    }
  }
  // The device's target must be the artifact's (OpenDeviceFor).
  auto open_model = [&]() { return Model::Open(artifact, device_options); };

  if (cmd == "devices") {
    // The devices this binary can run on (no model needed): always the CPU,
    // and a CUDA GPU or the reason there is none (bt/runtime/cuda.h).
    if (i < args.size())
      return usage_error(absl::StrCat("devices takes no arguments, got '",
                                      args[i], "'"));
    for (const std::string &line : DescribeDevices())
      out << line << "\n";
    return 0;
  }
  if (cmd == "compare") {
    // compare <actual> <reference> --check NAME:atol=X ... (no model needed)
    std::vector<std::string> files;
    std::vector<TensorCheck> checks;
    CompareOptions compare_options;
    for (; i < args.size(); ++i) {
      if (args[i] == "--absent-as-zero") {
        compare_options.absent_as_zero = true;
      } else if (args[i] == "--mask-file") {
        if (i + 1 >= args.size())
          return usage_error("--mask-file needs a path");
        compare_options.mask_path = args[++i];
      } else if (args[i] == "--check") {
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
        CompareTensors(files[0], files[1], checks, out, compare_options);
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
    bool with_max = false;
    std::string setting_list = kDefaultBenchSettings, memory, progress = "auto";
    int64_t tokens = 0, seq_blocks = 0, prompt_tokens = 0, gen_tokens = 0;
    for (; i < args.size(); ++i) {
      const std::string &a = args[i];
      if (a == "-h" || a == "--help") {
        out << Usage(prog);
        return 0;
      }
      static const std::set<std::string> kValued = {
          "--batch", "--seq-blocks", "--tokens", "--iters",
          "--warmup", "--threads", "--csv", "--baseline", "--torch-script",
          "--python", "--seed", "--torch-malloc", "--setting", "--prompt",
          "--gen", "--memory", "--progress"};
      if (!kValued.count(a))
        return usage_error(absl::StrCat("bench: unexpected argument '", a, "'"));
      if (i + 1 >= args.size())
        return usage_error(absl::StrCat(a, " needs a value"));
      const std::string v = args[++i];
      int64_t n = 0;
      if (a == "--batch") {
        batches.clear();
        with_max = false;
        for (absl::string_view b : absl::StrSplit(v, ',')) {
          int64_t x = 0;
          if (b == "max") {
            with_max = true;
            continue;
          }
          if (!absl::SimpleAtoi(b, &x) || x < 1)
            return usage_error(absl::StrCat(
                "--batch ", v, ": expected positive integers separated by "
                "commas (and 'max')"));
          batches.push_back(x);
        }
      } else if (a == "--csv") {
        opts.csv_path = v;
      } else if (a == "--setting") {
        setting_list = v;
      } else if (a == "--memory") {
        memory = v;
      } else if (a == "--progress") {
        if (v != "auto" && v != "bar" && v != "dots" && v != "none")
          return usage_error(absl::StrCat(
              "--progress ", v, ": expected auto, bar, dots or none"));
        progress = v;
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
      } else if (a == "--prompt") {
        prompt_tokens = n;
      } else if (a == "--gen") {
        gen_tokens = n;
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
    absl::StatusOr<std::vector<BenchSettingSpec>> specs =
        ParseBenchSettings(setting_list, prompt_tokens, gen_tokens);
    if (!specs.ok())
      return usage_error(std::string(specs.status().message()));
    // The memory budget of --batch max: --memory, else what is available.
    int64_t memory_bytes = 0;
    std::string memory_source;
    if (!memory.empty()) {
      if (!with_max)
        return usage_error("bench --memory is the budget of --batch max; add "
                           "'max' to --batch");
      absl::StatusOr<int64_t> m = ParseByteSize(memory);
      if (!m.ok() || *m <= 0)
        return usage_error(absl::StrCat(
            "--memory ", memory, ": expected a positive size such as 80GiB "
            "(binary), 80GB (decimal) or 1073741824 (bytes)"));
      memory_bytes = *m;
      memory_source = absl::StrCat("--memory ", memory);
    } else if (with_max) {
      absl::StatusOr<int64_t> m = AvailableMemoryBytes();
      if (!m.ok()) {
        err << prog << ": bench --batch max: " << m.status().message() << "\n";
        return 1;
      }
      memory_bytes = *m;
      memory_source = "available (MemAvailable)";
    }
    auto model = open_model();
    if (!model.ok()) {
      err << prog << ": " << model.status().message() << "\n";
      return 1;
    }
    opts.device = (*model)->device().name();
    const proto::ModelConfig &config = (*model)->config();
    const int64_t L = config.kind() == proto::ModelConfig::VANILLA
                          ? 1
                          : std::max<int64_t>(config.block_length(), 1);
    if (seq_blocks > 0)
      tokens = seq_blocks * L;
    else if (tokens == 0)
      tokens = (512 + L - 1) / L * L; // 512 tokens (128 blocks at L_B = 4)
    absl::StatusOr<std::vector<BenchSetting>> settings =
        BenchSettingsFor((*model)->manifest(), *specs, batches, tokens,
                         with_max, memory_bytes, memory_source, &opts.notes);
    if (!settings.ok()) {
      if (absl::IsInvalidArgument(settings.status()))
        return usage_error(std::string(settings.status().message()));
      err << prog << ": " << artifact << ": " << settings.status().message()
          << "\n";
      return 1;
    }
    opts.settings = std::move(*settings);
    if (progress == "auto") {
      const char *term = getenv("TERM");
      progress = isatty(STDERR_FILENO) && term != nullptr &&
                         std::string(term) != "dumb"
                     ? "bar"
                     : "dots";
    }
    opts.progress = progress;
    absl::Status s = RunBenchCommand(**model, opts, out, err);
    if (!s.ok()) {
      err << prog << ": " << s.message() << "\n";
      return 1;
    }
    return 0;
  }

  if (cmd == "train") {
    std::vector<std::string> rest(args.begin() + i, args.end());
    for (const std::string &a : rest)
      if (a == "-h" || a == "--help") {
        out << "usage: " << prog << " " << TrainUsage();
        return 0;
      }
    absl::StatusOr<TrainOptions> opts = ParseTrainArgs(rest);
    if (!opts.ok())
      return usage_error(std::string(opts.status().message()));
    auto model = open_model();
    if (!model.ok()) {
      err << prog << ": " << model.status().message() << "\n";
      return 1;
    }
    absl::Status s = RunTraining(**model, *opts, out, err);
    if (!s.ok()) {
      err << prog << ": " << s.message() << "\n";
      return 1;
    }
    return 0;
  }

  std::string inputs, output;
  GenerateCommandOptions gen;
  TrainStepCommandOptions train;
  if (cmd == "train-step") {
    std::vector<std::string> rest(args.begin() + i, args.end());
    for (const std::string &a : rest)
      if (a == "-h" || a == "--help") {
        out << Usage(prog);
        return 0;
      }
    absl::StatusOr<TrainStepCommandOptions> parsed = ParseTrainStepArgs(rest);
    if (!parsed.ok())
      return usage_error(std::string(parsed.status().message()));
    train = std::move(parsed).value();
  } else if (cmd == "generate") {
    std::vector<std::string> rest(args.begin() + i, args.end());
    for (const std::string &a : rest)
      if (a == "-h" || a == "--help") {
        out << Usage(prog);
        return 0;
      }
    absl::StatusOr<GenerateCommandOptions> parsed = ParseGenerateArgs(rest);
    if (!parsed.ok())
      return usage_error(std::string(parsed.status().message()));
    gen = std::move(parsed).value();
  } else if (cmd == "info") {
    if (i < args.size())
      return usage_error(absl::StrCat("info takes no arguments, got '",
                                      args[i], "'"));
  } else if (cmd == "eval" || cmd == "grad") {
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
        return usage_error(
            absl::StrCat(cmd, ": unexpected argument '", a, "'"));
      }
    }
    if (inputs.empty())
      return usage_error(
          absl::StrCat(cmd, ": missing --inputs <inputs.safetensors>"));
    if (output.empty())
      return usage_error(absl::StrCat(cmd, ": missing -o <outputs.safetensors>"));
  } else {
    return usage_error(absl::StrCat("unknown command '", cmd, "'"));
  }

  if (cmd == "info") {
    // A cuda artifact describes itself without a GPU.
    absl::StatusOr<std::shared_ptr<const Artifact>> a = Artifact::Open(artifact);
    if (a.ok() && (*a)->manifest().target() == "cuda") {
      absl::Status s = RunInfoCommand(**a, out);
      if (!s.ok()) {
        err << prog << ": " << s.message() << "\n";
        return 1;
      }
      return 0;
    }
  }
  auto model = open_model();
  if (!model.ok()) {
    err << prog << ": " << model.status().message() << "\n";
    return 1;
  }
  absl::Status s = cmd == "info"         ? RunInfoCommand(**model, out)
                   : cmd == "generate"   ? RunGenerateCommand(**model, gen, out, err)
                   : cmd == "grad"       ? RunGradCommand(**model, inputs, output, err)
                   : cmd == "train-step" ? RunTrainStepCommand(**model, train, out)
                                         : RunEvalCommand(**model, inputs, output, err);
  if (!s.ok()) {
    err << prog << ": " << s.message() << "\n";
    return 1;
  }
  return 0;
}

} // namespace bt::rt
