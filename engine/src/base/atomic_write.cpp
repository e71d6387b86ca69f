#include "corridorkey/base/atomic_write.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>

#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace corridorkey::base {
namespace {

std::string joined(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : (std::filesystem::path(dir) / name).string();
}

std::string sys_error(int err) { return std::strerror(err ? err : EIO); }

}  // namespace

std::string random_name_part(size_t n) {
  static const char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  // Per thread, seeded from the system's entropy and the pid: two processes forked from one
  // parent must not draw the same names.
  thread_local std::mt19937_64 rng = [] {
    std::random_device rd;
    const auto t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return std::mt19937_64((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ t ^ static_cast<uint64_t>(::getpid()));
  }();
  std::string s(n, 'x');
  for (auto& c : s) c = kChars[rng() % (sizeof kChars - 1)];
  return s;
}

bool locks_unsupported(int err) { return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL; }

std::string not_replaceable(int dir_fd, const std::string& rel, bool links_too) {
  struct stat st {};
  if (::fstatat(dir_fd, rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISREG(st.st_mode)) return "";
  if (S_ISLNK(st.st_mode)) return links_too ? "a symbolic link" : "";
  return S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a folder" : S_ISSOCK(st.st_mode) ? "a socket" : "a device";
}

TempFile::TempFile(Options o) : o_(std::move(o)) {
  if (!o_.next_name) o_.next_name = [] { return ".tmp." + random_name_part(); };
  for (int attempt = 0; attempt < 100; ++attempt) {
    name_ = o_.next_name();
    rel_ = o_.dir_fd == AT_FDCWD ? joined(o_.dir, name_) : name_;
    // O_CLOEXEC: a program this process starts must not inherit the lock and keep a dead
    // writer's file looking alive.
    fd_ = ::openat(o_.dir_fd, rel_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, o_.mode);
    if (fd_ < 0 && errno == EEXIST) continue;
    if (fd_ < 0) {
      error_ = "cannot create a file in " + o_.dir + " (" + sys_error(errno) + ")";
      rel_.clear();
      return;
    }
    if (!o_.lock) return;
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (locks_unsupported(errno)) return;  // cleaners there never remove a file: no lock needed
      ::unlinkat(o_.dir_fd, rel_.c_str(), 0);  // a cleaner is judging it this very moment
      ::close(fd_);
      fd_ = -1;
      continue;
    }
    // A cleaner may have taken the lock between our create and our flock and unlinked the
    // file: then we hold the lock of a removed file. Take another name.
    struct stat st {};
    if (::fstat(fd_, &st) == 0 && st.st_nlink > 0) return;
    ::close(fd_);
    fd_ = -1;
  }
  rel_.clear();
  error_ = "cannot create a temporary file in " + o_.dir;
}

TempFile::~TempFile() {
  if (!renamed_ && !rel_.empty()) ::unlinkat(o_.dir_fd, rel_.c_str(), 0);
  if (fd_ >= 0) ::close(fd_);  // releases the lock, after the rename or the unlink
}

std::string TempFile::rename_to(const std::string& final_rel) {
  if (fd_ < 0) return error_.empty() ? "no temporary file" : error_;
  if (::renameat(o_.dir_fd, rel_.c_str(), o_.dir_fd, final_rel.c_str()) != 0) return sys_error(errno);
  renamed_ = true;
  return "";
}

std::string atomic_write(const std::string& path, std::string_view bytes, const AtomicWriteOptions& o) {
  if (const auto what = not_replaceable(o.dir_fd, path, o.refuse_links); !what.empty())
    return "it is " + what + ", which is never replaced";
  TempFile::Options t;
  t.dir_fd = o.dir_fd;
  const auto parent = std::filesystem::path(path).parent_path().string();
  t.dir = parent.empty() ? "." : parent;
  const std::string base_name = std::filesystem::path(path).filename().string();
  t.next_name = o.temp_name ? o.temp_name : [base_name] { return "." + base_name + "." + random_name_part(); };
  t.mode = o.mode;
  t.lock = o.lock;
  TempFile tmp(std::move(t));
  if (!tmp.error().empty()) return tmp.error();
  const int fd = tmp.fd();
  errno = 0;  // the failure's own errno, not an earlier call's
  size_t put = 0;
  while (put < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + put, bytes.size() - put);
    if (n <= 0) break;
    put += static_cast<size_t>(n);
  }
  if (put != bytes.size()) return "write failed: " + sys_error(errno);
  unsigned mode = o.mode;
  struct stat old {};
  if (o.keep_owner && ::fstatat(o.dir_fd, path.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(old.st_mode)) {
    // Permission bits only: a set-user-ID, set-group-ID or sticky bit on the old file is a
    // mistake or a plant, never carried onto the new one. Root's run on a user's file must
    // not leave the user a file they cannot update: the owner is kept, or nothing written.
    mode = old.st_mode & 0777;
    if ((old.st_uid != ::geteuid() || old.st_gid != ::getegid()) && ::fchown(fd, old.st_uid, old.st_gid) != 0)
      return "it belongs to user " + std::to_string(old.st_uid) +
             ", whose ownership this process cannot keep; it is left as it is";
  }
  if ((o.exact_mode || mode != o.mode) && ::fchmod(fd, static_cast<mode_t>(mode)) != 0)
    return "write failed: " + sys_error(errno);
  if (::fsync(fd) != 0) return "write failed: " + sys_error(errno);
  if (o.validate) {
    try {
      o.validate(tmp);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  return tmp.rename_to(path);
}

}  // namespace corridorkey::base
