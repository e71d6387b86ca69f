#include <corridorkey/check.h>
#include <corridorkey/engine.h>
#include <corridorkey/profile.h>
#include <corridorkey/system.h>

#include "config/log.h"
#include "runtime/engine_impl.h"
#include "runtime/model_factory.h"
#include "runtime/model_impl.h"
#include "runtime/global_switches.h"
#include "runtime/memory.h"
#include "runtime/model_runner.h"
#include "runtime/torch_boundary.h"
#include "timing.h"

#include <chrono>
#include <filesystem>

CORRIDORKEY_NAMESPACE_BEGIN

using timing::Clock;
using timing::ms_since;

BaseEngine::Impl::Impl(std::shared_ptr<const Model> m, const EngineSettings& settings, const ModelOptions* asked)
    : model(std::move(m)) {
  CK_CHECK(model, ConfigError, "an engine needs a Model (Model::load)");
  // options() is what was asked (the checkpoint named); the runner gets the options with
  // what the plan resolved (precision, kernels, tiling).
  opt = EngineOptions::of(model->options(), settings);
  validate_profile(opt, "options");
  opt.checkpoint = detail::checkpoint_to_read(opt);
  const auto& M = model->impl();
  info.device = M.device;
  device = torch::Device(info.device);
  info.notes = M.notes;  // what loading the Model said, then what this engine adds
  if (asked) {
    // The combined-struct path: Model::load applied the process-global switches of its
    // options; an engine asking for other ones applies (or notes) them as engines always did.
    if (asked->track_host_memory) detail::install_cpu_memory_tracker();
    detail::set_host_block_cache(asked->host_block_cache);
    const auto& L = M.requested;
    if (asked->threads != L.threads || asked->tf32 != L.tf32 ||
        asked->disable_cudnn_benchmark != L.disable_cudnn_benchmark)
      detail::apply_global_switches(*asked, device.is_cuda(), info.notes);
    static_cast<ModelOptions&>(opt) = *asked;
    opt.checkpoint = detail::checkpoint_to_read(opt);
  }
  // The size is the engine's: at another one than the Model's it holds its own pos_embed
  // and its own plan.
  auto on = detail::engine_on(*model, settings, info.notes);
  detail::rethrow_torch("preparing the engine", [&] {
    runner = std::make_unique<detail::ModelRunner>(M.net, on.options, info.notes, std::move(on.size));
  });
  S = runner->img_size();
  info.checkpoint = M.description;
  info.img_size = runner->img_size();
  info.backbone_size = runner->encoder_size();
  info.arch = M.arch;
  info.parameters = M.parameters;
  info.compile_mode_effective = runner->effective_compile_mode();
  info.precision = runner->precision();
  info.attention = runner->attention_kind();
  info.refiner = runner->refiner_kind();
  info.tune = std::move(on.plan);
  info.profile = opt.profile;
}

namespace {
/// The combined struct's Model half must be the Model's (one copy of the weights per key).
const std::shared_ptr<const Model>& same_key(const std::shared_ptr<const Model>& model, const EngineOptions& asked) {
  CK_CHECK(model, ConfigError, "an engine needs a Model (Model::load)");
  const std::string key = model_key(asked);
  CK_CHECK(key == model->key(), ConfigError, "this Model holds weights for {", model->key(),
           "}; the engine's options ask for {", key, "}: Model::load() those options (a second copy of the weights)");
  return model;
}
}  // namespace

BaseEngine::BaseEngine(const EngineOptions& options)
    : BaseEngine(Model::load(options.model(), options.engine()), options.engine()) {}
BaseEngine::BaseEngine(std::shared_ptr<const Model> model, const EngineSettings& settings)
    : impl_(std::make_unique<Impl>(std::move(model), settings)) {}
BaseEngine::BaseEngine(std::shared_ptr<const Model> model, const EngineOptions& options)
    : impl_(std::make_unique<Impl>(same_key(model, options), options.engine(), &options.model())) {}
BaseEngine::~BaseEngine() = default;
const EngineOptions& BaseEngine::options() const { return impl_->opt; }
const EngineInfo& BaseEngine::info() const { return impl_->info; }
const std::shared_ptr<const Model>& BaseEngine::model() const { return impl_->model; }

// process_frame: the frame stages (pipeline/key_frame.cpp).

BaseEngine::ModelOutput BaseEngine::run_model(const std::vector<float>& input) {
  auto& I = *impl_;
  const auto S = I.S;
  CK_CHECK(static_cast<int64_t>(input.size()) == 4 * S * S, IoError, "run_model: expected 4x",
           S, "x", S, " floats, got ", input.size());
  ModelOutput out;
  detail::PeakMemoryScope mem(I.device);
  const auto x = torch::from_blob(const_cast<float*>(input.data()), {1, 4, S, S}).to(I.device);
  auto run = I.infer(x);
  out.timings.encoder_ms = run.timings.encoder_ms;
  out.timings.decoders_ms = run.timings.decoders_ms;
  out.timings.refiner_ms = run.timings.refiner_ms;
  out.timings.infer_ms = run.timings.infer_ms;
  out.memory = mem.finish();
  out.memory.encoder_peak = run.encoder_peak;
  out.memory.decoders_peak = run.decoders_peak;
  out.memory.refiner_peak = run.refiner_peak;
  out.routed_stage2 = run.routed_stage2;
  out.routed_stage3 = run.routed_stage3;
  auto a = run.alpha.cpu().contiguous(), f = run.fg.cpu().contiguous();
  out.alpha.assign(a.data_ptr<float>(), a.data_ptr<float>() + a.numel());
  out.fg.assign(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
  return out;
}

namespace {
const EngineOptions& without_routing(const EngineOptions& o) {
  CK_CHECK(!o.token_routing, ConfigError, "token_routing needs OptimizedEngine (it owns the "
           "routing modules): use create_engine() or a profile other than original");
  return o;
}

std::shared_ptr<const Model> without_routing(std::shared_ptr<const Model> m) {
  CK_CHECK(!m || !m->options().token_routing, ConfigError, "token_routing needs OptimizedEngine (it owns the "
           "routing modules): use create_engine() or a profile other than original");
  return m;
}
}  // namespace

OriginalEngine::OriginalEngine(const EngineOptions& o) : BaseEngine(without_routing(o)) {}
OriginalEngine::OriginalEngine() : BaseEngine(load_profile("original")) {}
OriginalEngine::OriginalEngine(std::shared_ptr<const Model> m, const EngineSettings& s)
    : BaseEngine(without_routing(std::move(m)), s) {}
OriginalEngine::OriginalEngine(std::shared_ptr<const Model> m, const EngineOptions& o)
    : BaseEngine(std::move(m), without_routing(o)) {}
OptimizedEngine::OptimizedEngine(const EngineOptions& o) : BaseEngine(o) {}
OptimizedEngine::OptimizedEngine() : BaseEngine(load_profile("optimized")) {}
OptimizedEngine::OptimizedEngine(std::shared_ptr<const Model> m, const EngineSettings& s)
    : BaseEngine(std::move(m), s) {}
OptimizedEngine::OptimizedEngine(std::shared_ptr<const Model> m, const EngineOptions& o)
    : BaseEngine(std::move(m), o) {}

std::unique_ptr<BaseEngine> create_engine(std::shared_ptr<const Model> model, const EngineSettings& s) {
  if (s.engine_kind == EngineKind::Original) return std::make_unique<OriginalEngine>(std::move(model), s);
  return std::make_unique<OptimizedEngine>(std::move(model), s);
}

std::unique_ptr<BaseEngine> create_engine(const ModelOptions& m, const EngineSettings& s) {
  return create_engine(Model::load(m, s), s);
}

std::unique_ptr<BaseEngine> create_engine(std::shared_ptr<const Model> model) {
  CK_CHECK(model, ConfigError, "create_engine: no Model");
  const EngineSettings s = model->planned_for();
  return create_engine(std::move(model), s);
}

std::unique_ptr<BaseEngine> create_engine(const EngineOptions& o) {
  return create_engine(o.model(), o.engine());
}

std::unique_ptr<BaseEngine> create_engine(std::shared_ptr<const Model> model, const EngineOptions& o) {
  if (o.engine_kind == EngineKind::Original) return std::make_unique<OriginalEngine>(std::move(model), o);
  return std::make_unique<OptimizedEngine>(std::move(model), o);
}

CORRIDORKEY_NAMESPACE_END
