// Garbage and holdout mattes (docs/clips.md, "Garbage and holdout mattes"): the channel rule,
// the formula's exact 0 and 1, the despeckle clamp, and a display-window matte placed on an
// overscan plate.
#include "io/plate_metadata.h"
#include "pipeline/frame_mattes.h"
#include "post/mattes.h"
#include "runtime/frame_tensors.h"

#include <corridorkey/check.h>
#include <corridorkey/frame.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

using namespace corridorkey;

namespace {
Image image(int w, int h, int c, std::vector<float> px) {
  Image im;
  im.width = w;
  im.height = h;
  im.channels = c;
  im.pixels = std::move(px);
  REQUIRE(im.pixels.size() == static_cast<size_t>(w) * h * c);
  return im;
}
pipeline::MatteRead read(Image im) { return {std::move(im), nullptr}; }
}  // namespace

TEST_CASE("matte_plane: the hint's channel rule, NaN to 0, clamped", "[unit]") {
  std::string note;
  // One channel: as is, except NaN/Inf and out-of-range values.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto one = post::matte_plane(image(5, 1, 1, {0.25f, nan, inf, 1.7f, -0.5f}), &note);
  CHECK(one.channels == 1);
  CHECK(one.pixels == std::vector<float>{0.25f, 0.f, 0.f, 1.f, 0.f});
  CHECK(note == "NaN or infinite samples read as 0");
  // Grey saved as RGB: R.
  auto grey = post::matte_plane(image(2, 1, 3, {0.5f, 0.5f, 0.5f, 1.f, 1.f, 1.f}), &note);
  CHECK(grey.pixels == std::vector<float>{0.5f, 1.f});
  CHECK(note.empty());
  // RGBA with black colour (a painted alpha): A.
  auto alpha = post::matte_plane(image(2, 1, 4, {0, 0, 0, 0.75f, 0, 0, 0, 1.f}), &note);
  CHECK(alpha.pixels == std::vector<float>{0.75f, 1.f});
  CHECK(note.find("alpha") != std::string::npos);
  // Opaque black is an empty matte (an unpainted frame saved as RGBA), not a full one.
  note.clear();
  auto opaque = post::matte_plane(image(2, 1, 4, {0, 0, 0, 1.f, 0, 0, 0, 1.f}), &note);
  CHECK(opaque.pixels == std::vector<float>{0.f, 0.f});
  CHECK(note.empty());
  // White colour over a shape in alpha reads as white, and says its alpha is not used.
  auto straight = post::matte_plane(image(2, 1, 4, {1, 1, 1, 0.f, 1, 1, 1, 1.f}), &note);
  CHECK(straight.pixels == std::vector<float>{1.f, 1.f});
  CHECK(note.find("alpha channel is not opaque") != std::string::npos);
  // The hint follows the same rule (it once took R for black colour: an all-zero hint).
  const std::vector<float> painted{0, 0, 0, 0.75f, 0, 0, 0, 0.25f};
  auto t = corridorkey::detail::hint_to_tensor(image(2, 1, 4, painted).view(), &note);
  CHECK(t.size(2) == 1);
  CHECK(t[0][0][0].item<float>() == 0.75f);
  CHECK(t[0][1][0].item<float>() == 0.25f);
  const std::vector<float> opaque_black{0, 0, 0, 1.f, 0, 0, 0, 1.f};
  CHECK(corridorkey::detail::hint_to_tensor(image(2, 1, 4, opaque_black).view()).max().item<float>() == 0.f);
  // Coloured: max(R, G, B), said in the note.
  note.clear();
  auto colour = post::matte_plane(image(2, 1, 3, {0.1f, 0.9f, 0.2f, 0.3f, 0.f, 0.f}), &note);
  CHECK(colour.pixels == std::vector<float>{0.9f, 0.3f});
  CHECK(note.find("max(R, G, B)") != std::string::npos);
}

TEST_CASE("apply_mattes: exactly 0 under garbage, exactly 1 under holdout", "[unit]") {
  const std::vector<float> a0{0.9f, 0.4f, 0.6f, 0.2f, 1.f, 0.33f};
  auto alpha = image(6, 1, 1, a0);
  const auto garbage = image(6, 1, 1, {1.f, 0.5f, 0.f, 0.f, 1.f, 0.f});
  const auto holdout = image(6, 1, 1, {0.f, 0.f, 1.f, 0.5f, 1.f, 0.f});
  post::apply_mattes(alpha, &garbage, &holdout);
  for (size_t i = 0; i < a0.size(); ++i) {
    const float want = std::max(a0[i] * (1.f - garbage.pixels[i]), holdout.pixels[i]);
    CHECK(alpha.pixels[i] == want);
  }
  CHECK(alpha.pixels[0] == 0.f);   // garbage 1
  CHECK(alpha.pixels[2] == 1.f);   // holdout 1
  CHECK(alpha.pixels[3] == 0.5f);  // holdout's grey is the floor
  CHECK(alpha.pixels[4] == 1.f);   // both: holdout wins
  CHECK(alpha.pixels[5] == 0.33f); // neither: untouched

  // Either may be absent.
  auto only_g = image(2, 1, 1, {0.5f, 0.5f});
  const auto g = image(2, 1, 1, {1.f, 0.f});
  post::apply_mattes(only_g, &g, nullptr);
  CHECK(only_g.pixels == std::vector<float>{0.f, 0.5f});

  // A matte of another size is refused, not read out of bounds.
  auto small = image(2, 1, 1, {0.5f, 0.5f});
  CHECK_THROWS_AS(post::apply_mattes(small, &garbage, nullptr), ConfigError);
}

TEST_CASE("clamp_to_mattes is idempotent on a matted alpha and restores the bounds", "[unit]") {
  auto alpha = image(5, 1, 1, {0.9f, 0.4f, 0.6f, 0.2f, 0.8f});
  const auto garbage = image(5, 1, 1, {1.f, 0.5f, 0.f, 0.f, 0.25f});
  const auto holdout = image(5, 1, 1, {0.f, 0.f, 1.f, 0.5f, 0.f});
  post::apply_mattes(alpha, &garbage, &holdout);
  auto again = alpha;
  post::clamp_to_mattes(again, &garbage, &holdout);
  CHECK(again.pixels == alpha.pixels);  // not a second multiply (0.8 x 0.75 x 0.75)
  // An alpha a later stage pushed past the bounds (a despeckle filling a hole) comes back in.
  auto pushed = image(5, 1, 1, {0.7f, 0.9f, 0.f, 0.1f, 1.f});
  post::clamp_to_mattes(pushed, &garbage, &holdout);
  CHECK(pushed.pixels == std::vector<float>{0.f, 0.5f, 1.f, 0.5f, 0.75f});
}

TEST_CASE("apply_garbage multiplies the hint", "[unit]") {
  auto hint = image(3, 1, 1, {1.f, 1.f, 0.5f});
  post::apply_garbage(hint, image(3, 1, 1, {1.f, 0.25f, 0.f}));
  CHECK(hint.pixels == std::vector<float>{0.f, 0.75f, 0.5f});
}

TEST_CASE("frame_mattes: plate size as is, display window placed, else an error naming the file",
          "[unit]") {
  std::vector<std::string> warnings;
  // Plate-sized: as it is.
  auto same = pipeline::frame_mattes(read(image(2, 2, 1, {1, 0, 0, 1})), "g.png", {}, "", 2, 2, nullptr,
                                     warnings);
  REQUIRE(same);
  CHECK(same->garbage.pixels == std::vector<float>{1, 0, 0, 1});
  CHECK(same->holdout.empty());
  CHECK(pipeline::frame_mattes({}, "", {}, "", 2, 2, nullptr, warnings) == nullptr);

  // An overscan plate: a 4x2 keyed frame with a 2x1 display window at (1, 1) in it.
  io::PlateMetadata meta;
  meta.frame = {0, 0, 3, 1};
  meta.display = {1, 1, 2, 1};
  REQUIRE(meta.overscan());
  auto placed = pipeline::frame_mattes({}, "", read(image(2, 1, 1, {0.5f, 1.f})), "h.exr", 4, 2, &meta,
                                       warnings);
  REQUIRE(placed);
  CHECK(placed->holdout.width == 4);
  CHECK(placed->holdout.pixels == std::vector<float>{0, 0, 0, 0, 0, 0.5f, 1.f, 0});
  // The data window's size covers it as is.
  auto whole = pipeline::frame_mattes(read(image(4, 2, 1, std::vector<float>(8, 1.f))), "g.exr", {}, "",
                                      4, 2, &meta, warnings);
  CHECK(whole->garbage.pixels == std::vector<float>(8, 1.f));

  // Any other size names the file.
  try {
    pipeline::frame_mattes(read(image(3, 3, 1, std::vector<float>(9, 0.f))), "shot/GarbageMatte/0007.png",
                           {}, "", 4, 2, &meta, warnings);
    FAIL("a 3x3 matte on a 4x2 frame was accepted");
  } catch (const IoError& e) {
    CHECK(std::string(e.what()).find("shot/GarbageMatte/0007.png") != std::string::npos);
  }
  CHECK_THROWS_AS(pipeline::frame_mattes({}, "", read(image(1, 1, 1, {1.f})), "h.png", 2, 2, nullptr,
                                         warnings),
                  IoError);

  // An EXR matte in the plate's coordinates is placed by its windows: one rendered with the
  // plate's overscan covers it; one with overscan on a plate without is cropped to the plate.
  auto with_windows = [](Image im, io::PixelBox frame, io::PixelBox display) {
    auto w = std::make_shared<io::PlateMetadata>();
    w->frame = frame;
    w->display = display;
    return pipeline::MatteRead{std::move(im), w};
  };
  auto own = pipeline::frame_mattes(
      with_windows(image(4, 2, 1, {.1f, .2f, .3f, .4f, .5f, .6f, .7f, .8f}), meta.frame, meta.display), "g.exr", {},
      "", 4, 2, &meta, warnings);
  CHECK(own->garbage.pixels == std::vector<float>{.1f, .2f, .3f, .4f, .5f, .6f, .7f, .8f});
  auto cropped = pipeline::frame_mattes(
      with_windows(image(4, 2, 1, {0, 0, 0, 0, 0, 0.5f, 0.25f, 0}), {-1, -1, 2, 0}, {0, 0, 1, 0}),
      "g.exr", {}, "", 2, 1, nullptr, warnings);
  CHECK(cropped->garbage.pixels == std::vector<float>{0.5f, 0.25f});
}
