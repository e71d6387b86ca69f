#include "runtime/model_runner.h"

#include <corridorkey/errors.h>
#include <corridorkey/system.h>

#include "config/log.h"
#include "runtime/memory.h"
#include "timing.h"
#include "attention_cpu.h"
#include "attention_f32_cpu.h"
#include "model/tiled_refiner.h"

#include <ATen/autocast_mode.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/cuda.h>
#ifdef CK_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <atomic>
#include <chrono>
#include <mutex>

namespace corridorkey::detail {
namespace {

using timing::Clock;
const auto ms = timing::ms_between;

torch::ScalarType to_dtype(Precision p) {
  switch (p) {
    case Precision::Float16: return torch::kHalf;
    case Precision::BFloat16: return torch::kBFloat16;
    default: return torch::kFloat;
  }
}

/// RAII autocast for one device type.
class AutocastScope {
 public:
  AutocastScope(bool on, c10::DeviceType dev, torch::ScalarType dt) : on_(on), dev_(dev) {
    if (!on_) return;
    prev_enabled_ = at::autocast::is_autocast_enabled(dev_);
    prev_dtype_ = at::autocast::get_autocast_dtype(dev_);
    at::autocast::set_autocast_enabled(dev_, true);
    at::autocast::set_autocast_dtype(dev_, dt);
  }
  ~AutocastScope() {
    if (!on_) return;
    at::autocast::set_autocast_enabled(dev_, prev_enabled_);
    at::autocast::set_autocast_dtype(dev_, prev_dtype_);
    at::autocast::clear_cache();
  }

 private:
  bool on_;
  c10::DeviceType dev_;
  bool prev_enabled_ = false;
  torch::ScalarType prev_dtype_ = torch::kFloat;
};

// LibTorch errors carry a multi-line C++ backtrace; a note keeps only the message itself.
std::string first_line(const char* what) {
  std::string s(what);
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s.substr(0, 300) : s.substr(0, std::min<size_t>(nl, 300));
}

}  // namespace

struct ModelRunner::Graph {
#ifdef CK_WITH_CUDA
  at::cuda::CUDAGraph graph;
  torch::Tensor in, alpha, fg;
#endif
};

struct ModelRunner::Aoti {
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
};

void check_finite_outputs(const ModelRun& run, const std::string& what) {
  CK_CHECK(torch::isfinite(run.alpha).all().item<bool>() && torch::isfinite(run.fg).all().item<bool>(),
           ModelError, what, ": the model produced non-finite alpha / fg (NaN or Inf): check the "
           "checkpoint, refiner_scale and the plate");
}

torch::ScalarType weight_dtype_for(const EngineOptions& o, const torch::Device& device) {
  if (o.mixed_precision) return torch::kFloat;
  return to_dtype(resolve_precision(o.model_precision, device.str()));
}

uint64_t refiner_whole_image_bytes(int64_t S, int64_t C, int64_t elem, bool fused) {
  const int64_t maps = fused ? 3 : 5;
  return static_cast<uint64_t>((maps * C + 7 + 4) * S * S * elem);
}

uint64_t refiner_budget_bytes(const EngineOptions& o, const torch::Device& device) {
  return o.refiner_memory_budget_mb > 0 ? static_cast<uint64_t>(o.refiner_memory_budget_mb) << 20
                                        : free_memory_bytes(device) / 2;
}

namespace {
/// The switches a prepared network carries besides its weights' type and layout.
void apply_switches(model::GreenFormerImpl& net, const EngineOptions& o,
                    const std::array<bool, 4>& native) {
  net.set_flash_attention(o.flash_attention);
  net.encoder->model->set_native_attention(native);
  net.encoder->model->set_token_chunk(o.token_chunk);
  net.set_fused_decoders(o.fused_decoder);
}

/// Folds the decoders now when they run fused, so forward() only reads shared weights.
void fold_decoders(model::GreenFormerImpl& net, const EngineOptions& o) {
  if (!o.fused_decoder) return;
  net.alpha_decoder->fold();
  net.fg_decoder->fold();
}

/// on_oom's precision step for one engine: a copy of the prepared network in `dtype`, with
/// the same layout and switches (the shared one stays as it is for the other engines).
model::GreenFormer half_copy(const PreparedNet& p, torch::ScalarType dtype) {
  torch::NoGradGuard ng;
  model::GreenFormer copy(p.net->config());
  auto src = p.net->named_parameters();
  for (auto& kv : copy->named_parameters()) kv.value().set_data(src[kv.key()].to(p.device, dtype));
  auto srcb = p.net->named_buffers();
  for (auto& kv : copy->named_buffers()) {
    const auto& b = srcb[kv.key()];
    kv.value().set_data(b.is_floating_point() ? b.to(p.device, dtype) : b.clone());
  }
  copy->eval();
  apply_switches(*copy, p.options, p.native);
  fold_decoders(*copy, p.options);
  return copy;
}

uint64_t stored_bytes(model::GreenFormerImpl& net) {
  uint64_t n = 0;
  for (const auto& p : net.parameters()) n += p.numel() * p.element_size();
  for (const auto& b : net.buffers()) n += b.numel() * b.element_size();
  return n;
}

/// A runner's own token router on the prepared router's weights (aliased: set_data shares
/// the storage), since routing writes per-frame index sets into the module.
model::TokenRouter own_router(const PreparedNet& p) {
  if (!p.router) return nullptr;
  const auto& o = p.options;
  model::RoutingOptions ro;
  ro.low = o.edge_threshold_low;
  ro.high = o.edge_threshold_high;
  ro.min_edge_tokens = o.min_edge_tokens;
  model::TokenRouter r(p.net->config().encoder, p.net->config().encoder_size(), ro);
  torch::NoGradGuard ng;
  auto src = p.router->named_parameters();
  for (auto& kv : r->named_parameters()) kv.value().set_data(src[kv.key()]);
  auto srcb = p.router->named_buffers();
  for (auto& kv : r->named_buffers()) kv.value().set_data(srcb[kv.key()]);
  r->eval();
  return r;
}
}  // namespace

std::shared_ptr<const PreparedNet> prepare_net(model::GreenFormer net, const EngineOptions& o,
                                               torch::Device device, std::string& notes,
                                               model::TokenRouter router, const TunePlan* plan) {
  auto p = std::make_shared<PreparedNet>();
  p->options = o;
  p->device = device;
  // Precision: mixed keeps fp32 weights and autocasts matmuls/convs to the half type the
  // profile names (fp16 by default on CUDA, bf16 on CPU); otherwise weights and
  // activations are cast to model_precision.
  const Precision prec = resolve_precision(o.model_precision, device.str());
  if (o.model_precision == Precision::Auto)
    note(notes, std::string("model_precision auto -> ") + to_string(prec) + " on " + device.str());
  if (o.mixed_precision) {
    p->autocast = true;
    p->autocast_dtype = prec != Precision::Float32 ? to_dtype(prec)
                        : device.is_cuda()         ? torch::kHalf
                                                   : torch::kBFloat16;
    p->weight_dtype = torch::kFloat;
  } else {
    p->weight_dtype = to_dtype(prec);
  }
  if (p->weight_dtype == torch::kHalf && device.is_cpu())
    note(notes, "model_precision float16 on CPU runs, but slowly (no native fp16 kernels on "
                "most CPUs); bfloat16 or float32 are faster there");
  net->to(device, p->weight_dtype);
  net->eval();
  if (router) {
    router->to(device, p->weight_dtype);
    router->eval();
  }
  // Native attention: on where asked, or per global stage where the plan timed it faster.
  auto stage_native = [&](const char* option) {
    if (o.native_attention == AutoSwitch::On) return true;
    if (o.native_attention == AutoSwitch::Off || !plan) return false;
    const auto* d = plan->find(option);
    return d && d->value == "true";
  };
  for (size_t i = 0; i < p->native.size(); ++i)
    p->native[i] = o.flash_attention && stage_native(("native_attention.stage" + std::to_string(i + 1)).c_str());
  apply_switches(*net, o, p->native);
  if (o.channels_last) net->to_channels_last();
  fold_decoders(*net, o);
  p->weight_bytes = stored_bytes(*net);
  p->net = std::move(net);
  p->router = std::move(router);
  return p;
}

ModelRunner::ModelRunner(model::GreenFormer net, const EngineOptions& o, torch::Device device,
                         std::string& notes, model::TokenRouter router, const TunePlan* plan)
    : ModelRunner(prepare_net(std::move(net), o, device, notes, std::move(router), plan), o, notes) {}

ModelRunner::ModelRunner(std::shared_ptr<const PreparedNet> shared, const EngineOptions& o,
                         std::string& notes)
    : shared_(std::move(shared)), net_(shared_->net), router_(own_router(*shared_)), opt_(o),
      device_(shared_->device), weight_dtype_(shared_->weight_dtype), autocast_(shared_->autocast),
      autocast_dtype_(shared_->autocast_dtype), native_(shared_->native) {
  const auto device = device_;
  choose_refiner(notes);

  // Compile modes.
  auto exec_plan = plan_execution(o, device.is_cuda(), static_cast<bool>(router_),
                                  net_->config().encoder_size() != net_->config().img_size);
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

ExecPlan plan_execution(const EngineOptions& o, bool cuda, bool routing, bool decoupled) {
  ExecPlan p;
  const std::string mode = to_string(o.compile_mode);
  switch (o.compile_mode) {
    case CompileMode::None: break;
    case CompileMode::ReduceOverhead:
      if (!cuda)
        p.notes.push_back("compile_mode reduce-overhead uses CUDA graphs, which need a CUDA "
                          "device; running eager");
      else if (routing)
        p.notes.push_back("compile_mode reduce-overhead: token routing plans every frame from its "
                          "hint, which a CUDA graph cannot capture; running eager");
      else
        p.kind = ExecKind::CudaGraph;
      break;
    case CompileMode::Default:
    case CompileMode::MaxAutotune:
      if (routing) {
        p.notes.push_back("compile_mode " + mode + ": token routing plans every frame from its hint, "
                          "which neither a CUDA graph nor an AOTInductor package holds; running eager");
      } else if (!o.aoti_package.empty() && !decoupled) {
        p.kind = ExecKind::Aoti;
      } else {
        // A package is one forward compiled elsewhere at one size: with the backbone
        // decoupled it is not trusted to hold the resize, so the native forward runs.
        const std::string why = o.aoti_package.empty()
                                    ? "no AOTInductor package given (aoti_package)"
                                    : "an AOTInductor package holds one forward at one size, "
                                      "not this backbone_size";
        if (cuda) p.kind = ExecKind::CudaGraph;
        p.notes.push_back("compile_mode " + mode + ": " + why +
                          (cuda ? "; using CUDA graphs" : o.aoti_package.empty()
                                                              ? " and no CUDA graphs without CUDA; running eager"
                                                              : "; running eager"));
      }
      break;
  }
  return p;
}

namespace {
std::atomic<int> g_injected_oom{0};

bool is_out_of_memory(const c10::Error& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  const std::string m = e.what_without_backtrace();
  // CPU allocation failures arrive as plain c10::Error.
  return m.find("out of memory") != std::string::npos ||
         m.find("can't allocate memory") != std::string::npos ||
         m.find("not enough memory") != std::string::npos;
}
}  // namespace

void inject_out_of_memory(int n) { g_injected_oom = n; }

ModelRunner::~ModelRunner() = default;

std::string ModelRunner::attention_kind() const {
  if (!opt_.flash_attention) return "5-D SDPA (math kernel)";
  const auto dt = autocast_ ? autocast_dtype_ : weight_dtype_;
  // Which stages the engine's kernel runs: bf16 global stages (3, 4) with AVX-512 BF16,
  // float32 stages with AVX2 + FMA; SDPA everywhere else.
  std::string kernel;
  std::array<bool, 4> on{};
  if (device_.is_cpu() && dt == torch::kBFloat16 && kernels::native_attention_available()) {
    kernel = "native bf16 kernel";
    on = {false, false, native_[2], native_[3]};
  } else if (device_.is_cpu() && dt == torch::kFloat && !autocast_ && kernels::native_attention_f32_available()) {
    kernel = "native fp32 kernel";
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
  if (tiled_) return "tiled " + std::to_string(opt_.tile_size) + " px";
  return opt_.fused_refiner ? "whole image, fused GroupNorm" : "whole image";
}

void ModelRunner::choose_refiner(std::string& notes) {
  const int64_t S = net_->config().img_size, C = net_->config().refiner_channels;
  const int64_t elem = torch::elementSize(autocast_ ? autocast_dtype_ : weight_dtype_);
  whole_image_bytes_ = refiner_whole_image_bytes(S, C, elem, opt_.fused_refiner);
  switch (opt_.tiled_refiner) {
    case RefinerTiling::On: tiled_ = true; break;
    case RefinerTiling::Off: tiled_ = false; break;
    case RefinerTiling::Auto: {
      const uint64_t budget = refiner_budget_bytes(opt_, device_);
      tiled_ = whole_image_bytes_ > budget;
      note(notes, "refiner: whole image needs " + std::to_string(whole_image_bytes_ >> 20) +
                      " MiB, budget " + std::to_string(budget >> 20) + " MiB -> " +
                      (tiled_ ? "tiled (" + std::to_string(opt_.tile_size) + " px tiles)" : "whole image"));
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

std::string ModelRunner::effective_compile_mode() const {
  switch (exec_) {
    case ExecKind::CudaGraph: return "cuda-graph";
    case ExecKind::Aoti: return "aoti";
    default: return "eager";
  }
}

ModelRun ModelRunner::eager(const torch::Tensor& x_in, bool timed) {
  c10::InferenceMode guard;
  AutocastScope ac(autocast_, device_.type(), autocast_dtype_);
  const auto x = autocast_ ? x_in : x_in.to(weight_dtype_);
  const bool sync = timed && device_.is_cuda();
  auto t0 = Clock::now(), last = t0;
  ModelRun out;
  model::ForwardOptions fo;
  fo.keep_intermediates = false;  // free features/logits as soon as consumed
  fo.refiner_scale = opt_.refiner_scale;
  fo.channels_last = opt_.channels_last;
  if (tiled_) {
    const int64_t tile = opt_.tile_size;
    fo.refiner_override = [this, tile](const torch::Tensor& in) {
      return model::tiled_refiner_forward(*net_->refiner, in, {tile});
    };
  } else if (opt_.fused_refiner) {
    fo.refiner_override = [this](const torch::Tensor& in) { return net_->refiner->forward_fused(in); };
  }
  const bool clear = opt_.cache_clearing && exec_ != ExecKind::CudaGraph;
  const uint64_t base = timed ? live_bytes(device_) : 0;
  if (timed) interval_peak(device_, base);
  fo.on_stage = [&](const char* stage) {
    if (sync) torch::cuda::synchronize();
    const auto now = Clock::now();
    const std::string s(stage);
    const uint64_t peak = interval_peak(device_, base);
    if (s == "encoder") {
      out.timings.encoder_ms = ms(last, now);
      out.encoder_peak = peak;
    } else if (s == "decoders") {
      out.timings.decoders_ms = ms(last, now);
      out.decoders_peak = peak;
    } else {
      out.timings.refiner_ms = ms(last, now);
      out.refiner_peak = peak;
    }
    if (clear) empty_device_cache(device_);
    last = Clock::now();
  };
  if (!timed) fo.on_stage = nullptr;
  if (router_) {
    router_->plan(x);  // index sets once per frame and stage, before the encoder runs
    fo.encoder_block_hook = [this](size_t i, model::HieraBlockImpl& blk, const torch::Tensor& t) {
      return router_->run_block(i, blk, t);
    };
    out.routed_stage2 = router_->route(2).fraction;
    out.routed_stage3 = router_->route(3).fraction;
  }
  auto r = net_->forward(x, fo);
  out.alpha = r.alpha.to(torch::kFloat);
  out.fg = r.fg.to(torch::kFloat);
  if (sync) torch::cuda::synchronize();
  out.timings.infer_ms = ms(t0, Clock::now());
  return out;
}

ModelRun ModelRunner::run(const torch::Tensor& x) {
  std::vector<std::string> warnings;
  for (;;) {
    try {
      if (g_injected_oom > 0) {
        --g_injected_oom;
        TORCH_CHECK_WITH(OutOfMemoryError, false, "injected: out of memory (test hook)");
      }
      auto r = run_once(x);
      r.warnings = std::move(warnings);
      return r;
    } catch (const c10::Error& e) {
      if (!is_out_of_memory(e)) throw;
      const std::string step = opt_.on_oom == OnOom::Degrade ? degrade() : "";
      if (step.empty())
        throw ModelError(std::string("out of memory at img_size ") +
                         std::to_string(net_->config().img_size) + " on " + device_.str() +
                         (opt_.on_oom == OnOom::Degrade ? " even after degrading" : "") + ": " +
                         e.what_without_backtrace() +
                         " (lower --img-size, or --on-oom degrade / --tiled-refiner / a half precision)");
      warnings.push_back("out of memory at img_size " + std::to_string(net_->config().img_size) +
                         ": " + step + "; retrying this frame (it stays that way for the run)");
      empty_device_cache(device_);
    }
  }
}

std::string ModelRunner::degrade() {
  if (degraded_ == 0) {
    ++degraded_;
    std::string what;
    if (!tiled_) what = "refiner tiled (" + std::to_string(opt_.tile_size) + " px)";
    if (!opt_.cache_clearing) what += std::string(what.empty() ? "" : " and ") + "cache clearing on";
    tiled_ = true;
    opt_.cache_clearing = true;
    if (exec_ == ExecKind::CudaGraph) {  // a graph holds its whole memory pool
      graph_.reset();
      exec_ = ExecKind::Eager;
      what += std::string(what.empty() ? "" : ", ") + "CUDA graph dropped";
    }
    if (!what.empty()) return what;
  }
  if (degraded_ == 1) {
    ++degraded_;
    const bool half = weight_dtype_ != torch::kFloat || autocast_;
    if (!half) {
      weight_dtype_ = device_.is_cuda() || device_.is_mps() ? torch::kHalf : torch::kBFloat16;
      // Other engines may be running the shared weights: this engine casts its own copy.
      net_ = half_copy(*shared_, weight_dtype_);
      if (router_) router_->to(weight_dtype_);
      return std::string("model precision float32 -> ") +
             (weight_dtype_ == torch::kHalf ? "float16" : "bfloat16");
    }
  }
  return "";
}

ModelRun ModelRunner::run_once(const torch::Tensor& x) {
  switch (exec_) {
    case ExecKind::Eager: return eager(x, true);
    case ExecKind::Aoti: {
      c10::InferenceMode guard;
      const auto t0 = Clock::now();
      auto outs = aoti_->loader->run({x.to(weight_dtype_)});
      CK_CHECK(outs.size() >= 2, ModelError, opt_.aoti_package,
               ": AOTInductor package must return (..., alpha, fg)");
      ModelRun r;
      r.alpha = outs[outs.size() - 2].to(torch::kFloat);
      r.fg = outs.back().to(torch::kFloat);
      r.timings.infer_ms = ms(t0, Clock::now());
      return r;
    }
    case ExecKind::CudaGraph: return run_graph(x);
  }
  return eager(x, true);
}

ModelRun ModelRunner::run_graph(const torch::Tensor& x) {
#ifdef CK_WITH_CUDA
  if (!graph_) {
    // Capture once at the fixed input size (warm-up on the capture stream first so lazy
    // initialisation and cuDNN algorithm choice happen outside the graph). A capture that
    // fails (an op that syncs with the host, an allocator that cannot graph) falls back to
    // eager for the rest of the run, with one warning: the same network, just not replayed.
    auto g = std::make_unique<Graph>();
    g->in = torch::zeros_like(x);
    auto stream = c10::cuda::getStreamFromPool();
    bool capturing = false;
    try {
      {
        c10::cuda::CUDAStreamGuard sg(stream);
        for (int i = 0; i < 2; ++i) eager(g->in, false);
      }
      torch::cuda::synchronize();
      c10::cuda::CUDAStreamGuard sg(stream);
      g->graph.capture_begin();
      capturing = true;
      auto r = eager(g->in, false);
      g->graph.capture_end();
      capturing = false;
      g->alpha = r.alpha;
      g->fg = r.fg;
      torch::cuda::synchronize();
      graph_ = std::move(g);
    } catch (const c10::Error& e) {
      if (capturing) {
        try {
          g->graph.capture_end();
        } catch (...) {
        }
      }
      if (is_out_of_memory(e)) throw;  // the on_oom policy decides
      exec_ = ExecKind::Eager;
      auto r = eager(x, true);
      r.warnings.push_back(std::string("CUDA graph capture failed (") +
                           std::string(e.what_without_backtrace()).substr(0, 200) +
                           "); running eager from now on");
      return r;
    }
  }
  const auto t0 = Clock::now();
  graph_->in.copy_(x);
  graph_->graph.replay();
  ModelRun r;
  r.alpha = graph_->alpha.clone();
  r.fg = graph_->fg.clone();
  torch::cuda::synchronize();
  r.timings.infer_ms = ms(t0, Clock::now());
  return r;
#else
  (void)x;
  throw ModelError("CUDA graphs requested in a build without CUDA");
#endif
}

}  // namespace corridorkey::detail
