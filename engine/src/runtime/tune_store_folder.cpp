// The folder layout (a farm's shared cache): one file per plan, and the measured rates
// beside the plans of either layout.
#include "runtime/tune_store.h"

#include <corridorkey/base/hash.h>
#include <corridorkey/check.h>

#include "runtime/tune_cache.h"
#include "runtime/tune_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

namespace corridorkey::detail {
namespace {
namespace json = model::json;

// ---- the folder layout: one file per plan ------------------------------------------------
// <folder>/plan-<16 hex digits>.json holds one plan and its whole key. Each is written to a
// temporary name in the folder and renamed into place, so writers on many nodes at once
// need no lock (flock fails silently on NFS mounted `nolock`): every file is whole, and of
// two writers of one key the last rename wins with an equally valid plan.

/// A plan key's file name (the key itself is in the file and compared).
std::string plan_file_name(const std::string& key) {
  char b[32];
  std::snprintf(b, sizeof b, "plan-%016llx.json", static_cast<unsigned long long>(base::fnv1a64(key)));
  return b;
}

bool is_plan_file_name(const std::string& n) {
  return n.size() == 26 && n.rfind("plan-", 0) == 0 && n.compare(21, 5, ".json") == 0;
}

/// A one-entry file of this engine's (a plan file, a rate file): its text parsed, and `st`
/// told whether it is ours. Ours: a JSON object naming `format`, with only the keys
/// "format", "version", "key" and `payload`, each once (anything else would be lost when
/// rewritten). A newer engine's (a higher "version") or an older one's is marked and left
/// unread: the caller returns then. Throws ModelError naming the file for anything not ours.
json::Value parse_own_file(const std::string& path, const std::string& text, const char* what,
                           const char* format, const char* payload, FileState& st) {
  auto root = json::parse(text, path, {what, kMaxCacheBytes});
  CK_CHECK(root.kind == json::Value::Kind::Object, ModelError, path, ": not a JSON object");
  std::set<std::string> top;
  bool only_ours = true;
  for (const auto& k : root.keys)
    only_ours = only_ours && (k == "format" || k == "version" || k == "key" || k == payload) && top.insert(k).second;
  st.ours = only_ours && text_of(root.find("format")) == format;
  CK_CHECK(st.ours, ModelError, path, ": not a ", what, " file of this engine (no \"format\": \"", format, "\")");
  const auto* v = root.find("version");
  if (v && v->kind == json::Value::Kind::Int && v->i > kCacheVersion) {
    st.newer = true;
    st.error = "is from a newer engine (" + std::string(what) + " version " + std::to_string(v->i) + "), left as it is";
  } else if (v && v->kind == json::Value::Kind::Int && v->i < kCacheVersion) {
    st.older = v->i;  // keyed by an older CPU identity: nothing in it is read
  }
  return root;
}

/// One plan file: its state (as read_cache_file's, for the refusal rules) and the plan.
FileState read_plan_file(const std::string& path, const std::string* want_key) {
  FileState st;
  const std::string text = read_text(path, st);
  if (!st.error.empty() || !st.exists) return st;
  try {
    const auto root = parse_own_file(path, text, "tune plan", kPlanFormatName, "plan", st);
    if (st.newer || st.older) return st;
    const std::string key = text_of(root.find("key"));
    CK_CHECK(!key.empty() && root.find("plan"), ModelError, path, ": no \"key\" and \"plan\"");
    if (want_key && key != *want_key) return st;  // another key of the same hash: no plan here
    auto p = plan_from(*root.find("plan"), key, path);
    st.raw.emplace_back(key, plan_json(p));
    st.plans.emplace(key, std::move(p));
  } catch (const std::exception& e) {
    st.error = e.what();
    st.raw.clear();
    st.plans.clear();
  }
  return st;
}


/// The old single-file cache a folder may hold (a tune.json copied onto the share): read,
/// never written.
std::string legacy_in(const std::string& folder) { return (std::filesystem::path(folder) / "tune.json").string(); }

/// The version of the first plan file in `folder` written by an older engine, else 0.
int64_t older_plan_version(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), e; !ec && it != e; it.increment(ec)) {
    if (!is_plan_file_name(it->path().filename().string())) continue;
    const auto st = read_plan_file(it->path().string(), nullptr);
    if (st.older) return st.older;
  }
  return 0;
}

}  // namespace

std::string folder_store(const std::string& folder, const TunePlan& plan) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return ec.message();
  if (!fs::is_directory(folder, ec)) return "is not a folder";
  const std::string path = (fs::path(folder) / plan_file_name(plan.key)).string();
  const auto st = read_plan_file(path, nullptr);
  if (const auto why = refusal(st); !why.empty()) return why;
  return replace_file(path, folder, plan_file_text(plan));
}

std::optional<TunePlan> folder_load(const std::string& folder, const std::string& key, std::string& warning) {
  const std::string path = (std::filesystem::path(folder) / plan_file_name(key)).string();
  const auto st = read_plan_file(path, &key);
  if (!st.error.empty()) {
    warning = "tune cache " + path + " is not usable (" + json::printable(st.error) +
              "): the plan is timed again and the file is left as it is";
    return std::nullopt;
  }
  if (auto it = st.plans.find(key); it != st.plans.end()) return it->second;
  if (type_at(legacy_in(folder)) == std::filesystem::file_type::regular) return file_load(legacy_in(folder), key, warning);
  // A miss: once per folder, say whether an older engine's plan files are what it holds
  // (their names come from its keys, so none is found, and each plan is timed again).
  if (first_older_note(folder))
    if (const int64_t v = older_plan_version(folder)) warning = older_note(folder, v, "its plan files");
  return std::nullopt;
}

std::map<std::string, TunePlan> folder_read_all(const std::string& folder, std::string& error) {
  namespace fs = std::filesystem;
  std::map<std::string, TunePlan> all;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return all;
  if (type_at(legacy_in(folder)) == fs::file_type::regular) {
    auto st = read_cache_file(legacy_in(folder));
    if (!st.error.empty()) error = legacy_in(folder) + " " + st.error;
    all = std::move(st.plans);
  }
  std::vector<std::string> names;
  for (fs::directory_iterator it(folder, ec), e; !ec && it != e; it.increment(ec))
    if (is_plan_file_name(it->path().filename().string())) names.push_back(it->path().string());
  std::sort(names.begin(), names.end());
  int older = 0;
  for (const auto& n : names) {
    auto st = read_plan_file(n, nullptr);
    if (st.older) ++older;
    if (!st.error.empty()) {
      error += (error.empty() ? "" : "; ") + n + ": " + st.error;
      continue;
    }
    for (auto& [k, p] : st.plans) all[k] = std::move(p);  // a plan file wins over the old file
  }
  if (older)
    error += (error.empty() ? "" : "; ") + std::to_string(older) +
             " plan file(s) written by an older engine skipped (measured again when used)";
  return all;
}

namespace {

// ---- measured rates: rate-<hash>.json beside the plans ---------------------------------
// A value timed once per machine, as the plan is (bench --roofline's GEMM rate), in its own
// file in the cache's folder (a folder cache's own, a single-file cache's parent): written
// and refused by the same rules as a plan file, ignored by engines that do not know it.

constexpr const char* kRateFormatName = "corridorkey-engine measured rate";

std::string rate_folder(const std::string& cache) {
  if (tune_cache_is_folder(cache)) return cache;
  const auto dir = std::filesystem::path(cache).parent_path();
  return dir.empty() ? std::string(".") : dir.string();
}

std::string rate_path(const std::string& cache, const std::string& key) {
  std::string name = plan_file_name(key);
  name.replace(0, 4, "rate");  // rate-<16 hex digits>.json
  return (std::filesystem::path(rate_folder(cache)) / name).string();
}

/// A rate file's state (for the refusal rules) and its value under `key` (NaN: none).
FileState read_rate_file(const std::string& path, const std::string& key, double& value) {
  value = std::nan("");
  FileState st;
  const std::string text = read_text(path, st);
  if (!st.error.empty() || !st.exists) return st;
  try {
    const auto root = parse_own_file(path, text, "measured rate", kRateFormatName, "value", st);
    if (st.newer || st.older) return st;
    const double x = number_of(root.find("value"));
    if (text_of(root.find("key")) == key && std::isfinite(x) && x > 0) value = x;
  } catch (const std::exception& e) {
    st.error = e.what();
  }
  return st;
}

}  // namespace

std::optional<double> tune_cache_load_rate(const std::string& cache, const std::string& key) {
  if (cache.empty()) return std::nullopt;
  double v = 0;
  read_rate_file(rate_path(cache, key), key, v);
  if (std::isnan(v)) return std::nullopt;
  return v;
}

std::string tune_cache_store_rate(const std::string& cache, const std::string& key, double value) {
  namespace fs = std::filesystem;
  if (cache.empty()) return "no cache folder (neither XDG_CACHE_HOME nor HOME is set)";
  std::error_code ec;
  const std::string folder = rate_folder(cache);
  fs::create_directories(folder, ec);
  if (!fs::is_directory(folder, ec)) return folder + " is not a folder";
  const std::string path = rate_path(cache, key);
  double old = 0;
  const auto st = read_rate_file(path, key, old);
  if (const auto why = refusal(st); !why.empty()) return path + ": " + why;
  const auto why = replace_file(path, folder, rate_file_text(key, value));
  return why.empty() ? "" : path + ": " + why;
}

}  // namespace corridorkey::detail
