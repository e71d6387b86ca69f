// One field table per options struct: each row knows its YAML key, flag, help, allowed
// values, parser and printer. Profiles, job files, the CLI flags, to_yaml and every
// validation message come from these rows; defaults come from the struct's initialisers
// (a row prints `T{}` to show them). Torch-free.
#pragma once

#include <corridorkey/check.h>
#include <corridorkey/option_fields.h>

#include <functional>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

namespace corridorkey::config {

/// Strict text parsers shared by every row: the whole string must parse; reals must be
/// finite (NaN / Inf are refused); integers must fit in 64 bits.
bool parse_bool(const std::string& text, bool& out);
bool parse_int(const std::string& text, long long& out);
bool parse_real(const std::string& text, double& out);
std::string format_real(double v);
/// "flash-attention" -> "flash_attention".
std::string normalise_key(std::string key);
/// ASCII lower case: option values are read in any case ("FLOAT32", "True").
std::string lower_case(std::string text);
/// "flash_attention" -> "--flash-attention".
std::string flag_of(const std::string& key);

template <class T>
struct Field {
  OptionInfo info;
  std::function<bool(T&, const std::string&)> parse;  // false: the value is not allowed
  std::function<std::string(const T&)> format;
};

template <class T>
class Table {
 public:
  explicit Table(std::vector<Field<T>> rows) : rows_(std::move(rows)) {
    const T defaults{};
    for (auto& r : rows_) r.info.default_value = r.format(defaults);
  }

  const Field<T>* find(const std::string& key) const {
    const auto k = normalise_key(key);
    for (const auto& r : rows_)
      if (r.info.key == k) return &r;
    return nullptr;
  }

  /// Sets `key` from text; ConfigError "<source>: key 'k': invalid value 'v' (expected ...)"
  /// or "<source>: unknown key 'k' (known keys: ...)".
  void set(T& obj, const std::string& key, const std::string& value,
           const std::string& source) const {
    const auto* f = find(key);
    CK_CHECK(f, ConfigError, source, ": unknown key '", key, "' (known keys: ", known_keys(), ")");
    CK_CHECK(f->parse(obj, value), ConfigError, source, ": key '", f->info.key,
             "': invalid value '", value, "' (expected ", f->info.allowed, ")");
  }

  std::string get(const T& obj, const std::string& key) const {
    const auto* f = find(key);
    CK_CHECK(f, ConfigError, "unknown key '", key, "'");
    return f->format(obj);
  }

  std::vector<OptionInfo> info() const {
    std::vector<OptionInfo> v;
    for (const auto& r : rows_) v.push_back(r.info);
    return v;
  }

  std::string known_keys() const {
    std::string s;
    for (const auto& r : rows_) s += (s.empty() ? "" : ", ") + r.info.key;
    return s;
  }

  const std::vector<Field<T>>& rows() const { return rows_; }

 private:
  std::vector<Field<T>> rows_;
};

// ---- row builders -----------------------------------------------------------------------
// Each takes the member of the struct that declares it (B: ModelOptions or EngineSettings for
// a Profile's rows, the struct itself otherwise), so a row knows its owner and its half from
// the type.

template <class B>
constexpr OptionOwner owner_of() {
  if constexpr (std::is_same_v<B, ModelOptions>) return OptionOwner::Model;
  else if constexpr (std::is_same_v<B, EngineSettings>) return OptionOwner::Engine;
  else return OptionOwner::Inference;
}

/// The half of `o` a member of B lives in: a Profile's `model` or `engine`, or `o` itself
/// (the InferenceOptions table, and tables over one half).
template <class B, class T>
auto& part(T& o) {
  if constexpr (std::is_same_v<std::remove_const_t<T>, Profile> && std::is_same_v<B, ModelOptions>) return o.model;
  else if constexpr (std::is_same_v<std::remove_const_t<T>, Profile> && std::is_same_v<B, EngineSettings>) return o.engine;
  else return o;
}

/// The owner fields of a row built for member class B.
template <class B, class T>
Field<T> owned(Field<T> f) {
  f.info.owner = owner_of<B>();
  f.info.in_model_key = f.info.owner == OptionOwner::Model;
  return f;
}

/// A ModelOptions field that the first Model applies to the whole process.
template <class T>
Field<T> process_wide(Field<T> f) {
  f.info.process_wide = true;
  f.info.in_model_key = false;
  return f;
}

/// A ModelOptions field that does not change the weights a Model holds (mmap) or names
/// another Model (checkpoint_blue).
template <class T>
Field<T> outside_model_key(Field<T> f) {
  f.info.in_model_key = false;
  return f;
}

template <class T, class B = T>
Field<T> switch_row(const char* key, OptionScope scope, bool B::*m, const char* help) {
  Field<T> f;
  f.info = {key, scope, help, "true or false", "", true, {}, {}, OptionKind::Switch};
  f.parse = [m](T& o, const std::string& v) { return parse_bool(v, part<B>(o).*m); };
  f.format = [m](const T& o) { return std::string(part<B>(o).*m ? "true" : "false"); };
  return owned<B>(f);
}

/// Integer in [lo, hi] (and `ok` when given); `allowed` describes it in messages.
template <class T, class I, class B = T>
Field<T> int_row(const char* key, OptionScope scope, I B::*m, long long lo, long long hi,
                 const char* help, std::string allowed = "",
                 std::function<bool(long long)> ok = nullptr) {
  if (allowed.empty())
    allowed = "an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
  Field<T> f;
  f.info = {key, scope, help, allowed, "", false, {}, {}, OptionKind::Integer};
  f.parse = [m, lo, hi, ok](T& o, const std::string& v) {
    long long x = 0;
    if (!parse_int(v, x) || x < lo || x > hi || (ok && !ok(x))) return false;
    part<B>(o).*m = static_cast<I>(x);
    return true;
  };
  f.format = [m](const T& o) { return std::to_string(part<B>(o).*m); };
  return owned<B>(f);
}

/// Finite real accepted by `ok`; stored times `store_scale` (e.g. despill 0..10 -> 0..1).
template <class T, class B = T>
Field<T> real_row(const char* key, OptionScope scope, double B::*m, std::function<bool(double)> ok,
                  const char* help, const char* allowed, double store_scale = 1.0) {
  Field<T> f;
  f.info = {key, scope, help, allowed, "", false, {}, {}, OptionKind::Real};
  f.parse = [m, ok, store_scale](T& o, const std::string& v) {
    double x = 0;
    if (!parse_real(v, x) || !ok(x)) return false;
    part<B>(o).*m = x * store_scale;
    return true;
  };
  f.format = [m, store_scale](const T& o) { return format_real(part<B>(o).*m / store_scale); };
  return owned<B>(f);
}

/// One of named values. The first name given for a value is the one printed; later names
/// for the same value are accepted spellings (fp16 for float16).
template <class T, class E, class B = T>
Field<T> choice_row(const char* key, OptionScope scope, E B::*m,
                    std::vector<std::pair<std::string, E>> names, const char* help) {
  std::string allowed, seen;
  std::vector<E> printed;
  for (const auto& [n, e] : names) {
    bool first = true;
    for (auto p : printed) first = first && !(p == e);
    if (!first) continue;
    printed.push_back(e);
    allowed += (allowed.empty() ? "" : ", ") + n;
  }
  Field<T> f;
  f.info = {key, scope, help, "one of " + allowed, "", false, {}, {}, OptionKind::Choice};
  f.parse = [m, names](T& o, const std::string& v) {
    // Case-insensitive, as the hosts' own settings are (FLOAT32, Float32): a value means
    // one thing whatever its case; every name here is lower case.
    const std::string low = lower_case(v);
    for (const auto& [n, e] : names)
      if (low == n) {
        part<B>(o).*m = e;
        return true;
      }
    return false;
  };
  f.format = [m, names](const T& o) {
    for (const auto& [n, e] : names)
      if (part<B>(o).*m == e) return n;
    return std::string("?");
  };
  return owned<B>(f);
}

/// Free text accepted by `ok` (always, when null).
template <class T, class B = T>
Field<T> text_row(const char* key, OptionScope scope, std::string B::*m, const char* help,
                  const char* allowed, std::function<bool(const std::string&)> ok = nullptr) {
  Field<T> f;
  f.info = {key, scope, help, allowed, "", false, {}, {}};
  f.parse = [m, ok](T& o, const std::string& v) {
    if (ok && !ok(v)) return false;
    part<B>(o).*m = v;
    return true;
  };
  f.format = [m](const T& o) { return part<B>(o).*m; };
  return owned<B>(f);
}

/// A file or folder path (OptionInfo::is_path): free text, checked when it is opened.
template <class T, class B = T>
Field<T> path_row(const char* key, OptionScope scope, std::string B::*m, const char* help, const char* allowed) {
  auto f = text_row<T, B>(key, scope, m, help, allowed);
  f.info.is_path = true;
  return f;
}

/// Adds value-taking flag spellings (e.g. --precision for model_precision).
template <class T>
Field<T> with_aliases(Field<T> f, std::vector<std::string> aliases) {
  f.info.aliases = std::move(aliases);
  return f;
}

/// Adds flags that set a fixed value (e.g. --linear = color linear).
template <class T>
Field<T> with_shortcuts(Field<T> f, std::vector<std::pair<std::string, std::string>> s) {
  f.info.shortcuts = std::move(s);
  return f;
}

}  // namespace corridorkey::config
