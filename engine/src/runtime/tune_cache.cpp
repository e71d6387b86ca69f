#include "runtime/tune_cache.h"

#include <corridorkey/errors.h>

#include "model/json_reader.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

CORRIDORKEY_NAMESPACE_BEGIN

const TuneDecision* TunePlan::find(const std::string& option) const {
  for (const auto& d : decisions)
    if (d.option == option) return &d;
  return nullptr;
}

std::string TunePlan::summary() const {
  std::ostringstream s;
  for (const auto& d : decisions) {
    s << d.option << " " << d.value << " (" << d.source;
    if (!d.why.empty()) s << ": " << d.why;
    for (size_t i = 0; i < d.times_ms.size(); ++i)
      s << (i == 0 && d.why.empty() ? ": " : ", ") << d.times_ms[i].first << " "
        << static_cast<long long>(d.times_ms[i].second + 0.5) << " ms";
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
  return (fs::temp_directory_path() / "corridorkey-engine-tune.json").string();
}

CORRIDORKEY_NAMESPACE_END

namespace corridorkey::detail {
namespace {
namespace json = model::json;

std::mutex g_m;
std::map<std::string, TunePlan> g_memory;  // plans that could not be written, by file + key
std::atomic<bool> g_warned_unwritable{false};

std::string plan_json(const TunePlan& p) {
  std::ostringstream s;
  s << "{\"origin\": " << json::quote(p.origin == "cache" ? "trials" : p.origin)
    << ", \"trial_ms\": " << p.trial_ms << ", \"decisions\": [";
  for (size_t i = 0; i < p.decisions.size(); ++i) {
    const auto& d = p.decisions[i];
    s << (i ? ", " : "") << "{\"option\": " << json::quote(d.option)
      << ", \"value\": " << json::quote(d.value) << ", \"source\": " << json::quote(d.source)
      << ", \"why\": " << json::quote(d.why) << ", \"times_ms\": {";
    for (size_t k = 0; k < d.times_ms.size(); ++k)
      s << (k ? ", " : "") << json::quote(d.times_ms[k].first) << ": " << d.times_ms[k].second;
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

/// A stored plan; ModelError when its shape is wrong (the file is then corrupt).
TunePlan plan_from(const json::Value& v, const std::string& key, const std::string& path) {
  CK_CHECK(v.kind == json::Value::Kind::Object, ModelError, path, ": plan '", key, "' is not an object");
  TunePlan p;
  p.key = key;
  p.cache_path = path;
  p.origin = "cache";
  p.trial_ms = number_of(v.find("trial_ms"));
  const auto* ds = v.find("decisions");
  CK_CHECK(ds && ds->kind == json::Value::Kind::Array, ModelError, path, ": plan '", key,
           "' has no decisions list");
  for (const auto& d : ds->items) {
    CK_CHECK(d.kind == json::Value::Kind::Object, ModelError, path, ": a decision is not an object");
    TuneDecision t;
    t.option = text_of(d.find("option"));
    t.value = text_of(d.find("value"));
    t.source = text_of(d.find("source"));
    t.why = text_of(d.find("why"));
    CK_CHECK(!t.option.empty() && !t.value.empty(), ModelError, path, ": plan '", key,
             "': a decision without option or value");
    if (const auto* tm = d.find("times_ms"); tm && tm->kind == json::Value::Kind::Object)
      for (size_t i = 0; i < tm->keys.size(); ++i) t.times_ms.emplace_back(tm->keys[i], number_of(&tm->values[i]));
    p.decisions.push_back(std::move(t));
  }
  return p;
}

struct FileState {
  bool exists = false;
  std::string error;  // non-empty: unreadable or corrupt
  std::vector<std::pair<std::string, std::string>> raw;  // key -> plan JSON text (kept as read)
  std::map<std::string, TunePlan> plans;
};

FileState read_file(const std::string& path) {
  FileState st;
  std::ifstream in(path, std::ios::binary);
  if (!in) return st;
  st.exists = true;
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    const auto root = json::parse(ss.str(), path, {"tune cache", size_t{8} << 20});
    CK_CHECK(root.kind == json::Value::Kind::Object, ModelError, path, ": not a JSON object");
    const auto* plans = root.find("plans");
    CK_CHECK(plans && plans->kind == json::Value::Kind::Object, ModelError, path,
             ": no \"plans\" object");
    for (size_t i = 0; i < plans->keys.size(); ++i) {
      auto p = plan_from(plans->values[i], plans->keys[i], path);
      st.raw.emplace_back(plans->keys[i], plan_json(p));
      st.plans.emplace(plans->keys[i], std::move(p));
    }
  } catch (const std::exception& e) {
    st.error = e.what();
    st.raw.clear();
    st.plans.clear();
  }
  return st;
}

/// flock on "<path>.lock" for the read-modify-write. A filesystem that refuses locks
/// (ENOLCK / EOPNOTSUPP on some network mounts) still gets an atomic rename: the file is
/// always valid, though one of two simultaneous writers' plans may be lost (and re-timed).
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    fd_ = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_ = -1;
};

}  // namespace

std::optional<TunePlan> tune_cache_load(const std::string& key, std::string& warning) {
  const auto path = tune_cache_path();
  {
    std::lock_guard<std::mutex> l(g_m);
    if (auto it = g_memory.find(path + "\n" + key); it != g_memory.end()) return it->second;
  }
  auto st = read_file(path);
  if (!st.error.empty()) {
    warning = "tune cache " + path + " is corrupt (" + json::printable(st.error) +
              "): it is rebuilt";
    return std::nullopt;
  }
  if (auto it = st.plans.find(key); it != st.plans.end()) return it->second;
  return std::nullopt;
}

bool tune_cache_store(const TunePlan& plan, std::string& warning) {
  namespace fs = std::filesystem;
  const auto path = tune_cache_path();
  auto fail = [&](const std::string& why) {
    {
      std::lock_guard<std::mutex> l(g_m);
      g_memory[path + "\n" + plan.key] = plan;
    }
    if (!g_warned_unwritable.exchange(true))
      warning = "tune cache " + path + " cannot be written (" + why +
                "): plans are kept in memory for this process (set CORRIDORKEY_TUNE_CACHE "
                "to a writable file, or run `corridorkey-engine tune` where it is writable)";
    return false;
  };
  std::error_code ec;
  const auto dir = fs::path(path).parent_path();
  if (!dir.empty()) fs::create_directories(dir, ec);
  if (ec) return fail(ec.message());
  FileLock lock(path);
  const auto st = read_file(path);  // under the lock: another process's plans are kept
  std::ostringstream out;
  out << "{\"version\": 1, \"plans\": {\n";
  bool first = true;
  for (const auto& [k, text] : st.raw) {
    if (k == plan.key) continue;
    out << (first ? "" : ",\n") << "  " << json::quote(k) << ": " << text;
    first = false;
  }
  out << (first ? "" : ",\n") << "  " << json::quote(plan.key) << ": " << plan_json(plan) << "\n}}\n";
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return fail(std::strerror(errno));
    const auto text = out.str();
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.flush();
    if (!f.good()) {
      fs::remove(tmp, ec);
      return fail("write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    fs::remove(tmp, ec);
    return fail(why);
  }
  return true;
}

std::map<std::string, TunePlan> tune_cache_read_all(std::string& error) {
  auto st = read_file(tune_cache_path());
  error = st.error;
  return st.plans;
}

}  // namespace corridorkey::detail

CORRIDORKEY_NAMESPACE_BEGIN

std::vector<std::pair<std::string, std::string>> tune_cache_entries() {
  const auto path = tune_cache_path();
  std::string error;
  const auto plans = detail::tune_cache_read_all(error);
  std::vector<std::pair<std::string, std::string>> out;
  if (!error.empty()) {
    out.emplace_back(path, "corrupt: " + error);
    return out;
  }
  for (const auto& [k, p] : plans) out.emplace_back(k, p.summary());
  return out;
}

CORRIDORKEY_NAMESPACE_END
