// BaseEngine's private state, shared by engine.cpp and the clip pipeline (pipeline.cpp),
// which runs the engine's stages (pre-process, model, post-process) on separate threads.
#pragma once

#include <corridorkey/engine.h>
#include <corridorkey/model.h>

#include "model/mapped_files.h"
#include "runtime/model_runner.h"
#include "runtime/torch_boundary.h"

#include <memory>

CORRIDORKEY_NAMESPACE_BEGIN

struct BaseEngine::Impl {
  // What an engine holds: its Model and its own settings. The weights' options are the
  // Model's (model->options() as asked, the prepared network's as resolved); nothing here
  // merges the two halves back.
  std::shared_ptr<const Model> model;  // the weights, shared with other engines
  EngineSettings settings;             // as asked (BaseEngine::settings())
  EngineInfo info;
  torch::Device device{torch::kCPU};
  std::unique_ptr<detail::ModelRunner> runner;
  int64_t S = 0;

  /// This engine's runner on `model`'s prepared network (engine.cpp) with `settings`.
  Impl(std::shared_ptr<const Model> model, const EngineSettings& settings);

  /// The blue-screen model's engine, when the Model names one (ModelOptions::checkpoint_blue):
  /// loaded on the first blue plate with this engine's settings (Model::load of
  /// blue_model_options), then held for this engine's life. nullptr without one. Errors are
  /// the loading's, prefixed "checkpoint_blue: ".
  BaseEngine* blue_engine();
  std::unique_ptr<BaseEngine> blue;

  detail::ModelRun infer(const torch::Tensor& x) {
    auto run = detail::rethrow_torch("inference on " + info.device, [&] { return runner->run(x); });
    // A mapped checkpoint written in place keys with other weights and no fault: this frame
    // (and every later one) is refused rather than written with a wrong matte.
    if (const auto changed = model::changed_mapped_file(); !changed.empty())
      throw ModelError(changed + ": the checkpoint changed on disk while it was mapped (written in "
                       "place: its size or modification time moved); the run stops. Frames already "
                       "written are whole; --mmap off (mmap: false) reads checkpoints into memory instead");
    if (!run.warnings.empty()) {  // the runner changed mode (on_oom, capture): say so
      info.precision = runner->precision();
      info.refiner = runner->refiner_kind();
      info.compile_mode_effective = runner->effective_compile_mode();
      for (const auto& w : run.warnings) info.notes += w + "\n";
    }
    return run;
  }
};

struct EngineAccess {
  using Impl = BaseEngine::Impl;
  static Impl& impl(BaseEngine& e) { return *e.impl_; }
};

CORRIDORKEY_NAMESPACE_END
