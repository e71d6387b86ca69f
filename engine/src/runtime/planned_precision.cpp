// planned_precision (tune.h): the precision a job pins for all of its chunks.
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/system.h>
#include <corridorkey/tune.h>

#include "runtime/tune_cache.h"

#include "runtime/global_switches.h"
#include "model/checkpoint.h"
#include "runtime/model_factory.h"
#include "runtime/model_impl.h"
#include "runtime/torch_boundary.h"
#include "runtime/tune_plan.h"

#include <algorithm>
#include <cstdint>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

namespace {
/// The architecture Model::load would read for these options (not the weights), with the
/// process's thread count applied: both are part of the plan key.
detail::ReadSource planned_source(const ModelOptions& options, const EngineSettings& engine, std::string& notes) {
  detail::apply_global_switches(options, false, notes);  // the thread count is part of the key
  detail::ModelSource src;
  src.checkpoint = detail::checkpoint_to_read(options);
  src.img_size = engine.img_size;
  src.random_arch = src.checkpoint.empty() ? options.random_weights_arch : "";
  src.mmap = options.mmap;
  src.backbone_size = engine.backbone_size;
  src.backbone_percent = engine.backbone_percent;
  return detail::read_source(src);
}
}  // namespace

std::pair<Precision, std::string> planned_precision(const ModelOptions& options, const EngineSettings& engine) {
  // Every chunk reads the same job file: an explicit precision is already one precision.
  if (options.model_precision != Precision::Auto)
    return {options.model_precision, "set in the job or its profile"};
  // Only a CPU job is planned here: with device auto the nodes may have GPUs (float16) that
  // the submission host lacks; tune off keeps the flag rules unpinned, as before.
  if (options.tune == TuneMode::Off)
    return {Precision::Auto, "tune off: each node's flag rule"};
  if (options.device != "cpu")
    return {Precision::Auto, "device " + options.device + ": set device: cpu or model_precision to pin it"};
  if (options.mixed_precision)
    return {Precision::Auto, "mixed_precision autocasts"};
  return detail::rethrow_torch("planning the precision", [&]() -> std::pair<Precision, std::string> {
    std::string notes;
    const auto read = planned_source(options, engine, notes);
    const auto planned = detail::make_plan(options, engine, read.config, torch::Device("cpu"), notes);
    return {planned.model.model_precision, std::string("the measured plan of the machine that planned the job (") +
                                               to_string(planned.plan.origin) + ")"};
  });
}

namespace {
/// A key's parts ("engine 0.2.0", "threads 2", ...): plan keys join them with "; ".
std::vector<std::string> key_parts(const std::string& key) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t at; (at = key.find("; ", start)) != std::string::npos; start = at + 2) out.push_back(key.substr(start, at - start));
  out.push_back(key.substr(start));
  return out;
}
}  // namespace

PlanCacheStatus plan_cache_status(const ModelOptions& options, const EngineSettings& engine) {
  return detail::rethrow_torch("reading the plan cache", [&] {
    PlanCacheStatus st;
    std::string notes;
    const auto read = planned_source(options, engine, notes);
    st.cache = detail::tune_cache_resolve(options.tune_cache);
    st.key = detail::plan_key(options, engine, read.config, torch::Device("cpu"));
    std::string error;
    const auto plans = detail::tune_cache_read_all(st.cache, error);
    st.cached = plans.count(st.key) > 0;
    if (st.cached || plans.empty()) return st;
    // The nearest cached key: the fewest parts that differ, in the order the key lists them.
    const auto want = key_parts(st.key);
    size_t best = SIZE_MAX;
    for (const auto& [k, p] : plans) {
      const auto have = key_parts(k);
      std::vector<std::string> d;
      for (size_t i = 0; i < std::max(want.size(), have.size()); ++i) {
        const std::string a = i < want.size() ? want[i] : "", b = i < have.size() ? have[i] : "";
        if (a != b) d.push_back((a.empty() ? "(none)" : a) + " (cached: " + (b.empty() ? "(none)" : b) + ")");
      }
      if (d.size() < best) best = d.size(), st.nearest = k, st.differs = std::move(d);
    }
    return st;
  });
}

CORRIDORKEY_NAMESPACE_END
