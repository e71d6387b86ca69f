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
#include "runtime/plan_deciders.h"
#include "runtime/plan_trials.h"
#include "runtime/test_hooks.h"
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

/// A run this long is timed once, with no run before it to warm up: first-call costs (a
/// primitive's JIT, the first touch of its buffers) are then a small share of it, and at
/// 2048 a warm-up doubled the cost of every trial (a Zen 4 spent 79 s before its first
/// frame). A shorter run counts as the warm-up, and the faster of up to two more is taken.
constexpr double kSteadyRunMs = 250;

/// One candidate's time in milliseconds (the minimum, not the median: a trial is short, this
/// machine is shared, and a slower run only adds noise).
double time_ms(const std::string& candidate, const std::function<void()>& f) {
  // Set to "" is unset, as for every variable the engine reads (docs/cli.md).
  static const bool verbose = [] {
    const char* v = std::getenv("CORRIDORKEY_TUNE_VERBOSE");
    return v != nullptr && *v != '\0';
  }();
  const double delay = hooks::trial_delay_ms(candidate);  // tests only (runtime/test_hooks.h)
  auto once = [&] {
    const auto t0 = timing::Clock::now();
    f();
    if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay));
    return timing::ms_since(t0);
  };
  std::vector<double> runs{once()};
  if (runs[0] < kSteadyRunMs) {
    runs.push_back(once());
    if (runs[1] < kSteadyRunMs / 2) runs.push_back(once());
  }
  // The first run counts only when it was the only one (long enough to be steady).
  const double best = runs.size() == 1 ? runs[0] : *std::min_element(runs.begin() + 1, runs.end());
  if (verbose) {
    std::string each;
    for (const double r : runs) each += (each.empty() ? "" : ", ") + config::format_real(r);
    detail::log(LogLevel::Debug, "tune trial " + candidate + ": " + config::format_real(best) + " ms (runs " + each +
                                     (runs.size() == 1 ? ")" : "; the first a warm-up)"));
  }
  return best;
}

/// The CPU as /proc/cpuinfo names it (CpuFeatures::identity, system.h).
std::string cpu_identity() { return cpu_features().identity(); }

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

/// The block shapes as the sampling sees them (plan_trials.h), by BlockAt.
TrialShapes trial_shapes(const Shapes& sh) {
  auto of = [](const model::BlockSpec& b, int64_t tokens) {
    return TrialBlockShape{tokens, b.mask_unit_attn ? b.q_stride * b.window_size : 0, b.q_stride};
  };
  TrialShapes t;
  t[static_cast<size_t>(BlockAt::Global3)] = sh.has_global ? of(sh.stage3, sh.tokens3) : TrialBlockShape{};
  t[static_cast<size_t>(BlockAt::Global4)] = sh.has_global ? of(sh.stage4, sh.tokens4) : TrialBlockShape{};
  for (size_t i = 0; i < 4; ++i) t[i + 2] = of(sh.stage[i], sh.stage_tokens[i]);
  return t;
}

/// CORRIDORKEY_TUNE_TRIALS=whole: every block trial at its real shape, as before sampling
/// (slower by the sampled share; for checking a sampled plan against the whole trials).
bool whole_trials() {
  const char* v = std::getenv("CORRIDORKEY_TUNE_TRIALS");
  return v != nullptr && std::string(v) == "whole";
}

torch::ScalarType dtype_of(TrialType t) {
  return t == TrialType::BFloat16 ? torch::kBFloat16 : t == TrialType::Float16 ? torch::kHalf : torch::kFloat;
}

const char* type_name(TrialType t) {
  return t == TrialType::BFloat16 ? "bfloat16" : t == TrialType::Float16 ? "float16" : "float32";
}

/// Random values in [-1, 1): what a trial runs on (a uniform fill is several times cheaper
/// than randn on a stage-1 input of 16 M values, and the kernels' speed does not depend on it).
torch::Tensor random_input(at::IntArrayRef shape, TrialType type) {
  return torch::empty(shape).uniform_(-1, 1).to(dtype_of(type));
}

/// The single runs on this machine (plan_trials.h): blocks and their attention at any token
/// count, decoder heads, refiner strips and tiles, each timed with time_ms. A run asked for
/// twice at one shape (the stage-3 global block is also stage 3's block for oneDNN) is timed
/// once. A LibTorch error comes out as a std::runtime_error without its backtrace, so a
/// decider's "its trial failed" names only the cause.
struct Trials final : TrialRuns {
  const ModelOptions& opt;     // the weights' options (layout, attention, chunking)
  const EngineSettings& eng;   // the engine's (refiner tiles and fusion)
  const model::GreenFormerConfig& cfg;
  Shapes sh;
  at::MemoryFormat layout;
  std::map<std::string, double> by_shape;  // run key -> ms

  Trials(const ModelOptions& o, const EngineSettings& e, const model::GreenFormerConfig& c, Shapes s)
      : opt(o), eng(e), cfg(c), sh(s),
        layout(o.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous) {}

  template <class F>
  static auto guarded(F&& f) {
    try {
      return f();
    } catch (const c10::Error& e) {
      throw std::runtime_error(e.what_without_backtrace());
    }
  }

  const model::BlockSpec& spec_at(BlockAt at) const {
    return at == BlockAt::Global3 ? sh.stage3 : at == BlockAt::Global4 ? sh.stage4 : sh.stage[static_cast<size_t>(at) - 2];
  }
  int64_t tokens_at(BlockAt at) const {
    return at == BlockAt::Global3   ? sh.tokens3
           : at == BlockAt::Global4 ? sh.tokens4
                                    : sh.stage_tokens[static_cast<size_t>(at) - 2];
  }

  /// A run's time by its shape: timed the first time it is asked for.
  template <class F>
  double once_per_shape(const std::string& what, const model::BlockSpec& s, F&& run) {
    std::ostringstream k;
    k.imbue(std::locale::classic());
    k << what << " " << s.dim << "/" << s.dim_out << "/" << s.heads << "/" << s.q_stride << "/" << s.window_size
      << "/" << s.mask_unit_attn << "/" << s.mlp_hidden;
    if (const auto it = by_shape.find(k.str()); it != by_shape.end()) return it->second;
    const double ms = guarded(run);
    by_shape.emplace(k.str(), ms);
    return ms;
  }

  double block(BlockAt at, TrialType type, bool native, bool onednn, int64_t tokens) override {
    const model::BlockSpec& spec = spec_at(at);
    // The candidate tags the test hooks slow ("bfloat16 native", "float32 onednn", ...).
    const std::string tag = std::string(type_name(type)) + (native ? " native" : " sdpa") +
                            (onednn ? " onednn" : at == BlockAt::Stage1 || at == BlockAt::Stage3 ? " mkl" : "");
    const std::string what = "block " + tag + " " + std::to_string(tokens) + " of " + std::to_string(tokens_at(at));
    return once_per_shape(what, spec, [&] {
      model::functional::OnednnLinearScope linear(onednn);
      model::HieraBlock blk(spec);
      blk->eval();
      blk->to(dtype_of(type));
      blk->attn->flash_4d = opt.flash_attention;
      blk->attn->native_attention = native;
      blk->token_chunk = opt.token_chunk;
      // A sampled run splits its token rows as the whole block would: whether chunking pays
      // grows with the rows (HieraBlockImpl::chunk_pays).
      if (blk->token_chunk > 0) blk->chunk_always = blk->chunk_pays(tokens_at(at));
      auto x = random_input({1, tokens, spec.dim}, type);
      return time_ms(tag, [&] { blk->forward(x); });
    });
  }

  /// One block's attention alone (qkv in, before the projection), through SDPA or the
  /// engine's kernel: the rest of the block is the same either way. Fewer query rows than
  /// tokens are taken as the pooled queries of a q_stride that large: the same kernels
  /// serve them (functional::mask_unit_attention), rows against every key.
  double attention(BlockAt at, TrialType type, bool native, int64_t queries, int64_t tokens) override {
    const model::BlockSpec& spec = spec_at(at);
    const int64_t nw = spec.mask_unit_attn ? tokens / (spec.q_stride * spec.window_size) : 1;
    const int64_t q_stride = tokens / queries;
    const std::string kernel = native ? "native" : "sdpa";
    const std::string tag = type == TrialType::Float32 ? kernel : std::string(type_name(type)) + " " + kernel;
    const std::string what = "attention " + tag + " " + std::to_string(queries) + "x" + std::to_string(tokens);
    return once_per_shape(what, spec, [&] {
      auto qkv = random_input({1, tokens, 3 * spec.dim_out}, type);
      return time_ms(tag, [&] {
        model::functional::mask_unit_attention(qkv, spec.heads, nw, q_stride, opt.flash_attention && nw == 1, {},
                                               native);
      });
    });
  }

  double decoder(TrialType type) override {
    return guarded([&] {
      const auto dtype = dtype_of(type);
      const auto ch = model::feature_channels(cfg.encoder);
      model::DecoderHead head(ch, cfg.decoder_dim, 3);
      head->eval();
      head->fused = opt.fused_decoder;
      head->to(dtype);
      if (opt.channels_last) conv_weights_channels_last(*head);
      std::vector<torch::Tensor> f;
      for (size_t i = 0; i < ch.size(); ++i) {
        const int64_t side = cfg.encoder_size() / (int64_t{4} << i);
        f.push_back(random_input({1, ch[i], side, side}, type));
      }
      return time_ms(std::string(type_name(type)) + " decoder", [&] { head->forward(f); });
    });
  }

  /// One dilated refiner block on a full-width strip of kRefinerStripRows rows; `winograd`:
  /// its float32 convolutions by Winograd (model/conv.h).
  double refiner_block(TrialType type, bool winograd) override {
    return guarded([&] {
      model::functional::WinogradConvScope conv(winograd);
      const auto dtype = dtype_of(type);
      model::RefinerBlock blk(cfg.refiner_channels, cfg.refiner_groups, 8);
      blk->eval();
      blk->to(dtype);
      if (opt.channels_last) conv_weights_channels_last(*blk);
      auto x = random_input({1, cfg.refiner_channels, std::min(kRefinerStripRows, cfg.img_size), cfg.img_size}, type)
                   .contiguous(layout);
      const std::string tag = std::string(type_name(type)) + (winograd ? " winograd" : " direct");
      return time_ms(tag, [&] { blk->forward(x); });
    });
  }

  /// The refiner on one row of tiles (tile_size high, up to two tiles wide): whole-image
  /// code path against the exact tiler, in the chosen precision and layout.
  std::pair<double, double> refiner_tiling(TrialType type, bool winograd) override {
    return guarded([&] {
      model::functional::WinogradConvScope conv(winograd);
      const auto dtype = dtype_of(type);
      model::CNNRefiner ref(cfg.refiner_channels, cfg.refiner_groups);
      ref->eval();
      ref->to(dtype);
      if (opt.channels_last) conv_weights_channels_last(*ref);
      const int64_t t = eng.tile_size;
      auto x = random_input({1, 7, t, std::min(cfg.img_size, 2 * t)}, type).contiguous(layout);
      // Warm-up on a quarter of a tile through both paths: the fused GroupNorm's start-up
      // self-test and each path's first call would otherwise be charged to whichever runs
      // first (a whole tile cost 0.5 s more at 1024 and told nothing more). The timed runs
      // then go as time_ms says: a row of tiles is an eighth of the frame at 1024 with 256 px tiles.
      {
        const int64_t q = std::max<int64_t>(t / 2, 32);
        auto one = x.narrow(2, 0, std::min(q, x.size(2))).narrow(3, 0, std::min(q, x.size(3))).contiguous(layout);
        eng.fused_refiner ? ref->forward_fused(one) : ref->forward_input(one);
        model::tiled_refiner_forward(*ref, one, {t});
      }
      const double whole = time_ms("whole", [&] {
        eng.fused_refiner ? ref->forward_fused(x) : ref->forward_input(x);
      });
      const double tiled = time_ms("tiled", [&] { model::tiled_refiner_forward(*ref, x, {t}); });
      const double rows = static_cast<double>(cfg.img_size) / static_cast<double>(t);
      const double cols = static_cast<double>(cfg.img_size) / static_cast<double>(x.size(3));
      return std::pair{whole * rows * cols, tiled * rows * cols};
    });
  }
};

void note_line(std::string& notes, const std::string& line) { detail::note(notes, line); }

}  // namespace

std::string plan_key(const ModelOptions& m, const EngineSettings& e, const model::GreenFormerConfig& cfg,
                     const torch::Device& device) {
  std::ostringstream k;
  k.imbue(std::locale::classic());  // numbers in every locale
  const auto& enc = cfg.encoder;
  // "plan 3": the float32 attention kernel's per-stage trials, timed with its AVX-512
  // variant where that runs; a plan cached before (which timed a slower kernel, or none) is
  // not reused. "plan 4": each precision's estimate and check time it with its own faster
  // attention kernel (plan 3 compared bf16's best with float32's SDPA, then checked both
  // with SDPA, and kept float32 at 2048 on a Zen 5 where bfloat16 ran 4x faster). The engine
  // version is in every key: a new version times its plans once more. "plan 7": the
  // attention kernel must win by the plan's margin (it won by any amount before).
  k << "engine " << CORRIDORKEY_VERSION_STRING << "; plan 7; torch " << TORCH_VERSION << "; "
    << (device.is_cpu() ? cpu_identity() : device.str()) << "; threads " << at::get_num_threads()
    << "; " << cfg.arch << " " << enc.embed_dim << "/" << enc.num_heads << "/";
  for (size_t i = 0; i < enc.stages.size(); ++i) k << (i ? "-" : "") << enc.stages[i];
  k << "; img " << cfg.img_size;
  if (cfg.encoder_size() != cfg.img_size) k << " backbone " << cfg.encoder_size();
  k << "; precision " << to_string(m.model_precision)
    << (m.mixed_precision ? " mixed" : "") << "; native " << to_string(m.native_attention)
    << "; tiled " << to_string(e.tiled_refiner) << " " << e.tile_size << "; flash "
    << m.flash_attention << " fused-dec " << m.fused_decoder << " fused-ref " << e.fused_refiner
    << " channels-last " << m.channels_last << " routing " << m.token_routing
    << " onednn-linear " << to_string(e.onednn_linear) << " winograd " << to_string(e.winograd_conv);
  if (m.token_chunk > 0) k << " chunk " << m.token_chunk;  // absent at 0: older keys stay valid
  return k.str();
}

PlanFacts plan_facts(const ModelOptions& m, const EngineSettings& e, const model::GreenFormerConfig& cfg,
                     const torch::Device& device) {
  PlanFacts f;
  f.cpu = device.is_cpu();
  f.device = device.str();
  f.rule_precision = resolve_precision(m.model_precision, device.str());
  f.bf16_kernel = kernels::native_attention_available();
  f.f32_kernel = kernels::native_attention_f32_available();
  f.onednn = model::functional::onednn_linear_available();
  if (const char* why = model::functional::winograd_refiner_unavailable(m.channels_last, cfg.refiner_channels))
    f.winograd_unavailable = why;
  const Shapes sh = shapes_of(cfg);
  f.has_global = sh.has_global;
  for (size_t i = 0; i < 4; ++i) {
    f.stage_present[i] = sh.stage_tokens[i] != 0;
    f.stage_windowed[i] = sh.stage[i].mask_unit_attn;
    f.stage_blocks[i] = i < cfg.encoder.stages.size() ? static_cast<double>(cfg.encoder.stages[i]) : 0;
  }
  f.blocks = sh.blocks;
  f.img_size = cfg.img_size;
  const auto budget = refiner_budget_bytes(e, device);
  for (const int64_t bytes : {4, 2})
    (bytes == 4 ? f.whole_fits_4 : f.whole_fits_2) =
        refiner_whole_image_bytes(cfg.img_size, cfg.refiner_channels, bytes, e.fused_refiner) <= budget;
  return f;
}

Planned make_plan(const ModelOptions& m, const EngineSettings& e, const model::GreenFormerConfig& cfg,
                  const torch::Device& device, std::string& notes) {
  Planned out{{}, m, e};
  TunePlan& plan = out.plan;
  plan.mode = m.tune;
  plan.cache_path = tune_cache_resolve(m.tune_cache);
  plan.key = plan_key(m, e, cfg, device);
  const PlanFacts facts = plan_facts(m, e, cfg, device);
  auto by_rules = [&] {
    plan.origin = PlanOrigin::Off;
    plan.decisions = decide_by_rules(m, facts);
    apply_plan(plan, facts, out.model, out.engine);
    out.model.tune = TuneMode::Off;
    return out;
  };
  if (m.tune == TuneMode::Off || !facts.cpu) {
    // CUDA / MPS: trials are not implemented there yet (cuDNN benchmark and flash against
    // memory-efficient attention are the candidates this mechanism is shaped for).
    if (m.tune != TuneMode::Off)
      note_line(notes, "tune: timed trials run on CPUs only for now; " + device.str() + " keeps the flag rules");
    by_rules();
    out.model.tune = m.tune;  // as asked: only the trials failing turns it off
    return out;
  }

  std::string warning;
  std::optional<TunePlan> cached;
  if (m.tune == TuneMode::Auto || m.tune == TuneMode::CacheOnly)
    cached = tune_cache_load(plan.cache_path, plan.key, warning);
  if (!warning.empty()) note_line(notes, warning);
  if (cached) {
    plan.origin = PlanOrigin::Cache;
    plan.decisions = cached->decisions;
    plan.trial_ms = cached->trial_ms;
  } else if (m.tune == TuneMode::CacheOnly) {
    // Never timed here: the flag rules, and the plan's mode says why (a farm task told not
    // to spend its first minutes on trials; `tune` on one node fills the shared cache).
    note_line(notes, "tune cache-only: no plan cached for this machine and configuration in " +
                         (plan.cache_path.empty() ? std::string("(no cache)") : plan.cache_path) +
                         "; the flag rules run (`corridorkey-engine tune` with the same options caches one)");
    by_rules();
    out.model.tune = m.tune;
    return out;
  } else {
    try {
      c10::InferenceMode guard;
      const auto t_start = timing::Clock::now();
      note_line(notes, "tune: timing " + cfg.arch + " blocks at img_size " + std::to_string(cfg.img_size) +
                           (cfg.encoder_size() != cfg.img_size
                                ? " (backbone " + std::to_string(cfg.encoder_size()) + ")" : std::string()) +
                           " on " + cpu_identity() + ", " + std::to_string(at::get_num_threads()) +
                           " threads (once; " +
                           (plan.cache_path.empty() ? std::string("no cache folder, kept in memory")
                                                    : "to be cached in " + plan.cache_path) + ")");
      const Shapes sh = shapes_of(cfg);
      Trials trials(m, e, cfg, sh);
      RunMeasurements measured(trials, trial_shapes(sh), !whole_trials());
      MemoMeasurements once(measured);
      plan.decisions = decide_by_trials(m, e, facts, once);
      plan.trial_ms = timing::ms_since(t_start);
      plan.origin = PlanOrigin::Trials;
      std::string w;
      if (!tune_cache_store(plan.cache_path, plan, w)) plan.origin = PlanOrigin::Memory;
      if (!w.empty()) note_line(notes, w);
    } catch (const std::exception& x) {
      // A trial that cannot run (out of memory at a large size) must not stop the job: the
      // flag rules stand, as with tune off, and nothing is cached.
      const auto* ce = dynamic_cast<const c10::Error*>(&x);
      std::string msg = ce ? ce->what_without_backtrace() : x.what();
      note_line(notes, "tune: trials failed (" + msg.substr(0, msg.find('\n')).substr(0, 200) +
                           "); using the flag rules");
      plan.decisions.clear();
      return by_rules();
    }
  }
  complete_decisions(plan.decisions, m, e, facts, notes);
  apply_plan(plan, facts, out.model, out.engine);
  return out;
}

}  // namespace corridorkey::detail
