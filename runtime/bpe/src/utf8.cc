//===- utf8.cc - UTF-8 validation and U+FFFD replacement ------------------===//

#include "bt/bpe/utf8.h"

#include <cstdint>
#include <cstring>

#include "unicode.h"

namespace bt::bpe {
namespace internal {

size_t Utf8SequenceAt(absl::string_view s, size_t i, size_t *subpart) {
  const auto *p = reinterpret_cast<const uint8_t *>(s.data()) + i;
  const size_t n = s.size() - i;
  const uint8_t b0 = p[0];
  if (b0 < 0x80) {
    *subpart = 1;
    return 1;
  }
  // Unicode Table 3-7: the length of the sequence a lead byte starts and the
  // range its first continuation byte must lie in (the others: 80..BF).
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0)
      lo = 0xA0; // no overlong forms
    else if (b0 == 0xED)
      hi = 0x9F; // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0)
      lo = 0x90; // no overlong forms
    else if (b0 == 0xF4)
      hi = 0x8F; // nothing above U+10FFFF
  } else {
    *subpart = 1; // 80..C1, F5..FF never start a sequence
    return 0;
  }
  size_t k = 1;
  for (; k < len && k < n; ++k) {
    const uint8_t lo_k = k == 1 ? lo : 0x80, hi_k = k == 1 ? hi : 0xBF;
    if (p[k] < lo_k || p[k] > hi_k)
      break;
  }
  *subpart = k;
  return k == len ? len : 0;
}

} // namespace internal

size_t FindInvalidUtf8(absl::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    // ASCII fast path, eight bytes at a time.
    if (i + 8 <= bytes.size()) {
      uint64_t w;
      std::memcpy(&w, bytes.data() + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    size_t subpart;
    const size_t len = internal::Utf8SequenceAt(bytes, i, &subpart);
    if (len == 0)
      return i;
    i += len;
  }
  return absl::string_view::npos;
}

std::string ReplaceInvalidUtf8(absl::string_view bytes) {
  size_t bad = FindInvalidUtf8(bytes);
  if (bad == absl::string_view::npos)
    return std::string(bytes);
  std::string out(bytes.substr(0, bad));
  out.reserve(bytes.size() + 16);
  size_t i = bad;
  while (i < bytes.size()) {
    size_t subpart;
    const size_t len = internal::Utf8SequenceAt(bytes, i, &subpart);
    if (len == 0) {
      out += "\xEF\xBF\xBD"; // U+FFFD for the maximal subpart
      i += subpart;
    } else {
      out.append(bytes.data() + i, len);
      i += len;
    }
  }
  return out;
}

} // namespace bt::bpe
