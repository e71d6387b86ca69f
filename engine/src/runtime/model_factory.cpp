#include "runtime/model_factory.h"

#include <corridorkey/errors.h>

#include "model/random_weights.h"
#include "config/log.h"
#include "runtime/memory.h"
#include "runtime/tune_plan.h"

#include <atomic>

namespace corridorkey::detail {
namespace {
std::atomic<uint64_t> g_checkpoint_loads{0};
}  // namespace

LoadedModel make_model(const ModelSource& src) {
  LoadedModel m;
  if (src.checkpoint.empty()) {
    CK_CHECK(!src.random_arch.empty(), ConfigError,
             "no checkpoint and no random-weights architecture given");
    auto cfg = model::GreenFormerConfig::by_name(src.random_arch, src.img_size ? src.img_size : 512);
    cfg.resolve_backbone(src.backbone_size, src.backbone_percent, &m.backbone_note);
    cfg.validate();
    const auto dtype = src.dtype_for ? src.dtype_for(cfg) : src.dtype;
    m.net = model::GreenFormer(cfg);
    model::randomize_weights(*m.net, src.seed);  // drawn in float32: the same values for every dtype
    if (dtype != torch::kFloat) m.net->to(dtype);
    m.description = "random:" + src.random_arch;
  } else {
    model::ReadOptions ro;
    ro.mmap = src.mmap;
    m.checkpoint = model::read_checkpoint(src.checkpoint, ro);
    ++g_checkpoint_loads;
    auto cfg = model::config_at(m.checkpoint, src.img_size);
    cfg.resolve_backbone(src.backbone_size, src.backbone_percent, &m.backbone_note);
    const auto dtype = src.dtype_for ? src.dtype_for(cfg) : src.dtype;
    m.net = model::GreenFormer(cfg);
    if (dtype != torch::kFloat) m.net->to(dtype);
    model::load_weights(*m.net, m.checkpoint);  // converts to the parameters' dtype when needed
    m.description = m.checkpoint.path;  // the file chosen when src.checkpoint is a folder
  }
  m.net->eval();
  return m;
}

uint64_t checkpoint_loads() { return g_checkpoint_loads.load(); }

LoadedNet load_net(const EngineOptions& opt, const torch::Device& device, std::string& notes) {
  auto note = [&](const std::string& line) {
    detail::note(notes, line);
  };
  LoadedNet b;
  EngineOptions resolved = opt;  // with what the measured plan decided
  ModelSource src{opt.checkpoint, opt.img_size, opt.random_weights_arch, opt.random_weights_seed,
                  torch::kFloat, opt.mmap, {}, opt.backbone_size, opt.backbone_percent};
  src.dtype_for = [&](const model::GreenFormerConfig& cfg) {
    b.plan = resolve_plan(resolved, cfg, device, notes);
    if (b.plan.origin == "trials" || b.plan.origin == "cache" || b.plan.origin == "memory") {
      std::string chosen;
      for (const auto& d : b.plan.decisions)
        if (d.source == "plan") chosen += (chosen.empty() ? "" : ", ") + d.option + " " + d.value;
      note("tune (" + std::string(b.plan.origin == "cache" ? "cached plan" : "timed now") + "): " +
           (chosen.empty() ? "nothing open to the plan" : chosen) +
           "; `corridorkey-engine tune` prints the times");
    }
    return device.is_cpu() ? weight_dtype_for(resolved, device) : torch::kFloat;
  };
  auto loaded = make_model(src);
  auto net = loaded.net;
  const auto& ck = loaded.checkpoint;
  b.description = loaded.description;
  if (!ck.chosen_note.empty()) note(ck.chosen_note);
  if (!loaded.backbone_note.empty()) note(loaded.backbone_note);
  if (const auto ignored = ck.ignored_summary(); !ignored.empty())  // one line per load
    note(ck.path + ": " + ignored);
  b.img_size = net->config().img_size;
  b.backbone_size = net->config().encoder_size();
  b.native_size = ck.path.empty() ? 512 : ck.config.img_size;
  b.file = ck.path;
  b.arch = net->config().arch;
  for (const auto& p : net->parameters()) b.parameters += p.numel();
  model::TokenRouter router{nullptr};
  if (opt.token_routing) {
    model::RoutingOptions ro;
    ro.low = opt.edge_threshold_low;
    ro.high = opt.edge_threshold_high;
    ro.min_edge_tokens = opt.min_edge_tokens;
    router = model::TokenRouter(net->config().encoder, b.backbone_size, ro);  // routes where the encoder runs
    if (router->load(ck.tensors, ck.path) == 0)
      note("token_routing: no ltrm_stage* weights in the checkpoint, so the LTRMs are the "
           "identity: easy tokens skip the routed blocks (faster, less accurate until fine-tuned)");
  }
  b.net = prepare_net(net, resolved, device, notes, router, &b.plan);
  net = nullptr;
  loaded = {};  // the checkpoint's tensors: no longer needed
  // Loading freed hundreds of MB in many mid-sized blocks (the file's tensors, float32
  // parameters); hand them back to the OS so the forward's peak does not sit on top of them.
  release_free_memory();
  return b;
}

BuiltRunner build_runner(const EngineOptions& opt, const torch::Device& device, std::string& notes) {
  auto l = load_net(opt, device, notes);
  BuiltRunner b;
  b.runner = std::make_unique<ModelRunner>(l.net, l.net->options, notes);
  b.description = std::move(l.description);
  b.arch = std::move(l.arch);
  b.img_size = l.img_size;
  b.backbone_size = l.backbone_size;
  b.parameters = l.parameters;
  b.plan = std::move(l.plan);
  return b;
}

}  // namespace corridorkey::detail
