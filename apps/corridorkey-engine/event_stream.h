// NDJSON events on stdout (`--json`). The events and the summary are the engine's
// (report_json.h: one writer for the CLI, serve, run.json and Python); this file writes them.
//  - Lossless names: strings that are not UTF-8 keep their bytes as \udcXX escapes
//    (report_json.h); dump_lossless applies the same rule to the CLI's own objects.
//  - A reader that goes away (`--json | head -1`) stops the events, not the keying: SIGPIPE
//    is ignored (main.cpp), the failed write closes the stream, one line on stderr says so,
//    and the exit code stays the frames'.
#pragma once

#include <corridorkey/pipeline.h>

#include <nlohmann/json.hpp>

#include <exception>
#include <string>

namespace corridorkey::cli {

/// `j` as one line of JSON with report_json.h's string rule. A value made by raw_json is
/// written as the text it holds.
std::string dump_lossless(const nlohmann::json& j);
/// JSON text from report_json.h, to sit in an object that dump_lossless writes (its strings
/// may hold \udcXX escapes, which a JSON parser refuses: it is kept as text, not parsed).
nlohmann::json raw_json(const std::string& text);
/// `object` (the text of a JSON object) with the members of `extra` added at its end.
std::string with_members(std::string object, const nlohmann::json& extra);

class EventStream {
 public:
  /// Writes one event line to stdout (all of it or, once the reader is gone, nothing more).
  void line(const std::string& json_text);
  bool closed() const { return closed_; }

 private:
  bool closed_ = false;
};

/// The event a run that fails outright (no summary follows) ends its stream with:
/// {"event":"error","kind":"usage|input|model|failure","exit_code":N,"message":...}, with
/// the exit code main() returns for that error.
std::string error_event(const std::exception& e);

/// How main() classes an exception: usage (ConfigError, exit 2), input (IoError, 3), model
/// (ModelError, 4), device (DeviceError, 4), failure (anything else, 1).
struct ExitClass {
  const char* kind;
  int exit_code;
};
ExitClass exit_class(const std::exception& e);

/// The engine's measured plan as the text summary's line.
std::string plan_text(const TunePlan& p);

}  // namespace corridorkey::cli
