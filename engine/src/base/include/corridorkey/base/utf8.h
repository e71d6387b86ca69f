// The one UTF-8 decoder of the engine's texts: the JSON writer (report_json.cpp) keeps or
// replaces the bytes around it, the terminal escaping (printable_text.cpp) its printables.
#pragma once

#include <cstddef>
#include <string_view>

namespace corridorkey::base {

struct Utf8 {
  std::size_t length = 0;  // 1-4; 0 when the byte at i starts no valid sequence
  unsigned code_point = 0;
};

/// The valid UTF-8 sequence at s[i]. Overlong forms, surrogates and code points above
/// U+10FFFF are not valid.
inline Utf8 utf8_at(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return {1, c};
  std::size_t n = 0;
  unsigned cp = 0;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1Fu;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0Fu;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07u;
  else return {};
  if (i + n > s.size()) return {};
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return {};
    cp = (cp << 6) | (b(i + k) & 0x3Fu);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
    return {};
  return {n, cp};
}

}  // namespace corridorkey::base
