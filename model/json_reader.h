// A small strict JSON reader for the one JSON file model/ reads: a checkpoint's config.json.
// Own code rather than a JSON library so model/ builds against LibTorch alone (the GPU
// check machine has no -dev packages; CMake option CK_MODEL_ONLY). Bounded: nesting depth
// 32, text length 1 MiB; malformed text is a ModelError naming the source and the offset.
// Fuzzed through tests/fuzz/fuzz_config_json.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace corridorkey::model::json {

struct Value {
  enum class Kind { Null, Bool, Int, Float, String, Array, Object };
  Kind kind = Kind::Null;
  bool b = false;
  int64_t i = 0;   // Int: integer literals that fit in 64 bits
  double f = 0;    // Float: every other number (and Int's value as a double)
  std::string s;
  std::vector<Value> items;                            // Array
  // Object, in file order. Two vectors rather than vector<pair<string, Value>>: a pair of
  // the still-incomplete Value is ill-formed (clang + libstdc++ 12 reject it).
  std::vector<std::string> keys;
  std::vector<Value> values;

  const Value* find(const std::string& key) const;
  /// The value as JSON text, shortened to `max` characters (for messages).
  std::string text(size_t max = 80) const;
};

/// What a document is called in messages and how long it may be.
struct Limits {
  const char* what = "config.json";
  size_t max_text = size_t{1} << 20;  // 1 MiB: config.json
};

/// Parses one JSON document. ModelError "<source>: <what> ..." when malformed.
Value parse(const std::string& text, const std::string& source, const Limits& limits = {});

/// `s` safe to print in a message: control bytes, DEL and every byte >= 0x80 as \xNN (a
/// file's names must not drive the user's terminal), cut to `max` characters.
std::string printable(const std::string& s, size_t max = 200);

/// JSON string literal of `s` (quotes and escapes), for writers.
std::string quote(const std::string& s);

}  // namespace corridorkey::model::json
