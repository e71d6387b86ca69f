// The plan cache of a model-only build made without nlohmann-json (CK_MODEL_ONLY on a GPU
// machine that has LibTorch and nothing else: scripts/gpu-check.sh). The cache's files are
// written with nlohmann-json (tune_json.cpp), so this build writes none: plans and rates
// live in this process's memory, as they do when a cache cannot be written, and each run
// times its plan again. Every entry point keeps tune_cache.h's contract.
#include "runtime/tune_cache.h"

#include <map>
#include <mutex>

namespace corridorkey::detail {
namespace {

constexpr const char* kWhy = "this model-only build keeps plans in memory only (built without nlohmann-json)";

struct Memory {
  std::mutex m;
  std::map<std::string, TunePlan> plans;
  std::map<std::string, double> rates;
  bool said = false;
};
Memory& memory() {
  static Memory mem;
  return mem;
}

}  // namespace

bool tune_cache_is_folder(const std::string&) { return false; }
std::string tune_cache_resolve(const std::string& configured) { return configured; }

std::optional<TunePlan> tune_cache_load(const std::string&, const std::string& key, std::string&) {
  auto& mem = memory();
  std::lock_guard<std::mutex> lock(mem.m);
  const auto it = mem.plans.find(key);
  return it == mem.plans.end() ? std::nullopt : std::optional<TunePlan>(it->second);
}

bool tune_cache_store(const std::string&, const TunePlan& plan, std::string& warning) {
  auto& mem = memory();
  std::lock_guard<std::mutex> lock(mem.m);
  mem.plans[plan.key] = plan;
  if (!mem.said) warning = kWhy;
  mem.said = true;
  return false;
}

std::map<std::string, TunePlan> tune_cache_read_all(const std::string&, std::string&) {
  auto& mem = memory();
  std::lock_guard<std::mutex> lock(mem.m);
  return mem.plans;
}

std::string tune_cache_store_all(const std::string&, const std::vector<TunePlan>& plans) {
  auto& mem = memory();
  std::lock_guard<std::mutex> lock(mem.m);
  for (const auto& p : plans) mem.plans[p.key] = p;
  return kWhy;
}

std::optional<double> tune_cache_load_rate(const std::string&, const std::string& key) {
  auto& mem = memory();
  std::lock_guard<std::mutex> lock(mem.m);
  const auto it = mem.rates.find(key);
  return it == mem.rates.end() ? std::nullopt : std::optional<double>(it->second);
}

std::string tune_cache_store_rate(const std::string&, const std::string& key, double value) {
  auto& mem = memory();
  std::lock_guard<std::mutex> lock(mem.m);
  mem.rates[key] = value;
  return kWhy;
}

}  // namespace corridorkey::detail
