//===- train_args.cc - the train command's arguments and files ------------===//
//
// TrainUsage, ParseTrainArgs, HeldOutLoss and OfficialTrainerYaml
// (train.h).
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/tooling/train.h"
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

using train_internal::Num;

//===----------------------------------------------------------------------===//
// Arguments.
//===----------------------------------------------------------------------===//

std::string TrainUsage() {
  return "train --data FILE... -o DIR --steps N [--resume DIR] [--overwrite]\n"
         "      [--split paragraph|heading|line|file] [--holdout F] [--batch B] [--seq-len T]\n"
         "      [--eval-every K] [--eval-batches K] [--save-every K] [--seed S] [--pad-seed S]\n"
         "      [--lr X] [--warmup N] [--lr-total-steps N] [--threads N]\n"
         "      [--progress auto|bar|lines|none]\n"
         "      [--no-plot] [--keep-checkpoints] [--dump-batches FILE --dump-steps N]\n"
         "      [--baseline torch|none] [--torch-script PATH] [--python PATH] [--note K=V]\n";
}

absl::StatusOr<TrainOptions> ParseTrainArgs(const std::vector<std::string> &args) {
  TrainOptions o;
  bool have_steps = false, have_lr_total = false;
  auto bad = [](const std::string &m) {
    return absl::InvalidArgumentError(absl::StrCat("train: ", m, "\nusage: ", TrainUsage()));
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (i + 1 >= args.size())
        return bad(absl::StrCat(a, " needs a value"));
      return args[++i];
    };
    auto integer = [&](int64_t min) -> absl::StatusOr<int64_t> {
      BT_ASSIGN_OR_RETURN(std::string v, value());
      int64_t n = 0;
      if (!absl::SimpleAtoi(v, &n) || n < min)
        return bad(absl::StrCat(a, " ", v, ": expected an integer >= ", min));
      return n;
    };
    auto real = [&](double min) -> absl::StatusOr<double> {
      BT_ASSIGN_OR_RETURN(std::string v, value());
      double x = 0;
      if (!absl::SimpleAtod(v, &x) || !(x >= min))
        return bad(absl::StrCat(a, " ", v, ": expected a number >= ", min));
      return x;
    };
    if (a == "--data") {
      // Every following argument up to the next option is a file.
      size_t j = i + 1;
      for (; j < args.size() && !absl::StartsWith(args[j], "-"); ++j)
        o.data_paths.push_back(args[j]);
      if (j == i + 1)
        return bad("--data needs at least one file");
      i = j - 1;
    } else if (a == "--split") {
      BT_ASSIGN_OR_RETURN(std::string v, value());
      absl::StatusOr<DocumentSplit> s = ParseDocumentSplit(v);
      if (!s.ok())
        return bad(std::string(s.status().message()));
      o.split = *s;
    } else if (a == "--holdout") {
      BT_ASSIGN_OR_RETURN(o.holdout_fraction, real(0));
      if (o.holdout_fraction >= 1)
        return bad("--holdout must be below 1");
    } else if (a == "-o" || a == "--output") {
      BT_ASSIGN_OR_RETURN(o.output_dir, value());
    } else if (a == "--resume") {
      BT_ASSIGN_OR_RETURN(o.resume_dir, value());
    } else if (a == "--steps") {
      BT_ASSIGN_OR_RETURN(o.steps, integer(1));
      have_steps = true;
    } else if (a == "--batch") {
      BT_ASSIGN_OR_RETURN(o.batch, integer(1));
    } else if (a == "--seq-len") {
      BT_ASSIGN_OR_RETURN(o.seq_len, integer(1));
    } else if (a == "--eval-every") {
      BT_ASSIGN_OR_RETURN(o.eval_every, integer(0));
    } else if (a == "--eval-batches") {
      BT_ASSIGN_OR_RETURN(o.eval_batches, integer(1));
    } else if (a == "--save-every") {
      BT_ASSIGN_OR_RETURN(o.save_every, integer(0));
    } else if (a == "--seed") {
      BT_ASSIGN_OR_RETURN(int64_t s, integer(0));
      o.seed = static_cast<uint64_t>(s);
    } else if (a == "--pad-seed") {
      BT_ASSIGN_OR_RETURN(int64_t s, integer(0));
      if (s > 0xffffffffll)
        return bad("--pad-seed must fit in 32 bits (numpy's legacy seeding)");
      o.pad_seed = static_cast<uint32_t>(s);
    } else if (a == "--lr") {
      BT_ASSIGN_OR_RETURN(o.schedule.peak_lr, real(0));
    } else if (a == "--warmup") {
      BT_ASSIGN_OR_RETURN(o.schedule.warmup_steps, integer(0));
    } else if (a == "--lr-total-steps") {
      BT_ASSIGN_OR_RETURN(o.schedule.total_steps, integer(1));
      have_lr_total = true;
    } else if (a == "--threads") {
      BT_ASSIGN_OR_RETURN(int64_t t, integer(1));
      o.threads = static_cast<int>(t);
    } else if (a == "--progress") {
      BT_ASSIGN_OR_RETURN(o.progress, value());
      if (o.progress != "auto" && o.progress != "bar" && o.progress != "lines" &&
          o.progress != "none")
        return bad("--progress: expected auto, bar, lines or none");
    } else if (a == "--no-plot") {
      o.plot = false;
    } else if (a == "--keep-checkpoints") {
      o.keep_checkpoints = true;
    } else if (a == "--overwrite") {
      o.overwrite = true;
    } else if (a == "--dump-batches") {
      BT_ASSIGN_OR_RETURN(o.dump_batches, value());
    } else if (a == "--dump-steps") {
      BT_ASSIGN_OR_RETURN(o.dump_steps, integer(1));
    } else if (a == "--baseline") {
      BT_ASSIGN_OR_RETURN(o.baseline, value());
      if (o.baseline != "torch" && o.baseline != "none")
        return bad("--baseline: expected torch or none");
    } else if (a == "--torch-script") {
      BT_ASSIGN_OR_RETURN(o.torch_script, value());
    } else if (a == "--python") {
      BT_ASSIGN_OR_RETURN(o.python, value());
    } else if (a == "--note") {
      BT_ASSIGN_OR_RETURN(std::string v, value());
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        return bad("--note takes KEY=VALUE");
      o.notes[v.substr(0, eq)] = v.substr(eq + 1);
    } else {
      return bad(absl::StrCat("unexpected argument '", a, "'"));
    }
  }
  if (o.data_paths.empty())
    return bad("missing --data FILE...");
  if (o.output_dir.empty())
    return bad("missing -o DIR");
  if (!have_steps)
    return bad("missing --steps N");
  if (!have_lr_total)
    o.schedule.total_steps = o.steps;
  if (o.baseline == "torch" && o.dump_steps == 0)
    o.dump_steps = std::min<int64_t>(o.steps, 200);
  if (o.baseline == "torch" && o.dump_batches.empty())
    o.dump_batches = o.output_dir + "/batches.safetensors";
  if (!o.dump_batches.empty() && o.dump_steps == 0)
    o.dump_steps = o.steps;
  o.dump_steps = std::min(o.dump_steps, o.steps);
  return o;
}

//===----------------------------------------------------------------------===//
// Held-out loss.
//===----------------------------------------------------------------------===//

namespace {

absl::StatusOr<double> ScalarValue(const TensorMap &outs, const std::string &name) {
  auto it = outs.find(name);
  if (it == outs.end())
    return absl::NotFoundError(absl::StrCat("no output '", name, "'"));
  const Tensor &t = it->second;
  if (t.num_elements() != 1 || t.dtype() != proto::F32)
    return absl::InvalidArgumentError(absl::StrCat(
        "output '", name, "' is ", t.DebugString(), ", expected an F32 scalar"));
  return static_cast<double>(*t.data_as<float>());
}

} // namespace

absl::StatusOr<double> HeldOutLoss(const Model &model, const TensorMap &params,
                                   const std::vector<TensorMap> &batches) {
  double sum = 0;
  int64_t count = 0;
  for (const TensorMap &b : batches) {
    const int64_t n = CountTargets(b);
    if (n == 0)
      continue;
    TensorMap inputs;
    for (const auto &[name, t] : b)
      inputs.emplace(name, t.Share());
    BT_ASSIGN_OR_RETURN(TensorMap outs, model.Run("eval_loss", inputs, nullptr, &params));
    BT_ASSIGN_OR_RETURN(double loss, ScalarValue(outs, "loss"));
    sum += loss * static_cast<double>(n);
    count += n;
  }
  if (count == 0)
    return absl::FailedPreconditionError("the held-out batches have no targets");
  return sum / static_cast<double>(count);
}

//===----------------------------------------------------------------------===//
// Official trainer YAML.
//===----------------------------------------------------------------------===//

namespace {


void StackYaml(std::ostringstream &y, const proto::NeoXConfig &s, int64_t vocab,
               const proto::ModelConfig &c) {
  y << "  config:\n"
    << "    num_hidden_layers: " << s.num_layers() << "\n"
    << "    hidden_size: " << s.hidden_size() << "\n"
    << "    num_attention_heads: " << s.num_heads() << "\n"
    << "    intermediate_size: " << s.intermediate_size() << "\n"
    << "    rotary_pct: " << Num(s.rotary_pct()) << "\n"
    << "    rotary_emb_base: " << Num(s.rotary_base()) << "\n"
    << "    layer_norm_eps: " << Num(s.layer_norm_eps()) << "\n"
    << "    max_position_embeddings: " << s.max_position_embeddings() << "\n"
    << "    hidden_act: " << s.hidden_act() << "\n"
    << "    use_parallel_residual: " << (s.use_parallel_residual() ? "true" : "false") << "\n"
    << "    vocab_size: " << vocab << "\n"
    << "    bos_token_id: " << c.bos_token_id() << "\n"
    << "    eos_token_id: " << c.eos_token_id() << "\n";
}

} // namespace

std::string OfficialTrainerYaml(const proto::ModelConfig &c, const TrainOptions &o,
                                const std::string &tokenizer_note,
                                const CompiledOptimizerSettings &opt) {
  std::ostringstream y;
  y << "# Written by bt train (docs/training.md) in the official trainer YAML form\n"
    << "# (itsnamgyu/block-transformer conf/trainer/*.yaml), every architecture field\n"
    << "# explicit. Weights: model.safetensors (official names, fp32).\n";
  if (!tokenizer_note.empty())
    y << "# Tokenizer: " << tokenizer_note << "\n";
  y << "name: " << (c.name().empty() ? "bt_trained" : c.name()) << "\n\n";
  const int64_t seq = o.seq_len;
  {
    const int64_t L = c.block_length();
    y << "block_length: " << L << "\n"
      << "block_split:\n  distribution: fixed\n  distribution_kwargs:\n    length: " << L << "\n"
      << "total_batch_size: " << o.batch << "\n"
      << "per_device_train_batch_size: " << o.batch << "\n"
      << "max_length: " << seq << "\n"
      << "random_pad_first_block: true\npad_to_block_boundary: true\n"
      << "tokenizer: null\n\n"
      << "embedder:\n  cls: lookup\n  model_name_or_path: null\n"
      << "  n_embedding_tokens: 1\n  use_pretrained_weights: false\n"
      << "  projection_method: "
      << (c.embedder_projection() == proto::ModelConfig::PROJECTION_LAYER
              ? "projection_layer"
              : "concat")
      << "\n  config:\n"
      << "    vocab_size: " << c.vocab_size() << "\n"
      << "    hidden_size: " << c.embedder_width() << "\n\n"
      << "block_decoder:\n  cls: gpt-neo-x\n"
      << "  model_name_or_path: EleutherAI/pythia-410m-deduped\n"
      << "  use_pretrained_weights: false\n  attn_implementation: eager\n";
    StackYaml(y, c.block_decoder(), c.vocab_size(), c);
    y << "\ntoken_decoder:\n  cls: gpt-neo-x\n"
      << "  model_name_or_path: EleutherAI/pythia-410m-deduped\n"
      << "  use_pretrained_weights: false\n"
      << "  expansion_method: expansion_layer\n"
      << "  expansion_ratio: " << c.prefix_length() << "\n"
      << "  decoding_strategy: "
      << (c.strategy() == proto::ModelConfig::SUMMATION ? "summation" : "prefix") << "\n";
    StackYaml(y, c.token_decoder(), c.vocab_size(), c);
    y << "\ntoken_decoding_loss:\n  enable: true\n"
      << "block_decoding_loss:\n  enable: false\n  weight: 1.0\n"
      << "auto_encoding_loss:\n  enable: false\n  weight: 1.0\n";
  }
  y << "\nlearning_rate: " << Num(o.schedule.peak_lr) << "\n"
    << "adam_beta1: " << Num(opt.beta1) << "\n"
    << "adam_beta2: " << Num(opt.beta2) << "\n"
    << "weight_decay: " << Num(opt.weight_decay) << "\n"
    << "precision: fp32\n"
    << "num_train_steps: " << o.schedule.total_steps << "\n"
    << "num_warmup_steps: " << o.schedule.warmup_steps << "\n";
  return y.str();
}

} // namespace bt::rt
