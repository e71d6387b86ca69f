// `corridorkey-engine serve`: JSON-RPC 2.0, one object per line, for host applications
// (docs/embedding.md has the protocol).
//
// Threads: the main thread reads stdin (--stdio) or accepts connections (one reader thread
// each). Every loaded model has one worker thread and a bounded queue: frame.key and
// clip.key of all clients run there in order, so an engine is never called from two
// threads. engine.info, job.cancel, frame.repost (post-processing only) and
// server.shutdown are answered on the reader thread. Replies and notifications to one
// client are written under that client's lock, one whole line at a time.
#pragma once

#include <corridorkey/options.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace corridorkey::serve {

struct ServeConfig {
  std::string listen = "stdio";  // stdio | unix:PATH | tcp:127.0.0.1:PORT
  std::string token_file;        // tcp: where the token is written (mode 0600)
  std::size_t max_request_bytes = std::size_t{16} << 20;
  int64_t cache_mb = 1024;       // raw model outputs kept for frame.repost (LRU)
  int queue_limit = 16;          // waiting requests per model; more is a kBusy error
  /// The model of model.load without "profile" and of frame.key before any model.load (the
  /// --profile and engine flags of `serve`); its device and threads apply to every model.
  Profile base;
};

/// Serves until stdin closes (stdio), server.shutdown, or `stop` (SIGINT / SIGTERM). Work in
/// flight finishes first; waiting work is cancelled on `stop`. Returns 0, or 130 after
/// `stop`. ConfigError / IoError for a listen address that cannot be used.
int run_server(const ServeConfig& config, const std::atomic<bool>& stop);

}  // namespace corridorkey::serve
