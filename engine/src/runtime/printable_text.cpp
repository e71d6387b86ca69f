// printable_text (tune.h): the one escaping of texts that files bring to a terminal (plan
// keys and reasons read from a cache or an imported file).
#include <corridorkey/base/utf8.h>
#include <corridorkey/tune.h>

#include <cstdio>

CORRIDORKEY_NAMESPACE_BEGIN

namespace {
/// Length of the valid UTF-8 sequence at s[i] (2-4) of a code point that is not a C1 control,
/// or 0: overlong forms, surrogates, code points above U+10FFFF and U+0080-U+009F (C1: some
/// terminals act on U+009B as on ESC [) are escaped byte by byte.
size_t utf8_printable(const std::string& s, size_t i) {
  const auto u = base::utf8_at(s, i);
  return u.length >= 2 && u.code_point >= 0xA0 ? u.length : 0;
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
