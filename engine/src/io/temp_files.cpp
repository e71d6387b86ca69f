#include "io/temp_files.h"

#include <corridorkey/check.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace corridorkey::io {
namespace fs = std::filesystem;

namespace {

constexpr const char* kLockedPrefix = ".ck-tmp-l.";  // this version: flock held while writing
constexpr const char* kOldPrefix = ".ck-tmp.";       // earlier versions: judged by pid

/// Splits on '.', keeping empty fields (so "a..b" has an empty field and fails to parse).
std::vector<std::string> fields(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == '.') out.emplace_back();
    else out.back() += c;
  }
  return out;
}

template <typename Pred>
bool all_of(const std::string& s, size_t min_len, size_t max_len, Pred pred) {
  if (s.size() < min_len || s.size() > max_len) return false;
  for (unsigned char c : s)
    if (!pred(c)) return false;
  return true;
}
bool host_char(unsigned char c) { return std::isalnum(c) || c == '-'; }
bool digit(unsigned char c) { return std::isdigit(c) != 0; }
bool alnum(unsigned char c) { return std::isalnum(c) != 0; }

/// Filesystems that refuse advisory locks (CIFS, some FUSE and Lustre mounts).
bool locks_unsupported(int err) { return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL; }

}  // namespace

const std::string& temp_host_tag() {
  static const std::string tag = [] {
    char buf[256] = {};
    std::string h = ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "host";
    std::string t;
    for (char c : h)
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '-') t += c;
    if (t.empty()) t = "host";
    return t.substr(0, 24);
  }();
  return tag;
}

std::optional<TempName> parse_temp_name(const std::string& name) {
  TempName t;
  std::string rest;
  if (name.rfind(kLockedPrefix, 0) == 0) {
    t.locked = true;
    rest = name.substr(std::strlen(kLockedPrefix));
  } else if (name.rfind(kOldPrefix, 0) == 0) {
    rest = name.substr(std::strlen(kOldPrefix));
  } else {
    return std::nullopt;
  }
  const auto f = fields(rest);
  // host . pid . counter [. ext]
  if (f.size() != 3 && f.size() != 4) return std::nullopt;
  if (!all_of(f[0], 1, 24, host_char)) return std::nullopt;
  if (!all_of(f[1], 1, 9, digit) || !all_of(f[2], 1, 10, digit)) return std::nullopt;
  if (f.size() == 4 && !all_of(f[3], 1, 8, alnum)) return std::nullopt;
  t.host = f[0];
  t.pid = std::stol(f[1]);  // 1-9 digits: cannot throw
  return t;
}

TempFile::TempFile(const std::string& path, const std::string& suffix) {
  // .ck-tmp-l.<host>.<pid>.<counter>: fixed length whatever the output's name (a 255-byte
  // frame name plus a suffix would exceed NAME_MAX), one per write.
  static std::atomic<unsigned> counter{0};
  const auto dir = fs::path(path).parent_path();
  for (int attempt = 0; attempt < 100; ++attempt) {
    path_ = (dir / (kLockedPrefix + temp_host_tag() + "." + std::to_string(::getpid()) + "." +
                    std::to_string(counter++) + suffix))
                .string();
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno == EEXIST) continue;
    CK_CHECK(fd_ >= 0, IoError, path, ": cannot create file in ", dir.string(), " (", std::strerror(errno), ")");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (locks_unsupported(err)) return;  // cleaners there never delete: no lock needed
      ::unlink(path_.c_str());  // a cleaner is judging it this very moment: another name
      ::close(fd_);
      fd_ = -1;
      continue;
    }
    // A cleaner may have taken the lock between our create and our flock, and unlinked the
    // file: then we hold the lock of a removed file. Take another name.
    struct stat st {};
    if (::fstat(fd_, &st) == 0 && st.st_nlink > 0) return;
    ::close(fd_);
    fd_ = -1;
  }
  throw IoError(path + ": cannot create a temporary file in " + dir.string());
}

TempFile::~TempFile() {
  if (!committed_ && !path_.empty()) ::unlink(path_.c_str());
  if (fd_ >= 0) ::close(fd_);  // releases the lock, after the rename or the unlink
}

void TempFile::commit(const std::string& final_path) {
  // Only a file (or a link, which the rename replaces, never its target) is replaced: a FIFO,
  // device, socket or folder at an output path belongs to someone else.
  struct stat st {};
  if (::lstat(final_path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
    throw IoError(final_path + ": exists and is not a regular file (" +
                  (S_ISFIFO(st.st_mode)   ? "a FIFO"
                   : S_ISDIR(st.st_mode)  ? "a folder"
                   : S_ISSOCK(st.st_mode) ? "a socket"
                                          : "a device") +
                  "); refusing to replace it");
  std::error_code ec;
  fs::rename(path_, final_path, ec);
  CK_CHECK(!ec, IoError, final_path, ": cannot move the finished file into place: ", ec.message());
  committed_ = true;
}

TempCleanup remove_stale_temp_files(const std::string& dir) {
  TempCleanup r;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.rfind(".ck-tmp", 0) != 0) continue;
    const auto t = parse_temp_name(name);
    if (!t) {
      r.unrecognised.push_back(name);
      continue;
    }
    if (t->host != temp_host_tag()) continue;  // another host's: not ours to judge
    const auto path = it->path().string();
    if (!t->locked) {  // an earlier version's (no lock): its pid, as it was judged then
      const auto pid = static_cast<pid_t>(t->pid);
      if (pid <= 0 || pid == ::getpid()) continue;
      if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
      std::error_code rm;
      if (fs::remove(path, rm)) ++r.removed;
      continue;
    }
    // O_NONBLOCK: a FIFO given this name must not hang the run; O_NOFOLLOW: a link is not ours.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      continue;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      // Nobody writes it. Unlinked while the lock is held, so a writer that created it just
      // now sees st_nlink == 0 once it gets the lock, and takes another name.
      struct stat now {};
      if (::lstat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev &&
          ::unlink(path.c_str()) == 0)
        ++r.removed;
    } else if (locks_unsupported(errno)) {
      r.locks_refused = true;  // a live writer cannot be told from a dead one: keep it
    }
    ::close(fd);
  }
  return r;
}

void atomic_write(const std::string& path, const std::function<void(const std::string&)>& write_to) {
  TempFile tmp(path);
  write_to(tmp.path());
  tmp.commit(path);
}

}  // namespace corridorkey::io
