#include "io/image_header.h"

#include "io/decode_budget.h"
#include "io/dpx.h"
#include "io/header_probes.h"

#include <corridorkey/check.h>

#include <ImfChannelList.h>
#include <ImfHeader.h>
#include <ImfStdIO.h>
#include <ImfTileDescriptionAttribute.h>
#include <ImfVersion.h>
#include <ImfXdr.h>

#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <vector>

namespace corridorkey::io {
namespace {

uint32_t be32(const unsigned char* p) { return (uint32_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3]; }
uint16_t be16(const unsigned char* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t le32(const unsigned char* p) { return (uint32_t{p[3]} << 24) | (p[2] << 16) | (p[1] << 8) | p[0]; }
uint16_t le16(const unsigned char* p) { return static_cast<uint16_t>((p[1] << 8) | p[0]); }

std::optional<ImageSize> png(std::istream& f) {
  std::array<unsigned char, 24> h{};
  if (!f.read(reinterpret_cast<char*>(h.data()), h.size())) return std::nullopt;
  if (std::string(reinterpret_cast<char*>(h.data()) + 12, 4) != "IHDR") return std::nullopt;
  ImageSize s{be32(&h[16]), be32(&h[20])};
  // Bit depth and colour type (the bytes after the 24 read). OpenCV decodes grey to 1
  // channel, grey + alpha and RGBA to 4, RGB and palette to 3, or 4 when a tRNS chunk (before
  // the image data) gives them transparency.
  std::array<unsigned char, 2> dc{};
  if (!f.read(reinterpret_cast<char*>(dc.data()), dc.size())) return s;
  s.bytes_per_sample = dc[0] > 8 ? 2 : 1;
  s.channels = dc[1] == 0 ? 1 : dc[1] == 2 || dc[1] == 3 ? 3 : 4;
  if (s.channels != 3) return s;
  f.seekg(33);  // signature 8, IHDR: length 4, type 4, data 13, CRC 4
  for (int guard = 0; guard < 256; ++guard) {
    std::array<unsigned char, 8> c{};
    if (!f.read(reinterpret_cast<char*>(c.data()), c.size())) return s;
    const std::string type(reinterpret_cast<char*>(c.data()) + 4, 4);
    if (type == "tRNS") s.channels = 4;
    if (type == "tRNS" || type == "IDAT" || type == "IEND") return s;
    f.seekg(static_cast<std::streamoff>(be32(c.data())) + 4, std::ios::cur);  // data, CRC
  }
  return s;
}

std::optional<ImageSize> jpeg(std::istream& f) {
  // Walk the marker segments up to the first start-of-frame (SOF0..SOF15 but DHT, JPG, DAC).
  f.seekg(2);
  for (int guard = 0; guard < 10000; ++guard) {
    int c = f.get();
    while (c == 0xFF) c = f.get();  // fill bytes
    if (c == EOF) return std::nullopt;
    const int marker = c;
    if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) continue;
    std::array<unsigned char, 2> len{};
    if (!f.read(reinterpret_cast<char*>(len.data()), 2)) return std::nullopt;
    const uint16_t n = be16(len.data());
    if (n < 2) return std::nullopt;
    if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
      // Precision, height, width, components.
      std::array<unsigned char, 6> sof{};
      if (!f.read(reinterpret_cast<char*>(sof.data()), sof.size())) return std::nullopt;
      ImageSize s{be16(&sof[3]), be16(&sof[1])};
      s.channels = sof[5] >= 3 ? 3 : 1;  // OpenCV decodes YCbCr / CMYK / grey to BGR or grey
      s.bytes_per_sample = sof[0] > 8 ? 2 : 1;
      return s;
    }
    if (marker == 0xD9 || marker == 0xDA) return std::nullopt;  // no frame header before data
    f.seekg(n - 2, std::ios::cur);
  }
  return std::nullopt;
}

std::optional<ImageSize> tiff(std::istream& f) {
  std::array<unsigned char, 8> h{};
  if (!f.read(reinterpret_cast<char*>(h.data()), h.size())) return std::nullopt;
  const bool le = h[0] == 'I';
  auto u16 = [&](const unsigned char* p) { return le ? le16(p) : be16(p); };
  auto u32 = [&](const unsigned char* p) { return le ? le32(p) : be32(p); };
  if (u16(&h[2]) != 42) return std::nullopt;  // BigTIFF (43) and others: leave to the decoder
  f.seekg(u32(&h[4]));
  std::array<unsigned char, 2> cnt{};
  if (!f.read(reinterpret_cast<char*>(cnt.data()), 2)) return std::nullopt;
  const uint16_t n = u16(cnt.data());
  ImageSize s{-1, -1};
  for (uint16_t i = 0; i < n && i < 4096; ++i) {
    std::array<unsigned char, 12> e{};
    if (!f.read(reinterpret_cast<char*>(e.data()), e.size())) return std::nullopt;
    const uint16_t tag = u16(&e[0]), type = u16(&e[2]);
    const int64_t v = type == 3 ? u16(&e[8]) : type == 4 ? u32(&e[8]) : -1;
    const uint32_t count = u32(&e[4]);
    if (tag == 256) s.width = v;
    if (tag == 257) s.height = v;
    // Samples per pixel; bits per sample when one value is given (several: left unknown).
    if (tag == 277 && v > 0) s.channels = static_cast<int>(std::min<int64_t>(v, 4));
    if (tag == 258 && count == 1 && v > 0) s.bytes_per_sample = v <= 8 ? 1 : v <= 16 ? 2 : v <= 32 ? 4 : 8;
  }
  // OpenCV's TIFF decoder reads a strip (or tile) at a time into a buffer of its own; a file
  // written as one strip makes that buffer the whole image.
  s.decoder_copies = 1;
  if (s.width < 0 || s.height < 0) return std::nullopt;
  return s;
}

std::optional<ImageSize> bmp(std::istream& f) {
  std::array<unsigned char, 30> h{};
  if (!f.read(reinterpret_cast<char*>(h.data()), h.size())) return std::nullopt;
  const int32_t w = static_cast<int32_t>(le32(&h[18])), hgt = static_cast<int32_t>(le32(&h[22]));
  ImageSize s{w, hgt < 0 ? -int64_t{hgt} : hgt};
  s.channels = le16(&h[28]) == 32 ? 4 : 3;  // bits per pixel; palettes decode to BGR
  s.bytes_per_sample = 1;
  return s;
}

}  // namespace

namespace {
struct ExrHeader {
  ImageSize size;            // the display window: the frame read_exr returns
  ImageSize decoded;         // the data window: what the decoder unpacks first
  uint64_t chunk_bytes = 0;  // the largest chunk unpacked: what the decoder buffers at once
};

// The header as Imf itself parses it (Imf::Header::readFrom, the code InputFile runs), but
// without InputFile's constructor, which also sizes its line and compressor buffers from it:
// a 366-byte file declaring 3.7M x 1 pixels of ZIP (16 lines a chunk) made it allocate
// 3 x 358 MB (fuzz_image finding). OpenEXR's core C API is no substitute: on another fuzzed
// file it read a 64 x 64 data window where Imf reads 3.7M x 1, so the guard must use the
// parser that the decoder uses.
std::optional<ExrHeader> exr_header(const std::string& path) {
  try {
    Imf::StdIFStream is(path.c_str());
    int magic = 0, version = 0;
    Imf::Xdr::read<Imf::StreamIO>(is, magic);
    Imf::Xdr::read<Imf::StreamIO>(is, version);
    if (magic != Imf::MAGIC) return std::nullopt;
    Imf::Header h;
    h.readFrom(is, version);
    h.sanityCheck(Imf::isTiled(version));
    const auto dw = h.dataWindow();
    const int64_t w = int64_t{dw.max.x} - dw.min.x + 1, ht = int64_t{dw.max.y} - dw.min.y + 1;
    uint64_t bytes_per_px = 0;  // every channel, as the decoder holds them (subsampling ignored)
    int nch = 0;
    for (auto c = h.channels().begin(); c != h.channels().end(); ++c, ++nch)
      bytes_per_px += c.channel().type == Imf::HALF ? 2 : 4;
    uint64_t chunk = 0;
    if (h.hasTileDescription()) {
      const auto& td = h.tileDescription();
      chunk = uint64_t{td.xSize} * td.ySize * bytes_per_px;
    } else {
      uint64_t lines = 256;  // DWAB, and an upper bound for anything unknown
      switch (h.compression()) {
        case Imf::NO_COMPRESSION: case Imf::RLE_COMPRESSION: case Imf::ZIPS_COMPRESSION: lines = 1; break;
        case Imf::ZIP_COMPRESSION: case Imf::PXR24_COMPRESSION: lines = 16; break;
        case Imf::PIZ_COMPRESSION: case Imf::B44_COMPRESSION: case Imf::B44A_COMPRESSION:
        case Imf::DWAA_COMPRESSION: lines = 32; break;
        default: break;
      }
      chunk = static_cast<uint64_t>(std::max<int64_t>(w, 0)) * lines * bytes_per_px;
    }
    // read_exr keeps at most RGBA, as float, and returns the display window.
    const auto dsp = h.displayWindow();
    const int64_t dw_w = int64_t{dsp.max.x} - dsp.min.x + 1, dw_h = int64_t{dsp.max.y} - dsp.min.y + 1;
    const int ch = std::min(std::max(nch, 1), 4);
    return ExrHeader{{dw_w, dw_h, ch, 4}, {w, ht, ch, 4}, chunk};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool has_exr_magic(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;  // never open a FIFO
  std::ifstream f(path, std::ios::binary);
  std::array<unsigned char, 4> m{};
  return f.read(reinterpret_cast<char*>(m.data()), m.size()) && m[0] == 0x76 && m[1] == 0x2f &&
         m[2] == 0x31 && m[3] == 0x01;
}
}  // namespace

std::optional<ImageSize> probe_image_size(const std::string& path) {
  // Only regular files: opening a FIFO named frame_0002.png would block until a writer
  // comes (the shape check probes plates before they are read).
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  try {
    std::ifstream f(path, std::ios::binary);
    std::array<unsigned char, 4> magic{};
    if (!f.read(reinterpret_cast<char*>(magic.data()), magic.size())) return std::nullopt;
    f.seekg(0);
    if (magic[0] == 0x89 && magic[1] == 'P' && magic[2] == 'N' && magic[3] == 'G') return png(f);
    if (magic[0] == 0xFF && magic[1] == 0xD8) return jpeg(f);
    if ((magic[0] == 'I' && magic[1] == 'I') || (magic[0] == 'M' && magic[1] == 'M')) return tiff(f);
    if (magic[0] == 'B' && magic[1] == 'M') return bmp(f);
    if ((magic[0] == 'S' && magic[1] == 'D' && magic[2] == 'P' && magic[3] == 'X') ||
        (magic[0] == 'X' && magic[1] == 'P' && magic[2] == 'D' && magic[3] == 'S')) {
      f.close();
      const auto d = read_dpx_header(path);
      if (!d) return std::nullopt;
      return d->size;
    }
    if (auto more = detail::probe_more_formats(f)) return more;  // WebP, PNM, HDR, ...
    f.clear();
    f.seekg(0);
    if (magic[0] == 0x76 && magic[1] == 0x2f && magic[2] == 0x31 && magic[3] == 0x01) {  // EXR
      f.close();
      const auto h = exr_header(path);
      if (!h) return std::nullopt;
      return h->size;
    }
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

void check_image_size(const std::string& path, int64_t max_pixels) {
  DecodeLimits l;
  l.max_pixels = max_pixels;
  check_image_size(path, l);
}

void check_image_size(const std::string& path, const DecodeLimits& limits) {
  const int64_t max_pixels = limits.max_pixels;
  // An EXR's header is parsed once, here, for its size and its largest chunk. Other formats
  // without a readable header go on to their decoder, which fails cleanly on its own; an EXR
  // does not: Imf::InputFile sizes buffers from whatever header it parses.
  std::optional<ExrHeader> exr;
  if (has_exr_magic(path)) {
    exr = exr_header(path);
    CK_CHECK(exr, IoError, path, ": EXR header cannot be parsed (refused before decoding)");
  }
  // So does OpenImageIO's DPX reader: a DPX whose header cannot be read is not decoded.
  CK_CHECK(!has_dpx_magic(path) || read_dpx_header(path), IoError, path,
           ": DPX header cannot be parsed (refused before decoding)");
  auto s = exr ? std::optional<ImageSize>(exr->size) : probe_image_size(path);
  if (!s) return;
  // An EXR whose data window differs from its display window is decoded at the first and
  // returned at the second: both must pass, and the budget counts the larger.
  if (exr && !(exr->decoded.width == s->width && exr->decoded.height == s->height)) {
    const auto& d = exr->decoded;
    CK_CHECK(d.width > 0 && d.height > 0 && d.width <= max_pixels / d.height, IoError, path,
             ": data window of ", d.width, "x", d.height, " pixels (display window ", s->width, "x",
             s->height, "): empty or more than the limit of ", max_pixels, " per frame (--max-pixels)");
    if (s->width > 0 && s->height > 0 && static_cast<double>(d.width) * static_cast<double>(d.height) >
                                              static_cast<double>(s->width) * static_cast<double>(s->height))
      s = d;
  }
  CK_CHECK(s->width > 0 && s->height > 0, IoError, path, ": header declares an empty image (",
           s->width, "x", s->height, ")");
  CK_CHECK(s->width <= max_pixels / s->height, IoError, path, ": header declares ", s->width, "x",
           s->height, " pixels, more than the limit of ", max_pixels,
           " per frame (--max-pixels; decoding it would need ",
           static_cast<int64_t>(static_cast<double>(s->width) * static_cast<double>(s->height) * 16 /
                                (1 << 20)),
           " MiB)");
  if (exr)
    CK_CHECK(exr->chunk_bytes <= static_cast<uint64_t>(max_pixels), IoError, path,
             ": one chunk of this EXR unpacks to ", exr->chunk_bytes, " bytes (", exr->decoded.width,
             " px wide lines, all channels, the lines its compression groups), more than the "
             "limit of ", max_pixels, " (--max-pixels bounds a chunk's bytes too)");
  check_decode_budget(path, *s, exr ? exr->chunk_bytes : 0, limits);
}

}  // namespace corridorkey::io
