// The frame stages (frame_stages.h): the decisions, prepare, infer and to-plate. finish is
// frame_output.cpp (torch-free, public: frame.h).
#include "pipeline/frame_stages.h"

#include <corridorkey/check.h>

#include "io/image_io.h"
#include "post/mattes.h"
#include "post/postprocess.h"
#include "runtime/frame_tensors.h"
#include "runtime/model_runner.h"
#include "runtime/torch_boundary.h"
#include "timing.h"

#include <c10/core/InferenceMode.h>

#include <cmath>

namespace corridorkey::pipeline {
namespace {

using timing::Clock;
using timing::ms_since;

/// Replaces NaN / Inf with 0; returns how many were found.
size_t sanitize(Image& im) {
  size_t bad = 0;
  for (auto& v : im.pixels)
    if (!std::isfinite(v)) {
      v = 0.f;
      ++bad;
    }
  return bad;
}

/// A generated hint whose mean is at least this is "no backing found in the plate": a
/// blue plate in a clip keyed as green, or a grey one, gives 1.0 (every pixel foreground),
/// and the model then returns a garbage matte. A close-up the subject fills still leaves
/// some backing: 0.89 for a subject over 90% of the frame (test_hints_video.cpp).
constexpr double kNoBackingMean = 0.99;

void check_backing_found(const ClipPlan& p, const Image& hint, const std::string& file) {
  if (!p.backing_check || hint.pixels.empty()) return;
  double sum = 0;
  for (float v : hint.pixels) sum += v;
  const double mean = sum / static_cast<double>(hint.pixels.size());
  const char* screen = p.screen.screen == Screen::Blue ? "blue" : "green";
  CK_CHECK(mean < kNoBackingMean, IoError, file, ": no ", screen,
           " backing found in this plate: its generated hint is ", std::lround(mean * 1000) / 10.0,
           "% foreground (at least ", kNoBackingMean * 100, "% is taken as no backing; the clip's "
           "backing was estimated from its first, middle and last plates). Another backing, or "
           "none? Split the clip, give it AlphaHint/, or --no-backing-check keys it anyway");
}

/// The generated hint of a plate (RGB, negatives clamped), quantised to the 8-bit levels
/// of the PNG written for review, so keying from that PNG later gives the same matte.
/// Refused (nothing written) when it finds no backing in the plate.
Image generate_hint(const ClipPlan& p, const Image& plate, const std::string& stem,
                    const std::string& file) {
  const Image* srgb = &plate;
  Image encoded;
  if (p.linear) {  // the key runs on the sRGB-encoded plate, as the model sees it
    encoded = plate;
    post::linear_to_srgb_inplace(encoded.pixels.data(), encoded.pixels.size());
    srgb = &encoded;
  }
  Image hint = chroma_hint(srgb->view(), p.screen, p.hint_options);
  for (auto& v : hint.pixels) v = static_cast<float>(std::lround(v * 255.f)) / 255.f;
  check_backing_found(p, hint, file);
  if (!p.out.empty())  // a single frame (key_frame) has no output folder: the caller writes it
    io::write_png8(p.hint_file(stem).string(), hint, /*round=*/true);
  return hint;
}

/// The hint a frame is keyed with, as messages name it (not the plate: a NaN in the hint
/// is fixed in the hint file).
std::string hint_source(const ClipPlan& p, int index) {
  if (p.generate_hint) return p.hint_file(p.stems[static_cast<size_t>(index)]).string();
  if (p.clip.hint.is_video()) return p.clip.hint.video + "#" + std::to_string(index);
  return p.clip.hint.frames[static_cast<size_t>(index)];
}

/// An overscan plate's hint (plate: decoded, negatives clamped): one the size of the data
/// window (the keyed frame) as it is; one the size of the display window placed on it, the
/// overscan around it generated as a missing hint is. Resizing a display-size hint to the
/// frame would stretch it over the overscan, the matte then off by up to the overscan's
/// width at the edges: refused, as is any other size.
Image overscan_hint(const ClipPlan& p, const Image& plate, const Image& hint,
                    const io::PlateMetadata& m, const std::string& hint_file,
                    const std::string& file, std::vector<std::string>& warnings) {
  if (hint.width == plate.width && hint.height == plate.height) return hint;
  CK_CHECK(hint.width == m.display.width() && hint.height == m.display.height(), IoError, hint_file,
           ": hint is ", hint.width, "x", hint.height, ", but the plate ", file, " has a ",
           m.display.width(), "x", m.display.height(), " display window in a ", plate.width, "x",
           plate.height, " keyed frame (overscan): a hint must be the size of one of them");
  Image srgb = plate;
  if (p.linear) post::linear_to_srgb_inplace(srgb.pixels.data(), srgb.pixels.size());
  Image out = chroma_hint(srgb.view(), p.screen, p.hint_options);
  for (auto& v : out.pixels) v = static_cast<float>(std::lround(v * 255.f)) / 255.f;
  // The given hint as one channel, as the model's input takes it (hint_to_tensor).
  std::string note;
  const auto one = detail::rethrow_torch(hint_file + ": hint", [&] {
    return detail::hint_to_tensor(hint.view(), &note).contiguous();
  });
  if (!note.empty()) warnings.push_back(note);
  const float* src = one.data_ptr<float>();
  const int ox = m.display.x0 - m.frame.x0, oy = m.display.y0 - m.frame.y0;
  for (int y = 0; y < hint.height; ++y)
    std::copy(src + static_cast<size_t>(y) * hint.width,
              src + static_cast<size_t>(y + 1) * hint.width,
              out.pixels.begin() + (static_cast<ptrdiff_t>(y + oy) * out.width + ox));
  return out;
}

}  // namespace

ScreenEstimate decide_screen(const std::function<std::vector<Image>()>& plates,
                             const ClipColour& colour, Screen asked, bool generate_hint,
                             const std::string& what, const std::string& setting,
                             std::vector<std::string>& warnings) {
  ScreenEstimate s;
  if (!generate_hint && asked != Screen::Auto) {  // nothing to estimate: as asked
    s.screen = asked;
    return s;
  }
  try {
    auto v = plates();
    std::vector<ImageView> views;
    for (auto& im : v) {  // estimated on the sRGB-encoded plates, as the model sees them
      CK_CHECK(im.channels >= 3, IoError, what, ": plates have ", im.channels,
               " channel(s); a backing colour needs RGB plates");
      decode_plate(colour, im);
      if (colour.linear) post::linear_to_srgb_inplace(im.pixels.data(), im.pixels.size());
      views.push_back(im.view());
    }
    return estimate_screen(views, asked, what);
  } catch (const IoError& e) {
    if (generate_hint) throw;  // nothing to key the hint against
    s.screen = Screen::Green;
    warnings.push_back(std::string("backing colour not estimated (") + e.what() +
                       "): keyed as a green screen (" + setting + " sets it)");
    return s;
  }
}

bool keys_with_blue_model(Screen backing, Screen main_model_screen) {
  return backing == Screen::Blue && main_model_screen != Screen::Blue;
}

ModelChoice choose_model(BaseEngine& main, const std::function<BaseEngine*()>& blue, Screen backing,
                         bool needed) {
  ModelChoice c;
  BaseEngine* use = &main;
  const Screen plate = backing == Screen::Blue ? Screen::Blue : Screen::Green;
  if (needed && blue && keys_with_blue_model(plate, main.model()->options().model_screen))
    if (BaseEngine* b = blue()) {
      use = b;
      c.blue_model = true;
    }
  c.engine = &EngineAccess::impl(*use);
  c.swap_gb = plate != use->model()->options().model_screen;
  c.model_size = c.engine->S;
  c.checkpoint = c.engine->info.checkpoint;
  return c;
}

ReadItem prepare_frame(const ClipPlan& p, size_t ci, int index, Image plate, Image hint,
                       const std::string& file, double read_ms, Image* generated_hint,
                       const torch::Device& device, const io::PlateMetadata* plate_meta,
                       std::shared_ptr<const FrameMattes> mattes) {
  ReadItem it;
  it.mattes = std::move(mattes);
  it.clip = ci;
  it.index = index;
  it.stem = p.stems[index];
  it.file = file;
  it.timings.read_ms = read_ms;
  CK_CHECK(plate.channels >= 1, IoError, file, ": image has no channels");
  if (plate.channels < 3) {  // grey plate: replicate to RGB
    Image rgb;
    rgb.width = plate.width;
    rgb.height = plate.height;
    rgb.channels = 3;
    rgb.pixels.resize(static_cast<size_t>(plate.width) * plate.height * 3);
    for (size_t i = 0; i < rgb.pixels.size(); ++i) rgb.pixels[i] = plate.pixels[(i / 3) * plate.channels];
    plate = std::move(rgb);
  }
  if (size_t bad = sanitize(plate))
    it.warnings.push_back(file + ": " + std::to_string(bad) + " NaN/Inf samples in the plate set to 0");
  if (size_t bad = sanitize(hint))
    it.warnings.push_back(hint_source(p, index) + ": " + std::to_string(bad) +
                          " NaN/Inf samples in the hint set to 0");
  // Decoded to scene-linear Rec.709 (docs/colour.md); then, as the reference treats linear
  // input, negatives (out of Rec.709's gamut, or below black) are clamped to 0 and values
  // above 1 go on to the sRGB encoding unclipped.
  decode_plate(p.colour, plate);
  for (auto& v : plate.pixels) v = std::max(v, 0.f);  // EXR negatives clamped (reference)
  if (p.generate_hint) {
    hint = generate_hint(p, plate, it.stem, file);
    if (generated_hint) *generated_hint = hint;
  } else if (plate_meta && plate_meta->overscan()) {
    hint = overscan_hint(p, plate, hint, *plate_meta, hint_source(p, index), file, it.warnings);
  }
  if (p.swap_gb) swap_green_blue(plate);  // after the hint: it keys the plate as shot
  const double ar_p = static_cast<double>(plate.width) / plate.height;
  const double ar_h = static_cast<double>(hint.width) / hint.height;
  CK_CHECK(std::fabs(ar_p / ar_h - 1.0) <= 0.01, IoError, file, ": plate ", plate.width, "x",
           plate.height, " and hint ", hint.width, "x", hint.height,
           " have different aspect ratios (a hint may differ in size, not in shape)");
  if (hint.width != plate.width || hint.height != plate.height)  // once per clip (same text)
    it.warnings.push_back("hints are " + std::to_string(hint.width) + "x" + std::to_string(hint.height) +
                          ", plates " + std::to_string(plate.width) + "x" + std::to_string(plate.height) +
                          ": each hint is resized with its plate (same shape, so nothing shifts)");
  it.width = plate.width;
  it.height = plate.height;
  const auto t = Clock::now();
  it.x = detail::rethrow_torch(file + ": pre-processing", [&] {
    c10::InferenceMode guard;
    auto pt = detail::view_to_tensor(plate.view(), 3, "plate");
    std::string note;
    auto ht = detail::hint_to_tensor(hint.view(), &note);
    if (!note.empty()) it.warnings.push_back(note);
    if (it.mattes && !it.mattes->garbage.empty())  // the model sees the garbage matte
      ht = detail::garbage_on_hint(ht, it.mattes->garbage.view());
    return detail::preprocess(pt, ht, p.model_size, p.linear, device);
  });
  it.timings.preprocess_ms = ms_since(t);
  return it;
}

detail::ModelRun infer_frame(EngineAccess::Impl& model, const torch::Tensor& x, const std::string& what,
                             StageTimings& timings, std::vector<std::string>& warnings) {
  const auto t = Clock::now();
  auto run = detail::rethrow_torch(what + ": inference", [&] {
    c10::InferenceMode guard;
    if (x.is_cpu() && model.device.is_cuda())
      return model.infer(x.pin_memory().to(model.device, /*non_blocking=*/true));
    return model.infer(x.to(model.device));
  });
  for (const auto& w : run.warnings) warnings.push_back(w);
  detail::check_finite_outputs(run, what);
  timings.encoder_ms = run.timings.encoder_ms;
  timings.decoders_ms = run.timings.decoders_ms;
  timings.refiner_ms = run.timings.refiner_ms;
  timings.infer_ms = ms_since(t);
  return run;
}

void to_plate(const Image& alpha_model, const Image& fg_model, int width, int height, bool swapped,
              bool with_fg, RawFrame& raw) {
  const auto t = Clock::now();
  raw.alpha = post::resize_lanczos(alpha_model, width, height);
  if (with_fg) {
    raw.fg = post::resize_lanczos(fg_model, width, height);
    if (swapped) swap_green_blue(raw.fg);  // back to the plate's channel order
  }
  if (raw.mattes) post::apply_mattes(raw.alpha, &raw.mattes->garbage, &raw.mattes->holdout);
  raw.timings.postprocess_ms += ms_since(t);
}

}  // namespace corridorkey::pipeline
