// The exact tiled refiner against the untiled one: values and working memory.
#include "model/refiner.h"
#include "model/tiled_refiner.h"
#include "support/support.h"

#include <catch2/catch.hpp>
#include <c10/core/InferenceMode.h>

#include "runtime/memory.h"

using namespace corridorkey::model;

namespace {
CNNRefiner random_refiner(int64_t channels, uint64_t seed) {
  torch::manual_seed(seed);
  CNNRefiner r(channels, 8);
  torch::NoGradGuard ng;
  for (auto& p : r->named_parameters()) {
    if (p.key().find("gn") != std::string::npos || p.key().find("stem.1") != std::string::npos)
      p.value().copy_(p.key().find("weight") != std::string::npos ? torch::rand_like(p.value()) + 0.5
                                                                  : torch::randn_like(p.value()) * 0.1);
    else
      p.value().copy_(torch::randn_like(p.value()) * (p.value().dim() > 1 ? 0.1 : 0.05));
  }
  r->eval();
  return r;
}
}  // namespace

TEST_CASE("tiled refiner equals the untiled refiner (image-global GroupNorm)", "[unit]") {
  c10::InferenceMode guard;
  auto r = random_refiner(64, 1);
  // Odd sizes: partial tiles on the right/bottom edges, tiles smaller than the halo there.
  for (auto [h, w, tile] : {std::tuple<int64_t, int64_t, int64_t>{200, 300, 64},
                            {130, 97, 64},
                            {257, 129, 128}}) {
    INFO(h << "x" << w << " tile " << tile);
    auto x = torch::randn({2, 7, h, w});
    auto want = r->forward_input(x);
    auto got = tiled_refiner_forward(*r, x, {tile});
    REQUIRE(got.sizes() == want.sizes());
    CHECK(ck_test::max_abs_diff(got, want) <= 1e-4);
    CHECK(ck_test::max_abs(want) > 1.0);  // the refiner does something
  }
}

TEST_CASE("per-tile GroupNorm statistics would not be exact (why the tiler gathers them)",
          "[unit]") {
  c10::InferenceMode guard;
  auto r = random_refiner(64, 2);
  auto x = torch::randn({1, 7, 128, 128});
  x.slice(3, 64, 128).mul_(3).add_(1);  // the right half has other statistics
  auto want = r->forward_input(x);
  // Naive tiling: each 64-column half on its own (own statistics, zero padding at the seam).
  auto naive = torch::cat({r->forward_input(x.slice(3, 0, 64)), r->forward_input(x.slice(3, 64, 128))}, 3);
  CHECK(ck_test::max_abs_diff(naive, want) > 1e-2);
  CHECK(ck_test::max_abs_diff(tiled_refiner_forward(*r, x, {64}), want) <= 1e-4);
}

TEST_CASE("tiled refiner bounds working memory", "[unit]") {
  // Allocator bytes, not time: deterministic. Untiled holds ~4 full 64-channel maps; the
  // tiler one map plus tile buffers.
  c10::InferenceMode guard;
  corridorkey::detail::install_cpu_memory_tracker();
  auto r = random_refiner(64, 3);
  auto x = torch::randn({1, 7, 512, 512});
  uint64_t untiled = 0, tiled = 0;
  {
    corridorkey::detail::PeakMemoryScope m(torch::kCPU);
    auto y = r->forward_input(x);
    untiled = m.finish().host_peak_allocated;
  }
  {
    corridorkey::detail::PeakMemoryScope m(torch::kCPU);
    auto y = tiled_refiner_forward(*r, x, {128});
    tiled = m.finish().host_peak_allocated;
  }
  const double map = 64.0 * 512 * 512 * 4;
  INFO("untiled " << untiled / map << " maps, tiled " << tiled / map << " maps");
  CHECK(untiled >= 3 * map);
  CHECK(static_cast<double>(tiled) <= 0.5 * static_cast<double>(untiled));
}
