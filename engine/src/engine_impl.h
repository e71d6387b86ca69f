// BaseEngine's private state, shared by engine.cpp and the clip pipeline (pipeline.cpp),
// which runs the engine's stages (pre-process, model, post-process) on separate threads.
#pragma once

#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/profile.h>
#include <corridorkey/system.h>

#include "memory.h"
#include "model/checkpoint.h"
#include "model_runner.h"
#include "random_weights.h"
#include "torch_boundary.h"

#include <memory>

CORRIDORKEY_NAMESPACE_BEGIN

struct BaseEngine::Impl {
  EngineOptions opt;
  EngineInfo info;
  torch::Device device{torch::kCPU};
  std::unique_ptr<detail::ModelRunner> runner;
  int64_t S = 0;

  explicit Impl(const EngineOptions& o) : opt(o) {
    validate_profile(opt, "options");
    info.device = choose_device(opt.device, probe_devices());
    device = torch::Device(info.device);
    detail::install_cpu_memory_tracker();
    detail::apply_global_switches(opt, device.is_cuda(), info.notes);
    detail::rethrow_torch("loading the model", [&] {
      model::GreenFormer net{nullptr};
      if (opt.checkpoint.empty() && !opt.random_weights_arch.empty()) {
        auto cfg = model::GreenFormerConfig::by_name(opt.random_weights_arch,
                                                     opt.img_size ? opt.img_size : 512);
        cfg.validate();
        net = model::GreenFormer(cfg);
        detail::randomize_weights(*net, opt.random_weights_seed);
        info.checkpoint = "random:" + opt.random_weights_arch;
      } else {
        if (opt.checkpoint.empty()) opt.checkpoint = default_checkpoint();
        net = model::load_green_former(opt.checkpoint, opt.img_size);
        info.checkpoint = opt.checkpoint;
      }
      S = net->config().img_size;
      info.img_size = S;
      info.arch = net->config().arch;
      for (const auto& p : net->parameters()) info.parameters += p.numel();
      if (opt.token_routing)
        throw ConfigError("token_routing is not available in this build yet (issue: token "
                          "routing); use --no-token-routing");
      runner = std::make_unique<detail::ModelRunner>(net, opt, device, info.notes);
      info.compile_mode_effective = runner->effective_compile_mode();
    });
    info.profile = opt.profile;
  }

  detail::ModelRun infer(const torch::Tensor& x) {
    return detail::rethrow_torch("inference on " + info.device,
                                 [&] { return runner->run(x); });
  }
};


struct EngineAccess {
  using Impl = BaseEngine::Impl;
  static Impl& impl(BaseEngine& e) { return *e.impl_; }
};

CORRIDORKEY_NAMESPACE_END
