// Table-driven check of kernels/ ops against their plain-torch references. The CPU half
// checks the reference itself against torch's GroupNorm; the [cuda] half compares the
// CUDA kernel with the reference and is skipped (visibly) without a GPU.
#include "group_norm_apply.h"
#include "support/support.h"

#include <catch2/catch.hpp>
#include <torch/cuda.h>

#include <iostream>

namespace K = corridorkey::kernels;

namespace {
struct Stats {
  torch::Tensor mean, rstd;
};
Stats group_stats(const torch::Tensor& x, int64_t groups, double eps = 1e-5) {
  auto v = x.to(torch::kFloat).view({x.size(0), groups, -1});
  auto mean = v.mean(-1);
  auto var = v.var(-1, /*unbiased=*/false);
  return {mean, torch::rsqrt(var + eps)};
}
}  // namespace

TEST_CASE("group_norm_apply reference equals GroupNorm (+ residual, ReLU)", "[unit]") {
  auto x = torch::randn({2, 16, 9, 13});
  auto r = torch::randn({2, 16, 9, 13});
  auto g = torch::rand({16}) + 0.5, b = torch::randn({16});
  const auto s = group_stats(x, 8);
  auto want = torch::relu(torch::group_norm(x, 8, g, b, 1e-5) + r);
  auto got = K::group_norm_apply(x, s.mean, s.rstd, g, b, 8, r, true);
  CHECK(ck_test::max_abs_diff(got, want) < 1e-5);
  auto plain = K::group_norm_apply(x, s.mean, s.rstd, g, b, 8, std::nullopt, false);
  CHECK(ck_test::max_abs_diff(plain, torch::group_norm(x, 8, g, b, 1e-5)) < 1e-5);
}

TEST_CASE("group_norm_apply CUDA kernel matches the reference", "[cuda]") {
  if (!torch::cuda::is_available()) {
    std::cout << "SKIPPED: no CUDA device\n";
    return;
  }
  REQUIRE(K::cuda_kernels_enabled());
  struct Case {
    torch::ScalarType dtype;
    std::vector<int64_t> shape;
    double tol;
  };
  for (const auto& c : {Case{torch::kFloat, {1, 64, 512, 512}, 1e-5},
                        Case{torch::kHalf, {2, 64, 129, 77}, 1e-2},
                        Case{torch::kBFloat16, {1, 64, 96, 96}, 5e-2}}) {
    auto opts = torch::TensorOptions().device(torch::kCUDA);
    auto x = torch::randn(c.shape, opts).to(c.dtype);
    auto r = torch::randn(c.shape, opts).to(c.dtype);
    auto g = torch::rand({64}, opts) + 0.5, b = torch::randn({64}, opts);
    const auto s = group_stats(x, 8);
    auto want = K::group_norm_apply_reference(x, s.mean, s.rstd, g, b, 8, r, true);
    auto got = K::group_norm_apply(x, s.mean, s.rstd, g, b, 8, r, true);
    INFO("dtype " << c.dtype);
    CHECK(ck_test::max_abs_diff(got, want) <= c.tol);
  }
}
