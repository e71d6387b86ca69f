#include "pipeline/frame_writer.h"

#include <corridorkey/frame.h>

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
  if (!out.fg.empty()) write_frame_output(FrameOutput::Fg, out.fg, raw.fg, compression);
  if (!out.matte.empty()) write_frame_output(FrameOutput::Matte, out.matte, raw.alpha, compression);
  if (!out.processed.empty())
    write_frame_output(FrameOutput::Processed, out.processed, done.processed, compression);
  if (!out.comp.empty()) write_frame_output(FrameOutput::Comp, out.comp, done.comp, compression);
  timings.write_ms = ms_since(t);
}

}  // namespace corridorkey::pipeline
