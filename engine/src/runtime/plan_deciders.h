// The measured plan's decisions as data (tune.h): one decider per choice, each reading the
// options, the facts of the machine and model (PlanFacts), and timed trials through one
// Measurements object that answers each trial at most once. Torch-free: the trials
// themselves run in tune_plan.cpp; a test feeds the deciders a fixed table of times
// (test_plan_deciders.cpp) and checks every decision.
#pragma once

#include <corridorkey/options.h>
#include <corridorkey/tune.h>

#include <array>
#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace corridorkey::detail {

/// The type a trial runs in.
enum class TrialType { Float32, BFloat16, Float16 };
TrialType trial_type(Precision p);

/// Which encoder block a trial times: the first non-pooling global-attention block of the
/// third stage or of the last one (Global3, Global4), or a stage's first block that neither
/// pools nor widens (else its first block; Stage1..Stage4).
enum class BlockAt { Global3, Global4, Stage1, Stage2, Stage3, Stage4 };

/// The timed trials, in milliseconds of one run at the real shapes. A trial that cannot run
/// here throws; the deciders say which failures cost only their own choice.
class Measurements {
 public:
  virtual ~Measurements() = default;
  /// One encoder block: SDPA or the engine's attention kernel (`native`), its Linear
  /// layers through MKL's GEMM or oneDNN's matmul (`onednn`, float32 only).
  virtual double block(BlockAt at, TrialType type, bool native, bool onednn) = 0;
  /// One block's attention alone, float32, stage 0-3: SDPA or the engine's kernel.
  virtual double attention(int stage, bool native) = 0;
  /// One decoder head.
  virtual double decoder(TrialType type) = 0;
  /// One dilated refiner block on a strip of kRefinerStripRows full-width rows; `winograd`:
  /// its convolutions by Winograd.
  virtual double refiner_block(TrialType type, bool winograd) = 0;
  /// The refiner on one row of tiles, whole-image path and exact tiler, scaled to a frame.
  virtual std::pair<double, double> refiner_tiling(TrialType type, bool winograd) = 0;
};

/// Each trial of `inner` run at most once: later asks get the first answer (or its
/// failure again). The deciders share one, so the precision estimate reuses the native,
/// oneDNN and Winograd times and a re-check reuses the first pass's.
class MemoMeasurements final : public Measurements {
 public:
  explicit MemoMeasurements(Measurements& inner) : inner_(inner) {}
  double block(BlockAt at, TrialType type, bool native, bool onednn) override;
  double attention(int stage, bool native) override;
  double decoder(TrialType type) override;
  double refiner_block(TrialType type, bool winograd) override;
  std::pair<double, double> refiner_tiling(TrialType type, bool winograd) override;
  int trials() const { return trials_; }  // trials run by `inner`

 private:
  using Key = std::tuple<int, int, int, int, int>;  // trial kind and its arguments
  struct Answer {
    std::pair<double, double> ms;
    std::exception_ptr failure;
  };
  template <class F>
  std::pair<double, double> memo(Key k, F&& run);
  Measurements& inner_;
  std::map<Key, Answer> answers_;
  int trials_ = 0;
};

/// What the deciders know besides the times: the device, the kernels this CPU runs, the
/// model's shapes and whether the whole-image refiner fits its memory budget.
struct PlanFacts {
  bool cpu = true;
  std::string device = "cpu";
  /// resolve_precision(model_precision, device): the explicit precision, or the flag rule.
  Precision rule_precision = Precision::Float32;
  bool bf16_kernel = false;  // the bf16 attention kernel runs here (AVX-512 BF16)
  bool f32_kernel = false;   // the float32 attention kernel runs here (AVX2 + FMA)
  bool onednn = false;       // LibTorch's oneDNN matmul is available
  /// Why the refiner's Winograd convolutions cannot run ("" where they can).
  std::string winograd_unavailable;
  bool has_global = false;   // the encoder has a global-attention block to time
  std::array<bool, 4> stage_present{};   // a block to time in stage i
  std::array<bool, 4> stage_windowed{};  // stage i's timed block is windowed (mask units)
  std::array<double, 4> stage_blocks{};  // blocks per stage
  int64_t blocks = 0;    // encoder blocks
  int64_t img_size = 0;
  /// The whole-image refiner fits refiner_memory_budget_mb, at 4 and at 2 bytes a value.
  bool whole_fits_4 = true, whole_fits_2 = true;

  bool whole_fits(Precision p) const { return p == Precision::Float32 ? whole_fits_4 : whole_fits_2; }
  /// Milliseconds per frame from block trials, by how often each block runs in a forward:
  /// every encoder block as the stage-3 block, two decoder heads, the refiner's four
  /// residual blocks over img_size / kRefinerStripRows strips.
  double frame_estimate(double block3, double decoder, double refiner) const;
};

/// Rows of the refiner strip a refiner trial runs on. The refiner costs the same per row, and
/// 32 rows (64 until issue 38) keep every convolution's work per call large while halving
/// what an emulated bfloat16 block costs a CPU without it (0.71 s at 1024 on a Zen 3).
constexpr int64_t kRefinerStripRows = 32;

/// Faster by more than this share, or the more exact / simpler candidate stays: single
/// trials on a shared machine vary by a few percent.
constexpr double kPlanMargin = 0.10;

/// The decisions of a plan timed now (tune auto / refresh, on a CPU): precision, attention
/// kernels per stage, oneDNN Linear, Winograd and refiner tiling, where each is open (Auto).
/// Throws when a trial whose failure is not one choice's own fails (the caller then keeps
/// the flag rules).
std::vector<TuneDecision> decide_by_trials(const ModelOptions& model, const EngineSettings& engine,
                                           const PlanFacts& facts, Measurements& trials);

/// The flag rules (tune off, or a device without trials): the precision decision only.
std::vector<TuneDecision> decide_by_rules(const ModelOptions& model, const PlanFacts& facts);

/// Completes timed or cached decisions with every choice the plan did not time: explicit
/// values ("flag"), what cannot run here ("only", with why), float32-only paths dropped in
/// another precision, and the tiling the memory rule forces today. `notes` gets a line for
/// an explicit value that has no effect.
void complete_decisions(std::vector<TuneDecision>& decisions, const ModelOptions& model,
                        const EngineSettings& engine, const PlanFacts& facts, std::string& notes);

/// The options with what the plan decided: Auto fields made concrete where the plan (or,
/// with origin Off, the flag rule) decides them. native_attention Auto stays Auto when the
/// plan decided it per stage (the runner reads the stage decisions); tiled_refiner Auto
/// stays Auto where the memory rule decides it at run time.
void apply_plan(const TunePlan& plan, const PlanFacts& facts, ModelOptions& model, EngineSettings& engine);

}  // namespace corridorkey::detail
