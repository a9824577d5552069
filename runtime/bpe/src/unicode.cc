//===- unicode.cc - White_Space, NFC (utf8proc), PCRE2 ---------------------===//

#include "unicode.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

namespace bt::bpe::internal {
namespace {

// PropList.txt, White_Space (ranges, inclusive).
constexpr char32_t kWhiteSpace[][2] = {
    {0x0009, 0x000D}, {0x0020, 0x0020}, {0x0085, 0x0085}, {0x00A0, 0x00A0},
    {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
    {0x205F, 0x205F}, {0x3000, 0x3000},
};

} // namespace

void AppendUtf8(std::string &out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool IsWhiteSpace(char32_t c) {
  for (const auto &r : kWhiteSpace)
    if (c >= r[0] && c <= r[1])
      return true;
  return false;
}

std::string WhiteSpaceClassBody() {
  std::string s;
  for (const auto &r : kWhiteSpace) {
    absl::StrAppendFormat(&s, "\\x{%x}", static_cast<uint32_t>(r[0]));
    if (r[1] != r[0])
      absl::StrAppendFormat(&s, "-\\x{%x}", static_cast<uint32_t>(r[1]));
  }
  return s;
}

absl::StatusOr<std::string> Nfc(absl::string_view text) {
  // Lead bytes >= 0xCC start the code points >= U+0300. Every code point
  // below U+0300 has NFC_Quick_Check=Yes and is a starter, so text made of
  // them only is already in NFC.
  bool needed = false;
  for (char ch : text)
    if (static_cast<uint8_t>(ch) >= 0xCC) {
      needed = true;
      break;
    }
  if (!needed)
    return std::string(text);
  utf8proc_uint8_t *out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t *>(text.data()),
      static_cast<utf8proc_ssize_t>(text.size()), &out,
      static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0)
    return absl::InternalError(
        absl::StrCat("NFC normalization (utf8proc) failed: ", utf8proc_errmsg(n)));
  std::string s(reinterpret_cast<const char *>(out), static_cast<size_t>(n));
  std::free(out);
  return s;
}

struct Regex::Code {
  pcre2_code *code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(Regex &&) noexcept = default;
Regex &Regex::operator=(Regex &&) noexcept = default;
Regex::~Regex() = default;

absl::StatusOr<Regex> Regex::Compile(const std::string &pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  Regex r;
  r.code_ = std::make_unique<Code>();
  r.code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                                pattern.size(), PCRE2_UTF, &error, &offset, nullptr);
  if (r.code_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot compile the regular expression '", pattern, "' at offset ", offset,
        ": ", reinterpret_cast<const char *>(message)));
  }
  // Without JIT support (PCRE2_ERROR_JIT_BADOPTION) the interpreter runs.
  (void)pcre2_jit_compile(r.code_->code, PCRE2_JIT_COMPLETE);
  return r;
}

namespace {

struct MatchData {
  explicit MatchData(const pcre2_code *code)
      : data(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(data); }
  pcre2_match_data *data;
};

absl::Status MatchError(int rc) {
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(rc, message, sizeof(message));
  return absl::InternalError(absl::StrCat("PCRE2 match failed: ",
                                          reinterpret_cast<const char *>(message)));
}

} // namespace

absl::Status Regex::ForEachMatch(absl::string_view subject,
                                 absl::FunctionRef<void(size_t, size_t)> fn) const {
  MatchData md(code_->code);
  if (md.data == nullptr)
    return absl::InternalError("PCRE2: out of memory");
  const auto *s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  while (pos <= subject.size()) {
    const int rc = pcre2_match(code_->code, s, subject.size(), pos,
                               PCRE2_NO_UTF_CHECK, md.data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH)
      break;
    if (rc < 0)
      return MatchError(rc);
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md.data);
    fn(ov[0], ov[1]);
    if (ov[1] > ov[0]) {
      pos = ov[1];
    } else {
      if (ov[1] >= subject.size())
        break;
      size_t subpart;
      size_t len = Utf8SequenceAt(subject, ov[1], &subpart);
      pos = ov[1] + (len == 0 ? 1 : len);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Regex::MatchesAt(absl::string_view subject, size_t offset) const {
  MatchData md(code_->code);
  if (md.data == nullptr)
    return absl::InternalError("PCRE2: out of memory");
  const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(subject.data()),
                             subject.size(), offset, PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED,
                             md.data, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH)
    return false;
  if (rc < 0)
    return MatchError(rc);
  return true;
}

} // namespace bt::bpe::internal
