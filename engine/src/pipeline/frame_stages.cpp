// key_frame (frame.h): one frame through the stages of the clip pipeline, in order, on the
// calling thread: read -> prepare_frame (frame_reader.cpp) -> the engine -> resize to the
// plate. The per-clip decisions (colour, backing, which model, swap) are made for this one
// plate by the same rules plan_job and Pipeline::assign_models apply to a clip.
#include <corridorkey/check.h>
#include <corridorkey/frame.h>

#include "io/image_io.h"
#include "pipeline/clip_plan.h"
#include "pipeline/frame_reader.h"
#include "post/postprocess.h"
#include "runtime/engine_impl.h"
#include "runtime/frame_tensors.h"
#include "timing.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <filesystem>

CORRIDORKEY_NAMESPACE_BEGIN

namespace {

using timing::Clock;
using timing::ms_since;

bool is_exr(const std::string& file) {
  std::string ext = std::filesystem::path(file).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".exr";
}

/// The backing of one plate, as resolve_hints decides it for a clip (from one plate here).
void resolve_screen(pipeline::ClipPlan& p, const Image& plate, const FrameSettings& s,
                    const std::string& file, std::vector<std::string>& warnings) {
  if (!p.generate_hint && s.screen != Screen::Auto) {
    p.screen.screen = s.screen;
    return;
  }
  Image srgb = plate;  // estimated on the sRGB-encoded plate, as the model sees it
  pipeline::decode_plate(p.colour, srgb);
  if (p.linear) post::linear_to_srgb_inplace(srgb.pixels.data(), srgb.pixels.size());
  CK_CHECK(srgb.channels >= 3, IoError, file, ": plate has ", srgb.channels,
           " channel(s); a backing colour needs an RGB plate");
  try {
    p.screen = estimate_screen({srgb.view()}, s.screen, file);
  } catch (const IoError& e) {
    if (p.generate_hint) throw;  // nothing to key the hint against
    p.screen.screen = Screen::Green;
    warnings.push_back(std::string("backing colour not estimated (") + e.what() +
                       "): keyed as a green screen (screen green|blue sets it)");
  }
}

}  // namespace

RawFrame key_frame(BaseEngine& engine, BaseEngine* blue_engine, FrameSource src,
                   const FrameSettings& s) {
  RawFrame raw;
  const auto t_read = Clock::now();
  const std::string file = src.plate_file.empty() ? std::string("plate") : src.plate_file;
  const bool hint_given = !src.hint_file.empty() || !src.hint.empty();
  if (src.plate.empty()) {
    CK_CHECK(!src.plate_file.empty(), ConfigError, "key_frame: no plate (neither a file nor an image)");
    if (src.hint.empty() && !src.hint_file.empty())
      pipeline::check_shapes_from_headers(src.plate_file, src.hint_file);
    src.plate = io::read_image(src.plate_file, s.max_pixels);
  }
  if (src.hint.empty() && !src.hint_file.empty()) src.hint = io::read_image(src.hint_file, s.max_pixels);
  const double read_ms = ms_since(t_read);

  pipeline::ClipPlan p;  // a clip of one frame, with no output folder
  p.clip.name = p.clip.root = file;
  p.clip.hint.frames = {src.hint_file.empty() ? std::string("hint") : src.hint_file};
  p.stems = {"frame"};
  const bool exr = is_exr(file);
  // Colour as a clip's (docs/colour.md): input_colorspace, else the deprecated color.
  const auto job_colour = pipeline::resolve_frame_colour(s.input_colorspace, s.color, s.ocio_config);
  p.colour = pipeline::file_colour(job_colour, src.plate_file, /*video=*/false, raw.warnings);
  p.linear = p.colour.linear;
  if (exr && !p.linear && p.colour.why == "default")
    raw.warnings.emplace_back(  // (emplace: g++ 12 warns falsely, -Warray-bounds, on push_back)
        "EXR plate keyed as sRGB (the reference's default); color linear (or auto) if it is "
        "scene-linear");
  p.generate_hint = !hint_given;
  p.hint_options = s.hint;
  p.backing_check = s.backing_check;
  resolve_screen(p, src.plate, s, file, raw.warnings);

  // Which model keys it: Pipeline::assign_models' rule.
  raw.backing = p.screen.screen == Screen::Blue ? Screen::Blue : Screen::Green;
  BaseEngine* use = &engine;
  if (raw.backing == Screen::Blue && engine.options().model_screen != Screen::Blue && blue_engine)
    use = blue_engine;
  auto& model = EngineAccess::impl(*use);
  p.model_size = model.S;
  p.swap_gb = raw.backing != use->options().model_screen;
  raw.swapped = p.swap_gb;
  raw.linear = p.linear;
  raw.checkpoint = model.info.checkpoint;

  const int width = src.plate.width, height = src.plate.height;
  auto it = pipeline::prepare_frame(p, 0, 0, std::move(src.plate), std::move(src.hint), file,
                                    read_ms, &raw.hint);
  for (auto& w : it.warnings) raw.warnings.push_back(std::move(w));
  raw.timings = it.timings;
  const auto t_infer = Clock::now();
  Image alpha_model, fg_model;
  detail::rethrow_torch(file + ": inference", [&] {
    c10::InferenceMode guard;
    auto run = model.infer(it.x.to(model.device));
    for (const auto& w : run.warnings) raw.warnings.push_back(w);
    detail::check_finite_outputs(run, file);
    raw.timings.encoder_ms = run.timings.encoder_ms;
    raw.timings.decoders_ms = run.timings.decoders_ms;
    raw.timings.refiner_ms = run.timings.refiner_ms;
    alpha_model = detail::tensor_to_image(run.alpha);
    fg_model = detail::tensor_to_image(run.fg);
  });
  raw.timings.infer_ms = ms_since(t_infer);
  const auto t_post = Clock::now();
  raw.alpha = post::resize_lanczos(alpha_model, width, height);
  raw.fg = post::resize_lanczos(fg_model, width, height);
  if (p.swap_gb) swap_green_blue(raw.fg);  // back to the plate's channel order
  raw.timings.postprocess_ms = ms_since(t_post);
  raw.timings.total_ms = ms_since(t_read);
  return raw;
}

CORRIDORKEY_NAMESPACE_END
