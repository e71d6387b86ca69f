// Plain image views and owned images exchanged with the engine (no LibTorch types).
//
// Thread-safety: views and images are plain values. The engine reads an ImageView and
// writes a MutableImageView only during the call that receives it, from the calling thread,
// and keeps no pointer to either afterwards. image_from_view / copy_to_view may run on any
// thread, concurrently, on different buffers.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/version.h>

#include <cstddef>
#include <cstdint>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

/// Float16: IEEE 754 binary16 (OpenEXR's half), in the machine's byte order.
enum class PixelType { UInt8, UInt16, Float32, Float16 };

inline std::size_t bytes_per_sample(PixelType t) {
  return t == PixelType::UInt8 ? 1 : (t == PixelType::UInt16 || t == PixelType::Float16) ? 2 : 4;
}

/// A read-only view of interleaved pixels (HWC). Integer types are scaled to 0..1
/// (/255, /65535); floats (32 or 16 bit) are taken as they are. row_stride_bytes = 0 means
/// tightly packed.
struct ImageView {
  const void* data = nullptr;
  int width = 0, height = 0, channels = 0;
  PixelType type = PixelType::Float32;
  std::size_t row_stride_bytes = 0;

  static ImageView f32(const float* d, int w, int h, int c) {
    return {d, w, h, c, PixelType::Float32, 0};
  }
  std::size_t bytes_per_sample() const { return corridorkey::bytes_per_sample(type); }
  std::size_t stride() const {
    return row_stride_bytes ? row_stride_bytes
                            : static_cast<std::size_t>(width) * channels * bytes_per_sample();
  }
};

/// A view of the caller's buffer that an output is written into (FrameRequest,
/// copy_to_view): interleaved HWC, in its pixel type. Integer types get the value clamped to
/// 0..1 and rounded to the nearest level; Float16 gets the float rounded to nearest-even
/// half; Float32 the value as it is. row_stride_bytes = 0 means tightly packed.
struct MutableImageView {
  void* data = nullptr;
  int width = 0, height = 0, channels = 0;
  PixelType type = PixelType::Float32;
  std::size_t row_stride_bytes = 0;

  bool empty() const { return data == nullptr; }
  std::size_t bytes_per_sample() const { return corridorkey::bytes_per_sample(type); }
  std::size_t stride() const {
    return row_stride_bytes ? row_stride_bytes
                            : static_cast<std::size_t>(width) * channels * bytes_per_sample();
  }
  ImageView view() const { return {data, width, height, channels, type, row_stride_bytes}; }
};

/// An owned float32 HWC image.
struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<float> pixels;  // size width * height * channels

  float at(int x, int y, int c) const {
    return pixels[(static_cast<std::size_t>(y) * width + x) * channels + c];
  }
  ImageView view() const { return ImageView::f32(pixels.data(), width, height, channels); }
  bool empty() const { return pixels.empty(); }
};

/// A float copy of a view: integer levels scaled as the file readers scale them (a plate
/// from memory keys bit-identically to the same pixels read from a PNG), Float16 widened.
/// IoError for an empty view or a stride smaller than a row.
CORRIDORKEY_API Image image_from_view(const ImageView& view);

/// Writes `image` into the caller's buffer in its pixel type (see MutableImageView).
/// ConfigError when the view's width, height or channels differ from the image's.
CORRIDORKEY_API void copy_to_view(const Image& image, const MutableImageView& out);

CORRIDORKEY_NAMESPACE_END
