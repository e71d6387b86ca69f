#include "event_stream.h"

#include "commands.h"

#include <corridorkey/errors.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <unistd.h>

namespace corridorkey::cli {
namespace {

/// Length of the valid UTF-8 sequence at s[i] (1-4), or 0 when the byte starts none
/// (overlong forms, surrogates and code points above U+10FFFF are not valid).
size_t utf8_sequence(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
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
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

void append_string(std::string& out, const std::string& s) {
  out += '"';
  char buf[8];
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (n == 0) {  // not UTF-8: the byte as a lone surrogate (surrogateescape)
      std::snprintf(buf, sizeof buf, "\\udc%02x", c);
      out += buf;
      ++i;
      continue;
    }
    if (n == 1) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) {
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
    } else {
      out.append(s, i, n);
    }
    i += n;
  }
  out += '"';
}

void append(std::string& out, const nlohmann::json& j) {
  if (j.is_string()) {
    append_string(out, j.get_ref<const std::string&>());
  } else if (j.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += ',';
      first = false;
      append_string(out, it.key());
      out += ':';
      append(out, it.value());
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (size_t k = 0; k < j.size(); ++k) {
      if (k) out += ',';
      append(out, j[k]);
    }
    out += ']';
  } else {
    out += j.dump();  // numbers, booleans, null: nlohmann's own text
  }
}

}  // namespace

std::string dump_lossless(const nlohmann::json& j) {
  std::string out;
  append(out, j);
  return out;
}

void EventStream::line(const nlohmann::json& j) {
  if (closed_) return;
  std::fflush(stdout);  // anything printed through stdio stays in order
  const std::string text = dump_lossless(j) + "\n";
  const char* p = text.data();
  size_t n = text.size();
  while (n > 0) {
    const ssize_t k = ::write(STDOUT_FILENO, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      closed_ = true;
      std::fprintf(stderr, "corridorkey: the event stream (stdout) closed (%s): no more events; "
                           "keying goes on\n", k < 0 ? std::strerror(errno) : "no progress");
      return;
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

nlohmann::json error_event(const std::exception& e) {
  std::string kind = "failure";
  int code = kFailure;
  if (dynamic_cast<const ConfigError*>(&e)) kind = "usage", code = kUsage;
  else if (dynamic_cast<const IoError*>(&e)) kind = "input", code = kInput;
  else if (dynamic_cast<const ModelError*>(&e) || dynamic_cast<const DeviceError*>(&e))
    kind = "model", code = kModel;
  return {{"event", "error"}, {"kind", kind}, {"exit_code", code}, {"message", e.what()}};
}

}  // namespace corridorkey::cli
