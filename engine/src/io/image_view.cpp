// Views to owned float images and back (image.h): the one conversion of pixel types that
// the engine, serve's shared memory and hosts' buffers all use.
#include <corridorkey/check.h>
#include <corridorkey/image.h>

#include "io/half_float.h"

#include <algorithm>
#include <cmath>
#include <cstring>

CORRIDORKEY_NAMESPACE_BEGIN

Image image_from_view(const ImageView& v) {
  CK_CHECK(v.data && v.width > 0 && v.height > 0 && v.channels > 0, IoError,
           "image_from_view: empty view (", v.width, "x", v.height, "x", v.channels, ")");
  const std::size_t n = static_cast<std::size_t>(v.width) * v.channels;
  CK_CHECK(v.stride() >= n * v.bytes_per_sample(), IoError, "image_from_view: row stride ",
           v.stride(), " bytes is smaller than a row");
  Image im;
  im.width = v.width, im.height = v.height, im.channels = v.channels;
  im.pixels.resize(n * v.height);
  // Scaled as the file readers scale (OpenCV's convertTo: v * float(1/255.0), not v / 255.f,
  // which differs in the last bit for 126 of the 256 levels), so pixels from memory key
  // bit-identically to the same pixels in a PNG.
  const float k8 = static_cast<float>(1.0 / 255.0), k16 = static_cast<float>(1.0 / 65535.0);
  for (int y = 0; y < v.height; ++y) {
    const auto* row = static_cast<const unsigned char*>(v.data) + static_cast<std::size_t>(y) * v.stride();
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
  const std::size_t n = static_cast<std::size_t>(v.width) * v.channels;
  CK_CHECK(v.stride() >= n * v.bytes_per_sample(), ConfigError, "copy_to_view: row stride ",
           v.stride(), " bytes is smaller than a row");
  for (int y = 0; y < v.height; ++y) {
    auto* row = static_cast<unsigned char*>(v.data) + static_cast<std::size_t>(y) * v.stride();
    const float* in = im.pixels.data() + static_cast<std::size_t>(y) * n;
    switch (v.type) {
      case PixelType::Float32: std::memcpy(row, in, n * 4); break;
      case PixelType::UInt8:
        for (std::size_t i = 0; i < n; ++i)
          row[i] = static_cast<unsigned char>(std::lround(std::clamp(in[i], 0.f, 1.f) * 255.f));
        break;
      case PixelType::UInt16:
      case PixelType::Float16:
        for (std::size_t i = 0; i < n; ++i) {
          const uint16_t h = v.type == PixelType::UInt16
                                 ? static_cast<uint16_t>(std::lround(std::clamp(in[i], 0.f, 1.f) * 65535.f))
                                 : io::float_to_half(in[i]);
          std::memcpy(row + 2 * i, &h, 2);
        }
        break;
    }
  }
}

CORRIDORKEY_NAMESPACE_END
