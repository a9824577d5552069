//===- train_data.cc - the training data of a run -------------------------===//
//
// ReadResumeState and LoadTrainingData (train_internal.h): a resumed run's
// trainer state, and the documents of `bt-run train` read,
// tokenized with the artifact's tokenizer, split into training and held-out
// documents and packed into samples (bt/runtime/train/data.h).
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/tooling/train_internal.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/exec/model.h"
#include "bt/runtime/model/tokenizer.h"
#include "bt/runtime/tooling/progress.h"
#include "bt/runtime/tooling/train.h"

namespace bt::rt::train_internal {

absl::StatusOr<TrainingData> LoadTrainingData(const Model &model,
                                              const TrainOptions &o,
                                              const std::string &resume_ckpt,
                                              const nlohmann::json &resumed,
                                              ProgressDisplay &progress) {
  const proto::ModelConfig &config = model.config();
  const int64_t L = config.block_length();
  const auto t_data = std::chrono::steady_clock::now();
  if (model.artifact().tokenizer().empty())
    return absl::FailedPreconditionError(absl::StrCat(
        model.artifact().path(),
        ": the artifact has no tokenizer (compile with --tokenizer, or let `bt-run "
        "train` train one)"));
  BT_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer,
                      Tokenizer::FromArtifact(model.artifact()));
  const proto::TokenizerKind tokenizer_kind = tokenizer->kind();
  if (tokenizer->eos_id() != config.eos_token_id())
    return absl::InvalidArgumentError(absl::StrCat(
        "train: the tokenizer's EOS id is ", tokenizer->eos_id(), ", the model's is ",
        config.eos_token_id(),
        tokenizer_kind == proto::TOKENIZER_SENTENCEPIECE
            ? absl::StrCat(" (train the tokenizer with --eos_id=", config.eos_token_id(), ")")
            : std::string(" (the config's eos_token_id must be the id of <|endoftext|>)")));
  if (tokenizer->vocab_size() > config.vocab_size())
    return absl::InvalidArgumentError(absl::StrCat(
        "train: the tokenizer has ", tokenizer->vocab_size(),
        " pieces, more than the model's vocab_size ", config.vocab_size()));
  BT_ASSIGN_OR_RETURN(std::vector<std::string> docs, ReadDocuments(o.data_paths, o.split));
  if (docs.size() < 2)
    return absl::InvalidArgumentError(absl::StrCat(
        "train: the data has ", docs.size(), " document(s) (split '",
        DocumentSplitName(o.split), "'); need at least 2"));
  BT_ASSIGN_OR_RETURN(TokenizedCorpus corpus, TokenizeDocuments(*tokenizer, docs));
  auto [train_docs, held_docs] = SplitHeldOut(corpus.num_documents(), o.holdout_fraction, o.seed);
  PackingOptions pack;
  pack.length = o.seq_len;
  pack.block_length = L;
  pack.eos_token = config.eos_token_id();
  pack.pad_token = config.pad_token_id();
  pack.seed = o.pad_seed;
  BT_ASSIGN_OR_RETURN(PackedDataset train, PackedDataset::Create(corpus.Select(train_docs), pack));
  if (train.size() == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "train: the training documents give no sample of ", o.seq_len, " tokens"));
  if (o.batch > static_cast<int64_t>(train.size()))
    return absl::InvalidArgumentError(absl::StrCat(
        "train: --batch ", o.batch, " is larger than the ", train.size(),
        " training samples of ", o.seq_len, " tokens (every batch would repeat samples); use "
        "--batch ", train.size(), " or less, or more data"));
  std::vector<TensorMap> eval_batches;
  int64_t held_samples = 0, eval_targets = 0;
  if (!held_docs.empty()) {
    BT_ASSIGN_OR_RETURN(PackedDataset held, PackedDataset::Create(corpus.Select(held_docs), pack));
    held_samples = held.size();
    const int64_t n = std::min(held.size(), o.eval_batches * o.batch);
    for (int64_t b = 0; b < n; b += o.batch) {
      std::vector<int64_t> idx;
      for (int64_t i = b; i < std::min(n, b + o.batch); ++i)
        idx.push_back(i);
      BT_ASSIGN_OR_RETURN(TensorMap batch, MakeBatch(held, idx));
      eval_targets += CountTargets(batch);
      eval_batches.push_back(std::move(batch));
    }
  }
  const uint64_t train_fp = train.corpus().Fingerprint();
  if (!resumed.is_null() &&
      resumed.value("train_fingerprint", std::string()) != Hex(train_fp))
    return absl::InvalidArgumentError(absl::StrCat(
        "--resume ", resume_ckpt,
        ": the training data differs from the checkpoint's (files, split, holdout, "
        "tokenizer or seed)"));
  progress.Message(absl::StrFormat(
      "data: %d documents (%s) -> %d tokens; train %d docs, %d samples of %d tokens "
      "(%d epochs for %d steps of %d); held out %d docs, %d samples (%d used, %d "
      "targets) [%.1f s]",
      docs.size(), DocumentSplitName(o.split), corpus.tokens.size() + docs.size(),
      train_docs.size(), train.size(), o.seq_len,
      (o.steps * o.batch + train.size() - 1) / train.size(), o.steps, o.batch,
      held_docs.size(), held_samples, std::min(held_samples, o.eval_batches * o.batch),
      eval_targets,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_data).count()));

  return TrainingData{tokenizer_kind, std::move(train), std::move(eval_batches),
                      held_samples, eval_targets, train_fp};
}

/// With --resume: the checkpoint (`resume_ckpt`) and its trainer state
/// (`resumed`), whose data settings must be this run's. Errors:
/// InvalidArgument naming the checkpoint and the setting.
absl::Status ReadResumeState(const TrainOptions &o, std::string &resume_ckpt,
                             nlohmann::json &resumed) {
  if (!o.resume_dir.empty()) {
    BT_ASSIGN_OR_RETURN(resume_ckpt, ResolveCheckpoint(o.resume_dir));
    BT_ASSIGN_OR_RETURN(std::string js, ReadFile(resume_ckpt + "/trainer_state.json"));
    resumed = nlohmann::json::parse(js, nullptr, false);
    if (!resumed.is_object() || !resumed.contains("step") || !resumed["step"].is_number_integer())
      return absl::InvalidArgumentError(
          absl::StrCat(resume_ckpt, "/trainer_state.json: not a trainer state"));
    for (const char *k : {"batch", "seq_len", "seed", "pad_seed"}) {
      const int64_t mine = k == std::string("batch")     ? o.batch
                           : k == std::string("seq_len") ? o.seq_len
                           : k == std::string("seed")    ? static_cast<int64_t>(o.seed)
                                                         : static_cast<int64_t>(o.pad_seed);
      if (resumed.value(k, mine) != mine)
        return absl::InvalidArgumentError(absl::StrCat(
            "--resume ", resume_ckpt, ": the checkpoint was trained with ", k, " ",
            resumed.value(k, mine), ", this run has ", mine,
            " (a resumed run must use the same data settings)"));
    }
    if (!o.dump_batches.empty())
      return absl::InvalidArgumentError(
          "--dump-batches / --baseline need a fresh run (the dump starts at step 1)");
  }

  return absl::OkStatus();
}

} // namespace bt::rt::train_internal
