#include "io/header_probes.h"

#include <array>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>

namespace corridorkey::io::detail {
namespace {

uint32_t be32(const unsigned char* p) { return (uint32_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3]; }
uint32_t le24(const unsigned char* p) { return uint32_t{p[0]} | (p[1] << 8) | (p[2] << 16); }
uint16_t le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

bool read(std::istream& f, void* dst, size_t n) {
  return static_cast<bool>(f.read(static_cast<char*>(dst), static_cast<std::streamsize>(n)));
}

/// Next decimal number of a PNM header, skipping whitespace and '#' comments; -1 if none.
int64_t pnm_number(std::istream& f) {
  int c = f.get();
  while (c != EOF && (std::isspace(c) || c == '#')) {
    if (c == '#')
      while (c != EOF && c != '\n') c = f.get();
    c = f.get();
  }
  int64_t v = -1;
  for (int digits = 0; c != EOF && std::isdigit(c) && digits < 12; ++digits, c = f.get())
    v = (v < 0 ? 0 : v * 10) + (c - '0');
  return v;
}

std::optional<ImageSize> pnm(std::istream& f) {  // P1..P6, PF / Pf: "P6 <w> <h> ..."
  f.seekg(1);
  const int kind = f.get();
  const int64_t w = pnm_number(f), h = pnm_number(f);
  if (w < 0 || h < 0) return std::nullopt;
  // P3 / P6 and PF are colour, the others grey; PF / Pf float, others up to 16 bits (maxval).
  const bool colour = kind == '3' || kind == '6' || kind == 'F';
  const bool fp = kind == 'F' || kind == 'f';
  return ImageSize{w, h, colour ? 3 : 1, fp ? 4 : 2};
}

std::optional<ImageSize> radiance(std::istream& f) {  // header lines, a blank line, "-Y h +X w"
  std::string line;
  for (int i = 0; i < 256 && std::getline(f, line); ++i)
    if (line.empty()) break;
  if (!std::getline(f, line)) return std::nullopt;
  char a1[3] = {}, a2[3] = {};
  long long n1 = -1, n2 = -1;
  if (std::sscanf(line.c_str(), "%2s %lld %2s %lld", a1, &n1, a2, &n2) != 4 || n1 < 0 || n2 < 0)
    return std::nullopt;
  const bool y_first = a1[1] == 'Y';
  return y_first ? ImageSize{n2, n1, 3, 4} : ImageSize{n1, n2, 3, 4};  // RGB float
}

std::optional<ImageSize> webp(std::istream& f) {  // RIFF....WEBP then VP8 / VP8L / VP8X
  std::array<unsigned char, 30> h{};
  if (!read(f, h.data(), h.size())) return std::nullopt;
  if (std::memcmp(&h[8], "WEBP", 4) != 0) return std::nullopt;
  // Decoded as 8-bit BGR or BGRA: 4 channels at most.
  if (std::memcmp(&h[12], "VP8 ", 4) == 0) return ImageSize{le16(&h[26]) & 0x3fff, le16(&h[28]) & 0x3fff, 4, 1};
  if (std::memcmp(&h[12], "VP8L", 4) == 0) {
    const uint32_t b = uint32_t{h[21]} | (h[22] << 8) | (h[23] << 16) | (uint32_t{h[24]} << 24);
    return ImageSize{(b & 0x3fff) + 1, ((b >> 14) & 0x3fff) + 1, 4, 1};
  }
  if (std::memcmp(&h[12], "VP8X", 4) == 0)
    return ImageSize{int64_t{le24(&h[24])} + 1, int64_t{le24(&h[27])} + 1, 4, 1};
  return std::nullopt;
}

std::optional<ImageSize> sun_raster(std::istream& f) {
  std::array<unsigned char, 12> h{};
  if (!read(f, h.data(), h.size())) return std::nullopt;
  return ImageSize{be32(&h[4]), be32(&h[8]), 4, 1};  // 8-bit, BGR(A) at most
}

std::optional<ImageSize> j2k_codestream(std::istream& f) {  // SOC, then SIZ: Xsiz Ysiz XOsiz YOsiz
  std::array<unsigned char, 24> h{};
  if (!read(f, h.data(), h.size()) || h[2] != 0xFF || h[3] != 0x51) return std::nullopt;
  const int64_t w = int64_t{be32(&h[8])} - be32(&h[16]), hh = int64_t{be32(&h[12])} - be32(&h[20]);
  return ImageSize{w, hh};
}

std::optional<ImageSize> jp2(std::istream& f) {  // boxes; jp2h holds ihdr: height, width
  for (int guard = 0; guard < 64; ++guard) {
    std::array<unsigned char, 8> box{};
    if (!read(f, box.data(), box.size())) return std::nullopt;
    const uint32_t len = be32(box.data());
    if (std::memcmp(&box[4], "jp2h", 4) == 0) continue;  // a superbox: step into it
    if (std::memcmp(&box[4], "ihdr", 4) == 0) {
      std::array<unsigned char, 8> ih{};
      if (!read(f, ih.data(), ih.size())) return std::nullopt;
      return ImageSize{be32(&ih[4]), be32(&ih[0])};
    }
    if (len < 8) return std::nullopt;  // 0 (to the end) or 1 (64-bit length): not before ihdr
    f.seekg(len - 8, std::ios::cur);
  }
  return std::nullopt;
}

}  // namespace

std::optional<ImageSize> probe_more_formats(std::istream& f) {
  try {
    std::array<unsigned char, 12> m{};
    if (!read(f, m.data(), m.size())) return std::nullopt;
    f.seekg(0);
    if (m[0] == 'P' && ((m[1] >= '1' && m[1] <= '6') || m[1] == 'F' || m[1] == 'f') && std::isspace(m[2]))
      return pnm(f);
    if (std::memcmp(m.data(), "#?RADIANCE", 10) == 0 || std::memcmp(m.data(), "#?RGBE", 6) == 0) return radiance(f);
    if (std::memcmp(m.data(), "RIFF", 4) == 0) return webp(f);
    if (be32(m.data()) == 0x59a66a95) return sun_raster(f);
    if (m[0] == 0xFF && m[1] == 0x4F) return j2k_codestream(f);
    if (be32(m.data()) == 12 && std::memcmp(&m[4], "jP  ", 4) == 0) return jp2(f);
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace corridorkey::io::detail
