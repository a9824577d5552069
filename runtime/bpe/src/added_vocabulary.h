//===- added_vocabulary.h - splitting on added tokens (internal) -*- C++ -*-===//
//
// Finding tokenizer.json's added tokens in text before pre-tokenization, as
// the Rust library's AddedVocabulary::find_matches does: leftmost-longest
// matches (its Aho-Corasick automaton with MatchKind::LeftmostLongest),
// single_word, lstrip and rstrip.
//
// Source: huggingface/tokenizers tokenizers/src/tokenizer/added_vocabulary.rs.
//
//===----------------------------------------------------------------------===//

#ifndef BT_BPE_SRC_ADDED_VOCABULARY_H
#define BT_BPE_SRC_ADDED_VOCABULARY_H

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "bt/bpe/tokenizer.h"
#include "unicode.h"

namespace bt::bpe::internal {

/// A piece of text: an added token (token >= 0, an index into the added
/// tokens) or text to tokenize further (token == -1). [begin, end) in bytes.
struct Split {
  size_t begin, end;
  int token;
};

/// The added tokens matched on one kind of text (raw or normalized).
class AddedTokenMatcher {
public:
  /// Adds `pattern` (non-empty) for added token `index`. A pattern that is
  /// already there keeps its first token.
  void Add(absl::string_view pattern, int index);
  bool empty() const { return terminal_.size() <= 1 && terminal_[0] < 0; }

  /// Rust find_matches: the splits of `text` (covering it, in order, empty
  /// ones left out). `tokens` are the added tokens (for their options);
  /// `word` matches one \w character (needed if any token is single_word).
  absl::Status FindMatches(absl::string_view text, const std::vector<AddedToken> &tokens,
                           const Regex *word, std::vector<Split> &out) const;

private:
  /// The longest pattern that starts at text[i]: its length (0: none).
  size_t LongestAt(absl::string_view text, size_t i, int *index) const;

  std::bitset<256> first_bytes_;
  absl::flat_hash_map<uint64_t, int32_t> next_; ///< (node << 8 | byte) -> node
  std::vector<int> terminal_ = {-1};            ///< node -> token index or -1
};

} // namespace bt::bpe::internal

#endif // BT_BPE_SRC_ADDED_VOCABULARY_H
