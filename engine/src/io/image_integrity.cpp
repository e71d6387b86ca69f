#include "io/image_integrity.h"

#include <algorithm>

namespace corridorkey::io {

bool is_jpeg(const std::vector<uint8_t>& b) {
  return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}

std::string jpeg_truncation(const std::vector<uint8_t>& b) {
  if (!is_jpeg(b)) return "does not start with a JPEG SOI marker";
  const size_t n = b.size();
  size_t pos = 2;
  bool in_scan = false;  // after an SOS header: entropy-coded data until the next marker
  for (;;) {
    if (in_scan) {
      // In entropy-coded data FF is followed by 00 (a stuffed byte) or a restart marker
      // D0-D7; anything else is the next marker.
      while (pos + 1 < n && !(b[pos] == 0xFF && b[pos + 1] != 0x00 && (b[pos + 1] < 0xD0 || b[pos + 1] > 0xD7)))
        ++pos;
      if (pos + 1 >= n) return "ends inside the entropy-coded data (no EOI marker)";
      in_scan = false;
    }
    if (pos >= n || b[pos] != 0xFF) return pos >= n ? "ends between segments (no EOI marker)"
                                                    : "has a segment that does not start with a marker";
    while (pos < n && b[pos] == 0xFF) ++pos;  // fill bytes before a marker
    if (pos >= n) return "ends inside a marker (no EOI marker)";
    const uint8_t m = b[pos++];
    if (m == 0xD9) return "";                           // EOI: the image is whole
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;  // markers without a length
    if (pos + 2 > n) return "ends inside a segment length (no EOI marker)";
    const size_t len = (size_t{b[pos]} << 8) | b[pos + 1];
    if (len < 2) return "has a segment length below 2";
    if (pos + len > n) return "ends inside a segment (no EOI marker)";
    pos += len;
    if (m == 0xDA) in_scan = true;  // SOS: its header was the segment; the scan follows
  }
}

namespace {
uint32_t u32(const std::vector<uint8_t>& h, size_t at, bool be) {
  const uint8_t* p = h.data() + at;
  return be ? (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3]
            : (uint32_t{p[3]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[1]} << 8) | p[0];
}
uint16_t u16(const std::vector<uint8_t>& h, size_t at, bool be) {
  const uint8_t* p = h.data() + at;
  return static_cast<uint16_t>(be ? (p[0] << 8) | p[1] : (p[1] << 8) | p[0]);
}
}  // namespace

uint64_t dpx_bytes_needed(const std::vector<uint8_t>& h) {
  // SMPTE 268M: generic file header (768 bytes; image data offset at byte 4), then the image
  // information header: orientation, element count, pixels per line, lines per element, and
  // eight 72-byte element records from byte 780. In an element: descriptor at +20, bit size
  // at +23, packing at +24 (0 packed, 1/2 filled to 32-bit words), encoding at +26 (1 = RLE),
  // data offset at +28.
  constexpr size_t kImageInfo = 768, kElement = 780;
  if (h.size() < kElement + 40) return 0;
  const bool be = h[0] == 'S';
  const uint64_t w = u32(h, kImageInfo + 4, be), lines = u32(h, kImageInfo + 8, be);
  const int descriptor = h[kElement + 20], bits = h[kElement + 23];
  const int packing = u16(h, kElement + 24, be), encoding = u16(h, kElement + 26, be);
  if (encoding != 0 || w == 0 || lines == 0 || w > (1u << 20) || lines > (1u << 20)) return 0;
  uint64_t channels = 0;
  switch (descriptor) {
    case 50: channels = 3; break;               // RGB
    case 51: case 52: channels = 4; break;      // RGBA, ABGR
    case 1: case 2: case 3: case 4: case 6: channels = 1; break;  // one component
    default: return 0;                           // others (YCbCr...): not checked
  }
  uint64_t offset = u32(h, kElement + 28, be);
  if (offset == 0 || offset == 0xFFFFFFFFu) offset = u32(h, 4, be);
  if (offset == 0xFFFFFFFFu) return 0;
  const uint64_t samples = w * channels;
  uint64_t line = 0;
  switch (bits) {
    case 8: line = samples; break;
    case 16: line = samples * 2; break;
    case 32: line = samples * 4; break;
    case 64: line = samples * 8; break;
    case 10:
      // Filled: three 10-bit samples to a 32-bit word, each line starting on a word. Packed:
      // the tightest a writer can be, the whole image's bits end to end.
      if (packing == 0) return offset + (samples * lines * 10 + 7) / 8;
      line = (samples + 2) / 3 * 4;
      break;
    case 12:
      if (packing == 0) return offset + (samples * lines * 12 + 7) / 8;
      line = samples * 2;
      break;
    default: return 0;
  }
  return offset + line * lines;
}

}  // namespace corridorkey::io
