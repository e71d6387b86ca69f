// The single-file layout: one JSON object of plans by key, written under an flock on the
// folder's lock file through a temporary file and a rename, so two processes tuning at once
// leave one valid file holding both plans.
#include "runtime/tune_store.h"

#include <corridorkey/check.h>

#include "runtime/tune_cache_files.h"
#include "runtime/tune_json.h"

#include <mutex>
#include <set>

namespace corridorkey::detail {
namespace json = model::json;

bool first_older_note(const std::string& path) {
  static std::mutex m;
  static std::set<std::string> noted;
  std::lock_guard<std::mutex> l(m);
  return noted.insert(path).second;
}

std::string older_note(const std::string& path, int64_t version, const std::string& what) {
  return "tune cache " + path + " was written by an older engine (cache version " + std::to_string(version) +
         "; this engine writes " + std::to_string(kCacheVersion) + ", with another CPU identity): " + what +
         " will be measured again, and stored in this version";
}

FileState read_cache_file(const std::string& path) {
  FileState st;
  const std::string text = read_text(path, st);
  if (!st.error.empty() || !st.exists) return st;
  try {
    const auto root = json::parse(text, path, {"tune cache", kMaxCacheBytes});
    CK_CHECK(root.kind == json::Value::Kind::Object, ModelError, path, ": not a JSON object");
    // Ours: it names our format, or (files of earlier versions, which did not) it has the
    // integer version and the plans object this engine always wrote. Anything else, a
    // user's notes.txt or another program's JSON, is never replaced.
    // Only the keys this engine writes, each once: a file with others (another program's
    // JSON that happens to have "version" and "plans") would lose them when rewritten, and
    // of a key given twice the reader and a person would see different values.
    std::set<std::string> top;
    bool only_ours = true;
    for (const auto& k : root.keys)
      only_ours = only_ours && (k == "format" || k == "version" || k == "plans") && top.insert(k).second;
    const auto* format = root.find("format");
    const auto* v = root.find("version");
    const auto* plans = root.find("plans");
    const bool versioned = v && v->kind == json::Value::Kind::Int;
    st.ours = only_ours && (format ? text_of(format) == kFormatName
                                   : versioned && plans && plans->kind == json::Value::Kind::Object);
    CK_CHECK(st.ours, ModelError, path, ": not a tune cache of this engine (no \"format\": \"",
             kFormatName, "\")");
    // A newer engine's file (a shared home on a farm with two versions installed) is left as
    // it is: rewriting it in this format would drop what that engine wrote, on every run.
    if (versioned && v->i > kCacheVersion) {
      st.newer = true;
      st.error = "is from a newer engine (cache version " + std::to_string(v->i) + "; this engine writes " +
                 std::to_string(kCacheVersion) + "), left as it is";
      return st;
    }
    // An older engine's file holds plans keyed by the CPU identity it computed (version 1:
    // a flags hash since corrected): none would match, so none is read; the file stays ours
    // and is replaced, those plans dropped, on the next store. The caller says so once.
    if (versioned && v->i < kCacheVersion) {
      st.older = v->i;
      return st;
    }
    CK_CHECK(plans && plans->kind == json::Value::Kind::Object, ModelError, path,
             ": no \"plans\" object");
    for (size_t i = 0; i < plans->keys.size(); ++i) {
      // One bad entry (a foreign or newer engine's) costs that entry, not every plan.
      try {
        CK_CHECK(!st.plans.count(plans->keys[i]), ModelError, path, ": plan ", json::quote(plans->keys[i]),
                 " given twice; the first is kept");
        auto p = plan_from(plans->values[i], plans->keys[i], path);
        st.raw.emplace_back(plans->keys[i], plan_json(p));
        st.plans.emplace(plans->keys[i], std::move(p));
      } catch (const ModelError& e) {
        st.skipped.push_back(e.what());
      }
    }
  } catch (const std::exception& e) {
    st.error = e.what();
    st.raw.clear();
    st.plans.clear();
  }
  return st;
}

std::optional<TunePlan> file_load(const std::string& path, const std::string& key, std::string& warning) {
  auto st = read_cache_file(path);
  if (!st.error.empty()) {
    warning = "tune cache " + path + (st.ours || st.error.rfind("is ", 0) == 0 || st.error.rfind("cannot", 0) == 0
                                          ? " " + st.error + ": plans are timed again"
                                          : " is not usable (" + json::printable(st.error) +
                                                "): plans are timed again and the file is left as it is");
    return std::nullopt;
  }
  if (st.older && first_older_note(path)) warning = older_note(path, st.older, "its plans");
  for (const auto& s : st.skipped)
    warning += (warning.empty() ? "" : "; ") + std::string("tune cache entry skipped: ") + json::printable(s, 480);  // path + key + why
  if (auto it = st.plans.find(key); it != st.plans.end()) return it->second;
  return std::nullopt;
}

/// Stores `plans` into a single-file cache with one read and one write, under the folder's
/// flock (an import of 1500 plans one at a time took 101 s); "" when stored, else why not.
std::string file_store(const std::string& path, const std::vector<TunePlan>& plans) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto dir = fs::path(path).parent_path();
  if (!dir.empty()) fs::create_directories(dir, ec);
  if (ec) return ec.message();
  // Checked before any lock or temporary file is made beside it (it left /dev/full.lock).
  if (const auto why = refusal(read_cache_file(path)); !why.empty()) return why;
  const fs::path folder = dir.empty() ? fs::path(".") : dir;
  TuneFolderLock lock(folder.string());
  const auto st = read_cache_file(path);  // under the lock: another process's plans are kept
  if (const auto why = refusal(st); !why.empty()) return why;
  std::map<std::string, size_t> last;  // of a key given twice, the later plan is stored
  for (size_t i = 0; i < plans.size(); ++i) last[plans[i].key] = i;
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& [k, text] : st.raw)
    if (!last.count(k)) entries.emplace_back(k, text);
  for (size_t i = 0; i < plans.size(); ++i)
    if (last[plans[i].key] == i) entries.emplace_back(plans[i].key, plan_json(plans[i]));
  return replace_file(path, folder, cache_file_text(entries));
}

}  // namespace corridorkey::detail
