#include "runtime/tune_plan.h"

#include <corridorkey/errors.h>
#include <corridorkey/system.h>
#include <corridorkey/version.h>

#include "attention_cpu.h"
#include "attention_f32_cpu.h"
#include "config/log.h"
#include "config/option_table.h"
#include "model/decoder_head.h"
#include "model/functional.h"
#include "model/hiera.h"
#include "model/json_reader.h"
#include "model/conv.h"
#include "model/refiner.h"
#include "model/tiled_refiner.h"
#include "runtime/memory.h"
#include "runtime/model_runner.h"
#include "runtime/tune_cache.h"
#include "timing.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/version.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <cmath>
#include <limits>
#include <optional>
#include <locale>
#include <sstream>
#include <thread>

namespace corridorkey::detail {
namespace {

std::mutex g_delay_m;
std::map<std::string, double> g_delay;

/// The delay injected for a trial: a tag such as "bfloat16 native" takes the delays of
/// "bfloat16", "native" and of the whole tag, so a test can slow one precision, one kernel,
/// or one kernel in one precision.
double injected(const std::string& candidate) {
  std::lock_guard<std::mutex> l(g_delay_m);
  double ms = 0;
  auto add = [&](const std::string& k) {
    const auto it = g_delay.find(k);
    if (it != g_delay.end()) ms += it->second;
  };
  add(candidate);
  if (candidate.find(' ') != std::string::npos) {
    std::istringstream words(candidate);
    for (std::string w; words >> w;) add(w);
  }
  return ms;
}

/// Best of `reps` timed runs after `warmup` untimed ones. The minimum, not the median: a
/// trial is short and this machine is shared, and a slower run only adds noise.
double time_ms(const std::string& candidate, int warmup, int reps, const std::function<void()>& f) {
  static const bool verbose = std::getenv("CORRIDORKEY_TUNE_VERBOSE") != nullptr;
  const auto t_all = timing::Clock::now();
  for (int i = 0; i < warmup; ++i) f();
  double best = 1e300;
  const double delay = injected(candidate);
  for (int i = 0; i < reps; ++i) {
    const auto t0 = timing::Clock::now();
    f();
    if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay));
    best = std::min(best, timing::ms_since(t0));
  }
  if (verbose)
    detail::log(LogLevel::Debug, "tune trial " + candidate + ": best " + config::format_real(best) +
                                     " ms, " + config::format_real(timing::ms_since(t_all)) +
                                     " ms with warm-up");
  return best;
}

/// The CPU as /proc/cpuinfo names it (CpuFeatures::identity, system.h).
std::string cpu_identity() { return cpu_features().identity(); }

torch::ScalarType dtype_of(const std::string& p) {
  return p == "bfloat16" ? torch::kBFloat16 : p == "float16" ? torch::kHalf : torch::kFloat;
}

/// Conv weights to channels-last, as GreenFormer::to_channels_last does for the real model.
void conv_weights_channels_last(torch::nn::Module& m) {
  for (auto& p : m.parameters())
    if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
}

struct Shapes {
  model::BlockSpec stage3, stage4;
  int64_t tokens3 = 0, tokens4 = 0;
  int64_t blocks = 0;
  bool has_global = false;
  /// Per encoder stage: its first block that neither pools nor widens (else its first
  /// block), and the tokens that block takes in (0: the architecture has no such stage).
  std::array<model::BlockSpec, 4> stage;
  std::array<int64_t, 4> stage_tokens{};
};

/// The global-attention blocks the trials time: the first non-pooling global block of the
/// third and of the last stage, with their token counts where the encoder runs
/// (backbone_size when decoupled, else img_size).
Shapes shapes_of(const model::GreenFormerConfig& cfg) {
  Shapes s;
  const auto specs = model::block_specs(cfg.encoder);
  s.blocks = static_cast<int64_t>(specs.size());
  const int64_t grid = cfg.encoder_size() / cfg.encoder.patch_stride[0];
  int64_t n = grid * grid;
  bool got3 = false;
  for (const auto& b : specs) {
    if (b.q_stride > 1) n /= b.q_stride;
    if (b.mask_unit_attn || b.q_stride > 1 || b.dim != b.dim_out) continue;
    if (!got3) {
      s.stage3 = b, s.tokens3 = n, got3 = true;
    }
    s.stage4 = b, s.tokens4 = n;  // the last one seen: the final stage
  }
  s.has_global = got3;
  // Every stage's first plain block (else its first block, pooling q), with the tokens it
  // takes in, for the float32 attention kernel (windowed stages too).
  const auto ends = model::stage_ends(cfg.encoder);
  n = grid * grid;
  size_t st = 0;
  bool plain = false;
  for (size_t i = 0; i < specs.size() && st < s.stage.size(); ++i) {
    const auto& b = specs[i];
    const bool is_plain = b.q_stride == 1 && b.dim == b.dim_out;
    if (s.stage_tokens[st] == 0 || (is_plain && !plain)) {
      s.stage[st] = b;
      s.stage_tokens[st] = n;
      plain = is_plain;
    }
    if (b.q_stride > 1) n /= b.q_stride;
    if (st < ends.size() && static_cast<int64_t>(i) == ends[st]) ++st, plain = false;
  }
  return s;
}

struct Trials {
  const EngineOptions& opt;
  const model::GreenFormerConfig& cfg;
  Shapes sh;
  at::MemoryFormat layout;

  /// One global block at its real token count, in `dtype`, SDPA or the native kernel.
  double block(const model::BlockSpec& spec, int64_t tokens, torch::ScalarType dtype, bool native,
               const std::string& candidate) const {
    model::HieraBlock blk(spec);
    blk->eval();
    blk->to(dtype);
    blk->attn->flash_4d = opt.flash_attention;
    blk->attn->native_attention = native;
    blk->token_chunk = opt.token_chunk;
    auto x = torch::randn({1, tokens, spec.dim}).to(dtype);
    return time_ms(candidate, 1, 1, [&] { blk->forward(x); });
  }

  /// One block's attention alone (qkv in, before the projection) at its real shape, in
  /// float32, through SDPA or the engine's kernel: the rest of the block is the same either way.
  double attention(const model::BlockSpec& spec, int64_t tokens, bool native,
                   const std::string& candidate) const {
    const int64_t nw = spec.mask_unit_attn ? tokens / (spec.q_stride * spec.window_size) : 1;
    auto qkv = torch::randn({1, tokens, 3 * spec.dim_out});
    // Global attention grows with tokens^2: past 1024 px (4096 tokens at stage 3) one timed
    // run is long enough to be steady, and a second would add seconds to the first job.
    const int reps = spec.mask_unit_attn || tokens <= 4096 ? 2 : 1;
    return time_ms(candidate, 1, reps, [&] {
      model::functional::mask_unit_attention(qkv, spec.heads, nw, spec.q_stride,
                                             opt.flash_attention && nw == 1, {}, native);
    });
  }

  double decoder(torch::ScalarType dtype, const std::string& candidate) const {
    const auto ch = model::feature_channels(cfg.encoder);
    model::DecoderHead head(ch, cfg.decoder_dim, 3);
    head->eval();
    head->fused = opt.fused_decoder;
    head->to(dtype);
    if (opt.channels_last) conv_weights_channels_last(*head);
    std::vector<torch::Tensor> f;
    for (size_t i = 0; i < ch.size(); ++i) {
      const int64_t side = cfg.encoder_size() / (int64_t{4} << i);
      f.push_back(torch::randn({1, ch[i], side, side}).to(dtype));
    }
    return time_ms(candidate, 1, 1, [&] { head->forward(f); });
  }

  /// One dilated refiner block on a full-width strip of kStripRows rows.
  static constexpr int64_t kStripRows = 64;
  double refiner_block(torch::ScalarType dtype, const std::string& candidate) const {
    model::RefinerBlock blk(cfg.refiner_channels, cfg.refiner_groups, 8);
    blk->eval();
    blk->to(dtype);
    if (opt.channels_last) conv_weights_channels_last(*blk);
    auto x = torch::randn({1, cfg.refiner_channels, std::min(kStripRows, cfg.img_size), cfg.img_size})
                 .to(dtype)
                 .contiguous(layout);
    return time_ms(candidate, 1, 2, [&] { blk->forward(x); });
  }

  /// refiner_block in float32 with its convolutions by Winograd (model/conv.h).
  double refiner_block_winograd(const std::string& candidate) const {
    model::functional::WinogradConvScope on(true);
    return refiner_block(torch::kFloat, candidate);
  }

  /// Milliseconds per frame, extrapolated from the block trials by how often each block
  /// runs in a forward: every encoder block as the stage-3 block (16 of base_plus's 24
  /// blocks are such blocks, and they dominate its FLOPs), two decoder heads, and the
  /// refiner's four residual blocks over img_size / 64 strips. On the Xeon of issue 24 this
  /// gives 5.3 + 0.4 + 3.2 s against the measured 5.3 + 0.4 + 3.4 s.
  double frame_estimate(double blk3, double dec, double ref) const {
    const double strips = static_cast<double>(cfg.img_size) / std::min(kStripRows, cfg.img_size);
    return blk3 * static_cast<double>(sh.blocks) + 2 * dec + 4 * strips * ref;
  }

  /// The refiner on one row of tiles (tile_size high, up to two tiles wide): whole-image
  /// code path against the exact tiler, in the chosen precision and layout.
  std::pair<double, double> refiner_tiling(torch::ScalarType dtype) const {
    model::CNNRefiner ref(cfg.refiner_channels, cfg.refiner_groups);
    ref->eval();
    ref->to(dtype);
    if (opt.channels_last) conv_weights_channels_last(*ref);
    const int64_t t = opt.tile_size;
    auto x = torch::randn({1, 7, t, std::min(cfg.img_size, 2 * t)}).to(dtype).contiguous(layout);
    // Warm-up on a single tile: the fused GroupNorm's start-up self-test and the first
    // primitives would otherwise be charged to whichever path runs first. The timed runs
    // then go once each: a row of tiles is an eighth of the frame at 1024 with 256 px tiles.
    {
      auto one = x.narrow(3, 0, std::min(t, x.size(3))).contiguous(layout);
      opt.fused_refiner ? ref->forward_fused(one) : ref->forward_input(one);
      model::tiled_refiner_forward(*ref, one, {t});
    }
    const double whole = time_ms("whole", 0, 1, [&] {
      opt.fused_refiner ? ref->forward_fused(x) : ref->forward_input(x);
    });
    const double tiled = time_ms("tiled", 0, 1, [&] {
      model::tiled_refiner_forward(*ref, x, {t});
    });
    const double rows = static_cast<double>(cfg.img_size) / static_cast<double>(t);
    const double cols = static_cast<double>(cfg.img_size) / static_cast<double>(x.size(3));
    return {whole * rows * cols, tiled * rows * cols};
  }
};

void note_line(std::string& notes, const std::string& line) { detail::note(notes, line); }

/// Faster by more than this share, or the more exact / simpler candidate stays: single
/// trials on a shared machine vary by a few percent.
constexpr double kMargin = 0.10;

}  // namespace

void inject_trial_delay(const std::string& candidate, double ms) {
  std::lock_guard<std::mutex> l(g_delay_m);
  if (candidate.empty()) g_delay.clear();
  else g_delay[candidate] = ms;
}

std::string plan_key(const EngineOptions& o, const model::GreenFormerConfig& cfg,
                     const torch::Device& device) {
  std::ostringstream k;
  k.imbue(std::locale::classic());  // numbers in every locale
  const auto& e = cfg.encoder;
  // "plan 3": the float32 attention kernel's per-stage trials, timed with its AVX-512
  // variant where that runs; a plan cached before (which timed a slower kernel, or none) is
  // not reused. "plan 4": each precision's estimate and check time it with its own faster
  // attention kernel (plan 3 compared bf16's best with float32's SDPA, then checked both
  // with SDPA, and kept float32 at 2048 on a Zen 5 where bfloat16 ran 4x faster).
  k << "engine " << CORRIDORKEY_VERSION_STRING << "; plan 6; torch " << TORCH_VERSION << "; "
    << (device.is_cpu() ? cpu_identity() : device.str()) << "; threads " << at::get_num_threads()
    << "; " << cfg.arch << " " << e.embed_dim << "/" << e.num_heads << "/";
  for (size_t i = 0; i < e.stages.size(); ++i) k << (i ? "-" : "") << e.stages[i];
  k << "; img " << cfg.img_size;
  if (cfg.encoder_size() != cfg.img_size) k << " backbone " << cfg.encoder_size();
  k << "; precision " << to_string(o.model_precision)
    << (o.mixed_precision ? " mixed" : "") << "; native " << to_string(o.native_attention)
    << "; tiled " << to_string(o.tiled_refiner) << " " << o.tile_size << "; flash "
    << o.flash_attention << " fused-dec " << o.fused_decoder << " fused-ref " << o.fused_refiner
    << " channels-last " << o.channels_last << " routing " << o.token_routing
    << " onednn-linear " << to_string(o.onednn_linear) << " winograd " << to_string(o.winograd_conv);
  if (o.token_chunk > 0) k << " chunk " << o.token_chunk;  // absent at 0: older keys stay valid
  return k.str();
}

TunePlan resolve_plan(EngineOptions& opt, const model::GreenFormerConfig& cfg,
                      const torch::Device& device, std::string& notes) {
  TunePlan plan;
  plan.mode = opt.tune;
  plan.cache_path = tune_cache_path();
  plan.key = plan_key(opt, cfg, device);
  const bool cpu = device.is_cpu();
  const bool precision_open = opt.model_precision == Precision::Auto && cpu && !opt.mixed_precision;
  const bool native_kernel = cpu && opt.flash_attention && kernels::native_attention_available();
  const Shapes sh = shapes_of(cfg);

  // The memory rule comes first and is applied live (the free memory changes): a whole
  // image that does not fit is tiled whatever a trial said.
  auto whole_fits = [&](torch::ScalarType dt) {
    const auto need = refiner_whole_image_bytes(cfg.img_size, cfg.refiner_channels,
                                                torch::elementSize(dt), opt.fused_refiner);
    return need <= refiner_budget_bytes(opt, device);
  };

  if (opt.tune == TuneMode::Off || !cpu) {
    // The flag rules. CUDA / MPS: trials are not implemented there yet (cuDNN benchmark and
    // flash vs memory-efficient attention are the candidates this mechanism is shaped for).
    plan.origin = "off";
    const auto p = resolve_precision(opt.model_precision, device.str());
    plan.decisions.push_back({"model_precision", to_string(p),
                              opt.model_precision == Precision::Auto ? "rule" : "flag",
                              opt.model_precision == Precision::Auto
                                  ? (cpu ? "CPU flags (amx_bf16 / avx512_bf16 -> bfloat16)"
                                         : "float16 on CUDA and MPS; timed trials run on CPUs only")
                                  : "",
                              {}});
    if (opt.tune != TuneMode::Off && !cpu)
      note_line(notes, "tune: timed trials run on CPUs only for now; " + device.str() + " keeps the flag rules");
    if (opt.model_precision == Precision::Auto && cpu) opt.model_precision = p;
    if (opt.native_attention == AutoSwitch::Auto) opt.native_attention = AutoSwitch::On;
    if (opt.onednn_linear == AutoSwitch::Auto) opt.onednn_linear = AutoSwitch::Off;  // LibTorch's default
    if (opt.winograd_conv == AutoSwitch::Auto) opt.winograd_conv = AutoSwitch::Off;  // LibTorch's conv
    return plan;
  }

  std::string warning;
  std::optional<TunePlan> cached;
  if (opt.tune == TuneMode::Auto) cached = tune_cache_load(plan.key, warning);
  if (!warning.empty()) note_line(notes, warning);

  if (cached) {
    plan.origin = "cache";
    plan.decisions = cached->decisions;
    plan.trial_ms = cached->trial_ms;
  } else try {
    c10::InferenceMode guard;
    const auto t_start = timing::Clock::now();
    note_line(notes, "tune: timing " + cfg.arch + " blocks at img_size " + std::to_string(cfg.img_size) +
                         (cfg.encoder_size() != cfg.img_size
                              ? " (backbone " + std::to_string(cfg.encoder_size()) + ")" : std::string()) +
                         " on " + cpu_identity() + ", " + std::to_string(at::get_num_threads()) +
                         " threads (once; " +
                         (plan.cache_path.empty() ? std::string("no cache folder, kept in memory")
                                                  : "cached in " + plan.cache_path) + ")");
    Trials tr{opt, cfg, sh, opt.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous};
    const bool native_open = opt.native_attention == AutoSwitch::Auto && native_kernel;
    const bool native_f32_open = opt.native_attention == AutoSwitch::Auto && opt.flash_attention &&
                                 !opt.mixed_precision && kernels::native_attention_f32_available();
    const bool linear_open = opt.onednn_linear == AutoSwitch::Auto && !opt.mixed_precision &&
                             model::functional::onednn_linear_available();
    const bool winograd_open =
        opt.winograd_conv == AutoSwitch::Auto && !opt.mixed_precision &&
        !model::functional::winograd_refiner_unavailable(opt.channels_last, cfg.refiner_channels);
    // The float32 refiner block both ways, timed once: for float32's precision estimate and
    // for the winograd_conv choice. Winograd is +inf where it cannot run.
    std::optional<double> ref32_direct, ref32_wino;
    auto refiner32 = [&](bool winograd) {
      auto& slot = winograd ? ref32_wino : ref32_direct;
      if (!slot) {
        try {
          slot = winograd ? tr.refiner_block_winograd("float32 winograd")
                          : tr.refiner_block(torch::kFloat, "float32 direct");
        } catch (const std::exception&) {
          if (!winograd) throw;
          slot = std::numeric_limits<double>::infinity();
        }
      }
      return *slot;
    };
    // A float32 stage-3 block with its Linear layers through oneDNN; +inf where that cannot
    // run (the choice below then records why).
    auto onednn_block3 = [&](bool native) {
      try {
        model::functional::OnednnLinearScope on(true);
        return tr.block(sh.stage3, sh.tokens3, torch::kFloat, native,
                        native ? "float32 native onednn" : "float32 sdpa onednn");
      } catch (const std::exception&) {
        return std::numeric_limits<double>::infinity();
      }
    };
    // Native attention per global stage, in bf16 (the kernel is bf16-only).
    bool native16_3 = false, native32_3 = false;  // the faster stage-3 kernel per precision
    auto native_decisions = [&](std::vector<TuneDecision>& out, double& best_blk3) {
      if (!sh.has_global) return;
      struct Stage {
        const char* name;
        const model::BlockSpec* spec;
        int64_t tokens;
      };
      for (const Stage st : {Stage{"native_attention.stage3", &sh.stage3, sh.tokens3},
                             Stage{"native_attention.stage4", &sh.stage4, sh.tokens4}}) {
        const double sdpa = tr.block(*st.spec, st.tokens, torch::kBFloat16, false, "bfloat16 sdpa");
        const double nat = tr.block(*st.spec, st.tokens, torch::kBFloat16, true, "bfloat16 native");
        const bool use = nat < sdpa;  // same result within bf16 rounding: the faster wins
        out.push_back({st.name, use ? "true" : "false", "plan", "", {{"native", nat}, {"sdpa", sdpa}}});
        if (st.spec == &sh.stage3) {
          best_blk3 = std::min(nat, sdpa);
          native16_3 = use;
        }
      }
    };

    std::string precision = to_string(resolve_precision(opt.model_precision, device.str()));
    if (precision_open) {
      std::map<std::string, double> est;
      std::vector<TuneDecision> native;
      bool bf16_cut = false;
      std::string recheck_why;
      for (const std::string cand : {"float32", "bfloat16"}) {
        const auto dt = dtype_of(cand);
        // Cheapest trial first. bfloat16 stops as soon as its partial estimate passes
        // float32's whole one: it cannot be chosen (emulated bf16 ran 3-5x slower on a Zen 3).
        const bool bf16 = cand == "bfloat16";
        auto over = [&](double partial) { return bf16 && partial >= est["float32"]; };
        // float32 with its faster refiner convolutions, as with its Linear layers below.
        const double ref = bf16 ? tr.refiner_block(dt, cand)
                                : (winograd_open ? std::min(refiner32(false), refiner32(true)) : refiner32(false));
        double e = tr.frame_estimate(0, 0, ref);
        if (!over(e)) {
          const double dec = tr.decoder(dt, cand);
          e = tr.frame_estimate(0, dec, ref);
          if (!over(e)) {
            // Each precision with its faster kernel: at 2048 on a Zen 5, a float32 stage-3
            // block ran 2.4 s with the fp32 kernel against 4.8 s through SDPA.
            double blk3 = 0;
            if (bf16 && native_open) {
              native_decisions(native, blk3);
            } else if (!bf16 && native_f32_open && sh.has_global) {
              const double sdpa = tr.block(sh.stage3, sh.tokens3, dt, false, "float32 sdpa");
              const double nat = tr.block(sh.stage3, sh.tokens3, dt, true, "float32 native");
              native32_3 = nat < sdpa;
              blk3 = std::min(nat, sdpa);
            } else if (sh.has_global) {
              blk3 = tr.block(sh.stage3, sh.tokens3, dt, false, cand);
            }
            // float32 with its faster Linear GEMM too (oneDNN ran a float32 frame in 0.72x
            // MKL's time on a Zen 5), so bfloat16 is weighed against the float32 that runs.
            if (!bf16 && linear_open && sh.has_global) blk3 = std::min(blk3, onednn_block3(native32_3));
            e = tr.frame_estimate(blk3, dec, ref);
          }
        }
        bf16_cut = over(e);
        est[cand] = e;
      }
      // bfloat16 only when clearly faster: float32 is the exact path. One timed run per
      // trial is noisy on a shared machine (a tiny model flipped 3 of 5 times), and the
      // choice is cached and moves the matte, so a bf16 win is timed again and must hold.
      precision = est["bfloat16"] < (1.0 - kMargin) * est["float32"] ? "bfloat16" : "float32";
      if (precision == "bfloat16") {
        double r32 = tr.refiner_block(torch::kFloat, "float32");
        if (winograd_open) r32 = std::min(r32, tr.refiner_block_winograd("float32 winograd"));
        const double r16 = tr.refiner_block(torch::kBFloat16, "bfloat16");
        double b32 = 0, b16 = 0;
        if (sh.has_global) {  // each with the kernel it would run
          b32 = tr.block(sh.stage3, sh.tokens3, torch::kFloat, native32_3,
                         native32_3 ? "float32 native" : "float32 sdpa");
          if (linear_open) b32 = std::min(b32, onednn_block3(native32_3));
          b16 = tr.block(sh.stage3, sh.tokens3, torch::kBFloat16, native16_3,
                         native16_3 ? "bfloat16 native" : "bfloat16 sdpa");
        }
        const double again16 = tr.frame_estimate(b16, 0, r16), again32 = tr.frame_estimate(b32, 0, r32);
        if (!(again16 < (1.0 - kMargin) * again32)) {
          precision = "float32";
          // The times shown are the first estimates, which had bfloat16 ahead: say why not.
          recheck_why = "bfloat16's lead did not hold when its stage-3 block and refiner were timed again (" +
                        config::format_real(std::round(again16)) + " ms against float32's " +
                        config::format_real(std::round(again32)) + " ms; it must be 10% faster)";
        }
      }
      plan.decisions.push_back({"model_precision", precision, "plan",
                                !recheck_why.empty() ? recheck_why
                                : bf16_cut           ? "bfloat16 trials stopped once past float32's estimate"
                                                     : "",
                                {{"float32", est["float32"]}, {"bfloat16", est["bfloat16"]}}});
      if (precision == "bfloat16")
        for (auto& d : native) plan.decisions.push_back(d);
    } else {
      plan.decisions.push_back({"model_precision", precision,
                                opt.model_precision == Precision::Auto ? "rule" : "flag",
                                opt.mixed_precision ? "mixed_precision autocasts" : "", {}});
      if (precision == "bfloat16" && native_open) {
        double unused = 0;
        native_decisions(plan.decisions, unused);
      }
    }
    // The float32 kernel per encoder stage (windowed and global): same result within fp32
    // rounding (test_kernels.cpp), so the faster wins, shape by shape.
    if (precision == "float32" && native_f32_open) {
      for (size_t i = 0; i < sh.stage.size(); ++i) {
        if (sh.stage_tokens[i] == 0) continue;
        const double sdpa = tr.attention(sh.stage[i], sh.stage_tokens[i], false, "sdpa");
        const double nat = tr.attention(sh.stage[i], sh.stage_tokens[i], true, "native");
        plan.decisions.push_back({"native_attention.stage" + std::to_string(i + 1), nat < sdpa ? "true" : "false",
                                  "plan", "", {{"native", nat}, {"sdpa", sdpa}}});
      }
    }
    // float32 Linear layers through oneDNN's matmul or MKL's GEMM (at::linear): the same
    // result within fp32 rounding, so the faster wins. Timed on one block of stage 1
    // (narrow, many tokens) and one of stage 3 (wide, few): every Hiera block costs the same
    // FLOPs (tokens x width^2), so each weighs as the blocks of its shape family (stages 1-2,
    // 3-4). float32's precision estimate above is MKL's: oneDNN only makes it faster.
    if (precision == "float32" && linear_open) {
      auto native_at = [&](size_t i) {
        if (!opt.flash_attention && !sh.stage[i].mask_unit_attn) return false;
        if (opt.native_attention == AutoSwitch::On) return true;
        const auto* d = plan.find("native_attention.stage" + std::to_string(i + 1));
        return d && d->value == "true";
      };
      const auto& st = cfg.encoder.stages;
      double onednn = 0, mkl = 0;
      try {  // a oneDNN that cannot run here costs this choice only, not the whole plan
        for (size_t i : {size_t{0}, size_t{2}}) {
          if (sh.stage_tokens[i] == 0) continue;
          double w = 0;
          for (size_t j = i; j < i + 2 && j < st.size(); ++j) w += static_cast<double>(st[j]);
          mkl += w * tr.block(sh.stage[i], sh.stage_tokens[i], torch::kFloat, native_at(i), "float32 mkl");
          model::functional::OnednnLinearScope on(true);
          onednn += w * tr.block(sh.stage[i], sh.stage_tokens[i], torch::kFloat, native_at(i), "float32 onednn");
        }
        if (mkl > 0)
          plan.decisions.push_back({"onednn_linear", onednn < (1.0 - kMargin) * mkl ? "true" : "false",
                                    "plan", "", {{"onednn", onednn}, {"mkl", mkl}}});
      } catch (const std::exception& e) {
        const auto* ce = dynamic_cast<const c10::Error*>(&e);
        std::string m = ce ? ce->what_without_backtrace() : e.what();
        plan.decisions.push_back({"onednn_linear", "false", "only",
                                  "its trial failed: " + m.substr(0, m.find('\n')).substr(0, 160), {}});
      }
    }
    // The refiner's float32 convolutions by Winograd or oneDNN's direct convolution: the
    // same result within fp32 rounding, so the faster wins (one dilated block on a strip).
    if (precision == "float32" && winograd_open) {
      const double direct = refiner32(false), wino = refiner32(true);
      if (std::isfinite(wino))
        plan.decisions.push_back({"winograd_conv", wino < (1.0 - kMargin) * direct ? "true" : "false", "plan", "",
                                  {{"winograd", wino}, {"direct", direct}}});
      else  // a kernel that cannot run here costs this choice only, not the whole plan
        plan.decisions.push_back({"winograd_conv", "false", "only", "its trial failed", {}});
    }
    if (opt.tiled_refiner == RefinerTiling::Auto && cfg.img_size > opt.tile_size &&
        whole_fits(dtype_of(precision))) {
      // In the convolution the refiner will run: Winograd moves both sides, not equally.
      const auto* wd = plan.find("winograd_conv");
      model::functional::WinogradConvScope conv(precision == "float32" && !opt.mixed_precision &&
                                                (opt.winograd_conv == AutoSwitch::On || (wd && wd->value == "true")));
      const auto [whole, tiled] = tr.refiner_tiling(dtype_of(precision));
      // Both exact within fp32 rounding (<= 1e-4, tests): the faster wins, ties stay whole.
      plan.decisions.push_back({"tiled_refiner", tiled < (1.0 - kMargin) * whole ? "true" : "false",
                                "plan", "", {{"whole", whole}, {"tiled", tiled}}});
    }
    plan.trial_ms = timing::ms_since(t_start);
    plan.origin = "trials";
    std::string w;
    if (!tune_cache_store(plan, w)) plan.origin = "memory";
    if (!w.empty()) note_line(notes, w);
  } catch (const std::exception& e) {
    // A trial that cannot run (out of memory at a large size) must not stop the job: the
    // flag rules stand, as with tune off, and nothing is cached.
    const auto* ce = dynamic_cast<const c10::Error*>(&e);
    std::string m = ce ? ce->what_without_backtrace() : e.what();
    note_line(notes, "tune: trials failed (" + m.substr(0, m.find('\n')).substr(0, 200) +
                         "); using the flag rules");
    plan.decisions.clear();
    plan.origin = "off";
    opt.tune = TuneMode::Off;
    return resolve_plan(opt, cfg, device, notes);
  }

  // Apply: explicit values were never open; record them so a report shows every choice.
  const auto* p = plan.find("model_precision");
  if (p && opt.model_precision == Precision::Auto && cpu)
    opt.model_precision = p->value == "bfloat16" ? Precision::BFloat16 : Precision::Float32;
  const bool bf16 = opt.model_precision == Precision::BFloat16;
  const bool f32 = opt.model_precision == Precision::Float32 && !opt.mixed_precision;
  if (opt.native_attention == AutoSwitch::Auto) {
    if (!plan.find("native_attention.stage3") && !plan.find("native_attention.stage1")) {
      const char* why = !opt.flash_attention ? "needs flash_attention"
                        : !cpu              ? "CPU kernels only"
                        : f32 && !kernels::native_attention_f32_available()
                            ? "the float32 kernel needs AVX2 + FMA, which this CPU lacks"
                        : f32               ? "no attention block in this architecture"
                        : !bf16             ? "kernels for bfloat16 and float32 only"
                        : !native_kernel    ? "the bf16 kernel needs AVX-512 BF16, which this CPU lacks"
                                            : "no global attention in this architecture";
      plan.decisions.push_back({"native_attention", "false", "only", why, {}});
    }
  } else if ((bf16 && native_kernel) || (f32 && cpu && kernels::native_attention_f32_available())) {
    plan.decisions.push_back({"native_attention", to_string(opt.native_attention), "flag", "", {}});
  }
  // oneDNN Linear layers and Winograd convolutions are float32 CPU paths: in any other
  // precision a plan's (or a hand-edited cache's) choice of them runs nothing, so it is
  // dropped from the report, and an explicit true is told that it has no effect.
  if (!(f32 && cpu)) {
    auto& ds = plan.decisions;
    ds.erase(std::remove_if(ds.begin(), ds.end(),
                            [](const TuneDecision& d) { return d.option == "onednn_linear" || d.option == "winograd_conv"; }),
             ds.end());
    for (auto [name, v] : {std::pair{"onednn_linear", opt.onednn_linear}, std::pair{"winograd_conv", opt.winograd_conv}})
      if (v == AutoSwitch::On)
        note_line(notes, std::string(name) + " true has no effect: it applies to float32 on a CPU, and this engine runs " +
                             (cpu ? std::string(to_string(opt.model_precision)) + (opt.mixed_precision ? " (mixed)" : "")
                                  : device.str()));
  }
  if (opt.onednn_linear == AutoSwitch::Auto) {
    const auto* d = plan.find("onednn_linear");
    opt.onednn_linear = d && d->value == "true" ? AutoSwitch::On : AutoSwitch::Off;
    if (!d && f32 && cpu)
      plan.decisions.push_back({"onednn_linear", "false", "only",
                                model::functional::onednn_linear_available()
                                    ? "not timed (no encoder block to time)"
                                    : "this LibTorch has no oneDNN matmul",
                                {}});
  } else if (f32 && cpu) {
    plan.decisions.push_back({"onednn_linear", to_string(opt.onednn_linear), "flag", "", {}});
  }
  {
    // Why the Winograd path cannot run here, where it cannot (empty where it can).
    const char* why = model::functional::winograd_refiner_unavailable(opt.channels_last, cfg.refiner_channels);
    const char* cannot = !cpu || !f32 || !why ? "" : why;
    if (opt.winograd_conv == AutoSwitch::Auto) {
      const auto* d = plan.find("winograd_conv");
      opt.winograd_conv = d && d->value == "true" ? AutoSwitch::On : AutoSwitch::Off;
      if (!d && f32 && cpu)
        plan.decisions.push_back({"winograd_conv", "false", "only", *cannot ? cannot : "not timed", {}});
    } else if (f32 && cpu) {
      // An explicit true the kernel cannot honour is said, not reported as running.
      if (opt.winograd_conv == AutoSwitch::On && *cannot) {
        plan.decisions.push_back({"winograd_conv", "false", "only", cannot, {}});
        note_line(notes, std::string("winograd_conv true has no effect: ") + cannot);
      } else {
        plan.decisions.push_back({"winograd_conv", to_string(opt.winograd_conv), "flag", "", {}});
      }
    }
  }
  if (opt.tiled_refiner == RefinerTiling::Auto) {
    const auto* t = plan.find("tiled_refiner");
    if (!whole_fits(dtype_of(to_string(opt.model_precision)))) {
      // Replaces a cached trial's choice in the report: memory decides today.
      auto& ds = plan.decisions;
      ds.erase(std::remove_if(ds.begin(), ds.end(), [](const TuneDecision& d) { return d.option == "tiled_refiner"; }),
               ds.end());
      plan.decisions.push_back({"tiled_refiner", "true", "only",
                                "the whole image exceeds refiner_memory_budget_mb", {}});
    } else if (t) {
      opt.tiled_refiner = t->value == "true" ? RefinerTiling::On : RefinerTiling::Off;
    } else if (cfg.img_size <= opt.tile_size) {
      plan.decisions.push_back({"tiled_refiner", "false", "only", "img_size <= tile_size", {}});
    }
  } else {
    plan.decisions.push_back({"tiled_refiner", to_string(opt.tiled_refiner), "flag", "", {}});
  }
  return plan;
}

}  // namespace corridorkey::detail
