// `corridorkey-engine review`: a local web page to inspect, compare, tweak and launch keys
// (docs/review.md). The engine binary serves it over loopback HTTP (cpp-httplib); the page
// is plain HTML, CSS and JavaScript modules embedded in the binary at build time.
//
// Threads: cpp-httplib answers each request on a pool thread; the clip library and the
// frame views are thread-safe (caches under their own locks). The model used for tweaks
// runs on one worker thread; keys run one at a time on a job thread. Progress reaches the
// page as server-sent events.
#pragma once

#include <corridorkey/options.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace corridorkey::review {

struct ReviewConfig {
  std::vector<std::string> roots;  // clip folders or clips roots, as `inference` takes them
  std::string output_root;         // outputs in <output_root>/<clip>/ instead of <clip>/Output/
  std::string compare_root;        // side B: another output root, <compare_root>/<clip>/
  std::string listen = "tcp:127.0.0.1:0";
  std::string input_colorspace;    // plates' colour when a clip has no run.json ("" = srgb)
  std::string ocio_config;         // displays and views; names that are not built in
  int64_t cache_mb = 1024;         // decoded frames and encoded previews kept (LRU)
  std::size_t max_body_bytes = std::size_t{1} << 20;  // POST bodies are small JSON
  Profile options;                 // the model tweaks run on, and the keys' default profile
  /// A key's options: `profile` with the command line's engine flags over it (ConfigError
  /// for an unknown profile).
  std::function<Profile(const std::string& profile)> engine_for;
  std::string cli;                 // this binary, for the command lines the page shows
};

/// Serves until `stop` (SIGINT / SIGTERM): prints one line, the URL with its token, to
/// stdout. Returns 130 after `stop` (as `serve`). ConfigError for a --listen that is not
/// loopback TCP; IoError for roots that hold no clip or a port that cannot be bound.
int run_review(const ReviewConfig& config, const std::atomic<bool>& stop);

}  // namespace corridorkey::review
