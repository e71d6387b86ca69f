// NDJSON events on stdout (`--json`).
//  - Lossless names: a file name need not be UTF-8 (Latin-1 plates from an old NAS). JSON
//    text must be, so each byte that is not part of valid UTF-8 is written as the lone
//    surrogate escape \udcXX (XX = the byte, 80..ff): Python's "surrogateescape" rule (PEP
//    383), so `os.fsencode(json.loads(line)["file"])` gives back the exact bytes. Valid
//    UTF-8 never holds a surrogate, so the rule is unambiguous. Replacing bytes with U+FFFD
//    would lose the name.
//  - A reader that goes away (`--json | head -1`) stops the events, not the keying: SIGPIPE
//    is ignored (main.cpp), the failed write closes the stream, one line on stderr says so,
//    and the exit code stays the frames'.
#pragma once

#include <corridorkey/pipeline.h>

#include <nlohmann/json.hpp>

#include <exception>
#include <string>

namespace corridorkey::cli {

/// `j` as one line of JSON with the escape rule above for strings that are not UTF-8.
std::string dump_lossless(const nlohmann::json& j);

class EventStream {
 public:
  /// Writes one event line to stdout (all of it or, once the reader is gone, nothing more).
  void line(const nlohmann::json& j);
  bool closed() const { return closed_; }

 private:
  bool closed_ = false;
};

/// The event a run that fails outright (no summary follows) ends its stream with:
/// {"event":"error","kind":"usage|input|model|failure","exit_code":N,"message":...}, with
/// the exit code main() returns for that error.
nlohmann::json error_event(const std::exception& e);

/// How main() classes an exception: usage (ConfigError, exit 2), input (IoError, 3), model
/// (ModelError, 4), device (DeviceError, 4), failure (anything else, 1).
struct ExitClass {
  const char* kind;
  int exit_code;
};
ExitClass exit_class(const std::exception& e);

/// A pipeline event as one `--json` object ({"event":"frame_done","clip":...}); `serve`
/// sends the same objects as clip.event notifications.
nlohmann::json event_json(const PipelineEvent& e);
nlohmann::json stage_json(const StageTimings& t);
/// The run's summary ({"event":"summary",...}): the last `--json` line, clip.key's result.
nlohmann::json summary_json(const JobSummary& sum);

/// The engine's measured plan in a summary: origin, the trials' cost in this process
/// (0 when read from the cache), the cache; and as the text summary's line.
nlohmann::json plan_json(const TunePlan& p);
std::string plan_text(const TunePlan& p);

}  // namespace corridorkey::cli
