#include "serve/channel.h"

#include <corridorkey/base/atomic_write.h>
#include <corridorkey/check.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace corridorkey::serve {

LineChannel::LineChannel(int in_fd, int out_fd, std::size_t max_line, bool owns)
    : in_(in_fd), out_(out_fd), max_(max_line), owns_(owns) {}

LineChannel::~LineChannel() {
  if (!owns_) return;
  ::close(in_);
  if (out_ != in_) ::close(out_);
}

LineChannel::Read LineChannel::read_line(std::string& line, const std::atomic<bool>& stop) {
  for (;;) {
    // A complete line already buffered (several requests can arrive in one read).
    if (auto nl = buf_.find('\n'); nl != std::string::npos) {
      if (skipping_) {  // the tail of a line that was too long: drop it, then go on
        buf_.erase(0, nl + 1);
        skipping_ = false;
        continue;
      }
      if (nl > max_) {  // arrived whole in one read, but still over the limit
        buf_.erase(0, nl + 1);
        return Read::TooLong;
      }
      line.assign(buf_, 0, nl);
      buf_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines
      return Read::Line;
    }
    if (buf_.size() > max_) {
      buf_.clear();
      if (!skipping_) {
        skipping_ = true;
        return Read::TooLong;
      }
    }
    if (stop.load()) return Read::Stopped;
    pollfd p{in_, POLLIN, 0};
    const int r = ::poll(&p, 1, 100);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char chunk[65536];
    const ssize_t n = ::read(in_, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      // EOF: a last line without a newline still counts (a client that writes and closes).
      if (!buf_.empty() && !skipping_) {
        line.swap(buf_);
        buf_.clear();
        if (line.find_first_not_of(" \t\r") != std::string::npos) return Read::Line;
      }
      return Read::Eof;
    }
    if (skipping_) {  // only look for the end of the over-long line
      const char* nl = static_cast<const char*>(std::memchr(chunk, '\n', static_cast<size_t>(n)));
      if (!nl) continue;
      buf_.assign(nl + 1, static_cast<size_t>(chunk + n - (nl + 1)));
      skipping_ = false;
      continue;
    }
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

bool LineChannel::write_line(const std::string& text) {
  std::lock_guard<std::mutex> l(write_m_);
  if (gone_) return false;
  std::string s = text;
  s.push_back('\n');
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    // MSG_NOSIGNAL where it is a socket; SIGPIPE is ignored process-wide anyway (main.cpp).
    ssize_t n = ::write(out_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      gone_ = true;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

namespace {

std::string sys_error() { return std::strerror(errno); }

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  CK_CHECK(path.size() < sizeof a.sun_path, ConfigError, "--listen unix:", path,
           ": a socket path is at most ", sizeof a.sun_path - 1, " bytes");
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

/// True when a server answers on the socket at `path`.
bool someone_listens(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  auto a = unix_address(path);
  const bool live = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return live;
}

}  // namespace

int listen_unix(const std::string& path) {
  CK_CHECK(!path.empty(), ConfigError, "--listen unix:PATH needs a path");
  auto a = unix_address(path);
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0) {
    CK_CHECK(S_ISSOCK(st.st_mode), ConfigError, "--listen unix:", path,
             ": a file that is not a socket is there; refusing to replace it");
    CK_CHECK(!someone_listens(path), ConfigError, "--listen unix:", path,
             ": another server is already listening on this socket (stop it, or pick another path)");
    ::unlink(path.c_str());  // a stale socket of a server that died
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CK_CHECK(fd >= 0, IoError, "socket: ", sys_error());
  const mode_t old = ::umask(0177);  // the socket file is born 0600: no window for others
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const int err = errno;
  ::umask(old);
  if (rc != 0) {
    ::close(fd);
    errno = err;
    throw IoError("--listen unix:" + path + ": bind: " + sys_error());
  }
  if (::listen(fd, 16) != 0) {
    ::close(fd);
    throw IoError("--listen unix:" + path + ": listen: " + sys_error());
  }
  return fd;
}

int listen_tcp(const std::string& host, int port, int* bound_port) {
  const bool v6 = host == "::1" || host == "[::1]";
  CK_CHECK(v6 || host == "127.0.0.1" || host == "localhost", ConfigError, "--listen tcp:", host,
           ":", port, ": serve listens on loopback only (127.0.0.1 or ::1); use an SSH tunnel "
           "to reach it from another machine");
  CK_CHECK(port >= 0 && port <= 65535, ConfigError, "--listen tcp: port ", port, " is not in 0..65535");
  const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CK_CHECK(fd >= 0, IoError, "socket: ", sys_error());
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 || ::listen(fd, 16) != 0) {
    const std::string why = sys_error();
    ::close(fd);
    throw IoError("--listen tcp:" + host + ":" + std::to_string(port) + ": " + why);
  }
  sockaddr_storage got{};
  socklen_t len = sizeof got;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&got), &len);
  *bound_port = got.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&got)->sin6_port)
                                          : ntohs(reinterpret_cast<sockaddr_in*>(&got)->sin_port);
  return fd;
}

int accept_client(int listen_fd) {
  pollfd p{listen_fd, POLLIN, 0};
  if (::poll(&p, 1, 100) <= 0) return -1;
  const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) {
    // A client that stops reading must not stall the model's worker (which writes its
    // replies and events): a write blocked this long fails, and the client counts as gone.
    timeval tv{30, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  return fd;
}

std::string random_token() {
  unsigned char raw[32];
  std::ifstream rnd("/dev/urandom", std::ios::binary);
  CK_CHECK(rnd.read(reinterpret_cast<char*>(raw), sizeof raw), IoError, "/dev/urandom: cannot read");
  static const char* hex = "0123456789abcdef";
  std::string token;
  for (unsigned char c : raw) token += hex[c >> 4], token += hex[c & 15];
  return token;
}

std::string write_token_file(const std::string& path) {
  const std::string token = random_token();
  // The path is replaced by rename, so only a regular file (or nothing) may be there: a FIFO,
  // a device, a folder or a link given by mistake is refused, not replaced.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0)
    CK_CHECK(S_ISREG(st.st_mode), ConfigError, "--token-file ", path, ": ",
             S_ISFIFO(st.st_mode) ? "is a FIFO (named pipe)" : S_ISLNK(st.st_mode) ? "is a symbolic link"
             : S_ISDIR(st.st_mode) ? "is a folder" : "is not a regular file",
             "; give a path that does not exist yet or a regular file, which is replaced");
  // A temporary name of its own in the same folder, 0600 before a byte is written, renamed
  // over the path; a link or FIFO swapped in since the check above is refused, not replaced.
  base::AtomicWriteOptions w;
  w.mode = 0600;
  w.refuse_links = true;
  const auto why = base::atomic_write(path, token + "\n", w);
  CK_CHECK(why.empty(), IoError, path, ": cannot write the token file: ", why);
  return token;
}

bool same_token(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i]) ^
                                                static_cast<unsigned char>(b.empty() ? 0 : b[i % b.size()]);
  return diff == 0;
}

}  // namespace corridorkey::serve
