#include "io/temp_files.h"

#include <corridorkey/base/atomic_write.h>
#include <corridorkey/check.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

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

using base::locks_unsupported;

/// A folder as pins are matched: absolute, lexically normal, no trailing '/'.
std::string folder_key(const fs::path& dir) {
  std::error_code ec;
  auto s = fs::absolute(dir, ec).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         (dir == "/" || path[dir.size()] == '/'));
}

/// What a descriptor's folder is called now (it may have been moved since it was opened).
std::string fd_path(int fd) {
  std::error_code ec;
  return fs::read_symlink("/proc/self/fd/" + std::to_string(fd), ec).string();
}

/// The path another process (ffmpeg) can open the descriptor's file or folder by.
std::string proc_fd(int fd) { return "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd); }

void refuse_special(const std::string& final_path, const struct stat& st) {
  // Only a file (or a link, which the rename replaces, never its target) is replaced: a FIFO,
  // device, socket or folder at an output path belongs to someone else.
  if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) return;
  throw IoError(final_path + ": exists and is not a regular file (" +
                (S_ISFIFO(st.st_mode)   ? "a FIFO"
                 : S_ISDIR(st.st_mode)  ? "a folder"
                 : S_ISSOCK(st.st_mode) ? "a socket"
                                        : "a device") +
                "); refusing to replace it");
}

}  // namespace

/// A pinned output folder: its descriptor, and the folders it must stay under.
struct PinnedFolder {
  std::string key;
  int fd = -1;
  std::vector<std::string> roots;
  ~PinnedFolder() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {
// The pins of every confined run in this process, by folder. Process-wide because the
// writers (OpenEXR, PNG, video, run.json) reach TempFile through the public write functions,
// which take paths; a pin is looked up only while one exists (the CLI never pays for it).
std::mutex g_pins_m;
std::multimap<std::string, std::shared_ptr<const PinnedFolder>> g_pins;
std::atomic<size_t> g_pin_count{0};

std::shared_ptr<const PinnedFolder> pinned_folder(const fs::path& dir) {
  if (g_pin_count.load() == 0) return nullptr;
  const auto key = folder_key(dir);
  std::lock_guard<std::mutex> l(g_pins_m);
  const auto it = g_pins.find(key);
  return it == g_pins.end() ? nullptr : it->second;
}
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
  // frame name plus a suffix would exceed NAME_MAX), one per write. Made and locked by the
  // one temporary-file maker (corridorkey/base/atomic_write.h).
  static std::atomic<unsigned> counter{0};
  const auto dir = fs::path(path).parent_path();
  pinned_ = pinned_folder(dir);
  base::TempFile::Options o;
  o.dir_fd = pinned_ ? pinned_->fd : AT_FDCWD;
  o.dir = dir.string();
  o.next_name = [suffix] {
    return kLockedPrefix + temp_host_tag() + "." + std::to_string(::getpid()) + "." + std::to_string(counter++) + suffix;
  };
  o.lock = true;
  file_ = std::make_unique<base::TempFile>(std::move(o));
  CK_CHECK(file_->error().empty(), IoError, path, ": ", file_->error());
  // Pinned: writers open the file itself (its descriptor's /proc path), never a name in the
  // folder that someone could swap for a link. A container's extension (videos: OpenCV
  // picks the format from it) needs a name: the folder's descriptor and the name then.
  path_ = !pinned_ ? file_->at_path()
          : suffix.empty() ? proc_fd(file_->fd())
                           : proc_fd(pinned_->fd) + "/" + file_->name();
}

std::string TempFile::own_path() const { return proc_fd(file_->fd()); }

// The base file removes itself unless renamed, then releases the lock.
TempFile::~TempFile() = default;

void TempFile::commit(const std::string& final_path) {
  struct stat st {};
  if (pinned_) {
    // The folder may have been moved since it was pinned: where its descriptor is now must
    // still lie under a confining folder.
    const auto now = fd_path(pinned_->fd);
    bool inside = false;
    for (const auto& r : pinned_->roots) inside = inside || under(now, r);
    CK_CHECK(inside, IoError, final_path, ": refused: its folder now lies at ", now,
             ", outside the folders this run may write");
    CK_CHECK(folder_key(fs::path(final_path).parent_path()) == pinned_->key, IoError, final_path,
             ": not in the folder its temporary file was made in");
    const auto name = fs::path(final_path).filename().string();
    if (::fstatat(pinned_->fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) refuse_special(final_path, st);
    // renameat replaces a link at the name, never its target.
    const auto why = file_->rename_to(name);
    CK_CHECK(why.empty(), IoError, final_path, ": cannot move the finished file into place: ", why);
    return;
  }
  if (::lstat(final_path.c_str(), &st) == 0) refuse_special(final_path, st);
  const auto why = file_->rename_to(final_path);
  CK_CHECK(why.empty(), IoError, final_path, ": cannot move the finished file into place: ", why);
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

PinnedFolders::PinnedFolders(const std::vector<std::string>& roots) {
  for (const auto& r : roots) {
    std::error_code ec;
    auto real = fs::canonical(r, ec);
    roots_.push_back(ec ? folder_key(r) : folder_key(real));
  }
}

PinnedFolders::~PinnedFolders() {
  std::lock_guard<std::mutex> l(g_pins_m);
  for (const auto& p : mine_) {
    auto range = g_pins.equal_range(p->key);
    for (auto it = range.first; it != range.second; ++it)
      if (it->second == p) {
        g_pins.erase(it);
        --g_pin_count;
        break;
      }
  }
}

std::string PinnedFolders::pin(const std::string& dir, bool create) {
  const std::string key = folder_key(dir);
  // The longest part of the path that exists, by its real path: links the user made inside
  // the confining folders are resolved here, before anything is opened. (exists() follows
  // links: a dangling one counts as missing, and is refused by the walk below.)
  fs::path existing = key;
  std::vector<std::string> missing;
  std::error_code ec;
  while (!fs::exists(existing, ec) && existing.has_relative_path()) {
    missing.insert(missing.begin(), existing.filename().string());
    existing = existing.parent_path();
  }
  CK_CHECK(create || missing.empty(), IoError, dir, ": does not exist");
  const std::string real = fs::canonical(existing, ec).string();
  CK_CHECK(!ec, IoError, dir, ": cannot resolve ", existing.string(), " (", ec.message(), ")");
  std::string root;
  for (const auto& r : roots_)
    if (under(real, r) && r.size() >= root.size()) root = r;
  if (root.empty()) {
    std::string list;
    for (const auto& r : roots_) list += (list.empty() ? "" : ", ") + r;
    throw IoError(dir + ": refused: its real path " + real + " lies outside the folders this run may write (" +
                  list + ")");
  }
  std::vector<std::string> parts;
  for (const auto& part : fs::path(real.substr(root.size()))) {
    const auto t = part.string();
    if (!t.empty() && t != "/") parts.push_back(t);
  }
  const size_t first_missing = parts.size();
  parts.insert(parts.end(), missing.begin(), missing.end());
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  CK_CHECK(fd >= 0, IoError, dir, ": cannot open ", root, " (", std::strerror(errno), ")");
  std::string walked = root;
  for (size_t i = 0; i < parts.size(); ++i) {
    walked += (walked == "/" ? "" : "/") + parts[i];
    if (i >= first_missing && ::mkdirat(fd, parts[i].c_str(), 0777) != 0 && errno != EEXIST) {
      const int err = errno;
      ::close(fd);
      throw IoError(dir + ": output folder cannot be created (" + std::strerror(err) + ")");
    }
    // Each step from the descriptor of the one before, never following a link: one swapped
    // in since the real path was resolved is refused, not followed.
    const int next = ::openat(fd, parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    struct stat st {};
    const bool link = next < 0 && ::fstatat(fd, parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
    ::close(fd);
    if (next < 0)
      throw IoError(dir + (link ? ": refused: " + walked + " is a symbolic link (made after its folder was "
                                  "checked); confined writes follow no link"
                                : ": cannot open " + walked + " (" + std::strerror(err) + ")"));
    fd = next;
  }
  auto p = std::make_shared<PinnedFolder>();
  p->key = key;
  p->fd = fd;
  p->roots = roots_;
  {
    std::lock_guard<std::mutex> l(g_pins_m);
    g_pins.emplace(key, p);
    ++g_pin_count;
  }
  mine_.push_back(p);
  return "/proc/self/fd/" + std::to_string(fd);
}

void atomic_write(const std::string& path, const std::function<void(const std::string&)>& write_to) {
  TempFile tmp(path);
  write_to(tmp.path());
  tmp.commit(path);
}

}  // namespace corridorkey::io
