// What the engine reports, as JSON text: pipeline events, a job's summary, a clip's run.json,
// an engine's info, stage timings and the measured plan. Every output that carries them is
// written here: `inference --json` and `job run --json` (NDJSON), serve's responses and
// notifications, run.json, and the Python module, which json.loads this text. So the fields
// of each agree by construction; docs/clips.md ("NDJSON events") names them.
//
// Names keep their bytes. A file name need not be UTF-8 (Latin-1 plates from an old NAS);
// JSON text must be, so each byte of a name (clip, frame, file, checkpoint, profile, cache)
// that is not part of valid UTF-8 is written as the lone surrogate escape \udcXX (XX = the
// byte, 80..ff): Python's "surrogateescape" rule (PEP 383), so
// `os.fsencode(json.loads(line)["file"])` gives back the exact bytes. Valid UTF-8 never holds
// a surrogate, so the rule is unambiguous; replacing bytes with U+FFFD would lose the name.
// Text for a person (message, failures, notes, why) shows such a byte as the characters \xNN
// instead: it always prints (a lone surrogate makes Python's print() raise). Control
// characters (C0, DEL, C1) are escaped, so nothing read from a file drives a terminal.
// run.json alone writes U+FFFD for such bytes: it is a file for any JSON reader, and many
// refuse lone surrogates.
//
// Thread-safety: every function here is pure; call them from any thread.
#pragma once

#include <corridorkey/engine.h>
#include <corridorkey/export.h>
#include <corridorkey/pipeline.h>
#include <corridorkey/tune.h>

#include <string>
#include <utility>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

/// `s` as a JSON string literal, quotes included, with the rule above.
CORRIDORKEY_API std::string json_string(const std::string& s);

/// {"read_ms","preprocess_ms","infer_ms","encoder_ms","decoders_ms","refiner_ms",
/// "postprocess_ms","write_ms"}: milliseconds per stage (StageTimings). The one spelling of
/// stage times in every output; a caller adds what is its own (serve's queue_ms, total_ms).
CORRIDORKEY_API std::string stage_timings_json(const StageTimings& t);

/// {"origin","trial_ms","cache","decisions":{OPTION:{"value","source","why","times_ms"}}}.
/// trial_ms is TunePlan::trial_ms_this_run(): 0 for a plan read from the cache.
CORRIDORKEY_API std::string tune_plan_json(const TunePlan& p);

/// {"device","arch","checkpoint","profile","compile_mode","precision","attention","refiner",
/// "img_size","backbone_size","parameters","notes","plan":tune_plan_json}.
CORRIDORKEY_API std::string engine_info_json(const EngineInfo& i);

/// One event: {"event": to_string(kind), "clip", "frame", "file", "message", "checkpoint",
/// "screen" (each only when not empty), "done", "total"}; frame_done adds "timings"
/// (stage_timings_json), job_started "plan" {"origin","trial_ms"}.
CORRIDORKEY_API std::string event_json(const PipelineEvent& e);

/// The job's summary, the last NDJSON line: {"event":"summary", the counts, "failures",
/// "interrupted", "wall_ms", "infer_wait_ms", "device", "checkpoint", "stage_sums"
/// (stage_timings_json summed over frames), "plan" (tune_plan_json), "engine"
/// (engine_info_json), "clip_models":[{"clip","checkpoint","screen","swapped"}]}.
CORRIDORKEY_API std::string summary_json(const JobSummary& s);

/// The event a run that fails outright ends its stream with:
/// {"event":"error","kind":KIND,"exit_code":N,"message":MESSAGE}.
CORRIDORKEY_API std::string error_event_json(const std::string& kind, int exit_code, const std::string& message);

/// What one clip's run.json holds (docs/clips.md, "run.json"); the pipeline fills it.
struct RunRecord {
  std::string engine_version, finished;  // finished: UTC, ISO 8601
  std::string clip, clip_folder;
  EngineInfo engine;
  std::string screen, hints;  // "green" | "blue"; "generated" | "files"
  /// The garbage and holdout mattes keyed with: a folder, one file or a video ("": none).
  std::string garbage_matte, holdout_matte;
  bool swapped = false;
  std::string input_colorspace, input_colorspace_why, ocio_config;
  /// Post-processing settings as the option table prints them ("despill", "0.5"): numbers
  /// and booleans are written as JSON numbers and booleans.
  std::vector<std::pair<std::string, std::string>> settings;
  std::vector<std::string> outputs;  // "fg", "matte", "processed", "comp"
  std::string comp_format;
  size_t frames_selected = 0;
  bool interrupted = false;
  double job_wall_ms = 0;
  std::vector<std::pair<std::string, StageTimings>> frame_times;  // frame (output name), its stages
  std::vector<std::pair<std::string, std::string>> failures;      // frame, message
};

/// run.json's text: one key a line, bytes that are not UTF-8 as U+FFFD.
CORRIDORKEY_API std::string run_json(const RunRecord& r);

CORRIDORKEY_NAMESPACE_END
