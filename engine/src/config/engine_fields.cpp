// The Profile table (both halves, each row bound to the half that declares its field): every profile field (profiles/*.yaml, `overrides:` in jobs,
// one flag each) and every run field (checkpoint, device, size, post-processing knobs).
#include "config/engine_fields.h"

#include <cctype>

namespace corridorkey::config {
namespace {

using O = Profile;
using M = ModelOptions;
using E = EngineSettings;
constexpr auto P = OptionScope::Profile;
constexpr auto R = OptionScope::Run;

/// false / true / auto and their accepted spellings, for the fields whose enum has Off, On
/// and Auto (native_attention, tiled_refiner): the first of each is the one printed.
template <class E>
std::vector<std::pair<std::string, E>> tri_state_names() {
  return {{"false", E::Off}, {"true", E::On}, {"auto", E::Auto}, {"off", E::Off},
          {"on", E::On},     {"no", E::Off},  {"yes", E::On}};
}

/// backbone_size: pixels, or a percentage of img_size ("50%"), which a profile needs since
/// img_size is a run field (0 = the checkpoint's own).
Field<O> backbone_row() {
  Field<O> f;
  f.info = {"backbone_size", P,
            "size the encoder and decoders run at (0 = img_size), in pixels or as a percentage "
            "of img_size (50%); the refiner and outputs stay at img_size. Unlike refiner_scale "
            "(how strongly the refiner corrects), this trades matte detail for speed",
            "0, a size in pixels (32..16384) or a percentage 1%..100%", "", false, {}, {}, OptionKind::Size,
            OptionOwner::Engine};
  f.parse = [](O& o, const std::string& v) {
    long long x = 0;
    if (!v.empty() && v.back() == '%') {
      if (!parse_int(v.substr(0, v.size() - 1), x) || x < 1 || x > 100) return false;
      o.engine.backbone_size = 0;
      o.engine.backbone_percent = static_cast<int>(x);
      return true;
    }
    if (!parse_int(v, x) || x < 0 || x > 16384) return false;
    o.engine.backbone_size = x;
    o.engine.backbone_percent = 0;
    return true;
  };
  f.format = [](const O& o) {
    return o.engine.backbone_percent > 0 ? std::to_string(o.engine.backbone_percent) + "%"
                                  : std::to_string(o.engine.backbone_size);
  };
  return f;
}

std::vector<Field<O>> rows() {
  std::vector<Field<O>> r;
  r.push_back(choice_row<O, EngineKind>(
      "engine", P, &E::engine_kind,
      {{"original", EngineKind::Original}, {"optimized", EngineKind::Optimized}},
      "engine class: original (reference behaviour) or optimized (owns token routing)"));
  r.push_back(switch_row<O>("flash_attention", P, &M::flash_attention,
                            "4-D SDPA (flash / memory-efficient) in global attention"));
  r.push_back(with_shortcuts(
      choice_row<O, AutoSwitch>(
          "native_attention", P, &M::native_attention,
          tri_state_names<AutoSwitch>(),
          "bf16 CPU global attention through the engine's AVX-512 BF16 kernel: true, false, "
          "or auto = the measured plan times it against LibTorch's SDPA per attention shape"),
      {{"--native-attention", "true"}, {"--no-native-attention", "false"}}));
  r.push_back(int_row<O, int64_t>("token_chunk", P, &M::token_chunk, 0, 1 << 24,
                                  "token rows per chunk in the encoder blocks' token-wise parts "
                                  "(LN, projections, MLP; 0 = whole rows); bit-identical",
                                  "0 or a row count, e.g. 512"));
  r.push_back(choice_row<O, AutoSwitch>(
      "onednn_linear", P, &E::onednn_linear, tri_state_names<AutoSwitch>(),
      "float32 CPU Linear layers through oneDNN's matmul instead of MKL's GEMM (within fp32 "
      "rounding): true, false, or auto = the measured plan times both"));
  r.push_back(choice_row<O, AutoSwitch>(
      "winograd_conv", P, &E::winograd_conv, tri_state_names<AutoSwitch>(),
      "float32 CPU refiner convolutions by Winograd F(2x2,3x3) instead of oneDNN's direct "
      "convolution (within fp32 rounding; needs channels_last): true, false, or auto = the "
      "measured plan times both"));
  r.push_back(switch_row<O>("fused_decoder", P, &M::fused_decoder,
                            "decoders without the 1024-channel concat (linear_fuse folded)"));
  r.push_back(with_aliases(with_shortcuts(
      choice_row<O, RefinerTiling>(
          "tiled_refiner", P, &E::tiled_refiner,
          tri_state_names<RefinerTiling>(),
          "exact tiled refiner (image-global GroupNorm statistics): true, false, or auto = "
          "tiled only when the whole image exceeds refiner_memory_budget_mb"),
      {{"--tiled-refiner", "true"}, {"--no-tiled-refiner", "false"}}), {"--refiner-tiling"}));
  r.push_back(int_row<O, int64_t>("refiner_memory_budget_mb", P, &E::refiner_memory_budget_mb, 0,
                                  1 << 30,
                                  "MiB the whole-image refiner may use (0 = half the free memory)",
                                  "0 (auto) or a size in MiB"));
  r.push_back(switch_row<O>("fused_refiner", P, &E::fused_refiner,
                            "refiner GroupNorm fused with residual add and ReLU (2 passes, not 5)"));
  r.push_back(switch_row<O>("channels_last", P, &M::channels_last,
                            "convolutions on channels-last (NHWC) tensors"));
  r.push_back(int_row<O, int64_t>("tile_size", P, &E::tile_size, 64, 1 << 16,
                                  "refiner tile side in pixels", "a multiple of 8 >= 64, e.g. 512",
                                  [](long long x) { return x % 8 == 0; }));
  r.push_back(process_wide(with_shortcuts(
      switch_row<O>("disable_cudnn_benchmark", P, &M::disable_cudnn_benchmark,
                    "cudnn.benchmark off (process-global)"),
      {{"--cudnn-benchmark", "false"}, {"--no-cudnn-benchmark", "true"}})));
  r.push_back(switch_row<O>("cache_clearing", P, &E::cache_clearing,
                            "release cached allocator blocks between stages"));
  r.push_back(process_wide(switch_row<O>("host_block_cache", P, &M::host_block_cache,
                                         "CPU tensors >= 1 MiB from a reused, huge-page block cache "
                                         "(bit-identical; process-wide)")));
  r.push_back(choice_row<O, CompileMode>(
      "compile_mode", P, &E::compile_mode,
      {{"none", CompileMode::None}, {"default", CompileMode::Default},
       {"reduce-overhead", CompileMode::ReduceOverhead},
       {"max-autotune", CompileMode::MaxAutotune}},
      "none | default | reduce-overhead | max-autotune"));
  r.push_back(with_aliases(
      choice_row<O, Precision>("model_precision", P, &M::model_precision,
                               {{"float32", Precision::Float32}, {"float16", Precision::Float16},
                                {"bfloat16", Precision::BFloat16}, {"auto", Precision::Auto},
                                {"fp32", Precision::Float32},
                                {"fp16", Precision::Float16}, {"half", Precision::Float16},
                                {"bf16", Precision::BFloat16}},
                               "weights and activations: float32 | float16 | bfloat16 | auto "
                               "(CUDA/MPS float16; CPU bfloat16 with AMX or AVX-512 BF16, else "
                               "float32)"),
      {"--precision"}));
  r.push_back(switch_row<O>("mixed_precision", P, &M::mixed_precision,
                            "autocast: fp32 weights, half-precision matmuls/convs"));
  r.push_back(process_wide(switch_row<O>("tf32", P, &M::tf32,
                                         "TF32 matmuls/convolutions on Ampere+ (process-global)")));
  r.push_back(int_row<O, int64_t>("dma_buffers", P, &E::dma_buffers, 2, 8,
                                  "pinned host buffers for device->host copies"));
  r.push_back(switch_row<O>("token_routing", P, &M::token_routing,
                            "route easy tokens around global attention (experimental)"));
  r.push_back(real_row<O>("edge_threshold_low", P, &M::edge_threshold_low,
                          [](double x) { return x >= 0 && x < 1; },
                          "hint above this is uncertain (edge)", "a number in [0, 1)"));
  r.push_back(real_row<O>("edge_threshold_high", P, &M::edge_threshold_high,
                          [](double x) { return x > 0 && x <= 1; },
                          "hint below this is uncertain (edge)", "a number in (0, 1]"));
  r.push_back(int_row<O, int64_t>("min_edge_tokens", P, &M::min_edge_tokens, 0, 1 << 30,
                                  "fewer edge tokens than this: route all tokens",
                                  "a non-negative integer, e.g. 64"));

  r.push_back(outside_model_key(choice_row<O, bool>(
      "mmap", P, &M::mmap,
      {{"on", true}, {"off", false}, {"true", true}, {"false", false}, {"yes", true},
       {"no", false}},
      "safetensors weights: map the file (on; no copy) or read it into memory (off; for "
      "processes that outlive one job: a file replaced under a mapping is SIGBUS)")));
  r.push_back(choice_row<O, TuneMode>(
      "tune", P, &M::tune,
      {{"off", TuneMode::Off}, {"auto", TuneMode::Auto}, {"refresh", TuneMode::Refresh},
       {"cache-only", TuneMode::CacheOnly}},
      "measured plan: off (flag rules), auto (timed trials on first use of this machine and "
      "configuration, cached in tune_cache), refresh (trials again), cache-only (a cached plan "
      "or the flag rules; never times)"));
  r.push_back(outside_model_key(path_row<O>(
      "tune_cache", R, &M::tune_cache,
      "where measured plans are cached: a folder (one file per plan, no lock: for a shared "
      "filesystem) or a .json file (empty: CORRIDORKEY_TUNE_CACHE or ~/.cache)",
      "a folder or .json file path")));
  r.push_back(backbone_row());
  r.push_back(path_row<O>("checkpoint", R, &M::checkpoint,
                          ".safetensors, .pth or TorchScript file, or a folder holding one "
                          "(empty: the bundled model)",
                          "a file or folder path"));
  r.push_back(outside_model_key(path_row<O>("checkpoint_blue", R, &M::checkpoint_blue,
                                            "blue-screen model (file or folder): keys blue-backing clips "
                                            "without the green/blue swap (empty: swap around the main model)",
                                            "a file or folder path")));
  r.push_back(choice_row<O, Screen>(
      "model_screen", R, &M::model_screen, {{"green", Screen::Green}, {"blue", Screen::Blue}},
      "backing the checkpoint was trained on: green, or blue for a blue-screen model given "
      "as --checkpoint (checkpoint_blue's model is blue)"));
  r.push_back(text_row<O>("device", R, &M::device, "auto | cpu | cuda | cuda:N | mps",
                          "one of auto, cpu, cuda, cuda:N, mps", valid_device_request));
  r.push_back(process_wide(int_row<O, int>("threads", R, &M::threads, 0, 1024,
                                           "LibTorch intra-op threads (0 = one per core; process-global)",
                                           "0 (all cores) or a thread count")));
  r.push_back(choice_row<O, OnOom>("on_oom", R, &E::on_oom,
                                   {{"degrade", OnOom::Degrade}, {"fail", OnOom::Fail}},
                                   "out of device memory on a frame: degrade (retry tiled + cache "
                                   "clearing, then half precision) or fail the frame"));
  r.push_back(int_row<O, int64_t>("img_size", R, &E::img_size, 0, 16384,
                                  "model resolution, a multiple of 32 (0 = the checkpoint's)",
                                  "0 or a multiple of 32 in 32..16384",
                                  [](long long x) { return x % 32 == 0; }));
  r.push_back(path_row<O>("aoti_package", R, &E::aoti_package,
                          "AOTInductor package (.pt2) for compile_mode default/max-autotune",
                          "a file path"));
  r.push_back(real_row<O>("despill", R, &E::despill_strength,
                          [](double x) { return x >= 0 && x <= 10; },
                          "green despill strength 0..10 (5 = half)", "a number in 0..10", 0.1));
  r.push_back(switch_row<O>("despeckle", R, &E::despeckle,
                            "remove small matte islands in Processed/Comp"));
  r.push_back(int_row<O, int64_t>("despeckle_size", R, &E::despeckle_size, 1, 1 << 30,
                                  "minimum island area kept, in pixels",
                                  "an integer in 1..1073741824"));
  r.push_back(with_aliases(
      real_row<O>("refiner_scale", R, &E::refiner_scale, [](double x) { return x >= 0 && x <= 10; },
                  "multiplier of the refiner's correction (1 = as trained)", "a number in 0..10"),
      {"--refiner"}));
  return r;
}

}  // namespace

const Table<Profile>& engine_table() {
  static const Table<Profile> t(rows());
  return t;
}

std::string profile_keys() {
  std::string s;
  for (const auto& r : engine_table().rows())
    if (r.info.scope == OptionScope::Profile) s += (s.empty() ? "" : ", ") + r.info.key;
  return s;
}

void validate_model_options(const ModelOptions& o, const std::string& source) {
  CK_CHECK(o.edge_threshold_low < o.edge_threshold_high, ConfigError, source,
           ": key 'edge_threshold_low': value ", o.edge_threshold_low,
           " must be smaller than edge_threshold_high ", o.edge_threshold_high);
}

bool valid_device_request(const std::string& d) {
  if (d == "auto" || d == "cpu" || d == "mps" || d == "cuda") return true;
  if (d.rfind("cuda:", 0) != 0 || d.size() == 5 || d.size() > 8) return false;
  for (size_t i = 5; i < d.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(d[i]))) return false;
  return true;
}

}  // namespace corridorkey::config
