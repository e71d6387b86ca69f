#include "runtime/tune_cache.h"

#include <corridorkey/check.h>

#include "model/json_reader.h"
#include "runtime/tune_cache_files.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <set>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <locale>
#include <sstream>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

CORRIDORKEY_NAMESPACE_BEGIN

const char* to_string(TuneOption o) {
  switch (o) {
    case TuneOption::ModelPrecision: return "model_precision";
    case TuneOption::NativeAttention: return "native_attention";
    case TuneOption::NativeAttentionStage1: return "native_attention.stage1";
    case TuneOption::NativeAttentionStage2: return "native_attention.stage2";
    case TuneOption::NativeAttentionStage3: return "native_attention.stage3";
    case TuneOption::NativeAttentionStage4: return "native_attention.stage4";
    case TuneOption::OnednnLinear: return "onednn_linear";
    case TuneOption::WinogradConv: return "winograd_conv";
    case TuneOption::TiledRefiner: return "tiled_refiner";
  }
  return "?";
}

const char* to_string(TuneChoice c) {
  switch (c) {
    case TuneChoice::False: return "false";
    case TuneChoice::True: return "true";
    case TuneChoice::Float32: return "float32";
    case TuneChoice::BFloat16: return "bfloat16";
    case TuneChoice::Float16: return "float16";
  }
  return "?";
}

const char* to_string(DecisionSource s) {
  switch (s) {
    case DecisionSource::Plan: return "plan";
    case DecisionSource::Flag: return "flag";
    case DecisionSource::Rule: return "rule";
    case DecisionSource::Only: return "only";
  }
  return "?";
}

const char* to_string(PlanOrigin o) {
  switch (o) {
    case PlanOrigin::Off: return "off";
    case PlanOrigin::Trials: return "trials";
    case PlanOrigin::Cache: return "cache";
    case PlanOrigin::Memory: return "memory";
  }
  return "?";
}

TuneOption native_attention_stage(int stage) {
  switch (stage) {
    case 1: return TuneOption::NativeAttentionStage1;
    case 2: return TuneOption::NativeAttentionStage2;
    case 3: return TuneOption::NativeAttentionStage3;
    default: return TuneOption::NativeAttentionStage4;
  }
}

const TuneDecision* TunePlan::find(TuneOption option) const {
  for (const auto& d : decisions)
    if (d.option == option) return &d;
  return nullptr;
}

std::string TunePlan::summary() const {
  std::ostringstream s;
  s.imbue(std::locale::classic());  // numbers in every locale
  for (const auto& d : decisions) {
    s << to_string(d.option) << " " << to_string(d.value) << " (" << to_string(d.source);
    if (!d.why.empty()) s << ": " << printable_text(d.why);  // a file's words: one line, no escapes
    for (size_t i = 0; i < d.times_ms.size(); ++i) {
      s << (i == 0 && d.why.empty() ? ": " : ", ") << printable_text(d.times_ms[i].first) << " ";
      if (std::isfinite(d.times_ms[i].second))
        s << static_cast<long long>(d.times_ms[i].second + 0.5) << " ms";
      else
        s << "(failed)";
    }
    s << ")\n";
  }
  return s.str();
}

std::string tune_cache_path() {
  namespace fs = std::filesystem;
  if (const char* p = std::getenv("CORRIDORKEY_TUNE_CACHE"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return (fs::path(x) / "corridorkey-engine" / "tune.json").string();
  if (const char* h = std::getenv("HOME"); h && *h)
    return (fs::path(h) / ".cache" / "corridorkey-engine" / "tune.json").string();
  // No fixed name in a shared /tmp: another local user could plant a link there first.
  return {};
}

CORRIDORKEY_NAMESPACE_END

namespace corridorkey::detail {
namespace {
namespace json = model::json;

std::mutex g_m;
std::map<std::string, TunePlan> g_memory;  // plans that could not be written, by file + key
std::set<std::string> g_warned_unwritable;  // cache paths warned about (once each), under g_m

std::string plan_json(const TunePlan& p) {
  std::ostringstream s;
  s.imbue(std::locale::classic());  // numbers in every locale
  s << "{\"origin\": " << json::quote(to_string(p.origin == PlanOrigin::Cache ? PlanOrigin::Trials : p.origin))
    << ", \"trial_ms\": " << p.trial_ms << ", \"decisions\": [";
  for (size_t i = 0; i < p.decisions.size(); ++i) {
    const auto& d = p.decisions[i];
    s << (i ? ", " : "") << "{\"option\": " << json::quote(to_string(d.option))
      << ", \"value\": " << json::quote(to_string(d.value)) << ", \"source\": " << json::quote(to_string(d.source))
      << ", \"why\": " << json::quote(d.why) << ", \"times_ms\": {";
    // JSON has no infinity: a time that is not finite is left out, not written as `inf`
    // (which would make the whole file unreadable, every plan in it lost).
    bool first = true;
    for (const auto& [name, ms] : d.times_ms) {
      if (!std::isfinite(ms)) continue;
      s << (first ? "" : ", ") << json::quote(name) << ": " << ms;
      first = false;
    }
    s << "}}";
  }
  s << "]}";
  return s.str();
}

std::string text_of(const json::Value* v) {
  return v && v->kind == json::Value::Kind::String ? v->s : std::string();
}
double number_of(const json::Value* v) {
  return v && (v->kind == json::Value::Kind::Float || v->kind == json::Value::Kind::Int) ? v->f : 0.0;
}

/// `text` as the enum value between first and last (inclusive) whose to_string it is.
template <class E>
bool parsed(const std::string& text, E first, E last, E& out) {
  for (int i = static_cast<int>(first); i <= static_cast<int>(last); ++i)
    if (text == to_string(static_cast<E>(i))) {
      out = static_cast<E>(i);
      return true;
    }
  return false;
}

/// A stored plan; ModelError when its shape is wrong (the file is then corrupt).
TunePlan plan_from(const json::Value& v, const std::string& key, const std::string& path) {
  CK_CHECK(v.kind == json::Value::Kind::Object, ModelError, path, ": plan '", key, "' is not an object");
  TunePlan p;
  p.key = key;
  p.cache_path = path;
  p.origin = PlanOrigin::Cache;
  p.trial_ms = number_of(v.find("trial_ms"));
  const auto* ds = v.find("decisions");
  CK_CHECK(ds && ds->kind == json::Value::Kind::Array, ModelError, path, ": plan '", json::printable(key, 80),
           "' has no decisions list");
  std::set<std::string> seen;
  for (const auto& d : ds->items) {
    CK_CHECK(d.kind == json::Value::Kind::Object, ModelError, path, ": a decision is not an object");
    const std::string option = text_of(d.find("option")), value = text_of(d.find("value")),
                      source = text_of(d.find("source"));
    TuneDecision t;
    t.why = text_of(d.find("why"));
    // Only what this engine writes: a value it would not choose itself is not applied.
    const bool option_ok = parsed(option, TuneOption::ModelPrecision, TuneOption::TiledRefiner, t.option);
    const bool value_ok = parsed(value, TuneChoice::False, TuneChoice::Float16, t.value);
    const bool source_ok = parsed(source, DecisionSource::Plan, DecisionSource::Only, t.source);
    const bool precision = option_ok && t.option == TuneOption::ModelPrecision;
    const bool boolean = value_ok && (t.value == TuneChoice::True || t.value == TuneChoice::False);
    // float16 comes only from the flag rule (a GPU's): the plan chooses float32 or bfloat16.
    const bool ok = option_ok && value_ok &&
                    (precision ? !boolean && !(t.value == TuneChoice::Float16 && source_ok && t.source == DecisionSource::Plan)
                               : boolean);
    CK_CHECK(ok, ModelError, path, ": plan '", json::printable(key, 80), "': decision ",
             json::printable(option, 40), " = ", json::printable(value, 40), " is not one this engine makes");
    // The sources this engine writes into a plan; a report must not say "flag" for a file's word.
    CK_CHECK(source_ok, ModelError, path, ": plan '", json::printable(key, 80), "': decision ", option,
             " has source ", json::printable(source, 40), ", not one this engine writes");
    CK_CHECK(seen.insert(option).second, ModelError, path, ": plan '", json::printable(key, 80),
             "': decision ", option, " appears twice");
    if (const auto* tm = d.find("times_ms"); tm && tm->kind == json::Value::Kind::Object)
      for (size_t i = 0; i < tm->keys.size(); ++i) {
        const auto& v = tm->values[i];
        CK_CHECK(v.kind == json::Value::Kind::Float || v.kind == json::Value::Kind::Int, ModelError, path,
                 ": plan '", json::printable(key, 80), "': time ", json::printable(tm->keys[i], 40),
                 " is not a number");
        const double ms = number_of(&v);
        CK_CHECK(std::isfinite(ms) && ms >= 0 && ms < 1e9, ModelError, path, ": plan '",
                 json::printable(key, 80), "': time ", ms, " ms is out of range");
        t.times_ms.emplace_back(tm->keys[i], ms);
      }
    p.decisions.push_back(std::move(t));
  }
  return p;
}

struct FileState {
  bool exists = false;
  bool ours = false;   // a JSON object in this engine's cache format: the only kind replaced
  bool writable = false;  // a regular file with a write permission bit the process may use
  mode_t mode = 0644;  // kept when the file is replaced
  uid_t uid = 0;       // the owner, kept when the file is replaced (or it is not replaced)
  gid_t gid = 0;
  std::string error;  // non-empty: unreadable, foreign or corrupt
  std::vector<std::pair<std::string, std::string>> raw;  // key -> plan JSON text (kept as read)
  std::map<std::string, TunePlan> plans;
  std::vector<std::string> skipped;  // entries dropped as invalid
  bool newer = false;                 // written by a newer engine: read nothing, write nothing
};

/// The cache format this engine reads and writes ("version" in the file).
constexpr int64_t kCacheVersion = 1;
/// Written into every cache file, so that a file is told to be ours by what it says.
constexpr const char* kFormatName = "corridorkey-engine tune cache";

constexpr size_t kMaxCacheBytes = size_t{8} << 20;

/// What is at `path`, links not followed (not_found when nothing).
std::filesystem::file_type type_at(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  return ec ? std::filesystem::file_type::not_found : st.type();
}

/// The file's text: opened non-blocking and without following a final symbolic link, and
/// checked to be a regular file of at most 8 MiB before a byte is read (a FIFO hung `tune`
/// and `info`; /dev/zero would read forever; a link planted at the cache path must not lead
/// the engine to another file). Missing: empty text and no error.
std::string read_text(const std::string& path, FileState& st) {
  st.exists = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    const int err = errno;
    struct stat lb{};
    if (::lstat(path.c_str(), &lb) == 0) st.exists = true;
    if (st.exists && S_ISLNK(lb.st_mode))
      st.error = "is a symbolic link, which the engine neither follows nor replaces "
                 "(name the file itself in CORRIDORKEY_TUNE_CACHE)";
    else if (err != ENOENT)
      st.error = std::string("cannot be read: ") + std::strerror(err);
    return {};
  }
  st.exists = true;
  struct stat sb{};
  std::string text;
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    st.error = S_ISDIR(sb.st_mode) ? "is a directory" : "is not a regular file";
  } else if (static_cast<uint64_t>(sb.st_size) > kMaxCacheBytes) {
    st.error = "is " + std::to_string(sb.st_size) + " bytes, over the " + std::to_string(kMaxCacheBytes) +
               " (8 MiB) a cache file may be";
  } else {
    // Permission bits only: a set-user-ID, set-group-ID or sticky bit on a cache file is a
    // mistake or a plant, never carried onto the file written in its place.
    st.mode = sb.st_mode & 0777;
    st.uid = sb.st_uid;
    st.gid = sb.st_gid;
    // Read-only means no write bit at all (0444), whoever runs: root may write anything,
    // and a file its owner made read-only must still be left as it is.
    st.writable = (sb.st_mode & 0222) != 0 && ::access(path.c_str(), W_OK) == 0;
    text.resize(static_cast<size_t>(sb.st_size));
    size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    text.resize(got);
  }
  ::close(fd);
  return text;
}

FileState read_file(const std::string& path) {
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

/// Why the file at `path` may not be replaced ("" when it may): only a missing file, or a
/// regular, writable file in this engine's format, is ever replaced.
std::string refusal(const FileState& st) {
  if (!st.exists) return "";
  if (st.newer) return "it is from a newer engine's cache format; it is left as it is";
  if (!st.ours || !st.error.empty())
    return "the file there " + (st.error.empty() ? std::string("is not a tune cache") : st.error) +
           "; it is left as it is (delete it, or point CORRIDORKEY_TUNE_CACHE elsewhere)";
  if (!st.writable) return "the file is read-only; it is read, never replaced";
  return "";
}

}  // namespace

namespace {

std::optional<TunePlan> file_load(const std::string& path, const std::string& key, std::string& warning) {
  auto st = read_file(path);
  if (!st.error.empty()) {
    warning = "tune cache " + path + (st.ours || st.error.rfind("is ", 0) == 0 || st.error.rfind("cannot", 0) == 0
                                          ? " " + st.error + ": plans are timed again"
                                          : " is not usable (" + json::printable(st.error) +
                                                "): plans are timed again and the file is left as it is");
    return std::nullopt;
  }
  for (const auto& s : st.skipped)
    warning += (warning.empty() ? "" : "; ") + std::string("tune cache entry skipped: ") + json::printable(s, 480);  // path + key + why
  if (auto it = st.plans.find(key); it != st.plans.end()) return it->second;
  return std::nullopt;
}

/// Why `bytes` may not be written: the reader refuses a file over kMaxCacheBytes, and a
/// write that made one (two 5 MB imports) lost every plan in it for good.
std::string too_large(size_t bytes) {
  return "it would be " + std::to_string(bytes) + " bytes, over the " + std::to_string(kMaxCacheBytes) +
         " (8 MiB) a cache file may be; nothing written (a folder cache, a path not ending in .json, "
         "holds one file per plan)";
}

/// Writes `text` to `path` through a fresh locked temporary file in `folder`
/// (tune_cache_files.h; dead writers' ones removed first), synced, then renamed over it (the
/// rename replaces a link planted meanwhile, never its target). The file replaced (`st`)
/// keeps its owner, group and permission bits. "" when written, else why not.
std::string replace_file(const std::string& path, const std::filesystem::path& folder, const std::string& text,
                         const FileState& st) {
  if (text.size() > kMaxCacheBytes) return too_large(text.size());
  remove_dead_tune_temps_once(folder.string());
  TuneTempFile tmp(folder.string());
  if (!tmp.error().empty()) return tmp.error();
  const int fd = tmp.fd();
  errno = 0;  // the failure's own errno, not an earlier call's
  size_t put = 0;
  while (put < text.size()) {
    const ssize_t n = ::write(fd, text.data() + put, text.size() - put);
    if (n <= 0) break;
    put += static_cast<size_t>(n);
  }
  // The file written in its place keeps the old one's owner and group: root's `tune` on a
  // user's cache must not leave the user a cache they cannot update. Where the owner cannot
  // be kept (another user's file in a shared folder), the file is left as it is.
  bool owner_kept = true;
  if (st.exists && (st.uid != ::geteuid() || st.gid != ::getegid()))
    owner_kept = ::fchown(fd, st.uid, st.gid) == 0;
  const bool written = put == text.size() && owner_kept && ::fchmod(fd, st.exists ? st.mode : 0644) == 0 &&
                       ::fsync(fd) == 0;
  if (!owner_kept)
    return "it belongs to user " + std::to_string(st.uid) +
           ", whose ownership this process cannot keep; it is left as it is";
  if (!written) return std::string("write failed: ") + std::strerror(errno ? errno : EIO);
  return tmp.rename_to(path);
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
  if (const auto why = refusal(read_file(path)); !why.empty()) return why;
  const fs::path folder = dir.empty() ? fs::path(".") : dir;
  TuneFolderLock lock(folder.string());
  const auto st = read_file(path);  // under the lock: another process's plans are kept
  if (const auto why = refusal(st); !why.empty()) return why;
  std::ostringstream out;
  out.imbue(std::locale::classic());  // numbers in every locale
  out << "{\"format\": " << json::quote(kFormatName) << ", \"version\": " << kCacheVersion
      << ", \"plans\": {\n";
  std::map<std::string, size_t> last;  // of a key given twice, the later plan is stored
  for (size_t i = 0; i < plans.size(); ++i) last[plans[i].key] = i;
  bool first = true;
  for (const auto& [k, text] : st.raw) {
    if (last.count(k)) continue;
    out << (first ? "" : ",\n") << "  " << json::quote(k) << ": " << text;
    first = false;
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    if (last[plans[i].key] != i) continue;
    out << (first ? "" : ",\n") << "  " << json::quote(plans[i].key) << ": " << plan_json(plans[i]);
    first = false;
  }
  out << "\n}}\n";
  return replace_file(path, folder, out.str(), st);
}

// ---- the folder layout: one file per plan ------------------------------------------------
// <folder>/plan-<16 hex digits>.json holds one plan and its whole key. Each is written to a
// temporary name in the folder and renamed into place, so writers on many nodes at once
// need no lock (flock fails silently on NFS mounted `nolock`): every file is whole, and of
// two writers of one key the last rename wins with an equally valid plan.

constexpr const char* kPlanFormatName = "corridorkey-engine tune plan";

/// FNV-1a, 64 bits: a plan key's file name (the key itself is in the file and compared).
std::string plan_file_name(const std::string& key) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  char b[32];
  std::snprintf(b, sizeof b, "plan-%016llx.json", static_cast<unsigned long long>(h));
  return b;
}

bool is_plan_file_name(const std::string& n) {
  return n.size() == 26 && n.rfind("plan-", 0) == 0 && n.compare(21, 5, ".json") == 0;
}

/// A one-entry file of this engine's (a plan file, a rate file): its text parsed, and `st`
/// told whether it is ours. Ours: a JSON object naming `format`, with only the keys
/// "format", "version", "key" and `payload`, each once (anything else would be lost when
/// rewritten). A newer engine's (a higher "version") is marked and left unread: the caller
/// returns then. Throws ModelError naming the file for anything not ours.
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
  }
  return root;
}

/// One plan file: its state (as read_file's, for the refusal rules) and the plan.
FileState read_plan_file(const std::string& path, const std::string* want_key) {
  FileState st;
  const std::string text = read_text(path, st);
  if (!st.error.empty() || !st.exists) return st;
  try {
    const auto root = parse_own_file(path, text, "tune plan", kPlanFormatName, "plan", st);
    if (st.newer) return st;
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

std::string plan_file_text(const TunePlan& plan) {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out << "{\"format\": " << json::quote(kPlanFormatName) << ", \"version\": " << kCacheVersion
      << ", \"key\": " << json::quote(plan.key) << ",\n \"plan\": " << plan_json(plan) << "}\n";
  return out.str();
}

std::string folder_store(const std::string& folder, const TunePlan& plan) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return ec.message();
  if (!fs::is_directory(folder, ec)) return "is not a folder";
  const std::string path = (fs::path(folder) / plan_file_name(plan.key)).string();
  const auto st = read_plan_file(path, nullptr);
  if (const auto why = refusal(st); !why.empty()) return why;
  return replace_file(path, folder, plan_file_text(plan), st);
}

/// The old single-file cache a folder may hold (a tune.json copied onto the share): read,
/// never written.
std::string legacy_in(const std::string& folder) { return (std::filesystem::path(folder) / "tune.json").string(); }

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
  return std::nullopt;
}

std::map<std::string, TunePlan> folder_read_all(const std::string& folder, std::string& error) {
  namespace fs = std::filesystem;
  std::map<std::string, TunePlan> all;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return all;
  if (type_at(legacy_in(folder)) == fs::file_type::regular) {
    auto st = read_file(legacy_in(folder));
    if (!st.error.empty()) error = legacy_in(folder) + " " + st.error;
    all = std::move(st.plans);
  }
  std::vector<std::string> names;
  for (fs::directory_iterator it(folder, ec), e; !ec && it != e; it.increment(ec))
    if (is_plan_file_name(it->path().filename().string())) names.push_back(it->path().string());
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    auto st = read_plan_file(n, nullptr);
    if (!st.error.empty()) {
      error += (error.empty() ? "" : "; ") + n + ": " + st.error;
      continue;
    }
    for (auto& [k, p] : st.plans) all[k] = std::move(p);  // a plan file wins over the old file
  }
  return all;
}

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
    if (st.newer) return st;
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
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out.precision(17);
  out << "{\"format\": " << json::quote(kRateFormatName) << ", \"version\": " << kCacheVersion
      << ", \"key\": " << json::quote(key) << ", \"value\": " << value << "}\n";
  const auto why = replace_file(path, folder, out.str(), st);
  return why.empty() ? "" : path + ": " + why;
}

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
  auto st = read_file(path);
  error = st.error;
  return st.plans;
}

std::optional<TunePlan> tune_cache_load(const std::string& key, std::string& warning) {
  return tune_cache_load(tune_cache_path(), key, warning);
}
bool tune_cache_store(const TunePlan& plan, std::string& warning) {
  return tune_cache_store(tune_cache_path(), plan, warning);
}
std::map<std::string, TunePlan> tune_cache_read_all(std::string& error) {
  return tune_cache_read_all(tune_cache_path(), error);
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
