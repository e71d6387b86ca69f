// Generated hints: morphology against brute force, the backing estimate on green, blue and
// screenless plates, the chroma key against the synthetic clip's true alpha.
#include <corridorkey/errors.h>
#include <corridorkey/hint.h>

#include <catch2/catch.hpp>

#include "devtools/synthetic_clip.h"
#include "hint/morphology.h"
#include "post/postprocess.h"

#include <algorithm>
#include <cmath>
#include <random>

using namespace corridorkey;
using Catch::Matchers::Contains;

namespace {

std::vector<float> random_image(int w, int h, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> a(static_cast<size_t>(w) * h);
  for (auto& v : a) v = u(g);
  return a;
}

std::vector<float> brute_extreme(const std::vector<float>& a, int w, int h, int r, bool is_min) {
  std::vector<float> o(a.size());
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      float e = a[static_cast<size_t>(y) * w + x];
      for (int j = std::max(0, y - r); j <= std::min(h - 1, y + r); ++j)
        for (int i = std::max(0, x - r); i <= std::min(w - 1, x + r); ++i) {
          const float v = a[static_cast<size_t>(j) * w + i];
          e = is_min ? std::min(e, v) : std::max(e, v);
        }
      o[static_cast<size_t>(y) * w + x] = e;
    }
  return o;
}

std::vector<float> brute_box(std::vector<float> a, int w, int h, int r) {
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<float> t(a.size()), o(a.size());
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        double s = 0;
        for (int i = -r; i <= r; ++i) s += a[static_cast<size_t>(y) * w + std::clamp(x + i, 0, w - 1)];
        t[static_cast<size_t>(y) * w + x] = static_cast<float>(s / (2 * r + 1));
      }
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        double s = 0;
        for (int j = -r; j <= r; ++j) s += t[static_cast<size_t>(std::clamp(y + j, 0, h - 1)) * w + x];
        o[static_cast<size_t>(y) * w + x] = static_cast<float>(s / (2 * r + 1));
      }
    a = o;
  }
  return a;
}

/// The synthetic clip's plate, sRGB-encoded as the key sees it (the plate is scene-linear).
Image srgb_plate(const devtools::SyntheticClip& c, int f) {
  Image im = devtools::synthetic_plate(c, f);
  for (auto& v : im.pixels) v = post::linear_to_srgb(v);
  return im;
}

double mean_abs(const Image& a, const Image& b) {
  double s = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) s += std::fabs(a.pixels[i] - b.pixels[i]);
  return s / static_cast<double>(a.pixels.size());
}

}  // namespace

TEST_CASE("min / max filters and box blurs equal brute force", "[unit]") {
  for (auto [w, h, r] : {std::tuple{37, 23, 1}, {37, 23, 3}, {16, 40, 7}, {9, 5, 12}, {1, 30, 2}}) {
    const auto a = random_image(w, h, static_cast<unsigned>(w * 100 + r));
    for (bool is_min : {true, false}) {
      auto got = a;
      is_min ? hint::min_filter(got, w, h, r) : hint::max_filter(got, w, h, r);
      INFO(w << "x" << h << " r " << r << (is_min ? " min" : " max"));
      CHECK(got == brute_extreme(a, w, h, r, is_min));
    }
    auto blur = a;
    hint::box_blur3(blur, w, h, r);
    const auto ref = brute_box(a, w, h, r);
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(blur[i] - ref[i])));
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("the backing colour is estimated on green and blue plates, refused without one", "[unit]") {
  devtools::SyntheticClip c;
  const auto green = srgb_plate(c, 0);
  const auto e = estimate_screen({green.view()});
  CHECK(e.screen == Screen::Green);
  // The synthetic backing is linear (0.03, 0.45, 0.04).
  CHECK(e.rgb[1] == Approx(post::linear_to_srgb(0.45f)).margin(0.01));
  CHECK(e.rgb[0] == Approx(post::linear_to_srgb(0.03f)).margin(0.01));
  CHECK(e.coverage > 0.5);

  c.screen = "blue";
  const auto blue = srgb_plate(c, 0);
  const auto b = estimate_screen({blue.view()});
  CHECK(b.screen == Screen::Blue);
  CHECK(b.rgb[2] == Approx(post::linear_to_srgb(0.45f)).margin(0.01));
  // Asked for a green backing on a blue plate: none there.
  CHECK_THROWS_WITH(estimate_screen({blue.view()}, Screen::Green, "shot_b"),
                    Contains("shot_b") && Contains("no green backing"));

  // 8-bit and 16-bit views of the same plate give the same answer as float.
  std::vector<uint8_t> u8(green.pixels.size());
  for (size_t i = 0; i < u8.size(); ++i) u8[i] = static_cast<uint8_t>(std::lround(green.pixels[i] * 255));
  const auto e8 = estimate_screen({ImageView{u8.data(), green.width, green.height, 3, PixelType::UInt8, 0}});
  CHECK(e8.screen == Screen::Green);
  CHECK(e8.rgb[1] == Approx(e.rgb[1]).margin(2.0 / 255));

  // A plate with no backing: greys and skin tones.
  Image none = green;
  for (size_t i = 0; i < none.pixels.size(); i += 3) {
    const float t = static_cast<float>((i / 3) % 97) / 97.f;
    none.pixels[i] = 0.4f + 0.3f * t, none.pixels[i + 1] = 0.35f + 0.2f * t, none.pixels[i + 2] = 0.3f + 0.2f * t;
  }
  CHECK_THROWS_AS(estimate_screen({none.view()}, Screen::Auto, "shot_n"), IoError);
  CHECK_THROWS_WITH(estimate_screen({none.view()}, Screen::Auto, "shot_n"),
                    Contains("shot_n") && Contains("no green or blue backing"));
}

TEST_CASE("the chroma-key hint follows the true alpha, eroded and feathered", "[unit]") {
  devtools::SyntheticClip c;
  c.width = 480, c.height = 270, c.soft_edge_px = 3;
  const auto plate = srgb_plate(c, 1);
  const auto truth = devtools::synthetic_hint(c, 1);
  const auto screen = estimate_screen({plate.view()});
  // Without erosion and blur the key is the alpha, up to the soft rim.
  const auto raw = chroma_hint(plate.view(), screen, {0.0, 0.0});
  CHECK(mean_abs(raw, truth) < 0.01);
  // The defaults: the same shape, a little smaller (eroded), soft at the edge.
  const auto hint = chroma_hint(plate.view(), screen);
  CHECK(mean_abs(hint, truth) < 0.05);
  double area_hint = 0, area_truth = 0;
  int soft = 0;
  for (size_t i = 0; i < hint.pixels.size(); ++i) {
    area_hint += hint.pixels[i], area_truth += truth.pixels[i];
    soft += hint.pixels[i] > 0.05f && hint.pixels[i] < 0.95f;
  }
  CHECK(area_hint < area_truth);          // eroded
  CHECK(area_hint > 0.85 * area_truth);   // but only slightly
  CHECK(soft > 2 * raw.width);            // a feathered rim, not a hard edge
  // Far inside the subject 1, far out on the backing 0.
  CHECK(hint.at(static_cast<int>(c.width * 0.48), c.height / 2, 0) == Approx(1.0f));
  CHECK(hint.at(5, 5, 0) == Approx(0.0f));

  // A blue backing keys the same subject to the same hint.
  c.screen = "blue";
  const auto bplate = srgb_plate(c, 1);
  const auto bscreen = estimate_screen({bplate.view()});
  REQUIRE(bscreen.screen == Screen::Blue);
  CHECK(mean_abs(chroma_hint(bplate.view(), bscreen), hint) < 0.01);
}

TEST_CASE("swap_green_blue exchanges the second and third channel only", "[unit]") {
  Image im;
  im.width = 2, im.height = 1, im.channels = 4;
  im.pixels = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  swap_green_blue(im);
  CHECK(im.pixels == std::vector<float>{0.1f, 0.3f, 0.2f, 0.4f, 0.5f, 0.7f, 0.6f, 0.8f});
  Image grey;
  grey.width = grey.height = grey.channels = 1;
  grey.pixels = {0.5f};
  CHECK_THROWS_AS(swap_green_blue(grey), IoError);
}
