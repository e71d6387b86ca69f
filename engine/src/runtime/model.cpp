#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/model.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>
#include <corridorkey/system.h>

#include "runtime/global_switches.h"
#include "runtime/memory.h"
#include "runtime/model_factory.h"
#include "model/checkpoint.h"
#include "config/log.h"
#include "runtime/model_impl.h"
#include "runtime/tune_plan.h"
#include "runtime/torch_boundary.h"

#include <filesystem>
#include <set>

namespace corridorkey::detail {
namespace {
/// The option-table fields a prepared network bakes in (model_runner.h PreparedNet,
/// model_factory.cpp load_net): everything else in EngineOptions is an engine's own. The
/// size is an engine's (img_size, backbone_size): only pos_embed depends on it, and an
/// engine at another size than the Model's holds its own (engine_size_on).
const std::vector<std::string>& model_fields() {
  static const std::vector<std::string> f = {
      "checkpoint",      "device",
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
bool Model::checkpoint_changed() const { return detail::checkpoint_changed(*impl_); }

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
    I->native_size = l.native_size;
    I->file = l.file.empty() ? l.file : std::filesystem::weakly_canonical(l.file).string();
    I->parameters = l.parameters;
    I->plan = std::move(l.plan);
  });
  I->mmap = options.mmap;
  if (!I->file.empty()) {
    std::error_code ec;
    I->file_bytes = std::filesystem::file_size(I->file, ec);
    I->file_time = std::filesystem::last_write_time(I->file, ec);
  }
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

namespace {
/// The checkpoint's own pos_embed, float32 on the CPU, read again from the file (a Model
/// keeps only the one at its own size: the checkpoint's would be 117 MB more for a 2048
/// hiera_base_plus, held for the rare engine at another size). The file must still hold
/// what the Model read: the re-read pos_embed, resized to the Model's grid, must equal the
/// Model's bit for bit (a retrained checkpoint saved under the same name does not; one
/// that only touched the file does). Random weights have no file: the Model's is resized.
torch::Tensor source_pos_embed(const Model::Impl& M) {
  const auto& own = M.net->net->encoder->model->pos_embed;
  if (M.file.empty()) return own.to(torch::kCPU, torch::kFloat);
  model::ReadOptions ro;
  ro.mmap = M.mmap;
  torch::Tensor out;
  {
    const auto ck = model::read_checkpoint(M.file, ro);
    const auto* t = ck.find("encoder.model.pos_embed");
    CK_CHECK(t && t->dim() == 3 && t->size(2) == own.size(2), ModelError, M.file,
             ": changed since the Model read it (no pos_embed of width ", own.size(2),
             "); Model::load() the file again");
    out = t->to(torch::kCPU, torch::kFloat).clone();  // own memory, not the file's mapping
  }
  const int64_t grid = M.backbone_size / M.net->net->config().encoder.patch_stride[0];
  const auto again = model::resize_pos_embed(out, grid).to(own.device(), own.scalar_type());
  CK_CHECK(again.sizes() == own.sizes() && torch::equal(again, own), ModelError, M.file,
           ": changed since the Model read it (its pos_embed differs); an engine at another "
           "img_size reads pos_embed again from it. Model::load() the file again");
  return out;
}
}  // namespace

bool checkpoint_changed(const Model::Impl& M) {
  if (M.file.empty()) return false;
  std::error_code e1, e2;
  const auto bytes = std::filesystem::file_size(M.file, e1);
  const auto time = std::filesystem::last_write_time(M.file, e2);
  return e1 || e2 || bytes != M.file_bytes || time != M.file_time;
}

EngineSize engine_size_on(const Model& model, EngineOptions& o, const EngineOptions& asked,
                          TunePlan& plan, std::string& notes) {
  const auto& M = model.impl();
  plan = M.plan;
  auto cfg = M.net->net->config();
  cfg.img_size = o.img_size > 0 ? o.img_size : M.native_size;
  cfg.backbone_size = 0;
  std::string rounded;
  try {
    cfg.validate();
    cfg.resolve_backbone(o.backbone_size, o.backbone_percent, &rounded);
    cfg.validate();
  } catch (const ConfigError& e) {
    throw ConfigError(M.description + ": " + e.what());
  }
  if (cfg.img_size == M.img_size && cfg.encoder_size() == M.backbone_size) return {};
  if (!rounded.empty()) note(notes, rounded);
  const auto& own = M.net->net->encoder->model->pos_embed;
  const int64_t grid = cfg.encoder_size() / cfg.encoder.patch_stride[0];
  EngineSize s;
  s.img_size = cfg.img_size;
  s.encoder_size = cfg.encoder_size();
  std::string held = "the Model's pos_embed (the same encoder grid)";
  if (cfg.encoder_size() != M.backbone_size) {
    rethrow_torch("resizing pos_embed", [&] {
      torch::NoGradGuard ng;
      // As load_weights resizes it (float32, bicubic, then one cast): bit-identical to a
      // Model loaded at this size.
      s.pos_embed = model::resize_pos_embed(source_pos_embed(M), grid)
                        .to(own.device(), own.scalar_type())
                        .contiguous();
    });
    release_free_memory();  // the file's other tensors, read again for pos_embed
    held = "its own pos_embed (" +
           std::to_string((s.pos_embed.numel() * s.pos_embed.element_size()) >> 10) + " KiB)";
  }
  // The plan at this size: the weights' type is the Model's (one precision per job, and
  // the weights are cast already); the kernels per stage and the refiner's tiling are timed
  // here (cached per size, as every plan).
  EngineOptions po = o;
  po.img_size = cfg.img_size;
  po.model_precision = M.net->options.model_precision;
  po.native_attention = M.requested.native_attention;
  po.tiled_refiner = asked.tiled_refiner;
  po.onednn_linear = asked.onednn_linear;
  po.winograd_conv = asked.winograd_conv;
  po.tune = M.requested.tune;
  const torch::Device device(M.device);
  s.native = M.net->native;  // the flag rules, where the Model's plan timed nothing
  if (M.plan.origin != "off") {
    rethrow_torch("timing the plan at img_size " + std::to_string(cfg.img_size),
                  [&] { plan = resolve_plan(po, cfg, device, notes); });
    s.native = planned_native(po, &plan);
    o.onednn_linear = po.onednn_linear;
    o.winograd_conv = po.winograd_conv;
  }
  o.tiled_refiner = po.tiled_refiner;
  note(notes, "img_size " + std::to_string(s.img_size) +
                  (s.encoder_size != s.img_size ? " (backbone " + std::to_string(s.encoder_size) + ")" : "") +
                  " on a Model loaded at " + std::to_string(M.img_size) + ": this engine uses " + held +
                  "; every other weight, and the precision (" + to_string(po.model_precision) +
                  "), are the Model's");
  return s;
}
}  // namespace corridorkey::detail
