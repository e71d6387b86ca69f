#include "devtools/roofline.h"

#include <corridorkey/system.h>
#include <corridorkey/version.h>

#include "runtime/tune_cache.h"
#include "timing.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>

namespace corridorkey::devtools {
namespace {

constexpr int64_t kGemmSide = 2048;

torch::ScalarType dtype_named(const std::string& precision) {
  if (precision.find("bfloat16") != std::string::npos) return torch::kBFloat16;
  if (precision.find("float16") != std::string::npos) return torch::kHalf;
  return torch::kFloat;
}

}  // namespace

GemmRate gemm_rate(const std::string& device, const std::string& precision, const std::string& cache,
                   std::string& note) {
  const torch::Device dev(device);
  const auto dtype = dtype_named(precision);
  GemmRate r;
  r.precision = dtype == torch::kBFloat16 ? "bfloat16" : dtype == torch::kHalf ? "float16" : "float32";
  r.cache = cache;
  // What the rate depends on, as a plan key does: the engine, LibTorch, the machine, threads.
  const std::string key = "gemm rate 1; engine " CORRIDORKEY_VERSION_STRING "; torch " TORCH_VERSION "; " +
                          (dev.is_cpu() ? cpu_features().identity() : dev.str()) + "; threads " +
                          std::to_string(at::get_num_threads()) + "; " + r.precision + "; " +
                          std::to_string(kGemmSide) + "^3";
  if (const auto cached = detail::tune_cache_load_rate(cache, key)) {
    r.gflops = *cached;
    r.cached = true;
    return r;
  }
  c10::InferenceMode guard;
  const auto t_all = timing::Clock::now();
  auto opts = torch::TensorOptions().dtype(dtype).device(dev);
  const auto a = torch::rand({kGemmSide, kGemmSide}, opts), b = torch::rand({kGemmSide, kGemmSide}, opts);
  auto run = [&] {
    const auto t0 = timing::Clock::now();
    auto c = torch::mm(a, b);
    if (dev.is_cuda()) torch::cuda::synchronize();
    return timing::ms_since(t0);
  };
  run();  // warm-up: the thread pool, the GEMM's packing buffers
  double best = run();
  for (int i = 0; i < 2; ++i) best = std::min(best, run());
  r.gflops = 2.0 * kGemmSide * kGemmSide * kGemmSide / (best * 1e6);
  r.trial_ms = timing::ms_since(t_all);
  if (const auto why = detail::tune_cache_store_rate(cache, key, r.gflops); !why.empty())
    note = "roofline: the GEMM rate is not cached (" + why + "); it is timed again next run";
  return r;
}

std::vector<RooflineStage> roofline_stages(const model::FrameFlops& f, const StageTimings& m, double total_ms,
                                           double rate, const model::EncoderPartTimes* parts,
                                           double parts_encoder_ms) {
  auto stage = [&](const char* name, double flops, double ms) {
    RooflineStage s;
    s.stage = name;
    s.gflop = flops / 1e9;
    s.ms = ms;
    s.gflops = ms > 0 ? s.gflop / (ms / 1000) : 0;
    s.of_gemm = rate > 0 ? s.gflops / rate : 0;
    return s;
  };
  std::vector<RooflineStage> out{stage("encoder", f.encoder(), m.encoder_ms)};
  if (parts) {
    auto part = [&](const char* name, double flops, double ms, double scores) {
      auto s = stage(name, flops, ms);
      s.part_of = "encoder";
      s.exp_g = scores / 1e9;
      out.push_back(s);
    };
    part("global attention", f.global_attention, parts->global_attention_ms, f.global_scores);
    part("windowed attention", f.windowed_attention, parts->windowed_attention_ms, f.windowed_scores);
    part("linear", f.encoder_linear(), parts->linear_ms, 0);
    const double timed = parts->global_attention_ms + parts->windowed_attention_ms + parts->linear_ms;
    part("other", 0, std::max(0.0, parts_encoder_ms - timed), 0);
  }
  for (auto s : {stage("decoders", f.decoders, m.decoders_ms), stage("refiner", f.refiner, m.refiner_ms),
                 stage("total", f.total(), total_ms)})
    out.push_back(s);
  return out;
}

}  // namespace corridorkey::devtools
