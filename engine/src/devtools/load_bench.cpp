// corridorkey-engine bench --load: how long each checkpoint format takes to read and to
// become an engine, interleaved (A B A B ...) in one process.
#include <corridorkey/bench.h>
#include <corridorkey/check.h>
#include <corridorkey/engine.h>
#include <corridorkey/profile.h>

#include "model/checkpoint.h"
#include "runtime/memory.h"
#include "runtime/torch_boundary.h"
#include "timing.h"

#include <algorithm>
#include <filesystem>

CORRIDORKEY_NAMESPACE_BEGIN

namespace fs = std::filesystem;
using timing::Clock;
using timing::ms_since;

std::vector<LoadBenchRow> run_load_bench(const LoadBenchOptions& o) {
  CK_CHECK(!o.checkpoints.empty(), ConfigError, "bench --load: no checkpoint given");
  CK_CHECK(o.repeats >= 1 && o.repeats <= 1000, ConfigError, "bench --load: repeats must be 1..1000");
  struct Samples {
    std::vector<double> parse, engine;
  };
  std::vector<LoadBenchRow> rows(o.checkpoints.size());
  std::vector<Samples> samples(o.checkpoints.size());
  auto opts = load_profile(o.profile);
  opts.model.device = "cpu";
  opts.model.mmap = o.mmap;
  for (int r = 0; r < o.repeats; ++r)
    for (size_t i = 0; i < o.checkpoints.size(); ++i) {
      auto& row = rows[i];
      {
        const auto t = Clock::now();
        auto ck = detail::rethrow_torch("reading " + o.checkpoints[i], [&] {
          return model::read_checkpoint(o.checkpoints[i], {o.mmap});
        });
        samples[i].parse.push_back(ms_since(t));
        row.checkpoint = ck.path;
        row.format = model::to_string(ck.format);
        std::error_code ec;
        row.file_bytes = fs::file_size(ck.path, ec);
      }
      detail::release_free_memory();
      opts.model.checkpoint = o.checkpoints[i];
      const auto t = Clock::now();
      uint64_t growth = 0;
      {
        detail::PeakMemoryScope mem(torch::kCPU);
        auto engine = create_engine(opts.model, opts.engine);
        growth = mem.finish().host_peak_rss_growth;
      }
      samples[i].engine.push_back(ms_since(t));
      row.engine_rss_growth = std::max(row.engine_rss_growth, growth);
      detail::release_free_memory();
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].parse_ms = median(samples[i].parse);
    rows[i].engine_ms = median(samples[i].engine);
  }
  return rows;
}

CORRIDORKEY_NAMESPACE_END
