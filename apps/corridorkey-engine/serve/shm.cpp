#include "serve/shm.h"

#include "serve/rpc.h"

#include <corridorkey/errors.h>

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

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff);
  uint32_t man = x & 0x7fffffu;
  if (exp == 255) return static_cast<uint16_t>(sign | 0x7c00u | (man ? 0x200u : 0));  // inf / nan
  int32_t e = exp - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow
  if (e <= 0) {                                               // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (man >> 13);
  const uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // may carry into the exponent: right
  return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (man == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = man;
      do {
        ++e;
        m <<= 1;
      } while (!(m & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (man << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

Image read_shm(const ShmImage& s, const std::string& what) {
  Mapping m(s, /*writable=*/false, what);
  Image im;
  im.width = s.width, im.height = s.height, im.channels = s.channels;
  im.pixels.resize(static_cast<std::size_t>(s.width) * s.height * s.channels);
  const std::size_t n = static_cast<std::size_t>(s.width) * s.channels;
  for (int y = 0; y < s.height; ++y) {
    const unsigned char* row = m.data() + static_cast<std::size_t>(y) * s.row_bytes();
    float* out = im.pixels.data() + static_cast<std::size_t>(y) * n;
    if (s.type == "float32") {
      std::memcpy(out, row, n * 4);
    } else {
      // Scaled as the file readers scale (OpenCV's convertTo: v * float(1/255.0), not
      // v / 255.f, which differs in the last bit for 126 of the 256 levels), so a plate from
      // shared memory keys bit-identically to the same pixels in a PNG.
      const float k8 = static_cast<float>(1.0 / 255.0), k16 = static_cast<float>(1.0 / 65535.0);
      for (std::size_t i = 0; i < n; ++i) {
        if (s.type == "uint8") out[i] = row[i] * k8;
        else {
          uint16_t v;
          std::memcpy(&v, row + 2 * i, 2);
          out[i] = s.type == "uint16" ? v * k16 : half_to_float(v);
        }
      }
    }
  }
  return im;
}

void write_shm(const ShmImage& s, const Image& im, const std::string& what) {
  if (s.width != im.width || s.height != im.height || s.channels != im.channels)
    throw RpcError(kInvalidParams, what + ": the shared-memory block is " + std::to_string(s.width) + "x" +
                                       std::to_string(s.height) + "x" + std::to_string(s.channels) +
                                       "; this output is " + std::to_string(im.width) + "x" +
                                       std::to_string(im.height) + "x" + std::to_string(im.channels));
  Mapping m(s, /*writable=*/true, what);
  const std::size_t n = static_cast<std::size_t>(s.width) * s.channels;
  for (int y = 0; y < s.height; ++y) {
    unsigned char* row = m.data() + static_cast<std::size_t>(y) * s.row_bytes();
    const float* in = im.pixels.data() + static_cast<std::size_t>(y) * n;
    if (s.type == "float32") {
      std::memcpy(row, in, n * 4);
      continue;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const float v = in[i];
      if (s.type == "uint8") {
        row[i] = static_cast<unsigned char>(std::lround(std::clamp(v, 0.f, 1.f) * 255.f));
      } else {
        const uint16_t h = s.type == "uint16"
                               ? static_cast<uint16_t>(std::lround(std::clamp(v, 0.f, 1.f) * 65535.f))
                               : float_to_half(v);
        std::memcpy(row + 2 * i, &h, 2);
      }
    }
  }
}

}  // namespace corridorkey::serve
