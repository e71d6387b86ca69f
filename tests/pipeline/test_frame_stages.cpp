// The frame stages (pipeline/frame_stages.h) that every entry runs: the intended changes of
// issue 39 each proven through the public entries, with the bundled tiny random model (the
// outputs need not be good mattes, only the same bits whichever way a frame comes in).
#include <corridorkey/engine.h>
#include <corridorkey/frame.h>
#include <corridorkey/pipeline.h>
#include <corridorkey/profile.h>

#include <catch2/catch.hpp>

#include "colour/primaries.h"
#include "devtools/synthetic_clip.h"
#include "io/image_io.h"
#include "support/support.h"

#include <cmath>
#include <tuple>
#include <filesystem>
#include <limits>

using namespace corridorkey;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

std::unique_ptr<BaseEngine> tiny_engine() {
  auto o = load_profile("original");
  o.model.checkpoint = (fs::path(data_dir()) / "checkpoints" / "greenformer_tiny_random128.ts").string();
  o.model.device = "cpu";
  o.model.tune = TuneMode::Off;
  return create_engine(o.model, o.engine);
}

devtools::SyntheticClip spec(const std::string& screen = "green") {
  devtools::SyntheticClip c;
  c.width = 160, c.height = 96, c.screen = screen;
  c.soft_edge_px = 6;
  return c;
}

/// `im` quantised to 8-bit levels through a uint8 view, as a PNG of it reads back.
Image as_8bit(const Image& im, std::vector<unsigned char>& levels) {
  levels.resize(im.pixels.size());
  for (size_t i = 0; i < levels.size(); ++i)
    levels[i] = static_cast<unsigned char>(std::lround(std::clamp(im.pixels[i], 0.f, 1.f) * 255.f));
  return image_from_view({levels.data(), im.width, im.height, im.channels, PixelType::UInt8, 0});
}

Image grey_of(const Image& rgb) {  // one channel: the plate's green
  Image g;
  g.width = rgb.width, g.height = rgb.height, g.channels = 1;
  g.pixels.resize(static_cast<size_t>(rgb.width) * rgb.height);
  for (size_t i = 0; i < g.pixels.size(); ++i) g.pixels[i] = rgb.pixels[i * 3 + 1];
  return g;
}

Image replicated(const Image& grey) {
  Image r;
  r.width = grey.width, r.height = grey.height, r.channels = 3;
  for (float v : grey.pixels) r.pixels.insert(r.pixels.end(), {v, v, v});
  return r;
}

void same_outputs(const FrameResult& a, const FrameResult& b) {
  CHECK(a.alpha.pixels == b.alpha.pixels);
  CHECK(a.fg.pixels == b.fg.pixels);
  CHECK(a.processed.pixels == b.processed.pixels);
  CHECK(a.comp.pixels == b.comp.pixels);
}

bool has(const std::vector<std::string>& v, const std::string& part) {
  for (const auto& s : v)
    if (s.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("frame stages: a grey plate keys as its RGB copy in process_frame, key_frame and a clip", "[pipeline]") {
  auto e = tiny_engine();
  std::vector<unsigned char> plate_levels, hint_levels;
  const Image grey = as_8bit(grey_of(devtools::synthetic_plate(spec(), 1)), plate_levels);
  const Image hint = as_8bit(devtools::synthetic_hint(spec(), 1), hint_levels);
  const Image rgb = replicated(grey);
  // process_frame (refused grey plates before: "expected at least 3 channels")
  const auto from_grey = e->process_frame(grey.view(), hint.view(), Screen::Green);
  same_outputs(from_grey, e->process_frame(rgb.view(), hint.view(), Screen::Green));
  // The host's 8-bit levels convert as the PNG reader converts them (one conversion for
  // every entry: image_from_view), so they key as the PNG file below does.
  const ImageView plate8{plate_levels.data(), grey.width, grey.height, 1, PixelType::UInt8, 0};
  const ImageView hint8{hint_levels.data(), hint.width, hint.height, 1, PixelType::UInt8, 0};
  same_outputs(e->process_frame(plate8, hint8, Screen::Green), from_grey);
  // key_frame, from memory and from a grey 8-bit PNG
  const auto root = ck_test::temp_dir("stages_grey");
  fs::create_directories(root / "clip" / "Input");
  fs::create_directories(root / "clip" / "AlphaHint");
  io::write_png8((root / "clip" / "Input" / "0001.png").string(), grey, /*round=*/true);
  io::write_png8((root / "clip" / "AlphaHint" / "0001.png").string(), hint, /*round=*/true);
  FrameSettings s;
  s.screen = Screen::Green;
  FrameSource src;
  src.plate_file = (root / "clip" / "Input" / "0001.png").string();
  src.hint_file = (root / "clip" / "AlphaHint" / "0001.png").string();
  const RawFrame raw = key_frame(*e, nullptr, src, s);
  CHECK(raw.alpha.pixels == from_grey.alpha.pixels);
  CHECK(raw.fg.pixels == from_grey.fg.pixels);
  // the clip pipeline: the same matte file as the single frame's
  InferenceOptions job;
  job.paths = {(root / "clip").string()};
  job.screen = Screen::Green;
  job.fg = job.comp = job.processed = false;
  run_inference(*e, job, {});
  write_frame_output(FrameOutput::Matte, (root / "single.exr").string(), raw.alpha, raw);
  CHECK(ck_test::read_file((root / "single.exr").string()) ==
        ck_test::read_file((root / "clip" / "Output" / "Matte" / "0001.exr").string()));
}

TEST_CASE("frame stages: NaN and Inf samples are cleaned and told in every entry point", "[pipeline]") {
  auto e = tiny_engine();
  Image plate = devtools::synthetic_plate(spec(), 2);
  const Image hint = devtools::synthetic_hint(spec(), 2);
  Image dirty = plate;
  for (size_t i = 0; i < 30; ++i) {  // bad samples of the backing and of the subject
    plate.pixels[i * 97] = 0.f;
    plate.pixels[dirty.pixels.size() / 2 + i * 3] = 0.f;
    dirty.pixels[i * 97] = std::numeric_limits<float>::quiet_NaN();
    dirty.pixels[dirty.pixels.size() / 2 + i * 3] = i % 2 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  }
  const auto clean = e->process_frame(plate.view(), hint.view(), Screen::Green);
  const auto cleaned = e->process_frame(dirty.view(), hint.view(), Screen::Green);
  same_outputs(cleaned, clean);
  CHECK(has(cleaned.warnings, "60 NaN/Inf samples in the plate set to 0"));
  CHECK_FALSE(has(clean.warnings, "NaN"));
  FrameSource src;
  src.plate = dirty;
  src.hint = hint;
  FrameSettings s;
  s.screen = Screen::Green;
  const RawFrame raw = key_frame(*e, nullptr, src, s);
  CHECK(raw.alpha.pixels == clean.alpha.pixels);
  CHECK(has(raw.warnings, "60 NaN/Inf samples in the plate set to 0"));
}

TEST_CASE("process_frame: Screen::Auto estimates this plate's backing", "[pipeline]") {
  auto e = tiny_engine();
  const Image green = devtools::synthetic_plate(spec("green"), 0);
  const Image blue = devtools::synthetic_plate(spec("blue"), 0);
  const Image hint = devtools::synthetic_hint(spec(), 0);
  const auto blue_auto = e->process_frame(blue.view(), hint.view(), Screen::Auto);
  CHECK(blue_auto.backing == Screen::Blue);
  same_outputs(blue_auto, e->process_frame(blue.view(), hint.view(), Screen::Blue));
  const auto green_auto = e->process_frame(green.view(), hint.view(), Screen::Auto);
  CHECK(green_auto.backing == Screen::Green);
  same_outputs(green_auto, e->process_frame(green.view(), hint.view(), Screen::Green));
  // Keyed as blue, not as green: the two backings give different mattes for the blue plate.
  CHECK(blue_auto.alpha.pixels != e->process_frame(blue.view(), hint.view(), Screen::Green).alpha.pixels);
  // A plate with no backing to find: Auto with a given hint keys it green, and says so.
  Image grey = green;
  for (auto& v : grey.pixels) v = 0.5f;
  const auto none = e->process_frame(grey.view(), hint.view(), Screen::Auto);
  CHECK(none.backing == Screen::Green);
  CHECK(has(none.warnings, "backing colour not estimated"));
}

TEST_CASE("frame stages: Processed and FG chromaticities come from the frame's colour decisions", "[pipeline]") {
  auto e = tiny_engine();
  const auto root = ck_test::temp_dir("stages_xy");
  FrameSource src;
  src.plate = devtools::synthetic_plate(spec(), 3);
  src.hint = devtools::synthetic_hint(spec(), 3);
  auto gamut_of = [](const std::string& exr) {
    const auto h = io::read_colour_hints(exr);
    REQUIRE(h.has_chromaticities);
    return colour::match_gamut(h.chromaticities, "ap0,ap1,rec709").value_or("other");
  };
  auto key = [&](const FrameSettings& s, const std::string& tag) {
    const RawFrame raw = key_frame(*e, nullptr, src, s);
    const auto done = finish_frame(raw, post_settings(e->settings(), raw.backing), true, false);
    const auto p = (root / (tag + "_processed.exr")).string(), f = (root / (tag + "_fg.exr")).string();
    write_frame_output(FrameOutput::Processed, p, done.processed, raw);
    write_frame_output(FrameOutput::Fg, f, raw.fg, raw);
    return std::pair{p, f};
  };
  FrameSettings s;
  s.screen = Screen::Green;
  const auto [srgb_p, srgb_f] = key(s, "srgb");  // an sRGB plate: Processed scene-linear Rec.709
  CHECK(gamut_of(srgb_p) == "rec709");
  CHECK_FALSE(io::read_colour_hints(srgb_f).has_chromaticities);  // FG: sRGB, untagged
  s.input_colorspace = "acescg";  // Processed in the input's space by default, tagged AP1
  const auto [ap1_p, ap1_f] = key(s, "acescg");
  CHECK(gamut_of(ap1_p) == "ap1");
  s.output_colorspace = "aces2065-1";
  s.fg_colorspace = "acescg";
  const auto [ap0_p, ap0_f] = key(s, "aces");
  CHECK(gamut_of(ap0_p) == "ap0");
  CHECK(gamut_of(ap0_f) == "ap1");
  // The values moved with the tags: AP0 Processed differs from AP1 Processed.
  CHECK(ck_test::read_file(ap0_p) != ck_test::read_file(ap1_p));
  // The host-buffer entry delivers the outputs in those spaces too.
  FrameSettings hs = s;
  const auto r = key_frame(*e, nullptr, src.plate.view(), src.hint.view(), hs);
  const RawFrame raw = key_frame(*e, nullptr, src, s);
  const auto done = finish_frame(raw, post_settings(e->settings(), raw.backing), true, true);
  Image scratch;
  CHECK(r.processed.pixels == output_image(FrameOutput::Processed, done.processed, raw, scratch).pixels);
  CHECK(r.processed.pixels != done.processed.pixels);
  CHECK(r.fg.pixels == output_image(FrameOutput::Fg, raw.fg, raw, scratch).pixels);
}

TEST_CASE("a repostable frame finishes as finish_frame does, its despeckle memo reused or redone", "[pipeline]") {
  auto e = tiny_engine();
  FrameSource src;
  src.plate = devtools::synthetic_plate(spec(), 2);
  src.hint = devtools::synthetic_hint(spec(), 2);
  FrameSettings s;
  s.screen = Screen::Green;
  const RepostableFrame frame(key_frame(*e, nullptr, src, s));
  PostSettings post = post_settings(e->settings(), frame.raw().backing);
  post.despeckle = true;
  post.despeckle_size = 20;
  post.threads = single_frame_post_threads();
  CHECK(post.threads >= 1);
  CHECK(post.threads <= 8);
  FinishedFrame out;
  // Each step as a slider would move it: despill alone (the memo serves), despeckle size
  // (recomputed), despeckle off (the raw alpha), on again; each equals a fresh finish_frame.
  for (auto [despill, despeckle, size] : {std::tuple{0.5, true, 20}, {0.9, true, 20}, {0.9, true, 400},
                                          {0.2, false, 400}, {0.2, true, 20}}) {
    INFO(despill << " " << despeckle << " " << size);
    post.despill_strength = despill;
    post.despeckle = despeckle;
    post.despeckle_size = size;
    frame.finish(post, true, true, out);
    const auto fresh = finish_frame(frame.raw(), post, true, true);
    CHECK(out.processed.pixels == fresh.processed.pixels);
    CHECK(out.comp.pixels == fresh.comp.pixels);
  }
  // With the engine's settings: the same bits as post_settings of them on that backing.
  EngineSettings es = e->settings();
  es.despill_strength = 0.3;
  FinishedFrame with_settings;
  frame.finish(es, Screen::Green, true, true, with_settings);
  const auto fresh = finish_frame(frame.raw(), post_settings(es, Screen::Green), true, true);
  CHECK(with_settings.processed.pixels == fresh.processed.pixels);
  CHECK(with_settings.comp.pixels == fresh.comp.pixels);
  frame.finish(post, false, true, out);  // an output not asked for is emptied
  CHECK(out.processed.empty());
  CHECK_FALSE(out.comp.empty());
  CHECK(frame.bytes() >= frame.raw().alpha.pixels.size() * 2 * sizeof(float));
}
