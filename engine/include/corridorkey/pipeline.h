// Keying clips end to end: discovery, overlapped read -> infer -> write, outputs on disk.
//
//   corridorkey::InferenceOptions job;
//   job.paths = {"/shots/sh010"};
//   auto summary = corridorkey::run_inference(corridorkey::load_profile("optimized"), job,
//                                             [](const corridorkey::PipelineEvent& e) {...});
//
// Threads: `read_workers` decode + pre-process, one inference thread drives the engine,
// `write_workers` post-process + encode. Queues between them are bounded, so memory stays
// flat however long the clip. Every file is written to a temporary name in its folder and
// renamed when complete: an interrupted run never leaves a partial file.
//
// Events: `on_event` is called one event at a time (never concurrently), from the calling
// thread (job, clip, warning and failure events of the inference stage) and from the
// writer threads (frame_done, and frame_failed of a write). Counters in an event are read
// under the lock that guards them. A callback that throws stops the job: no further
// frames are read, keyed or written, the callback is not called again, and run_inference
// throws corridorkey::Error naming the callback's exception once every pipeline thread
// has ended (files already renamed stay; none is left half-written). run_inference never
// returns or throws with a pipeline thread still running.
//
// Thread-safety: run_inference(engine, ...) drives `engine` from its inference thread for the
// whole call, so nothing else may call that engine (or the blue engine) until it returns;
// other engines, also on the same Model, may key at the same time. Two run_inference calls
// on different engines may run concurrently (their output folders should differ). The
// overload taking a Profile makes its own engines and may be called from any thread: a job
// needs both halves (profile.model loads the Model, and the blue-screen Model, with the plan
// made for profile.engine; the engines run with profile.engine).
// `cancel` may be set from any thread, the signal handler included.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/tune.h>
#include <corridorkey/engine.h>
#include <corridorkey/options.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

struct PipelineEvent {
  /// VideoWritten / VideoFailed: a video deliverable (file = the video) after the frames.
  enum class Kind { JobStarted, ClipStarted, FrameDone, FrameSkipped, Warning, FrameFailed,
                    VideoWritten, VideoFailed, ClipDone, JobDone };
  Kind kind = Kind::JobStarted;
  std::string clip, frame, file, message;
  /// clip_started: the checkpoint that keys the clip and the backing it was keyed for.
  std::string checkpoint, screen;
  int frames_done = 0, frames_total = 0;
  StageTimings timings;  // frame_done: this frame's read .. write times
  /// job_started: where the engine's measured plan came from and what its trials cost in
  /// this process (0 when it was read from the cache or tune is off; the trials run while
  /// the model loads, before the job's wall time starts).
  PlanOrigin plan_origin = PlanOrigin::Off;
  double trial_ms = 0;
};
CORRIDORKEY_API const char* to_string(PipelineEvent::Kind k);

/// Which model keyed a clip.
struct ClipModel {
  std::string clip, checkpoint;
  std::string screen;   // the clip's backing: "green" | "blue"
  bool swapped = false; // green and blue swapped around a model trained on the other colour
};

struct JobSummary {
  int clips = 0, frames_total = 0, frames_done = 0, frames_skipped = 0, frames_failed = 0;
  int videos_written = 0, videos_failed = 0;
  std::vector<std::string> failures;  // "file: reason" (frames and videos)
  bool interrupted = false;
  double wall_ms = 0;
  /// Time the inference thread sat idle: waiting for a pre-processed frame (readers behind)
  /// or for room in the write queue (writers behind). 0 = inference bound the run.
  double infer_wait_ms = 0;
  /// Summed over frames (each stage runs on its own threads, so they overlap in time).
  StageTimings stage_sums;
  EngineInfo engine;
  std::vector<ClipModel> clip_models;  // one per clip, in order
};

/// Keys the clips with an engine the caller owns (built once, reused for many calls: a
/// farm task keying several clip parts loads the checkpoint once). Clips on a blue
/// backing are keyed with `blue_engine` (a blue-screen model) when given; without it, with
/// a blue-screen model loaded for this call when the engine's options name one
/// (checkpoint_blue), else with `engine` and the green/blue swap. Throws ConfigError /
/// IoError for problems found before any frame is keyed (bad options, no clips, count
/// mismatch); per-frame problems are reported through events and the summary (and stop the
/// job under OnError::Stop after the frames already in flight are written).
CORRIDORKEY_API JobSummary run_inference(BaseEngine& engine, const InferenceOptions& job,
                                         const std::function<void(const PipelineEvent&)>& on_event = {});
CORRIDORKEY_API JobSummary run_inference(BaseEngine& engine, BaseEngine* blue_engine,
                                         const InferenceOptions& job,
                                         const std::function<void(const PipelineEvent&)>& on_event = {});

/// The same with an engine built from `profile` for this call (ModelError / DeviceError from
/// loading it), and the blue-screen model of checkpoint_blue loaded only when a clip is on a
/// blue backing.
CORRIDORKEY_API JobSummary run_inference(const Profile& profile,
                                         const InferenceOptions& job,
                                         const std::function<void(const PipelineEvent&)>& on_event = {});

CORRIDORKEY_NAMESPACE_END
