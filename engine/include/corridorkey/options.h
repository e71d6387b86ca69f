// EngineOptions: one typed struct for every profile field, the device, the checkpoint, the
// model size and the post-processing knobs. Profiles (profiles/*.yaml) parse into it and
// command-line flags override its fields (see profile.h).
#pragma once

#include <corridorkey/version.h>

#include <cstdint>
#include <string>

CORRIDORKEY_NAMESPACE_BEGIN

enum class Precision { Float32, Float16, BFloat16 };
enum class CompileMode { None, Default, ReduceOverhead, MaxAutotune };

const char* to_string(Precision p);    // "float32" | "float16" | "bfloat16"
const char* to_string(CompileMode m);  // "none" | "default" | "reduce-overhead" | "max-autotune"

struct EngineOptions {
  // ---- optimization profile fields (profiles/*.yaml) ----
  /// Global-attention blocks run SDPA on contiguous 4-D q/k/v (flash / memory-efficient
  /// kernels) instead of the 5-D math path that materialises N x N scores. fp32 effect
  /// <= 1e-5 on alpha/fg (tests/test_engine.cpp).
  bool flash_attention = false;
  /// Decoder heads without the 1024-channel concatenation (linear_fuse folded into the
  /// per-scale projections, 256 channels resized per scale): ~4x less decoder memory,
  /// fp32 effect <= 1e-5 on alpha/fg.
  bool fused_decoder = false;
  /// Exact tiled refiner: image-global GroupNorm statistics, tile-sized working memory.
  bool tiled_refiner = false;
  int64_t tile_size = 512;      // tile side in pixels (multiple of 8)
  int64_t tile_overlap = 128;   // halo budget per side: must cover the 16 px a layer reads
  /// Process-global: cudnn.benchmark = !disable_cudnn_benchmark (set once per process).
  bool disable_cudnn_benchmark = false;
  /// Release the caching allocator's free blocks between encoder, decoders and refiner.
  bool cache_clearing = false;
  CompileMode compile_mode = CompileMode::None;
  Precision model_precision = Precision::Float32;
  /// Autocast: weights stay float32, matmuls/convs run in model_precision's half type.
  bool mixed_precision = false;
  /// Process-global TF32 for float32 matmuls / convolutions on Ampere+ GPUs.
  bool tf32 = false;
  int64_t dma_buffers = 3;      // pinned host buffers for device->host copies (2..8)
  bool token_routing = false;
  double edge_threshold_low = 0.02;
  double edge_threshold_high = 0.98;
  int64_t min_edge_tokens = 64;

  // ---- model and device ----
  std::string checkpoint;       // TorchScript archive or CorridorKey .pth
  /// With an empty checkpoint: build this architecture with seeded random weights
  /// ("hiera_base_plus" or "tiny"); for benchmarks and tests only.
  std::string random_weights_arch;
  uint64_t random_weights_seed = 0;
  int64_t img_size = 0;         // model resolution S; 0 = the checkpoint's own
  std::string device = "auto";  // auto | cpu | cuda | cuda:N | mps
  /// compile_mode default / max-autotune: an AOTInductor package (.pt2) compiled for this
  /// checkpoint and img_size; empty -> CUDA graphs on CUDA, eager elsewhere (logged).
  std::string aoti_package;

  // ---- pre / post-processing ----
  bool input_is_linear = false; // plate is scene-linear (EXR): convert to sRGB after resize
  double despill_strength = 0.5; // 0..1 (CLI --despill takes 0..10)
  bool despeckle = true;
  int64_t despeckle_size = 400;  // minimum connected-component area kept (pixels)
  double refiner_scale = 1.0;

  /// Count LibTorch's CPU allocations to report host_peak_allocated / per-stage peaks.
  /// Installs a counting allocator for the whole process (a mutex per allocation), so it
  /// is off unless asked for; `bench` turns it on. RSS-based peaks are always reported.
  bool track_host_memory = false;

  /// Name of the profile these options came from ("custom" when built by hand).
  std::string profile = "custom";
};

CORRIDORKEY_NAMESPACE_END
