#include <corridorkey/check.h>
#include <corridorkey/engine.h>
#include <corridorkey/profile.h>
#include <corridorkey/system.h>

#include "config/log.h"
#include "runtime/engine_impl.h"
#include "runtime/model_factory.h"
#include "runtime/model_impl.h"
#include "runtime/memory.h"
#include "runtime/model_runner.h"
#include "runtime/torch_boundary.h"
#include "timing.h"

#include <chrono>
#include <filesystem>

CORRIDORKEY_NAMESPACE_BEGIN

using timing::Clock;
using timing::ms_since;

BaseEngine::Impl::Impl(std::shared_ptr<const Model> m, const EngineSettings& asked)
    : model(std::move(m)), settings(asked) {
  CK_CHECK(model, ConfigError, "an engine needs a Model (Model::load)");
  validate_profile(Profile{model->options(), settings}, "options");
  const auto& M = model->impl();
  info.device = M.device;
  device = torch::Device(info.device);
  info.notes = M.notes;  // what loading the Model said, then what this engine adds
  // The size is the engine's: at another one than the Model's it holds its own pos_embed
  // and its own plan.
  auto on = detail::engine_on(*model, settings, info.notes);
  detail::rethrow_torch("preparing the engine", [&] {
    runner = std::make_unique<detail::ModelRunner>(M.net, on.settings, info.notes, std::move(on.size));
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
  info.profile = settings.profile;
}

BaseEngine* BaseEngine::Impl::blue_engine() {
  const ModelOptions& main = model->options();
  if (blue || main.checkpoint_blue.empty()) return blue.get();
  // The same error class (and so exit code), saying which of the two models failed.
  auto prefixed = [](const auto& e) {
    using E = std::decay_t<decltype(e)>;
    return E(std::string("checkpoint_blue: ") + e.what());
  };
  try {
    blue = create_engine(blue_model_options(main), settings);
  } catch (const ModelError& e) {
    throw prefixed(e);
  } catch (const IoError& e) {
    throw prefixed(e);
  } catch (const ConfigError& e) {
    throw prefixed(e);
  } catch (const DeviceError& e) {
    throw prefixed(e);
  }
  return blue.get();
}

BaseEngine::BaseEngine(const Profile& p) : BaseEngine(Model::load(p.model, p.engine), p.engine) {}
BaseEngine::BaseEngine(std::shared_ptr<const Model> model, const EngineSettings& settings)
    : impl_(std::make_unique<Impl>(std::move(model), settings)) {}
BaseEngine::~BaseEngine() = default;
const EngineSettings& BaseEngine::settings() const { return impl_->settings; }
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
const Profile& without_routing(const Profile& p) {
  CK_CHECK(!p.model.token_routing, ConfigError, "token_routing needs OptimizedEngine (it owns the "
           "routing modules): use create_engine() or a profile other than original");
  return p;
}

std::shared_ptr<const Model> without_routing(std::shared_ptr<const Model> m) {
  CK_CHECK(!m || !m->options().token_routing, ConfigError, "token_routing needs OptimizedEngine (it owns the "
           "routing modules): use create_engine() or a profile other than original");
  return m;
}
}  // namespace

OriginalEngine::OriginalEngine(const Profile& p) : BaseEngine(without_routing(p)) {}
OriginalEngine::OriginalEngine() : BaseEngine(load_profile("original")) {}
OriginalEngine::OriginalEngine(std::shared_ptr<const Model> m, const EngineSettings& s)
    : BaseEngine(without_routing(std::move(m)), s) {}
OptimizedEngine::OptimizedEngine(const Profile& p) : BaseEngine(p) {}
OptimizedEngine::OptimizedEngine() : BaseEngine(load_profile("optimized")) {}
OptimizedEngine::OptimizedEngine(std::shared_ptr<const Model> m, const EngineSettings& s)
    : BaseEngine(std::move(m), s) {}

std::unique_ptr<BaseEngine> create_engine(std::shared_ptr<const Model> model, const EngineSettings& s) {
  if (s.engine_kind == EngineKind::Original) return std::make_unique<OriginalEngine>(std::move(model), s);
  return std::make_unique<OptimizedEngine>(std::move(model), s);
}

std::unique_ptr<BaseEngine> create_engine(const ModelOptions& m, const EngineSettings& s) {
  return create_engine(Model::load(m, s), s);
}

std::unique_ptr<BaseEngine> create_engine(const Profile& p) { return create_engine(p.model, p.engine); }

std::unique_ptr<BaseEngine> create_engine(std::shared_ptr<const Model> model) {
  CK_CHECK(model, ConfigError, "create_engine: no Model");
  const EngineSettings s = model->planned_for();
  return create_engine(std::move(model), s);
}

CORRIDORKEY_NAMESPACE_END
