// The plan cache: which layout a path names, and the plans kept in this process's memory
// where the cache cannot be written (tune_cache.h). The layouts are tune_store_*.cpp, their
// JSON tune_json.cpp, their files' safe reads and writes tune_file_io.cpp.
#include "runtime/tune_cache.h"

#include <corridorkey/check.h>

#include "runtime/tune_json.h"
#include "runtime/tune_store.h"

#include <filesystem>
#include <mutex>
#include <set>

namespace corridorkey::detail {
namespace {

std::mutex g_m;
std::map<std::string, TunePlan> g_memory;  // plans that could not be written, by file + key
std::set<std::string> g_warned_unwritable;  // cache paths warned about (once each), under g_m

}  // namespace

bool tune_cache_is_folder(const std::string& path) {
  if (path.empty()) return false;
  std::error_code ec;
  // A folder may be reached through a link (a share mounted elsewhere): the user named it.
  // The plan files in it are never followed (read_text opens them O_NOFOLLOW).
  if (std::filesystem::is_directory(path, ec)) return true;
  const auto t = type_at(path);
  if (t == std::filesystem::file_type::directory) return true;
  if (t != std::filesystem::file_type::not_found) return false;  // a file (or a link): as a file
  const bool slash = path.back() == '/';
  const bool json_name = path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  return slash || !json_name;
}

std::string tune_cache_resolve(const std::string& configured) {
  return configured.empty() ? tune_cache_path() : configured;
}

std::optional<TunePlan> tune_cache_load(const std::string& path, const std::string& key, std::string& warning) {
  {
    std::lock_guard<std::mutex> l(g_m);
    if (auto it = g_memory.find(path + "\n" + key); it != g_memory.end()) return it->second;
  }
  if (path.empty()) return std::nullopt;  // no cache folder: said once, when a plan is stored
  return tune_cache_is_folder(path) ? folder_load(path, key, warning) : file_load(path, key, warning);
}

bool tune_cache_store(const std::string& path, const TunePlan& plan, std::string& warning) {
  const std::string why =
      path.empty() ? "no cache folder (neither XDG_CACHE_HOME nor HOME is set, and no CORRIDORKEY_TUNE_CACHE)"
                   : tune_cache_is_folder(path) ? folder_store(path, plan) : file_store(path, {plan});
  std::lock_guard<std::mutex> l(g_m);
  if (why.empty()) {
    g_memory.erase(path + "\n" + plan.key);  // the cache holds it now
    return true;
  }
  g_memory[path + "\n" + plan.key] = plan;
  if (g_warned_unwritable.insert(path).second)
    warning = (path.empty() ? std::string("tune cache: ") : "tune cache " + path + " cannot be written (") + why +
              (path.empty() ? "" : ")") +
              ": plans are kept in memory for this process (set tune_cache or CORRIDORKEY_TUNE_CACHE to a "
              "writable folder or file, or run `corridorkey-engine tune` where it is writable)";
  return false;
}

std::string tune_cache_store_all(const std::string& path, const std::vector<TunePlan>& plans) {
  if (path.empty()) return "no cache to store into";
  if (plans.empty()) return "";  // nothing to store: no file made
  if (!tune_cache_is_folder(path)) return file_store(path, plans);
  for (const auto& p : plans)  // refused whole: no plan file is written when one cannot be
    if (const size_t n = plan_file_text(p).size(); n > kMaxCacheBytes) return too_large(n);
  for (size_t i = 0; i < plans.size(); ++i)
    if (const auto why = folder_store(path, plans[i]); !why.empty())
      return std::to_string(i) + " of " + std::to_string(plans.size()) + " plans stored: " + why;
  return "";
}

std::map<std::string, TunePlan> tune_cache_read_all(const std::string& path, std::string& error) {
  if (path.empty()) return {};
  if (tune_cache_is_folder(path)) return folder_read_all(path, error);
  auto st = read_cache_file(path);
  error = st.error;
  if (st.older && error.empty())
    error = "written by an older engine (cache version " + std::to_string(st.older) + "): its plans are measured again";
  return st.plans;
}

}  // namespace corridorkey::detail

CORRIDORKEY_NAMESPACE_BEGIN

std::vector<std::pair<std::string, std::string>> tune_cache_entries(const std::string& path) {
  std::string error;
  const auto plans = detail::tune_cache_read_all(path, error);
  std::vector<std::pair<std::string, std::string>> out;
  if (!error.empty() && plans.empty()) {
    out.emplace_back(path, "not usable: " + error);
    return out;
  }
  for (const auto& [k, p] : plans) out.emplace_back(k, p.summary());
  if (!error.empty()) out.emplace_back(path, "entries not usable: " + error);
  return out;
}

std::vector<std::pair<std::string, std::string>> tune_cache_entries() { return tune_cache_entries(tune_cache_path()); }

int copy_tune_plans(const std::string& from, const std::string& to) {
  CK_CHECK(!from.empty() && !to.empty(), ConfigError, "tune plans: no cache to copy ",
           from.empty() ? "from" : "to", " (set CORRIDORKEY_TUNE_CACHE or --tune-cache)");
  std::error_code ec;
  CK_CHECK(std::filesystem::exists(from, ec), IoError, from, ": no such plan cache");
  std::string error;
  const auto plans = detail::tune_cache_read_all(from, error);
  CK_CHECK(error.empty() || !plans.empty(), IoError, from, ": not a plan cache that can be read: ", error);
  std::vector<TunePlan> list;
  for (const auto& [k, p] : plans) {
    list.push_back(p);
    list.back().origin = PlanOrigin::Trials;  // stored as the trials' plan it was
  }
  const auto why = detail::tune_cache_store_all(to, list);
  CK_CHECK(why.empty(), IoError, to, ": cannot store the ", list.size(), " plan(s) of ", from, ": ", why);
  return static_cast<int>(list.size());
}

CORRIDORKEY_NAMESPACE_END
