// The library's one way to print a message: through the host's handler (corridorkey/log.h).
#pragma once

#include <corridorkey/log.h>

#include <string>

namespace corridorkey::detail {

/// Send one message to the installed handler (stderr by default). Never throws.
void log(LogLevel level, const std::string& message) noexcept;

/// Append `line` to an engine's notes and log it at Info: the notes are what the engine
/// reports (BaseEngine::notes()), the log is what the host sees as it happens.
void note(std::string& notes, const std::string& line);

}  // namespace corridorkey::detail
