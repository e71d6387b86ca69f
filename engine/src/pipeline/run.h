// The clip pipeline with the blue-screen model supplied on demand: the pipeline asks for it
// only when a clip with frames to key is on a blue backing, so a job of green clips never
// loads it, and a caller that keys many parts (a farm chunk) loads it once.
#pragma once

#include <corridorkey/engine.h>
#include <corridorkey/pipeline.h>

#include <functional>
#include <memory>

namespace corridorkey::pipeline {

/// Returns the blue-screen engine (loading it on the first call) or nullptr for none.
using BlueEngineSource = std::function<BaseEngine*()>;

/// The blue-screen engine `main` holds (its Model's checkpoint_blue, loaded on the first call
/// and kept by `main`), or a source of nullptr when its Model names none. The file is checked
/// now: a typo in the path is reported on every run, not only on a job with a blue clip.
BlueEngineSource held_blue_engine(BaseEngine& main);

JobSummary run_pipeline(BaseEngine& engine, const BlueEngineSource& blue, const InferenceOptions& job,
                        const std::function<void(const PipelineEvent&)>& on_event);

}  // namespace corridorkey::pipeline
