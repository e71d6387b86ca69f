// corridorkey-engine convert and bench --load: checkpoints as files.
#include <corridorkey/checkpoint.h>
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/profile.h>

#include "model/checkpoint.h"
#include "model/green_former.h"
#include "model/safetensors.h"
#include "runtime/memory.h"
#include "runtime/torch_boundary.h"
#include "timing.h"

#include <algorithm>
#include <filesystem>
#include <map>

CORRIDORKEY_NAMESPACE_BEGIN

namespace fs = std::filesystem;
using timing::Clock;
using timing::ms_since;

ConvertReport convert_checkpoint(const std::string& input, const std::string& output) {
  std::error_code ec;
  CK_CHECK(!output.empty(), ConfigError, "convert: no output file given");
  CK_CHECK(!fs::is_directory(output, ec), ConfigError, output,
           ": is a folder; name the .safetensors file to write");
  ConvertReport rep;
  return detail::rethrow_torch("converting " + input, [&] {
    torch::NoGradGuard no_grad;
    auto ck = model::read_checkpoint(input, {/*mmap=*/false});
    rep.input = ck.path;
    CK_CHECK(!(fs::exists(output, ec) && fs::equivalent(ck.path, output, ec)), ConfigError, output,
             ": is the input checkpoint itself; write the safetensors file elsewhere");
    rep.input_format = model::to_string(ck.format);
    rep.arch = ck.config.arch;
    rep.img_size = ck.config.img_size;
    rep.ignored = ck.ignored_entries;
    {  // What is written must key: the network is built and loaded strictly first.
      model::GreenFormer net(ck.config);
      model::load_weights(*net, ck);
    }
    std::vector<std::pair<std::string, std::string>> meta{
        {"format", "pt"},  // what safetensors.torch writes; other readers look for it
        {model::kConfigMetadataKey, ck.config.to_json()},
        {"corridorkey_source_format", rep.input_format}};
    model::safetensors::write_file(output, ck.tensors, meta);
    for (const auto& [k, t] : ck.tensors) {
      ++rep.tensors;
      rep.bytes += static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(t.element_size());
    }
    rep.output = output;
    // Read back as the engine reads it: same keys, dtypes, shapes and bytes.
    const auto back = model::read_checkpoint(output, {/*mmap=*/false});
    CK_CHECK(back.tensors.size() == ck.tensors.size(), IoError, output, ": read back ",
             back.tensors.size(), " tensors, wrote ", ck.tensors.size());
    for (const auto& [k, t] : ck.tensors) {
      const auto* b = back.find(k);
      CK_CHECK(b && b->scalar_type() == t.scalar_type() && b->sizes() == t.sizes() &&
                   (t.numel() == 0 || torch::equal(b->view(torch::kByte), t.contiguous().view(torch::kByte))),
               IoError, output, ": tensor '", k, "' did not read back bit-identical");
    }
    return rep;
  });
}

std::vector<LoadBenchRow> run_load_bench(const LoadBenchOptions& o) {
  CK_CHECK(!o.checkpoints.empty(), ConfigError, "bench --load: no checkpoint given");
  CK_CHECK(o.repeats >= 1 && o.repeats <= 1000, ConfigError, "bench --load: repeats must be 1..1000");
  struct Samples {
    std::vector<double> parse, engine;
  };
  std::vector<LoadBenchRow> rows(o.checkpoints.size());
  std::vector<Samples> samples(o.checkpoints.size());
  auto opts = load_profile(o.profile);
  opts.device = "cpu";
  opts.mmap = o.mmap;
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
      opts.checkpoint = o.checkpoints[i];
      const auto t = Clock::now();
      uint64_t growth = 0;
      {
        detail::PeakMemoryScope mem(torch::kCPU);
        auto engine = create_engine(opts.model(), opts.engine());
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
