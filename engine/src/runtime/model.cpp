#include <corridorkey/check.h>
#include <corridorkey/engine.h>
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
std::string checkpoint_to_read(const ModelOptions& o) {
  if (!o.checkpoint.empty()) return o.checkpoint;
  return o.random_weights_arch.empty() ? default_checkpoint() : std::string();
}
}  // namespace corridorkey::detail

CORRIDORKEY_NAMESPACE_BEGIN
namespace {

/// Options with the device and the checkpoint resolved as loading resolves them.
ModelOptions resolved_request(const ModelOptions& o) {
  ModelOptions r = o;
  r.device = choose_device(o.device, probe_devices());
  r.checkpoint = detail::checkpoint_to_read(o);
  if (!r.checkpoint.empty()) {
    std::error_code ec;
    const auto abs = std::filesystem::weakly_canonical(r.checkpoint, ec);
    if (!ec) r.checkpoint = abs.string();
  }
  return r;
}

/// The fields of the option table that shape the weights (OptionInfo::in_model_key), in
/// table order, then the random weights' architecture and seed.
std::string key_of(const ModelOptions& r) {
  const Profile p{r, {}};  // the table reads a Profile: one copy for every field
  std::string k;
  for (const auto& f : engine_option_fields())
    if (f.in_model_key) k += (k.empty() ? "" : ";") + f.key + "=" + option_value(p, f.key);
  if (r.checkpoint.empty() && !r.random_weights_arch.empty())
    k += ";random_weights=" + r.random_weights_arch + "/" + std::to_string(r.random_weights_seed);
  return k;
}

}  // namespace

std::string model_key(const ModelOptions& options) { return key_of(resolved_request(options)); }

ModelOptions blue_model_options(const ModelOptions& main) {
  ModelOptions o = main;
  o.checkpoint = main.checkpoint_blue;
  o.checkpoint_blue.clear();
  o.random_weights_arch.clear();
  o.model_screen = Screen::Blue;
  return o;
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const std::string& Model::key() const { return impl_->key; }
const ModelOptions& Model::options() const { return impl_->requested; }
const EngineSettings& Model::planned_for() const { return impl_->planned_for; }
const std::string& Model::device() const { return impl_->device; }
const std::string& Model::checkpoint() const { return impl_->description; }
const std::string& Model::arch() const { return impl_->arch; }
int64_t Model::img_size() const { return impl_->img_size; }
int64_t Model::parameters() const { return impl_->parameters; }
uint64_t Model::weight_bytes() const { return impl_->net->weight_bytes; }
const std::string& Model::notes() const { return impl_->notes; }
const TunePlan& Model::tune() const { return impl_->plan; }
bool Model::checkpoint_changed() const { return detail::checkpoint_changed(*impl_); }

std::shared_ptr<const Model> Model::load(const ModelOptions& options, const EngineSettings& plan_for) {
  validate_profile(Profile{options, plan_for}, "options");
  auto I = std::make_unique<Impl>();
  I->requested = options;
  I->planned_for = plan_for;
  const ModelOptions r = resolved_request(options);
  I->key = key_of(r);
  I->device = r.device;
  const torch::Device device(I->device);
  // Process-global switches, as the first engine always set them (threads before the plan's
  // trials and the load).
  if (options.track_host_memory) detail::install_cpu_memory_tracker();
  detail::set_host_block_cache(options.host_block_cache);
  detail::apply_global_switches(options, device.is_cuda(), I->notes);
  detail::rethrow_torch("loading the model", [&] {
    ModelOptions read = options;
    read.checkpoint = detail::checkpoint_to_read(options);
    auto l = detail::load_net(read, plan_for, device, I->notes);
    I->net = std::move(l.net);
    I->description = std::move(l.description);
    I->arch = std::move(l.arch);
    I->img_size = l.img_size;
    I->backbone_size = l.backbone_size;
    I->native_size = l.native_size;
    I->file = l.file.empty() ? l.file : std::filesystem::weakly_canonical(l.file).string();
    I->parameters = l.parameters;
    I->plan = std::move(l.plan);
    I->resolved = l.resolved;
    I->resolved_engine = l.resolved_engine;
  });
  if (!I->file.empty()) {
    std::error_code ec;
    I->file_bytes = std::filesystem::file_size(I->file, ec);
    I->file_time = std::filesystem::last_write_time(I->file, ec);
  }
  return std::shared_ptr<const Model>(new Model(std::move(I)));
}

CORRIDORKEY_NAMESPACE_END

namespace corridorkey::detail {

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
  ro.mmap = M.requested.mmap;
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

EngineOnModel engine_on(const Model& model, const EngineSettings& settings, std::string& notes) {
  const auto& M = model.impl();
  EngineOnModel out;
  out.plan = M.plan;
  EngineSettings run = settings;
  // The size is the engine's, resolved against the checkpoint's own as Model::load does.
  auto cfg = M.net->net->config();
  cfg.img_size = settings.img_size > 0 ? settings.img_size : M.native_size;
  cfg.backbone_size = 0;
  std::string rounded;
  try {
    cfg.validate();
    cfg.resolve_backbone(settings.backbone_size, settings.backbone_percent, &rounded);
    cfg.validate();
  } catch (const ConfigError& e) {
    throw ConfigError(M.description + ": " + e.what());
  }
  if (cfg.img_size == M.img_size && cfg.encoder_size() == M.backbone_size) {
    // The Model's size: its plan and its attention kernels. The engine's Linear, convolution
    // and tiling choices are the plan's where it asks what the Model was planned for; an
    // explicit other value is its own (and the report says so); auto, where the plan did
    // not decide it, is the flag rule (oneDNN and Winograd off, tiling by memory).
    const EngineSettings& asked = M.planned_for;
    const EngineSettings& decided = M.resolved_engine;
    if (run.tiled_refiner == asked.tiled_refiner) run.tiled_refiner = decided.tiled_refiner;
    for (auto [option, field] : {std::pair{TuneOption::OnednnLinear, &EngineSettings::onednn_linear},
                                 std::pair{TuneOption::WinogradConv, &EngineSettings::winograd_conv}}) {
      AutoSwitch& v = run.*field;
      if (v == asked.*field) v = decided.*field;
      const auto* d = out.plan.find(option);
      if (v == AutoSwitch::Auto) {
        v = d && d->on() ? AutoSwitch::On : AutoSwitch::Off;
      } else if (d && d->value != choice_of(v == AutoSwitch::On) && d->source != DecisionSource::Only) {
        for (auto& x : out.plan.decisions)  // "only": it cannot run here, whatever was asked
          if (x.option == option) x = {option, choice_of(v == AutoSwitch::On), DecisionSource::Flag, "", {}};
      }
    }
    out.settings = run;
    return out;
  }
  if (!rounded.empty()) note(notes, rounded);
  const auto& own = M.net->net->encoder->model->pos_embed;
  const int64_t grid = cfg.encoder_size() / cfg.encoder.patch_stride[0];
  EngineSize& s = out.size;
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
  // The plan at this size, for this engine: the weights' type is the Model's (one precision
  // per job, and the weights are cast already); the kernels per stage and the refiner's
  // choices are timed here (cached per size, as every plan). A Model on the flag rules
  // (tune off, no trials here) keeps them for its engines.
  s.native = M.net->native;
  if (M.plan.origin == PlanOrigin::Off) {
    if (run.onednn_linear == AutoSwitch::Auto) run.onednn_linear = AutoSwitch::Off;
    if (run.winograd_conv == AutoSwitch::Auto) run.winograd_conv = AutoSwitch::Off;
  } else {
    ModelOptions weights = M.requested;
    weights.model_precision = M.resolved.model_precision;
    rethrow_torch("timing the plan at img_size " + std::to_string(cfg.img_size), [&] {
      auto planned = make_plan(weights, settings, cfg, torch::Device(M.device), notes);
      out.plan = std::move(planned.plan);
      run = planned.engine;
      s.native = planned_native(planned.model, &out.plan);
    });
  }
  note(notes, "img_size " + std::to_string(s.img_size) +
                  (s.encoder_size != s.img_size ? " (backbone " + std::to_string(s.encoder_size) + ")" : "") +
                  " on a Model loaded at " + std::to_string(M.img_size) + ": this engine uses " + held +
                  "; every other weight, and the precision (" + to_string(M.resolved.model_precision) +
                  "), are the Model's");
  out.settings = run;
  return out;
}
}  // namespace corridorkey::detail
