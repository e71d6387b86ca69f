// printable_text (tune.h): the one escaping of texts that files bring to a terminal (plan
// keys and reasons read from a cache or an imported file).
#include <corridorkey/tune.h>

#include <cstdio>

CORRIDORKEY_NAMESPACE_BEGIN

namespace {
/// Length of the valid UTF-8 sequence at s[i] (2-4) of a code point that is not a C1 control,
/// or 0: overlong forms, surrogates, code points above U+10FFFF and U+0080-U+009F (C1: some
/// terminals act on U+009B as on ESC [) are escaped byte by byte.
size_t utf8_printable(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = 0;
  unsigned cp = 0;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1Fu;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0Fu;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07u;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3Fu);
  }
  if ((n == 2 && cp < 0xA0) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}
}  // namespace

std::string printable_text(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (const size_t n = c >= 0x80 ? utf8_printable(s, i) : 0; n > 0) {
      out.append(s, i, n);
      i += n;
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
      ++i;
    }
  }
  return out;
}

CORRIDORKEY_NAMESPACE_END
