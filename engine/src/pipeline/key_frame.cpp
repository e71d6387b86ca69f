// The single-frame entries (frame.h, engine.h): key_frame from files or images, key_frame from
// the host's buffers, and BaseEngine::process_frame. Each makes the decisions for its one
// plate by the rules a clip's are made by, then runs the frame stages (frame_stages.h) on
// the calling thread.
#include <corridorkey/check.h>
#include <corridorkey/engine.h>
#include <corridorkey/frame.h>

#include "config/log.h"
#include "io/image_io.h"
#include "io/view_layout.h"
#include "pipeline/clip_plan.h"
#include "pipeline/frame_colour.h"
#include "pipeline/frame_mattes.h"
#include "pipeline/frame_stages.h"
#include "runtime/engine_impl.h"
#include "runtime/frame_tensors.h"
#include "runtime/memory.h"
#include "timing.h"

#include <algorithm>
#include <filesystem>
#include <tuple>

CORRIDORKEY_NAMESPACE_BEGIN

namespace {

using timing::Clock;
using timing::ms_since;

bool is_exr(const std::string& file) {
  std::string ext = std::filesystem::path(file).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".exr";
}

/// A frame's garbage and holdout mattes as read or given, and their names for messages.
struct MatteImages {
  pipeline::MatteRead garbage, holdout;
  std::string garbage_file = "garbage matte", holdout_file = "holdout matte";
};

struct Keyed {
  RawFrame raw;
  uint64_t peaks[3] = {0, 0, 0};  // the model's stages (ModelRun)
};

/// decide -> prepare -> infer -> to-plate for one plate (hint empty: generated). `file` and
/// `hint_file` name them in messages; `device`: where the model's input is resized.
Keyed key_one(BaseEngine& engine, BaseEngine* blue_engine, Image plate, Image hint,
              const std::string& file, const std::string& plate_file, const std::string& hint_file,
              const FrameSettings& s, double read_ms, bool with_fg, bool resize_on_device,
              std::shared_ptr<const io::PlateMetadata> plate_meta = nullptr, MatteImages m = {}) {
  Keyed k;
  RawFrame& raw = k.raw;
  const auto t_start = Clock::now();
  pipeline::ClipPlan p;  // a clip of one frame, with no output folder
  p.clip.name = p.clip.root = file;
  p.clip.hint.frames = {hint_file.empty() ? std::string("hint") : hint_file};
  p.stems = {"frame"};
  // Colour as a clip's (docs/colour.md): input_colorspace, else the deprecated color.
  const auto job_colour = pipeline::resolve_frame_colour(s.input_colorspace, s.color, s.ocio_config,
                                                         s.output_colorspace, s.fg_colorspace, s.comp_view);
  CK_CHECK(job_colour.input_space || !plate_file.empty(), ConfigError,
           "key_frame: color auto is decided from a file's header; name the colour space of a plate "
           "in memory (input_colorspace)");
  p.colour = pipeline::file_colour(job_colour, plate_file, /*video=*/false, raw.warnings);
  p.linear = p.colour.linear;
  if (is_exr(file) && !p.linear && p.colour.why == "default")
    raw.warnings.emplace_back(  // (emplace: g++ 12 warns falsely, -Warray-bounds, on push_back)
        "EXR plate keyed as sRGB (the reference's default); color linear (or auto) if it is "
        "scene-linear");
  p.generate_hint = hint.empty();
  p.hint_options = s.hint;
  p.backing_check = s.backing_check;
  p.screen = pipeline::decide_screen([&] { return std::vector<Image>{plate}; }, p.colour, s.screen,
                                     p.generate_hint, file, "screen green|blue", raw.warnings);

  raw.backing = p.screen.screen == Screen::Blue ? Screen::Blue : Screen::Green;
  // The caller's blue-screen engine, else the one this engine holds (checkpoint_blue).
  const auto choice = pipeline::choose_model(
      engine, [&] { return blue_engine ? blue_engine : EngineAccess::impl(engine).blue_engine(); }, raw.backing);
  auto& model = *choice.engine;
  p.model_size = choice.model_size;
  p.swap_gb = choice.swap_gb;
  raw.swapped = p.swap_gb;
  raw.linear = p.linear;
  raw.checkpoint = choice.checkpoint;
  raw.colour = std::make_shared<const FrameColour>(FrameColour{p.colour, plate_meta});

  const int width = plate.width, height = plate.height;
  raw.mattes = pipeline::frame_mattes(std::move(m.garbage), m.garbage_file, std::move(m.holdout),
                                      m.holdout_file, width, height, plate_meta.get(), raw.warnings);
  auto it = pipeline::prepare_frame(
      p, 0, 0, std::move(plate), std::move(hint), file, read_ms, &raw.hint,
      resize_on_device ? model.device : torch::Device(torch::kCPU), plate_meta.get(), raw.mattes);
  for (auto& w : it.warnings) raw.warnings.push_back(std::move(w));
  raw.timings = it.timings;
  const auto run = pipeline::infer_frame(model, it.x, file, raw.timings, raw.warnings);
  k.peaks[0] = run.encoder_peak, k.peaks[1] = run.decoders_peak, k.peaks[2] = run.refiner_peak;
  Image alpha_model, fg_model;
  detail::rethrow_torch(file + ": post-processing", [&] {
    alpha_model = detail::tensor_to_image(run.alpha);
    if (with_fg) fg_model = detail::tensor_to_image(run.fg);
  });
  pipeline::to_plate(alpha_model, fg_model, width, height, p.swap_gb, with_fg, raw);
  raw.timings.total_ms = read_ms + ms_since(t_start);
  return k;
}

/// A host's view as a float image (the one copy of its pixels), IoError naming `what`.
Image from_view(const ImageView& v, const char* what) {
  CK_CHECK(v.data && v.width > 0 && v.height > 0 && v.channels > 0, IoError, what,
           ": empty image view (", v.width, "x", v.height, "x", v.channels, ")");
  io::check_layout<IoError>(v, what);  // any strides (image.h), checked before the model runs
  return image_from_view(v);
}

/// A host's output view must be plate-sized with the output's channels: checked before the
/// model runs, so a wrong buffer costs no inference.
void check_into(const MutableImageView& v, bool asked, int channels, const ImageView& plate,
                const char* what) {
  if (v.empty()) return;
  CK_CHECK(asked, ConfigError, "process_frame: a buffer for ", what, " that the request does not ask for");
  CK_CHECK(v.width == plate.width && v.height == plate.height && v.channels == channels, ConfigError,
           "process_frame: the ", what, " buffer is ", v.width, "x", v.height, "x", v.channels,
           "; the plate needs ", plate.width, "x", plate.height, "x", channels);
  io::check_layout<ConfigError>(v, std::string("process_frame: the ") + what + " buffer");
}

/// An output in its colour space into the host's view (then the result's image is dropped),
/// or kept in the result.
void deliver(FrameOutput kind, bool asked, Image& image, const RawFrame& raw, const MutableImageView& into) {
  if (!asked) {
    image = Image{};
    return;
  }
  Image converted;
  const Image& out = output_image(kind, image, raw, converted);
  if (!into.empty()) {
    copy_to_view(out, into);
    image = Image{};
  } else if (&out == &converted) {
    image = std::move(converted);
  }
}

}  // namespace

FrameSettings frame_settings(const InferenceOptions& job) {
  FrameSettings s;
  s.color = job.color;
  s.input_colorspace = job.input_colorspace;
  s.ocio_config = job.ocio_config;
  s.output_colorspace = job.output_colorspace;
  s.fg_colorspace = job.fg_colorspace;
  s.comp_view = job.comp_view;
  s.screen = job.screen;
  s.hint.erode = job.hint_erode;
  s.hint.blur = job.hint_blur;
  s.backing_check = job.backing_check;
  s.max_pixels = job.max_pixels;
  return s;
}

RawFrame key_frame(BaseEngine& engine, BaseEngine* blue_engine, FrameSource src, const FrameSettings& s) {
  const auto t_read = Clock::now();
  const std::string file = src.plate_file.empty() ? std::string("plate") : src.plate_file;
  std::shared_ptr<const io::PlateMetadata> meta;  // what the plate file's outputs carry
  if (src.plate.empty()) {
    CK_CHECK(!src.plate_file.empty(), ConfigError, "key_frame: no plate (neither a file nor an image)");
    if (src.hint.empty() && !src.hint_file.empty())
      pipeline::check_shapes_from_headers(src.plate_file, src.hint_file);
    io::DecodeLimits limits;
    limits.max_pixels = s.max_pixels;
    src.plate = io::read_plate(src.plate_file, limits, meta);
  }
  if (src.hint.empty() && !src.hint_file.empty()) src.hint = io::read_image(src.hint_file, s.max_pixels);
  MatteImages m;
  {
    io::DecodeLimits limits;
    limits.max_pixels = s.max_pixels;
    // A file is read with its windows (an EXR matte in the plate's coordinates); an image given
    // is the plate's size or its display window's.
    for (auto [image, file, read, name] :
         {std::tuple{&src.garbage, &src.garbage_file, &m.garbage, &m.garbage_file},
          std::tuple{&src.holdout, &src.holdout_file, &m.holdout, &m.holdout_file}}) {
      if (!file->empty()) *name = *file;
      if (!image->empty()) read->image = std::move(*image);
      else if (!file->empty()) *read = pipeline::read_matte(*file, limits);
    }
  }
  const double read_ms = ms_since(t_read);
  return key_one(engine, blue_engine, std::move(src.plate), std::move(src.hint), file,
                 src.plate_file, src.hint_file, s, read_ms, /*with_fg=*/true,
                 /*resize_on_device=*/false, std::move(meta), std::move(m))
      .raw;
}

FrameResult key_frame(BaseEngine& engine, BaseEngine* blue_engine, const ImageView& plate,
                      const ImageView& hint, const FrameSettings& s, const FrameRequest& req) {
  return key_frame(engine, blue_engine, plate, hint, MatteViews{}, s, req);
}

FrameResult key_frame(BaseEngine& engine, BaseEngine* blue_engine, const ImageView& plate,
                      const ImageView& hint, const MatteViews& mattes, const FrameSettings& s,
                      const FrameRequest& req) {
  MatteImages m;
  for (auto [v, im, what] : {std::tuple{&mattes.garbage, &m.garbage, "garbage matte"},
                             std::tuple{&mattes.holdout, &m.holdout, "holdout matte"}}) {
    if (!v->data) continue;
    CK_CHECK(v->width == plate.width && v->height == plate.height, ConfigError, "the ", what, " is ",
             v->width, "x", v->height, "; the plate is ", plate.width, "x", plate.height,
             " (a matte is never resized)");
    im->image = from_view(*v, what);
  }
  check_into(req.matte_into, req.matte, 1, plate, "matte");
  check_into(req.fg_into, req.fg, 3, plate, "fg");
  check_into(req.processed_into, req.processed, 4, plate, "processed");
  check_into(req.comp_into, req.comp, 3, plate, "comp");
  const bool need_fg = req.fg || req.processed || req.comp;
  auto& I = EngineAccess::impl(engine);
  FrameResult res;
  const auto t_all = Clock::now();
  detail::PeakMemoryScope mem(I.device);
  Image p = from_view(plate, "plate");
  Image h = hint.data ? from_view(hint, "hint") : Image{};
  auto k = key_one(engine, blue_engine, std::move(p), std::move(h), "plate", "", "hint", s, 0, need_fg,
                   /*resize_on_device=*/true, nullptr, std::move(m));
  RawFrame& raw = k.raw;
  res.timings = raw.timings;
  const auto t0 = Clock::now();
  FinishedFrame done;
  PostSettings post = post_settings(engine.settings(), raw.backing);
  post.threads = single_frame_post_threads();
  finish_frame(raw, post, req.processed, req.comp, nullptr, done);
  deliver(FrameOutput::Matte, req.matte, raw.alpha, raw, req.matte_into);
  deliver(FrameOutput::Fg, req.fg, raw.fg, raw, req.fg_into);
  deliver(FrameOutput::Processed, req.processed, done.processed, raw, req.processed_into);
  deliver(FrameOutput::Comp, req.comp, done.comp, raw, req.comp_into);
  res.alpha = std::move(raw.alpha);
  res.fg = std::move(raw.fg);
  res.processed = std::move(done.processed);
  res.comp = std::move(done.comp);
  res.timings.postprocess_ms += ms_since(t0);
  res.timings.total_ms = ms_since(t_all);
  res.memory = mem.finish();
  res.memory.encoder_peak = k.peaks[0];
  res.memory.decoders_peak = k.peaks[1];
  res.memory.refiner_peak = k.peaks[2];
  res.backing = raw.backing;
  res.swapped = raw.swapped;
  res.linear = raw.linear;
  res.checkpoint = raw.checkpoint;
  res.warnings = std::move(raw.warnings);
  for (const auto& w : res.warnings) detail::log(LogLevel::Warning, w);
  return res;
}

FrameResult BaseEngine::process_frame(const ImageView& plate, const ImageView& hint) {
  return process_frame(plate, hint, impl_->model->options().model_screen);
}

FrameResult BaseEngine::process_frame(const ImageView& plate, const ImageView& hint, Screen screen) {
  return process_frame(plate, hint, screen, FrameRequest{});
}

FrameResult BaseEngine::process_frame(const ImageView& plate, const ImageView& hint, Screen screen,
                                      const FrameRequest& req) {
  // The engine's own input_is_linear; a plate on a blue backing goes to the blue-screen
  // model this engine holds when its Model names one (checkpoint_blue), as inference does.
  FrameSettings s;
  s.color = impl_->settings.input_is_linear ? ColorSpace::Linear : ColorSpace::Srgb;
  s.screen = screen;
  return key_frame(*this, nullptr, plate, hint, s, req);
}

CORRIDORKEY_NAMESPACE_END
