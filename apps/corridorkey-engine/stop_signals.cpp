#include "stop_signals.h"

#include <csignal>
#include <cstring>

namespace corridorkey::cli {
namespace {

std::atomic<std::atomic<bool>*> g_flag{nullptr};

void set_default(int sig) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
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
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(sig, &sa, nullptr);
}

}  // namespace

void cancel_on_signal(std::atomic<bool>* flag) {
  g_flag.store(flag);
  install(SIGINT);
  install(SIGTERM);
}

void default_stop_signals() {
  set_default(SIGINT);
  set_default(SIGTERM);
  g_flag.store(nullptr);
}

}  // namespace corridorkey::cli
