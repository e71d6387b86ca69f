// Plain image views and owned images exchanged with the engine (no LibTorch types).
//
// Thread-safety: views and images are plain values. The engine reads an ImageView and
// writes a MutableImageView only during the call that receives it, from the calling thread,
// and keeps no pointer to either afterwards. image_from_view / copy_to_view may run on any
// thread, concurrently, on different buffers.
#pragma once

#include <corridorkey/errors.h>
#include <corridorkey/export.h>
#include <corridorkey/version.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

/// Float16: IEEE 754 binary16 (OpenEXR's half), in the machine's byte order.
enum class PixelType { UInt8, UInt16, Float32, Float16 };

inline std::size_t bytes_per_sample(PixelType t) {
  return t == PixelType::UInt8 ? 1 : (t == PixelType::UInt16 || t == PixelType::Float16) ? 2 : 4;
}

/// A byte stride of a view: signed (a negative one steps backwards, as numpy's [..., ::-1]
/// does), made implicitly from any integer, so a std::size_t row pitch initialises a view as
/// it always did; reads as std::ptrdiff_t.
class ByteStride {
 public:
  constexpr ByteStride() noexcept = default;
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  constexpr ByteStride(I bytes) noexcept : bytes_(static_cast<std::ptrdiff_t>(bytes)) {}
  constexpr operator std::ptrdiff_t() const noexcept { return bytes_; }

 private:
  std::ptrdiff_t bytes_ = 0;
};

/// A view of pixels in the caller's memory, as OpenImageIO's image_span: `width` x `height`
/// pixels of `channels` samples of `type`, each sample found by signed byte strides per
/// channel, pixel (x) and row (y) from `data`, the sample at x 0, y 0, channel 0 (with a
/// negative stride, not the lowest address: [..., ::-1] of a BGR array starts at its last
/// channel, with channel stride -itemsize). A stride of 0 is derived, giving interleaved
/// rows packed one after another: channel stride bytes_per_sample(), pixel stride
/// channels * bytes_per_sample(), row stride width * |pixel stride|. So
/// `{data, w, h, c, type, row_stride_bytes}` is an interleaved (HWC) image with rows at
/// that stride (0: tightly packed).
///
/// `Void` is `const void` (ImageView, read) or `void` (MutableImageView, written). The pixel
/// type is a field, not a template argument. No two samples may share a byte (what
/// image_from_view / copy_to_view refuse otherwise).
template <class Void>
struct BasicImageView {
  static_assert(std::is_void_v<Void>, "BasicImageView<const void> or BasicImageView<void>");
  /// A sample's first byte: const for ImageView.
  using Byte = std::conditional_t<std::is_const_v<Void>, const unsigned char, unsigned char>;
  using Float = std::conditional_t<std::is_const_v<Void>, const float, float>;

  Void* data = nullptr;
  int width = 0, height = 0, channels = 0;
  PixelType type = PixelType::Float32;
  ByteStride row_stride_bytes = 0;      // y; 0: width * |pixel stride| (rows packed)
  ByteStride pixel_stride_bytes = 0;    // x; 0: channels * bytes_per_sample() (interleaved)
  ByteStride channel_stride_bytes = 0;  // 0: bytes_per_sample()

  /// Tightly packed interleaved float32 pixels.
  static BasicImageView f32(Float* d, int w, int h, int c) { return {d, w, h, c, PixelType::Float32, 0}; }

  bool empty() const { return data == nullptr; }
  std::size_t bytes_per_sample() const { return corridorkey::bytes_per_sample(type); }
  /// The strides in bytes, signed, 0s derived.
  std::ptrdiff_t channel_stride() const {
    return channel_stride_bytes ? std::ptrdiff_t(channel_stride_bytes)
                                : static_cast<std::ptrdiff_t>(bytes_per_sample());
  }
  std::ptrdiff_t pixel_stride() const {
    return pixel_stride_bytes ? std::ptrdiff_t(pixel_stride_bytes)
                              : static_cast<std::ptrdiff_t>(channels * bytes_per_sample());
  }
  std::ptrdiff_t row_stride() const {
    if (row_stride_bytes) return row_stride_bytes;
    const std::ptrdiff_t x = pixel_stride();
    return width * (x < 0 ? -x : x);
  }
  /// The row stride's size in bytes (|row_stride()|), as views had before strides were
  /// signed.
  std::size_t stride() const {
    const std::ptrdiff_t y = row_stride();
    return static_cast<std::size_t>(y < 0 ? -y : y);
  }
  /// Whether each row's samples are interleaved and adjacent (HWC within a row: the channel
  /// stride is one sample, the pixel stride one pixel), whatever the row stride.
  bool interleaved() const {
    const auto s = static_cast<std::ptrdiff_t>(bytes_per_sample());
    return (channels == 1 || channel_stride() == s) && (width == 1 || pixel_stride() == channels * s);
  }
  /// The byte offset from `data` of sample (x, y, c), and its first byte.
  std::ptrdiff_t offset(int x, int y, int c = 0) const {
    return y * row_stride() + x * pixel_stride() + c * channel_stride();
  }
  Byte* at(int x, int y, int c = 0) const { return static_cast<Byte*>(data) + offset(x, y, c); }

  /// The rectangle of `w` x `h` pixels from (x, y), all channels: the same memory, strides
  /// made explicit. ConfigError when it is not inside the view.
  BasicImageView subview(int x, int y, int w, int h) const {
    check_range("subview: columns", x, w, width);
    check_range("subview: rows", y, h, height);
    return {at(x, y), w, h, channels, type, row_stride(), pixel_stride(), channel_stride()};
  }
  /// Channels `first` .. `first + count - 1` of every pixel (rgba.channel_range(0, 3) is its
  /// RGB). ConfigError when they are not the view's.
  BasicImageView channel_range(int first, int count) const {
    check_range("channel_range: channels", first, count, channels);
    return {at(0, 0, first), width, height, count, type, row_stride(), pixel_stride(), channel_stride()};
  }
  /// The channels in reverse order (BGR read as RGB): numpy's [..., ::-1].
  BasicImageView channels_reversed() const {
    return {at(0, 0, channels - 1), width, height, channels, type, row_stride(), pixel_stride(),
            -channel_stride()};
  }
  /// A read-only view of the same samples.
  BasicImageView<const void> view() const {
    return {data, width, height, channels, type, row_stride_bytes, pixel_stride_bytes, channel_stride_bytes};
  }

 private:
  static void check_range(const char* what, int first, int count, int size) {
    if (first < 0 || count < 1 || first > size - count)
      throw ConfigError(std::string(what) + " " + std::to_string(first) + " + " + std::to_string(count) +
                        " are not within 0.." + std::to_string(size));
  }
};

/// A read-only view (process_frame's plate and hint, image_from_view). Integer types are
/// scaled to 0..1 (/255, /65535); floats (32 or 16 bit) are taken as they are.
using ImageView = BasicImageView<const void>;

/// A view of the caller's buffer that an output is written into (FrameRequest,
/// copy_to_view), in its pixel type. Integer types get the value clamped to 0..1 and rounded
/// to the nearest level; Float16 gets the float rounded to nearest-even half; Float32 the
/// value as it is.
using MutableImageView = BasicImageView<void>;

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

/// A float copy of a view, at any strides: integer levels scaled as the file readers scale
/// them (a plate from memory keys bit-identically to the same pixels read from a PNG, and a
/// strided view to the same pixels packed), Float16 widened. IoError for an empty view, an
/// interleaved view whose row stride is smaller than a row, or samples that overlap.
CORRIDORKEY_API Image image_from_view(const ImageView& view);

/// Writes `image` into the caller's buffer in its pixel type (see MutableImageView), each
/// sample where the view's strides put it and no other byte. ConfigError when the view's
/// width, height or channels differ from the image's, or as image_from_view refuses.
CORRIDORKEY_API void copy_to_view(const Image& image, const MutableImageView& out);

CORRIDORKEY_NAMESPACE_END
