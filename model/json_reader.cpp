#include "json_reader.h"

#include <corridorkey/check.h>

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace corridorkey::model::json {
namespace {

constexpr int kMaxDepth = 32;

class Parser {
 public:
  Parser(const std::string& t, const std::string& source, const Limits& limits)
      : t_(t), source_(source), limits_(limits) {}

  Value document() {
    CK_CHECK(t_.size() <= limits_.max_text, ModelError, source_, ": ", limits_.what,
             " is larger than ", limits_.max_text, " bytes");
    Value v = value(0);
    ws();
    if (p_ != t_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw ModelError(source_ + ": " + limits_.what + " is not valid JSON at offset " +
                     std::to_string(p_) + ": " + why);
  }
  void ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
  }
  bool eat(char c) {
    ws();
    if (p_ < t_.size() && t_[p_] == c) return ++p_, true;
    return false;
  }
  bool word(const char* w) {
    const std::string s(w);
    if (t_.compare(p_, s.size(), s) != 0) return false;
    p_ += s.size();
    return true;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) fail("nested deeper than 32 levels");
    ws();
    if (p_ >= t_.size()) fail("unexpected end");
    Value v;
    const char c = t_[p_];
    if (c == '{') {
      ++p_;
      v.kind = Value::Kind::Object;
      if (eat('}')) return v;
      do {
        ws();
        if (p_ >= t_.size() || t_[p_] != '"') fail("expected a string key");
        std::string key = string();
        if (!eat(':')) fail("expected ':'");
        Value member = value(depth + 1);
        v.keys.push_back(std::move(key));
        v.values.push_back(std::move(member));
      } while (eat(','));
      if (!eat('}')) fail("expected ',' or '}'");
    } else if (c == '[') {
      ++p_;
      v.kind = Value::Kind::Array;
      if (eat(']')) return v;
      do v.items.push_back(value(depth + 1));
      while (eat(','));
      if (!eat(']')) fail("expected ',' or ']'");
    } else if (c == '"') {
      v.kind = Value::Kind::String;
      v.s = string();
    } else if (word("true")) {
      v.kind = Value::Kind::Bool;
      v.b = true;
    } else if (word("false")) {
      v.kind = Value::Kind::Bool;
    } else if (word("null")) {
      v.kind = Value::Kind::Null;
    } else {
      number(v);
    }
    return v;
  }

  std::string string() {
    ++p_;  // opening quote
    std::string s;
    while (true) {
      if (p_ >= t_.size()) fail("unterminated string");
      const char c = t_[p_++];
      if (c == '"') return s;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        s += c;
        continue;
      }
      if (p_ >= t_.size()) fail("unterminated escape");
      const char e = t_[p_++];
      switch (e) {
        case '"': case '\\': case '/': s += e; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'n': s += '\n'; break;
        case 'r': s += '\r'; break;
        case 't': s += '\t'; break;
        case 'u': {
          if (p_ + 4 > t_.size()) fail("short \\u escape");
          unsigned code = 0;
          for (int k = 0; k < 4; ++k) {
            const char h = t_[p_++];
            code <<= 4;
            if (h >= '0' && h <= '9') code |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f') code |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') code |= static_cast<unsigned>(h - 'A' + 10);
            else fail("bad \\u escape");
          }
          // config.json keys and arch names are ASCII; keep others as UTF-8 (BMP only).
          if (code < 0x80) {
            s += static_cast<char>(code);
          } else if (code < 0x800) {
            s += static_cast<char>(0xC0 | (code >> 6));
            s += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            s += static_cast<char>(0xE0 | (code >> 12));
            s += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            s += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  void number(Value& v) {
    const size_t start = p_;
    bool integer = true;
    if (p_ < t_.size() && t_[p_] == '-') ++p_;
    if (p_ >= t_.size() || !(t_[p_] >= '0' && t_[p_] <= '9')) fail("expected a value");
    while (p_ < t_.size() && ((t_[p_] >= '0' && t_[p_] <= '9') || t_[p_] == '.' || t_[p_] == 'e' ||
                              t_[p_] == 'E' || t_[p_] == '+' || t_[p_] == '-')) {
      if (t_[p_] == '.' || t_[p_] == 'e' || t_[p_] == 'E') integer = false;
      ++p_;
    }
    const std::string lit = t_.substr(start, p_ - start);
    // from_chars, not strtod: JSON numbers use '.', whatever locale the host process set.
    const char* end = lit.data() + lit.size();
    double f = 0;
    const auto rf = std::from_chars(lit.data(), end, f, std::chars_format::general);
    // Out of range (1e999) is refused like a non-finite value, as strtod's inf was.
    if (rf.ec != std::errc() || rf.ptr != end || !std::isfinite(f))
      fail("bad number '" + lit.substr(0, 40) + "'");
    v.kind = Value::Kind::Float;
    v.f = f;
    if (integer) {
      long long i = 0;
      const auto ri = std::from_chars(lit.data(), end, i, 10);
      if (ri.ec == std::errc() && ri.ptr == end) {
        v.kind = Value::Kind::Int;
        v.i = i;
      }
    }
  }

  const std::string& t_;
  const std::string& source_;
  const Limits& limits_;
  size_t p_ = 0;
};

}  // namespace

const Value* Value::find(const std::string& key) const {
  for (size_t k = 0; k < keys.size(); ++k)
    if (keys[k] == key) return &values[k];
  return nullptr;
}

std::string printable(const std::string& s, size_t max) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= max) return out + "...";
    if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string quote(const std::string& s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      q += '\\';
      q += static_cast<char>(c);
    } else if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      q += "\\u00";
      q += hex[c >> 4];
      q += hex[c & 15];
    } else {
      q += static_cast<char>(c);
    }
  }
  return q + "\"";
}

std::string Value::text(size_t max) const {
  std::string s;
  switch (kind) {
    case Kind::Null: s = "null"; break;
    case Kind::Bool: s = b ? "true" : "false"; break;
    case Kind::Int: s = std::to_string(i); break;
    case Kind::Float: s = std::to_string(f); break;
    case Kind::String: s = quote(this->s); break;
    case Kind::Array:
      s = "[";
      for (size_t k = 0; k < items.size() && s.size() < max; ++k) s += (k ? ", " : "") + items[k].text(max);
      s += "]";
      break;
    case Kind::Object:
      s = "{";
      for (size_t k = 0; k < keys.size() && s.size() < max; ++k)
        s += (k ? ", " : "") + quote(keys[k]) + ": " + values[k].text(max);
      s += "}";
      break;
  }
  return s.size() > max ? s.substr(0, max) + "..." : s;
}

Value parse(const std::string& text, const std::string& source, const Limits& limits) {
  return Parser(text, source, limits).document();
}

}  // namespace corridorkey::model::json
