// The single runs behind a plan's trials, and the two ways Measurements (plan_deciders.h)
// are answered from them: every block timed whole at its real shape, or sampled.
//
// Why sample: a global-attention block costs tokens^2. At 2048 the stage-3 block of
// hiera_base_plus attends over 16384 tokens (about 560 GFLOP), and timing it whole, in each
// candidate, once to warm up and once to time, cost a 2-core Zen 4 79 s of trials before its
// first frame (issue 38). Sampled, the same trials run on a part and are scaled:
//  - a windowed block, and every part of a block but its attention, costs per token:
//    k times the block on 1/k of the tokens (whole mask units);
//  - global attention costs a part per call that grows with the keys (K and V laid out
//    once) and a part per query row against every key: 1/k and 1/(4k) of the rows, timed
//    against every key, give both, and the whole is extrapolated to every row.
// So a global block over N tokens is estimated as
//    k * (block(N/k) - attention(N/k rows, N/k keys)) + attention(all rows, N keys).
// Both ways answer the same questions with the same candidates; a test runs the deciders
// on both over one fake machine and checks they decide alike wherever the sides differ by
// more than the plan's margin (test_plan_deciders.cpp). Torch-free: the runs themselves are
// tune_plan.cpp's.
#pragma once

#include "runtime/plan_deciders.h"

#include <array>
#include <cstdint>
#include <utility>

namespace corridorkey::detail {

/// What a block trial's shape says about sampling it.
struct TrialBlockShape {
  int64_t tokens = 0;       // tokens the block takes in at the real size (0: none to time)
  int64_t unit_tokens = 0;  // windowed: tokens per mask unit (q_stride x window); 0: global
  int64_t q_stride = 1;     // the block pools its queries by this
  bool windowed() const { return unit_tokens > 0; }
};

/// The block shapes by BlockAt (Global3, Global4, Stage1..Stage4).
using TrialShapes = std::array<TrialBlockShape, 6>;

/// One timed run each, at any token count (tune_plan.cpp on this machine; a fake in tests).
class TrialRuns {
 public:
  virtual ~TrialRuns() = default;
  /// Block `at` over `tokens` tokens (a multiple of its mask unit where windowed).
  virtual double block(BlockAt at, TrialType type, bool native, bool onednn, int64_t tokens) = 0;
  /// Block `at`'s attention alone (its qkv projection's output in), `queries` query rows
  /// against `tokens` keys. queries == tokens / q_stride is the real problem; fewer are the
  /// rows timed of a global one.
  virtual double attention(BlockAt at, TrialType type, bool native, int64_t queries, int64_t tokens) = 0;
  virtual double decoder(TrialType type) = 0;
  virtual double refiner_block(TrialType type, bool winograd) = 0;
  virtual std::pair<double, double> refiner_tiling(TrialType type, bool winograd) = 0;
};

/// Global attention is sampled down to no fewer query rows than this, and windowed blocks to
/// no fewer tokens than this: below them a run is too short to time steadily, and two
/// threads (or sixteen) need rows to share.
constexpr int64_t kMinSampledQueries = 1024;
constexpr int64_t kMinSampledTokens = 4096;
/// At most this share is left out: the sampled runs keep enough of the problem that its
/// cache behaviour (the MLP's hidden rows past L2) is the real one's.
constexpr int64_t kMaxSampling = 8;

/// The factor k a block of this shape is sampled by (1: timed whole): the largest power of
/// two up to kMaxSampling that keeps whole mask units and the minimum rows above.
int64_t sampling_factor(const TrialBlockShape& s);

/// Measurements answered from TrialRuns: `sampled` scales sampled runs (the default), else
/// every block and attention trial runs at its real shape (CORRIDORKEY_TUNE_TRIALS=whole).
class RunMeasurements final : public Measurements {
 public:
  RunMeasurements(TrialRuns& runs, const TrialShapes& shapes, bool sampled)
      : runs_(runs), shapes_(shapes), sampled_(sampled) {}
  double block(BlockAt at, TrialType type, bool native, bool onednn) override;
  double attention(int stage, bool native) override;
  double decoder(TrialType type) override { return runs_.decoder(type); }
  double refiner_block(TrialType type, bool winograd) override { return runs_.refiner_block(type, winograd); }
  std::pair<double, double> refiner_tiling(TrialType type, bool winograd) override {
    return runs_.refiner_tiling(type, winograd);
  }

 private:
  /// Every row of a global block's attention against every key, from sampled rows.
  double global_attention(BlockAt at, TrialType type, bool native);
  const TrialBlockShape& shape(BlockAt at) const { return shapes_[static_cast<size_t>(at)]; }
  int64_t factor(BlockAt at) const { return sampled_ ? sampling_factor(shape(at)) : 1; }
  TrialRuns& runs_;
  TrialShapes shapes_;
  bool sampled_;
};

}  // namespace corridorkey::detail
