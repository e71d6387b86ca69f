// Writer side of the pipeline: the model's outputs back at the plate (to_plate), finished and
// each selected output written in its colour space (frame_stages.h), each to a temporary
// name and renamed when complete.
#pragma once

#include <corridorkey/frame.h>
#include <corridorkey/options.h>

#include "io/plate_metadata.h"
#include "pipeline/clip_plan.h"

#include <memory>

namespace corridorkey::pipeline {

class FrameWriter {
 public:
  /// `engine`: the settings whose post-processing part (despill, despeckle) every frame is
  /// finished with; the backing is each clip's.
  FrameWriter(const InferenceOptions& job, const EngineSettings& engine)
      : job_(job), post_(post_settings(engine, Screen::Green)) {}

  /// Writes one frame from its model-resolution alpha / fg; fills postprocess_ms and
  /// write_ms. `plate`: what the plate's header carries to the EXR outputs (null: nothing);
  /// `mattes`: the frame's garbage and holdout mattes (null: none).
  /// Throws IoError naming the file that could not be written.
  void write(const ClipPlan& plan, const std::string& stem, int width, int height,
             const Image& alpha_model, const Image& fg_model, StageTimings& timings,
             std::shared_ptr<const io::PlateMetadata> plate = nullptr,
             std::shared_ptr<const FrameMattes> mattes = nullptr) const;

 private:
  const InferenceOptions& job_;
  PostSettings post_;  // the engine's; backing set per clip
};

}  // namespace corridorkey::pipeline
