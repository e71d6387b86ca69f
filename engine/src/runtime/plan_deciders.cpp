#include "runtime/plan_deciders.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace corridorkey::detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A whole number of milliseconds, as a message shows it.
std::string ms_text(double ms) {
  std::ostringstream s;
  s.imbue(std::locale::classic());
  s << static_cast<long long>(std::llround(ms));
  return s.str();
}

TuneChoice precision_choice(Precision p) {
  switch (p) {
    case Precision::BFloat16: return TuneChoice::BFloat16;
    case Precision::Float16: return TuneChoice::Float16;
    default: return TuneChoice::Float32;
  }
}

Precision precision_of(TuneChoice c) {
  return c == TuneChoice::BFloat16 ? Precision::BFloat16 : c == TuneChoice::Float16 ? Precision::Float16 : Precision::Float32;
}

/// The engine's attention kernel over SDPA only when faster by the plan's margin: the two
/// agree within rounding, and a kernel that wins by a few percent in one trial (a shared
/// machine's noise) would otherwise flip from plan to plan.
bool kernel_wins(double native, double sdpa) { return native < (1.0 - kPlanMargin) * sdpa; }

TuneChoice switch_choice(AutoSwitch s) { return s == AutoSwitch::On ? TuneChoice::True : TuneChoice::False; }

/// What is open to the plan, from the options and the facts.
struct Open {
  bool precision, native_bf16, native_f32, onednn, winograd;
  bool bf16_kernel;  // the bf16 kernel may run (flash attention on a CPU that has it)
  Open(const ModelOptions& m, const EngineSettings& e, const PlanFacts& f)
      : precision(m.model_precision == Precision::Auto && f.cpu && !m.mixed_precision),
        native_bf16(m.native_attention == AutoSwitch::Auto && f.cpu && m.flash_attention && f.bf16_kernel),
        native_f32(m.native_attention == AutoSwitch::Auto && m.flash_attention && !m.mixed_precision && f.f32_kernel),
        onednn(e.onednn_linear == AutoSwitch::Auto && !m.mixed_precision && f.onednn),
        winograd(e.winograd_conv == AutoSwitch::Auto && !m.mixed_precision && f.winograd_unavailable.empty()),
        bf16_kernel(f.cpu && m.flash_attention && f.bf16_kernel) {}
};

/// The deciders of one timed plan, sharing the trials.
class Deciders {
 public:
  Deciders(const ModelOptions& m, const EngineSettings& e, const PlanFacts& f, Measurements& t)
      : m_(m), e_(e), f_(f), t_(t), open_(m, e, f) {}

  std::vector<TuneDecision> run() {
    std::vector<TuneDecision> out;
    const Precision precision = decide_precision(out);
    if (precision == Precision::Float32 && open_.native_f32) decide_native_f32(out);
    if (precision == Precision::Float32 && open_.onednn) decide_onednn(out);
    if (precision == Precision::Float32 && open_.winograd) decide_winograd(out);
    if (e_.tiled_refiner == RefinerTiling::Auto && f_.img_size > e_.tile_size && f_.whole_fits(precision))
      decide_tiling(out, precision);
    return out;
  }

 private:
  /// The float32 refiner block, direct or by Winograd (+inf where Winograd cannot run: a
  /// kernel that fails costs its own choice, not the plan).
  double refiner32(bool winograd) {
    if (!winograd) return t_.refiner_block(TrialType::Float32, false);
    try {
      return t_.refiner_block(TrialType::Float32, true);
    } catch (const std::exception&) {
      return kInf;
    }
  }

  /// The float32 stage-3 global block with its Linear layers through oneDNN (+inf where
  /// that cannot run).
  double onednn_block3(bool native) {
    try {
      return t_.block(BlockAt::Global3, TrialType::Float32, native, true);
    } catch (const std::exception&) {
      return kInf;
    }
  }

  /// The bf16 kernel against SDPA in the stage-3 and stage-4 global blocks: the same result
  /// within bf16 rounding, so the faster wins. Returns stage 3's better time.
  double decide_native_bf16(std::vector<TuneDecision>& out) {
    double best3 = 0;
    if (!f_.has_global) return best3;
    for (auto [option, at] : {std::pair{TuneOption::NativeAttentionStage3, BlockAt::Global3},
                              std::pair{TuneOption::NativeAttentionStage4, BlockAt::Global4}}) {
      const double sdpa = t_.block(at, TrialType::BFloat16, false, false);
      const double nat = t_.block(at, TrialType::BFloat16, true, false);
      const bool use = kernel_wins(nat, sdpa);
      out.push_back({option, choice_of(use), DecisionSource::Plan, "", {{"native", nat}, {"sdpa", sdpa}}});
      if (at == BlockAt::Global3) {
        best3 = std::min(nat, sdpa);
        native16_3_ = use;
      }
    }
    return best3;
  }

  /// model_precision: float32 or bfloat16 where open (Auto on a CPU, no autocast), from a
  /// per-frame estimate of each; the flag rule (or the explicit value) otherwise.
  Precision decide_precision(std::vector<TuneDecision>& out) {
    if (!open_.precision) {
      const Precision p = f_.rule_precision;
      out.push_back({TuneOption::ModelPrecision, precision_choice(p),
                     m_.model_precision == Precision::Auto ? DecisionSource::Rule : DecisionSource::Flag,
                     m_.mixed_precision ? "mixed_precision autocasts" : "", {}});
      if (p == Precision::BFloat16 && open_.native_bf16) decide_native_bf16(out);
      return p;
    }
    std::vector<TuneDecision> native;
    double est32 = 0, est16 = 0;
    bool bf16_cut = false;
    for (const bool bf16 : {false, true}) {
      const TrialType type = bf16 ? TrialType::BFloat16 : TrialType::Float32;
      // Cheapest trial first. bfloat16 stops as soon as its partial estimate passes
      // float32's whole one: it cannot be chosen (emulated bf16 ran 3-5x slower on a Zen 3).
      auto over = [&](double partial) { return bf16 && partial >= est32; };
      // float32 with its faster refiner convolutions, as with its Linear layers below.
      const double ref = bf16 ? t_.refiner_block(type, false)
                              : (open_.winograd ? std::min(refiner32(false), refiner32(true)) : refiner32(false));
      double e = f_.frame_estimate(0, 0, ref);
      if (!over(e)) {
        const double dec = t_.decoder(type);
        e = f_.frame_estimate(0, dec, ref);
        if (!over(e)) {
          // Each precision with its faster kernel: at 2048 on a Zen 5, a float32 stage-3
          // block ran 2.4 s with the fp32 kernel against 4.8 s through SDPA.
          double blk3 = 0;
          if (bf16 && open_.native_bf16) {
            blk3 = decide_native_bf16(native);
          } else if (!bf16 && open_.native_f32 && f_.has_global) {
            const double sdpa = t_.block(BlockAt::Global3, type, false, false);
            const double nat = t_.block(BlockAt::Global3, type, true, false);
            native32_3_ = kernel_wins(nat, sdpa);
            blk3 = std::min(nat, sdpa);
          } else if (f_.has_global) {
            blk3 = t_.block(BlockAt::Global3, type, false, false);
          }
          // float32 with its faster Linear GEMM too (oneDNN ran a float32 frame in 0.72x
          // MKL's time on a Zen 5), so bfloat16 is weighed against the float32 that runs.
          if (!bf16 && open_.onednn && f_.has_global) blk3 = std::min(blk3, onednn_block3(native32_3_));
          e = f_.frame_estimate(blk3, dec, ref);
        }
      }
      bf16_cut = over(e);
      (bf16 ? est16 : est32) = e;
    }
    // bfloat16 only when clearly faster: float32 is the exact path. The choice is cached and
    // moves the matte, so a bf16 win must also hold without the decoders (the stage-3 block
    // and the refiner alone, each with the kernel it would run).
    Precision precision = est16 < (1.0 - kPlanMargin) * est32 ? Precision::BFloat16 : Precision::Float32;
    std::string why = bf16_cut ? "bfloat16 trials stopped once past float32's estimate" : "";
    if (precision == Precision::BFloat16) {
      double r32 = refiner32(false);
      if (open_.winograd) r32 = std::min(r32, refiner32(true));
      const double r16 = t_.refiner_block(TrialType::BFloat16, false);
      double b32 = 0, b16 = 0;
      if (f_.has_global) {
        b32 = t_.block(BlockAt::Global3, TrialType::Float32, native32_3_, false);
        if (open_.onednn) b32 = std::min(b32, onednn_block3(native32_3_));
        b16 = t_.block(BlockAt::Global3, TrialType::BFloat16, native16_3_, false);
      }
      const double again16 = f_.frame_estimate(b16, 0, r16), again32 = f_.frame_estimate(b32, 0, r32);
      if (!(again16 < (1.0 - kPlanMargin) * again32)) {
        precision = Precision::Float32;
        // The times shown are the first estimates, which had bfloat16 ahead: say why not.
        why = "bfloat16's lead did not hold when its stage-3 block and refiner were timed again (" +
              ms_text(again16) + " ms against float32's " + ms_text(again32) + " ms; it must be 10% faster)";
      }
    }
    out.push_back({TuneOption::ModelPrecision, precision_choice(precision), DecisionSource::Plan, why,
                   {{"float32", est32}, {"bfloat16", est16}}});
    if (precision == Precision::BFloat16)
      for (auto& d : native) out.push_back(d);
    return precision;
  }

  /// The float32 kernel per encoder stage (windowed and global): the same result within
  /// fp32 rounding, so the faster wins, shape by shape.
  void decide_native_f32(std::vector<TuneDecision>& out) {
    for (int i = 0; i < 4; ++i) {
      if (!f_.stage_present[static_cast<size_t>(i)]) continue;
      const double sdpa = t_.attention(i, false);
      const double nat = t_.attention(i, true);
      out.push_back({native_attention_stage(i + 1), choice_of(kernel_wins(nat, sdpa)), DecisionSource::Plan, "",
                     {{"native", nat}, {"sdpa", sdpa}}});
    }
  }

  /// float32 Linear layers through oneDNN's matmul or MKL's GEMM: timed on one block of stage
  /// 1 (narrow, many tokens) and one of stage 3 (wide, few), each weighed as the blocks of its
  /// shape family (stages 1-2, 3-4): every Hiera block costs the same FLOPs.
  void decide_onednn(std::vector<TuneDecision>& out) {
    auto native_at = [&](size_t i) {
      if (!m_.flash_attention && !f_.stage_windowed[i]) return false;
      if (m_.native_attention == AutoSwitch::On) return true;
      for (const auto& d : out)
        if (d.option == native_attention_stage(static_cast<int>(i) + 1)) return d.on();
      return false;
    };
    double onednn = 0, mkl = 0;
    try {  // a oneDNN that cannot run here costs this choice only, not the whole plan
      for (size_t i : {size_t{0}, size_t{2}}) {
        if (!f_.stage_present[i]) continue;
        const double w = f_.stage_blocks[i] + (i + 1 < 4 ? f_.stage_blocks[i + 1] : 0);
        const auto at = i == 0 ? BlockAt::Stage1 : BlockAt::Stage3;
        mkl += w * t_.block(at, TrialType::Float32, native_at(i), false);
        onednn += w * t_.block(at, TrialType::Float32, native_at(i), true);
      }
      if (mkl > 0)
        out.push_back({TuneOption::OnednnLinear, choice_of(onednn < (1.0 - kPlanMargin) * mkl), DecisionSource::Plan,
                       "", {{"onednn", onednn}, {"mkl", mkl}}});
    } catch (const std::exception& e) {
      std::string m = e.what();
      out.push_back({TuneOption::OnednnLinear, TuneChoice::False, DecisionSource::Only,
                     "its trial failed: " + m.substr(0, m.find('\n')).substr(0, 160), {}});
    }
  }

  /// The refiner's float32 convolutions by Winograd or oneDNN's direct convolution: the same
  /// result within fp32 rounding, so the faster wins (one dilated block on a strip).
  void decide_winograd(std::vector<TuneDecision>& out) {
    const double direct = refiner32(false), wino = refiner32(true);
    if (std::isfinite(wino))
      out.push_back({TuneOption::WinogradConv, choice_of(wino < (1.0 - kPlanMargin) * direct), DecisionSource::Plan,
                     "", {{"winograd", wino}, {"direct", direct}}});
    else  // a kernel that cannot run here costs this choice only, not the whole plan
      out.push_back({TuneOption::WinogradConv, TuneChoice::False, DecisionSource::Only, "its trial failed", {}});
  }

  /// The whole-image refiner against the exact tiler, in the convolution the refiner will
  /// run (Winograd moves both sides, not equally): both exact within fp32 rounding, so the
  /// faster wins, ties stay whole.
  void decide_tiling(std::vector<TuneDecision>& out, Precision precision) {
    bool winograd = false;
    if (precision == Precision::Float32 && !m_.mixed_precision) {
      winograd = e_.winograd_conv == AutoSwitch::On;
      for (const auto& d : out)
        if (d.option == TuneOption::WinogradConv) winograd = d.on();
    }
    const auto [whole, tiled] = t_.refiner_tiling(trial_type(precision), winograd);
    out.push_back({TuneOption::TiledRefiner, choice_of(tiled < (1.0 - kPlanMargin) * whole), DecisionSource::Plan, "",
                   {{"whole", whole}, {"tiled", tiled}}});
  }

  const ModelOptions& m_;
  const EngineSettings& e_;
  const PlanFacts& f_;
  Measurements& t_;
  const Open open_;
  bool native16_3_ = false, native32_3_ = false;  // the faster stage-3 kernel per precision
};

const TuneDecision* find(const std::vector<TuneDecision>& ds, TuneOption o) {
  for (const auto& d : ds)
    if (d.option == o) return &d;
  return nullptr;
}

void erase(std::vector<TuneDecision>& ds, TuneOption o) {
  ds.erase(std::remove_if(ds.begin(), ds.end(), [o](const TuneDecision& d) { return d.option == o; }), ds.end());
}

/// The precision that runs, from the decisions (the explicit value where there is none).
Precision decided_precision(const std::vector<TuneDecision>& ds, const ModelOptions& m, const PlanFacts& f) {
  const auto* p = find(ds, TuneOption::ModelPrecision);
  if (p && m.model_precision == Precision::Auto && f.cpu) return precision_of(p->value);
  return m.model_precision;
}

}  // namespace

TrialType trial_type(Precision p) {
  return p == Precision::BFloat16 ? TrialType::BFloat16 : p == Precision::Float16 ? TrialType::Float16 : TrialType::Float32;
}

double PlanFacts::frame_estimate(double block3, double decoder, double refiner) const {
  const double strips = static_cast<double>(img_size) / static_cast<double>(std::min<int64_t>(kRefinerStripRows, img_size));
  return block3 * static_cast<double>(blocks) + 2 * decoder + 4 * strips * refiner;
}

template <class F>
std::pair<double, double> MemoMeasurements::memo(Key k, F&& run) {
  if (auto it = answers_.find(k); it != answers_.end()) {
    if (it->second.failure) std::rethrow_exception(it->second.failure);
    return it->second.ms;
  }
  ++trials_;
  Answer a;
  try {
    a.ms = run();
  } catch (...) {
    a.failure = std::current_exception();
  }
  answers_.emplace(k, a);
  if (a.failure) std::rethrow_exception(a.failure);
  return a.ms;
}

double MemoMeasurements::block(BlockAt at, TrialType type, bool native, bool onednn) {
  return memo({0, static_cast<int>(at), static_cast<int>(type), native, onednn},
              [&] { return std::pair{inner_.block(at, type, native, onednn), 0.0}; }).first;
}
double MemoMeasurements::attention(int stage, bool native) {
  return memo({1, stage, native, 0, 0}, [&] { return std::pair{inner_.attention(stage, native), 0.0}; }).first;
}
double MemoMeasurements::decoder(TrialType type) {
  return memo({2, static_cast<int>(type), 0, 0, 0}, [&] { return std::pair{inner_.decoder(type), 0.0}; }).first;
}
double MemoMeasurements::refiner_block(TrialType type, bool winograd) {
  return memo({3, static_cast<int>(type), winograd, 0, 0},
              [&] { return std::pair{inner_.refiner_block(type, winograd), 0.0}; }).first;
}
std::pair<double, double> MemoMeasurements::refiner_tiling(TrialType type, bool winograd) {
  return memo({4, static_cast<int>(type), winograd, 0, 0}, [&] { return inner_.refiner_tiling(type, winograd); });
}

std::vector<TuneDecision> decide_by_trials(const ModelOptions& model, const EngineSettings& engine,
                                           const PlanFacts& facts, Measurements& trials) {
  return Deciders(model, engine, facts, trials).run();
}

std::vector<TuneDecision> decide_by_rules(const ModelOptions& m, const PlanFacts& f) {
  const bool automatic = m.model_precision == Precision::Auto;
  return {{TuneOption::ModelPrecision, precision_choice(f.rule_precision),
           automatic ? DecisionSource::Rule : DecisionSource::Flag,
           automatic ? (f.cpu ? "CPU flags (amx_bf16 / avx512_bf16 -> bfloat16)"
                              : "float16 on CUDA and MPS; timed trials run on CPUs only")
                     : "",
           {}}};
}

void complete_decisions(std::vector<TuneDecision>& ds, const ModelOptions& m, const EngineSettings& e,
                        const PlanFacts& f, std::string& notes) {
  auto note = [&](const std::string& line) { notes += (notes.empty() ? "" : "\n") + line; };
  const Precision p = decided_precision(ds, m, f);
  const bool bf16 = p == Precision::BFloat16;
  const bool f32 = p == Precision::Float32 && !m.mixed_precision;
  const bool cpu = f.cpu;
  const bool bf16_kernel = cpu && m.flash_attention && f.bf16_kernel;
  if (m.native_attention == AutoSwitch::Auto) {
    if (!find(ds, TuneOption::NativeAttentionStage3) && !find(ds, TuneOption::NativeAttentionStage1)) {
      const char* why = !m.flash_attention ? "needs flash_attention"
                        : !cpu             ? "CPU kernels only"
                        : f32 && !f.f32_kernel ? "the float32 kernel needs AVX2 + FMA, which this CPU lacks"
                        : f32              ? "no attention block in this architecture"
                        : !bf16            ? "kernels for bfloat16 and float32 only"
                        : !bf16_kernel     ? "the bf16 kernel needs AVX-512 BF16, which this CPU lacks"
                                           : "no global attention in this architecture";
      ds.push_back({TuneOption::NativeAttention, TuneChoice::False, DecisionSource::Only, why, {}});
    }
  } else if ((bf16 && bf16_kernel) || (f32 && cpu && f.f32_kernel)) {
    ds.push_back({TuneOption::NativeAttention, switch_choice(m.native_attention), DecisionSource::Flag, "", {}});
  }
  // oneDNN Linear layers and Winograd convolutions are float32 CPU paths: in any other
  // precision a plan's (or a hand-edited cache's) choice of them runs nothing, so it is
  // dropped from the report, and an explicit true is told that it has no effect.
  if (!(f32 && cpu)) {
    erase(ds, TuneOption::OnednnLinear);
    erase(ds, TuneOption::WinogradConv);
    for (auto [name, v] : {std::pair{"onednn_linear", e.onednn_linear}, std::pair{"winograd_conv", e.winograd_conv}})
      if (v == AutoSwitch::On)
        note(std::string(name) + " true has no effect: it applies to float32 on a CPU, and this engine runs " +
             (cpu ? std::string(to_string(p)) + (m.mixed_precision ? " (mixed)" : "") : f.device));
  }
  if (e.onednn_linear == AutoSwitch::Auto) {
    if (!find(ds, TuneOption::OnednnLinear) && f32 && cpu)
      ds.push_back({TuneOption::OnednnLinear, TuneChoice::False, DecisionSource::Only,
                    f.onednn ? "not timed (no encoder block to time)" : "this LibTorch has no oneDNN matmul", {}});
  } else if (f32 && cpu) {
    ds.push_back({TuneOption::OnednnLinear, switch_choice(e.onednn_linear), DecisionSource::Flag, "", {}});
  }
  {
    // Why the Winograd path cannot run here, where it cannot (empty where it can).
    const std::string cannot = !cpu || !f32 ? "" : f.winograd_unavailable;
    if (e.winograd_conv == AutoSwitch::Auto) {
      if (!find(ds, TuneOption::WinogradConv) && f32 && cpu)
        ds.push_back({TuneOption::WinogradConv, TuneChoice::False, DecisionSource::Only,
                      cannot.empty() ? "not timed" : cannot, {}});
    } else if (f32 && cpu) {
      // An explicit true the kernel cannot honour is said, not reported as running.
      if (e.winograd_conv == AutoSwitch::On && !cannot.empty()) {
        ds.push_back({TuneOption::WinogradConv, TuneChoice::False, DecisionSource::Only, cannot, {}});
        note("winograd_conv true has no effect: " + cannot);
      } else {
        ds.push_back({TuneOption::WinogradConv, switch_choice(e.winograd_conv), DecisionSource::Flag, "", {}});
      }
    }
  }
  if (e.tiled_refiner == RefinerTiling::Auto) {
    if (!f.whole_fits(p)) {
      // Replaces a cached trial's choice in the report: memory decides today.
      erase(ds, TuneOption::TiledRefiner);
      ds.push_back({TuneOption::TiledRefiner, TuneChoice::True, DecisionSource::Only,
                    "the whole image exceeds refiner_memory_budget_mb", {}});
    } else if (!find(ds, TuneOption::TiledRefiner) && f.img_size <= e.tile_size) {
      ds.push_back({TuneOption::TiledRefiner, TuneChoice::False, DecisionSource::Only, "img_size <= tile_size", {}});
    }
  } else {
    ds.push_back({TuneOption::TiledRefiner, e.tiled_refiner == RefinerTiling::On ? TuneChoice::True : TuneChoice::False,
                  DecisionSource::Flag, "", {}});
  }
}

void apply_plan(const TunePlan& plan, const PlanFacts& f, ModelOptions& m, EngineSettings& e) {
  if (plan.origin == PlanOrigin::Off) {
    // The flag rules: the kernels a plan would time run where they apply (the native
    // attention kernels), LibTorch's own paths otherwise; tiling by the memory rule.
    if (m.model_precision == Precision::Auto && f.cpu) m.model_precision = f.rule_precision;
    if (m.native_attention == AutoSwitch::Auto) m.native_attention = AutoSwitch::On;
    if (e.onednn_linear == AutoSwitch::Auto) e.onednn_linear = AutoSwitch::Off;
    if (e.winograd_conv == AutoSwitch::Auto) e.winograd_conv = AutoSwitch::Off;
    return;
  }
  m.model_precision = decided_precision(plan.decisions, m, f);
  auto decided = [&](TuneOption o) {
    const auto* d = plan.find(o);
    return d && d->on() ? AutoSwitch::On : AutoSwitch::Off;
  };
  if (e.onednn_linear == AutoSwitch::Auto) e.onednn_linear = decided(TuneOption::OnednnLinear);
  if (e.winograd_conv == AutoSwitch::Auto) e.winograd_conv = decided(TuneOption::WinogradConv);
  if (e.tiled_refiner == RefinerTiling::Auto && f.whole_fits(m.model_precision))
    if (const auto* t = plan.find(TuneOption::TiledRefiner); t && t->source == DecisionSource::Plan)
      e.tiled_refiner = t->on() ? RefinerTiling::On : RefinerTiling::Off;
}

}  // namespace corridorkey::detail
