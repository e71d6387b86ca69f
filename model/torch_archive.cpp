#include "torch_archive.h"

#include <corridorkey/check.h>

#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

namespace corridorkey::model {
namespace fs = std::filesystem;
using pickle::Kind;
using pickle::Value;

namespace {

// torch.save's legacy stream starts with this number, pickled (torch/serialization.py).
constexpr unsigned char kLegacyMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
constexpr int64_t kLegacyProtocolVersion = 1001;
constexpr size_t kMaxModuleDepth = 64;

/// Storage keys name zip records ("data/<key>"): torch writes decimal numbers; anything
/// that could name another record is refused.
bool valid_storage_key(const std::string& key) {
  if (key.empty() || key.size() > 64 || key.find("..") != std::string::npos) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

std::string first_bytes(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary);
  std::string b(n, '\0');
  f.read(b.data(), static_cast<std::streamsize>(n));
  b.resize(static_cast<size_t>(f.gcount()));
  return b;
}

void read_zip(TorchArchive& ar, uint64_t file_size) {
  const auto& path = ar.path;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  std::vector<std::string> records;
  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
    records = reader->getAllRecords();
  } catch (const c10::Error& e) {
    throw ModelError(path + ": truncated or corrupt checkpoint archive (" +
                     e.what_without_backtrace() + ")");
  }
  bool has_code = false, has_data = false;
  for (const auto& r : records) {
    has_code |= r.rfind("code/", 0) == 0 || r == "constants.pkl";
    has_data |= r == "data.pkl";
  }
  CK_CHECK(has_data, ModelError, path, ": zip archive without data.pkl: not a PyTorch checkpoint");
  ar.format = has_code ? ArchiveFormat::TorchScript : ArchiveFormat::Zip;

  // Every record read is bounded by the file: torch never compresses records, and the sum
  // of distinct records cannot exceed the file (a zip listing one region many times could).
  uint64_t total_read = 0;
  auto record = [&](const std::string& name) {
    try {
      const uint64_t n = reader->getRecordSize(name);
      CK_CHECK(n <= file_size && total_read + n <= file_size, ModelError, path, ": record '",
               name, "' claims ", n, " bytes, more than the file holds (corrupt archive)");
      total_read += n;
      return reader->getRecord(name);
    } catch (const c10::Error& e) {
      throw ModelError(path + ": truncated or corrupt record '" + name + "' (" +
                       e.what_without_backtrace() + ")");
    }
  };
  auto text = [&](const std::string& name) {
    auto [ptr, n] = record(name);
    return std::string(static_cast<const char*>(ptr.get()), n);
  };

  if (reader->hasRecord("byteorder")) {
    const auto order = text("byteorder");
    CK_CHECK(order != "big", ModelError, path, ": written on a big-endian machine (byteorder "
             "'big'); only little-endian checkpoints are read: re-save it on a little-endian one");
    CK_CHECK(order == "little", ModelError, path, ": unknown byteorder record '",
             order.substr(0, 16), "'");
  }
  if (ar.format == ArchiveFormat::TorchScript && reader->hasRecord("extra/config.json"))
    ar.config_json = text("extra/config.json");

  pickle::UnpickleOptions opt;
  opt.what = path;
  opt.torchscript = ar.format == ArchiveFormat::TorchScript;
  opt.load_storage = [&](const std::string& key, c10::ScalarType, uint64_t nbytes) {
    CK_CHECK(valid_storage_key(key), ModelError, path, ": bad storage key '", key.substr(0, 40), "'");
    const std::string name = "data/" + key;
    CK_CHECK(reader->hasRecord(name), ModelError, path, ": storage record '", name,
             "' is missing (truncated archive?)");
    const uint64_t have = reader->getRecordSize(name);
    CK_CHECK(have >= nbytes, ModelError, path, ": storage record '", name, "' holds ", have,
             " bytes, its tensors need ", nbytes, " (truncated or corrupt)");
    auto [ptr, n] = record(name);
    // The record's buffer becomes the storage: no copy.
    return c10::Storage(c10::Storage::use_byte_size_t(), n, std::move(ptr), nullptr, false);
  };
  auto [ptr, n] = record("data.pkl");
  ar.data = pickle::unpickle(static_cast<const char*>(ptr.get()), n, opt);
}

/// The legacy stream: magic, protocol version and sys_info pickles, the object pickle whose
/// storages are persistent ids, a pickled list of storage keys, then per key an int64
/// element count and the raw little-endian bytes.
void read_legacy(TorchArchive& ar, uint64_t file_size) {
  const auto& path = ar.path;
  std::string buf(static_cast<size_t>(file_size), '\0');
  {
    std::ifstream f(path, std::ios::binary);
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    CK_CHECK(static_cast<uint64_t>(f.gcount()) == file_size, IoError, path,
             ": cannot read the checkpoint file");
  }
  const std::string what = path + " (legacy torch.save format)";
  size_t off = 0;
  pickle::UnpickleOptions header;
  header.what = what;
  header.load_storage = [&](const std::string&, c10::ScalarType, uint64_t) -> c10::Storage {
    throw ModelError(what + ": storage in a header pickle");
  };
  auto next = [&](const pickle::UnpickleOptions& o) {
    size_t used = 0;
    auto p = pickle::unpickle(buf.data() + off, buf.size() - off, o, &used);
    off += used;
    return p;
  };
  const auto magic = next(header);
  CK_CHECK(magic.root().kind == Kind::BigInt &&
               magic.root().s == std::string(reinterpret_cast<const char*>(kLegacyMagic), sizeof kLegacyMagic),
           ModelError, path, ": not a checkpoint (a pickle, but not torch.save's magic number)");
  const auto version = next(header);
  CK_CHECK(version.root().kind == Kind::Int && version.root().i == kLegacyProtocolVersion,
           ModelError, what, ": unsupported protocol version");
  const auto sys_info = next(header);
  const Value* le = sys_info.root().get("little_endian");
  CK_CHECK(!(le && le->kind == Kind::Bool && !le->b), ModelError, path,
           ": written on a big-endian machine; only little-endian checkpoints are read: re-save "
           "it on a little-endian one");

  // Storages are allocated when first referenced and filled from the tail afterwards; their
  // sum is bounded by the file size before anything is allocated.
  struct Pending {
    c10::Storage storage;
    uint64_t itemsize = 1;
    bool filled = false;
  };
  std::map<std::string, Pending> pending;
  uint64_t total = 0;
  pickle::UnpickleOptions body;
  body.what = what;
  body.load_storage = [&](const std::string& key, c10::ScalarType dtype, uint64_t nbytes) {
    CK_CHECK(nbytes <= file_size - total, ModelError, what, ": storage '", key, "' of ", nbytes,
             " bytes does not fit in the file (truncated or corrupt)");
    total += nbytes;
    c10::Storage st(c10::Storage::use_byte_size_t(), static_cast<size_t>(nbytes),
                    c10::GetDefaultCPUAllocator(), false);
    pending[key] = {st, c10::elementSize(dtype), false};
    return st;
  };
  ar.data = next(body);
  const auto keys = next(header);
  CK_CHECK(keys.root().kind == Kind::List, ModelError, what, ": storage key list missing");
  for (const Value* k : keys.root().items) {
    const std::string key = k->kind == Kind::Int ? std::to_string(k->i) : k->s;
    auto it = pending.find(key);
    CK_CHECK(k->kind == Kind::Str || k->kind == Kind::Int, ModelError, what, ": bad storage key");
    CK_CHECK(it != pending.end() && !it->second.filled, ModelError, what, ": storage key '",
             key.substr(0, 40), "' is listed but not used, or listed twice");
    CK_CHECK(buf.size() - off >= 8, ModelError, what, ": truncated (storage '", key, "')");
    uint64_t count = 0;
    for (int b = 7; b >= 0; --b) count = (count << 8) | static_cast<unsigned char>(buf[off + b]);
    off += 8;
    auto& p = it->second;
    const uint64_t nbytes = p.storage.nbytes();
    CK_CHECK(count == nbytes / p.itemsize && nbytes % p.itemsize == 0, ModelError, what,
             ": storage '", key, "' holds ", count, " elements, its tensors need ",
             nbytes / p.itemsize);
    CK_CHECK(buf.size() - off >= nbytes, ModelError, what, ": truncated (storage '", key, "')");
    if (nbytes) std::memcpy(p.storage.mutable_data(), buf.data() + off, nbytes);
    off += nbytes;
    p.filled = true;
  }
  for (const auto& [key, p] : pending)
    CK_CHECK(p.filled, ModelError, what, ": truncated (no data for storage '", key, "')");
}

void walk_module(const Value& obj, const std::string& prefix, NamedTensors& out,
                 std::vector<const Value*>& path, const std::string& what) {
  CK_CHECK(path.size() < kMaxModuleDepth, ModelError, what, ": modules nested deeper than ",
           kMaxModuleDepth, " at '", prefix, "'");
  CK_CHECK(std::find(path.begin(), path.end(), &obj) == path.end(), ModelError, what,
           ": module '", prefix, "' contains itself");
  if (!obj.state || obj.state->kind != Kind::Dict) return;  // custom __getstate__: no names
  path.push_back(&obj);
  for (const auto& [k, v] : obj.state->entries) {
    if (k->kind != Kind::Str) continue;
    const std::string name = prefix + k->s;
    if (v->kind == Kind::Tensor) out.emplace_back(name, v->tensor);
    else if (v->kind == Kind::Object) walk_module(*v, name + ".", out, path, what);
  }
  path.pop_back();
}

}  // namespace

TorchArchive read_torch_archive(const std::string& path) {
  std::error_code ec;
  CK_CHECK(fs::exists(path, ec), IoError, path, ": checkpoint file does not exist");
  CK_CHECK(fs::is_regular_file(path, ec), IoError, path, ": checkpoint is not a regular file");
  std::ifstream probe(path, std::ios::binary);
  CK_CHECK(probe.good(), IoError, path, ": checkpoint cannot be opened for reading");
  const uint64_t size = fs::file_size(path, ec);
  CK_CHECK(!ec, IoError, path, ": cannot stat the checkpoint file");
  CK_CHECK(size > 0, ModelError, path, ": checkpoint file is empty");

  TorchArchive ar;
  ar.path = path;
  const auto magic = first_bytes(path, 4);
  try {
    if (magic.rfind("PK", 0) == 0) {
      read_zip(ar, size);
    } else if (static_cast<unsigned char>(magic[0]) == 0x80) {  // pickle PROTO
      ar.format = ArchiveFormat::Legacy;
      read_legacy(ar, size);
    } else {
      throw ModelError(path + ": not a checkpoint (expected a safetensors file, a "
                       "TorchScript archive or a torch.save file)");
    }
  } catch (const c10::Error& e) {
    throw ModelError(path + ": cannot read checkpoint: " + e.what_without_backtrace());
  }
  return ar;
}

NamedTensors tensor_entries(const Value& dict, const std::string& what) {
  CK_CHECK(dict.kind == Kind::Dict, ModelError, what, ": expected a dict of tensors, found ",
           dict.type_name());
  NamedTensors out;
  out.reserve(dict.entries.size());
  for (const auto& [k, v] : dict.entries) {
    CK_CHECK(k->kind == Kind::Str, ModelError, what, ": weights dict has a non-string key (",
             k->type_name(), ")");
    CK_CHECK(v->kind == Kind::Tensor, ModelError, what, ": entry '", k->s, "' is not a tensor (",
             v->type_name(), ")");
    out.emplace_back(k->s, v->tensor);
  }
  return out;
}

NamedTensors module_tensors(const Value& module, const std::string& what) {
  CK_CHECK(module.kind == Kind::Object, ModelError, what,
           ": TorchScript data.pkl holds a ", module.type_name(), ", expected a module object");
  NamedTensors out;
  std::vector<const Value*> path;
  walk_module(module, "", out, path, what);
  return out;
}

NamedTensors load_tensor_dict(const std::string& path) {
  const auto ar = read_torch_archive(path);
  return tensor_entries(ar.data.root(), path);
}

}  // namespace corridorkey::model
