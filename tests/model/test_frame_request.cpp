// FrameRequest: only the outputs asked for, the same bits as a full request, written into
// the host's own buffers in their pixel type (Float16 included).
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/profile.h>

#include <catch2/catch.hpp>

#include "io/image_io.h"

#include <c10/util/Half.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace corridorkey;

namespace {

std::string sample(const std::string& folder, const std::string& name) {
  const char* src = std::getenv("CK_SOURCE_DIR");
  REQUIRE(src);
  return std::string(src) + "/samples/greenscreen_demo/" + folder + "/" + name;
}

Profile bundled() {
  auto o = load_profile("original");
  o.model.checkpoint = "";  // the bundled default checkpoint
  o.model.device = "cpu";
  o.model.model_precision = Precision::Float32;
  return o;
}

uint16_t to_half_bits(float f) { return c10::Half(f).x; }  // LibTorch's own rounding

double ms_of(BaseEngine& e, const Image& plate, const Image& hint, const FrameRequest& r) {
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto res = e.process_frame(plate.view(), hint.view(), Screen::Green, r);
    best = std::min(best, res.timings.postprocess_ms);
  }
  return best;
}

}  // namespace

TEST_CASE("FrameRequest: only the matte, the same bits, no post-processing paid", "[model][embedding]") {
  OriginalEngine e(bundled());
  const auto plate = io::read_image(sample("Input", "frame_0001.png"));
  const auto hint = io::read_image(sample("AlphaHint", "frame_0001.png"));
  const auto full = e.process_frame(plate.view(), hint.view(), Screen::Green, FrameRequest{});
  REQUIRE_FALSE(full.processed.empty());
  REQUIRE_FALSE(full.comp.empty());
  const auto only = e.process_frame(plate.view(), hint.view(), Screen::Green, FrameRequest::only_matte());
  CHECK(only.alpha.pixels == full.alpha.pixels);
  CHECK(only.fg.empty());
  CHECK(only.processed.empty());
  CHECK(only.comp.empty());

  FrameRequest proc;  // processed alone: the same processed bits, no fg or comp kept
  proc.matte = proc.fg = proc.comp = false;
  const auto p = e.process_frame(plate.view(), hint.view(), Screen::Green, proc);
  CHECK(p.processed.pixels == full.processed.pixels);
  CHECK(p.alpha.empty());
  CHECK(p.fg.empty());
  CHECK(p.comp.empty());

  // Despeckle, despill and the comp are skipped: the matte-only post-processing (the alpha's
  // resize) takes less than the full one (best of three each).
  const double t_only = ms_of(e, plate, hint, FrameRequest::only_matte());
  const double t_full = ms_of(e, plate, hint, FrameRequest{});
  INFO("post-processing: matte only " << t_only << " ms, all four " << t_full << " ms");
  CHECK(t_only < t_full);
}

TEST_CASE("FrameRequest: outputs written into the caller's buffers, Float16 = float rounded to half",
          "[model][embedding]") {
  OriginalEngine e(bundled());
  const auto plate = io::read_image(sample("Input", "frame_0006.png"));
  const auto hint = io::read_image(sample("AlphaHint", "frame_0006.png"));
  const int W = plate.width, H = plate.height;
  const auto full = e.process_frame(plate.view(), hint.view(), Screen::Green, FrameRequest{});

  // Matte as half floats with a padded stride; fg as float32 packed; comp as 8-bit.
  const std::size_t stride16 = static_cast<std::size_t>(W) * 2 + 64;
  std::vector<unsigned char> matte16(stride16 * H, 0xAB);
  std::vector<float> fg32(static_cast<std::size_t>(W) * H * 3, -1.f);
  std::vector<unsigned char> comp8(static_cast<std::size_t>(W) * H * 3, 0);
  FrameRequest r;
  r.processed = false;
  r.matte_into = {matte16.data(), W, H, 1, PixelType::Float16, stride16};
  r.fg_into = {fg32.data(), W, H, 3, PixelType::Float32, 0};
  r.comp_into = {comp8.data(), W, H, 3, PixelType::UInt8, 0};
  const auto res = e.process_frame(plate.view(), hint.view(), Screen::Green, r);
  CHECK(res.alpha.empty());  // delivered into the host's buffers instead
  CHECK(res.fg.empty());
  CHECK(res.comp.empty());
  CHECK(res.processed.empty());

  size_t half_mismatch = 0, pad_touched = 0;
  for (int y = 0; y < H; ++y) {
    const unsigned char* row = matte16.data() + y * stride16;
    for (int x = 0; x < W; ++x) {
      uint16_t h;
      std::memcpy(&h, row + 2 * x, 2);
      half_mismatch += h != to_half_bits(full.alpha.pixels[static_cast<std::size_t>(y) * W + x]);
    }
    for (std::size_t b = static_cast<std::size_t>(W) * 2; b < stride16; ++b) pad_touched += row[b] != 0xAB;
  }
  CHECK(half_mismatch == 0);
  CHECK(pad_touched == 0);  // the padding between rows is the host's
  CHECK(fg32 == full.fg.pixels);
  size_t comp_off = 0;
  for (std::size_t i = 0; i < comp8.size(); ++i)
    comp_off += comp8[i] != static_cast<unsigned char>(std::lround(std::clamp(full.comp.pixels[i], 0.f, 1.f) * 255.f));
  CHECK(comp_off == 0);

  // A buffer of the wrong size, or for an output not asked for, is refused.
  FrameRequest bad = FrameRequest::only_matte();
  std::vector<float> small(static_cast<std::size_t>(W) * H / 4);
  bad.matte_into = {small.data(), W / 2, H / 2, 1, PixelType::Float32, 0};
  CHECK_THROWS_AS(e.process_frame(plate.view(), hint.view(), Screen::Green, bad), ConfigError);
  FrameRequest unasked = FrameRequest::only_matte();
  unasked.comp_into = {comp8.data(), W, H, 3, PixelType::UInt8, 0};
  CHECK_THROWS_AS(e.process_frame(plate.view(), hint.view(), Screen::Green, unasked), ConfigError);
}

TEST_CASE("Float16 views in: the same matte as the float plate rounded to half", "[model][embedding]") {
  OriginalEngine e(bundled());
  const auto plate = io::read_image(sample("Input", "frame_0011.png"));
  const auto hint = io::read_image(sample("AlphaHint", "frame_0011.png"));
  std::vector<uint16_t> plate16(plate.pixels.size());
  Image rounded = plate;
  for (std::size_t i = 0; i < plate.pixels.size(); ++i) {
    plate16[i] = to_half_bits(plate.pixels[i]);
    rounded.pixels[i] = static_cast<float>(c10::Half(plate16[i], c10::Half::from_bits()));
  }
  const ImageView v16{plate16.data(), plate.width, plate.height, plate.channels, PixelType::Float16, 0};
  const auto a = e.process_frame(v16, hint.view(), Screen::Green, FrameRequest::only_matte());
  const auto b = e.process_frame(rounded.view(), hint.view(), Screen::Green, FrameRequest::only_matte());
  CHECK(a.alpha.pixels == b.alpha.pixels);

  // image_from_view / copy_to_view: Float16 both ways is lossless for half values.
  const Image back = image_from_view(v16);
  CHECK(back.pixels == rounded.pixels);
  std::vector<uint16_t> again(plate16.size());
  copy_to_view(back, {again.data(), plate.width, plate.height, plate.channels, PixelType::Float16, 0});
  CHECK(again == plate16);
}
