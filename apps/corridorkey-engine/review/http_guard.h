// The review's connections, read before cpp-httplib sees them.
//
// Debian's cpp-httplib 0.11.4 reads each request head on a pool thread, with a timeout per
// read (not per head) and no limit on the number of headers: a dozen connections sending a
// header byte every few seconds held every thread, so the token holder got no answer, and
// one connection sending header lines without end grew the process by gigabytes. It has no
// setting for either. So the server here does not use httplib's accept loop:
//   - one thread accepts every connection and reads the request heads of all of them at
//     once (poll), each with a byte limit, a header-line limit and one deadline for the whole
//     head (not per read); a head over a limit is answered 431, a late one 408, and closed;
//   - at most `max_pending` connections wait for their head; past that the one waiting
//     longest that never carried the token is closed, so a flood of connections cannot
//     crowd out the token holder's, whose head arrives at once;
//   - a complete head goes to a worker: heads that carry the token (`trusted`) to workers of
//     their own, the others (answered 403 by the gate without their body) to two others,
//     so connections without the token never occupy the token holder's threads;
//   - the worker runs httplib's own request processing (Server::process_request, through a
//     Stream that replays the head, then reads the body by a deadline); a kept-alive
//     connection goes back to the accepting thread for its next head.
// Memory is bounded per connection (its head buffer) and freed when it closes.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace corridorkey::review {

struct GuardLimits {
  size_t max_head_bytes = 64 << 10;  // request line and headers together
  size_t max_header_lines = 100;
  std::chrono::milliseconds head_deadline{10000};  // the whole head, from the connection (or its first byte)
  std::chrono::milliseconds keep_alive{5000};      // a kept-alive connection's wait for its next request
  std::chrono::milliseconds body_deadline{30000};  // the body, from the head's end
  std::chrono::milliseconds write_timeout{30000};  // each write of an answer
  size_t max_pending = 200;                        // connections whose head is awaited
  size_t trusted_threads = 12, other_threads = 2;
  size_t trusted_queue = 100, other_queue = 32;    // complete heads waiting for a worker
  size_t max_requests_per_connection = 1000;
};

/// What --listen binds: 127.0.0.1 or ::1, and a port (0: any free one).
struct Listen {
  std::string host;
  int port = 0;
};
/// --listen takes `serve`'s loopback TCP forms only (ConfigError otherwise): a browser
/// cannot reach a Unix socket, and review serves this machine only.
Listen parse_listen(const std::string& spec);

/// The value of cookie `name` in a Cookie header ("" when absent).
std::string cookie(const std::string& header, const std::string& name);

/// The value of header `name` (case-insensitive) in a request head; "" when absent.
std::string head_header(const std::string& head, const std::string& name);

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(GuardLimits limits = {});
  ~GuardedServer() override;
  /// Listens on a loopback address; returns the port (the one chosen for port 0), or -1
  /// with errno set.
  int listen_on(const std::string& host, int port);
  /// Serves until shutdown(). `trusted(head)`: whether a complete request head carries the
  /// token (called on the accepting thread: cheap, no I/O).
  void serve(std::function<bool(const std::string& head)> trusted);
  /// Ends serve(): from any thread. Answers in progress end (content providers stop).
  void shutdown();

  struct Conn;

 private:
  class Lane;
  void work(std::unique_ptr<Conn> c);
  void hand_back(std::unique_ptr<Conn> c);

  GuardLimits limits_;
  int listen_fd_ = -1, wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::function<bool(const std::string&)> trusted_;
  std::mutex back_m_;
  std::vector<std::unique_ptr<Conn>> back_;  // kept-alive connections, for their next head
};

}  // namespace corridorkey::review
