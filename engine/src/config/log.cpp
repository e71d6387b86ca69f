#include "config/log.h"

#include <iostream>
#include <memory>
#include <mutex>

namespace corridorkey::detail {
namespace {

struct Sink {
  LogLevel min_level = LogLevel::Debug;
  std::shared_ptr<const LogHandler> handler;  // null: the default stderr handler
};

// The installed sink (swapped under g_sink_m) and the lock that serialises handler calls.
// Recursive: a handler that itself triggers a library message must not deadlock.
std::mutex g_sink_m;
Sink g_sink;
std::recursive_mutex g_call_m;

void write_stderr(LogLevel level, const std::string& message) {
  const char* word = level == LogLevel::Warning ? "warning: " : level == LogLevel::Error ? "error: " : "";
  // std::cerr as before (a host that swapped its rdbuf still gets the lines), one insertion
  // per line so lines from different threads do not interleave mid-line.
  const std::string line = std::string("corridorkey: ") + word + message + "\n";
  std::cerr << line << std::flush;
}

}  // namespace
}  // namespace corridorkey::detail

CORRIDORKEY_NAMESPACE_BEGIN
using detail::g_sink_m;
using detail::g_sink;

const char* to_string(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warning: return "warning";
    case LogLevel::Error: return "error";
  }
  return "?";
}

void set_log_handler(LogLevel min_level, LogHandler handler) {
  auto h = std::make_shared<const LogHandler>(std::move(handler));
  std::lock_guard<std::mutex> l(g_sink_m);
  g_sink = {min_level, std::move(h)};
}

void reset_log_handler() {
  std::lock_guard<std::mutex> l(g_sink_m);
  g_sink = {};
}

CORRIDORKEY_NAMESPACE_END

namespace corridorkey::detail {

void log(LogLevel level, const std::string& message) noexcept {
  Sink s;
  {
    std::lock_guard<std::mutex> l(g_sink_m);
    s = g_sink;  // a copy: the handler runs outside this lock, so it may replace itself
  }
  if (level < s.min_level) return;
  try {
    std::lock_guard<std::recursive_mutex> l(g_call_m);
    if (!s.handler) return write_stderr(level, message);
    if (*s.handler) (*s.handler)(level, message);
  } catch (...) {
    // The host's handler threw: drop it here, a log line must never fail the library's work.
  }
}

void note(std::string& notes, const std::string& line) {
  notes += line + "\n";
  log(LogLevel::Info, line);
}

}  // namespace corridorkey::detail
