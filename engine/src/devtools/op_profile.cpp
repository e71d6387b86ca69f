#include "devtools/op_profile.h"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <cstdlib>
#include <map>

namespace corridorkey::devtools {
namespace prof = torch::autograd::profiler;

OpProfile::OpProfile() {
  prof::enableProfilerLegacy(prof::ProfilerConfig(prof::ProfilerState::CPU, std::getenv("CK_OPS_SHAPES") != nullptr));
  running_ = true;
}

OpProfile::~OpProfile() {
  if (running_) (void)prof::disableProfilerLegacy();
}

std::vector<OpTime> OpProfile::stop(size_t top) {
  running_ = false;
  const auto lists = prof::disableProfilerLegacy();
  std::map<std::string, OpTime> by_name;
  for (const auto& events : lists) {
    // Push/pop pairs nest per thread: self time = duration minus the children's.
    struct Open {
      const prof::LegacyEvent* push;
      double children_us = 0;
    };
    std::vector<Open> stack;
    for (const auto& e : events) {
      if (e.kind() == prof::EventKind::PushRange) {
        stack.push_back({&e});
      } else if (e.kind() == prof::EventKind::PopRange && !stack.empty()) {
        const auto open = stack.back();
        stack.pop_back();
        const double us = open.push->cpuElapsedUs(e);
        std::string key = open.push->name();
        for (const auto& sh : open.push->shapes()) {
          key += " [";
          for (auto d : sh) key += std::to_string(d) + ",";
          key += "]";
        }
        auto& t = by_name[key];
        t.name = key;
        t.self_ms += (us - open.children_us) / 1000.0;
        ++t.calls;
        if (!stack.empty()) stack.back().children_us += us;
      }
    }
  }
  std::vector<OpTime> v;
  for (auto& [n, t] : by_name) v.push_back(t);
  std::sort(v.begin(), v.end(), [](const OpTime& a, const OpTime& b) { return a.self_ms > b.self_ms; });
  if (v.size() > top) v.resize(top);
  return v;
}

}  // namespace corridorkey::devtools
