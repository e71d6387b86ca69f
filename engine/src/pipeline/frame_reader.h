// Reader side of the pipeline: decode plates and hints (image sequences frame by frame,
// videos in order) and pre-process them to the model's input (prepare_frame, frame_stages.h).
#pragma once

#include "pipeline/clip_plan.h"
#include "pipeline/frame_items.h"

#include <functional>

namespace corridorkey::pipeline {

class FrameReader {
 public:
  /// Each clip is pre-processed to its own model's size (ClipPlan::model_size).
  /// `limits`: the pixel limit and the decode budget, for limits.workers readers at once.
  FrameReader(const std::vector<ClipPlan>& plans, const io::DecodeLimits& limits)
      : plans_(plans), limits_(limits) {}

  /// One frame of an image sequence; never throws (a failure is a ReadItem with .error).
  ReadItem read_frame(size_t clip, int index) const;

  /// Every selected frame of a clip with a video plate or hint, in order, handed to `sink`
  /// (which returns false to stop). A broken stream ends the clip with one failed item.
  void read_video_clip(size_t clip, const std::function<bool(ReadItem)>& sink,
                       const std::function<bool()>& stopping) const;

 private:
  ReadItem prepare(size_t clip, int index, Image plate, Image hint, const std::string& file,
                   double read_ms, std::shared_ptr<const io::PlateMetadata> meta,
                   MatteRead garbage = {}, MatteRead holdout = {}) const;

  const std::vector<ClipPlan>& plans_;
  io::DecodeLimits limits_;
};

}  // namespace corridorkey::pipeline
