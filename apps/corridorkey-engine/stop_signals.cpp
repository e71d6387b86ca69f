#include "stop_signals.h"

#include <csignal>
#include <cstring>

namespace corridorkey::cli {
namespace {

std::atomic<std::atomic<bool>*> g_flag{nullptr};

/// Whether `sig` was ignored when the process started (nohup, a `cmd &` in a script, a farm
/// agent that ignores SIGINT for its children): such a signal stays ignored, as POSIX tools
/// leave it. Read before this file first changes the disposition.
bool ignored_at_start(int sig) {
  static const struct Ignored {
    bool int_, term;
  } at_start = [] {
    auto ignored = [](int s) {
      struct sigaction old;
      return ::sigaction(s, nullptr, &old) == 0 && old.sa_handler == SIG_IGN;
    };
    return Ignored{ignored(SIGINT), ignored(SIGTERM)};
  }();
  return sig == SIGINT ? at_start.int_ : sig == SIGTERM ? at_start.term : false;
}

void set_default(int sig) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = ignored_at_start(sig) ? SIG_IGN : SIG_DFL;
  sigemptyset(&sa.sa_mask);
  ::sigaction(sig, &sa, nullptr);
}

// Async-signal-safe: atomic loads and stores, sigaction and raise only.
extern "C" void on_stop_signal(int sig) {
  auto* flag = g_flag.load();
  if (flag && !flag->load()) {
    flag->store(true);
    return;
  }
  set_default(sig);  // a second signal, or no run to stop: the default action, now
  ::raise(sig);
}

void install(int sig) {
  if (ignored_at_start(sig)) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(sig, &sa, nullptr);
}

}  // namespace

void cancel_on_signal(std::atomic<bool>* flag) {
  ignored_at_start(SIGINT);  // read the dispositions before any is changed
  g_flag.store(flag);
  install(SIGINT);
  install(SIGTERM);
}

void default_stop_signals() {
  ignored_at_start(SIGINT);
  set_default(SIGINT);
  set_default(SIGTERM);
  g_flag.store(nullptr);
}

}  // namespace corridorkey::cli
