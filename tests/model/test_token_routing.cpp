// Token routing: ordering of the edge masks, the all-edge identity, LTRM identity and
// loading by name.
#include "model/checkpoint.h"
#include "model/functional.h"
#include "model/green_former.h"
#include "model/token_routing.h"
#include "support/support.h"

#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/profile.h>

#include <catch2/catch.hpp>
#include <c10/core/InferenceMode.h>

#include <set>

using namespace corridorkey::model;
namespace F = corridorkey::model::functional;

namespace {
std::set<int64_t> routed_positions(const StageRoute& r) {
  std::set<int64_t> s;
  if (r.all_edge) return s;
  auto idx = r.index[0];
  for (int64_t i = 0; i < idx.size(0); ++i) s.insert(idx[i].item<int64_t>());
  return s;
}
}  // namespace

TEST_CASE("edge masks follow each stage's token order", "[unit]") {
  // S = 512: stage-2 grid 32 (16 px squares, one unroll level left), stage-3 grid 16 (raster).
  const int64_t S = 512;
  auto hint = torch::zeros({1, 1, S, S});
  // Uncertain band: a rectangle aligned to 32 px, rows 64..127, columns 256..351.
  hint.slice(2, 64, 128).slice(3, 256, 352).fill_(0.5);
  RoutingOptions o;
  o.min_edge_tokens = 4;
  for (auto [grid, levels] : {std::pair<int64_t, int64_t>{32, 1}, {16, 0}}) {
    INFO("grid " << grid);
    const auto r = plan_stage_route(hint, grid, levels, o);
    const int64_t px = S / grid;
    // Expected: raster tokens whose square overlaps the rectangle, mapped to block order.
    std::set<int64_t> raster;
    for (int64_t y = 0; y < grid; ++y)
      for (int64_t x = 0; x < grid; ++x)
        if (y * px < 128 && (y + 1) * px > 64 && x * px < 352 && (x + 1) * px > 256)
          raster.insert(y * grid + x);
    const auto order = F::unrolled_positions(grid, grid, levels, 2, 2);
    std::set<int64_t> expected;
    for (int64_t n = 0; n < grid * grid; ++n)
      if (raster.count(order[n].item<int64_t>())) expected.insert(n);
    CHECK(routed_positions(r) == expected);
    CHECK(r.edge_tokens == static_cast<int64_t>(raster.size()));
    if (levels == 1) {
      // The reference's raster-order mask would pick other tokens at stage 2.
      CHECK(expected != raster);
    }
  }
}

TEST_CASE("fewer than min_edge_tokens edge tokens: all tokens edge", "[unit]") {
  auto hint = torch::zeros({2, 1, 256, 256});
  hint[0].slice(1, 0, 32).slice(2, 0, 32).fill_(0.5);  // 4 stage-2 tokens in sample 0
  hint[1].slice(1, 0, 128).fill_(0.5);                  // half the frame in sample 1
  RoutingOptions o;  // min 64
  const auto r = plan_stage_route(hint, 16, 1, o);
  CHECK_FALSE(r.all_edge);
  CHECK(r.edge_tokens == 256 + 128);   // sample 0 routes all 256, sample 1 its 128
  REQUIRE(r.index.size(1) == 256);
  CHECK(r.key_mask.defined());         // ragged batch: padded with a key mask
  auto solid = torch::ones({1, 1, 256, 256});
  CHECK(plan_stage_route(solid, 16, 1, o).all_edge);  // no edge tokens at all -> all
}

TEST_CASE("LTRM is the identity at zero init; ECA kernel size", "[unit]") {
  c10::InferenceMode g;
  Ltrm l(64);
  auto x = torch::randn({1, 256, 64});
  CHECK(torch::equal(l->forward(x, 16, 1), x));
  CHECK(EcaImpl::kernel_size(448) == 5);
  CHECK(EcaImpl::kernel_size(896) == 5);
  // With trained (non-zero) fc2 it is not.
  torch::NoGradGuard ng;
  l->fc2->weight.normal_(0, 0.1);
  CHECK_FALSE(torch::equal(l->forward(x, 16, 1), x));
}

TEST_CASE("routing with every token on the edge equals the unrouted model", "[model]") {
  c10::InferenceMode g;
  auto net = load_green_former(ck_test::fixture("tiny256.pth"), 256);
  TokenRouter router(net->config().encoder, 256, RoutingOptions{});
  auto x = torch::randn({1, 4, 256, 256});
  x.slice(1, 3, 4).fill_(0.5);  // hint uncertain everywhere
  const auto plain = net->forward(x);
  router->plan(x);
  CHECK(router->route(2).fraction == 1.0);
  ForwardOptions fo;
  fo.encoder_block_hook = [&](size_t i, HieraBlockImpl& b, const torch::Tensor& t) {
    return router->run_block(i, b, t);
  };
  const auto routed = net->forward(x, fo);
  CHECK(ck_test::max_abs_diff(routed.alpha, plain.alpha) <= 1e-5);
  CHECK(ck_test::max_abs_diff(routed.fg, plain.fg) <= 1e-5);
}

TEST_CASE("a thin band routes few tokens and changes the result boundedly", "[model]") {
  c10::InferenceMode g;
  auto net = load_green_former(ck_test::fixture("tiny256.pth"), 256);
  RoutingOptions o;
  o.min_edge_tokens = 8;
  TokenRouter router(net->config().encoder, 256, o);
  auto x = torch::randn({1, 4, 256, 256});
  auto hint = x.slice(1, 3, 4);
  hint.fill_(0.0);
  hint.slice(2, 64, 192).slice(3, 64, 192).fill_(1.0);
  hint.slice(2, 64, 192).slice(3, 60, 68).fill_(0.5);  // a thin uncertain strip
  const auto plain = net->forward(x);
  router->plan(x);
  CHECK(router->route(2).fraction < 0.2);
  ForwardOptions fo;
  fo.encoder_block_hook = [&](size_t i, HieraBlockImpl& b, const torch::Tensor& t) {
    return router->run_block(i, b, t);
  };
  const auto routed = net->forward(x, fo);
  const double d = ck_test::max_abs_diff(routed.alpha, plain.alpha);
  INFO("alpha drift " << d);
  CHECK(d > 0);      // routing really skipped work
  CHECK(d < 1.0);
}

TEST_CASE("LTRM weights load by name; absent weights are reported", "[model]") {
  const auto ck = read_checkpoint(ck_test::fixture("tiny256.pth"));
  TokenRouter router(ck.config.encoder, 256, RoutingOptions{});
  CHECK(router->load_weights(ck.tensors, "tiny256.pth") == 0);  // none in a CorridorKey checkpoint
  std::vector<std::pair<std::string, torch::Tensor>> t{
      {"ltrm_stage2.1.fc2.weight", torch::full({64, 128}, 0.25)},
      {"ltrm_stage3.0.eca.conv.weight", torch::full({1, 1, 5}, 0.5)}};
  CHECK(router->load_weights(t, "mem") == 2);
  CHECK(router->named_parameters()["ltrm_stage2.1.fc2.weight"].mean().item<double>() == 0.25);
  t.push_back({"ltrm_stage2.1.nope", torch::zeros({1})});
  CHECK_THROWS_AS(router->load_weights(t, "mem"), corridorkey::ModelError);

  // Through the engine: experimental profile = routing on, identity LTRMs noted.
  auto o = corridorkey::load_profile("experimental");
  o.model.checkpoint = ck_test::fixture("tiny256.pth");
  o.model.model_precision = corridorkey::Precision::Float32;
  o.model.device = "cpu";
  o.engine.tile_size = 64;
  auto e = corridorkey::create_engine(o.model, o.engine);
  CHECK_THAT(e->info().notes, Catch::Matchers::Contains("identity"));
  auto orig = corridorkey::load_profile("original");
  orig.model.token_routing = true;
  orig.model.checkpoint = o.model.checkpoint;
  CHECK_THROWS_AS(corridorkey::OriginalEngine(orig), corridorkey::ConfigError);
}
