// run.json: what a clip's last run did, written beside its outputs when the run ends (the
// profile and model, the resolved precision and where the plan came from, the colour and
// backing decisions, the post-processing settings, per-frame times and failures, the
// engine version), so a viewer (`review`) or a person can tell how the files were made.
// Not an output: --skip-existing compares frame outputs only. Torch-free.
#pragma once

#include <corridorkey/engine.h>
#include <corridorkey/options.h>

#include "pipeline/clip_plan.h"

#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace corridorkey::pipeline {

class RunRecords {
 public:
  /// Thread-safe (the writer threads report frames).
  void frame_done(size_t clip, int index, const std::string& stem, const StageTimings& t);
  void frame_failed(size_t clip, int index, const std::string& stem, const std::string& why);

  /// Writes <out>/run.json (temporary name, then rename) for every clip this run keyed or
  /// failed a frame of; a clip whose frames were all skipped keeps the file of the run that
  /// made them. `info(clip)` is the engine that keyed the clip. Never throws: a file that
  /// cannot be written is returned as a warning naming it.
  std::vector<std::string> write(const Plan& plan, const InferenceOptions& job,
                                 const std::function<const EngineInfo&(size_t)>& info,
                                 const EngineSettings& settings, bool interrupted, double wall_ms) const;

 private:
  struct Frame {
    size_t clip;
    int index;
    std::string stem, error;
    StageTimings t;
  };
  mutable std::mutex m_;
  std::vector<Frame> frames_;
};

}  // namespace corridorkey::pipeline
