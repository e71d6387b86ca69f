#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/model.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>
#include <corridorkey/system.h>

#include "runtime/global_switches.h"
#include "runtime/memory.h"
#include "runtime/model_factory.h"
#include "runtime/model_impl.h"
#include "runtime/torch_boundary.h"

#include <filesystem>
#include <set>

namespace corridorkey::detail {
namespace {
/// The option-table fields a prepared network bakes in (model_runner.h PreparedNet,
/// model_factory.cpp load_net): everything else in EngineOptions is an engine's own.
const std::vector<std::string>& model_fields() {
  static const std::vector<std::string> f = {
      "checkpoint",      "device",           "img_size",        "backbone_size",
      "model_precision", "mixed_precision",  "channels_last",   "fused_decoder",
      "flash_attention", "native_attention", "token_chunk",     "tune",
      "token_routing",   "edge_threshold_low", "edge_threshold_high", "min_edge_tokens"};
  return f;
}
}  // namespace
}  // namespace corridorkey::detail

CORRIDORKEY_NAMESPACE_BEGIN
namespace {

/// Options with the device and the checkpoint resolved as loading resolves them.
EngineOptions resolved_request(const EngineOptions& o) {
  EngineOptions r = o;
  r.device = choose_device(o.device, probe_devices());
  if (r.checkpoint.empty() && r.random_weights_arch.empty()) r.checkpoint = default_checkpoint();
  if (!r.checkpoint.empty()) {
    std::error_code ec;
    const auto abs = std::filesystem::weakly_canonical(r.checkpoint, ec);
    if (!ec) r.checkpoint = abs.string();
  }
  return r;
}

std::string key_of(const EngineOptions& r) {
  std::string k;
  for (const auto& f : detail::model_fields())
    k += (k.empty() ? "" : ";") + f + "=" + engine_option_value(r, f);
  if (!r.random_weights_arch.empty())
    k += ";random_weights=" + r.random_weights_arch + "/" + std::to_string(r.random_weights_seed);
  return k;
}

}  // namespace

std::string model_key(const EngineOptions& options) { return key_of(resolved_request(options)); }

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const std::string& Model::key() const { return impl_->key; }
const EngineOptions& Model::options() const { return impl_->requested; }
const std::string& Model::device() const { return impl_->device; }
const std::string& Model::checkpoint() const { return impl_->description; }
const std::string& Model::arch() const { return impl_->arch; }
int64_t Model::img_size() const { return impl_->img_size; }
int64_t Model::parameters() const { return impl_->parameters; }
uint64_t Model::weight_bytes() const { return impl_->net->weight_bytes; }
const std::string& Model::notes() const { return impl_->notes; }
const TunePlan& Model::tune() const { return impl_->plan; }

std::shared_ptr<const Model> Model::load(const EngineOptions& options) {
  validate_profile(options, "options");
  auto I = std::make_unique<Impl>();
  I->requested = options;
  const EngineOptions r = resolved_request(options);
  I->key = key_of(r);
  I->device = r.device;
  const torch::Device device(I->device);
  // Process-global switches, as the first engine always set them (threads before the plan's
  // trials and the load).
  if (options.track_host_memory) detail::install_cpu_memory_tracker();
  detail::set_host_block_cache(options.host_block_cache);
  detail::apply_global_switches(options, device.is_cuda(), I->notes);
  detail::rethrow_torch("loading the model", [&] {
    EngineOptions o = options;
    if (o.checkpoint.empty() && o.random_weights_arch.empty()) o.checkpoint = default_checkpoint();
    auto l = detail::load_net(o, device, I->notes);
    I->net = std::move(l.net);
    I->description = std::move(l.description);
    I->arch = std::move(l.arch);
    I->img_size = l.img_size;
    I->backbone_size = l.backbone_size;
    I->parameters = l.parameters;
    I->plan = std::move(l.plan);
  });
  return std::shared_ptr<const Model>(new Model(std::move(I)));
}

CORRIDORKEY_NAMESPACE_END

namespace corridorkey::detail {
EngineOptions engine_options_on(const Model& model, const EngineOptions& asked) {
  const auto& M = model.impl();
  const std::string key = model_key(asked);
  CK_CHECK(key == M.key, ConfigError,
           "this Model holds weights for {", M.key, "}; the engine's options ask for {", key,
           "}: Model::load() those options (a second copy of the weights)");
  EngineOptions out = M.net->options;  // resolved by the plan
  const EngineOptions& loaded = M.requested;
  const std::set<std::string> baked(model_fields().begin(), model_fields().end());
  for (const auto& f : engine_option_fields()) {
    if (baked.count(f.key)) continue;
    const auto v = engine_option_value(asked, f.key);
    if (v != engine_option_value(loaded, f.key)) set_engine_option(out, f.key, v, "engine options");
  }
  // Not in the option table: per engine.
  out.profile = asked.profile;
  out.input_is_linear = asked.input_is_linear;
  out.track_host_memory = asked.track_host_memory;
  return out;
}
}  // namespace corridorkey::detail
