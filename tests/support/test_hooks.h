// The tests' side of runtime/test_hooks.h: what makes the runtime fail or slow down. Only
// the test binary links these (ck_test_hooks); the shipped library has no such functions.
#pragma once

#include <string>

namespace corridorkey::detail {

/// The next `n` forward attempts fail as if the device ran out of memory (an injected
/// c10::OutOfMemoryError before any work), so the on_oom policy is tested on CPU.
void inject_out_of_memory(int n);

/// Every timed trial of `candidate` ("float32", "bfloat16", "native", "sdpa", "tiled",
/// "whole", or a precision and a kernel: "bfloat16 sdpa") sleeps `ms` longer, so a
/// forced-slow choice can be shown not picked. A trial tagged "bfloat16 sdpa" takes the
/// delays of both words and of the pair. Empty candidate clears all delays.
void inject_trial_delay(const std::string& candidate, double ms);

}  // namespace corridorkey::detail
