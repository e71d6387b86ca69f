// Sampled plan trials (plan_trials.h) against the whole ones, on fake machines whose time
// for a run is a function of its candidate, operation and shape: FLOPs of hiera_base_plus's
// blocks at the run's token counts over a rate per type and kernel, global attention with a
// cost per call that grows with the keys alone, times a deterministic jitter per run. With no jitter the sampled answers must equal the whole ones; over many
// random machines with jitter, the sampled plan must decide every clear decision as the
// whole trials do (clear: the whole trials decide it alike whatever the jitter, and its two
// sides are not within 5% of the margin's edge).
#include <catch2/catch.hpp>

#include "runtime/plan_trials.h"
#include "unit/plan_options.h"

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>

using namespace corridorkey;
using namespace corridorkey::detail;
using corridorkey::test::open_engine;
using corridorkey::test::open_model;

namespace {

/// hiera_base_plus's timed blocks at img_size: widths 112/224/448/896, MLP 4x; stage 1
/// windows of 64 tokens, stage 2's plain blocks 16; stages 3 and 4 global.
struct BlockDims {
  double dim = 0, hidden = 0;
  TrialBlockShape shape;
};
std::array<BlockDims, 6> base_plus_blocks(int64_t img_size) {
  const int64_t n1 = (img_size / 4) * (img_size / 4);
  const BlockDims s1{112, 448, {n1, 64, 1}}, s2{224, 896, {n1 / 4, 16, 1}}, s3{448, 1792, {n1 / 16, 0, 1}},
      s4{896, 3584, {n1 / 64, 0, 1}};
  return {s3, s4, s1, s2, s3, s4};  // by BlockAt: Global3, Global4, Stage1..Stage4
}
TrialShapes shapes_of(const std::array<BlockDims, 6>& b) {
  TrialShapes t;
  for (size_t i = 0; i < b.size(); ++i) t[i] = b[i].shape;
  return t;
}

PlanFacts base_plus_facts(int64_t img_size, bool bf16_kernel) {
  PlanFacts f;
  f.rule_precision = bf16_kernel ? Precision::BFloat16 : Precision::Float32;
  f.bf16_kernel = bf16_kernel;
  f.f32_kernel = f.onednn = true;
  f.has_global = true;
  f.stage_present = {true, true, true, true};
  f.stage_windowed = {true, true, false, false};
  f.stage_blocks = {2, 3, 16, 3};
  f.blocks = 24;
  f.img_size = img_size;
  return f;
}

/// A machine in numbers: milliseconds per run from FLOPs over rates, each factor a time
/// ratio against float32 through LibTorch's own paths.
struct FakeRuns final : TrialRuns {
  std::array<BlockDims, 6> dims;
  double linear_gflops = 100, attention_gflops = 60;
  double bf16 = 0.5;              // every bfloat16 run against float32's
  double native32_global = 0.8, native32_windowed = 0.5, native16 = 0.7;  // kernels against SDPA
  double onednn = 0.8, winograd = 0.7, tiled = 1.3;
  double decoder_ms = 300, refiner_ms = 40, tiling_ms = 3000;
  double jitter = 0;  // each run's time off by up to this share, fixed per run and seed
  uint64_t seed = 0;
  double overhead_ms = 0;  // a fixed cost per run
  double spent_ms = 0;     // every run answered, in all

  explicit FakeRuns(int64_t img_size) : dims(base_plus_blocks(img_size)) {}

  double type_factor(TrialType t) const { return t == TrialType::Float32 ? 1.0 : bf16; }
  double kernel_factor(const BlockDims& d, TrialType t, bool native) const {
    if (!native) return 1.0;
    if (t != TrialType::Float32) return d.shape.windowed() ? 1.0 : native16;  // bf16: global only
    return d.shape.windowed() ? native32_windowed : native32_global;
  }
  /// The run's time with its jitter, from a hash of what it runs.
  double answer(const std::string& run, double ms) {
    if (jitter > 0) {
      std::seed_seq s(run.begin(), run.end());
      std::mt19937_64 g(s);
      g.seed(g() ^ seed);
      ms *= 1.0 + jitter * std::uniform_real_distribution<double>(-1, 1)(g);
    }
    ms += overhead_ms;
    spent_ms += ms;
    return ms;
  }
  static double attention_flops(const BlockDims& d, int64_t queries, int64_t tokens) {
    const double keys = d.shape.windowed() ? static_cast<double>(d.shape.unit_tokens) : static_cast<double>(tokens);
    return 4.0 * static_cast<double>(queries) * keys * d.dim;
  }
  /// What a call costs before its first row: K and V laid out, per key (as the native
  /// kernel packs them), as much as this many query rows' worth.
  double key_setup_rows = 600;
  double attention_ms(const BlockDims& d, TrialType t, bool native, int64_t queries, int64_t tokens) const {
    const double setup = d.shape.windowed() ? 0 : key_setup_rows;
    return type_factor(t) * attention_flops(d, queries, tokens) * (1 + setup / static_cast<double>(queries)) /
           (attention_gflops * 1e6) * kernel_factor(d, t, native);
  }
  static std::string name(BlockAt at, TrialType t, bool native, bool onednn) {
    return std::to_string(static_cast<int>(at)) + "/" + std::to_string(static_cast<int>(t)) + (native ? "n" : "s") +
           (onednn ? "o" : "m");
  }

  double block(BlockAt at, TrialType t, bool native, bool linear, int64_t tokens) override {
    const auto& d = dims[static_cast<size_t>(at)];
    const double n = static_cast<double>(tokens);
    const double lin = 2 * n * (4 * d.dim * d.dim + 2 * d.dim * d.hidden);
    const double ms = type_factor(t) * lin / (linear_gflops * 1e6) * (linear ? onednn : 1.0) +
                      attention_ms(d, t, native, tokens / d.shape.q_stride, tokens);
    return answer("block " + name(at, t, native, linear) + " " + std::to_string(tokens), ms);
  }
  double attention(BlockAt at, TrialType t, bool native, int64_t queries, int64_t tokens) override {
    const auto& d = dims[static_cast<size_t>(at)];
    const double ms = attention_ms(d, t, native, queries, tokens);
    return answer("attention " + name(at, t, native, false) + " " + std::to_string(queries) + "x" +
                      std::to_string(tokens), ms);
  }
  double decoder(TrialType t) override {
    return answer("decoder " + std::to_string(static_cast<int>(t)), decoder_ms * type_factor(t));
  }
  double refiner_block(TrialType t, bool wino) override {
    return answer("refiner " + std::to_string(static_cast<int>(t)) + (wino ? "w" : ""),
                  refiner_ms * type_factor(t) * (wino ? winograd : 1.0));
  }
  std::pair<double, double> refiner_tiling(TrialType t, bool wino) override {
    const double whole = tiling_ms * type_factor(t) * (wino ? winograd : 1.0);
    const std::string k = std::to_string(static_cast<int>(t)) + (wino ? "w" : "");
    return {answer("whole " + k, whole), answer("tiled " + k, whole * tiled)};
  }
};


std::vector<TuneDecision> decide(FakeRuns& runs, const PlanFacts& f, bool sampled) {
  RunMeasurements measured(runs, shapes_of(runs.dims), sampled);
  MemoMeasurements once(measured);
  return decide_by_trials(open_model(), open_engine(), f, once);
}

const TuneDecision* find(const std::vector<TuneDecision>& ds, TuneOption o) {
  for (const auto& d : ds)
    if (d.option == o) return &d;
  return nullptr;
}

/// Its two sides are not within 5% of the margin's edge either way round.
bool clear_of_margin(const TuneDecision& d) {
  if (d.times_ms.size() != 2) return true;
  const double a = d.times_ms[0].second, b = d.times_ms[1].second;
  const double r = std::min(a, b) / std::max(a, b);
  return r < (1.0 - kPlanMargin) - 0.05 || r > (1.0 - kPlanMargin) + 0.05;
}

}  // namespace

TEST_CASE("sampling factors: powers of two, whole mask units, no fewer rows than the minimum", "[unit][plan]") {
  const auto at1024 = base_plus_blocks(1024), at2048 = base_plus_blocks(2048);
  CHECK(sampling_factor(at2048[0].shape) == 8);  // stage 3 at 2048: 16384 tokens, 2048 rows timed
  CHECK(sampling_factor(at1024[0].shape) == 4);  // 4096 tokens: 1024 rows
  CHECK(sampling_factor(at1024[1].shape) == 1);  // stage 4 at 1024: 1024 tokens, timed whole
  CHECK(sampling_factor(at2048[1].shape) == 4);
  CHECK(sampling_factor(at1024[2].shape) == 8);  // stage 1 at 1024: 65536 tokens in windows of 64
  CHECK(sampling_factor(at1024[3].shape) == 4);  // stage 2: 16384 tokens, no fewer than 4096
  CHECK(sampling_factor({4096, 0, 4}) == 1);     // a pooling global block is timed whole
  CHECK(sampling_factor({3 * 4096, 4096, 1}) == 1);  // halving would split a mask unit
  CHECK(sampling_factor({}) == 1);
}

TEST_CASE("a machine without jitter: every sampled answer equals the whole one", "[unit][plan]") {
  for (const int64_t size : {1024, 2048}) {
    FakeRuns runs(size);
    RunMeasurements whole(runs, shapes_of(runs.dims), false), sampled(runs, shapes_of(runs.dims), true);
    for (int at = 0; at < 6; ++at)
      for (const auto type : {TrialType::Float32, TrialType::BFloat16})
        for (const bool native : {false, true})
          for (const bool onednn : {false, true}) {
            INFO("size " << size << " block " << at << " type " << static_cast<int>(type) << " native " << native
                         << " onednn " << onednn);
            const auto b = static_cast<BlockAt>(at);
            CHECK(sampled.block(b, type, native, onednn) == Approx(whole.block(b, type, native, onednn)).epsilon(1e-9));
          }
    for (int stage = 0; stage < 4; ++stage)
      for (const bool native : {false, true}) {
        INFO("size " << size << " attention stage " << stage << " native " << native);
        CHECK(sampled.attention(stage, native) == Approx(whole.attention(stage, native)).epsilon(1e-9));
      }
  }
}

TEST_CASE("random machines: the sampled plan decides as the whole trials wherever the decision is clear",
          "[unit][plan]") {
  std::mt19937_64 g(38);
  auto u = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g); };
  std::map<std::string, int> checked;  // "option value" -> clear decisions compared
  int decisions = 0, clear = 0;
  for (int scenario = 0; scenario < 240; ++scenario) {
    const int64_t size = scenario % 2 ? 2048 : 1024;
    FakeRuns runs(size);
    runs.bf16 = u(0.3, 2.5);
    runs.native32_global = u(0.5, 1.5);
    runs.native32_windowed = u(0.4, 1.5);
    runs.native16 = u(0.5, 1.5);
    runs.onednn = u(0.4, 1.4);
    runs.winograd = u(0.5, 1.5);
    runs.tiled = u(0.7, 1.4);
    runs.decoder_ms = u(50, 2000);
    runs.refiner_ms = u(5, 200);
    runs.tiling_ms = u(500, 8000);
    runs.overhead_ms = 0.05;  // a kernel launch's worth: the sampled plan pays it k times
    const auto facts = base_plus_facts(size, scenario % 3 != 0);
    const auto truth = decide(runs, facts, false);  // whole trials, no jitter
    runs.jitter = 0.02;
    std::vector<std::vector<TuneDecision>> whole, sampled;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      runs.seed = seed;
      whole.push_back(decide(runs, facts, false));
      sampled.push_back(decide(runs, facts, true));
    }
    // Every other decision follows the precision: it is compared in the sampled plans that
    // chose the precision the truth did (all of them, where the precision is clear).
    const TuneChoice precision = find(truth, TuneOption::ModelPrecision)->value;
    for (const auto& d : truth) {
      ++decisions;
      bool is_clear = clear_of_margin(d);
      for (const auto& w : whole) {
        const auto* wd = find(w, d.option);
        is_clear = is_clear && wd && wd->value == d.value;
      }
      if (!is_clear) continue;
      ++clear;
      ++checked[std::string(to_string(d.option)) + " " + to_string(d.value)];
      for (const auto& s : sampled) {
        if (d.option != TuneOption::ModelPrecision && find(s, TuneOption::ModelPrecision)->value != precision) continue;
        const auto* sd = find(s, d.option);
        INFO("scenario " << scenario << " (img_size " << size << "): " << to_string(d.option));
        REQUIRE(sd != nullptr);
        CHECK(to_string(sd->value) == std::string(to_string(d.value)));
      }
    }
  }
  // Every decision came out both ways among the clear ones, and most decisions were clear.
  for (const char* c : {"model_precision float32", "model_precision bfloat16", "native_attention.stage1 true",
                        "native_attention.stage1 false", "native_attention.stage3 true", "native_attention.stage3 false",
                        "native_attention.stage4 true", "native_attention.stage4 false", "onednn_linear true",
                        "onednn_linear false", "winograd_conv true", "winograd_conv false", "tiled_refiner true",
                        "tiled_refiner false"}) {
    INFO(c << ": " << checked[c] << " clear decisions compared");
    CHECK(checked[c] >= 3);
  }
  CHECK(clear >= decisions * 3 / 4);
}

TEST_CASE("sampled trials cost a fraction of the whole ones at 2048", "[unit][plan]") {
  for (const bool bf16_kernel : {false, true}) {
    FakeRuns runs(2048);
    runs.bf16 = bf16_kernel ? 0.5 : 3.0;
    const auto facts = base_plus_facts(2048, bf16_kernel);
    decide(runs, facts, false);
    const double whole = runs.spent_ms;
    runs.spent_ms = 0;
    decide(runs, facts, true);
    INFO("bf16 kernel " << bf16_kernel << ": whole " << whole << " ms, sampled " << runs.spent_ms << " ms");
    CHECK(runs.spent_ms < 0.35 * whole);
  }
}
