// The model runner: one engine's way of running a prepared network. This file holds the
// runner itself (construction, refiner mode, what it reports); precision_layout.cpp the
// weights' preparation, oom_policy.cpp the on_oom policy, execution.cpp eager / CUDA graph /
// AOTInductor execution.
#include "runtime/model_runner.h"

#include <corridorkey/check.h>

#include "config/log.h"
#include "runtime/memory.h"
#include "runtime/runner_internals.h"
#include "attention_cpu.h"
#include "attention_f32_cpu.h"
#include "model/conv.h"

namespace corridorkey::detail {

// LibTorch errors carry a multi-line C++ backtrace; a note keeps only the message itself.
std::string first_line(const char* what) {
  std::string s(what);
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s.substr(0, 300) : s.substr(0, std::min<size_t>(nl, 300));
}

void check_finite_outputs(const ModelRun& run, const std::string& what) {
  CK_CHECK(torch::isfinite(run.alpha).all().item<bool>() && torch::isfinite(run.fg).all().item<bool>(),
           ModelError, what, ": the model produced non-finite alpha / fg (NaN or Inf): check the "
           "checkpoint, refiner_scale and the plate");
}

uint64_t refiner_whole_image_bytes(int64_t S, int64_t C, int64_t elem, bool fused) {
  const int64_t maps = fused ? 3 : 5;
  return static_cast<uint64_t>((maps * C + 7 + 4) * S * S * elem);
}

uint64_t refiner_budget_bytes(const EngineSettings& o, const torch::Device& device) {
  return o.refiner_memory_budget_mb > 0 ? static_cast<uint64_t>(o.refiner_memory_budget_mb) << 20
                                        : free_memory_bytes(device) / 2;
}

ModelRunner::ModelRunner(model::GreenFormer net, const ModelOptions& m, const EngineSettings& o,
                         torch::Device device, std::string& notes, model::TokenRouter router,
                         const TunePlan* plan)
    : ModelRunner(prepare_net(std::move(net), m, device, notes, std::move(router), plan), o, notes) {}

ModelRunner::ModelRunner(std::shared_ptr<const PreparedNet> shared, const EngineSettings& o,
                         std::string& notes, EngineSize size)
    : shared_(std::move(shared)), net_(shared_->net), settings_(o), device_(shared_->device),
      weight_dtype_(shared_->weight_dtype), autocast_(shared_->autocast),
      autocast_dtype_(shared_->autocast_dtype), native_(shared_->native), size_(std::move(size)) {
  const auto device = device_;
  const bool own_size = size_.img_size > 0;
  if (own_size) native_ = size_.native;
  img_size_ = own_size ? size_.img_size : net_->config().img_size;
  encoder_size_ = own_size ? (size_.encoder_size > 0 ? size_.encoder_size : img_size_)
                           : net_->config().encoder_size();
  router_ = own_router(*shared_, encoder_size_);
  choose_refiner(notes);

  // Compile modes.
  auto exec_plan = plan_execution(o, device.is_cuda(), static_cast<bool>(router_),
                                  encoder_size_ != img_size_);
  exec_ = exec_plan.kind;
  for (const auto& n : exec_plan.notes) note(notes, n);
  if (exec_ == ExecKind::CudaGraph && o.cache_clearing)
    note(notes, "cache_clearing is skipped inside CUDA graph replay (the graph's memory pool is "
                "fixed at capture)");
  if (exec_ == ExecKind::Aoti) {
    aoti_ = std::make_unique<Aoti>();
    try {
      aoti_->loader = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
          o.aoti_package, "model", false, 1, device.is_cuda() ? device.index() : -1);
    } catch (const std::exception& e) {
      // A package built for another size, device or LibTorch must not stop the job: the
      // same network runs eager.
      aoti_.reset();
      exec_ = ExecKind::Eager;
      note(notes, o.aoti_package + ": AOTInductor package cannot be loaded (" +
                      first_line(e.what()) + "); running eager");
    }
  }
}

ModelRunner::~ModelRunner() = default;

std::string ModelRunner::attention_kind() const {
  if (!shared_->options.flash_attention) return "5-D SDPA (math kernel)";
  const auto dt = autocast_ ? autocast_dtype_ : weight_dtype_;
  // Which stages the engine's kernel runs: bf16 global stages (3, 4) with AVX-512 BF16,
  // float32 stages with AVX2 + FMA; SDPA everywhere else.
  std::string kernel;
  std::array<bool, 4> on{};
  if (device_.is_cpu() && dt == torch::kBFloat16 && kernels::native_attention_available()) {
    kernel = "native bf16 kernel";
    on = {false, false, native_[2], native_[3]};
  } else if (device_.is_cpu() && dt == torch::kFloat && !autocast_ && kernels::native_attention_f32_available()) {
    const auto isa = kernels::native_attention_f32_isa();
    kernel = "native fp32 kernel (" + isa.substr(0, isa.find(' ')) + ")";
    on = native_;
  }
  std::string stages;
  for (size_t i = 0; i < on.size(); ++i)
    if (on[i]) stages += (stages.empty() ? "" : ",") + std::to_string(i + 1);
  if (stages.empty()) return "4-D SDPA";
  if (stages == "1,2,3,4") return kernel + " in every stage";
  return kernel + " in stage " + stages + ", SDPA elsewhere";
}

std::string ModelRunner::refiner_kind() const {
  const std::string conv = winograd_active() ? ", Winograd convolutions" : "";
  if (tiled_) return "tiled " + std::to_string(settings_.tile_size) + " px" + conv;
  return (settings_.fused_refiner ? "whole image, fused GroupNorm" : "whole image") + conv;
}

bool ModelRunner::winograd_active() const {
  return settings_.winograd_conv == AutoSwitch::On && weight_dtype_ == torch::kFloat && !autocast_ &&
         device_.is_cpu() &&
         !model::functional::winograd_refiner_unavailable(shared_->options.channels_last, net_->config().refiner_channels);
}

void ModelRunner::choose_refiner(std::string& notes) {
  const int64_t S = img_size_, C = net_->config().refiner_channels;
  const int64_t elem = torch::elementSize(autocast_ ? autocast_dtype_ : weight_dtype_);
  whole_image_bytes_ = refiner_whole_image_bytes(S, C, elem, settings_.fused_refiner);
  switch (settings_.tiled_refiner) {
    case RefinerTiling::On: tiled_ = true; break;
    case RefinerTiling::Off: tiled_ = false; break;
    case RefinerTiling::Auto: {
      const uint64_t budget = refiner_budget_bytes(settings_, device_);
      tiled_ = whole_image_bytes_ > budget;
      note(notes, "refiner: whole image needs " + std::to_string(whole_image_bytes_ >> 20) +
                      " MiB, budget " + std::to_string(budget >> 20) + " MiB -> " +
                      (tiled_ ? "tiled (" + std::to_string(settings_.tile_size) + " px tiles)" : "whole image"));
      break;
    }
  }
}

std::string ModelRunner::precision() const {
  auto name = [](torch::ScalarType t) {
    return t == torch::kHalf ? "float16" : t == torch::kBFloat16 ? "bfloat16" : "float32";
  };
  return autocast_ ? std::string("mixed/") + name(autocast_dtype_) : name(weight_dtype_);
}

}  // namespace corridorkey::detail
