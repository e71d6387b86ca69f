// The measured plan (corridorkey/tune.h): timed trials of single blocks at the real shapes,
// an estimate per frame for each candidate, and the choice, cached per machine and
// configuration (tune_cache.h).
#pragma once

#include <corridorkey/tune.h>

#include "model/config.h"
#include "runtime/plan_deciders.h"

#include <torch/types.h>

#include <string>

namespace corridorkey::detail {

/// A plan and the options it resolves.
struct Planned {
  TunePlan plan;
  /// The options with the plan applied (plan_deciders.h apply_plan): model_precision no
  /// longer Auto on a CPU, onednn_linear / winograd_conv On or Off, tiled_refiner where the
  /// plan timed it; native_attention stays for the runner, which reads the stage decisions.
  ModelOptions model;
  EngineSettings engine;
};

/// The plan for a Model with `model` options whose engine has `engine` settings, for `cfg`
/// on `device`, decided before any weight is built: read from the cache, timed now (one
/// decider per choice over one memoised set of trials, then cached), or the flag rules
/// (tune off, a GPU, or trials that failed). An explicit field value is recorded as "flag"
/// and never changed. Notes (one line each) go to `notes` and stderr: the trial note, cache
/// warnings.
Planned make_plan(const ModelOptions& model, const EngineSettings& engine, const model::GreenFormerConfig& cfg,
                  const torch::Device& device, std::string& notes);

/// What the deciders know of this machine and this model at this size.
PlanFacts plan_facts(const ModelOptions& model, const EngineSettings& engine, const model::GreenFormerConfig& cfg,
                     const torch::Device& device);

/// The plan key for these options: engine version, CPU model, threads, LibTorch, device,
/// architecture, size, layouts and fusions, and which fields are open to the plan.
std::string plan_key(const ModelOptions& model, const EngineSettings& engine, const model::GreenFormerConfig& cfg,
                     const torch::Device& device);

}  // namespace corridorkey::detail
