// Where the library's messages go: notes (the thread count it settled on, the precision a
// measured plan chose, a checkpoint picked from a folder), warnings (a deprecated profile
// key, NaN samples replaced) and debug lines (tune trials under CORRIDORKEY_TUNE_VERBOSE).
// The library writes nothing to stderr itself; every message goes through the handler.
//
//   corridorkey::set_log_handler(corridorkey::LogLevel::Warning,
//       [](corridorkey::LogLevel l, const std::string& m) { host_log(l, m); });
//
// The default handler writes each message at any level as one stderr line, as the library
// always has: "corridorkey: <message>", with "warning: " / "error: " after the colon for
// those levels.
//
// Thread-safety: set_log_handler / reset_log_handler may be called from any thread at any
// time. The handler is called from whichever thread produced the message: the thread that
// constructs an engine or calls process_frame(), and, during run_inference(), the threads
// the clip pipeline starts (readers, inference, writers). Calls are serialised: the handler
// never runs twice at once, so it needs no lock of its own; it may call set_log_handler.
// A handler that throws has its exception caught and dropped: it never reaches the library.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/version.h>

#include <functional>
#include <string>

CORRIDORKEY_NAMESPACE_BEGIN

enum class LogLevel { Debug = 0, Info = 1, Warning = 2, Error = 3 };

CORRIDORKEY_API const char* to_string(LogLevel level);

/// Receives the message text without the "corridorkey: " prefix or the level word, no
/// trailing newline.
using LogHandler = std::function<void(LogLevel level, const std::string& message)>;

/// Process-global: messages below `min_level` are dropped; the rest go to `handler`. An
/// empty handler drops everything.
CORRIDORKEY_API void set_log_handler(LogLevel min_level, LogHandler handler);

/// Back to the default: every level, as stderr lines.
CORRIDORKEY_API void reset_log_handler();

CORRIDORKEY_NAMESPACE_END
