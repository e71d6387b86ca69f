#include "pipeline/frame_writer.h"

#include <corridorkey/frame.h>

#include "pipeline/frame_colour.h"
#include "pipeline/frame_stages.h"
#include "timing.h"

namespace corridorkey::pipeline {

using timing::Clock;
using timing::ms_since;

void FrameWriter::write(const ClipPlan& plan, const std::string& stem, int width, int height,
                        const Image& alpha_model, const Image& fg_model, StageTimings& timings,
                        std::shared_ptr<const io::PlateMetadata> plate,
                        std::shared_ptr<const FrameMattes> mattes) const {
  RawFrame raw;
  raw.mattes = std::move(mattes);
  to_plate(alpha_model, fg_model, width, height, plan.swap_gb, /*with_fg=*/true, raw);
  raw.colour = std::make_shared<const FrameColour>(FrameColour{plan.colour, std::move(plate)});
  auto t = Clock::now();
  PostSettings post = post_;
  post.backing = plan.screen.screen == Screen::Blue ? Screen::Blue : Screen::Green;
  const auto done = finish_frame(raw, post, job_.processed || job_.layered, job_.comp);
  timings.postprocess_ms = raw.timings.postprocess_ms + ms_since(t);
  t = Clock::now();
  const auto out = outputs_for(plan, job_, stem);
  const std::string& compression = job_.exr_compression;
  if (!out.fg.empty()) write_frame_output(FrameOutput::Fg, out.fg, raw.fg, raw, compression);
  if (!out.matte.empty()) write_frame_output(FrameOutput::Matte, out.matte, raw.alpha, raw, compression);
  if (!out.processed.empty())
    write_frame_output(FrameOutput::Processed, out.processed, done.processed, raw, compression);
  if (!out.comp.empty()) write_frame_output(FrameOutput::Comp, out.comp, done.comp, raw, compression);
  if (!out.layered.empty()) write_layered_output(out.layered, raw, done.processed, compression);
  timings.write_ms = ms_since(t);
}

}  // namespace corridorkey::pipeline
