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

#include <iostream>
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
    if (opt.track_host_memory) detail::install_cpu_memory_tracker();
    detail::apply_global_switches(opt, device.is_cuda(), info.notes);
    detail::rethrow_torch("loading the model", [&] {
      model::GreenFormer net{nullptr};
      model::Checkpoint ck;
      if (opt.checkpoint.empty() && !opt.random_weights_arch.empty()) {
        auto cfg = model::GreenFormerConfig::by_name(opt.random_weights_arch,
                                                     opt.img_size ? opt.img_size : 512);
        cfg.validate();
        net = model::GreenFormer(cfg);
        detail::randomize_weights(*net, opt.random_weights_seed);
        info.checkpoint = "random:" + opt.random_weights_arch;
      } else {
        if (opt.checkpoint.empty()) opt.checkpoint = default_checkpoint();
        ck = model::read_checkpoint(opt.checkpoint);
        net = model::GreenFormer(model::config_at(ck, opt.img_size));
        model::load_weights(*net, ck);
        net->eval();
        info.checkpoint = opt.checkpoint;
      }
      S = net->config().img_size;
      info.img_size = S;
      info.arch = net->config().arch;
      for (const auto& p : net->parameters()) info.parameters += p.numel();
      model::TokenRouter router{nullptr};
      if (opt.token_routing) {
        model::RoutingOptions ro;
        ro.low = opt.edge_threshold_low;
        ro.high = opt.edge_threshold_high;
        ro.min_edge_tokens = opt.min_edge_tokens;
        router = model::TokenRouter(net->config().encoder, S, ro);
        if (router->load(ck.tensors, opt.checkpoint) == 0) {
          const std::string msg =
              "token_routing: no ltrm_stage* weights in the checkpoint, so the LTRMs are the "
              "identity: easy tokens skip the routed blocks (faster, less accurate until fine-tuned)";
          info.notes += msg + "\n";
          std::cerr << "corridorkey: " << msg << "\n";
        }
      }
      runner = std::make_unique<detail::ModelRunner>(net, opt, device, info.notes, router);
      info.compile_mode_effective = runner->effective_compile_mode();
      info.precision = runner->precision();
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
