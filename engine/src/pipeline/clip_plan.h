// Planning a run: clips discovered, frames selected (ranges, skip-existing), output folders
// created (after the models load), colour space decided; the one place that names a frame's output files.
#pragma once

#include <corridorkey/hint.h>
#include <corridorkey/options.h>
#include <corridorkey/pipeline.h>

#include "io/clip.h"
#include "pipeline/clip_colour.h"
#include "pipeline/frame_mattes.h"
#include "io/decode_budget.h"
#include "io/temp_files.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace corridorkey::pipeline {

struct ClipPlan {
  io::Clip clip;
  std::vector<int> frames;         // 0-based indices to key
  std::vector<std::string> stems;  // output name of every frame of the clip
  bool linear = false;             // plates are scene-linear (after colour.decode)
  ClipColour colour;               // input colour space, its decode, the outputs' spaces
  std::filesystem::path out;       // <clip>/Output or <output_root>/<clip>
  /// Hints from a chroma key of each plate, written to <out>/AlphaHint/<stem>.png.
  bool generate_hint = false;
  ChromaHintOptions hint_options;
  /// A frame whose generated hint finds no backing (mean >= kNoBackingMean) fails.
  bool backing_check = true;
  /// The backing: estimated (coverage > 0) or as given by --screen.
  ScreenEstimate screen;
  /// Garbage and holdout mattes (the run's, else the clip's own folders).
  MatteSources mattes;
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
  std::string fg, matte, processed, comp, layered;
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
  /// Pixel limit and decode budget of the read workers (planning reads one frame at a time).
  io::DecodeLimits decode;
  /// Confined writing (InferenceOptions::confine_writes): the output folders, opened without
  /// following links and pinned for as long as the plan lives (the frames, videos and run.json
  /// are written through them).
  std::shared_ptr<io::PinnedFolders> pins;
};

/// IoError when a plate and its hint have different aspect ratios, told from their headers
/// (check_aspect: sizes given, e.g. a video's) before either is decoded: a small file
/// declaring 16000 x 16000 would otherwise be decoded in full, tens of seconds and
/// gigabytes, only to be refused for its shape afterwards. Unknown sizes (0) pass.
void check_aspect(const std::string& plate, int64_t pw, int64_t ph, int64_t hw, int64_t hh);
void check_shapes_from_headers(const std::string& plate, const std::string& hint);
/// The size a file's header declares; 0 x 0 when it cannot be told.
io::ImageSize header_size(const std::string& file);

/// Throws IoError / ConfigError for what makes the whole run impossible (no clips, count
/// mismatch without allow_mismatch, bad frame ranges, unwritable output folders, no hints
/// and no backing to generate them from).
Plan plan_job(const InferenceOptions& job);
/// The output folders of the planned clips made (those of the outputs asked for) and swept of
/// a killed run's temporary files; called once the clips' models have loaded.
void make_output_folders(Plan& plan, const InferenceOptions& job);

}  // namespace corridorkey::pipeline
