//===- data.cc - training data: text → documents → packed blocks ----------===//

#include "bt/runtime/train/data.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/status_macros.h"

namespace bt::rt {

//===----------------------------------------------------------------------===//
// numpy legacy randint (int16).
//===----------------------------------------------------------------------===//

absl::StatusOr<std::vector<int16_t>> NumpyRandintInt16(uint32_t seed,
                                                       int64_t high,
                                                       int64_t count) {
  if (high < 1 || high > 32767)
    return absl::InvalidArgumentError(absl::StrCat(
        "randint: high (", high, ") must be in [1, 32767] for int16"));
  if (count < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("randint: count (", count, ") must be >= 0"));
  std::vector<int16_t> out(static_cast<size_t>(count), 0);
  const uint16_t rng = static_cast<uint16_t>(high - 1);
  if (rng == 0)
    return out; // numpy returns `low` without drawing
  uint16_t mask = rng;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  // numpy: init_genrand(seed) — identical to std::mt19937's seeding — and
  // buffered_uint16: a 32-bit draw serves two values, low half first.
  std::mt19937 mt(seed);
  uint32_t buf = 0;
  int bcnt = 0;
  auto next16 = [&]() -> uint16_t {
    if (bcnt == 0) {
      buf = static_cast<uint32_t>(mt());
      bcnt = 1;
    } else {
      buf >>= 16;
      bcnt -= 1;
    }
    return static_cast<uint16_t>(buf);
  };
  for (int64_t i = 0; i < count; ++i) {
    uint16_t v;
    while ((v = static_cast<uint16_t>(next16() & mask)) > rng) {
    }
    out[static_cast<size_t>(i)] = static_cast<int16_t>(v);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Documents.
//===----------------------------------------------------------------------===//

absl::StatusOr<DocumentSplit> ParseDocumentSplit(absl::string_view name) {
  if (name == "paragraph")
    return DocumentSplit::kParagraph;
  if (name == "heading")
    return DocumentSplit::kHeading;
  if (name == "line")
    return DocumentSplit::kLine;
  if (name == "file")
    return DocumentSplit::kFile;
  return absl::InvalidArgumentError(absl::StrCat(
      "document split '", name, "': expected paragraph, heading, line or file"));
}

const char *DocumentSplitName(DocumentSplit split) {
  switch (split) {
  case DocumentSplit::kParagraph:
    return "paragraph";
  case DocumentSplit::kHeading:
    return "heading";
  case DocumentSplit::kLine:
    return "line";
  case DocumentSplit::kFile:
    return "file";
  }
  return "?";
}

namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// Collapses whitespace runs to one space and trims.
std::string NormalizeLine(absl::string_view line) {
  std::string out;
  out.reserve(line.size());
  bool pending_space = false;
  for (char c : line) {
    if (IsSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space)
      out.push_back(' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

struct Paragraph {
  std::string text;     // lines joined with spaces
  int lines = 0;
  bool indented = false; // first line starts with whitespace
};

std::vector<Paragraph> SplitParagraphs(absl::string_view text) {
  std::vector<Paragraph> paragraphs;
  Paragraph cur;
  auto flush = [&] {
    if (cur.lines > 0 && !cur.text.empty())
      paragraphs.push_back(std::move(cur));
    cur = Paragraph();
  };
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::string norm = NormalizeLine(line);
    if (norm.empty()) {
      flush();
      continue;
    }
    if (cur.lines == 0)
      cur.indented = IsSpace(line.front());
    else
      cur.text.push_back(' ');
    cur.text += norm;
    ++cur.lines;
  }
  flush();
  return paragraphs;
}

} // namespace

std::vector<std::string> SplitDocuments(absl::string_view text,
                                        DocumentSplit split) {
  std::vector<std::string> docs;
  if (split == DocumentSplit::kLine) {
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      std::string norm = NormalizeLine(line);
      if (!norm.empty())
        docs.push_back(std::move(norm));
    }
    return docs;
  }
  std::vector<Paragraph> paragraphs = SplitParagraphs(text);
  if (split == DocumentSplit::kParagraph) {
    for (Paragraph &p : paragraphs)
      docs.push_back(std::move(p.text));
    return docs;
  }
  std::string cur;
  auto flush = [&] {
    if (!cur.empty())
      docs.push_back(std::move(cur));
    cur.clear();
  };
  for (Paragraph &p : paragraphs) {
    const bool heading = p.lines == 1 && !p.indented;
    if (split == DocumentSplit::kHeading && heading)
      flush();
    if (!cur.empty())
      cur.push_back('\n');
    cur += p.text;
  }
  flush();
  return docs;
}

absl::StatusOr<std::vector<std::string>>
ReadDocuments(const std::vector<std::string> &paths, DocumentSplit split) {
  std::vector<std::string> docs;
  for (const std::string &path : paths) {
    BT_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    std::vector<std::string> d = SplitDocuments(text, split);
    docs.insert(docs.end(), std::make_move_iterator(d.begin()),
                std::make_move_iterator(d.end()));
  }
  return docs;
}

//===----------------------------------------------------------------------===//
// SentencePiece training (through the tokenizer's shim).
//===----------------------------------------------------------------------===//

std::string SentencePieceTrainArgs(const SentencePieceTrainOptions &o) {
  std::string args = absl::StrFormat(
      "--vocab_size=%d --model_type=%s --character_coverage=%g --eos_id=%d "
      "--unk_id=%d --bos_id=%d --pad_id=%d --max_sentence_length=%d "
      "--input_sentence_size=%d --num_threads=%d --random_seed=%u",
      o.vocab_size, o.model_type, o.character_coverage, o.eos_id, o.unk_id,
      o.bos_id, o.pad_id, o.max_sentence_length, o.input_sentence_size,
      o.num_threads, o.seed);
  if (!o.extra_args.empty())
    absl::StrAppend(&args, " ", o.extra_args);
  return args;
}

std::vector<std::string> SentencesForTokenizer(
    const std::vector<std::string> &documents, int64_t max_sentence_length) {
  std::vector<std::string> out;
  const size_t max_len = static_cast<size_t>(std::max<int64_t>(max_sentence_length, 16));
  for (const std::string &doc : documents) {
    for (absl::string_view line : absl::StrSplit(doc, '\n', absl::SkipEmpty())) {
      while (line.size() > max_len) {
        size_t cut = line.rfind(' ', max_len);
        if (cut == absl::string_view::npos || cut == 0)
          cut = max_len;
        out.emplace_back(line.substr(0, cut));
        line.remove_prefix(std::min(line.size(), cut + 1));
      }
      if (!line.empty())
        out.emplace_back(line);
    }
  }
  return out;
}

// Implemented in tokenizer.cc (it owns the shim).
absl::StatusOr<std::string>
TrainSentencePieceWithShim(const std::string &args,
                           const std::vector<std::string> &sentences);

absl::StatusOr<std::string>
TrainSentencePiece(const std::vector<std::string> &sentences,
                   const SentencePieceTrainOptions &options) {
  if (options.vocab_size < 2)
    return absl::InvalidArgumentError(absl::StrCat(
        "SentencePiece: vocab size ", options.vocab_size, " must be >= 2"));
  if (sentences.empty())
    return absl::InvalidArgumentError("SentencePiece: no text to train on");
  return TrainSentencePieceWithShim(SentencePieceTrainArgs(options), sentences);
}

//===----------------------------------------------------------------------===//
// Tokenized corpora.
//===----------------------------------------------------------------------===//

void TokenizedCorpus::Add(absl::Span<const int32_t> ids) {
  start.push_back(static_cast<int64_t>(tokens.size()));
  length.push_back(static_cast<int64_t>(ids.size()));
  tokens.insert(tokens.end(), ids.begin(), ids.end());
}

TokenizedCorpus TokenizedCorpus::Select(absl::Span<const int64_t> indices) const {
  TokenizedCorpus out;
  for (int64_t i : indices)
    out.Add(absl::MakeConstSpan(tokens.data() + start[i],
                                static_cast<size_t>(length[i])));
  return out;
}

uint64_t TokenizedCorpus::Fingerprint() const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (int64_t l : length)
    mix(static_cast<uint64_t>(l));
  for (int32_t t : tokens)
    mix(static_cast<uint32_t>(t));
  return h;
}

absl::StatusOr<TokenizedCorpus>
TokenizeDocuments(const Tokenizer &tokenizer,
                  const std::vector<std::string> &documents) {
  TokenizedCorpus corpus;
  std::vector<int32_t> ids32;
  for (size_t i = 0; i < documents.size(); ++i) {
    absl::StatusOr<std::vector<int64_t>> ids = tokenizer.Encode(documents[i]);
    if (!ids.ok())
      return absl::Status(ids.status().code(),
                          absl::StrCat("document ", i, ": ", ids.status().message()));
    ids32.assign(ids->begin(), ids->end());
    corpus.Add(ids32);
  }
  return corpus;
}

namespace {

// Uniform in [0, n) by rejection (std::uniform_int_distribution is
// implementation-defined; this is not).
uint64_t UniformBelow(std::mt19937_64 &rng, uint64_t n) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                         std::numeric_limits<uint64_t>::max() % n;
  uint64_t v;
  do {
    v = rng();
  } while (v >= limit);
  return v % n;
}

} // namespace

std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> perm(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i)
    perm[i] = i;
  std::mt19937_64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(UniformBelow(rng, static_cast<uint64_t>(i + 1)));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>>
SplitHeldOut(int64_t n, double fraction, uint64_t seed) {
  int64_t k = static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)));
  if (fraction > 0 && n >= 2)
    k = std::clamp<int64_t>(k, 1, n - 1);
  else
    k = 0;
  std::vector<int64_t> perm = SeededPermutation(n, seed);
  std::vector<int64_t> held(perm.begin(), perm.begin() + k);
  std::vector<int64_t> train(perm.begin() + k, perm.end());
  std::sort(held.begin(), held.end());
  std::sort(train.begin(), train.end());
  return {std::move(train), std::move(held)};
}

absl::StatusOr<PackedDataset> PackedDataset::Create(TokenizedCorpus corpus,
                                                    PackingOptions options) {
  const int64_t L = options.block_length, T = options.length;
  if (L < 1 || T < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "packing: length (", T, ") and block length (", L, ") must be >= 1"));
  if (L >= 32768)
    return absl::InvalidArgumentError(absl::StrCat(
        "packing: block length ", L, " above int16 max is not supported"));
  if (T % L != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "packing: max length (", T, ") must be divisible by block length (", L, ")"));
  if (corpus.num_documents() == 0)
    return absl::InvalidArgumentError("packing: the corpus has no documents");
  PackedDataset d;
  const int64_t n = corpus.num_documents();
  if (options.random_pad_first_block) {
    BT_ASSIGN_OR_RETURN(d.left_, NumpyRandintInt16(options.seed, L, n));
  } else {
    d.left_.assign(static_cast<size_t>(n), 0);
  }
  d.right_.assign(static_cast<size_t>(n), 0);
  d.padded_start_.assign(static_cast<size_t>(n + 1), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t padded = corpus.length[i] + d.left_[i] + 1;
    if (options.pad_to_block_boundary)
      d.right_[i] = static_cast<int16_t>((L - padded % L) % L);
    d.padded_start_[i + 1] = d.padded_start_[i] + padded + d.right_[i];
  }
  d.size_ = d.padded_start_.back() / T;
  d.corpus_ = std::move(corpus);
  d.options_ = options;
  return d;
}

void PackedDataset::GetSample(int64_t index, int64_t *ids, int64_t *mask) const {
  const int64_t T = options_.length;
  const int64_t begin = index * T;
  // The document holding position `begin` (official: searchsorted right - 1).
  int64_t d = static_cast<int64_t>(std::upper_bound(padded_start_.begin(),
                                                    padded_start_.end(), begin) -
                                   padded_start_.begin()) - 1;
  for (int64_t s = 0; s < T; ++s) {
    const int64_t p = begin + s;
    while (p >= padded_start_[d + 1])
      ++d;
    const int64_t off = p - padded_start_[d] - left_[d];
    const int64_t len = corpus_.length[d];
    if (off >= 0 && off < len) {
      ids[s] = corpus_.tokens[corpus_.start[d] + off];
      mask[s] = 1;
    } else if (off == len &&
               !(options_.pad_to_block_boundary && right_[d] == 0 && s != T - 1)) {
      ids[s] = options_.eos_token;
      mask[s] = 1;
    } else {
      // Left/right padding, or an EOS the official walk overwrites (quirk).
      ids[s] = options_.pad_token;
      mask[s] = 0;
    }
  }
}

absl::StatusOr<TensorMap> MakeBatch(const PackedDataset &data,
                                    absl::Span<const int64_t> indices) {
  const int64_t B = static_cast<int64_t>(indices.size());
  const int64_t T = data.options().length, L = data.options().block_length;
  const int64_t N = T / L;
  BT_ASSIGN_OR_RETURN(Tensor ids, Tensor::Allocate(proto::I64, {B, N, L}));
  BT_ASSIGN_OR_RETURN(Tensor mask, Tensor::Allocate(proto::I64, {B, N, L}));
  BT_ASSIGN_OR_RETURN(Tensor labels, Tensor::Allocate(proto::I64, {B, N, L}));
  BT_ASSIGN_OR_RETURN(Tensor block_mask, Tensor::Allocate(proto::I64, {B, N}));
  for (int64_t b = 0; b < B; ++b) {
    if (indices[b] < 0 || indices[b] >= data.size())
      return absl::InvalidArgumentError(absl::StrCat(
          "batch: sample ", indices[b], " out of range [0, ", data.size(), ")"));
    int64_t *id = ids.data_as<int64_t>() + b * T;
    int64_t *m = mask.data_as<int64_t>() + b * T;
    int64_t *lab = labels.data_as<int64_t>() + b * T;
    data.GetSample(indices[b], id, m);
    for (int64_t s = 0; s < T; ++s)
      lab[s] = m[s] ? id[s] : -100;
    int64_t *bm = block_mask.data_as<int64_t>() + b * N;
    for (int64_t n = 0; n < N; ++n) {
      bm[n] = 0;
      for (int64_t l = 0; l < L; ++l)
        bm[n] |= m[n * L + l];
    }
  }
  TensorMap batch;
  batch.emplace("input_ids", std::move(ids));
  batch.emplace("attention_mask", std::move(mask));
  batch.emplace("labels", std::move(labels));
  batch.emplace("block_attention_mask", std::move(block_mask));
  return batch;
}

int64_t CountTargets(const TensorMap &batch) {
  const Tensor &labels = batch.at("labels");
  const int64_t B = labels.dim(0), N = labels.dim(1), L = labels.dim(2);
  const int64_t *p = labels.data_as<int64_t>();
  int64_t count = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = L; i < N * L; ++i)
      count += p[b * N * L + i] != -100;
  return count;
}

SampleOrder::SampleOrder(int64_t num_samples, uint64_t seed)
    : n_(num_samples), seed_(seed) {}

int64_t SampleOrder::At(int64_t g) {
  const int64_t epoch = g / n_;
  if (epoch != epoch_) {
    perm_ = SeededPermutation(n_, seed_ + static_cast<uint64_t>(epoch));
    epoch_ = epoch;
  }
  return perm_[g % n_];
}

} // namespace bt::rt
