// The vectorised sRGB transfer function against the reference's formula with libm's powf:
// the numerical bound it states (engine/src/post/srgb_transfer.h), and that the row forms
// give the scalar form's bits: the machine's widest variant, which the engine runs, and
// every other ISA variant this CPU has (issue 46: a test covers each ISA it meets).
#include "post/srgb_transfer.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

namespace post = corridorkey::post;

namespace {
// The reference's formulas (pipeline.md), evaluated with the C library's powf.
float libm_to_linear(float x) {
  x = std::max(x, 0.f);
  return x <= 0.04045f ? x / 12.92f : std::pow((x + 0.055f) / 1.055f, 2.4f);
}
float libm_to_srgb(float x) {
  x = std::max(x, 0.f);
  return x <= 0.0031308f ? x * 12.92f : 1.055f * std::pow(x, 1.f / 2.4f) - 0.055f;
}
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(static_cast<int64_t>(ia) - ib);
}
bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Every 61st float from +0 to 32768: ~18M samples, all exponents of plates, HDR and hints.
std::vector<float> samples() {
  std::vector<float> xs;
  uint32_t top;
  const float limit = 32768.f;
  std::memcpy(&top, &limit, 4);
  for (uint32_t u = 0; u < top; u += 61) {
    float x;
    std::memcpy(&x, &u, 4);
    xs.push_back(x);
  }
  return xs;
}
}  // namespace

TEST_CASE("sRGB decode: within 1 ulp of powf, rows equal to single samples", "[unit]") {
  const std::vector<float> xs = samples();
  std::vector<float> rows = xs;
  post::srgb_to_linear_inplace(rows.data(), rows.size());
  int64_t worst = 0;
  size_t row_mismatch = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    worst = std::max(worst, ulps(rows[i], libm_to_linear(xs[i])));
    row_mismatch += same_bits(rows[i], post::srgb_to_linear(xs[i])) ? 0 : 1;
  }
  INFO(xs.size() << " samples");
  CHECK(worst <= 1);
  CHECK(row_mismatch == 0);
  // The piecewise ends stay where the reference puts them.
  CHECK(same_bits(post::srgb_to_linear(0.04045f), 0.04045f / 12.92f));
  CHECK(post::srgb_to_linear(1.f) == 1.f);
}

TEST_CASE("sRGB encode: within 4 ulp of powf's result, rows equal to single samples", "[unit]") {
  // x^(1/2.4) itself is within 1 ulp; 1.055 p - 0.055 cancels near the knee (p ~ 0.09,
  // result ~ 0.04), where 1 ulp of p is ~2 of the result. On [0, 1] that is at most two
  // float steps below 1.0 (1.2e-7 absolute): 1/2000 of a 16-bit code value.
  const std::vector<float> xs = samples();
  std::vector<float> rows = xs;
  post::linear_to_srgb_inplace(rows.data(), rows.size());
  int64_t worst = 0;
  double worst_abs_unit = 0;  // on [0, 1], the display range
  size_t row_mismatch = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float ref = libm_to_srgb(xs[i]);
    worst = std::max(worst, ulps(rows[i], ref));
    if (xs[i] <= 1.f) worst_abs_unit = std::max(worst_abs_unit, std::abs(double(rows[i]) - ref));
    row_mismatch += same_bits(rows[i], post::linear_to_srgb(xs[i])) ? 0 : 1;
  }
  CHECK(worst <= 4);
  CHECK(worst_abs_unit <= 1.2e-7);
  CHECK(row_mismatch == 0);
  CHECK(post::linear_to_srgb(1.f) == Approx(1.f).margin(1e-7));
}

TEST_CASE("sRGB transfer: special values behave as the reference's", "[unit]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> specials = {0.f, -0.f, -1.f, -inf, inf, nan, 1e-45f, 1e-38f,
                                       0.0031308f, 0.04045f, 3e38f};
  for (float x : specials) {
    INFO("x = " << x);
    std::vector<float> one = {x}, two = {x};
    post::srgb_to_linear_inplace(one.data(), 1);
    post::linear_to_srgb_inplace(two.data(), 1);
    const float a = libm_to_linear(x), b = libm_to_srgb(x);
    CHECK(std::isnan(one[0]) == std::isnan(a));
    CHECK(std::isnan(two[0]) == std::isnan(b));
    if (!std::isnan(a)) CHECK(ulps(one[0], a) <= 1);
    if (!std::isnan(b)) CHECK(ulps(two[0], b) <= 4);
  }
  // A row whose length is not a vector multiple, with the tail checked too.
  std::vector<float> odd(37);
  for (size_t i = 0; i < odd.size(); ++i) odd[i] = 0.03f * static_cast<float>(i);
  std::vector<float> enc = odd;
  post::linear_to_srgb_inplace(enc.data(), enc.size());
  for (size_t i = 0; i < odd.size(); ++i) CHECK(same_bits(enc[i], post::linear_to_srgb(odd[i])));
}

TEST_CASE("sRGB rows: every ISA variant this CPU runs gives the single-sample bits", "[unit]") {
  const std::vector<float> xs = samples();
  const auto variants = post::transfer_row_variants();
  std::cout << "sRGB transfer row variants on this CPU:";
  for (const auto& v : variants) std::cout << ' ' << v;
  std::cout << '\n';
  REQUIRE(variants.back() == "baseline");
  for (const auto& variant : variants) {
    for (const bool to_linear : {true, false}) {
      INFO("variant " << variant << (to_linear ? " decode" : " encode"));
      std::vector<float> rows = xs;
      REQUIRE(post::transfer_rows_with(variant, to_linear, rows.data(), rows.size()));
      size_t mismatch = 0;
      for (size_t i = 0; i < xs.size(); ++i)
        mismatch += same_bits(rows[i], to_linear ? post::srgb_to_linear(xs[i]) : post::linear_to_srgb(xs[i])) ? 0 : 1;
      CHECK(mismatch == 0);
    }
  }
  std::vector<float> one{0.5f};
  CHECK_FALSE(post::transfer_rows_with("no-such-isa", true, one.data(), 1));
}
