//===- tokenizer.h - SentencePiece tokenizers -------------------*- C++ -*-===//
//
// The tokenizer of an artifact (its tokenizer section: a serialized
// SentencePiece ModelProto, docs/abi.md), for `generate --prompt`.
//
// libsentencepiece is available on Debian only as a shared library
// (libsentencepiece.so.0), and the standalone executable links everything
// else statically (its own libstdc++ included). The runtime therefore embeds
// a tiny shim shared object (runtime/src/spm/spm_shim.cc, a C interface over
// libsentencepiece) and loads it from memory with dlopen the first time a
// tokenizer is needed: binaries have no link-time dependency on
// libsentencepiece, everything but `--prompt` works without it, and with
// it installed (Debian/Ubuntu package libsentencepiece0) prompts work in
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

namespace bt::rt {

class Tokenizer {
public:
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

  /// Token ids of `text` (no BOS/EOS added).
  absl::StatusOr<std::vector<int64_t>> Encode(absl::string_view text) const;
  /// Text of `ids`; ids outside [0, vocab_size()) are skipped.
  absl::StatusOr<std::string> Decode(absl::Span<const int64_t> ids) const;
  /// Number of pieces of the model.
  int64_t vocab_size() const { return vocab_size_; }
  /// The model's EOS id (-1 if it has none), and its UNK id.
  int64_t eos_id() const { return eos_id_; }
  int64_t unk_id() const { return unk_id_; }

private:
  Tokenizer() = default;
  void *handle_ = nullptr;
  int64_t vocab_size_ = 0;
  int64_t eos_id_ = -1;
  int64_t unk_id_ = 0;
};

} // namespace bt::rt

#endif // BT_RUNTIME_TOKENIZER_H
