// Side-by-side benchmarks: the same seeded input through several profiles in one process,
// reporting latency (median/min/max after warm-up), peak memory and the numerical drift of
// alpha/fg against the first profile.
#pragma once

#include <corridorkey/engine.h>
#include <corridorkey/options.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

struct BenchOptions {
  std::string checkpoint;              // or random weights:
  std::string random_arch;             // "hiera_base_plus" | "tiny"
  int64_t img_size = 512;
  std::string device = "auto";
  std::vector<std::string> profiles{"original", "optimized"};
  /// Profile-field overrides applied to every profile (e.g. {"model_precision","float32"}).
  std::vector<std::pair<std::string, std::string>> overrides;
  int frames = 3;                      // timed frames per profile
  int warmup = 1;
  uint64_t seed = 0;
  bool refiner_only = false;           // time the refiner stage alone (untiled vs tiled)
};

struct BenchRow {
  std::string profile;
  EngineInfo info;
  std::string precision;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  StageTimings median_stages;
  MemoryStats peak;                    // max over the timed frames
  double alpha_max_diff = 0, fg_max_diff = 0;  // vs the first profile (0 for the first)
};

/// Runs every profile; on_row (optional) is called as each row completes.
std::vector<BenchRow> run_bench(const BenchOptions& options,
                                const std::function<void(const BenchRow&)>& on_row = {});

CORRIDORKEY_NAMESPACE_END
