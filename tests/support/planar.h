// Planar float buffers for BaseEngine::run_model tests: the seeded model input, and the max
// abs difference between two outputs.
#pragma once

#include "model/sample_input.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ck_test {

inline std::vector<float> seeded_planar(int64_t S, uint64_t seed) {
  auto x = corridorkey::model::seeded_input(1, S, seed).contiguous();
  return {x.data_ptr<float>(), x.data_ptr<float>() + x.numel()};
}

inline double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

}  // namespace ck_test
