#include "torch_pickle.h"

#include <corridorkey/check.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace corridorkey::model::pickle {
namespace {

// ---- the allow-list ---------------------------------------------------------------------

enum GlobalId : int {
  kNotAllowed = 0,
  kOrderedDict,
  kSet,
  kFrozenSet,
  kBytearray,
  kCodecsEncode,        // protocol 2 writes bytes as _codecs.encode(str, 'latin1')
  kRebuildTensor,       // torch._utils._rebuild_tensor (pre-1.0 files)
  kRebuildTensorV2,
  kRebuildTensorV3,     // dtypes without a legacy <X>Storage class: untyped storage + dtype
  kRebuildParameter,
  kRebuildParameterWithState,
  kRebuildFromTypeV2,   // tensors / Parameters carrying Python attributes
  kParameter,
  kTensorType,
  kSize,
  kDevice,
  kStorageType,         // torch.FloatStorage, ..., torch.UntypedStorage (dtype Byte)
  kDtype,               // torch.float32, ...
  kJitIdentity,         // torch.jit._pickle.restore_type_tag(value, type)
  kJitList,             // torch.jit._pickle.build_intlist(list), ...
  kTorchScriptClass,    // __torch__.* (TorchScript archives only)
};

const std::unordered_map<std::string, c10::ScalarType>& storage_types() {
  using S = c10::ScalarType;
  static const std::unordered_map<std::string, S> m{
      {"FloatStorage", S::Float},    {"DoubleStorage", S::Double},
      {"HalfStorage", S::Half},      {"BFloat16Storage", S::BFloat16},
      {"LongStorage", S::Long},      {"IntStorage", S::Int},
      {"ShortStorage", S::Short},    {"CharStorage", S::Char},
      {"ByteStorage", S::Byte},      {"BoolStorage", S::Bool},
      {"ComplexFloatStorage", S::ComplexFloat}, {"ComplexDoubleStorage", S::ComplexDouble},
      {"UntypedStorage", S::Byte}};
  return m;
}

const std::unordered_map<std::string, c10::ScalarType>& dtype_names() {
  using S = c10::ScalarType;
  static const std::unordered_map<std::string, S> m{
      {"float32", S::Float},      {"float", S::Float},         {"float64", S::Double},
      {"double", S::Double},      {"float16", S::Half},        {"half", S::Half},
      {"bfloat16", S::BFloat16},  {"int8", S::Char},           {"uint8", S::Byte},
      {"int16", S::Short},        {"short", S::Short},         {"int32", S::Int},
      {"int", S::Int},            {"int64", S::Long},          {"long", S::Long},
      {"bool", S::Bool},          {"complex64", S::ComplexFloat}, {"cfloat", S::ComplexFloat},
      {"complex128", S::ComplexDouble}, {"cdouble", S::ComplexDouble},
      {"uint16", S::UInt16},      {"uint32", S::UInt32},       {"uint64", S::UInt64},
      {"float8_e4m3fn", S::Float8_e4m3fn}, {"float8_e5m2", S::Float8_e5m2},
      {"float8_e4m3fnuz", S::Float8_e4m3fnuz}, {"float8_e5m2fnuz", S::Float8_e5m2fnuz}};
  return m;
}

/// Which allowed global module.name is (kNotAllowed otherwise); dtype for storages / dtypes.
int classify_global(const std::string& mod, const std::string& name, bool torchscript,
                    c10::ScalarType& dtype) {
  static const std::unordered_map<std::string, int> fixed{
      {"collections.OrderedDict", kOrderedDict},
      {"builtins.set", kSet},
      {"__builtin__.set", kSet},
      {"builtins.frozenset", kFrozenSet},
      {"__builtin__.frozenset", kFrozenSet},
      {"builtins.bytearray", kBytearray},
      {"__builtin__.bytearray", kBytearray},
      {"_codecs.encode", kCodecsEncode},
      {"torch._utils._rebuild_tensor", kRebuildTensor},
      {"torch._utils._rebuild_tensor_v2", kRebuildTensorV2},
      {"torch._utils._rebuild_tensor_v3", kRebuildTensorV3},
      {"torch._utils._rebuild_parameter", kRebuildParameter},
      {"torch._utils._rebuild_parameter_with_state", kRebuildParameterWithState},
      {"torch._tensor._rebuild_from_type_v2", kRebuildFromTypeV2},
      {"torch.nn.parameter.Parameter", kParameter},
      {"torch.Tensor", kTensorType},
      {"torch._tensor.Tensor", kTensorType},
      {"torch.Size", kSize},
      {"torch.device", kDevice},
      {"torch.jit._pickle.restore_type_tag", kJitIdentity},
      {"torch.jit._pickle.build_intlist", kJitList},
      {"torch.jit._pickle.build_doublelist", kJitList},
      {"torch.jit._pickle.build_boollist", kJitList},
      {"torch.jit._pickle.build_tensorlist", kJitList}};
  if (auto it = fixed.find(mod + "." + name); it != fixed.end()) return it->second;
  if (mod == "torch" || mod == "torch.cuda" || mod == "torch.storage") {
    if (auto it = storage_types().find(name); it != storage_types().end()) {
      dtype = it->second;
      return kStorageType;
    }
  }
  if (mod == "torch") {
    if (auto it = dtype_names().find(name); it != dtype_names().end()) {
      dtype = it->second;
      return kDtype;
    }
  }
  if (torchscript && (mod == "__torch__" || mod.rfind("__torch__.", 0) == 0))
    return kTorchScriptClass;
  return kNotAllowed;
}

// ---- helpers ----------------------------------------------------------------------------

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::BigInt: return "int";
    case Kind::Float: return "float";
    case Kind::Str: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Set: return "set";
    case Kind::Dict: return "dict";
    case Kind::Tensor: return "tensor";
    case Kind::Storage: return "storage";
    case Kind::Global: return "global";
    case Kind::Object: return "object";
  }
  return "?";
}

/// Python-style hashable key for dict entries: str, int, bool (== int), None, float.
bool hash_key(const Value& k, std::string& out) {
  switch (k.kind) {
    case Kind::Str: out = "s" + k.s; return true;
    case Kind::Bytes: out = "b" + k.s; return true;
    case Kind::Int: out = "i" + std::to_string(k.i); return true;
    case Kind::Bool: out = std::string("i") + (k.b ? "1" : "0"); return true;
    case Kind::None: out = "n"; return true;
    case Kind::Float:
      if (std::isfinite(k.f) && std::abs(k.f) < 9e18 && k.f == std::trunc(k.f))
        out = "i" + std::to_string(static_cast<int64_t>(k.f));
      else
        out = "f" + std::to_string(k.f);
      return true;
    default: return false;
  }
}

bool mul_overflows(int64_t a, int64_t b, int64_t& out) {
  return __builtin_mul_overflow(a, b, &out);
}
bool add_overflows(int64_t a, int64_t b, int64_t& out) {
  return __builtin_add_overflow(a, b, &out);
}

// Expanded views (stride 0) may address more elements than their storage holds; beyond this
// many they are refused, so a small file cannot describe a tensor that a later .to() or
// .contiguous() would turn into a huge allocation.
constexpr int64_t kMaxExpandedNumel = int64_t{1} << 24;
constexpr size_t kMaxDims = 64;

class Machine {
 public:
  Machine(const char* data, size_t size, const UnpickleOptions& opt)
      : p_(reinterpret_cast<const uint8_t*>(data)), n_(size), opt_(opt),
        arena_(std::make_unique<std::deque<Value>>()) {}

  Pickle run(size_t* consumed) {
    for (;;) {
      const size_t at = pos_;
      const uint8_t op = u8();
      if (op == '.') {  // STOP
        Value* root = pop();
        CK_CHECK(marks_.empty() && stack_.empty(), ModelError, opt_.what,
                 ": malformed pickle (values left on the stack at STOP)");
        if (consumed) *consumed = pos_;
        return Pickle(std::move(arena_), root);
      }
      step(op, at);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw ModelError(opt_.what + ": " + msg + " (pickle offset " + std::to_string(op_at_) + ")");
  }

  // ---- input ----
  const uint8_t* take(uint64_t k) {
    if (k > n_ - pos_) fail("truncated pickle: needs " + std::to_string(k) + " bytes, " +
                            std::to_string(n_ - pos_) + " left");
    const uint8_t* r = p_ + pos_;
    pos_ += static_cast<size_t>(k);
    return r;
  }
  uint8_t u8() { return *take(1); }
  uint64_t le(int bytes) {
    const uint8_t* b = take(bytes);
    uint64_t v = 0;
    for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | b[k];
    return v;
  }
  std::string bytes(uint64_t k) {
    const uint8_t* b = take(k);
    return std::string(reinterpret_cast<const char*>(b), static_cast<size_t>(k));
  }
  std::string line() {
    const void* nl = std::memchr(p_ + pos_, '\n', n_ - pos_);
    if (!nl) fail("truncated pickle: unterminated text argument");
    const size_t len = static_cast<const uint8_t*>(nl) - (p_ + pos_);
    std::string s = bytes(len);
    pos_ += 1;
    if (!s.empty() && s.back() == '\r') s.pop_back();
    return s;
  }

  // ---- values ----
  Value* make(Kind k) {
    arena_->emplace_back();
    arena_->back().kind = k;
    return &arena_->back();
  }
  Value* make_int(int64_t v) {
    Value* x = make(Kind::Int);
    x->i = v;
    return x;
  }
  Value* make_str(Kind k, std::string s) {
    Value* x = make(k);
    x->s = std::move(s);
    return x;
  }
  void push(Value* v) { stack_.push_back(v); }
  Value* pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("malformed pickle: stack underflow");
    Value* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value* top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("malformed pickle: stack underflow");
    return stack_.back();
  }
  std::vector<Value*> pop_mark() {
    if (marks_.empty()) fail("malformed pickle: no MARK on the stack");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Value*> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  void memo_put(uint64_t idx) { memo_[idx] = top(); }
  Value* memo_get(uint64_t idx) {
    auto it = memo_.find(idx);
    if (it == memo_.end()) fail("malformed pickle: memo entry " + std::to_string(idx) + " not set");
    return it->second;
  }
  Value* tuple(std::vector<Value*> items) {
    Value* t = make(Kind::Tuple);
    t->items = std::move(items);
    return t;
  }

  void dict_set(Value* d, Value* k, Value* v) {
    if (d->kind != Kind::Dict) fail("SETITEM on a " + d->type_name() + ", expected a dict");
    std::string h;
    if (hash_key(*k, h)) {
      auto [it, added] = d->index.emplace(h, d->entries.size());
      if (!added) {
        d->entries[it->second].second = v;  // Python: a repeated key keeps its first position
        return;
      }
    }
    d->entries.emplace_back(k, v);
  }

  int64_t as_int(const Value* v, const char* what) {
    if (v->kind == Kind::Int) return v->i;
    if (v->kind == Kind::Bool) return v->b ? 1 : 0;
    fail(std::string(what) + " must be an int, found " + v->type_name());
  }
  const std::string& as_str(const Value* v, const char* what) {
    if (v->kind != Kind::Str) fail(std::string(what) + " must be a str, found " + v->type_name());
    return v->s;
  }
  const std::vector<Value*>& as_seq(const Value* v, const char* what) {
    if (v->kind != Kind::Tuple && v->kind != Kind::List)
      fail(std::string(what) + " must be a tuple, found " + v->type_name());
    return v->items;
  }

  // Integers: LONG1 / LONG4 are little-endian two's complement of any length.
  Value* long_value(const std::string& raw) {
    if (raw.empty()) return make_int(0);
    const bool neg = static_cast<uint8_t>(raw.back()) & 0x80;
    size_t len = raw.size();
    while (len > 1 && static_cast<uint8_t>(raw[len - 1]) == (neg ? 0xFF : 0x00) &&
           ((static_cast<uint8_t>(raw[len - 2]) & 0x80) != 0) == neg)
      --len;  // drop redundant sign bytes
    if (len > 8) return make_str(Kind::BigInt, raw);
    uint64_t v = neg ? ~uint64_t{0} : 0;
    for (size_t k = 0; k < len; ++k) {
      v &= ~(uint64_t{0xFF} << (8 * k));
      v |= uint64_t{static_cast<uint8_t>(raw[k])} << (8 * k);
    }
    return make_int(static_cast<int64_t>(v));
  }
  Value* text_int(std::string s) {
    if (!s.empty() && s.back() == 'L') s.pop_back();  // protocol 0 LONG
    if (s == "01" || s == "00") {
      Value* b = make(Kind::Bool);
      b->b = s == "01";
      return b;
    }
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0') fail("malformed pickle: bad integer '" + s.substr(0, 40) + "'");
    if (errno == ERANGE) return make_str(Kind::BigInt, s);
    return make_int(v);
  }

  // Protocol 0 STRING: a quoted Python bytes repr.
  std::string unquote(const std::string& s) {
    if (s.size() < 2 || (s[0] != '\'' && s[0] != '"') || s.back() != s[0])
      fail("malformed pickle: STRING argument is not quoted");
    std::string out;
    for (size_t k = 1; k + 1 < s.size(); ++k) {
      char c = s[k];
      if (c != '\\' || k + 2 >= s.size()) {
        out += c;
        continue;
      }
      c = s[++k];
      switch (c) {
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'x': {
          const std::string hex = k + 2 < s.size() - 1 ? s.substr(k + 1, 2) : std::string();
          if (hex.size() == 2 && std::isxdigit(static_cast<unsigned char>(hex[0])) &&
              std::isxdigit(static_cast<unsigned char>(hex[1]))) {
            out += static_cast<char>(std::strtol(hex.c_str(), nullptr, 16));
            k += 2;
          } else {
            out += "\\x";
          }
          break;
        }
        default: out += c;
      }
    }
    return out;
  }
  static void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | ((cp >> 18) & 0x07));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  // Protocol 0 UNICODE: raw-unicode-escape (latin-1 bytes, \uXXXX, \UXXXXXXXX) -> UTF-8.
  std::string raw_unicode(const std::string& s) {
    std::string out;
    for (size_t k = 0; k < s.size(); ++k) {
      const int w = (s[k] == '\\' && k + 1 < s.size()) ? (s[k + 1] == 'u' ? 4 : s[k + 1] == 'U' ? 8 : 0) : 0;
      if (w && k + 2 + w <= s.size()) {
        const std::string hex = s.substr(k + 2, w);
        if (hex.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos) {
          put_utf8(out, static_cast<uint32_t>(std::min<unsigned long>(std::stoul(hex, nullptr, 16), 0x10FFFF)));
          k += 1 + w;
          continue;
        }
      }
      put_utf8(out, static_cast<uint8_t>(s[k]));
    }
    return out;
  }
  // str -> bytes for _codecs.encode(s, 'latin1'): every code point must be < 256.
  std::string latin1(const std::string& utf8) {
    std::string out;
    for (size_t k = 0; k < utf8.size();) {
      const auto c = static_cast<uint8_t>(utf8[k]);
      if (c < 0x80) {
        out += static_cast<char>(c);
        k += 1;
      } else if ((c & 0xE0) == 0xC0 && k + 1 < utf8.size()) {
        const uint32_t cp = ((c & 0x1F) << 6) | (static_cast<uint8_t>(utf8[k + 1]) & 0x3F);
        if (cp > 0xFF) fail("_codecs.encode: code point above 255 in a latin1 string");
        out += static_cast<char>(cp);
        k += 2;
      } else {
        fail("_codecs.encode: string is not latin1");
      }
    }
    return out;
  }

  // ---- globals ----
  Value* global(const std::string& mod, const std::string& name) {
    c10::ScalarType dt = c10::ScalarType::Undefined;
    const int id = classify_global(mod, name, opt_.torchscript, dt);
    if (id == kNotAllowed) {
      const bool ts_class = mod == "__torch__" || mod.rfind("__torch__.", 0) == 0;
      fail("refusing global '" + mod + "." + name + "': " +
           (ts_class ? std::string("TorchScript classes are only read from TorchScript archives")
                     : std::string("a checkpoint may only hold tensors, containers and torch "
                                   "types (nothing in it is executed)")));
    }
    Value* g = make_str(Kind::Global, mod + "." + name);
    g->global = id;
    g->dtype = dt;
    return g;
  }

  // ---- persistent ids: ('storage', type, key, location, numel[, view_metadata]) ----
  Value* persistent(Value* pid) {
    if (pid->kind != Kind::Tuple || pid->items.empty() || pid->items[0]->kind != Kind::Str)
      fail("unsupported persistent id (" + pid->type_name() + ")");
    const auto& it = pid->items;
    if (it[0]->s != "storage")
      fail("unsupported persistent id '" + it[0]->s.substr(0, 40) + "' (only storages are read)");
    if (it.size() != 5 && it.size() != 6) fail("storage persistent id has " + std::to_string(it.size()) + " fields");
    if (it[1]->kind != Kind::Global || it[1]->global != kStorageType)
      fail("storage persistent id without a storage type");
    const c10::ScalarType dt = it[1]->dtype;
    std::string key = it[2]->kind == Kind::Int ? std::to_string(it[2]->i) : as_str(it[2], "storage key");
    const int64_t numel = as_int(it[4], "storage size");
    const auto isz = static_cast<int64_t>(c10::elementSize(dt));
    int64_t nbytes = 0;
    if (numel < 0 || mul_overflows(numel, isz, nbytes)) fail("storage '" + key + "' has a bad size");
    auto found = storages_.find(key);
    if (found == storages_.end()) {
      c10::Storage st = opt_.load_storage(key, dt, static_cast<uint64_t>(nbytes));
      found = storages_.emplace(key, std::move(st)).first;
    } else if (found->second.nbytes() < static_cast<size_t>(nbytes)) {
      fail("storage '" + key + "' is referenced with " + std::to_string(nbytes) +
           " bytes but holds " + std::to_string(found->second.nbytes()));
    }
    Value* s = make(Kind::Storage);
    s->storage = found->second;
    s->dtype = dt;
    s->offset = 0;
    s->numel = numel;
    if (it.size() == 6 && it[5]->kind != Kind::None) {  // legacy view: (view_key, offset, size)
      const auto& vm = as_seq(it[5], "storage view metadata");
      if (vm.size() != 3) fail("storage view metadata must have 3 fields");
      const int64_t off = as_int(vm[1], "storage view offset");
      const int64_t len = as_int(vm[2], "storage view size");
      int64_t end = 0;
      if (off < 0 || len < 0 || add_overflows(off, len, end) || end > numel)
        fail("storage view of '" + key + "' lies outside the storage");
      s->offset = off;
      s->numel = len;
    }
    return s;
  }

  // ---- tensors ----
  std::vector<int64_t> int_list(const Value* v, const char* what) {
    const auto& items = as_seq(v, what);
    if (items.size() > kMaxDims) fail(std::string(what) + " has more than 64 dimensions");
    std::vector<int64_t> out;
    for (const Value* x : items) out.push_back(as_int(x, what));
    return out;
  }

  Value* tensor(const Value* storage, const Value* offset_v, const Value* size_v,
                const Value* stride_v, c10::ScalarType dtype) {
    if (storage->kind != Kind::Storage) fail("tensor rebuilt from a " + storage->type_name() + ", expected a storage");
    if (dtype == c10::ScalarType::Undefined) dtype = storage->dtype;
    const int64_t offset = as_int(offset_v, "tensor storage offset");
    const auto sizes = int_list(size_v, "tensor size");
    const auto strides = int_list(stride_v, "tensor stride");
    if (sizes.size() != strides.size()) fail("tensor size and stride have different lengths");
    // The bytes this storage reference spans, in elements of the tensor's dtype.
    const auto st_isz = static_cast<int64_t>(c10::elementSize(storage->dtype));
    const auto isz = static_cast<int64_t>(c10::elementSize(dtype));
    const int64_t begin_bytes = storage->offset * st_isz, span_bytes = storage->numel * st_isz;
    if (begin_bytes % isz != 0) fail("tensor storage offset is not aligned to its dtype");
    const int64_t base = begin_bytes / isz, avail = span_bytes / isz;
    int64_t numel = 1, last = offset;
    bool overflow = offset < 0;
    for (size_t d = 0; d < sizes.size() && !overflow; ++d) {
      int64_t reach = 0;
      overflow = sizes[d] < 0 || strides[d] < 0 || mul_overflows(numel, sizes[d], numel);
      if (!overflow && sizes[d] > 0)
        overflow = mul_overflows(sizes[d] - 1, strides[d], reach) || add_overflows(last, reach, last);
    }
    if (overflow) fail("tensor has a negative or overflowing size, stride or offset");
    if (numel > 0 && last >= avail)
      fail("tensor reaches element " + std::to_string(last) + " of a storage holding " +
           std::to_string(avail));
    if (numel > std::max(avail, kMaxExpandedNumel))
      fail("tensor of " + std::to_string(numel) + " elements expands a storage of " +
           std::to_string(avail));
    Value* t = make(Kind::Tensor);
    t->tensor = torch::empty({0}, torch::TensorOptions().dtype(dtype))
                    .set_(storage->storage, base + offset, sizes, strides);
    return t;
  }

  void no_metadata(const std::vector<Value*>& a, size_t at) {
    if (a.size() > at && !(a[at]->kind == Kind::None ||
                           (a[at]->kind == Kind::Dict && a[at]->entries.empty())))
      fail("tensor metadata (conjugate / negative bits) is not supported");
  }

  const Value* expect_tensor(const Value* v, const char* what) {
    if (v->kind != Kind::Tensor) fail(std::string(what) + " expects a tensor, found " + v->type_name());
    return v;
  }

  /// REDUCE: fn(*args) for the allowed callables; returns the inert result.
  Value* call(const Value* fn, const Value* args_v, int depth = 0) {
    if (fn->kind != Kind::Global) fail("REDUCE on a " + fn->type_name() + ", expected an allowed global");
    const auto& a = as_seq(args_v, "REDUCE arguments");
    const auto nargs = [&](size_t lo, size_t hi) {
      if (a.size() < lo || a.size() > hi)
        fail(fn->s + " called with " + std::to_string(a.size()) + " arguments");
    };
    switch (fn->global) {
      case kOrderedDict: {
        nargs(0, 1);
        Value* d = make(Kind::Dict);
        if (a.size() == 1)
          for (Value* kv : as_seq(a[0], "OrderedDict items")) {
            const auto& p = as_seq(kv, "OrderedDict item");
            if (p.size() != 2) fail("OrderedDict item is not a pair");
            dict_set(d, p[0], p[1]);
          }
        return d;
      }
      case kSet:
      case kFrozenSet: {
        nargs(0, 1);
        Value* s = make(Kind::Set);
        if (a.size() == 1) s->items = as_seq(a[0], "set items");
        return s;
      }
      case kBytearray: {
        nargs(0, 2);
        if (a.empty()) return make(Kind::Bytes);
        if (a[0]->kind == Kind::Bytes) return make_str(Kind::Bytes, a[0]->s);
        return make_str(Kind::Bytes, latin1(as_str(a[0], "bytearray argument")));
      }
      case kCodecsEncode: {
        nargs(2, 2);
        const auto& enc = as_str(a[1], "_codecs.encode encoding");
        if (enc != "latin1" && enc != "latin-1") fail("_codecs.encode with encoding '" + enc.substr(0, 20) + "'");
        return make_str(Kind::Bytes, latin1(as_str(a[0], "_codecs.encode argument")));
      }
      case kRebuildTensor:
        nargs(4, 4);
        return tensor(a[0], a[1], a[2], a[3], c10::ScalarType::Undefined);
      case kRebuildTensorV2:
        nargs(6, 7);
        no_metadata(a, 6);
        return tensor(a[0], a[1], a[2], a[3], c10::ScalarType::Undefined);
      case kRebuildTensorV3:
        nargs(7, 8);
        no_metadata(a, 7);
        if (a[6]->kind != Kind::Global || a[6]->global != kDtype) fail("_rebuild_tensor_v3 without a dtype");
        return tensor(a[0], a[1], a[2], a[3], a[6]->dtype);
      case kRebuildParameter:
        nargs(3, 3);
        return const_cast<Value*>(expect_tensor(a[0], "_rebuild_parameter"));
      case kRebuildParameterWithState:
        nargs(4, 4);
        return const_cast<Value*>(expect_tensor(a[0], "_rebuild_parameter_with_state"));
      case kParameter:
        nargs(1, 2);
        return const_cast<Value*>(expect_tensor(a[0], "Parameter"));
      case kRebuildFromTypeV2: {
        nargs(4, 4);
        if (depth > 0) fail("nested _rebuild_from_type_v2");
        if (a[1]->kind != Kind::Global || (a[1]->global != kTensorType && a[1]->global != kParameter))
          fail("_rebuild_from_type_v2 to type " + a[1]->type_name() + " (only Tensor and Parameter)");
        Value* r = call(a[0], a[2], depth + 1);
        expect_tensor(r, "_rebuild_from_type_v2");
        return r;
      }
      case kSize: {
        nargs(0, 1);
        Value* t = make(Kind::Tuple);
        if (a.size() == 1) t->items = as_seq(a[0], "torch.Size argument");
        return t;
      }
      case kDevice: {
        nargs(1, 2);
        Value* d = make_str(Kind::Object, "torch.device");
        d->state = a[0];
        return d;
      }
      case kJitIdentity:
        nargs(1, 2);
        return a[0];
      case kJitList:
        nargs(1, 1);
        as_seq(a[0], fn->s.c_str());
        return a[0];
      default:
        fail("'" + fn->s + "' cannot be called (only inert values are built)");
    }
  }

  /// NEWOBJ / NEWOBJ_EX / OBJ / INST: cls.__new__(cls, *args) without running anything.
  Value* instantiate(Value* cls, const std::vector<Value*>& args) {
    if (cls->kind != Kind::Global) fail("instantiating a " + cls->type_name() + ", expected a class");
    switch (cls->global) {
      case kTorchScriptClass: return make_str(Kind::Object, cls->s);
      case kOrderedDict: return make(Kind::Dict);
      case kSet:
      case kFrozenSet: return make(Kind::Set);
      default: {
        Value* t = tuple(args);
        return call(cls, t);
      }
    }
  }

  void build(Value* obj, Value* state) {
    if (state->kind == Kind::None || (state->kind == Kind::Dict && state->entries.empty()))
      return;  // no attributes to set, whatever the object
    switch (obj->kind) {
      case Kind::Object:
        // A TorchScript object's state: the attribute dict, or what its __getstate__
        // returned. Kept as data; its __setstate__ is never run.
        obj->state = state;
        return;
      case Kind::Dict:
      case Kind::Set:
      case Kind::Tensor:
        // OrderedDict attributes (state_dict()._metadata), Python attributes on tensors:
        // nothing a checkpoint reader needs.
        return;
      default:
        fail("BUILD on a " + obj->type_name());
    }
  }

  void step(uint8_t op, size_t at) {
    op_at_ = at;
    switch (op) {
      // -- framing / protocol
      case 0x80: {  // PROTO
        const uint8_t v = u8();
        if (v > 5) fail("pickle protocol " + std::to_string(v) + " is newer than 5");
        return;
      }
      case 0x95:  // FRAME: an 8-byte length; the frame's opcodes follow inline
        (void)le(8);
        return;
      // -- stack
      case '(': marks_.push_back(stack_.size()); return;                       // MARK
      case '0':                                                                // POP
        if (!stack_.empty() && (marks_.empty() || stack_.size() > marks_.back())) stack_.pop_back();
        else (void)pop_mark();
        return;
      case '1': (void)pop_mark(); return;                                      // POP_MARK
      case '2': push(top()); return;                                           // DUP
      // -- memo
      case 'p': memo_put(static_cast<uint64_t>(as_int(text_int(line()), "PUT index"))); return;
      case 'q': memo_put(u8()); return;                                        // BINPUT
      case 'r': memo_put(le(4)); return;                                       // LONG_BINPUT
      case 0x94: memo_put(memo_.size()); return;                               // MEMOIZE
      case 'g': push(memo_get(static_cast<uint64_t>(as_int(text_int(line()), "GET index")))); return;
      case 'h': push(memo_get(u8())); return;                                  // BINGET
      case 'j': push(memo_get(le(4))); return;                                 // LONG_BINGET
      // -- scalars
      case 'N': push(make(Kind::None)); return;
      case 0x88:
      case 0x89: {  // NEWTRUE / NEWFALSE
        Value* b = make(Kind::Bool);
        b->b = op == 0x88;
        push(b);
        return;
      }
      case 'I': push(text_int(line())); return;                                // INT
      case 'L': push(text_int(line())); return;                                // LONG
      case 'J': push(make_int(static_cast<int32_t>(static_cast<uint32_t>(le(4))))); return;
      case 'K': push(make_int(u8())); return;                                  // BININT1
      case 'M': push(make_int(static_cast<int64_t>(le(2)))); return;           // BININT2
      case 0x8a: push(long_value(bytes(u8()))); return;                        // LONG1
      case 0x8b: {                                                             // LONG4
        const auto len = static_cast<int32_t>(static_cast<uint32_t>(le(4)));
        if (len < 0) fail("negative LONG4 length");
        push(long_value(bytes(static_cast<uint64_t>(len))));
        return;
      }
      case 'F': {                                                              // FLOAT
        const std::string s = line();
        Value* f = make(Kind::Float);
        // Python's repr(float): '.' decimals, "inf" / "nan"; from_chars reads them the same
        // in every locale (strtod follows the host's LC_NUMERIC).
        const char* end = s.data() + s.size();
        const auto r = std::from_chars(s.data(), end, f->f, std::chars_format::general);
        if (s.empty() || r.ec != std::errc() || r.ptr != end) fail("malformed FLOAT '" + s.substr(0, 40) + "'");
        push(f);
        return;
      }
      case 'G': {                                                              // BINFLOAT (big-endian)
        const uint8_t* b = take(8);
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | b[k];
        Value* f = make(Kind::Float);
        std::memcpy(&f->f, &bits, 8);
        push(f);
        return;
      }
      // -- strings and bytes (lengths checked against the bytes left by take())
      case 'S': push(make_str(Kind::Str, unquote(line()))); return;            // STRING
      case 'T': push(make_str(Kind::Str, bytes(le(4)))); return;               // BINSTRING
      case 'U': push(make_str(Kind::Str, bytes(u8()))); return;                // SHORT_BINSTRING
      case 'V': push(make_str(Kind::Str, raw_unicode(line()))); return;        // UNICODE
      case 'X': push(make_str(Kind::Str, bytes(le(4)))); return;               // BINUNICODE
      case 0x8c: push(make_str(Kind::Str, bytes(u8()))); return;               // SHORT_BINUNICODE
      case 0x8d: push(make_str(Kind::Str, bytes(le(8)))); return;              // BINUNICODE8
      case 'B': push(make_str(Kind::Bytes, bytes(le(4)))); return;             // BINBYTES
      case 'C': push(make_str(Kind::Bytes, bytes(u8()))); return;              // SHORT_BINBYTES
      case 0x8e: push(make_str(Kind::Bytes, bytes(le(8)))); return;            // BINBYTES8
      case 0x96: push(make_str(Kind::Bytes, bytes(le(8)))); return;            // BYTEARRAY8
      // -- containers
      case ')': push(make(Kind::Tuple)); return;                               // EMPTY_TUPLE
      case 't': push(tuple(pop_mark())); return;                               // TUPLE
      case 0x85: { Value* a = pop(); push(tuple({a})); return; }               // TUPLE1
      case 0x86: { Value* b = pop(); Value* a = pop(); push(tuple({a, b})); return; }
      case 0x87: { Value* c = pop(); Value* b = pop(); Value* a = pop(); push(tuple({a, b, c})); return; }
      case ']': push(make(Kind::List)); return;                                // EMPTY_LIST
      case 'l': { Value* l = make(Kind::List); l->items = pop_mark(); push(l); return; }
      case 'a': {                                                              // APPEND
        Value* v = pop();
        Value* l = top();
        if (l->kind != Kind::List) fail("APPEND to a " + l->type_name());
        l->items.push_back(v);
        return;
      }
      case 'e': {                                                              // APPENDS
        auto items = pop_mark();
        Value* l = top();
        if (l->kind != Kind::List) fail("APPENDS to a " + l->type_name());
        l->items.insert(l->items.end(), items.begin(), items.end());
        return;
      }
      case '}': push(make(Kind::Dict)); return;                                // EMPTY_DICT
      case 'd': {                                                              // DICT
        auto items = pop_mark();
        if (items.size() % 2) fail("DICT with an odd number of items");
        Value* d = make(Kind::Dict);
        for (size_t k = 0; k < items.size(); k += 2) dict_set(d, items[k], items[k + 1]);
        push(d);
        return;
      }
      case 's': { Value* v = pop(); Value* k = pop(); dict_set(top(), k, v); return; }  // SETITEM
      case 'u': {                                                              // SETITEMS
        auto items = pop_mark();
        if (items.size() % 2) fail("SETITEMS with an odd number of items");
        Value* d = top();
        for (size_t k = 0; k < items.size(); k += 2) dict_set(d, items[k], items[k + 1]);
        return;
      }
      case 0x8f: push(make(Kind::Set)); return;                                // EMPTY_SET
      case 0x90: {                                                             // ADDITEMS
        auto items = pop_mark();
        Value* s = top();
        if (s->kind != Kind::Set) fail("ADDITEMS to a " + s->type_name());
        s->items.insert(s->items.end(), items.begin(), items.end());
        return;
      }
      case 0x91: { Value* s = make(Kind::Set); s->items = pop_mark(); push(s); return; }  // FROZENSET
      // -- globals and object construction (allow-list checked in global())
      case 'c': {                                                              // GLOBAL
        std::string mod = line();
        std::string name = line();
        push(global(mod, name));
        return;
      }
      case 0x93: {                                                             // STACK_GLOBAL
        Value* name = pop();
        Value* mod = pop();
        push(global(as_str(mod, "STACK_GLOBAL module"), as_str(name, "STACK_GLOBAL name")));
        return;
      }
      case 'R': { Value* args = pop(); Value* fn = pop(); push(call(fn, args)); return; }  // REDUCE
      case 0x81: {                                                             // NEWOBJ
        Value* args = pop();
        Value* cls = pop();
        push(instantiate(cls, as_seq(args, "NEWOBJ arguments")));
        return;
      }
      case 0x92: {                                                             // NEWOBJ_EX
        Value* kwargs = pop();
        Value* args = pop();
        Value* cls = pop();
        if (kwargs->kind != Kind::Dict || !kwargs->entries.empty()) fail("NEWOBJ_EX with keyword arguments");
        push(instantiate(cls, as_seq(args, "NEWOBJ_EX arguments")));
        return;
      }
      case 'i': {                                                              // INST
        std::string mod = line();
        std::string name = line();
        Value* cls = global(mod, name);
        push(instantiate(cls, pop_mark()));
        return;
      }
      case 'o': {                                                              // OBJ
        auto items = pop_mark();
        if (items.empty()) fail("OBJ without a class");
        Value* cls = items.front();
        items.erase(items.begin());
        push(instantiate(cls, items));
        return;
      }
      case 'b': { Value* state = pop(); build(top(), state); return; }        // BUILD
      case 'Q': push(persistent(pop())); return;                               // BINPERSID
      case 'P': fail("text persistent ids are not used by PyTorch files");    // PERSID
      case 0x82:
      case 0x83:
      case 0x84: fail("pickle extension registry codes (EXT1/2/4) are not supported");
      case 0x97:
      case 0x98: fail("out-of-band pickle buffers are not supported");
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("unknown pickle opcode ") + hex);
      }
    }
  }

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0, op_at_ = 0;
  const UnpickleOptions& opt_;
  std::unique_ptr<std::deque<Value>> arena_;
  std::vector<Value*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value*> memo_;
  std::unordered_map<std::string, c10::Storage> storages_;
};

}  // namespace

const Value* Value::get(std::string_view key) const {
  if (kind != Kind::Dict) return nullptr;
  auto it = index.find("s" + std::string(key));
  return it == index.end() ? nullptr : entries[it->second].second;
}

std::string Value::type_name() const {
  if (kind == Kind::Object || kind == Kind::Global) return std::string(kind_name(kind)) + " " + s;
  return kind_name(kind);
}

Pickle unpickle(const char* data, size_t size, const UnpickleOptions& options, size_t* consumed) {
  CK_CHECK(options.load_storage, ModelError, options.what, ": no storage source for the pickle");
  return Machine(data, size, options).run(consumed);
}

}  // namespace corridorkey::model::pickle
