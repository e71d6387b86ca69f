#include "pipeline/frame_writer.h"

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
  const Image alpha = post::resize_lanczos(alpha_model, width, height);
  Image fg = post::resize_lanczos(fg_model, width, height);
  if (plan.swap_gb) swap_green_blue(fg);  // keyed swapped: back to the plate's channel order
  post::PostResult pr;
  if (job_.processed || job_.comp) {
    auto po = post_;
    po.blue_backing = plan.screen.screen == Screen::Blue;  // despill the backing's channel
    pr = post::finish(alpha, fg, po);
  }
  timings.postprocess_ms = ms_since(t);
  t = Clock::now();
  const auto out = outputs_for(plan, job_, stem);
  if (!out.fg.empty()) io::write_exr(out.fg, fg, "RGB", compression_);
  if (!out.matte.empty()) io::write_exr(out.matte, alpha, "Y", compression_);
  if (!out.processed.empty()) io::write_exr(out.processed, pr.processed, "RGBA", compression_);
  if (!out.comp.empty()) {
    if (job_.comp_format == "png") io::write_png8(out.comp, pr.comp);
    else io::write_exr(out.comp, pr.comp, "RGB", compression_);
  }
  timings.write_ms = ms_since(t);
}

}  // namespace corridorkey::pipeline
