//===- bpe_model.h - byte-level BPE merges (internal) -----------*- C++ -*-===//
//
// The "model" step of the tokenizer: the ids of one pre-token. Works on the
// pre-token's raw bytes: GPT-2's byte-level alphabet maps each byte to one
// character (bytes_to_unicode), so the character string the Rust library
// tokenizes and the bytes are in one-to-one correspondence, and the initial
// symbols are the ids of the bytes' characters.
//
// Source: huggingface/tokenizers tokenizers/src/models/bpe/{model.rs
// (merge_word, tokenize), word.rs (merge_all)}.
//
//===----------------------------------------------------------------------===//

#ifndef BT_BPE_SRC_BPE_MODEL_H
#define BT_BPE_SRC_BPE_MODEL_H

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace bt::bpe::internal {

/// GPT-2's bytes_to_unicode (openai/gpt-2 src/encoder.py): the printable
/// character that stands for each byte in byte-level token strings.
const std::array<char32_t, 256> &ByteLevelChars();
/// The bytes a token string stands for if it is made of byte-level
/// characters only (nullopt otherwise).
std::optional<std::string> ByteLevelToBytes(absl::string_view token);

class BpeModel {
public:
  struct Options {
    std::optional<int32_t> unk_id; ///< model.unk_token
    bool fuse_unk = false;         ///< consecutive unknown bytes -> one unk
    bool byte_fallback = false;    ///< unknown -> <0xHH> tokens
    bool ignore_merges = false;    ///< a pre-token in the vocabulary stays whole
  };

  /// One merge rule as ids: left + right -> merged.
  struct MergeIds {
    int32_t left, right, merged;
  };

  /// `vocab`: token string -> id; `merges`: the rules in rank order (the
  /// caller resolved their strings in `vocab`). A repeated pair keeps its
  /// last rank (as the Rust library's HashMap does).
  BpeModel(const absl::flat_hash_map<std::string, int32_t> &vocab,
           const std::vector<MergeIds> &merges, const Options &options);

  /// Whether byte `b` can be encoded (as its character, by byte fallback or
  /// as unk).
  bool CanEncodeByte(uint8_t b) const;

  /// Appends the ids of one pre-token (raw bytes, non-empty). Thread-safe.
  void Encode(absl::string_view piece, std::vector<int32_t> &out) const;

private:
  void Merge(absl::string_view piece, std::vector<int32_t> &out) const;

  struct MergeInfo {
    int32_t rank;
    int32_t new_id;
  };
  std::array<int32_t, 256> byte_id_;                  ///< -1: not in the vocabulary
  std::array<std::vector<int32_t>, 256> byte_fallback_; ///< <0xHH> ids of the char
  absl::flat_hash_map<uint64_t, MergeInfo> merges_;   ///< (left << 32 | right)
  absl::flat_hash_map<std::string, int32_t> whole_;   ///< ignore_merges: bytes -> id
  Options options_;

  // Pre-tokens seen before (at most kCacheCapacity, then cleared), as the
  // Rust library's cache: words repeat, and BPE is the expensive part.
  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kMaxCachedLength = 256;
  mutable std::mutex cache_mutex_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_;
};

} // namespace bt::bpe::internal

#endif // BT_BPE_SRC_BPE_MODEL_H
