#include "mapped_files.h"

#include <algorithm>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

namespace corridorkey::model {
namespace {

// A fixed table the signal handler reads without locks: `begin` is published last on
// registration and cleared first on removal, so a handler never reads a half-written slot
// as valid. 64 mappings: a process maps one or two checkpoints.
struct Slot {
  std::atomic<bool> used{false};
  std::atomic<uintptr_t> begin{0}, end{0};
  char path[1024] = {};
  // The file's identity and state when mapped; written before `begin` is published.
  struct stat st {};
};
Slot g_slots[64];
// Serialises register / unregister / changed_mapped_file over the slots' `st` (the signal
// handler reads only the atomics and the path, never this lock).
std::mutex g_table;

struct sigaction g_previous;  // the disposition before the guard, for signals not ours

void say(const char* s) {
  const size_t n = std::strlen(s);
  size_t put = 0;
  while (put < n) {
    const ssize_t w = ::write(STDERR_FILENO, s + put, n - put);
    if (w <= 0) return;
    put += static_cast<size_t>(w);
  }
}

extern "C" void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (const char* path = info ? mapped_file_at(info->si_addr) : nullptr) {
    say("error: ");
    say(path);
    say(": the checkpoint changed on disk while it was mapped (truncated or replaced in place); "
        "the run stops. Frames already written are whole; --mmap off (mmap: false) reads "
        "checkpoints into memory instead\n");
    ::_exit(4);
  }
  // Not ours: what was there before.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // The default action: a fault returns to the faulting instruction and raises SIGBUS again,
  // now with the default disposition; a SIGBUS sent by kill() is raised again here.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
  if (!info || info->si_code <= 0) ::raise(sig);
}

}  // namespace

int register_mapped_file(const void* data, std::size_t size, const std::string& path, int fd) {
  std::lock_guard<std::mutex> lock(g_table);
  for (int i = 0; i < 64; ++i) {
    bool expected = false;
    if (!g_slots[i].used.compare_exchange_strong(expected, true)) continue;
    Slot& s = g_slots[i];
    const size_t n = std::min(path.size(), sizeof s.path - 1);
    std::memcpy(s.path, path.data(), n);
    s.path[n] = '\0';
    if (::fstat(fd, &s.st) != 0) s.st = {};
    s.end.store(reinterpret_cast<uintptr_t>(data) + size);
    s.begin.store(reinterpret_cast<uintptr_t>(data));
    return i;
  }
  return -1;
}

void unregister_mapped_file(int slot) {
  if (slot < 0 || slot >= 64) return;
  std::lock_guard<std::mutex> lock(g_table);
  g_slots[slot].begin.store(0);
  g_slots[slot].end.store(0);
  g_slots[slot].used.store(false);
}

const char* mapped_file_at(const void* addr) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  for (auto& s : g_slots) {
    const uintptr_t b = s.begin.load();
    if (b != 0 && a >= b && a < s.end.load()) return s.path;
  }
  return nullptr;
}

namespace {
bool same_time(const timespec& a, const timespec& b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }
}  // namespace

std::string changed_mapped_file() {
  std::lock_guard<std::mutex> lock(g_table);
  for (auto& s : g_slots) {
    if (s.begin.load() == 0 || s.st.st_ino == 0) continue;
    struct stat now {};
    if (::stat(s.path, &now) != 0) continue;  // removed: the mapping keeps the old file
    if (now.st_dev != s.st.st_dev || now.st_ino != s.st.st_ino) continue;  // replaced by rename
    // Size and modification time: what a write changes. Not the change time, which chmod
    // and (on ext4) a rename of the path also move.
    if (now.st_size != s.st.st_size || !same_time(now.st_mtim, s.st.st_mtim)) return s.path;
  }
  return "";
}

void install_mapped_file_guard() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
}

}  // namespace corridorkey::model
