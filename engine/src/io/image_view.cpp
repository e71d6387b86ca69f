// Views to owned float images and back (image.h): the one conversion of pixel types that
// the engine, serve's shared memory and hosts' buffers all use.
#include <corridorkey/check.h>
#include <corridorkey/image.h>

#include "io/half_float.h"
#include "io/view_layout.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

CORRIDORKEY_NAMESPACE_BEGIN

namespace {

/// Whether two samples of a view may share a byte: its axes (channels, pixels, rows) sorted
/// by the size of their strides, each must step past all that the finer ones span. Exact
/// for every layout numpy makes by slicing and transposing; a length-1 axis never steps.
template <class V>
bool samples_overlap(const V& v) {
  struct Axis {
    std::ptrdiff_t n, step;
  };
  constexpr std::ptrdiff_t kMax = std::numeric_limits<std::ptrdiff_t>::max();
  auto size = [](std::ptrdiff_t s) {
    return s == std::numeric_limits<std::ptrdiff_t>::min() ? kMax : s < 0 ? -s : s;
  };
  Axis axes[] = {{v.channels, size(v.channel_stride())},
                 {v.width, size(v.pixel_stride())},
                 {v.height, size(v.row_stride())}};
  std::sort(std::begin(axes), std::end(axes),
            [](const Axis& a, const Axis& b) { return a.step < b.step; });
  // The bytes from a sample's first that the finer axes cover.
  auto span = static_cast<std::ptrdiff_t>(v.bytes_per_sample());
  for (const Axis& a : axes) {
    if (a.n <= 1) continue;
    if (a.step < span) return true;
    span = a.step > (kMax - span) / (a.n - 1) ? kMax : a.step * (a.n - 1) + span;
  }
  return false;
}

}  // namespace

Image image_from_view(const ImageView& v) {
  CK_CHECK(v.data && v.width > 0 && v.height > 0 && v.channels > 0, IoError,
           "image_from_view: empty view (", v.width, "x", v.height, "x", v.channels, ")");
  io::check_layout<IoError>(v, "image_from_view");
  const std::size_t n = static_cast<std::size_t>(v.width) * v.channels;
  Image im;
  im.width = v.width, im.height = v.height, im.channels = v.channels;
  im.pixels.resize(n * v.height);
  // Scaled as the file readers scale (OpenCV's convertTo: v * float(1/255.0), not v / 255.f,
  // which differs in the last bit for 126 of the 256 levels), so pixels from memory key
  // bit-identically to the same pixels in a PNG.
  const float k8 = static_cast<float>(1.0 / 255.0), k16 = static_cast<float>(1.0 / 65535.0);
  if (!v.interleaved()) {
    // Any strides: each sample read at its own offset, converted as below.
    float* out = im.pixels.data();
    auto each = [&](auto read) {
      for (int y = 0; y < v.height; ++y)
        for (int x = 0; x < v.width; ++x) {
          const unsigned char* p = v.at(x, y);
          for (int c = 0; c < v.channels; ++c, p += v.channel_stride()) *out++ = read(p);
        }
    };
    switch (v.type) {
      case PixelType::Float32:
        each([](const unsigned char* p) {
          float f;
          std::memcpy(&f, p, 4);
          return f;
        });
        break;
      case PixelType::UInt8: each([&](const unsigned char* p) { return *p * k8; }); break;
      case PixelType::UInt16:
        each([&](const unsigned char* p) {
          uint16_t s;
          std::memcpy(&s, p, 2);
          return s * k16;
        });
        break;
      case PixelType::Float16:
        each([](const unsigned char* p) {
          uint16_t s;
          std::memcpy(&s, p, 2);
          return io::half_to_float(s);
        });
        break;
    }
    return im;
  }
  for (int y = 0; y < v.height; ++y) {
    const unsigned char* row = v.at(0, y);
    float* out = im.pixels.data() + static_cast<std::size_t>(y) * n;
    switch (v.type) {
      case PixelType::Float32: std::memcpy(out, row, n * 4); break;
      case PixelType::UInt8:
        for (std::size_t i = 0; i < n; ++i) out[i] = row[i] * k8;
        break;
      case PixelType::UInt16:
      case PixelType::Float16:
        for (std::size_t i = 0; i < n; ++i) {
          uint16_t s;
          std::memcpy(&s, row + 2 * i, 2);
          out[i] = v.type == PixelType::UInt16 ? s * k16 : io::half_to_float(s);
        }
        break;
    }
  }
  return im;
}

void copy_to_view(const Image& im, const MutableImageView& v) {
  CK_CHECK(v.data, ConfigError, "copy_to_view: the output view has no buffer");
  CK_CHECK(v.width == im.width && v.height == im.height && v.channels == im.channels, ConfigError,
           "copy_to_view: the output view is ", v.width, "x", v.height, "x", v.channels,
           "; the image is ", im.width, "x", im.height, "x", im.channels);
  io::check_layout<ConfigError>(v, "copy_to_view");
  const std::size_t n = static_cast<std::size_t>(v.width) * v.channels;
  auto to8 = [](float f) {
    return static_cast<unsigned char>(std::lround(std::clamp(f, 0.f, 1.f) * 255.f));
  };
  auto to16 = [](float f) {
    return static_cast<uint16_t>(std::lround(std::clamp(f, 0.f, 1.f) * 65535.f));
  };
  if (!v.interleaved()) {
    // Any strides: each sample written at its own offset, converted as below; no other byte.
    const float* in = im.pixels.data();
    auto each = [&](auto write) {
      for (int y = 0; y < v.height; ++y)
        for (int x = 0; x < v.width; ++x) {
          unsigned char* p = v.at(x, y);
          for (int c = 0; c < v.channels; ++c, p += v.channel_stride()) write(p, *in++);
        }
    };
    switch (v.type) {
      case PixelType::Float32: each([](unsigned char* p, float f) { std::memcpy(p, &f, 4); }); break;
      case PixelType::UInt8: each([&](unsigned char* p, float f) { *p = to8(f); }); break;
      case PixelType::UInt16:
        each([&](unsigned char* p, float f) {
          const uint16_t h = to16(f);
          std::memcpy(p, &h, 2);
        });
        break;
      case PixelType::Float16:
        each([](unsigned char* p, float f) {
          const uint16_t h = io::float_to_half(f);
          std::memcpy(p, &h, 2);
        });
        break;
    }
    return;
  }
  for (int y = 0; y < v.height; ++y) {
    unsigned char* row = v.at(0, y);
    const float* in = im.pixels.data() + static_cast<std::size_t>(y) * n;
    switch (v.type) {
      case PixelType::Float32: std::memcpy(row, in, n * 4); break;
      case PixelType::UInt8:
        for (std::size_t i = 0; i < n; ++i) row[i] = to8(in[i]);
        break;
      case PixelType::UInt16:
      case PixelType::Float16:
        for (std::size_t i = 0; i < n; ++i) {
          const uint16_t h = v.type == PixelType::UInt16 ? to16(in[i]) : io::float_to_half(in[i]);
          std::memcpy(row + 2 * i, &h, 2);
        }
        break;
    }
  }
}

CORRIDORKEY_NAMESPACE_END

namespace corridorkey::io {
bool samples_overlap(const ImageView& v) { return ::corridorkey::samples_overlap(v); }
}  // namespace corridorkey::io
