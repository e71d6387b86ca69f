// Execution strategies: eager (per-stage timings and peaks, autocast, tiled / fused
// refiner, token routing), CUDA graph capture and replay, and an AOTInductor package; the
// pure rule that picks one (plan_execution).
#include "runtime/model_runner.h"

#include <corridorkey/check.h>

#include "model/conv.h"
#include "model/functional.h"
#include "model/tiled_refiner.h"
#include "runtime/memory.h"
#include "runtime/runner_internals.h"
#include "timing.h"

#include <ATen/autocast_mode.h>
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>
#ifdef CK_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <chrono>

namespace corridorkey::detail {
namespace {

using timing::Clock;
const auto ms = timing::ms_between;

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

}  // namespace

ExecPlan plan_execution(const EngineSettings& o, bool cuda, bool routing, bool decoupled) {
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
  fo.refiner_scale = settings_.refiner_scale;
  fo.channels_last = shared_->options.channels_last;
  fo.img_size = size_.img_size;  // 0 unless this engine runs at another size than the network
  fo.encoder_size = size_.encoder_size;
  fo.pos_embed = size_.pos_embed;
  if (tiled_) {
    const int64_t tile = settings_.tile_size;
    fo.refiner_override = [this, tile](const torch::Tensor& in) {
      return model::tiled_refiner_forward(*net_->refiner, in, {tile});
    };
  } else if (settings_.fused_refiner) {
    fo.refiner_override = [this](const torch::Tensor& in) { return net_->refiner->forward_fused(in); };
  }
  const bool clear = settings_.cache_clearing && exec_ != ExecKind::CudaGraph;
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
  // An engine at its own size runs the kernels timed at that size, not the shared flags.
  model::NativeAttentionScope kernels(size_.img_size > 0 ? &native_ : nullptr);
  // float32 Linear layers through oneDNN where asked or the plan timed it faster; never
  // under autocast (the op has no autocast kernel: it would run the matmuls in float32).
  model::functional::OnednnLinearScope linear(settings_.onednn_linear == AutoSwitch::On && !autocast_ &&
                                              weight_dtype_ == torch::kFloat);
  // The refiner's float32 convolutions by Winograd where asked or the plan timed it faster.
  model::functional::WinogradConvScope winograd(winograd_active());
  auto r = net_->forward(x, fo);
  out.alpha = r.alpha.to(torch::kFloat);
  out.fg = r.fg.to(torch::kFloat);
  if (sync) torch::cuda::synchronize();
  out.timings.infer_ms = ms(t0, Clock::now());
  return out;
}

ModelRun ModelRunner::run_once(const torch::Tensor& x) {
  switch (exec_) {
    case ExecKind::Eager: return eager(x, true);
    case ExecKind::Aoti: {
      c10::InferenceMode guard;
      const auto t0 = Clock::now();
      auto outs = aoti_->loader->run({x.to(weight_dtype_)});
      CK_CHECK(outs.size() >= 2, ModelError, settings_.aoti_package,
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
