#include "runtime/model_factory.h"

#include <corridorkey/check.h>

#include "model/random_weights.h"
#include "config/log.h"
#include "runtime/memory.h"
#include "runtime/tune_plan.h"

#include <atomic>

namespace corridorkey::detail {
namespace {
std::atomic<uint64_t> g_checkpoint_loads{0};
}  // namespace

ReadSource read_source(const ModelSource& src) {
  ReadSource r;
  if (src.checkpoint.empty()) {
    CK_CHECK(!src.random_arch.empty(), ConfigError,
             "no checkpoint and no random-weights architecture given");
    r.config = model::GreenFormerConfig::by_name(src.random_arch, src.img_size ? src.img_size : 512);
    r.description = "random:" + src.random_arch;
    r.random_arch = src.random_arch;
    r.seed = src.seed;
  } else {
    model::ReadOptions ro;
    ro.mmap = src.mmap;
    r.checkpoint = model::read_checkpoint(src.checkpoint, ro);
    ++g_checkpoint_loads;
    r.config = model::config_at(r.checkpoint, src.img_size);
    r.description = r.checkpoint.path;  // the file chosen when src.checkpoint is a folder
  }
  r.config.resolve_backbone(src.backbone_size, src.backbone_percent, &r.backbone_note);
  r.config.validate();
  return r;
}

LoadedModel build_model(ReadSource src, torch::ScalarType dtype) {
  LoadedModel m;
  m.net = model::GreenFormer(src.config);
  if (!src.random_arch.empty()) {
    model::randomize_weights(*m.net, src.seed);  // drawn in float32: the same values for every dtype
    if (dtype != torch::kFloat) m.net->to(dtype);
  } else {
    if (dtype != torch::kFloat) m.net->to(dtype);
    model::load_weights(*m.net, src.checkpoint);  // converts to the parameters' dtype when needed
  }
  m.net->eval();
  m.checkpoint = std::move(src.checkpoint);
  m.description = std::move(src.description);
  m.backbone_note = std::move(src.backbone_note);
  return m;
}

LoadedModel make_model(const ModelSource& src) { return build_model(read_source(src), src.dtype); }

uint64_t checkpoint_loads() { return g_checkpoint_loads.load(); }

LoadedNet load_net(const ModelOptions& mo, const EngineSettings& es, const torch::Device& device,
                   std::string& notes) {
  auto note = [&](const std::string& line) {
    detail::note(notes, line);
  };
  LoadedNet b;
  // 1. What the checkpoint is (read once), 2. the plan on its architecture, 3. the weights
  // built in the type the plan chose: no callback from building into planning.
  ModelSource src;
  src.checkpoint = mo.checkpoint;  // resolved by the caller (checkpoint_to_read, model_impl.h)
  src.img_size = es.img_size;
  src.random_arch = src.checkpoint.empty() ? mo.random_weights_arch : "";
  src.seed = mo.random_weights_seed;
  src.mmap = mo.mmap;
  src.backbone_size = es.backbone_size;
  src.backbone_percent = es.backbone_percent;
  auto read = read_source(src);
  auto planned = make_plan(mo, es, read.config, device, notes);
  b.plan = std::move(planned.plan);
  b.resolved = planned.model;
  b.resolved_engine = planned.engine;
  if (b.plan.origin != PlanOrigin::Off) {
    std::string chosen;
    for (const auto& d : b.plan.decisions)
      if (d.source == DecisionSource::Plan)
        chosen += (chosen.empty() ? "" : ", ") + std::string(to_string(d.option)) + " " + to_string(d.value);
    note("tune (" + std::string(b.plan.origin == PlanOrigin::Cache ? "cached plan" : "timed now") + "): " +
         (chosen.empty() ? "nothing open to the plan" : chosen) + "; `corridorkey-engine tune` prints the times");
  }
  const auto dtype = device.is_cpu() ? weight_dtype_for(b.resolved, device) : torch::kFloat;
  auto loaded = build_model(std::move(read), dtype);
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
  if (mo.token_routing) {
    model::RoutingOptions ro;
    ro.low = mo.edge_threshold_low;
    ro.high = mo.edge_threshold_high;
    ro.min_edge_tokens = mo.min_edge_tokens;
    router = model::TokenRouter(net->config().encoder, b.backbone_size, ro);  // routes where the encoder runs
    if (router->load_weights(ck.tensors, ck.path) == 0)
      note("token_routing: no ltrm_stage* weights in the checkpoint, so the LTRMs are the "
           "identity: easy tokens skip the routed blocks (faster, less accurate until fine-tuned)");
  }
  b.net = prepare_net(net, b.resolved, device, notes, router, &b.plan);
  net = nullptr;
  loaded = {};  // the checkpoint's tensors: no longer needed
  // Loading freed hundreds of MB in many mid-sized blocks (the file's tensors, float32
  // parameters); hand them back to the OS so the forward's peak does not sit on top of them.
  release_free_memory();
  return b;
}

BuiltRunner build_runner(const ModelOptions& model, const EngineSettings& settings, const torch::Device& device,
                         std::string& notes) {
  auto l = load_net(model, settings, device, notes);
  BuiltRunner b;
  b.runner = std::make_unique<ModelRunner>(l.net, l.resolved_engine, notes);
  b.description = std::move(l.description);
  b.arch = std::move(l.arch);
  b.img_size = l.img_size;
  b.backbone_size = l.backbone_size;
  b.parameters = l.parameters;
  b.plan = std::move(l.plan);
  return b;
}

}  // namespace corridorkey::detail
