// The chroma-key hint: a colour-difference key against the clip's backing colour, cleaned
// up and made coarse the way the model's training hints are.
#include <corridorkey/check.h>
#include <corridorkey/hint.h>

#include "hint/morphology.h"
#include "hint/view_pixels.h"

#include <algorithm>
#include <cmath>

CORRIDORKEY_NAMESPACE_BEGIN
namespace {

using hint::sample;

float smoothstep(float lo, float hi, float x) {
  const float t = std::clamp((x - lo) / (hi - lo), 0.f, 1.f);
  return t * t * (3 - 2 * t);
}

// Key thresholds on the screen-ness k (1 = the backing's own colour difference): at or
// above 0.7 a pixel is backing, at or below 0.3 foreground. The gap keeps spill and
// motion-blurred edges soft instead of snapping them.
constexpr float kBackingAt = 0.7f, kForegroundAt = 0.3f;
// Backing darker than this share of its median brightness still counts as backing by its
// chromaticity (shadows, falloff), fading out below it so dark noise is not keyed.
constexpr float kShadowLo = 0.15f, kShadowHi = 0.45f;
// Specks and holes up to this radius (pixels of a 1080-line frame) are cleaned up.
constexpr double kCleanRadius = 2.0;

}  // namespace

Image chroma_hint(const ImageView& plate, const ScreenEstimate& screen,
                  const ChromaHintOptions& o) {
  CK_CHECK(plate.data && plate.width > 0 && plate.height > 0 && plate.channels >= 3, IoError,
           "chroma_hint: expected an RGB plate, got ", plate.width, "x", plate.height, "x",
           plate.channels);
  CK_CHECK(screen.screen == Screen::Green || screen.screen == Screen::Blue, IoError,
           "chroma_hint: the backing colour is not estimated (screen ", to_string(screen.screen), ")");
  CK_CHECK(std::isfinite(o.erode) && std::isfinite(o.blur) && o.erode >= 0 && o.blur >= 0,
           ConfigError, "chroma_hint: erode and blur must be finite and >= 0");
  // Key channel and the two others: green (1 | 0, 2) or blue (2 | 0, 1).
  const int kc = screen.screen == Screen::Green ? 1 : 2, o2 = 3 - kc;
  const float sk = screen.rgb[kc], ds = sk - std::max(screen.rgb[0], screen.rgb[o2]);
  CK_CHECK(ds > 0.02f && sk > 0.02f, IoError, "chroma_hint: backing colour (", screen.rgb[0], ", ",
           screen.rgb[1], ", ", screen.rgb[2], ") is not a ", to_string(screen.screen), " screen");
  const int w = plate.width, h = plate.height;
  Image out;
  out.width = w, out.height = h, out.channels = 1;
  out.pixels.resize(static_cast<size_t>(w) * h);
  const float rel_ds = ds / sk;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      float key = sample(plate, x, y, kc), a = sample(plate, x, y, 0), b = sample(plate, x, y, o2);
      if (!(std::isfinite(key) && std::isfinite(a) && std::isfinite(b))) key = a = b = 0.f;
      const float d = key - std::max(a, b);
      // Screen-ness by colour difference, and by chromaticity for darker backing.
      const float k1 = d / ds;
      const float k2 = key > 1e-4f ? (d / key) / rel_ds * smoothstep(kShadowLo, kShadowHi, key / sk) : 0.f;
      const float k = std::max(k1, k2);
      out.pixels[static_cast<size_t>(y) * w + x] = 1.f - smoothstep(kForegroundAt, kBackingAt, k);
    }
  const double scale = h / 1080.0;
  const int rc = std::max(1, static_cast<int>(std::lround(kCleanRadius * scale)));
  auto& a = out.pixels;
  hint::max_filter(a, w, h, rc);  // close: fill small holes in the subject (reflections)
  hint::min_filter(a, w, h, rc);
  hint::min_filter(a, w, h, rc);  // open: drop specks on the backing (markers, noise)
  hint::max_filter(a, w, h, rc);
  hint::min_filter(a, w, h, static_cast<int>(std::lround(o.erode * scale)));
  hint::box_blur3(a, w, h, static_cast<int>(std::lround(o.blur * scale)));
  for (auto& v : a) v = std::clamp(v, 0.f, 1.f);
  return out;
}

CORRIDORKEY_NAMESPACE_END
