// Writer side of the pipeline: resize the model outputs to the plate, post-process, encode
// the selected outputs (each written to a temporary name and renamed when complete).
#pragma once

#include "io/image_io.h"
#include "pipeline/clip_plan.h"
#include "post/postprocess.h"

namespace corridorkey::pipeline {

class FrameWriter {
 public:
  FrameWriter(const InferenceOptions& job, const post::PostOptions& post);

  /// Writes one frame from its model-resolution alpha / fg; fills postprocess_ms and
  /// write_ms. Throws IoError naming the file that could not be written.
  void write(const ClipPlan& plan, const std::string& stem, int width, int height,
             const Image& alpha_model, const Image& fg_model, StageTimings& timings) const;

 private:
  const InferenceOptions& job_;
  post::PostOptions post_;
  io::ExrCompression compression_;
};

}  // namespace corridorkey::pipeline
