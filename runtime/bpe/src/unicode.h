//===- unicode.h - UTF-8, White_Space, NFC, PCRE2 (internal) ----*- C++ -*-===//
//
// The Unicode pieces of the tokenizer: decoding of (already valid) UTF-8,
// the White_Space property the Rust library's \s means, NFC through
// utf8proc, and a small PCRE2 wrapper (UTF mode, JIT) for the pre-tokenizer
// regex and the \w test of single_word added tokens.
//
//===----------------------------------------------------------------------===//

#ifndef BT_BPE_SRC_UNICODE_H
#define BT_BPE_SRC_UNICODE_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace bt::bpe::internal {

/// The well-formed UTF-8 sequence starting at s[i]: its length, or 0 if the
/// bytes there are ill-formed; *subpart = the length of the maximal subpart
/// (bytes that belong to the sequence's start), >= 1. Requires i < s.size().
size_t Utf8SequenceAt(absl::string_view s, size_t i, size_t *subpart);

/// The code point of the valid UTF-8 sequence at s[i] and its length.
inline char32_t DecodeUtf8(absl::string_view s, size_t i, size_t *len) {
  const auto *p = reinterpret_cast<const uint8_t *>(s.data()) + i;
  if (p[0] < 0x80) {
    *len = 1;
    return p[0];
  }
  if (p[0] < 0xE0) {
    *len = 2;
    return (char32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (p[0] < 0xF0) {
    *len = 3;
    return (char32_t(p[0] & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  *len = 4;
  return (char32_t(p[0] & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
         (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

/// The start of the code point that ends at s[end - 1] (s valid UTF-8).
inline size_t PreviousCodePoint(absl::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80)
    --i;
  return i;
}

/// Appends the UTF-8 of code point `c`.
void AppendUtf8(std::string &out, char32_t c);

/// The Unicode White_Space property (PropList.txt, unchanged since Unicode
/// 6.3): the \s of Oniguruma and of Rust's regex crate, which the Rust
/// library's regexes use. Not JavaScript's \s (which adds U+FEFF and lacks
/// U+0085).
bool IsWhiteSpace(char32_t c);
/// The same set as the body of a PCRE2 character class ("\x{9}-\x{d}...").
std::string WhiteSpaceClassBody();

/// NFC of valid UTF-8 text (utf8proc, UTF8PROC_STABLE | UTF8PROC_COMPOSE).
/// Text without code points >= U+0300 is returned as is (it is in NFC:
/// they all have NFC_Quick_Check=Yes and are starters). Errors: Internal (out of memory).
absl::StatusOr<std::string> Nfc(absl::string_view text);

/// A compiled PCRE2 pattern (UTF mode, JIT when available), immutable and
/// usable from several threads at once.
class Regex {
public:
  /// Errors: InvalidArgument with PCRE2's message and the offset.
  static absl::StatusOr<Regex> Compile(const std::string &pattern);
  Regex(Regex &&) noexcept;
  Regex &operator=(Regex &&) noexcept;
  ~Regex();

  /// Calls fn(begin, end) for each successive non-overlapping match in
  /// `subject` (valid UTF-8), left to right (an empty match advances by one
  /// code point). Errors: Internal for a PCRE2 failure (resource limits).
  absl::Status ForEachMatch(absl::string_view subject,
                            absl::FunctionRef<void(size_t, size_t)> fn) const;
  /// Whether the pattern matches `subject` starting exactly at `offset`.
  absl::StatusOr<bool> MatchesAt(absl::string_view subject, size_t offset) const;

private:
  Regex() = default;
  struct Code;
  std::unique_ptr<Code> code_;
};

} // namespace bt::bpe::internal

#endif // BT_BPE_SRC_UNICODE_H
