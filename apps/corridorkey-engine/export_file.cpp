#include "export_file.h"

#include <corridorkey/check.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace corridorkey::cli {
namespace fs = std::filesystem;

namespace {

/// All of `text` to `fd`; IoError naming `name` on the first failed write.
void write_all(int fd, const std::string& text, const std::string& name) {
  const char* p = text.data();
  size_t n = text.size();
  while (n > 0) {
    const ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    CK_CHECK(k > 0, IoError, name, ": write failed (", k < 0 ? std::strerror(errno) : "no progress", ")");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void close_checked(int fd, const std::string& name) {
  CK_CHECK(::close(fd) == 0, IoError, name, ": write failed on close (", std::strerror(errno), ")");
}

}  // namespace

void write_export(const std::string& out, const std::string& text, bool executable,
                  const std::string& protect) {
  if (out.empty()) {
    std::fflush(stdout);
    write_all(STDOUT_FILENO, text, "stdout");
    return;
  }
  struct stat st {}, job {};
  const bool exists = ::stat(out.c_str(), &st) == 0;
  CK_CHECK(!(exists && ::stat(protect.c_str(), &job) == 0 && st.st_dev == job.st_dev &&
             st.st_ino == job.st_ino),
           ConfigError, "-o ", out, ": is the job file itself; refusing to overwrite it with its export");
  if (exists && !S_ISREG(st.st_mode)) {  // a device or a pipe: no rename possible
    CK_CHECK(!S_ISDIR(st.st_mode), IoError, out, ": is a folder");
    const int fd = ::open(out.c_str(), O_WRONLY | O_CLOEXEC);
    CK_CHECK(fd >= 0, IoError, out, ": cannot be opened for writing (", std::strerror(errno), ")");
    try {
      write_all(fd, text, out);
    } catch (...) {
      ::close(fd);
      throw;
    }
    close_checked(fd, out);
    return;
  }
  const fs::path target(out);
  std::string tmp_name(1, '.');  // appended, not "." + ...: GCC 12 warns falsely (-Wrestrict) on that
  tmp_name += target.filename().string();
  tmp_name += ".ck-export." + std::to_string(::getpid());
  const fs::path tmp = target.parent_path() / tmp_name;
  const mode_t mode = (exists ? st.st_mode & 07777 : 0666) | (executable ? 0111 : 0);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  CK_CHECK(fd >= 0, IoError, out, ": cannot be written (", std::strerror(errno), " creating ",
           tmp.string(), ")");
  bool open = true;
  try {
    write_all(fd, text, out);
    CK_CHECK(::fsync(fd) == 0, IoError, out, ": write failed (", std::strerror(errno), ")");
    if (executable) (void)::fchmod(fd, mode);  // the umask may have dropped +x
    open = false;  // close() releases the descriptor even when it reports an error
    close_checked(fd, out);
  } catch (...) {
    if (open) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), out.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw IoError(out + ": cannot move the finished file into place (" + std::strerror(err) + ")");
  }
}

}  // namespace corridorkey::cli
