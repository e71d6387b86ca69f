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

/// The options of the blue-screen engine of `main`: its profile and run settings with
/// checkpoint_blue as the checkpoint and a blue model_screen.
EngineOptions blue_engine_options(const EngineOptions& main);

/// A source that loads blue_engine_options(main) once into `holder` when main names a
/// checkpoint_blue, else one that returns nullptr.
BlueEngineSource lazy_blue_engine(const EngineOptions& main, std::unique_ptr<BaseEngine>& holder);

JobSummary run_pipeline(BaseEngine& engine, const BlueEngineSource& blue, const InferenceOptions& job,
                        const std::function<void(const PipelineEvent&)>& on_event);

}  // namespace corridorkey::pipeline
