#include "runtime/tune_file_io.h"

#include <corridorkey/base/atomic_write.h>

#include "runtime/tune_cache_files.h"
#include "runtime/tune_json.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace corridorkey::detail {

std::filesystem::file_type type_at(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  return ec ? std::filesystem::file_type::not_found : st.type();
}

// A FIFO hung `tune` and `info`; /dev/zero would read forever; a link planted at the cache
// path must not lead the engine to another file.
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

// The reader refuses a file over kMaxCacheBytes, and a write that made one (two 5 MB
// imports) lost every plan in it for good.
std::string too_large(size_t bytes) {
  return "it would be " + std::to_string(bytes) + " bytes, over the " + std::to_string(kMaxCacheBytes) +
         " (8 MiB) a cache file may be; nothing written (a folder cache, a path not ending in .json, "
         "holds one file per plan)";
}

std::string replace_file(const std::string& path, const std::filesystem::path& folder, const std::string& text) {
  if (text.size() > kMaxCacheBytes) return too_large(text.size());
  remove_dead_tune_temps_once(folder.string());
  base::AtomicWriteOptions w;
  w.mode = 0644;
  // Root's `tune` on a user's cache must not leave the user a cache they cannot update; where
  // the owner cannot be kept (another user's file in a shared folder) it is left as it is.
  w.keep_owner = true;
  w.lock = true;
  w.temp_name = tune_temp_name;
  return base::atomic_write(path, text, w);
}

}  // namespace corridorkey::detail
