// Points where the tests make the runtime fail or slow down on purpose (the on_oom policy,
// the measured plan's choice against a slowed candidate). The hooks are resolved when a
// binary is linked: the shipped library, the CLI and corridorkey-model-check link
// ck_runtime_hooks (runtime/no_test_hooks.cpp: nothing ever happens), the tests link
// ck_test_hooks (tests/support/test_hooks.cpp), whose inject_out_of_memory and
// inject_trial_delay set them. So no test hook is compiled into what is shipped.
#pragma once

#include <string>

namespace corridorkey::detail::hooks {

/// True when this forward is to fail as if the device ran out of memory (before any work).
bool take_out_of_memory();

/// Milliseconds a timed trial of `candidate` ("float32", "bfloat16 sdpa", "tiled", ...)
/// sleeps on top of its work.
double trial_delay_ms(const std::string& candidate);

}  // namespace corridorkey::detail::hooks
