#include "runtime/plan_trials.h"

#include <algorithm>

namespace corridorkey::detail {

int64_t sampling_factor(const TrialBlockShape& s) {
  int64_t best = 1;
  if (s.tokens <= 0 || (!s.windowed() && s.q_stride != 1)) return best;
  for (int64_t k = 2; k <= kMaxSampling; k *= 2) {
    if (s.tokens % k != 0) break;
    const int64_t part = s.tokens / k;
    const bool ok = s.windowed() ? part % s.unit_tokens == 0 && part >= kMinSampledTokens
                                 : part >= kMinSampledQueries;
    if (!ok) break;
    best = k;
  }
  return best;
}

double RunMeasurements::block(BlockAt at, TrialType type, bool native, bool onednn) {
  const auto& s = shape(at);
  const int64_t k = factor(at);
  if (k == 1) return runs_.block(at, type, native, onednn, s.tokens);
  const int64_t part = s.tokens / k;
  const double sampled = runs_.block(at, type, native, onednn, part);
  if (s.windowed()) return static_cast<double>(k) * sampled;
  // The sampled block attends over its own part only: its attention is replaced by the
  // part's rows against every key. The difference of two timings can come out below zero
  // on a noisy machine where attention is nearly all of the block; the rest is then none.
  const double own = runs_.attention(at, type, native, part, part);
  const double all = runs_.attention(at, type, native, part, s.tokens);
  return static_cast<double>(k) * (std::max(sampled - own, 0.0) + all);
}

double RunMeasurements::attention(int stage, bool native) {
  const auto at = static_cast<BlockAt>(static_cast<int>(BlockAt::Stage1) + stage);
  const auto& s = shape(at);
  const int64_t k = factor(at);
  const int64_t part = s.tokens / k;
  // Windowed: whole mask units of the part. Global: the part's rows against every key.
  return static_cast<double>(k) *
         runs_.attention(at, TrialType::Float32, native, part / s.q_stride, s.windowed() ? part : s.tokens);
}

}  // namespace corridorkey::detail
