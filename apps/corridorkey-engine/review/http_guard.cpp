#include "review/http_guard.h"


#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <thread>

namespace corridorkey::review {

using Clock = std::chrono::steady_clock;

struct GuardedServer::Conn {
  int fd = -1;
  std::string buf;       // bytes read and not yet consumed: the head, perhaps more
  size_t head_len = 0;   // the head's length, once it is complete
  size_t lines = 0;      // line ends seen in the head so far
  size_t scanned = 0;    // where the search for the head's end resumes
  Clock::time_point since, deadline;
  bool started = false;  // a byte of the current request has arrived
  bool trusted = false;  // the current head carries the token
  bool ever_trusted = false;
  size_t served = 0;
  ~Conn() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {

int ms_until(Clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, INT_MAX));
}

/// Waits until `fd` is ready for `events` or has failed, up to `deadline`: false on timeout.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    if (Clock::now() >= deadline) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, std::max(1, ms_until(deadline)));
    if (r > 0) return true;  // ready, or hung up / failed: the read or write says which
    if (r < 0 && errno != EINTR) return false;
  }
}

/// Best effort, never blocking: a short answer to a connection about to be closed.
void answer(int fd, const char* status) {
  const std::string r = std::string("HTTP/1.1 ") + status + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  (void)!::send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void address(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  if ((peer ? ::getpeername(fd, sa, &len) : ::getsockname(fd, sa, &len)) != 0) return;
  char b[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, b, sizeof b);
    port = ntohs(a->sin6_port);
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, b, sizeof b);
    port = ntohs(a->sin_port);
  }
  ip = b;
}

/// A request's stream for httplib: the head (and whatever arrived with it) from the buffer,
/// then the socket, the body by one deadline; each write waits `write_timeout` at most.
class GuardStream final : public httplib::Stream {
 public:
  GuardStream(GuardedServer::Conn& c, Clock::time_point body_deadline, std::chrono::milliseconds write_timeout)
      : c_(c), body_deadline_(body_deadline), write_timeout_(write_timeout) {}
  bool is_readable() const override { return pos_ < c_.buf.size() || wait_for(c_.fd, POLLIN, body_deadline_); }
  bool is_writable() const override { return wait_for(c_.fd, POLLOUT, Clock::now() + write_timeout_); }
  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < c_.buf.size()) {
      const size_t n = std::min(size, c_.buf.size() - pos_);
      std::memcpy(ptr, c_.buf.data() + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    for (;;) {
      if (!wait_for(c_.fd, POLLIN, body_deadline_)) return -1;
      const ssize_t n = ::recv(c_.fd, ptr, size, 0);
      if (n >= 0) {
        from_socket_ += static_cast<size_t>(n);
        return n;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    }
  }
  ssize_t write(const char* ptr, size_t size) override {
    for (;;) {
      if (!wait_for(c_.fd, POLLOUT, Clock::now() + write_timeout_)) return -1;
      const ssize_t n = ::send(c_.fd, ptr, size, MSG_NOSIGNAL);
      if (n >= 0) return n;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    }
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(c_.fd, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(c_.fd, false, ip, port); }
  socket_t socket() const override { return c_.fd; }
  size_t from_buffer() const { return pos_; }
  size_t consumed() const { return pos_ + from_socket_; }

 private:
  GuardedServer::Conn& c_;
  size_t pos_ = 0, from_socket_ = 0;
  Clock::time_point body_deadline_;
  std::chrono::milliseconds write_timeout_;
};

/// 1: the head is complete (head_len set); 0: more is needed; -1: over a limit.
int scan(GuardedServer::Conn& c, const GuardLimits& l) {
  for (size_t i = c.scanned; i < c.buf.size(); ++i) {
    if (c.buf[i] != '\n') continue;
    ++c.lines;
    if (i >= 3 && c.buf.compare(i - 3, 4, "\r\n\r\n") == 0) {  // the empty line ends the head
      c.head_len = i + 1;
      c.scanned = i + 1;
      return c.head_len > l.max_head_bytes || c.lines > l.max_header_lines + 2 ? -1 : 1;
    }
    if (c.lines > l.max_header_lines + 2) return -1;  // + the request line and the empty line
  }
  c.scanned = c.buf.size();
  return c.buf.size() > l.max_head_bytes ? -1 : 0;
}

}  // namespace

/// Workers for complete heads: a bounded queue, a fixed number of threads.
class GuardedServer::Lane {
 public:
  Lane(GuardedServer& s, size_t threads, size_t max_queue) : s_(s), max_(max_queue) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~Lane() { shutdown(); }
  /// False when the queue is full (the connection stays with the caller).
  bool push(std::unique_ptr<Conn>& c) {
    {
      std::lock_guard<std::mutex> l(m_);
      if (stop_ || q_.size() >= max_) return false;
      q_.push_back(std::move(c));
    }
    cv_.notify_one();
    return true;
  }
  void shutdown() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    q_.clear();
  }

 private:
  void loop() {
    for (;;) {
      std::unique_ptr<Conn> c;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return stop_ || !q_.empty(); });
        if (stop_) return;
        c = std::move(q_.front());
        q_.pop_front();
      }
      // A handler's exception (a content provider's, bad_alloc) must not end the process
      // through std::terminate: the connection is dropped (its Conn closes it), the
      // worker goes on.
      try {
        s_.work(std::move(c));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "corridorkey review: a request failed: %s\n", e.what());
      } catch (...) {
        std::fprintf(stderr, "corridorkey review: a request failed\n");
      }
    }
  }
  GuardedServer& s_;
  const size_t max_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Conn>> q_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

GuardedServer::GuardedServer(GuardLimits limits) : limits_(limits) {}

GuardedServer::~GuardedServer() {
  svr_sock_ = INVALID_SOCKET;
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

int GuardedServer::listen_on(const std::string& host, int port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  const bool v6 = host.find(':') != std::string::npos;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    if (::inet_pton(AF_INET6, host.c_str(), &a->sin6_addr) != 1) return errno = EINVAL, -1;
    len = sizeof(sockaddr_in6);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &a->sin_addr) != 1) return errno = EINVAL, -1;
    len = sizeof(sockaddr_in);
  }
  const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (v6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  // A long backlog: a burst of connections waits in the kernel for the accepting thread
  // rather than being dropped.
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, SOMAXCONN) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  listen_fd_ = fd;
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return -1;
  return ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

void GuardedServer::shutdown() {
  stopping_ = true;
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
}

void GuardedServer::hand_back(std::unique_ptr<Conn> c) {
  {
    std::lock_guard<std::mutex> l(back_m_);
    back_.push_back(std::move(c));
  }
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void GuardedServer::work(std::unique_ptr<Conn> c) {
  ++c->served;
  const std::string head = c->buf.substr(0, c->head_len);
  // The body's length, to know whether httplib read it: the gate refuses a request before
  // its body is read, and an unread body would be taken for the next request.
  size_t body = 0;
  bool reusable = head_header(head, "Transfer-Encoding").empty();
  const auto cl = head_header(head, "Content-Length");
  if (!cl.empty()) {
    if (cl.size() > 12 || cl.find_first_not_of("0123456789") != std::string::npos) reusable = false;
    else body = std::stoull(cl);
  }
  // Connections without the token get one answer each.
  const bool close = !c->trusted || c->served >= limits_.max_requests_per_connection || stopping_;
  GuardStream s(*c, Clock::now() + limits_.body_deadline, limits_.write_timeout);
  bool closed = false;
  const bool ok = process_request(s, close, closed, nullptr);
  if (!ok || close || closed || stopping_ || !reusable || s.consumed() != c->head_len + body) return;  // closes it
  c->buf.erase(0, std::min(s.from_buffer(), c->buf.size()));  // a pipelined request stays
  c->head_len = c->lines = c->scanned = 0;
  c->started = !c->buf.empty();
  c->trusted = false;
  hand_back(std::move(c));
}

void GuardedServer::serve(std::function<bool(const std::string& head)> trusted) {
  trusted_ = std::move(trusted);
  // httplib's content providers (streamed files, event streams) run while this names a
  // socket; it never reads it.
  svr_sock_ = listen_fd_;
  std::vector<std::unique_ptr<Conn>> pending;
  {
    Lane token_lane(*this, limits_.trusted_threads, limits_.trusted_queue);
    Lane other_lane(*this, limits_.other_threads, limits_.other_queue);
    const auto forget_closed = [&] {
      pending.erase(std::remove(pending.begin(), pending.end(), nullptr), pending.end());
    };
    // The connection waiting longest that never carried the token; else the one waiting longest.
    const auto close_oldest = [&] {
      auto pick = pending.end();
      for (int pass = 0; pass < 2 && pick == pending.end(); ++pass)
        for (auto it = pending.begin(); it != pending.end(); ++it)
          if ((pass == 1 || !(*it)->ever_trusted) && (pick == pending.end() || (*it)->since < (*pick)->since))
            pick = it;
      if (pick != pending.end()) pending.erase(pick);
    };
    // A connection whose head may be complete: to a worker, refused, or left waiting.
    const auto advance = [&](std::unique_ptr<Conn>& c) {
      const int r = scan(*c, limits_);
      if (r < 0) {
        answer(c->fd, "431 Request Header Fields Too Large");
        c.reset();
      } else if (r > 0) {
        c->trusted = trusted_(c->buf.substr(0, c->head_len));
        c->ever_trusted = c->ever_trusted || c->trusted;
        if (!(c->trusted ? token_lane : other_lane).push(c)) {
          answer(c->fd, "503 Service Unavailable");
          c.reset();
        }
      }
    };
    std::vector<pollfd> fds;
    char chunk[16384];
    while (!stopping_) {
      auto now = Clock::now();
      {
        std::lock_guard<std::mutex> l(back_m_);
        for (auto& c : back_) {
          c->since = now;
          c->deadline = now + (c->started ? limits_.head_deadline : limits_.keep_alive);
          pending.push_back(std::move(c));
          if (pending.back()->started) advance(pending.back());  // pipelined: maybe whole already
        }
        back_.clear();
      }
      for (auto& c : pending)
        if (c && now >= c->deadline) {
          if (c->started) answer(c->fd, "408 Request Timeout");
          c.reset();
        }
      forget_closed();
      fds.assign({{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}});
      int timeout = 1000;
      for (const auto& c : pending) {
        fds.push_back({c->fd, POLLIN, 0});
        timeout = std::min(timeout, ms_until(c->deadline) + 1);
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
        std::fprintf(stderr, "corridorkey review: cannot wait for connections (%s): no longer listening\n",
                     std::strerror(errno));
        break;
      }
      uint64_t n = 0;
      if (fds[1].revents) (void)!::read(wake_fd_, &n, sizeof n);
      now = Clock::now();
      for (size_t i = 0; i < pending.size(); ++i) {
        auto& c = pending[i];
        if (!fds[i + 2].revents) continue;
        const ssize_t got = ::recv(c->fd, chunk, sizeof chunk, 0);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          c.reset();  // closed by the client
          continue;
        }
        if (got < 0) continue;
        if (!c->started) {
          c->started = true;
          // A kept-alive connection's next request: its whole head from its first byte (a
          // new connection's counts from its accept).
          if (c->served > 0) c->deadline = now + limits_.head_deadline;
        }
        c->buf.append(chunk, static_cast<size_t>(got));
        advance(c);
      }
      forget_closed();
      if (!(fds[0].revents & POLLIN)) continue;
      for (int k = 0; k < 64; ++k) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          // Out of descriptors: the connection waiting longest makes room (else the accept
          // would be retried at once, in a loop).
          if ((errno == EMFILE || errno == ENFILE) && !pending.empty()) close_oldest();
          else if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          break;
        }
        if (fd >= FD_SETSIZE) {  // httplib's request processing refuses such descriptors
          ::close(fd);
          continue;
        }
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (pending.size() >= limits_.max_pending) close_oldest();
        auto c = std::make_unique<Conn>();
        c->fd = fd;
        c->since = now;
        c->deadline = now + limits_.head_deadline;
        pending.push_back(std::move(c));
      }
    }
    // Answers in progress end (content providers stop when svr_sock_ is no socket), then
    // the workers; connections waiting are closed.
    svr_sock_ = INVALID_SOCKET;
    pending.clear();
  }
  std::lock_guard<std::mutex> l(back_m_);
  back_.clear();
}

}  // namespace corridorkey::review
