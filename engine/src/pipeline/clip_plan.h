// Planning a run: clips discovered, frames selected (ranges, skip-existing), output folders
// created, colour space decided; the one place that names a frame's output files.
#pragma once

#include <corridorkey/hint.h>
#include <corridorkey/options.h>
#include <corridorkey/pipeline.h>

#include "io/clip.h"

#include <filesystem>
#include <string>
#include <vector>

namespace corridorkey::pipeline {

struct ClipPlan {
  io::Clip clip;
  std::vector<int> frames;         // 0-based indices to key
  std::vector<std::string> stems;  // output name of every frame of the clip
  bool linear = false;             // plates are scene-linear
  std::filesystem::path out;       // <clip>/Output or <output_root>/<clip>
  /// Hints from a chroma key of each plate, written to <out>/AlphaHint/<stem>.png.
  bool generate_hint = false;
  ChromaHintOptions hint_options;
  /// The backing: estimated (coverage > 0) or as given by --screen.
  ScreenEstimate screen;
  /// Which engine keys the clip (0 = the main one, 1 = the blue-screen model), the model
  /// size it pre-processes to and the checkpoint it runs (assigned after planning).
  int engine = 0;
  int64_t model_size = 0;
  std::string checkpoint;
  /// The backing is not the one the clip's model was trained on: green and blue swapped
  /// before the model and after it.
  bool swap_gb = false;
  /// Which outputs are also encoded as videos, at which frame rate.
  VideoOutputs videos;
  double fps = 24;

  std::filesystem::path hint_file(const std::string& stem) const {
    return out / "AlphaHint" / (stem + ".png");
  }
};

/// The selected outputs of one frame (empty string = not selected).
struct FrameOutputs {
  std::string fg, matte, processed, comp;
  std::vector<std::string> all() const;
};
FrameOutputs outputs_for(const ClipPlan& plan, const InferenceOptions& job,
                         const std::string& stem);

/// Something found while planning, reported after job_started.
struct PlannedEvent {
  PipelineEvent::Kind kind;
  std::string clip, frame, file, message;
};

struct Plan {
  std::vector<ClipPlan> clips;
  std::vector<PlannedEvent> events;
  int frames_total = 0, frames_skipped = 0;
  std::vector<std::string> clips_skipped;  // unreadable clips of a clips root, for the summary
};

/// Throws IoError / ConfigError for what makes the whole run impossible (no clips, count
/// mismatch without allow_mismatch, bad frame ranges, unwritable output folders, no hints
/// and no backing to generate them from).
Plan plan_job(const InferenceOptions& job);

}  // namespace corridorkey::pipeline
