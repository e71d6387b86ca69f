#include "pipeline/frame_writer.h"

#include <corridorkey/frame.h>

#include "io/image_io.h"
#include "post/postprocess.h"
#include "timing.h"

namespace corridorkey::pipeline {

using timing::Clock;
using timing::ms_since;

FrameWriter::FrameWriter(const InferenceOptions& job, const post::PostOptions& post)
    : job_(job), post_(post), compression_(io::parse_exr_compression(job.exr_compression)) {}

void FrameWriter::write(const ClipPlan& plan, const std::string& stem, int width, int height,
                        const Image& alpha_model, const Image& fg_model,
                        StageTimings& timings) const {
  auto t = Clock::now();
  RawFrame raw;
  raw.alpha = post::resize_lanczos(alpha_model, width, height);
  raw.fg = post::resize_lanczos(fg_model, width, height);
  if (plan.swap_gb) swap_green_blue(raw.fg);  // keyed swapped: back to the plate's channel order
  PostSettings ps;
  ps.despeckle = post_.despeckle;
  ps.despeckle_size = post_.despeckle_size;
  ps.despill_strength = post_.despill_strength;
  ps.backing = plan.screen.screen == Screen::Blue ? Screen::Blue : Screen::Green;
  const auto done = finish_frame(raw, ps, job_.processed, job_.comp);
  timings.postprocess_ms = ms_since(t);
  t = Clock::now();
  const auto out = outputs_for(plan, job_, stem);
  const char* compression = io::to_string(compression_);
  const auto& colour = plan.colour;
  auto xy = [](const std::optional<colour::Chromaticities>& c) { return c ? c->data() : nullptr; };
  if (!out.fg.empty()) {
    if (colour.fg) {  // --fg-colorspace: the model's sRGB foreground, linearised, re-encoded
      Image fg = post::to_linear(raw.fg);
      colour.fg->apply(fg.pixels.data(), static_cast<int64_t>(fg.width) * fg.height, fg.channels);
      io::write_exr(out.fg, fg, "RGB", compression_, xy(colour.fg_xy));
    } else {
      write_frame_output(FrameOutput::Fg, out.fg, raw.fg, compression);
    }
  }
  if (!out.matte.empty()) write_frame_output(FrameOutput::Matte, out.matte, raw.alpha, compression);
  if (!out.processed.empty()) {
    // Linear premultiplied: a matrix on premultiplied RGB is the matrix on straight RGB,
    // premultiplied; alpha passes through.
    const Image* processed = &done.processed;
    Image converted;
    if (colour.processed) {
      converted = done.processed;
      colour.processed->apply(converted.pixels.data(),
                              static_cast<int64_t>(converted.width) * converted.height, 4);
      processed = &converted;
    }
    io::write_exr(out.processed, *processed, "RGBA", compression_, xy(colour.processed_xy));
  }
  if (!out.comp.empty()) {
    if (colour.comp) {  // --comp-view: the preview's linear values through the config's view
      Image comp = post::to_linear(done.comp);
      colour.comp->apply(comp.pixels.data(), static_cast<int64_t>(comp.width) * comp.height, 3);
      write_frame_output(FrameOutput::Comp, out.comp, comp, compression);
    } else {
      write_frame_output(FrameOutput::Comp, out.comp, done.comp, compression);
    }
  }
  timings.write_ms = ms_since(t);
}

}  // namespace corridorkey::pipeline
