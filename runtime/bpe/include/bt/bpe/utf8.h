//===- utf8.h - UTF-8 validation and U+FFFD replacement ---------*- C++ -*-===//
//
// How the BPE tokenizer treats bytes that are not UTF-8. A Hugging Face
// tokenizer works on Unicode strings: text reaches it already decoded, and
// every conformant decoder (Python's bytes.decode(errors="replace"),
// JavaScript's TextDecoder, Rust's String::from_utf8_lossy) replaces each
// *maximal subpart* of an ill-formed sequence with one U+FFFD (Unicode 15,
// §3.9 "U+FFFD Substitution of Maximal Subparts"; WHATWG Encoding, "UTF-8
// decoder"). bt::bpe::Tokenizer::Encode does the same with the bytes it is
// given, so it yields the ids the oracles yield for those bytes decoded that
// way, and Decode turns the bytes of the decoded tokens into text the same
// way (from_utf8_lossy, as the Rust library does).
//
//===----------------------------------------------------------------------===//

#ifndef BT_BPE_UTF8_H
#define BT_BPE_UTF8_H

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace bt::bpe {

/// Byte offset of the first byte of `bytes` that does not start a well-formed
/// UTF-8 sequence (Unicode Table 3-7: no overlong forms, no surrogates
/// U+D800..U+DFFF, nothing above U+10FFFF, no truncated sequence), or
/// absl::string_view::npos if all of `bytes` is well-formed UTF-8.
size_t FindInvalidUtf8(absl::string_view bytes);

/// `bytes` with every maximal subpart of an ill-formed UTF-8 sequence
/// replaced by U+FFFD (EF BF BD): a lead byte followed by the continuation
/// bytes it allows, up to the first that does not fit, counts as one subpart;
/// any other invalid byte (80..BF alone, C0, C1, F5..FF) is one subpart. Text
/// that is already valid is returned unchanged.
std::string ReplaceInvalidUtf8(absl::string_view bytes);

} // namespace bt::bpe

#endif // BT_BPE_UTF8_H
