//===- added_vocabulary.cc - splitting on added tokens ---------------------===//

#include "added_vocabulary.h"

#include <algorithm>

namespace bt::bpe::internal {
namespace {

uint64_t EdgeKey(int32_t node, uint8_t byte) {
  return (static_cast<uint64_t>(node) << 8) | byte;
}

/// Whether the code point at text[i] is a \w character (Rust regex: Unicode
/// Alphabetic, M, Nd, Pc, Join_Control).
absl::StatusOr<bool> IsWordAt(const Regex &word, absl::string_view text, size_t i) {
  return word.MatchesAt(text, i);
}

} // namespace

void AddedTokenMatcher::Add(absl::string_view pattern, int index) {
  int32_t node = 0;
  for (char ch : pattern) {
    const uint8_t b = static_cast<uint8_t>(ch);
    auto [it, inserted] = next_.try_emplace(EdgeKey(node, b), static_cast<int32_t>(terminal_.size()));
    if (inserted)
      terminal_.push_back(-1);
    node = it->second;
  }
  if (terminal_[node] < 0)
    terminal_[node] = index;
  first_bytes_.set(static_cast<uint8_t>(pattern[0]));
}

size_t AddedTokenMatcher::LongestAt(absl::string_view text, size_t i, int *index) const {
  int32_t node = 0;
  size_t best = 0;
  for (size_t j = i; j < text.size(); ++j) {
    auto it = next_.find(EdgeKey(node, static_cast<uint8_t>(text[j])));
    if (it == next_.end())
      break;
    node = it->second;
    if (terminal_[node] >= 0) {
      best = j + 1 - i;
      *index = terminal_[node];
    }
  }
  return best;
}

absl::Status AddedTokenMatcher::FindMatches(absl::string_view text,
                                            const std::vector<AddedToken> &tokens,
                                            const Regex *word,
                                            std::vector<Split> &out) const {
  out.clear();
  size_t start_offset = 0;
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    if (!first_bytes_.test(static_cast<uint8_t>(text[i]))) {
      ++i;
      continue;
    }
    int index = -1;
    const size_t len = LongestAt(text, i, &index);
    if (len == 0) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + len;
    i = stop; // the automaton goes on after the match, kept or not
    const AddedToken &t = tokens[index];
    if (t.single_word) {
      bool word_before = false, word_after = false;
      if (start > 0) {
        absl::StatusOr<bool> w = IsWordAt(*word, text, PreviousCodePoint(text, start));
        if (!w.ok())
          return w.status();
        word_before = *w;
      }
      if (stop < n) {
        absl::StatusOr<bool> w = IsWordAt(*word, text, stop);
        if (!w.ok())
          return w.status();
        word_after = *w;
      }
      if (word_before || word_after)
        continue; // not a single word
    }
    if (t.lstrip) {
      size_t s = start;
      while (s > 0) {
        const size_t p = PreviousCodePoint(text, s);
        size_t l;
        if (!IsWhiteSpace(DecodeUtf8(text, p, &l)))
          break;
        s = p;
      }
      // Spaces a previous match absorbed (rstrip) stay with it.
      start = std::max(s, start_offset);
    }
    if (t.rstrip) {
      while (stop < n) {
        size_t l;
        if (!IsWhiteSpace(DecodeUtf8(text, stop, &l)))
          break;
        stop += l;
      }
    }
    // A match inside white space that the previous token absorbed (rstrip):
    // the Rust library would emit that text twice; it is dropped here.
    if (stop <= start_offset)
      continue;
    start = std::max(start, start_offset);
    if (start_offset < start)
      out.push_back({start_offset, start, -1});
    out.push_back({start, stop, index});
    start_offset = stop;
  }
  if (start_offset < n)
    out.push_back({start_offset, n, -1});
  return absl::OkStatus();
}

} // namespace bt::bpe::internal
