// Image views at any signed strides (corridorkey/image.h): image_from_view of a
// channel-reversed, channel-sliced, cropped, mirrored, flipped or planar view gives the bits
// of the same pixels packed; copy_to_view into a strided view writes the samples it
// addresses and no other byte; ImageView / MutableImageView keep their aggregate forms.
#include <catch2/catch.hpp>

#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/image.h>

#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

using namespace corridorkey;
using Catch::Matchers::Contains;

namespace {

constexpr PixelType kTypes[] = {PixelType::UInt8, PixelType::UInt16, PixelType::Float16, PixelType::Float32};

/// n random samples of type t, packed: finite halves and floats in 0..1 so that every
/// value compares equal to itself.
std::vector<unsigned char> random_samples(std::size_t n, PixelType t, unsigned seed) {
  std::mt19937 g(seed);
  const std::size_t b = bytes_per_sample(t);
  std::vector<unsigned char> out(n * b);
  for (std::size_t i = 0; i < n; ++i) {
    if (t == PixelType::Float32) {
      const float f = std::uniform_real_distribution<float>(0.f, 1.f)(g);
      std::memcpy(&out[i * b], &f, 4);
    } else if (t == PixelType::Float16) {
      const auto h = static_cast<uint16_t>(g() & 0x3bffu);  // exponent < 15: finite, below 1
      std::memcpy(&out[i * b], &h, 2);
    } else {
      for (std::size_t k = 0; k < b; ++k) out[i * b + k] = static_cast<unsigned char>(g());
    }
  }
  return out;
}

/// Packed HWC samples (w x h x c of type t) copied into `buf` at the given byte strides,
/// sample (0, 0, 0) at `origin`; the view of them there.
MutableImageView place(const std::vector<unsigned char>& packed, int w, int h, int c, PixelType t,
                       std::vector<unsigned char>& buf, std::ptrdiff_t origin, std::ptrdiff_t cs,
                       std::ptrdiff_t xs, std::ptrdiff_t ys) {
  const auto b = static_cast<std::ptrdiff_t>(bytes_per_sample(t));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) {
        const std::ptrdiff_t at = origin + y * ys + x * xs + k * cs;
        REQUIRE(at >= 0);
        REQUIRE(at + b <= static_cast<std::ptrdiff_t>(buf.size()));
        std::memcpy(&buf[static_cast<std::size_t>(at)], &packed[((static_cast<std::size_t>(y) * w + x) * c + k) * b],
                    static_cast<std::size_t>(b));
      }
  return {buf.data() + origin, w, h, c, t, ys, xs, cs};
}

bool same_bits(const Image& a, const Image& b) {
  return a.width == b.width && a.height == b.height && a.channels == b.channels &&
         a.pixels.size() == b.pixels.size() &&
         std::memcmp(a.pixels.data(), b.pixels.data(), a.pixels.size() * sizeof(float)) == 0;
}

/// The packed HWC samples of an Image's rectangle / channels / mirrored pixels, from packed.
std::vector<unsigned char> select(const std::vector<unsigned char>& packed, int w, int c, PixelType t, int x0,
                                  int y0, int sw, int sh, int c0, int sc, bool mirror_x = false,
                                  bool flip_y = false, bool reverse_c = false) {
  const std::size_t b = bytes_per_sample(t);
  std::vector<unsigned char> out;
  for (int y = 0; y < sh; ++y)
    for (int x = 0; x < sw; ++x)
      for (int k = 0; k < sc; ++k) {
        const int sx = x0 + (mirror_x ? sw - 1 - x : x), sy = y0 + (flip_y ? sh - 1 - y : y),
                  sk = c0 + (reverse_c ? sc - 1 - k : k);
        const auto* p = &packed[((static_cast<std::size_t>(sy) * w + sx) * c + sk) * b];
        out.insert(out.end(), p, p + b);
      }
  return out;
}

Image packed_image(const std::vector<unsigned char>& s, int w, int h, int c, PixelType t) {
  return image_from_view(ImageView{s.data(), w, h, c, t, 0});
}

}  // namespace

TEST_CASE("image views keep their aggregate forms and meanings", "[unit]") {
  static_assert(std::is_aggregate_v<ImageView> && std::is_aggregate_v<MutableImageView>);
  static_assert(std::is_same_v<decltype(ImageView{}.data), const void*>);
  static_assert(std::is_same_v<decltype(MutableImageView{}.data), void*>);
  std::vector<uint16_t> host(8 * 3 + 5);
  const std::size_t host_stride = 10 * sizeof(uint16_t);  // a size_t pitch, as hosts hold it
  FrameRequest req;
  req.matte_into = {host.data(), 8, 2, 1, PixelType::Float16, host_stride};
  CHECK(req.matte_into.row_stride_bytes == 20);
  CHECK(req.matte_into.stride() == 20);
  CHECK(req.matte_into.pixel_stride() == 2);
  CHECK(req.matte_into.channel_stride() == 2);
  CHECK(req.matte_into.interleaved());
  CHECK(!req.matte_into.empty());
  const ImageView v{host.data(), 4, 3, 2, PixelType::UInt16, 0};
  CHECK(v.stride() == 16);
  CHECK(v.row_stride() == 16);
  CHECK(v.bytes_per_sample() == 2);
  CHECK(ImageView{}.empty());
  CHECK(MutableImageView{}.empty());
  std::vector<float> f(12);
  const ImageView f32 = ImageView::f32(f.data(), 2, 2, 3);
  CHECK((f32.data == f.data() && f32.type == PixelType::Float32 && f32.stride() == 24));
  const MutableImageView m = MutableImageView::f32(f.data(), 2, 2, 3);
  const ImageView back = m.view();
  CHECK((back.data == f.data() && back.width == 2 && back.stride() == 24));
  // A negative stride reads signed; stride() is its size, as views had before.
  const ImageView up{f.data() + 6, 2, 2, 3, PixelType::Float32, -24};
  CHECK(up.row_stride() == -24);
  CHECK(up.stride() == 24);
  CHECK(up.at(1, 1, 2) == reinterpret_cast<const unsigned char*>(f.data() + 5));
}

TEST_CASE("image_from_view of a strided view gives the packed pixels' bits", "[unit]") {
  const int W = 7, H = 5;
  for (const PixelType t : kTypes) {
    const auto b = static_cast<std::ptrdiff_t>(bytes_per_sample(t));
    CAPTURE(static_cast<int>(t));
    {  // channels reversed: [..., ::-1] of a BGR array
      const auto rgb = random_samples(W * H * 3, t, 1);
      std::vector<unsigned char> bgr(rgb.size());
      // The BGR buffer read from its last channel backwards is the RGB image.
      const auto v = place(rgb, W, H, 3, t, bgr, 2 * b, -b, 3 * b, W * 3 * b);
      CHECK(!v.interleaved());
      CHECK(same_bits(image_from_view(v.view()), packed_image(rgb, W, H, 3, t)));
      // And channels_reversed() of the BGR array's own view is the same view.
      const ImageView bgr_view{bgr.data(), W, H, 3, t, 0};
      CHECK(same_bits(image_from_view(bgr_view.channels_reversed()), packed_image(rgb, W, H, 3, t)));
    }
    {  // a channel slice: RGB of RGBA, channels 1..3 of 6
      const auto rgba = random_samples(W * H * 4, t, 2);
      const ImageView four{rgba.data(), W, H, 4, t, 0};
      CHECK(same_bits(image_from_view(four.channel_range(0, 3)),
                      packed_image(select(rgba, W, 4, t, 0, 0, W, H, 0, 3), W, H, 3, t)));
      const auto six = random_samples(W * H * 6, t, 3);
      const ImageView sixv{six.data(), W, H, 6, t, 0};
      CHECK(same_bits(image_from_view(sixv.channel_range(1, 3)),
                      packed_image(select(six, W, 6, t, 0, 0, W, H, 1, 3), W, H, 3, t)));
      CHECK(same_bits(image_from_view(sixv.channel_range(4, 1)),
                      packed_image(select(six, W, 6, t, 0, 0, W, H, 4, 1), W, H, 1, t)));
    }
    {  // a subview: a rectangle, and a rectangle's channels reversed
      const auto rgb = random_samples(W * H * 3, t, 4);
      const ImageView all{rgb.data(), W, H, 3, t, 0};
      const ImageView rect = all.subview(2, 1, 4, 3);
      CHECK(rect.interleaved());
      CHECK(same_bits(image_from_view(rect), packed_image(select(rgb, W, 3, t, 2, 1, 4, 3, 0, 3), 4, 3, 3, t)));
      CHECK(same_bits(image_from_view(rect.channels_reversed()),
                      packed_image(select(rgb, W, 3, t, 2, 1, 4, 3, 0, 3, false, false, true), 4, 3, 3, t)));
      CHECK(same_bits(image_from_view(all.subview(0, 0, W, H)), packed_image(rgb, W, H, 3, t)));
    }
    {  // negative pixel and row strides: mirrored, flipped
      const auto rgb = random_samples(W * H * 3, t, 5);
      const ImageView all{rgb.data(), W, H, 3, t, 0};
      // Mirrored: from the last pixel of row 0, pixel stride -3 samples.
      const ImageView mirrored{all.at(W - 1, 0), W, H, 3, t, W * 3 * b, -3 * b, 0};
      CHECK(same_bits(image_from_view(mirrored),
                      packed_image(select(rgb, W, 3, t, 0, 0, W, H, 0, 3, true), W, H, 3, t)));
      // Flipped: from the last row, row stride negative (still interleaved: the fast path).
      const ImageView flipped{all.at(0, H - 1), W, H, 3, t, -W * 3 * b};
      CHECK(flipped.interleaved());
      CHECK(same_bits(image_from_view(flipped),
                      packed_image(select(rgb, W, 3, t, 0, 0, W, H, 0, 3, false, true), W, H, 3, t)));
    }
    {  // planar (CHW, numpy's Fortran order of HWC is the same kind) and column-major
      const auto rgb = random_samples(W * H * 3, t, 6);
      std::vector<unsigned char> planes(rgb.size());
      const auto chw = place(rgb, W, H, 3, t, planes, 0, W * H * b, b, W * b);
      CHECK(same_bits(image_from_view(chw.view()), packed_image(rgb, W, H, 3, t)));
      std::vector<unsigned char> fortran(rgb.size());
      const auto f = place(rgb, W, H, 3, t, fortran, 0, W * H * b, H * b, b);
      CHECK(same_bits(image_from_view(f.view()), packed_image(rgb, W, H, 3, t)));
    }
  }
}

TEST_CASE("copy_to_view into a strided view writes the samples it addresses, no other byte", "[unit]") {
  const int W = 6, H = 4;
  for (const PixelType t : kTypes) {
    CAPTURE(static_cast<int>(t));
    const auto b = static_cast<std::ptrdiff_t>(bytes_per_sample(t));
    // Values past 0..1 too: clamped and rounded as the packed path does.
    Image im;
    im.width = W, im.height = H, im.channels = 3;
    std::mt19937 g(7);
    for (int i = 0; i < W * H * 3; ++i) im.pixels.push_back(std::uniform_real_distribution<float>(-0.2f, 1.2f)(g));
    std::vector<unsigned char> packed(static_cast<std::size_t>(W * H * 3 * b));
    copy_to_view(im, MutableImageView{packed.data(), W, H, 3, t, 0});
    // Into the BGR channels of an RGBA-like 5-channel buffer with padded rows, mirrored and
    // channel-reversed: rows of 5 * (W + 1) samples, the image's pixel x at column W - 1 - x
    // + 1, its channel k at channel 3 - k.
    const std::ptrdiff_t row = 5 * (W + 1) * b;
    std::vector<unsigned char> buf(static_cast<std::size_t>(row * H), 0xAB);
    const MutableImageView five{buf.data(), W + 1, H, 5, t, row};
    const MutableImageView into = five.subview(1, 0, W, H).channel_range(1, 3);
    const MutableImageView v{into.at(W - 1, 0, 2), W, H, 3, t, row, -5 * b, -b};
    copy_to_view(im, v);
    std::vector<bool> written(buf.size());
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x)
        for (int k = 0; k < 3; ++k) {
          const auto at = static_cast<std::size_t>(v.at(x, y, k) - buf.data());
          CHECK(std::memcmp(&buf[at], &packed[((static_cast<std::size_t>(y) * W + x) * 3 + k) * b],
                            static_cast<std::size_t>(b)) == 0);
          for (std::ptrdiff_t i = 0; i < b; ++i) written[at + static_cast<std::size_t>(i)] = true;
        }
    std::size_t untouched = 0;
    for (std::size_t i = 0; i < buf.size(); ++i)
      if (!written[i]) {
        CHECK(buf[i] == 0xAB);
        ++untouched;
      }
    CHECK(untouched == buf.size() - static_cast<std::size_t>(W * H * 3 * b));
    // Read back through the same view: the packed bits.
    CHECK(same_bits(image_from_view(v.view()), image_from_view(ImageView{packed.data(), W, H, 3, t, 0})));
  }
}

TEST_CASE("views that no stride makes readable are refused", "[unit]") {
  std::vector<float> f(64);
  const auto F32 = PixelType::Float32;
  // Samples that share bytes: pixels one sample apart, channels half a sample apart, rows
  // inside a row (a stride of 0 is derived, never "the same bytes").
  for (const ImageView v : {ImageView{f.data(), 4, 2, 3, F32, 48, 4, 4},
                            ImageView{f.data(), 4, 2, 3, F32, 48, 12, 2},
                            ImageView{f.data(), 4, 2, 3, F32, 8, 4, 32}}) {
    CHECK_THROWS_AS(image_from_view(v), IoError);
    CHECK_THROWS_WITH(image_from_view(v), Contains("samples overlap"));
  }
  // Interleaved rows narrower than a row: refused as they always were, either way up.
  const ImageView narrow{f.data(), 4, 2, 3, F32, 40}, narrow_up{f.data() + 10, 4, 2, 3, F32, -40};
  CHECK_THROWS_AS(image_from_view(narrow), IoError);
  CHECK_THROWS_WITH(image_from_view(narrow), Contains("row stride 40 bytes is smaller than a row"));
  CHECK_THROWS_WITH(image_from_view(narrow_up), Contains("row stride 40 bytes is smaller than a row"));
  Image im;
  im.width = 4, im.height = 2, im.channels = 3;
  im.pixels.assign(24, 0.5f);
  const MutableImageView over{f.data(), 4, 2, 3, F32, 24, 4, 8};
  CHECK_THROWS_AS(copy_to_view(im, over), ConfigError);
  CHECK_THROWS_WITH(copy_to_view(im, over), Contains("samples overlap"));
  const ImageView all{f.data(), 4, 4, 4, F32, 0};
  CHECK_THROWS_AS(all.subview(1, 1, 4, 1), ConfigError);
  CHECK_THROWS_AS(all.subview(-1, 0, 1, 1), ConfigError);
  CHECK_THROWS_AS(all.channel_range(2, 3), ConfigError);
  CHECK_THROWS_AS(all.channel_range(0, 0), ConfigError);
}
