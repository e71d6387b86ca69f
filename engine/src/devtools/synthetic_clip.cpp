#include "devtools/synthetic_clip.h"

#include <corridorkey/check.h>

#include "io/image_io.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace corridorkey::devtools {
namespace fs = std::filesystem;
namespace {

/// Coverage of the disc at pixel (x, y) of frame f: 1 inside, 0 outside, a ramp of
/// soft_edge_px across the rim.
float coverage(const SyntheticClip& c, int x, int y, int f) {
  const double cx = c.width * (0.45 + 0.03 * f), cy = c.height * 0.5, r = c.height * 0.3;
  const double d = std::hypot(x - cx, y - cy);
  if (c.soft_edge_px <= 0) return d < r ? 1.f : 0.f;
  return static_cast<float>(std::clamp((r - d) / c.soft_edge_px + 0.5, 0.0, 1.0));
}

std::string frame_name(const std::string& prefix, int frame, int digits, const std::string& ext) {
  char n[32];
  std::snprintf(n, sizeof n, "%0*d", digits, frame + 1);
  return prefix + n + "." + ext;
}

std::string extension(const std::string& format) {
  if (format == "png16") return "png";
  return format;
}

}  // namespace

Image synthetic_plate(const SyntheticClip& c, int f) {
  Image im;
  im.width = c.width;
  im.height = c.height;
  im.channels = 3;
  im.pixels.resize(static_cast<size_t>(c.width) * c.height * 3);
  CK_CHECK(c.screen == "green" || c.screen == "blue" || c.screen == "swapped", ConfigError,
           "synthetic clip: unknown screen '", c.screen, "' (green, blue, swapped)");
  const float fg[3] = {0.5f, 0.3f, 0.2f};
  float screen[3] = {0.03f, 0.45f, 0.04f};
  if (c.screen == "blue") screen[1] = 0.06f, screen[2] = 0.45f;
  for (int y = 0; y < c.height; ++y)
    for (int x = 0; x < c.width; ++x) {
      const float a = coverage(c, x, y, f);
      const float n = c.noise > 0 ? static_cast<float>(c.noise * ((x * 7 + y * 13 + f) % 17) / 17.0) : 0.f;
      float* p = &im.pixels[(static_cast<size_t>(y) * c.width + x) * 3];
      for (int k = 0; k < 3; ++k) p[k] = a * fg[k] + (1 - a) * screen[k] + n;
      if (c.screen == "swapped") std::swap(p[1], p[2]);
    }
  return im;
}

Image synthetic_hint(const SyntheticClip& c, int f) {
  Image im;
  im.width = c.width;
  im.height = c.height;
  im.channels = 1;
  im.pixels.resize(static_cast<size_t>(c.width) * c.height);
  for (int y = 0; y < c.height; ++y)
    for (int x = 0; x < c.width; ++x) im.pixels[static_cast<size_t>(y) * c.width + x] = coverage(c, x, y, f);
  return im;
}

namespace {
void write_image(const std::string& path, const Image& im, const std::string& format,
                 const char* channels) {
  if (format == "exr") io::write_exr(path, im, channels, io::ExrCompression::Zip);
  else if (format == "png") io::write_png8(path, im);
  else if (format == "png16" || format == "tif") io::write_image16(path, im);
  else throw ConfigError("synthetic clip: unknown image format '" + format + "' (exr, png, png16, tif)");
}
}  // namespace

void write_synthetic_hint(const std::string& path, const SyntheticClip& c, int f) {
  write_image(path, synthetic_hint(c, f), c.hint_format, "Y");
}

fs::path write_synthetic_clip(const fs::path& dir, const SyntheticClip& c) {
  fs::create_directories(dir / "Input");
  if (c.hints) fs::create_directories(dir / "AlphaHint");
  for (int f = 0; f < c.frames; ++f) {
    write_image((dir / "Input" / frame_name(c.plate_prefix, f, c.digits, extension(c.plate_format))).string(),
                synthetic_plate(c, f), c.plate_format, "RGB");
    if (c.hints)
      write_synthetic_hint(
        (dir / "AlphaHint" / frame_name(c.hint_prefix, f, c.digits, extension(c.hint_format))).string(), c, f);
  }
  return dir;
}

}  // namespace corridorkey::devtools
