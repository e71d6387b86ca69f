// The measured plan (corridorkey/tune.h): timed trials of single blocks at the real shapes,
// an estimate per frame for each candidate, and the choice, cached per machine and
// configuration (tune_cache.h).
#pragma once

#include <corridorkey/tune.h>

#include "model/config.h"

#include <torch/types.h>

#include <string>

namespace corridorkey::detail {

/// Resolves the fields of `opt` the plan may decide, for `cfg` on `device`:
///  - model_precision auto on a CPU (not under mixed_precision): float32 or bfloat16;
///  - native_attention auto with bf16 on a CPU whose native kernel runs: per global stage;
///  - tiled_refiner auto where the whole image fits the memory budget: tiled or whole.
/// With tune off nothing is timed and the flag rules stand (recorded as "rule"). An
/// explicit field value is recorded as "flag" and never changed. On return
/// opt.model_precision is no longer Auto on a CPU; tiled_refiner is On/Off where the plan
/// timed it; native_attention stays for the runner, which reads the stage decisions.
/// Notes (one line each) go to `notes` and stderr: the trial note, cache warnings.
TunePlan resolve_plan(EngineOptions& opt, const model::GreenFormerConfig& cfg,
                      const torch::Device& device, std::string& notes);

/// The plan key for these options: engine version, CPU model, threads, LibTorch, device,
/// architecture, size, layouts and fusions, and which fields are open to the plan.
std::string plan_key(const EngineOptions& opt, const model::GreenFormerConfig& cfg,
                     const torch::Device& device);

/// Test hook: every timed trial of `candidate` ("float32", "bfloat16", "native", "sdpa",
/// "tiled", "whole", or a precision and a kernel: "bfloat16 sdpa") sleeps `ms` longer, so a
/// forced-slow choice can be shown not picked. A trial tagged "bfloat16 sdpa" takes the
/// delays of both words and of the pair. Empty candidate clears all delays.
void inject_trial_delay(const std::string& candidate, double ms);

}  // namespace corridorkey::detail
