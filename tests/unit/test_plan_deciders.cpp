// The plan's deciders fed a fixed set of measurements (plan_deciders.h): a deterministic
// fake timer, time = f(trial, type, kernel), with a known winner per decision. Each case
// checks every decision, the options the plan resolves, and that no trial is run twice.
// The expected decisions follow the rules the plan had before it was split into deciders
// (tune_plan.cpp, issue 37): a 10% margin for precision, oneDNN, Winograd and tiling, the
// faster kernel per stage, bfloat16 cut once its partial estimate passes float32's, and a
// bfloat16 lead checked again without the decoders.
#include <catch2/catch.hpp>

#include "runtime/plan_deciders.h"
#include "unit/plan_options.h"

#include <map>
#include <stdexcept>
#include <string>

using namespace corridorkey;
using namespace corridorkey::detail;
using corridorkey::test::open_engine;
using corridorkey::test::open_model;
using Catch::Matchers::Contains;

namespace {

/// A fake machine: each trial's time is a base per trial kind, times a factor per type and
/// per kernel. Records how often each distinct trial ran.
struct FakeMachine final : Measurements {
  double bf16 = 0.5;              // bfloat16's time against float32's
  double native_global = 0.8;     // the attention kernel against SDPA, global stages
  double native_windowed = 0.5;   // ... windowed stages (attention-only trials)
  double onednn = 0.8;            // oneDNN's Linear against MKL's
  double winograd = 0.7;          // Winograd convolutions against direct
  double tiled = 1.3;             // the tiler against the whole image
  double decoder32 = 40;          // one float32 decoder head, ms
  double decoder16 = -1;          // one bfloat16 head (< 0: decoder32 x bf16)
  bool winograd_fails = false, onednn_fails = false;
  std::map<std::string, int> calls;

  double type(TrialType t) const { return t == TrialType::Float32 ? 1.0 : bf16; }
  void count(const std::string& k) { ++calls[k]; }

  double block(BlockAt at, TrialType t, bool native, bool linear) override {
    count("block " + std::to_string(static_cast<int>(at)) + " " + std::to_string(static_cast<int>(t)) +
          (native ? " native" : " sdpa") + (linear ? " onednn" : ""));
    if (linear && onednn_fails) throw std::runtime_error("no oneDNN matmul here");
    const double base = at == BlockAt::Stage1 ? 30 : 100;  // a wide stage-3 block, a narrow stage-1 one
    return base * type(t) * (native ? native_global : 1.0) * (linear ? onednn : 1.0);
  }
  double attention(int stage, bool native) override {
    count("attention " + std::to_string(stage) + (native ? " native" : " sdpa"));
    const bool windowed = stage < 2;
    return 20 * (native ? (windowed ? native_windowed : native_global) : 1.0);
  }
  double decoder(TrialType t) override {
    count("decoder " + std::to_string(static_cast<int>(t)));
    return t == TrialType::Float32 ? decoder32 : decoder16 >= 0 ? decoder16 : decoder32 * type(t);
  }
  double refiner_block(TrialType t, bool wino) override {
    count("refiner " + std::to_string(static_cast<int>(t)) + (wino ? " winograd" : ""));
    if (wino && winograd_fails) throw std::runtime_error("no AVX2");
    return 10 * type(t) * (wino ? winograd : 1.0);
  }
  std::pair<double, double> refiner_tiling(TrialType t, bool wino) override {
    count("tiling " + std::to_string(static_cast<int>(t)) + (wino ? " winograd" : ""));
    const double whole = 400 * type(t) * (wino ? winograd : 1.0);
    return {whole, whole * tiled};
  }
};

/// hiera_base_plus at 1024 on a CPU with every kernel (a Zen 5 or a Zen 4).
PlanFacts base_plus_1024() {
  PlanFacts f;
  f.cpu = true;
  f.device = "cpu";
  f.rule_precision = Precision::BFloat16;  // the flag rule where avx512_bf16 is listed
  f.bf16_kernel = f.f32_kernel = f.onednn = true;
  f.has_global = true;
  f.stage_present = {true, true, true, true};
  f.stage_windowed = {true, true, false, false};
  f.stage_blocks = {2, 3, 16, 3};
  f.blocks = 24;
  f.img_size = 1024;
  return f;
}


/// Every decision as "option value source" lines, in order.
std::string listed(const std::vector<TuneDecision>& ds) {
  std::string s;
  for (const auto& d : ds)
    s += std::string(to_string(d.option)) + " " + to_string(d.value) + " " + to_string(d.source) + "\n";
  return s;
}

struct Run {
  std::vector<TuneDecision> decisions;
  ModelOptions model;
  EngineSettings engine;
  std::string notes;
  int trials = 0;
};

/// decide_by_trials, complete_decisions and apply_plan, as make_plan runs them.
Run plan(const ModelOptions& m, const EngineSettings& e, const PlanFacts& f, FakeMachine& fake) {
  Run r;
  MemoMeasurements once(fake);
  r.decisions = decide_by_trials(m, e, f, once);
  r.trials = once.trials();
  complete_decisions(r.decisions, m, e, f, r.notes);
  TunePlan p;
  p.origin = PlanOrigin::Trials;
  p.decisions = r.decisions;
  r.model = m;
  r.engine = e;
  apply_plan(p, f, r.model, r.engine);
  for (const auto& [trial, n] : fake.calls) {
    INFO(trial);
    CHECK(n == 1);  // no trial is timed twice: the deciders share one set of measurements
  }
  return r;
}

const TuneDecision& the(const Run& r, TuneOption o) {
  for (const auto& d : r.decisions)
    if (d.option == o) return d;
  FAIL("no decision " << to_string(o) << " in\n" << listed(r.decisions));
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("fast bf16 (a Zen 5): bfloat16, its kernel in both global stages, the whole refiner", "[unit][plan]") {
  FakeMachine fake;  // bf16 at half the time of float32
  const auto r = plan(open_model(), open_engine(), base_plus_1024(), fake);
  CHECK(listed(r.decisions) ==
        "model_precision bfloat16 plan\n"
        "native_attention.stage3 true plan\n"
        "native_attention.stage4 true plan\n"
        "tiled_refiner false plan\n");
  // float32's estimate is float32 with its faster kernels: the fp32 kernel, oneDNN, Winograd.
  const auto& p = the(r, TuneOption::ModelPrecision);
  std::map<std::string, double> t(p.times_ms.begin(), p.times_ms.end());
  const double blk32 = 100 * 0.8 * 0.8, ref32 = 10 * 0.7;
  CHECK(t.at("float32") == Approx(blk32 * 24 + 2 * 40 + 4 * 32 * ref32));
  CHECK(t.at("bfloat16") == Approx(50 * 0.8 * 24 + 2 * 20 + 4 * 32 * 5));
  CHECK(r.model.model_precision == Precision::BFloat16);
  CHECK(r.model.native_attention == AutoSwitch::Auto);  // per stage, from the decisions
  CHECK(r.engine.onednn_linear == AutoSwitch::Off);      // float32-only paths: off in bfloat16
  CHECK(r.engine.winograd_conv == AutoSwitch::Off);
  CHECK(r.engine.tiled_refiner == RefinerTiling::Off);
  CHECK(r.notes.empty());
}

TEST_CASE("slow bf16 (a Zen 3): float32 after the bf16 refiner alone, then every float32 choice", "[unit][plan]") {
  FakeMachine fake;
  fake.bf16 = 8;  // emulated bf16: its refiner block alone costs more than float32's whole frame
  const auto r = plan(open_model(), open_engine(), base_plus_1024(), fake);
  CHECK(listed(r.decisions) ==
        "model_precision float32 plan\n"
        "native_attention.stage1 true plan\n"   // windowed: kernel 10 ms against SDPA 20
        "native_attention.stage2 true plan\n"
        "native_attention.stage3 true plan\n"   // global: 16 against 20
        "native_attention.stage4 true plan\n"
        "onednn_linear true plan\n"             // 0.8x MKL: more than the 10% margin
        "winograd_conv true plan\n"             // 0.7x direct
        "tiled_refiner false plan\n");          // the tiler at 1.3x the whole image
  CHECK_THAT(the(r, TuneOption::ModelPrecision).why, Contains("stopped once past float32's estimate"));
  // bfloat16 stopped after its refiner trial: no bf16 decoder or block was timed.
  CHECK(fake.calls.count("refiner 1") == 1);
  CHECK(fake.calls.count("decoder 1") == 0);
  for (const auto& [trial, n] : fake.calls) CHECK_FALSE((trial.rfind("block", 0) == 0 && trial.find(" 1 ") != std::string::npos));
  CHECK(r.model.model_precision == Precision::Float32);
  CHECK(r.engine.onednn_linear == AutoSwitch::On);
  CHECK(r.engine.winograd_conv == AutoSwitch::On);
  CHECK(r.engine.tiled_refiner == RefinerTiling::Off);
  // The tiling trial ran in the convolution chosen (Winograd).
  CHECK(fake.calls.count("tiling 0 winograd") == 1);
}

TEST_CASE("a bf16 lead the decoders alone give does not hold: float32, and the decision says why", "[unit][plan]") {
  FakeMachine fake;
  fake.bf16 = 1.0;        // the blocks and the refiner run as fast in either type
  fake.decoder32 = 4000;  // ... but float32's decoder head is slow
  fake.decoder16 = 40;
  const auto r = plan(open_model(), open_engine(), base_plus_1024(), fake);
  const auto& p = the(r, TuneOption::ModelPrecision);
  CHECK(p.value == TuneChoice::Float32);
  CHECK(p.source == DecisionSource::Plan);
  CHECK_THAT(p.why, Contains("did not hold") && Contains("it must be 10% faster"));
  std::map<std::string, double> t(p.times_ms.begin(), p.times_ms.end());
  CHECK(t.at("bfloat16") < 0.9 * t.at("float32"));  // the first estimate had bfloat16 ahead
  CHECK(r.model.model_precision == Precision::Float32);
}

TEST_CASE("within the margin the exact path stays: float32, MKL, direct, whole", "[unit][plan]") {
  FakeMachine fake;
  fake.bf16 = 0.95;      // 5% faster: not enough
  fake.onednn = 0.95;
  fake.winograd = 0.95;
  fake.tiled = 0.95;
  const auto r = plan(open_model(), open_engine(), base_plus_1024(), fake);
  CHECK(the(r, TuneOption::ModelPrecision).value == TuneChoice::Float32);
  CHECK(the(r, TuneOption::OnednnLinear).value == TuneChoice::False);
  CHECK(the(r, TuneOption::WinogradConv).value == TuneChoice::False);
  CHECK(the(r, TuneOption::TiledRefiner).value == TuneChoice::False);
  // The attention kernel has the same margin (issue 38): 1% faster keeps SDPA, 15% wins.
  fake.native_global = 0.99;
  fake.calls.clear();
  const auto r2 = plan(open_model(), open_engine(), base_plus_1024(), fake);
  CHECK(the(r2, TuneOption::NativeAttentionStage3).value == TuneChoice::False);
  fake.native_global = 0.85;
  fake.calls.clear();
  const auto r3 = plan(open_model(), open_engine(), base_plus_1024(), fake);
  CHECK(the(r3, TuneOption::NativeAttentionStage3).value == TuneChoice::True);
}

TEST_CASE("a trial that cannot run costs its own choice only", "[unit][plan]") {
  FakeMachine fake;
  fake.bf16 = 8;
  fake.winograd_fails = fake.onednn_fails = true;
  const auto r = plan(open_model(), open_engine(), base_plus_1024(), fake);
  CHECK(the(r, TuneOption::ModelPrecision).value == TuneChoice::Float32);  // estimated without them
  const auto& w = the(r, TuneOption::WinogradConv);
  CHECK((w.value == TuneChoice::False && w.source == DecisionSource::Only));
  CHECK(w.why == "its trial failed");
  const auto& l = the(r, TuneOption::OnednnLinear);
  CHECK((l.value == TuneChoice::False && l.source == DecisionSource::Only));
  CHECK_THAT(l.why, Contains("its trial failed: no oneDNN matmul here"));
  CHECK(r.engine.onednn_linear == AutoSwitch::Off);
  CHECK(r.engine.winograd_conv == AutoSwitch::Off);
}

TEST_CASE("explicit values are never timed: every decision is the flag's", "[unit][plan]") {
  FakeMachine fake;
  auto m = open_model();
  m.model_precision = Precision::Float32;
  m.native_attention = AutoSwitch::On;
  auto e = open_engine();
  e.onednn_linear = AutoSwitch::On;
  e.winograd_conv = AutoSwitch::Off;
  e.tiled_refiner = RefinerTiling::On;
  auto f = base_plus_1024();
  f.rule_precision = Precision::Float32;  // resolve_precision(float32) is float32
  const auto r = plan(m, e, f, fake);
  CHECK(r.trials == 0);
  CHECK(listed(r.decisions) ==
        "model_precision float32 flag\n"
        "native_attention true flag\n"
        "onednn_linear true flag\n"
        "winograd_conv false flag\n"
        "tiled_refiner true flag\n");
}

TEST_CASE("what cannot run here is said, with why", "[unit][plan]") {
  FakeMachine fake;
  auto f = base_plus_1024();
  f.bf16_kernel = f.f32_kernel = f.onednn = false;
  f.winograd_unavailable = "needs channels_last";
  f.whole_fits_4 = f.whole_fits_2 = false;  // the whole-image refiner exceeds the budget
  auto m = open_model();
  m.model_precision = Precision::Float32;
  f.rule_precision = Precision::Float32;
  auto e = open_engine();
  e.winograd_conv = AutoSwitch::On;  // asked for, but it cannot run
  const auto r = plan(m, e, f, fake);
  CHECK(r.trials == 0);
  CHECK(listed(r.decisions) ==
        "model_precision float32 flag\n"
        "native_attention false only\n"
        "onednn_linear false only\n"
        "winograd_conv false only\n"
        "tiled_refiner true only\n");
  CHECK_THAT(the(r, TuneOption::NativeAttention).why, Contains("AVX2 + FMA"));
  CHECK_THAT(the(r, TuneOption::OnednnLinear).why, Contains("no oneDNN matmul"));
  CHECK(the(r, TuneOption::WinogradConv).why == "needs channels_last");
  CHECK_THAT(the(r, TuneOption::TiledRefiner).why, Contains("exceeds refiner_memory_budget_mb"));
  CHECK_THAT(r.notes, Contains("winograd_conv true has no effect: needs channels_last"));
  CHECK(r.engine.tiled_refiner == RefinerTiling::Auto);  // the memory rule tiles at run time
}

TEST_CASE("in bfloat16 the float32-only paths are not listed, and an explicit true says so", "[unit][plan]") {
  FakeMachine fake;
  auto m = open_model();
  m.model_precision = Precision::BFloat16;
  auto e = open_engine();
  e.onednn_linear = AutoSwitch::On;
  const auto r = plan(m, e, base_plus_1024(), fake);
  CHECK(listed(r.decisions) ==
        "model_precision bfloat16 flag\n"
        "native_attention.stage3 true plan\n"
        "native_attention.stage4 true plan\n"
        "tiled_refiner false plan\n");
  CHECK_THAT(r.notes, Contains("onednn_linear true has no effect") && Contains("bfloat16"));
}

TEST_CASE("the flag rules, with tune off: the kernels on, LibTorch's paths otherwise", "[unit][plan]") {
  auto f = base_plus_1024();
  TunePlan p;
  p.origin = PlanOrigin::Off;
  p.decisions = decide_by_rules(open_model(), f);
  REQUIRE(p.decisions.size() == 1);
  CHECK(p.decisions[0].value == TuneChoice::BFloat16);
  CHECK(p.decisions[0].source == DecisionSource::Rule);
  auto m = open_model();
  auto e = open_engine();
  apply_plan(p, f, m, e);
  CHECK(m.model_precision == Precision::BFloat16);
  CHECK(m.native_attention == AutoSwitch::On);
  CHECK(e.onednn_linear == AutoSwitch::Off);
  CHECK(e.winograd_conv == AutoSwitch::Off);
  CHECK(e.tiled_refiner == RefinerTiling::Auto);
}

TEST_CASE("a failed trial is not timed again, and its failure is answered again", "[unit][plan]") {
  FakeMachine fake;
  fake.onednn_fails = true;
  MemoMeasurements once(fake);
  CHECK_THROWS_WITH(once.block(BlockAt::Global3, TrialType::Float32, false, true), "no oneDNN matmul here");
  CHECK_THROWS_WITH(once.block(BlockAt::Global3, TrialType::Float32, false, true), "no oneDNN matmul here");
  CHECK(once.block(BlockAt::Global3, TrialType::Float32, false, false) == Approx(100));
  CHECK(once.block(BlockAt::Global3, TrialType::Float32, false, false) == Approx(100));
  CHECK(once.trials() == 2);
  for (const auto& [trial, n] : fake.calls) CHECK(n == 1);
}
