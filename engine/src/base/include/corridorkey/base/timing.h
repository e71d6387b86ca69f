// Wall-clock helpers shared by every stage timer (engine, model runner, pipeline, bench,
// serve, review): one steady clock, milliseconds as double.
#pragma once

#include <chrono>

namespace corridorkey::timing {

using Clock = std::chrono::steady_clock;

inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

inline double ms_since(Clock::time_point t0) { return ms_between(t0, Clock::now()); }

}  // namespace corridorkey::timing
