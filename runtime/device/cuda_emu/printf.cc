// CUDA's device printf on the emulated device (bt_emu_vprintf,
// bt_emu_abi.h): the kernels' vprintf calls, formatted on the host and
// printed to stderr with the block and thread that printed.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "bt_emu_abi.h"

extern "C" {

__attribute__((visibility("default"))) int32_t
bt_emu_vprintf(BtEmuThread *pub, const char *format, const void *args) {
  // CUDA's vprintf: arguments packed with natural alignment, floats as
  // doubles.
  const char *p = static_cast<const char *>(args);
  size_t off = 0;
  int32_t count = 0;
  auto take = [&](size_t n) {
    off = (off + n - 1) / n * n;
    const char *at = p + off;
    off += n;
    ++count;
    return at;
  };
  std::string out;
  char piece[512];
  for (const char *f = format; *f != '\0';) {
    if (*f != '%') {
      out.push_back(*f++);
      continue;
    }
    if (f[1] == '%') {
      out.push_back('%');
      f += 2;
      continue;
    }
    const char *start = f++;
    while (*f != '\0' && std::strchr("-+ #0123456789.", *f) != nullptr)
      ++f;
    int longs = 0;
    while (*f == 'l' || *f == 'h' || *f == 'z') {
      longs += *f == 'l' || *f == 'z';
      ++f;
    }
    const char conv = *f != '\0' ? *f++ : 'd';
    std::string spec(start, f);
    if (std::strchr("diuxXoc", conv) != nullptr) {
      long long v = 0;
      if (longs > 0)
        std::memcpy(&v, take(8), 8);
      else {
        int32_t x;
        std::memcpy(&x, take(4), 4);
        v = conv == 'd' || conv == 'i' ? x : static_cast<uint32_t>(x);
      }
      std::string s = spec.substr(0, spec.size() - 1);
      s.erase(std::remove_if(s.begin(), s.end(),
                             [](char ch) { return ch == 'l' || ch == 'h' ||
                                                  ch == 'z'; }),
              s.end());
      std::snprintf(piece, sizeof piece, (s + "ll" + conv).c_str(), v);
    } else if (std::strchr("feEgGaA", conv) != nullptr) {
      double v;
      std::memcpy(&v, take(8), 8);
      std::snprintf(piece, sizeof piece, spec.c_str(), v);
    } else if (conv == 'p' || conv == 's') {
      const void *v;
      std::memcpy(&v, take(8), 8);
      if (conv == 'p')
        std::snprintf(piece, sizeof piece, "%p", v);
      else
        std::snprintf(piece, sizeof piece, "%s", static_cast<const char *>(v));
    } else {
      std::snprintf(piece, sizeof piece, "%s", spec.c_str());
    }
    out += piece;
  }
  std::string where = "";
  if (pub != nullptr) {
    const int32_t *s = pub->sreg;
    std::snprintf(piece, sizeof piece, "[block (%d, %d, %d) thread (%d, %d, %d)] ",
                  s[BT_EMU_SREG_CTAID_X], s[BT_EMU_SREG_CTAID_Y],
                  s[BT_EMU_SREG_CTAID_Z], s[BT_EMU_SREG_TID_X],
                  s[BT_EMU_SREG_TID_Y], s[BT_EMU_SREG_TID_Z]);
    where = piece;
  }
  std::fprintf(stderr, "bt cuda-emu: printf %s%s", where.c_str(), out.c_str());
  return count;
}

} // extern "C"
