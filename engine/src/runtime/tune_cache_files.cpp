#include "runtime/tune_cache_files.h"

#include <corridorkey/base/atomic_write.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <set>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace corridorkey::detail {
namespace {

constexpr const char* kPrefix = ".corridorkey-engine-tune.";
/// Earlier versions' unlocked temporary files are judged by age: they were written and
/// renamed within a second, so one an hour old has no writer left.
constexpr time_t kLegacyAgeSeconds = 3600;

std::string folder_of(const std::string& dir) { return dir.empty() ? std::string(".") : dir; }

/// This host's name as the temporary names carry it: [A-Za-z0-9-], at most 24 characters.
const std::string& host_tag() {
  static const std::string tag = [] {
    char buf[256] = {};
    const std::string h = ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "";
    std::string t;
    for (char c : h)
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '-') t += c;
    return t.empty() ? std::string("host") : t.substr(0, 24);
  }();
  return tag;
}

using base::locks_unsupported;

bool all_of(const std::string& s, size_t lo, size_t hi, int (*pred)(int)) {
  if (s.size() < lo || s.size() > hi) return false;
  for (unsigned char c : s)
    if (!pred(c)) return false;
  return true;
}
int host_char(int c) { return std::isalnum(c) || c == '-'; }
int alnum(int c) { return std::isalnum(c); }
int digit(int c) { return std::isdigit(c); }

struct TempName {
  bool legacy = false;  // .corridorkey-engine-tune.XXXXXX: no lock, no host, no pid
  std::string host;
};

/// The fields of one of the engine's temporary names, or false when `name` is not one (the
/// lock file, a user's file): such a file is never removed.
bool parse_temp_name(const std::string& name, TempName& t) {
  if (name.rfind(kPrefix, 0) != 0) return false;
  std::vector<std::string> f(1);
  for (char c : name.substr(std::strlen(kPrefix))) {
    if (c == '.') f.emplace_back();
    else f.back() += c;
  }
  if (f.size() == 1) {
    t.legacy = true;
    return all_of(f[0], 6, 6, alnum);
  }
  t.host = f.size() == 3 ? f[0] : "";
  return f.size() == 3 && all_of(f[0], 1, 24, host_char) && all_of(f[1], 1, 10, digit) && all_of(f[2], 6, 6, alnum);
}

}  // namespace

std::string tune_lock_path(const std::string& dir) {
  return (std::filesystem::path(folder_of(dir)) / ".corridorkey-engine-tune.lock").string();
}

TuneFolderLock::TuneFolderLock(const std::string& dir) {
  fd_ = ::open(tune_lock_path(dir).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  struct stat sb {};
  if (fd_ >= 0 && (::fstat(fd_, &sb) != 0 || !S_ISREG(sb.st_mode) || ::flock(fd_, LOCK_EX) != 0)) {
    ::close(fd_);
    fd_ = -1;
  }
}

TuneFolderLock::~TuneFolderLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::string tune_temp_name() {
  return kPrefix + host_tag() + "." + std::to_string(::getpid()) + "." + base::random_name_part(6);
}

int remove_dead_tune_temps(const std::string& dir) {
  namespace fs = std::filesystem;
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(folder_of(dir), ec), end; !ec && it != end; it.increment(ec)) {
    TempName t;
    if (!parse_temp_name(it->path().filename().string(), t)) continue;
    if (!t.legacy && t.host != host_tag()) continue;  // another host's: not ours to judge
    const std::string path = it->path().string();
    // O_NONBLOCK: a FIFO given this name must not hang the run; O_NOFOLLOW: a link is not ours.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st {};
    const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    const bool old_enough = !t.legacy || st.st_mtime + kLegacyAgeSeconds < std::time(nullptr);
    // Earlier versions never locked theirs: a lock refused by the filesystem does not stop
    // an hour-old one going; a lock held (someone judging it now) does.
    bool free = false;
    if (regular && old_enough) {
      free = ::flock(fd, LOCK_EX | LOCK_NB) == 0 || (t.legacy && locks_unsupported(errno));
    }
    if (free) {
      // Unlinked while the lock is held, so a writer that created it just now sees
      // st_nlink == 0 once it gets the lock, and takes another name.
      struct stat now {};
      if (::lstat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev &&
          ::unlink(path.c_str()) == 0)
        ++removed;
    }
    ::close(fd);
  }
  return removed;
}

void remove_dead_tune_temps_once(const std::string& dir) {
  static std::mutex m;
  static std::set<std::string> done;
  {
    std::lock_guard<std::mutex> l(m);
    if (!done.insert(folder_of(dir)).second) return;
  }
  remove_dead_tune_temps(dir);
}

}  // namespace corridorkey::detail
