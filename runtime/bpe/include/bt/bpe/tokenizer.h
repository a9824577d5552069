//===- tokenizer.h - byte-level BPE tokenizers (tokenizer.json) -*- C++ -*-===//
//
// The tokenizer of GPT-2 and of GPT-NeoX / Pythia (the tokenizer of every
// released Block Transformer checkpoint): a byte-level BPE read from a Hugging
// Face `tokenizer.json`, encoding and decoding exactly as Hugging Face's
// `tokenizers` library (Rust) does. A library of its own: it depends on
// abseil, nlohmann-json, PCRE2 (the pre-tokenizer's regular expression) and
// utf8proc (NFC), not on the rest of the bt runtime.
//
// Supported tokenizer.json (anything else is rejected at load with an error
// naming the JSON field):
//   model           BPE: vocab, merges ("a b" strings or ["a", "b"] pairs),
//                   unk_token, fuse_unk, byte_fallback, ignore_merges;
//                   dropout null or 0; continuing_subword_prefix and
//                   end_of_word_suffix null or "".
//   normalizer      null, NFC, or a Sequence of those.
//   pre_tokenizer   ByteLevel (add_prefix_space, use_regex; trim_offsets
//                   only affects offsets), alone or as the one element of a
//                   Sequence.
//   decoder         ByteLevel.
//   post_processor  null or ByteLevel (neither adds tokens).
//   added_tokens    matched before pre-tokenization with the Rust library's
//                   rules: leftmost-longest, special-or-not tokens with
//                   normalized=false on the raw text, those with
//                   normalized=true on the normalized text, single_word
//                   (no \w character next to the match), lstrip / rstrip
//                   (the match absorbs White_Space on that side).
//   truncation, padding  null.
//
// Encoding (Rust `Tokenizer::encode(text, add_special_tokens=false)`):
//   1. invalid UTF-8 -> U+FFFD per maximal subpart (bt/bpe/utf8.h);
//   2. split on added tokens with normalized=false;
//   3. each other piece: NFC (if the normalizer says so), then split on added
//      tokens with normalized=true;
//   4. each other piece: ByteLevel pre-tokenizer: a leading space if
//      add_prefix_space and the piece does not start with one, then the GPT-2
//      regex 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|
//      \s+(?!\S)|\s+ with \s = the Unicode White_Space property (as in
//      Oniguruma and Rust's regex crate);
//   5. each pre-token: its UTF-8 bytes as GPT-2's byte-level characters, then
//      BPE: repeatedly merge the adjacent pair with the lowest merge rank
//      (leftmost first among equal ranks).
// Unicode data: PCRE2's (\p{L}, \p{N}: Unicode 14 in Debian 12's PCRE2
// 10.42) and utf8proc's (NFC: Unicode 15 in 2.8); the Rust library's differ
// only for characters assigned in the newest Unicode versions.
//
// Sources: huggingface/tokenizers (tokenizers/src/{models/bpe,
// pre_tokenizers/byte_level.rs, tokenizer/added_vocabulary.rs,
// decoders/byte_level.rs}); openai/gpt-2 src/encoder.py (bytes_to_unicode,
// the regex); EleutherAI/gpt-neox-20b tokenizer.json (Pythia's tokenizer).
//
//===----------------------------------------------------------------------===//

#ifndef BT_BPE_TOKENIZER_H
#define BT_BPE_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace bt::bpe {

/// One entry of tokenizer.json's "added_tokens" (Rust `AddedToken` + id).
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false; ///< only where no \w character touches it
  bool lstrip = false;      ///< absorbs the White_Space to its left
  bool rstrip = false;      ///< absorbs the White_Space to its right
  bool normalized = true;   ///< matched on the normalized text
  bool special = true;      ///< dropped by Decode with skip_special_tokens
};

class Tokenizer {
public:
  /// Parses the text of a tokenizer.json. Errors (InvalidArgument) start with
  /// `source` (a path, for messages) and name the JSON field: malformed JSON
  /// (with its byte offset), a missing or mistyped field, an unsupported
  /// component or option, a merge whose parts or result are not in the
  /// vocabulary, duplicate ids, an added token whose id disagrees with the
  /// vocabulary, a byte that no token (nor unk_token / byte_fallback) can
  /// encode.
  static absl::StatusOr<std::unique_ptr<Tokenizer>>
  FromJson(absl::string_view json, absl::string_view source = "tokenizer.json");
  /// Reads and parses the file at `path` (NotFound / PermissionDenied etc.
  /// naming the path if it cannot be read).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::string &path);

  ~Tokenizer();
  Tokenizer(const Tokenizer &) = delete;
  Tokenizer &operator=(const Tokenizer &) = delete;

  /// Token ids of `text` (any bytes; invalid UTF-8 is replaced first, see
  /// bt/bpe/utf8.h), in [0, vocab_size()). No BOS/EOS is added (the
  /// supported post-processors add none). Thread-safe. Errors: Internal if
  /// PCRE2 or utf8proc fail (out of memory).
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const;

  /// The bytes the ByteLevel decoder makes of `ids`: each token's byte-level
  /// characters as bytes (a token with any other character, e.g. an added
  /// token "  ", as its own UTF-8), concatenated. May end inside a UTF-8
  /// sequence (for streaming). skip_special_tokens drops added tokens with
  /// special=true. Errors: InvalidArgument naming the position of an id that
  /// is no token.
  absl::StatusOr<std::string> DecodeBytes(absl::Span<const int32_t> ids,
                                          bool skip_special_tokens = false) const;
  /// DecodeBytes made valid UTF-8 by ReplaceInvalidUtf8, as the Rust
  /// library's decode (String::from_utf8_lossy). Decode(Encode(x)) == x for
  /// valid UTF-8 x when nothing rewrites the text: no normalizer change (NFC
  /// recomposes decomposed text), no add_prefix_space, no lstrip/rstrip
  /// added token, no unk_token; for invalid x, ReplaceInvalidUtf8(x) under
  /// the same conditions.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens = false) const;

  /// 1 + the largest id of the vocabulary and the added tokens. Ids below it
  /// that name no token (gaps) make Decode fail.
  int32_t vocab_size() const;
  /// The id of a token string (an added token's content or a vocabulary
  /// entry, in byte-level characters: "Ġthe"), if any.
  std::optional<int32_t> TokenToId(absl::string_view token) const;
  /// The token string of an id, if it names one.
  std::optional<absl::string_view> IdToToken(int32_t id) const;
  /// The added tokens, in tokenizer.json order.
  absl::Span<const AddedToken> added_tokens() const;

  class Impl;

private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace bt::bpe

#endif // BT_BPE_TOKENIZER_H
