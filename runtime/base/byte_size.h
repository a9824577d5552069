// bt/runtime/base/byte_size.h - byte sizes as people write them.
//
// The one parser of "80GiB"-style sizes, shared by the runtime (ParseByteSize
// in bt/runtime/model/kv_plan.h: bench --memory) and the compiler
// (bt::parseByteSize in include/bt/Transforms/KVPlan.h: bt-plan-kv-memory's
// memory option, bt-run plan --memory). Header-only and standard C++ only, like
// param_names.h, so that the compiler includes it without linking the runtime.

#ifndef BT_RUNTIME_BASE_BYTE_SIZE_H
#define BT_RUNTIME_BASE_BYTE_SIZE_H

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace bt::rt {

/// Parses a byte size: "80GiB", "80G" and "80 GiB" are binary (80 * 2^30),
/// "80GB" decimal (80 * 10^9), a plain number is bytes; units K, M, G, T, P
/// (also KiB/KB, ..., any case), fractions allowed ("1.5TiB"), surrounding
/// blanks ignored. Returns nullopt for anything else, a negative size or
/// one over 9e18 bytes.
inline std::optional<int64_t> ParseByteSizeText(std::string_view text) {
  auto blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)); };
  while (!text.empty() && blank(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && blank(text.back()))
    text.remove_suffix(1);
  size_t end = 0;
  while (end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.'))
    ++end;
  if (end == 0)
    return std::nullopt;
  const std::string number(text.substr(0, end));
  char *parsed_end = nullptr;
  const double value = std::strtod(number.c_str(), &parsed_end);
  if (parsed_end != number.c_str() + number.size() || !(value >= 0))
    return std::nullopt;
  std::string_view unit_text = text.substr(end);
  while (!unit_text.empty() && blank(unit_text.front()))
    unit_text.remove_prefix(1);
  std::string unit;
  for (char c : unit_text)
    unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  double scale = 1;
  if (!unit.empty()) {
    static const char kPrefixes[] = "kmgtp";
    const char *p = unit[0] == '\0' ? nullptr : std::strchr(kPrefixes, unit[0]);
    if (p == nullptr)
      return std::nullopt;
    const std::string rest = unit.substr(1);
    double base = 0;
    if (rest.empty() || rest == "ib" || rest == "i")
      base = 1024.0;
    else if (rest == "b")
      base = 1000.0;
    else
      return std::nullopt;
    scale = std::pow(base, static_cast<int>(p - kPrefixes) + 1);
  }
  const double total = value * scale;
  if (total > 9.0e18)
    return std::nullopt;
  return static_cast<int64_t>(total);
}

} // namespace bt::rt

#endif // BT_RUNTIME_BASE_BYTE_SIZE_H
