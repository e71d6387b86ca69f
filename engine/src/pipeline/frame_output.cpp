// The torch-free half of frame.h, the finish stage (frame_stages.h): post-processing, each
// output in the colour space decided for it, and writing it. The clip pipeline's writers
// (frame_writer.cpp), `serve` and the single-frame entries call the same functions, so a
// frame keyed any way gives the same files.
#include <corridorkey/check.h>
#include <corridorkey/frame.h>

#include "config/cpu_limit.h"
#include "io/image_header.h"
#include "io/image_io.h"
#include "io/plate_metadata.h"
#include "pipeline/frame_colour.h"
#include "post/mattes.h"
#include "post/postprocess.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>

CORRIDORKEY_NAMESPACE_BEGIN

PostSettings post_settings(const EngineSettings& o, Screen backing) {  // the one place they are made
  PostSettings s;
  s.despeckle = o.despeckle;
  s.despeckle_size = o.despeckle_size;
  s.despill_strength = o.despill_strength;
  s.backing = backing == Screen::Blue ? Screen::Blue : Screen::Green;
  return s;
}

int single_frame_post_threads() { return std::clamp(config::usable_cpus(), 1, 8); }

RepostableFrame::RepostableFrame(RawFrame raw) : raw_(std::move(raw)) {}

std::shared_ptr<const Image> RepostableFrame::despeckled(const PostSettings& ps) const {
  {
    std::lock_guard<std::mutex> l(memo_m_);
    if (clean_ && clean_despeckle_ == ps.despeckle && (!ps.despeckle || clean_size_ == ps.despeckle_size))
      return clean_;
  }
  // Computed outside the lock: a despill-only repost on another thread need not wait for it.
  auto c = std::make_shared<const Image>(despeckled_alpha(raw_, ps));
  std::lock_guard<std::mutex> l(memo_m_);
  clean_ = c;
  clean_despeckle_ = ps.despeckle;
  clean_size_ = ps.despeckle_size;
  return c;
}

void RepostableFrame::finish(const PostSettings& post, bool processed, bool comp, FinishedFrame& out) const {
  std::shared_ptr<const Image> clean;
  if (processed || comp) clean = despeckled(post);
  finish_frame(raw_, post, processed, comp, clean.get(), out);
}

void RepostableFrame::finish(const EngineSettings& settings, Screen backing, bool processed, bool comp,
                             FinishedFrame& out) const {
  PostSettings post = post_settings(settings, backing);
  post.threads = single_frame_post_threads();
  finish(post, processed, comp, out);
}

std::size_t RepostableFrame::bytes() const {
  const std::size_t mattes =
      raw_.mattes ? raw_.mattes->garbage.pixels.size() + raw_.mattes->holdout.pixels.size() : 0;
  return (2 * raw_.alpha.pixels.size() + raw_.fg.pixels.size() + raw_.hint.pixels.size() + mattes) *
         sizeof(float);
}

namespace {
void check_raw(const RawFrame& raw) {
  CK_CHECK(raw.alpha.channels == 1 && raw.fg.channels == 3 && raw.alpha.width == raw.fg.width &&
               raw.alpha.height == raw.fg.height,
           ConfigError, "finish_frame: expected alpha [H,W,1] and fg [H,W,3] of one size, got ",
           raw.alpha.width, "x", raw.alpha.height, "x", raw.alpha.channels, " and ", raw.fg.width,
           "x", raw.fg.height, "x", raw.fg.channels);
}
}  // namespace

Image despeckled_alpha(const RawFrame& raw, const PostSettings& s) {
  check_raw(raw);
  if (!s.despeckle) return raw.alpha;
  Image a = post::despeckle(raw.alpha, static_cast<int>(s.despeckle_size));
  // Despeckling may drop a held-out island: the mattes' bounds hold after it too.
  if (raw.mattes) post::clamp_to_mattes(a, &raw.mattes->garbage, &raw.mattes->holdout);
  return a;
}

FinishedFrame finish_frame(const RawFrame& raw, const PostSettings& s, bool processed, bool comp,
                           const Image* despeckled) {
  FinishedFrame out;
  finish_frame(raw, s, processed, comp, despeckled, out);
  return out;
}

void finish_frame(const RawFrame& raw, const PostSettings& s, bool processed, bool comp,
                  const Image* despeckled, FinishedFrame& out) {
  if (!processed) out.processed = Image{};
  if (!comp) out.comp = Image{};
  if (!processed && !comp) return;  // a matte-only request pays for no despeckle
  check_raw(raw);
  // post::finish's steps, each once and only when an output needs it: comp and processed
  // share the despeckled alpha and one row pass over the despilled, linear fg (bit-identical
  // to post::premultiply_linear / checker_comp, tests/unit/test_postprocess.cpp).
  Image own;
  if (!despeckled) {
    own = despeckled_alpha(raw, s);
    despeckled = &own;
  }
  CK_CHECK(despeckled->width == raw.alpha.width && despeckled->height == raw.alpha.height &&
               despeckled->channels == 1,
           ConfigError, "finish_frame: the despeckled alpha is not the frame's size");
  post::despill_premultiply_comp(raw.fg, *despeckled, static_cast<float>(s.despill_strength),
                                 s.backing == Screen::Blue ? 2 : 1, processed ? &out.processed : nullptr,
                                 comp ? &out.comp : nullptr, s.threads);
}

const char* to_string(FrameOutput o) {
  switch (o) {
    case FrameOutput::Matte: return "matte";
    case FrameOutput::Fg: return "fg";
    case FrameOutput::Processed: return "processed";
    case FrameOutput::Comp: return "comp";
    case FrameOutput::Hint: return "hint";
  }
  return "?";
}

namespace {
/// What an sRGB plate's frame decides (RawFrame::colour null): Processed scene-linear Rec.709
/// and tagged so, FG sRGB, Comp the sRGB preview.
const pipeline::ClipColour& srgb_decisions() {
  static const pipeline::ClipColour c = [] {
    std::vector<std::string> unused;
    return pipeline::file_colour(pipeline::resolve_frame_colour("", ColorSpace::Srgb, ""), "", false, unused);
  }();
  return c;
}

const pipeline::ClipColour& decisions(const RawFrame& raw) {
  return raw.colour ? raw.colour->colour : srgb_decisions();
}
}  // namespace

const Image& output_image(FrameOutput kind, const Image& image, const RawFrame& raw, Image& scratch) {
  const auto& c = decisions(raw);
  const int64_t n = static_cast<int64_t>(image.width) * image.height;
  switch (kind) {
    case FrameOutput::Fg:  // the model's sRGB foreground, linearised, into fg_colorspace
      if (!c.fg) return image;
      scratch = post::to_linear(image);
      c.fg->apply(scratch.pixels.data(), n, scratch.channels);
      return scratch;
    case FrameOutput::Processed:
      // Linear premultiplied: a matrix on premultiplied RGB is the matrix on straight RGB,
      // premultiplied; alpha passes through.
      if (!c.processed) return image;
      scratch = image;
      c.processed->apply(scratch.pixels.data(), n, 4);
      return scratch;
    case FrameOutput::Comp:  // the preview's linear values through the config's view
      if (!c.comp) return image;
      scratch = post::to_linear(image);
      c.comp->apply(scratch.pixels.data(), n, 3);
      return scratch;
    case FrameOutput::Matte:
    case FrameOutput::Hint:
      return image;
  }
  return image;
}

void write_frame_output(FrameOutput kind, const std::string& path, const Image& image,
                        const std::string& exr_compression) {
  write_frame_output(kind, path, image, RawFrame{}, exr_compression);
}

void write_frame_output(FrameOutput kind, const std::string& path, const Image& image_in,
                        const RawFrame& raw, const std::string& exr_compression) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const int want = kind == FrameOutput::Matte || kind == FrameOutput::Hint ? 1
                   : kind == FrameOutput::Processed                       ? 4
                                                                          : 3;
  CK_CHECK(image_in.channels == want && !image_in.empty(), ConfigError, path, ": ", to_string(kind),
           " needs a ", want, "-channel image, got ", image_in.width, "x", image_in.height, "x",
           image_in.channels);
  const auto compression = io::parse_exr_compression(exr_compression);
  const auto& c = decisions(raw);
  Image scratch;
  const Image& image = output_image(kind, image_in, raw, scratch);
  // EXRs say the primaries of their linear values, as the frame's colour decisions set them:
  // Processed the output space's (scene-linear Rec.709 for an sRGB plate), FG fg_colorspace's.
  auto xy = [](const std::optional<colour::Chromaticities>& v) { return v ? v->data() : nullptr; };
  const double* primaries = kind == FrameOutput::Processed ? xy(c.processed_xy)
                           : kind == FrameOutput::Fg      ? xy(c.fg_xy)
                                                          : nullptr;
  const io::PlateMetadata* plate = raw.colour ? raw.colour->plate.get() : nullptr;
  switch (kind) {
    case FrameOutput::Matte:
    case FrameOutput::Fg:
    case FrameOutput::Processed:
      CK_CHECK(ext == ".exr", ConfigError, path, ": ", to_string(kind),
               " is written as a half-float EXR; name it .exr");
      io::write_exr(path, image,
                    want == 1   ? "Y"
                    : want == 3 ? "RGB"
                                : "RGBA",
                    compression, primaries, plate);
      return;
    case FrameOutput::Comp:
      CK_CHECK(ext == ".png" || ext == ".exr", ConfigError, path,
               ": comp is written as an 8-bit PNG (.png) or a half-float EXR (.exr)");
      if (ext == ".png") io::write_png8(path, image);
      else
        io::write_exr(path, image, "RGB", compression, nullptr, plate);
      return;
    case FrameOutput::Hint:
      CK_CHECK(ext == ".png", ConfigError, path, ": hint is written as an 8-bit PNG; name it .png");
      io::write_png8(path, image, /*round=*/true);
      return;
  }
}

void write_layered_output(const std::string& path, const RawFrame& raw, const Image& processed,
                          const std::string& exr_compression) {
  CK_CHECK(processed.channels == 4 && raw.fg.channels == 3 && raw.alpha.channels == 1, ConfigError,
           path, ": layered needs Processed (4 channels), FG (3) and the matte (1)");
  std::string ext = std::filesystem::path(path).extension().string();
  for (auto& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  CK_CHECK(ext == ".exr", ConfigError, path,
           ": layered is written as a half-float EXR; name it .exr");
  const auto compression = io::parse_exr_compression(exr_compression);
  Image fg_scratch, processed_scratch;
  // The same conversions as the separate files (output_image), so each half sample equals
  // theirs; the top-level RGBA is Processed, whose primaries the file's chromaticities name.
  const Image& rgba = output_image(FrameOutput::Processed, processed, raw, processed_scratch);
  const Image& fg = output_image(FrameOutput::Fg, raw.fg, raw, fg_scratch);
  const auto& c = decisions(raw);
  io::write_exr_layers(
      path,
      {{&rgba, {"R", "G", "B", "A"}}, {&fg, {"FG.R", "FG.G", "FG.B"}}, {&raw.alpha, {"matte.A"}}},
      compression, c.processed_xy ? c.processed_xy->data() : nullptr,
      raw.colour ? raw.colour->plate.get() : nullptr);
}

namespace {

/// The display window placed in the keyed frame `frame` (both in the plate's coordinates).
FrameWindow window_in(const io::PixelBox& display, const io::PixelBox& frame) {
  FrameWindow w;
  w.x = display.x0 - frame.x0, w.y = display.y0 - frame.y0;
  w.width = display.width(), w.height = display.height();
  w.frame_width = frame.width(), w.frame_height = frame.height();
  return w;
}

}  // namespace

FrameWindow display_window(const RawFrame& raw) {
  const io::PlateMetadata* m = raw.colour ? raw.colour->plate.get() : nullptr;
  // The keyed frame is the header's `frame` (the union of the windows) when it matches the
  // images; a plate resized or without a header is shown whole.
  if (m && m->overscan() && m->frame.width() == raw.alpha.width && m->frame.height() == raw.alpha.height)
    return window_in(m->display, m->frame);
  FrameWindow w;
  w.width = w.frame_width = raw.alpha.width;
  w.height = w.frame_height = raw.alpha.height;
  return w;
}

FrameWindow plate_display_window(const std::string& plate_file) {
  try {
    // EXR by its extension, as the plate reader decides it (io::has_overscan).
    auto ext = std::filesystem::path(plate_file).extension().string();
    for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (ext == ".exr") {
      const auto w = io::exr_windows(plate_file);
      return w ? window_in(w->display, w->frame) : FrameWindow{};
    }
    const auto s = io::probe_image_size(plate_file);
    if (!s || s->width <= 0 || s->height <= 0 || s->width > INT32_MAX || s->height > INT32_MAX) return {};
    FrameWindow w;
    w.width = w.frame_width = static_cast<int>(s->width);
    w.height = w.frame_height = static_cast<int>(s->height);
    return w;
  } catch (const std::exception&) {
    return {};
  }
}

CORRIDORKEY_NAMESPACE_END
