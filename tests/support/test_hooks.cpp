// The runtime's test hooks (runtime/test_hooks.h) as the tests set them.
#include "support/test_hooks.h"

#include "runtime/test_hooks.h"

#include <atomic>
#include <map>
#include <mutex>
#include <sstream>

namespace corridorkey::detail {
namespace {
std::atomic<int> g_injected_oom{0};
std::mutex g_delay_m;
std::map<std::string, double> g_delay;
}  // namespace

void inject_out_of_memory(int n) { g_injected_oom = n; }

void inject_trial_delay(const std::string& candidate, double ms) {
  std::lock_guard<std::mutex> l(g_delay_m);
  if (candidate.empty()) g_delay.clear();
  else g_delay[candidate] = ms;
}

namespace hooks {

bool take_out_of_memory() {
  int n = g_injected_oom.load();
  while (n > 0 && !g_injected_oom.compare_exchange_weak(n, n - 1)) {
  }
  return n > 0;
}

/// A tag such as "bfloat16 native" takes the delays of "bfloat16", "native" and of the
/// whole tag, so a test can slow one precision, one kernel, or one kernel in one precision.
double trial_delay_ms(const std::string& candidate) {
  std::lock_guard<std::mutex> l(g_delay_m);
  double ms = 0;
  auto add = [&](const std::string& k) {
    const auto it = g_delay.find(k);
    if (it != g_delay.end()) ms += it->second;
  };
  add(candidate);
  if (candidate.find(' ') != std::string::npos) {
    std::istringstream words(candidate);
    for (std::string w; words >> w;) add(w);
  }
  return ms;
}

}  // namespace hooks
}  // namespace corridorkey::detail
