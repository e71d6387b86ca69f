#include "safetensors.h"

#include <corridorkey/check.h>

#include "json_reader.h"
#include "mapped_files.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace corridorkey::model::safetensors {
namespace {

namespace fs = std::filesystem;
using c10::ScalarType;

struct DtypeInfo {
  const char* name;
  ScalarType type;
  uint64_t size;
};
// The dtypes the engine reads (the format's list minus the unsigned 16-64 bit, sub-byte
// and exponent-only types, which no GreenFormer checkpoint holds and LibTorch cannot
// represent everywhere).
constexpr DtypeInfo kDtypes[] = {
    {"BOOL", ScalarType::Bool, 1},        {"U8", ScalarType::Byte, 1},
    {"I8", ScalarType::Char, 1},          {"F8_E5M2", ScalarType::Float8_e5m2, 1},
    {"F8_E4M3", ScalarType::Float8_e4m3fn, 1}, {"I16", ScalarType::Short, 2},
    {"F16", ScalarType::Half, 2},         {"BF16", ScalarType::BFloat16, 2},
    {"I32", ScalarType::Int, 4},          {"F32", ScalarType::Float, 4},
    {"F64", ScalarType::Double, 8},       {"I64", ScalarType::Long, 8}};
// Named by the format (or its writers) but not read here: refused by name.
const std::set<std::string> kUnsupported{"U16", "U32", "U64", "F4", "F6_E2M3", "F6_E3M2",
                                         "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "C64", "C128"};
constexpr size_t kMaxRank = 64;

const DtypeInfo* find_dtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

uint64_t read_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string tensor_ctx(const std::string& path, const std::string& name) {
  return path + ": tensor '" + json::printable(name, 200) + "'";
}

int64_t json_uint(const json::Value& v, const std::string& ctx, const char* what) {
  CK_CHECK(v.kind == json::Value::Kind::Int, ModelError, ctx, ": ", what,
           " must be integers, found ", v.text(40));
  CK_CHECK(v.i >= 0, ModelError, ctx, ": ", what, " must not be negative, found ", v.i);
  return v.i;
}

TensorEntry parse_entry(const std::string& name, const json::Value& v, const std::string& path) {
  const auto ctx = tensor_ctx(path, name);
  CK_CHECK(v.kind == json::Value::Kind::Object, ModelError, ctx,
           ": header entry must be an object, found ", v.text(40));
  TensorEntry e;
  e.name = name;
  const auto* dt = v.find("dtype");
  CK_CHECK(dt && dt->kind == json::Value::Kind::String, ModelError, ctx,
           ": missing or non-string 'dtype'");
  e.dtype_name = dt->s;
  const auto* info = find_dtype(dt->s);
  CK_CHECK(!kUnsupported.count(dt->s), ModelError, ctx, ": dtype ", dt->s,  // a known name
           " is not supported (the engine reads BOOL, U8, I8, I16, I32, I64, F8_E4M3, "
           "F8_E5M2, F16, BF16, F32, F64)");
  CK_CHECK(info, ModelError, ctx, ": unknown dtype '", json::printable(dt->s, 40), "'");
  e.dtype = info->type;

  const auto* shape = v.find("shape");
  CK_CHECK(shape && shape->kind == json::Value::Kind::Array, ModelError, ctx,
           ": missing or non-array 'shape'");
  CK_CHECK(shape->items.size() <= kMaxRank, ModelError, ctx, ": shape has ", shape->items.size(),
           " dimensions (at most ", kMaxRank, ")");
  uint64_t bytes = info->size;
  for (const auto& d : shape->items) {
    const auto n = json_uint(d, ctx, "shape entries");
    e.shape.push_back(n);
    CK_CHECK(!__builtin_mul_overflow(bytes, static_cast<uint64_t>(n), &bytes) &&
                 bytes <= static_cast<uint64_t>(INT64_MAX),
             ModelError, ctx, ": shape ", shape->text(80), " overflows");
  }
  const auto* off = v.find("data_offsets");
  CK_CHECK(off && off->kind == json::Value::Kind::Array && off->items.size() == 2, ModelError,
           ctx, ": 'data_offsets' must be [begin, end]");
  e.begin = static_cast<uint64_t>(json_uint(off->items[0], ctx, "data_offsets"));
  e.end = static_cast<uint64_t>(json_uint(off->items[1], ctx, "data_offsets"));
  CK_CHECK(e.begin <= e.end, ModelError, ctx, ": data_offsets [", e.begin, ", ", e.end,
           "] end before they begin");
  CK_CHECK(e.end - e.begin == bytes, ModelError, ctx, ": data_offsets [", e.begin, ", ", e.end,
           "] hold ", e.end - e.begin, " bytes, shape ", shape->text(80), " of ", e.dtype_name,
           " needs ", bytes);
  return e;
}

/// Where the tensors' bytes live: a private mapping of the file or a buffer read from it.
struct Region {
  virtual ~Region() = default;
  char* data = nullptr;
  uint64_t size = 0;
};

struct Mapping final : Region {
  int slot = -1;  // in the table the SIGBUS guard names mapped files from (mapped_files.h)
  ~Mapping() override {
    unregister_mapped_file(slot);
    if (data) ::munmap(data, size);
  }
};

struct Buffer final : Region {
  ~Buffer() override { std::free(data); }
};

std::unique_ptr<Buffer> make_buffer(uint64_t size, const std::string& path) {
  auto b = std::make_unique<Buffer>();
  // 64-byte aligned (oneDNN's preferred alignment); aligned_alloc wants a multiple of it.
  const uint64_t rounded = (std::max<uint64_t>(size, 1) + 63) / 64 * 64;
  b->data = static_cast<char*>(std::aligned_alloc(64, rounded));
  CK_CHECK(b->data, IoError, path, ": cannot allocate ", size, " bytes to read it");
  b->size = size;
  return b;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

/// Opens a regular file for reading without ever blocking: a FIFO named like a checkpoint
/// would otherwise hang open() until a writer comes, beyond the reach of SIGTERM.
int open_regular(const std::string& path, struct stat& st) {
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // replaced between stat and open
    ::close(fd);
    return -1;
  }
  return fd;
}

void read_all(int fd, char* dst, uint64_t n, const std::string& path) {
  uint64_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, dst + done, std::min<uint64_t>(n - done, 1u << 30),
                              static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    CK_CHECK(r >= 0, IoError, path, ": read failed: ", std::strerror(errno));
    CK_CHECK(r > 0, IoError, path, ": file shrank while being read (", done, " of ", n, " bytes)");
    done += static_cast<uint64_t>(r);
  }
}

/// Tensors pointing into `region` (which holds the whole file), each keeping it alive.
File make_tensors(std::shared_ptr<Region> region, const std::string& path) {
  File f;
  f.header = parse_header(region->data, region->size, region->size, path);
  for (const auto& e : f.header.tensors) {
    const auto opts = torch::TensorOptions().dtype(e.dtype);
    torch::Tensor t;
    char* p = region->data + f.header.data_offset + e.begin;
    const auto elem = static_cast<uintptr_t>(c10::elementSize(e.dtype));
    if (e.end == e.begin) {
      t = torch::empty(e.shape, opts);
    } else if (reinterpret_cast<uintptr_t>(p) % elem != 0) {
      // Another writer may not align tensors to their element size; kernels expect it.
      t = torch::empty(e.shape, opts);
      std::memcpy(t.data_ptr(), p, e.end - e.begin);
    } else {
      t = torch::from_blob(p, e.shape, [keep = region](void*) {}, opts);
    }
    if (e.dtype == ScalarType::Bool && e.end > e.begin) {
      // Bytes other than 0 and 1 are not booleans (undefined behaviour in every kernel).
      const auto* b = reinterpret_cast<const unsigned char*>(p);
      for (uint64_t i = 0; i < e.end - e.begin; ++i)
        CK_CHECK(b[i] <= 1, ModelError, tensor_ctx(path, e.name), ": BOOL byte ", int{b[i]},
                 " at element ", i, " is neither 0 nor 1");
    }
    f.tensors.emplace_back(e.name, std::move(t));
  }
  return f;
}

}  // namespace

const std::string* Header::find_metadata(const std::string& key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

bool looks_like(const unsigned char* head, size_t head_len, uint64_t file_size) {
  if (head_len < 9 || file_size < 9) return false;
  const uint64_t n = read_le64(head);
  return n >= 2 && n <= kMaxHeaderBytes && n <= file_size - 8 && head[8] == '{';
}

bool is_safetensors_file(const std::string& path, bool truncated) {
  Fd f;
  struct stat st {};
  f.fd = open_regular(path, st);
  if (f.fd < 0) return false;
  unsigned char head[9];
  const ssize_t r = ::pread(f.fd, head, sizeof head, 0);
  if (r != static_cast<ssize_t>(sizeof head)) return false;
  if (truncated) {
    const uint64_t n = read_le64(head);
    return n >= 2 && n <= kMaxHeaderBytes && head[8] == '{';
  }
  return looks_like(head, sizeof head, static_cast<uint64_t>(st.st_size));
}

Header parse_header(const char* bytes, size_t n, uint64_t file_size, const std::string& path) {
  CK_CHECK(n >= 8 && file_size >= 8, ModelError, path, ": truncated safetensors file (", file_size,
           " bytes, less than the 8-byte header length)");
  const uint64_t len = read_le64(reinterpret_cast<const unsigned char*>(bytes));
  CK_CHECK(len <= kMaxHeaderBytes, ModelError, path, ": safetensors header length ", len,
           " is above the ", kMaxHeaderBytes, "-byte bound");
  CK_CHECK(len <= file_size - 8, ModelError, path, ": safetensors header length ", len,
           " is beyond the file (", file_size, " bytes): truncated?");
  CK_CHECK(len <= n - 8, ModelError, path, ": safetensors header not fully read");
  const std::string text(bytes + 8, static_cast<size_t>(len));
  CK_CHECK(!text.empty() && text[0] == '{', ModelError, path,
           ": safetensors header does not start with '{'");
  const auto root = json::parse(text, path, {"safetensors header", kMaxHeaderBytes});
  CK_CHECK(root.kind == json::Value::Kind::Object, ModelError, path,
           ": safetensors header is not a JSON object");

  Header h;
  h.data_offset = 8 + len;
  const uint64_t data_size = file_size - h.data_offset;
  std::set<std::string> names;
  bool have_metadata = false;
  for (size_t k = 0; k < root.keys.size(); ++k) {
    const auto& name = root.keys[k];
    const auto& v = root.values[k];
    if (name == "__metadata__") {
      CK_CHECK(!have_metadata, ModelError, path, ": __metadata__ appears twice");
      have_metadata = true;
      CK_CHECK(v.kind == json::Value::Kind::Object, ModelError, path,
               ": __metadata__ must be an object of strings");
      std::set<std::string> mkeys;
      for (size_t m = 0; m < v.keys.size(); ++m) {
        CK_CHECK(v.values[m].kind == json::Value::Kind::String, ModelError, path,
                 ": __metadata__ '", v.keys[m].substr(0, 80), "' must be a string, found ",
                 v.values[m].text(40));
        CK_CHECK(mkeys.insert(v.keys[m]).second, ModelError, path, ": __metadata__ key '",
                 json::printable(v.keys[m], 80), "' appears twice");
        h.metadata.emplace_back(v.keys[m], v.values[m].s);
      }
      continue;
    }
    CK_CHECK(names.insert(name).second, ModelError, tensor_ctx(path, name), " appears twice");
    auto e = parse_entry(name, v, path);
    CK_CHECK(e.end <= data_size, ModelError, tensor_ctx(path, name), ": data_offsets [", e.begin,
             ", ", e.end, "] reach beyond the data section (", data_size, " bytes): truncated?");
    h.tensors.push_back(std::move(e));
  }
  // No two tensors share bytes (empty tensors occupy none).
  std::vector<const TensorEntry*> by_offset;
  for (const auto& e : h.tensors)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorEntry* a, const TensorEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    CK_CHECK(by_offset[i]->begin >= by_offset[i - 1]->end, ModelError,
             tensor_ctx(path, by_offset[i]->name), ": data_offsets [", by_offset[i]->begin, ", ",
             by_offset[i]->end, "] overlap tensor '", json::printable(by_offset[i - 1]->name, 200), "' [",
             by_offset[i - 1]->begin, ", ", by_offset[i - 1]->end, "]");
  return h;
}

File read_file(const std::string& path, Access access) {
  Fd f;
  struct stat st {};
  f.fd = open_regular(path, st);
  CK_CHECK(f.fd >= 0, IoError, path, ": cannot open as a regular file: ",
           errno ? std::strerror(errno) : "not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  CK_CHECK(size >= 8, ModelError, path, ": truncated safetensors file (", size, " bytes)");
  // The header is checked from a small read before the file is mapped or read whole.
  unsigned char len_bytes[8];
  read_all(f.fd, reinterpret_cast<char*>(len_bytes), 8, path);
  const uint64_t len = read_le64(len_bytes);
  CK_CHECK(len <= kMaxHeaderBytes && len <= size - 8, ModelError, path,
           ": safetensors header length ", len, " is beyond the file (", size,
           " bytes) or the ", kMaxHeaderBytes, "-byte bound");
  std::shared_ptr<Region> region;
  if (access == Access::Map) {
    auto m = std::make_shared<Mapping>();
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, f.fd, 0);
    CK_CHECK(p != MAP_FAILED, IoError, path, ": cannot map: ", std::strerror(errno),
             " (--mmap off reads it instead)");
    m->data = static_cast<char*>(p);
    m->size = size;
    m->slot = register_mapped_file(p, size, path, f.fd);
    region = std::move(m);
  } else {
    auto b = make_buffer(size, path);
    read_all(f.fd, b->data, size, path);
    region = std::shared_ptr<Region>(std::move(b));
  }
  return make_tensors(std::move(region), path);
}

File read_memory(const void* data, size_t size, const std::string& what) {
  auto b = make_buffer(size, what);
  if (size) std::memcpy(b->data, data, size);
  return make_tensors(std::shared_ptr<Region>(std::move(b)), what);
}

std::string dtype_name(ScalarType t, const std::string& tensor) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.name;
  throw ModelError("tensor '" + tensor + "': dtype " + std::string(c10::toString(t)) +
                   " has no safetensors equivalent");
}

void write_file(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                const std::vector<std::pair<std::string, std::string>>& metadata) {
  struct Item {
    std::string name, dtype;
    torch::Tensor t;  // contiguous CPU
  };
  std::vector<Item> items;
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    CK_CHECK(name != "__metadata__", ModelError, path, ": a tensor cannot be named __metadata__");
    CK_CHECK(names.insert(name).second, ModelError, path, ": tensor '", name, "' given twice");
    items.push_back({name, dtype_name(t.scalar_type(), name), t.detach().cpu().contiguous()});
  }
  // Largest elements first, then by name: every offset is a multiple of its element size.
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    const auto ea = a.t.element_size(), eb = b.t.element_size();
    return ea != eb ? ea > eb : a.name < b.name;
  });
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i)
      header.append(i ? "," : "").append(json::quote(metadata[i].first)).append(":").append(json::quote(metadata[i].second));
    header += "}";
  }
  uint64_t offset = 0;
  for (const auto& it : items) {
    const uint64_t n = static_cast<uint64_t>(it.t.numel()) * static_cast<uint64_t>(it.t.element_size());
    // Appended piece by piece: see describe_key in checkpoint.cpp (a GCC 12 false warning).
    header.append(header.size() > 1 ? "," : "").append(json::quote(it.name)).append(":{\"dtype\":\"");
    header += it.dtype + "\",\"shape\":[";
    for (int64_t d = 0; d < it.t.dim(); ++d) header.append(d ? "," : "").append(std::to_string(it.t.size(d)));
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + n) + "]}";
    offset += n;
  }
  header += "}";
  header.append((8 - (8 + header.size()) % 8) % 8, ' ');  // data starts 8-byte aligned

  const fs::path target(path);
  {  // The rename would replace whatever is there: only ever a regular file (not /dev/full,
     // a FIFO, or a symbolic link, whose own name would be replaced, not its target).
    std::error_code ec;
    const auto st = fs::symlink_status(target, ec);
    CK_CHECK(st.type() == fs::file_type::not_found || st.type() == fs::file_type::regular,
             IoError, path, ": exists and is not a regular file; refusing to replace it");
  }
  const fs::path tmp = target.parent_path() /
                       (".ck-tmp." + target.filename().string() + "." + std::to_string(::getpid()));
  std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(tmp.c_str(), "wb"), std::fclose);
  CK_CHECK(out, IoError, path, ": cannot create ", tmp.string(), ": ", std::strerror(errno));
  bool ok = true;
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  ok = ok && std::fwrite(len, 1, 8, out.get()) == 8;
  ok = ok && std::fwrite(header.data(), 1, header.size(), out.get()) == header.size();
  for (const auto& it : items) {
    const size_t n = static_cast<size_t>(it.t.numel()) * static_cast<size_t>(it.t.element_size());
    ok = ok && (n == 0 || std::fwrite(it.t.data_ptr(), 1, n, out.get()) == n);
  }
  const int write_errno = errno;
  ok = ok && std::fflush(out.get()) == 0 && ::fsync(::fileno(out.get())) == 0;
  const int close_rc = std::fclose(out.release());
  if (!ok || close_rc != 0) {
    const int e = ok ? errno : write_errno;
    std::error_code ec;
    fs::remove(tmp, ec);
    throw IoError(path + ": write failed: " + std::strerror(e ? e : EIO));
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw IoError(path + ": cannot rename the written file into place: " + ec.message());
  }
}

}  // namespace corridorkey::model::safetensors
