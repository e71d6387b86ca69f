// Transports of `serve`: one line of JSON per message over a pair of file descriptors
// (stdin/stdout, or a connected socket), and the listening sockets.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>

namespace corridorkey::serve {

/// Reads request lines and writes reply lines for one client. Reading polls every 100 ms so
/// a stop flag (SIGTERM, server.shutdown) is seen while the client is silent; writing is
/// serialised by a mutex (workers, notifications and the reader write to the same client).
class LineChannel {
 public:
  /// `owns`: close the descriptors when destroyed (sockets, not stdin / stdout).
  LineChannel(int in_fd, int out_fd, std::size_t max_line, bool owns);
  ~LineChannel();
  LineChannel(const LineChannel&) = delete;
  LineChannel& operator=(const LineChannel&) = delete;

  enum class Read { Line, Eof, TooLong, Stopped };
  /// The next line without its newline. TooLong: the line passed max_line bytes; the rest
  /// of it is skipped, and reading goes on at the next line.
  Read read_line(std::string& line, const std::atomic<bool>& stop);
  /// Writes one line (a newline is added); false once the client is gone (EPIPE, reset).
  bool write_line(const std::string& text);
  bool gone() const { return gone_.load(); }
  void mark_gone() { gone_ = true; }

 private:
  int in_, out_;
  std::size_t max_;
  bool owns_;
  std::string buf_;
  bool skipping_ = false;
  std::atomic<bool> gone_{false};
  std::mutex write_m_;
};

/// A Unix domain socket listening at `path`, mode 0600 (umask 0177 around bind). A live
/// server on the path is refused (ConfigError naming it); a stale socket file left by a
/// crashed server is replaced; any other file there is refused.
int listen_unix(const std::string& path);
/// Loopback TCP only (127.0.0.1, ::1, localhost; anything else is a ConfigError). Port 0
/// picks a free one; *bound_port receives the port.
int listen_tcp(const std::string& host, int port, int* bound_port);
/// The next connection, or -1 after 100 ms without one (the caller re-checks its stop flag).
/// Writes to it time out after 30 s (a client that stops reading is dropped).
int accept_client(int listen_fd);

/// 32 random bytes (/dev/urandom) as 64 hex digits: serve's token file, review's URL token.
std::string random_token();
/// A random_token(), written to `path` with mode 0600 atomically.
std::string write_token_file(const std::string& path);
/// Compares in time independent of where the strings differ.
bool same_token(const std::string& a, const std::string& b);

}  // namespace corridorkey::serve
