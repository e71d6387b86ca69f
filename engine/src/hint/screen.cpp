// Estimating the backing colour of a clip from a few of its plates.
#include <corridorkey/check.h>
#include <corridorkey/hint.h>

#include "hint/view_pixels.h"

#include <algorithm>
#include <array>
#include <cmath>

CORRIDORKEY_NAMESPACE_BEGIN
namespace {

using hint::sample;

constexpr int kBins = 72;                // 5 degree hue bins
constexpr float kMinChroma = 0.08f;      // max - min: greys and near-greys are not backing
constexpr float kMinSaturation = 0.25f;  // chroma / max
constexpr double kHueWindow = 20.0;      // degrees around the peak counted as backing
constexpr double kMinCoverage = 0.05;
constexpr double kBorderWeight = 3.0;    // outer 15% of each side
constexpr int kMaxSide = 256;            // plates are sampled on a grid of at most 256 x 256

struct Sample {
  float r, g, b, hue;
  double w;
};

float hue_of(float r, float g, float b) {
  const float mx = std::max({r, g, b}), mn = std::min({r, g, b}), c = mx - mn;
  float h;
  if (mx == r) h = std::fmod((g - b) / c, 6.f);
  else if (mx == g) h = (b - r) / c + 2.f;
  else h = (r - g) / c + 4.f;
  h *= 60.f;
  return h < 0 ? h + 360.f : h;
}

/// Hue ranges a backing of each kind may have (degrees): green 70..170, blue 185..265.
bool hue_allowed(double hue, Screen want) {
  const bool green = hue >= 70 && hue <= 170, blue = hue >= 185 && hue <= 265;
  return want == Screen::Green ? green : want == Screen::Blue ? blue : green || blue;
}

double hue_distance(double a, double b) {
  const double d = std::fabs(a - b);
  return std::min(d, 360.0 - d);
}

float median(std::vector<float>& v) {
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

ScreenEstimate estimate_screen(const std::vector<ImageView>& plates, Screen want,
                               const std::string& what) {
  CK_CHECK(!plates.empty(), IoError, what, ": no plate to estimate the backing colour from");
  std::vector<Sample> sat;
  double total = 0;
  for (const auto& v : plates) {
    CK_CHECK(v.data && v.width > 0 && v.height > 0 && v.channels >= 3, IoError, what,
             ": expected an RGB plate to estimate the backing colour, got ", v.width, "x",
             v.height, "x", v.channels);
    const int step = std::max(1, std::max(v.width, v.height) / kMaxSide);
    for (int y = step / 2; y < v.height; y += step)
      for (int x = step / 2; x < v.width; x += step) {
        const bool border = x < 0.15 * v.width || x > 0.85 * v.width || y < 0.15 * v.height ||
                            y > 0.85 * v.height;
        const double w = border ? kBorderWeight : 1.0;
        total += w;
        const float r = sample(v, x, y, 0), g = sample(v, x, y, 1), b = sample(v, x, y, 2);
        if (!(std::isfinite(r) && std::isfinite(g) && std::isfinite(b))) continue;
        const float mx = std::max({r, g, b}), c = mx - std::min({r, g, b});
        if (c < kMinChroma || c < kMinSaturation * mx) continue;
        sat.push_back({r, g, b, hue_of(r, g, b), w});
      }
  }
  // Weighted hue histogram, smoothed circularly (1 2 3 2 1), peak within the allowed range.
  std::array<double, kBins> hist{}, smooth{};
  for (const auto& s : sat) hist[static_cast<size_t>(std::min(kBins - 1, static_cast<int>(s.hue / 5)))] += s.w;
  for (int i = 0; i < kBins; ++i)
    for (int k = -2; k <= 2; ++k)
      smooth[static_cast<size_t>(i)] += (3 - std::abs(k)) * hist[static_cast<size_t>((i + k + kBins) % kBins)];
  int peak = -1;
  for (int i = 0; i < kBins; ++i)
    if (hue_allowed(i * 5 + 2.5, want) && (peak < 0 || smooth[static_cast<size_t>(i)] > smooth[static_cast<size_t>(peak)]))
      peak = i;
  const double peak_hue = peak * 5 + 2.5;
  std::vector<float> rs, gs, bs;
  double in = 0;
  for (const auto& s : sat)
    if (hue_distance(s.hue, peak_hue) <= kHueWindow) {
      in += s.w;
      rs.push_back(s.r), gs.push_back(s.g), bs.push_back(s.b);
    }
  ScreenEstimate e;
  e.coverage = total > 0 ? in / total : 0;
  const std::string kind = want == Screen::Auto ? "green or blue" : to_string(want);
  CK_CHECK(e.coverage >= kMinCoverage && !rs.empty(), IoError, what, ": no ", kind,
           " backing found (", static_cast<int>(std::lround(e.coverage * 1000)) / 10.0,
           "% of the frame has its hue; at least ", kMinCoverage * 100,
           "% needed; --screen names the colour but does not lower this bar). A chroma hint "
           "cannot be made from it: give the clip an AlphaHint/ sequence");
  e.rgb[0] = median(rs), e.rgb[1] = median(gs), e.rgb[2] = median(bs);
  e.screen = e.rgb[1] >= e.rgb[2] ? Screen::Green : Screen::Blue;
  if (want != Screen::Auto) e.screen = want;
  return e;
}

void swap_green_blue(Image& image) {
  CK_CHECK(image.channels >= 3, IoError, "swap_green_blue: expected 3 or more channels, got ",
           image.channels);
  const size_t n = static_cast<size_t>(image.width) * image.height;
  for (size_t i = 0; i < n; ++i) {
    float* p = &image.pixels[i * static_cast<size_t>(image.channels)];
    std::swap(p[1], p[2]);
  }
}

CORRIDORKEY_NAMESPACE_END
