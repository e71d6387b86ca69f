#include "serve/shm.h"

#include "serve/rpc.h"

#include <corridorkey/check.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

namespace corridorkey::serve {

using nlohmann::json;

std::size_t ShmImage::sample_bytes() const {
  return type == "uint8" ? 1 : (type == "uint16" || type == "float16") ? 2 : 4;
}

namespace {

int int_field(const json& j, const char* key, const std::string& what, int lo, int hi) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer())
    throw RpcError(kInvalidParams, what + ": shared-memory \"" + key + "\" must be an integer");
  const auto v = it->get<int64_t>();
  if (v < lo || v > hi)
    throw RpcError(kInvalidParams, what + ": shared-memory \"" + key + "\" " + std::to_string(v) +
                                       " is not in " + std::to_string(lo) + ".." + std::to_string(hi));
  return static_cast<int>(v);
}

/// The block mapped for one call; unmapped and closed when it goes out of scope.
class Mapping {
 public:
  Mapping(const ShmImage& s, bool writable, const std::string& what) {
    fd_ = ::shm_open(s.name.c_str(), writable ? O_RDWR : O_RDONLY, 0);
    CK_CHECK(fd_ >= 0, IoError, what, ": shared memory ", s.name, ": ", std::strerror(errno));
    struct stat st{};
    if (::fstat(fd_, &st) != 0) fail(what, s, "fstat failed");
    const std::size_t need = s.bytes();
    if (static_cast<std::size_t>(st.st_size) < need)
      fail(what, s, "the block holds " + std::to_string(st.st_size) + " bytes; " +
                        std::to_string(s.width) + "x" + std::to_string(s.height) + "x" +
                        std::to_string(s.channels) + " " + s.type + " with a " +
                        std::to_string(s.row_bytes()) + "-byte row stride needs " + std::to_string(need));
    size_ = need;
    // MAP_POPULATE: one pass of page faults up front, not one per 4 KiB page while copying
    data_ = ::mmap(nullptr, need, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED | MAP_POPULATE, fd_, 0);
    if (data_ == MAP_FAILED) {
      data_ = nullptr;
      fail(what, s, std::string("mmap: ") + std::strerror(errno));
    }
  }
  ~Mapping() {
    if (data_) ::munmap(data_, size_);
    if (fd_ >= 0) ::close(fd_);
  }
  unsigned char* data() const { return static_cast<unsigned char*>(data_); }

 private:
  [[noreturn]] void fail(const std::string& what, const ShmImage& s, const std::string& why) {
    ::close(fd_);
    fd_ = -1;
    throw IoError(what + ": shared memory " + s.name + ": " + why);
  }
  int fd_ = -1;
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace

ShmImage parse_shm(const json& j, const std::string& what) {
  ShmImage s;
  for (const auto& [k, v] : j.items())
    if (k != "shm" && k != "width" && k != "height" && k != "channels" && k != "type" && k != "stride")
      throw RpcError(kInvalidParams, what + ": unknown shared-memory field '" + k +
                                         "' (shm, width, height, channels, type, stride)");
  s.name = j.at("shm").is_string() ? j.at("shm").get<std::string>() : "";
  const bool printable = std::all_of(s.name.begin(), s.name.end(),
                                     [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
  if (s.name.size() < 2 || s.name[0] != '/' || s.name.find('/', 1) != std::string::npos || s.name.size() > 255 ||
      !printable)
    throw RpcError(kInvalidParams, what + ": \"shm\" must be a POSIX shared-memory name: '/' then "
                                          "up to 254 printable characters without '/' (shm_open)");
  s.width = int_field(j, "width", what, 1, 1 << 16);
  s.height = int_field(j, "height", what, 1, 1 << 16);
  s.channels = int_field(j, "channels", what, 1, 4);
  if (auto t = j.find("type"); t != j.end()) {
    if (!t->is_string()) throw RpcError(kInvalidParams, what + ": shared-memory \"type\" must be a string");
    s.type = t->get<std::string>();
  }
  if (s.type != "uint8" && s.type != "uint16" && s.type != "float16" && s.type != "float32")
    throw RpcError(kInvalidParams, what + ": shared-memory type '" + s.type +
                                       "' (expected uint8, uint16, float16 or float32)");
  if (auto st = j.find("stride"); st != j.end() && !st->is_null()) {
    if (!st->is_number_integer() || st->get<int64_t>() < 0)
      throw RpcError(kInvalidParams, what + ": shared-memory \"stride\" must be a byte count >= 0");
    if (st->get<int64_t>() > static_cast<int64_t>(kMaxShmBytes))
      throw RpcError(kInvalidParams, what + ": shared-memory stride " + std::to_string(st->get<int64_t>()) +
                                         " is larger than any block (64 GiB)");
    s.stride = st->get<std::size_t>();
    const std::size_t packed = static_cast<std::size_t>(s.width) * s.channels * s.sample_bytes();
    if (s.stride != 0 && s.stride < packed)
      throw RpcError(kInvalidParams, what + ": shared-memory stride " + std::to_string(s.stride) +
                                         " is less than one row (" + std::to_string(packed) + " bytes)");
  }
  // width, height <= 65536 and channels <= 4 keep a packed row below 2^21 bytes; the
  // stride is capped above, so stride * height fits 64 bits: compare it with the cap.
  if (s.row_bytes() > kMaxShmBytes / static_cast<std::size_t>(s.height))
    throw RpcError(kInvalidParams, what + ": the shared-memory layout describes more than 64 GiB");
  return s;
}

void check_shm(const ShmImage& s, const std::string& what) { Mapping m(s, /*writable=*/true, what); }

namespace {
PixelType pixel_type(const ShmImage& s) {
  return s.type == "uint8" ? PixelType::UInt8 : s.type == "uint16" ? PixelType::UInt16
         : s.type == "float16" ? PixelType::Float16 : PixelType::Float32;
}
}  // namespace

Image read_shm(const ShmImage& s, const std::string& what) {
  Mapping m(s, /*writable=*/false, what);
  // The library's own view conversion (image.h): levels scaled as the file readers scale.
  return image_from_view({m.data(), s.width, s.height, s.channels, pixel_type(s), s.row_bytes()});
}

void write_shm(const ShmImage& s, const Image& im, const std::string& what) {
  if (s.width != im.width || s.height != im.height || s.channels != im.channels)
    throw RpcError(kInvalidParams, what + ": the shared-memory block is " + std::to_string(s.width) + "x" +
                                       std::to_string(s.height) + "x" + std::to_string(s.channels) +
                                       "; this output is " + std::to_string(im.width) + "x" +
                                       std::to_string(im.height) + "x" + std::to_string(im.channels));
  Mapping m(s, /*writable=*/true, what);
  copy_to_view(im, {m.data(), s.width, s.height, s.channels, pixel_type(s), s.row_bytes()});
}

}  // namespace corridorkey::serve
