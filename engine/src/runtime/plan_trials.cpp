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
  // The sampled block attends over its own part only: its attention is replaced by every
  // row's against every key. The difference of two timings can come out below zero on a
  // noisy machine where attention is nearly all of the block; the rest is then none.
  const double own = runs_.attention(at, type, native, part, part);
  return static_cast<double>(k) * std::max(sampled - own, 0.0) + global_attention(at, type, native);
}

double RunMeasurements::global_attention(BlockAt at, TrialType type, bool native) {
  const auto& s = shape(at);
  const int64_t k = factor(at);
  if (k <= 2) return runs_.attention(at, type, native, s.tokens / s.q_stride, s.tokens);
  // A call costs a part that grows with the keys alone (the native kernel packs K and V
  // once per call: about 140 ms of its 3.7 s over 16384 keys at 2048 on a Zen 3) and a part
  // per query row. 1/k of the rows times k counted the first part k times (the stage-3
  // kernel came out 26% slow); two row counts, 1/k and a quarter of that, give both parts
  // (the smaller is still several of a kernel's row tiles, at least 256 rows).
  const int64_t part = s.tokens / k;
  const double one = runs_.attention(at, type, native, part, s.tokens);
  const double quarter = runs_.attention(at, type, native, part / 4, s.tokens);
  const double per_row = std::max(one - quarter, 0.0) / static_cast<double>(part - part / 4);
  return one + per_row * static_cast<double>(s.tokens - part);
}

double RunMeasurements::attention(int stage, bool native) {
  const auto at = static_cast<BlockAt>(static_cast<int>(BlockAt::Stage1) + stage);
  const auto& s = shape(at);
  if (!s.windowed()) return global_attention(at, TrialType::Float32, native);
  // Windowed: whole mask units of a part, each unit's work the same.
  const int64_t k = factor(at), part = s.tokens / k;
  return static_cast<double>(k) * runs_.attention(at, TrialType::Float32, native, part / s.q_stride, part);
}

}  // namespace corridorkey::detail
