// Video deliverables: once a clip's image sequences are complete (this run and earlier
// ones or other farm chunks together), Comp / Matte / FG are encoded from them as
// <out>/Comp.mp4 (.mov for ProRes). The sequences stay the masters; a video is only ever
// built from a complete sequence, so --frames and --skip-existing runs never leave a short one.
#pragma once

#include "pipeline/clip_plan.h"

#include <functional>
#include <string>

namespace corridorkey::pipeline {

struct VideoReport {
  int written = 0, failed = 0;
};

/// Encodes the clip's selected videos whose sequences are complete. A video that exists is
/// re-encoded only when this run keyed frames of the clip (`keyed_now`). Reports each video
/// written, not yet possible (frames missing) or failed through `emit`.
VideoReport encode_clip_videos(const ClipPlan& plan, const InferenceOptions& job, bool keyed_now,
                               const std::function<void(PipelineEvent::Kind, const std::string& file,
                                                        const std::string& message)>& emit);

}  // namespace corridorkey::pipeline
