//===- data.h - training data: text → documents → packed blocks --*- C++ -*-===//
//
// The training data pipeline of `train` (docs/training.md):
//
//   text files ──SplitDocuments──► documents (strings)
//              ──TrainSentencePiece (optional)──► SentencePiece model
//              ──TokenizeDocuments──► TokenizedCorpus (ids; EOS NOT stored)
//              ──SplitHeldOut──► train / held-out corpora (whole documents)
//              ──PackedDataset──► samples of `length` tokens with the official
//                                 TokenizedCorpusDataset semantics
//              ──MakeBatch──► input_ids, attention_mask, labels [B, N_blk, L_B],
//                             block_attention_mask [B, N_blk] (I64)
//
// PackedDataset reproduces custom_dataset/tokenized_corpus.py of the official
// repository (itsnamgyu/block-transformer @ 17842dd, block mode with
// random_pad_first_block and pad_to_block_boundary) followed by its
// SplitBlocks(fixed) / AddLabels transforms (util/data_preprocessing.py):
//
//  - document i is laid out in a "padded corpus" as
//      [left_i pads][len_i tokens][EOS][right_i pads]
//    left_i = numpy.random.RandomState(seed).randint(L_B, size=n_docs,
//    dtype=int16)[i] (NumpyRandintInt16 below: bit-exact), right_i pads the
//    padded length up to a multiple of L_B ((L_B - (left+len+1) % L_B) % L_B);
//  - sample k is positions [k·length, (k+1)·length) of the padded corpus;
//    there are floor(padded_total / length) samples (the tail is dropped);
//  - pads have id `pad_token` and mask 0, tokens and EOS mask 1;
//  - official quirks, reproduced: the official walk counts the right padding
//    it has used from 1 at its first position, so it leaves a document one
//    position early and the next document's left padding fills the gap (same
//    ids and masks) — except (a) when a document's right pad is 0 and its EOS
//    is not the last position of its sample: the walk steps back one
//    position and the next document's left padding overwrites the EOS, which
//    becomes a pad (id pad_token, mask 0, label -100; with pad = eos = 0 only
//    the mask and the label change); and (b) when the corpus ends exactly at
//    the end of the last sample and the last document has right padding: the
//    official code raises IndexError on that sample; here it is padded.
//    (runtime/test/official_packing.py follows the walk; it was checked
//    against the official code on 8235 samples of 300 random corpora.)
//  - labels = input_ids where mask = 1, else -100;
//    block_attention_mask[b, n] = any(attention_mask[b, n, :]).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DATA_H
#define BT_RUNTIME_DATA_H

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bt/runtime/exec/model.h"
#include "bt/runtime/model/tokenizer.h"

namespace bt::rt {

//===----------------------------------------------------------------------===//
// numpy's legacy RandomState, as far as the official left pads need it.
//===----------------------------------------------------------------------===//

/// numpy.random.RandomState(seed).randint(high, size=count, dtype=numpy.int16)
/// bit for bit (numpy >= 1.17 legacy path): MT19937 seeded with
/// init_genrand(seed) (= std::mt19937(seed)), values drawn by masked
/// rejection sampling on 16-bit halves of buffered 32-bit outputs (low half
/// first), mask = the smallest 2^k - 1 >= high - 1; high == 1 gives zeros
/// without drawing. Requires 1 <= high <= 32767 (InvalidArgument otherwise).
absl::StatusOr<std::vector<int16_t>> NumpyRandintInt16(uint32_t seed,
                                                       int64_t high,
                                                       int64_t count);

//===----------------------------------------------------------------------===//
// Documents.
//===----------------------------------------------------------------------===//

/// How plain text is cut into documents (each gets an EOS when packed).
enum class DocumentSplit {
  /// Blank-line-separated paragraphs: each paragraph is a document.
  kParagraph,
  /// A paragraph of one line that does not start with whitespace is a
  /// heading; a document is a heading and every paragraph up to the next
  /// heading (paragraphs before the first heading form their own document).
  /// For the KJV of `bible gen1:1-rev22:21` ("Genesis 1", then the chapter):
  /// one document per chapter.
  kHeading,
  /// Every non-blank line is a document.
  kLine,
  /// Every file is one document.
  kFile,
};

/// "paragraph", "heading", "line", "file". Errors: InvalidArgument.
absl::StatusOr<DocumentSplit> ParseDocumentSplit(absl::string_view name);
const char *DocumentSplitName(DocumentSplit split);

/// Cuts `text` into documents. Within a document, the lines of a paragraph
/// are joined with single spaces (hard wraps undone) and paragraphs with a
/// newline; runs of spaces/tabs collapse to one space, and every line is
/// trimmed. Empty documents are dropped. `\r` is treated as whitespace.
std::vector<std::string> SplitDocuments(absl::string_view text,
                                        DocumentSplit split);

/// Reads `paths` in order and splits each (documents never span files).
/// Errors: the file's read error (NotFound etc., naming it).
absl::StatusOr<std::vector<std::string>>
ReadDocuments(const std::vector<std::string> &paths, DocumentSplit split);

//===----------------------------------------------------------------------===//
// SentencePiece training.
//===----------------------------------------------------------------------===//

/// Options of TrainSentencePiece (spm_train's flags of the same names).
struct SentencePieceTrainOptions {
  int64_t vocab_size = 4096;
  /// "unigram" (SentencePiece's default) or "bpe".
  std::string model_type = "unigram";
  double character_coverage = 1.0;
  /// Special ids: EOS 0 (the model's EOS and pad, as pythia's), UNK 1, no
  /// BOS / PAD pieces. Model configs take eos = pad = 0.
  int eos_id = 0;
  int unk_id = 1;
  int bos_id = -1;
  int pad_id = -1;
  /// Sentences longer than this (bytes) are cut into pieces of this size.
  int64_t max_sentence_length = 4192;
  /// Random sample of at most this many sentences (0 = all).
  int64_t input_sentence_size = 0;
  uint32_t seed = 0;
  /// Threads of the trainer.
  int num_threads = 2;
  /// More spm_train flags, appended verbatim ("--split_digits=true ...").
  std::string extra_args;
};

/// The spm_train command line equivalent of `options` (without --input and
/// --model_prefix), as recorded in checkpoints and documentation.
std::string SentencePieceTrainArgs(const SentencePieceTrainOptions &options);

/// Trains a SentencePiece model on `sentences` (SentencePieceTrainer::Train
/// through the runtime's shim, from memory: no files) and returns the
/// serialized ModelProto (what spm_train writes to <prefix>.model).
/// Errors: Unimplemented / FailedPrecondition when SentencePiece is not
/// available (see Tokenizer), InvalidArgument with the trainer's message
/// (e.g. a vocabulary larger than the text supports).
absl::StatusOr<std::string>
TrainSentencePiece(const std::vector<std::string> &sentences,
                   const SentencePieceTrainOptions &options);

/// The sentences TrainSentencePiece should see for `documents`: every
/// non-empty line of every document, cut into pieces of at most
/// `max_sentence_length` bytes at spaces.
std::vector<std::string> SentencesForTokenizer(
    const std::vector<std::string> &documents, int64_t max_sentence_length);

//===----------------------------------------------------------------------===//
// Tokenized corpora.
//===----------------------------------------------------------------------===//

/// Documents as token ids (official TokenizedCorpus): document i is
/// tokens[start[i], start[i] + length[i]); the EOS is added when packing.
struct TokenizedCorpus {
  std::vector<int32_t> tokens;
  std::vector<int64_t> start;
  std::vector<int64_t> length;
  int64_t num_documents() const { return static_cast<int64_t>(start.size()); }
  /// Appends a document.
  void Add(absl::Span<const int32_t> ids);
  /// The documents at `indices` (in that order) as a new corpus.
  TokenizedCorpus Select(absl::Span<const int64_t> indices) const;
  /// FNV-1a hash of the token ids and document lengths (checkpoints record
  /// it so that --resume notices different data).
  uint64_t Fingerprint() const;
};

/// Encodes every document (no BOS/EOS). Errors: the tokenizer's, naming the
/// document index.
absl::StatusOr<TokenizedCorpus>
TokenizeDocuments(const Tokenizer &tokenizer,
                  const std::vector<std::string> &documents);

/// Splits document indices 0..n-1 into (train, held_out): a seeded random
/// permutation (std::mt19937_64(seed), Fisher-Yates from the back, uniform
/// draws by rejection) whose first round(fraction · n) entries — at least 1
/// when fraction > 0 and n >= 2 — are held out; both lists are sorted
/// ascending so that documents keep their order.
std::pair<std::vector<int64_t>, std::vector<int64_t>>
SplitHeldOut(int64_t num_documents, double fraction, uint64_t seed);

/// The official TokenizedCorpusDataset arguments (util/dataset.py: EOS and
/// pad of the tokenizer, block mode, random_pad_first_block and
/// pad_to_block_boundary true, seed 42).
struct PackingOptions {
  int64_t length = 0;       // max_length: tokens per sample, a multiple of L_B
  int64_t block_length = 0; // L_B
  int64_t eos_token = 0;
  int64_t pad_token = 0;
  bool random_pad_first_block = true;
  bool pad_to_block_boundary = true;
  uint32_t seed = 42;
};

/// Samples of a TokenizedCorpus with the official semantics (file comment).
class PackedDataset {
public:
  /// Errors: InvalidArgument for length or block_length < 1, length not a
  /// multiple of block_length, block_length >= 32768 (int16 pads, as the
  /// official code), an empty corpus.
  static absl::StatusOr<PackedDataset> Create(TokenizedCorpus corpus,
                                              PackingOptions options);

  const PackingOptions &options() const { return options_; }
  const TokenizedCorpus &corpus() const { return corpus_; }
  /// Number of samples: floor(padded_total / length).
  int64_t size() const { return size_; }
  int64_t padded_total() const { return padded_start_.back(); }
  const std::vector<int16_t> &left_pads() const { return left_; }
  const std::vector<int16_t> &right_pads() const { return right_; }

  /// Writes sample `index` (0 <= index < size()): ids and mask, `length`
  /// values each.
  void GetSample(int64_t index, int64_t *ids, int64_t *mask) const;

private:
  PackedDataset() = default;
  TokenizedCorpus corpus_;
  PackingOptions options_;
  std::vector<int16_t> left_, right_;
  std::vector<int64_t> padded_start_; // n_docs + 1 entries
  int64_t size_ = 0;
};

/// The batch of samples `indices` of `data`: I64 tensors input_ids,
/// attention_mask, labels [B, N_blk, L_B] and block_attention_mask [B, N_blk]
/// (fixture names, docs/abi.md). Errors: InvalidArgument for an index out of
/// range.
absl::StatusOr<TensorMap> MakeBatch(const PackedDataset &data,
                                    absl::Span<const int64_t> indices);

/// Number of loss targets of a batch (labels of blocks 1..N_blk-1 that are
/// not -100): the weight of its mean loss in a held-out average.
int64_t CountTargets(const TensorMap &batch);

/// The order in which training visits samples: epoch e is a permutation of
/// 0..n-1 drawn with std::mt19937_64(seed + e) (Fisher-Yates as
/// SplitHeldOut), and global position g is sample Perm(g / n)[g % n]. The
/// order is a pure function of (n, seed, g), so a data position is one
/// integer (samples consumed).
class SampleOrder {
public:
  SampleOrder(int64_t num_samples, uint64_t seed);
  int64_t num_samples() const { return n_; }
  /// The sample at global position `g` (>= 0).
  int64_t At(int64_t g);
  /// The epoch of global position g.
  int64_t EpochOf(int64_t g) const { return n_ > 0 ? g / n_ : 0; }

private:
  int64_t n_;
  uint64_t seed_;
  int64_t epoch_ = -1;
  std::vector<int64_t> perm_;
};

/// A seeded uniform permutation of 0..n-1 (the shuffles above).
std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed);

} // namespace bt::rt

#endif // BT_RUNTIME_DATA_H
