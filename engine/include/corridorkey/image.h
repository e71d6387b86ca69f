// Plain image views and owned images exchanged with the engine (no LibTorch types).
#pragma once

#include <corridorkey/version.h>

#include <cstddef>
#include <cstdint>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

enum class PixelType { UInt8, UInt16, Float32 };

/// A read-only view of interleaved pixels (HWC). Integer types are scaled to 0..1
/// (/255, /65535); float is taken as is. row_stride_bytes = 0 means tightly packed.
struct ImageView {
  const void* data = nullptr;
  int width = 0, height = 0, channels = 0;
  PixelType type = PixelType::Float32;
  std::size_t row_stride_bytes = 0;

  static ImageView f32(const float* d, int w, int h, int c) {
    return {d, w, h, c, PixelType::Float32, 0};
  }
  std::size_t bytes_per_sample() const {
    return type == PixelType::UInt8 ? 1 : type == PixelType::UInt16 ? 2 : 4;
  }
  std::size_t stride() const {
    return row_stride_bytes ? row_stride_bytes
                            : static_cast<std::size_t>(width) * channels * bytes_per_sample();
  }
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

CORRIDORKEY_NAMESPACE_END
