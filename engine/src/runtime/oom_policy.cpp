// The OOM fallback policy (on_oom): retry a frame after each degrade step (tiled refiner
// and cache clearing, then a half precision), or fail with a ModelError that says what to
// lower. Tests inject out-of-memory errors through runtime/test_hooks.h.
#include "runtime/model_runner.h"

#include <corridorkey/errors.h>

#include "runtime/memory.h"
#include "runtime/runner_internals.h"
#include "runtime/test_hooks.h"

namespace corridorkey::detail {

bool is_out_of_memory(const c10::Error& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  const std::string m = e.what_without_backtrace();
  // CPU allocation failures arrive as plain c10::Error.
  return m.find("out of memory") != std::string::npos ||
         m.find("can't allocate memory") != std::string::npos ||
         m.find("not enough memory") != std::string::npos;
}

ModelRun ModelRunner::run(const torch::Tensor& x) {
  std::vector<std::string> warnings;
  for (;;) {
    try {
      if (hooks::take_out_of_memory())
        TORCH_CHECK_WITH(OutOfMemoryError, false, "injected: out of memory (test hook)");
      auto r = run_once(x);
      r.warnings = std::move(warnings);
      return r;
    } catch (const c10::Error& e) {
      if (!is_out_of_memory(e)) throw;
      const std::string step = settings_.on_oom == OnOom::Degrade ? degrade() : "";
      if (step.empty())
        throw ModelError(std::string("out of memory at img_size ") +
                         std::to_string(img_size_) + " on " + device_.str() +
                         (settings_.on_oom == OnOom::Degrade ? " even after degrading" : "") + ": " +
                         e.what_without_backtrace() +
                         " (lower --img-size, or --on-oom degrade / --tiled-refiner / a half precision)");
      warnings.push_back("out of memory at img_size " + std::to_string(img_size_) +
                         ": " + step + "; retrying this frame (it stays that way for the run)");
      empty_device_cache(device_);
    }
  }
}

std::string ModelRunner::degrade() {
  if (degraded_ == 0) {
    ++degraded_;
    std::string what;
    if (!tiled_) what = "refiner tiled (" + std::to_string(settings_.tile_size) + " px)";
    if (!settings_.cache_clearing) what += std::string(what.empty() ? "" : " and ") + "cache clearing on";
    tiled_ = true;
    settings_.cache_clearing = true;
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
      if (size_.pos_embed.defined()) size_.pos_embed = size_.pos_embed.to(weight_dtype_);
      return std::string("model precision float32 -> ") +
             (weight_dtype_ == torch::kHalf ? "float16" : "bfloat16");
    }
  }
  return "";
}

}  // namespace corridorkey::detail
