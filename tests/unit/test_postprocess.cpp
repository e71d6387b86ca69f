// Post-processing formulas with known values (pipeline.md).
#include "io/image_io.h"
#include "post/postprocess.h"
#include "support/support.h"

#include <corridorkey/frame.h>

#include <catch2/catch.hpp>
#include <opencv2/imgcodecs.hpp>

#include <algorithm>
#include <cmath>

using namespace corridorkey;
namespace post = corridorkey::post;

namespace {
Image filled(int w, int h, std::vector<float> px) {
  Image im;
  im.width = w;
  im.height = h;
  im.channels = static_cast<int>(px.size());
  im.pixels.resize(static_cast<size_t>(w) * h * px.size());  // (not insert(): g++ 12 warns falsely)
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = px[i % px.size()];
  return im;
}
}  // namespace

TEST_CASE("comp and processed known values", "[unit]") {
  const auto alpha = filled(4, 4, {0.8f});
  const auto fg = filled(4, 4, {0.6f, 0.6f, 0.6f});
  const auto comp = post::checker_comp(fg, alpha);
  CHECK(comp.at(0, 0, 0) == Approx(0.545655).margin(1e-5));  // first (dark) checker square
  const auto proc = post::premultiply_linear(fg, alpha);
  CHECK(proc.at(1, 1, 0) == Approx(post::srgb_to_linear(0.6f) * 0.8f).margin(1e-7));
  CHECK(proc.at(1, 1, 3) == 0.8f);
  // Light square starts at x = 128.
  const auto wide = post::checker_comp(filled(130, 1, {0.6f, 0.6f, 0.6f}), filled(130, 1, {0.0f}));
  CHECK(wide.at(0, 0, 0) == Approx(0.15).margin(1e-6));
  CHECK(wide.at(129, 0, 0) == Approx(0.55).margin(1e-6));
}

TEST_CASE("Comp PNG truncates after clamping, as the reference writes it", "[unit]") {
  const auto dir = ck_test::temp_dir("png8");
  // One grey channel: value -> byte, (clip(v, 0, 1) * 255).astype(np.uint8) in float32.
  const std::vector<std::pair<float, int>> known{
      {0.545655f, 139}, {0.999f, 254}, {1.0f, 255}, {0.0f, 0}, {0.9999f, 254},
      {0.5f, 127}, {1.0f / 255.0f, 1}, {0.00392f, 0}, {-0.5f, 0}, {1.5f, 255},
      {std::nanf(""), 0}};
  Image grey;
  grey.width = static_cast<int>(known.size());
  grey.height = 1;
  grey.channels = 1;
  for (const auto& [v, b] : known) grey.pixels.push_back(v);
  const auto p = (dir / "grey.png").string();
  io::write_png8(p, grey);
  const auto m = cv::imread(p, cv::IMREAD_UNCHANGED);
  REQUIRE((m.rows == 1 && m.cols == grey.width && m.type() == CV_8UC1));
  for (size_t i = 0; i < known.size(); ++i) {
    INFO("value " << known[i].first);
    CHECK(static_cast<int>(m.at<uint8_t>(0, static_cast<int>(i))) == known[i].second);
  }
  // The comp itself: fg 0.6 over the dark checker at alpha 0.8 is 0.545655 -> 139 (RGB).
  const auto comp = post::checker_comp(filled(2, 2, {0.6f, 0.6f, 0.6f}), filled(2, 2, {0.8f}));
  const auto pc = (dir / "comp.png").string();
  io::write_png8(pc, comp);
  const auto c = cv::imread(pc, cv::IMREAD_UNCHANGED);
  REQUIRE(c.type() == CV_8UC3);
  CHECK(c.at<cv::Vec3b>(0, 0) == cv::Vec3b(139, 139, 139));
  std::filesystem::remove_all(dir);
}

TEST_CASE("transfer functions", "[unit]") {
  CHECK(post::srgb_to_linear(0.04045f) == Approx(0.04045 / 12.92));
  CHECK(post::linear_to_srgb(post::srgb_to_linear(0.7f)) == Approx(0.7f).margin(1e-6));
  CHECK(post::linear_to_srgb(-1.f) == 0.f);  // clamped
}

TEST_CASE("despill average mode", "[unit]") {
  auto g = post::despill(filled(1, 1, {0.f, 1.f, 0.f}), 1.f);
  CHECK(g.pixels[1] == Approx(0.f));
  CHECK(g.pixels[0] == Approx(0.5f));
  auto m = post::despill(filled(1, 1, {0.4f, 0.8f, 0.2f}), 1.f);
  CHECK(m.pixels[1] == Approx(0.3f));
  CHECK(m.pixels[0] == Approx(0.65f));
  CHECK(m.pixels[2] == Approx(0.45f));
  auto half = post::despill(filled(1, 1, {0.4f, 0.8f, 0.2f}), 0.5f);
  CHECK(half.pixels[1] == Approx(0.55f));
  auto none = post::despill(filled(1, 1, {0.9f, 0.5f, 0.1f}), 1.f);  // G below (R+B)/2: untouched
  CHECK(none.pixels == std::vector<float>{0.9f, 0.5f, 0.1f});
}

TEST_CASE("despeckle removes small blobs, keeps large ones", "[unit]") {
  Image a = filled(200, 120, {0.f});
  auto set = [&](int x0, int y0, int w, int h, float v) {
    for (int y = y0; y < y0 + h; ++y)
      for (int x = x0; x < x0 + w; ++x) a.pixels[y * 200 + x] = v;
  };
  set(10, 10, 30, 30, 1.f);   // 900 px: kept
  set(150, 60, 10, 10, 1.f);  // 100 px: removed
  set(100, 100, 19, 21, 0.9f); // 399 px: removed (area >= 400 is kept)
  const auto c = post::despeckle(a, 400);
  CHECK(c.pixels[25 * 200 + 25] == Approx(1.f));
  CHECK(c.pixels[65 * 200 + 155] == 0.f);
  CHECK(c.pixels[110 * 200 + 110] == 0.f);
  // Diagonal touching pixels are one component (8-connectivity): 20x20 + 20x20 = 800.
  Image d = filled(100, 100, {0.f});
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 20; ++x) {
      d.pixels[y * 100 + x] = 1.f;
      d.pixels[(y + 20) * 100 + x + 20] = 1.f;
    }
  const auto dc = post::despeckle(d, 600);
  CHECK(dc.pixels[30 * 100 + 30] == Approx(1.f));
  // The 51x51 dilation keeps soft alpha near a kept blob: 20 px away is still inside.
  Image s = filled(200, 200, {0.f});
  for (int y = 80; y < 120; ++y)
    for (int x = 80; x < 120; ++x) s.pixels[y * 200 + x] = 1.f;
  s.pixels[100 * 200 + 135] = 0.3f;  // 15 px right of the blob edge: below 0.5, not a component
  const auto sc = post::despeckle(s, 400);
  CHECK(sc.pixels[100 * 200 + 135] == Approx(0.3f));
}

TEST_CASE("Lanczos-4 resize keeps constants and size", "[unit]") {
  const auto r = post::resize_lanczos(filled(16, 16, {0.25f, 0.5f, 0.75f}), 40, 24);
  CHECK((r.width == 40 && r.height == 24 && r.channels == 3));
  CHECK(r.at(39, 23, 2) == Approx(0.75f).margin(1e-5));
}

// finish_frame (frame.h) computes processed and comp through the shared linear fg, on any
// number of threads, with or without a kept despeckled alpha: every path must give the
// bytes of the reference's formulas applied one by one, single-threaded.
TEST_CASE("finish_frame: shared linear fg, threads and a kept despeckle give the steps' bytes", "[unit]") {
  const int w = 700, h = 420;  // above the 256 K-pixel threshold where rows are split
  RawFrame raw;
  raw.alpha.width = raw.fg.width = w;
  raw.alpha.height = raw.fg.height = h;
  raw.alpha.channels = 1;
  raw.fg.channels = 3;
  raw.alpha.pixels.resize(static_cast<size_t>(w) * h);
  raw.fg.pixels.resize(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const size_t i = static_cast<size_t>(y) * w + x;
      const float d = std::hypot(x - 350.f, y - 210.f);
      raw.alpha.pixels[i] = std::clamp((150.f - d) / 12.f + 0.5f, -0.02f, 1.03f);  // Lanczos-like overshoot
      if (x % 97 == 3 && y % 53 == 5) raw.alpha.pixels[i] = 1.f;  // small islands despeckle removes
      for (int c = 0; c < 3; ++c)
        raw.fg.pixels[i * 3 + c] = 0.2f + 0.3f * c + 0.0009f * static_cast<float>(x % 300) + (c == 1 ? 0.1f : 0.f);
    }
  for (const float strength : {0.7f, 0.f})
  for (const Screen backing : {Screen::Green, Screen::Blue}) {
    INFO("despill " << strength << ", backing " << (backing == Screen::Blue ? "blue" : "green"));
    // The reference's formulas one by one, each sRGB -> linear done inside its own step.
    const Image clean = post::despeckle(raw.alpha, 400);
    const Image spill_free = post::despill(raw.fg, strength, backing == Screen::Blue ? 2 : 1);
    const FinishedFrame ref{post::premultiply_linear(spill_free, clean), post::checker_comp(spill_free, clean)};
    // ... and the full-frame steps the fused row pass replaced.
    const Image linear = post::to_linear(spill_free, 2);
    CHECK(post::premultiply_from_linear(linear, clean, 2).pixels == ref.processed.pixels);
    CHECK(post::checker_comp_from_linear(linear, clean, 2).pixels == ref.comp.pixels);
    PostSettings ps;
    ps.despill_strength = strength;
    ps.backing = backing;
    for (int threads : {1, 2, 5}) {
      ps.threads = threads;
      const auto both = finish_frame(raw, ps, true, true);
      CHECK(both.processed.pixels == ref.processed.pixels);
      CHECK(both.comp.pixels == ref.comp.pixels);
      const auto kept = despeckled_alpha(raw, ps);
      const auto reused = finish_frame(raw, ps, true, false, &kept);
      CHECK(reused.processed.pixels == ref.processed.pixels);
      CHECK(reused.comp.empty());
      const auto comp_only = finish_frame(raw, ps, false, true, &kept);
      CHECK(comp_only.comp.pixels == ref.comp.pixels);
      CHECK(comp_only.processed.empty());
    }
    CHECK(finish_frame(raw, ps, false, false).processed.empty());
  }
  // The despeckle is not a no-op on this frame (else the kept-alpha check proves nothing).
  PostSettings ps;
  CHECK(despeckled_alpha(raw, ps).pixels != raw.alpha.pixels);
  ps.despeckle = false;
  CHECK(despeckled_alpha(raw, ps).pixels == raw.alpha.pixels);
}
