//===- tokenizer.h - SentencePiece and tokenizer.json tokenizers -*- C++ -*-===//
//
// The tokenizer of an artifact (its tokenizer section, docs/abi.md), for
// `generate --prompt` and `train`: either a serialized SentencePiece
// ModelProto (the tokenizers `bt-run train` trains) or a Hugging Face
// tokenizer.json with a byte-level BPE (GPT-2; GPT-NeoX / Pythia, the
// tokenizer of the released Block Transformer checkpoints), which the
// runtime's own library bt_bpe (runtime/bpe) encodes. The manifest's
// tokenizer_kind says which.
//
// SentencePiece:
// libsentencepiece is available on Debian only as a shared library
// (libsentencepiece.so.0), and the standalone executable links everything
// else statically (its own libstdc++ included). The runtime therefore embeds
// a tiny shim shared object (runtime/src/spm/spm_shim.cc, a C interface over
// libsentencepiece) and loads it from memory with dlopen the first time a
// tokenizer is needed: binaries have no link-time dependency on
// libsentencepiece, everything but SentencePiece prompts works without it,
// and with it installed (Debian/Ubuntu package libsentencepiece0) prompts work in
// bt-run and in standalone executables alike.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_TOKENIZER_H
#define BT_RUNTIME_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bt/proto/bt.pb.h"

namespace bt::bpe {
class Tokenizer;
}

namespace bt::rt {

class Artifact;

/// The format of tokenizer bytes (a file given to --tokenizer): text whose
/// first non-blank character is '{' is a tokenizer.json, anything else is
/// taken for a SentencePiece model proto (a protobuf never starts with '{'
/// or blanks: its first byte is a field tag).
proto::TokenizerKind DetectTokenizerKind(absl::string_view bytes);
/// "SentencePiece" or "tokenizer.json", for messages.
const char *TokenizerKindName(proto::TokenizerKind kind);
/// The file a run directory or checkpoint keeps the tokenizer in:
/// "tokenizer.model" (SentencePiece) or "tokenizer.json".
const char *TokenizerFileName(proto::TokenizerKind kind);

class Tokenizer {
public:
  /// Loads tokenizer bytes of `kind` (LoadSentencePiece or LoadHfJson).
  static absl::StatusOr<std::unique_ptr<Tokenizer>>
  Load(proto::TokenizerKind kind, absl::string_view bytes);
  /// The tokenizer section of `artifact` (its manifest's tokenizer_kind).
  /// Errors: FailedPrecondition if it has none (naming the artifact and how
  /// to add one), then Load's.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromArtifact(const Artifact &artifact);
  /// Parses a Hugging Face tokenizer.json (bt/bpe/tokenizer.h: byte-level
  /// BPE; any other model or option is an InvalidArgument naming the JSON
  /// field). Invalid UTF-8 in text to encode is replaced by U+FFFD.
  static absl::StatusOr<std::unique_ptr<Tokenizer>>
  LoadHfJson(absl::string_view json);

  /// Loads a serialized SentencePiece model (SentencePieceProcessor::
  /// LoadFromSerializedProto). Errors: Unimplemented if this runtime was
  /// built without SentencePiece; FailedPrecondition if libsentencepiece.so.0
  /// cannot be loaded (the message says which package provides it);
  /// InvalidArgument for bytes that are not a SentencePiece model.
  static absl::StatusOr<std::unique_ptr<Tokenizer>>
  LoadSentencePiece(absl::string_view model_proto);

  ~Tokenizer();
  Tokenizer(const Tokenizer &) = delete;
  Tokenizer &operator=(const Tokenizer &) = delete;

  proto::TokenizerKind kind() const {
    return bpe_ ? proto::TOKENIZER_HF_JSON : proto::TOKENIZER_SENTENCEPIECE;
  }
  /// Token ids of `text` (no BOS/EOS added).
  absl::StatusOr<std::vector<int64_t>> Encode(absl::string_view text) const;
  /// Text of `ids`; ids that name no token (outside [0, vocab_size()), a
  /// model may have more; or a gap in a tokenizer.json's ids) are skipped.
  absl::StatusOr<std::string> Decode(absl::Span<const int64_t> ids) const;
  /// Number of pieces of the model (tokenizer.json: 1 + the largest id).
  int64_t vocab_size() const { return vocab_size_; }
  /// The model's EOS id (-1 if it has none; tokenizer.json: the id of
  /// "<|endoftext|>", GPT-2's and Pythia's EOS), and its UNK id (-1: none).
  int64_t eos_id() const { return eos_id_; }
  int64_t unk_id() const { return unk_id_; }

private:
  Tokenizer();
  std::unique_ptr<bpe::Tokenizer> bpe_; ///< set for TOKENIZER_HF_JSON
  void *handle_ = nullptr;              ///< SentencePiece (the shim's)
  int64_t vocab_size_ = 0;
  int64_t eos_id_ = -1;
  int64_t unk_id_ = 0;
};

} // namespace bt::rt

#endif // BT_RUNTIME_TOKENIZER_H
