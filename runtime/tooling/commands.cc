//===- commands.cc - launcher commands ------------------------------------===//

#include "bt/runtime/tooling/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
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

} // namespace

absl::Status RunInfoCommand(const Model &model, std::ostream &out) {
  return RunInfoCommand(model.artifact(), out);
}

absl::Status RunInfoCommand(std::shared_ptr<const Artifact> artifact,
                            const DeviceOptions &device, std::ostream &out) {
  if (artifact->manifest().target() == "cuda")
    return RunInfoCommand(*artifact, out);
  BT_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                      Model::Open(std::move(artifact), device));
  return RunInfoCommand(*model, out);
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
  if (m.has_random_init())
    out << "  weights drawn at load: random init, seed "
        << m.random_init().seed() << " (not stored)\n";
  out << DescribeModelConfig(m.config());
  out << "entry points:\n";
  for (const proto::EntryPoint &ep : m.entry_points()) {
    const int bf16 = static_cast<int>(
        std::count(ep.param_dtypes().begin(), ep.param_dtypes().end(),
                   static_cast<int>(proto::BF16)));
    out << "  " << ep.name() << " (" << ep.symbol() << ", "
        << ep.params_size() << " params";
    if (bf16 > 0) // --dtype bf16: rounded to bf16 when uploaded
      out << ", " << bf16 << " of them in bf16";
    out << ")\n";
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

absl::StatusOr<GenerateCommandFlags>
ParseGenerateFlags(const std::vector<std::string> &args) {
  GenerateCommandFlags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (i + 1 >= args.size())
        return absl::InvalidArgumentError(
            absl::StrCat("generate: ", a, " needs a value"));
      return args[++i];
    };
    if (a == "--inputs") {
      BT_ASSIGN_OR_RETURN(f.inputs_path, value());
    } else if (a == "--prompt") {
      BT_ASSIGN_OR_RETURN(std::string p, value());
      f.prompts.push_back(p);
    } else if (a == "-o" || a == "--output") {
      BT_ASSIGN_OR_RETURN(f.output_path, value());
    } else if (a == "--max-new-tokens") {
      BT_ASSIGN_OR_RETURN(f.max_new_tokens, value());
    } else if (a == "--greedy") {
      f.greedy = true;
    } else if (a == "--temperature") {
      BT_ASSIGN_OR_RETURN(f.temperature, value());
    } else if (a == "--top-k") {
      BT_ASSIGN_OR_RETURN(f.top_k, value());
    } else if (a == "--top-p") {
      BT_ASSIGN_OR_RETURN(f.top_p, value());
    } else if (a == "--seed") {
      BT_ASSIGN_OR_RETURN(f.seed, value());
    } else if (a == "--official-generate-positions") {
      f.official_generate_positions = true;
    } else if (a == "--ignore-eos") {
      f.ignore_eos = true;
    } else if (a == "--no-step-logits") {
      f.no_step_logits = true;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("generate: unexpected argument '", a, "'"));
    }
  }
  return f;
}

namespace {

/// The number of the flag `name`'s text `v` into `x` (double or integer).
template <typename T>
absl::Status ParseFlagNumber(const std::string &name,
                             const std::optional<std::string> &v, T *x) {
  if (!v)
    return absl::OkStatus();
  bool ok;
  if constexpr (std::is_same_v<T, double>)
    ok = absl::SimpleAtod(*v, x);
  else
    ok = absl::SimpleAtoi(*v, x);
  if (!ok)
    return absl::InvalidArgumentError(
        absl::StrCat("generate: ", name, ": '", *v, "' is not a number"));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<GenerateCommandOptions>
ResolveGenerateFlags(const GenerateCommandFlags &f) {
  auto bad = [](const std::string &m) {
    return absl::InvalidArgumentError(absl::StrCat("generate: ", m));
  };
  GenerateCommandOptions o;
  o.inputs_path = f.inputs_path;
  o.prompts = f.prompts;
  o.output_path = f.output_path;
  o.generate.official_generate_positions = f.official_generate_positions;
  o.generate.stop_at_eos = !f.ignore_eos;
  o.generate.keep_step_logits = !f.no_step_logits;
  double temperature = 1.0;
  SamplingOptions &s = o.generate.sampling;
  BT_RETURN_IF_ERROR(ParseFlagNumber("--max-new-tokens", f.max_new_tokens,
                                     &o.generate.max_new_tokens));
  if (o.generate.max_new_tokens < 0)
    return bad("--max-new-tokens must be >= 0");
  BT_RETURN_IF_ERROR(ParseFlagNumber("--temperature", f.temperature, &temperature));
  if (!(temperature >= 0))
    return bad("--temperature must be >= 0 (0 = greedy)");
  BT_RETURN_IF_ERROR(ParseFlagNumber("--top-k", f.top_k, &s.top_k));
  BT_RETURN_IF_ERROR(ParseFlagNumber("--top-p", f.top_p, &s.top_p));
  BT_RETURN_IF_ERROR(ParseFlagNumber("--seed", f.seed, &s.seed));
  if (o.inputs_path.empty() == o.prompts.empty())
    return bad("give either --inputs <prompt.safetensors> or --prompt TEXT");
  if (!o.inputs_path.empty() && o.output_path.empty())
    return bad("--inputs needs -o <out.safetensors>");
  const bool temperature_given = f.temperature.has_value();
  bool sampling = f.top_k || f.top_p;
  if (temperature_given && temperature > 0)
    sampling = true;
  if (temperature_given && temperature == 0 && sampling)
    return bad("--temperature 0 (greedy) contradicts --top-k / --top-p");
  if (f.greedy && (sampling || f.seed || temperature_given))
    return bad("--greedy contradicts --temperature / --top-k / --top-p / --seed");
  if (f.seed && !sampling)
    return bad("--seed needs sampling (--temperature, --top-k or --top-p)");
  s.greedy = !sampling;
  s.temperature = temperature_given && temperature > 0 ? temperature : 1.0;
  if (absl::Status v = ValidateSamplingOptions(s); !v.ok())
    return bad(std::string(v.message()));
  return o;
}

absl::StatusOr<GenerateCommandOptions>
ParseGenerateArgs(const std::vector<std::string> &args) {
  BT_ASSIGN_OR_RETURN(GenerateCommandFlags flags, ParseGenerateFlags(args));
  return ResolveGenerateFlags(flags);
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

} // namespace bt::rt
