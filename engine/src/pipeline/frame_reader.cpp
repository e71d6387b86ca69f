#include "pipeline/frame_reader.h"

#include <corridorkey/check.h>

#include "io/image_io.h"
#include "post/postprocess.h"
#include "runtime/frame_tensors.h"
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

}  // namespace

ReadItem prepare_frame(const ClipPlan& p, size_t ci, int index, Image plate, Image hint,
                       const std::string& file, double read_ms, Image* generated_hint) {
  ReadItem it;
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
    return detail::preprocess(pt, ht, p.model_size, p.linear, torch::kCPU);
  });
  it.timings.preprocess_ms = ms_since(t);
  return it;
}

ReadItem FrameReader::prepare(size_t ci, int index, Image plate, Image hint,
                              const std::string& file, double read_ms) const {
  return prepare_frame(plans_[ci], ci, index, std::move(plate), std::move(hint), file, read_ms);
}

ReadItem FrameReader::read_frame(size_t ci, int index) const {
  const auto& p = plans_[ci];
  const auto& file = p.clip.input.frames[index];
  try {
    const auto t = Clock::now();
    if (!p.generate_hint) check_shapes_from_headers(file, p.clip.hint.frames[index]);
    Image plate = io::read_image(file, limits_);
    Image hint = p.generate_hint ? Image{} : io::read_image(p.clip.hint.frames[index], limits_);
    return prepare(ci, index, std::move(plate), std::move(hint), file, ms_since(t));
  } catch (const std::exception& e) {
    return ReadItem::failed(ci, index, p.stems[index], file, e.what());
  }
}

void FrameReader::read_video_clip(size_t ci, const std::function<bool(ReadItem)>& sink,
                                  const std::function<bool()>& stopping) const {
  const auto& p = plans_[ci];
  std::unique_ptr<io::VideoReader> vin, vhint;
  try {
    if (p.clip.input.is_video())
      vin = std::make_unique<io::VideoReader>(p.clip.input.video, p.colour.deep_video);
    if (!p.generate_hint && p.clip.hint.is_video())
      vhint = std::make_unique<io::VideoReader>(p.clip.hint.video);
  } catch (const std::exception& e) {
    const int first = p.frames.front();
    sink(ReadItem::failed(ci, first, p.stems[first], p.clip.root, e.what()));
    return;
  }
  size_t k = 0;
  for (int i = 0; k < p.frames.size() && !stopping(); ++i) {
    const auto t = Clock::now();
    const bool wanted = i == p.frames[k];
    Image plate, hint;
    const std::string file =
        vin ? p.clip.input.video + "#" + std::to_string(i) : p.clip.input.frames[i];
    std::string err;
    bool stream_broke = false;
    // A frame file that is refused or does not decode fails that frame alone; the other
    // stream still advances, so the frames after it stay paired.
    auto frame_file = [&](const std::function<void()>& read) {
      try {
        read();
      } catch (const std::exception& e) {
        err = e.what();
      }
    };
    try {
      if (vin) {
        CK_CHECK(vin->next(plate), IoError, p.clip.input.video, ": video ended at frame ", i,
                 " (container reported ", p.clip.input.count(), ")");
      } else if (wanted) {
        frame_file([&] {
          const auto a = header_size(file);
          if (vhint) check_aspect(file, a.width, a.height, vhint->width(), vhint->height());
          plate = io::read_image(file, limits_);
        });
      }
      if (vhint) {
        CK_CHECK(vhint->next(hint), IoError, p.clip.hint.video, ": hint video ended at frame ", i);
      } else if (wanted && !p.generate_hint && err.empty()) {
        frame_file([&] {
          const auto& hf = p.clip.hint.frames[i];
          const auto b = header_size(hf);
          if (vin) check_aspect(file, vin->width(), vin->height(), b.width, b.height);
          hint = io::read_image(hf, limits_);
        });
      }
    } catch (const std::exception& e) {
      err = e.what();
      stream_broke = true;
    }
    if (!wanted && err.empty()) continue;  // decoded only to advance the stream
    ReadItem it;
    if (err.empty()) {
      try {
        it = prepare(ci, i, std::move(plate), std::move(hint), file, ms_since(t));
      } catch (const std::exception& e) {
        err = e.what();
      }
    }
    if (!err.empty()) {
      const int index = p.frames[k];
      if (!sink(ReadItem::failed(ci, index, p.stems[index], file, err))) return;
      if (stream_broke) return;  // a broken stream cannot continue
      ++k;  // this frame's own problem (a bad frame file, no backing found): go on
      continue;
    }
    ++k;
    if (!sink(std::move(it))) return;
  }
}

}  // namespace corridorkey::pipeline
