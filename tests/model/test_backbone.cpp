// Decoupled sizes (backbone_size): the encoder and decoders at a smaller size, the refiner
// at img_size. Checked against the reference's own semantics (tools/greenformer_ref.py
// GreenFormer(backbone_size=...), fixture tiny128_bb64_fixture.pt), bit-identical to the
// plain forward when nothing is traded, and validated as the issue asks.
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>

#include <catch2/catch.hpp>

#include "model/checkpoint.h"
#include "model/sample_input.h"
#include "support/planar.h"
#include "support/support.h"

using namespace corridorkey;
using Catch::Matchers::Contains;

namespace {

Profile tiny256(const std::string& profile) {
  auto o = load_profile(profile);
  o.model.checkpoint = ck_test::fixture("tiny256.pth");
  o.engine.img_size = 256;
  o.model.device = "cpu";
  o.model.tune = TuneMode::Off;               // no trials in unit-sized tests
  o.model.model_precision = Precision::Float32;
  return o;
}

std::vector<float> seeded(int64_t S) { return ck_test::seeded_planar(S, 7); }
using ck_test::max_diff;

}  // namespace

TEST_CASE("backbone_size matches the reference's GreenFormer(backbone_size=64) at img_size 128", "[model]") {
  torch::NoGradGuard ng;
  const auto ck = model::read_checkpoint(ck_test::fixture("tiny128.pth"));
  auto cfg = model::config_at(ck, 128);
  std::string note;
  cfg.resolve_backbone(64, 0, &note);
  CHECK(note.empty());
  REQUIRE(cfg.encoder_size() == 64);
  model::GreenFormer net(cfg);
  model::load_weights(*net, ck);  // pos_embed 32x32 -> 16x16, as the reference's loader
  net->eval();
  const auto fx = ck_test::load_tensors(ck_test::fixture("tiny128_bb64_fixture.pt"));
  const auto got = net->forward(fx.at("input"));
  // Encoder features at the backbone size, everything from the upsampling on at img_size.
  CHECK(got.features[0].size(2) == 16);
  CHECK(got.alpha_logits.size(2) == 16);
  CHECK(got.alpha.size(2) == 128);
  for (const auto& name : model::GreenFormerOutput::names()) {
    const auto want = fx.at(name);
    const auto t = got.get(name);
    REQUIRE(t.sizes() == want.sizes());
    const double d = ck_test::max_abs_diff(t, want);
    const double scale = std::max(1.0, ck_test::max_abs(want));
    UNSCOPED_INFO(name << " max|diff| " << d << " (scale " << scale << ")");
    CHECK(d <= 1e-4 * scale);
  }
  // It is a different forward from the full-size one (the test would pass vacuously if
  // backbone_size were ignored and the fixture equalled the plain outputs).
  auto full_cfg = model::config_at(ck, 128);
  model::GreenFormer full(full_cfg);
  model::load_weights(*full, ck);
  full->eval();
  const auto plain = full->forward(fx.at("input"));
  CHECK(ck_test::max_abs_diff(plain.alpha, fx.at("alpha")) > 1e-3);
}

TEST_CASE("backbone_size equal to img_size is bit-identical to the plain forward", "[model]") {
  const auto in = seeded(256);
  auto base = tiny256("optimized");
  const auto a = OptimizedEngine(base).run_model(in);
  for (const std::string v : {"256", "100%", "0"}) {
    auto o = base;
    set_option(o, "backbone_size", v, "command line", OptionScope::Profile);
    OptimizedEngine e(o);
    CHECK(e.info().backbone_size == 256);
    const auto b = e.run_model(in);
    INFO("backbone_size " << v);
    CHECK(max_diff(a.alpha, b.alpha) == 0.0);
    CHECK(max_diff(a.fg, b.fg) == 0.0);
  }
}

TEST_CASE("draft profile: backbone at half of img_size, refiner at img_size", "[model]") {
  const auto in = seeded(256);
  const auto full = OptimizedEngine(tiny256("optimized")).run_model(in);
  auto o = tiny256("draft");
  CHECK(o.engine.backbone_percent == 50);
  OptimizedEngine e(o);
  CHECK(e.info().img_size == 256);
  CHECK(e.info().backbone_size == 128);
  const auto d = e.run_model(in);
  REQUIRE(d.alpha.size() == full.alpha.size());  // outputs stay at img_size
  const double diff = max_diff(d.alpha, full.alpha);
  INFO("draft vs full alpha max|diff| " << diff);
  CHECK(diff > 1e-4);  // a real trade, not the plain forward
  for (float v : d.alpha) REQUIRE((v >= 0.0f && v <= 1.0f));
  // The tiled refiner is exact with a decoupled backbone too (the refiner sees img_size).
  auto tiled = o;
  tiled.engine.tiled_refiner = RefinerTiling::On;
  tiled.engine.tile_size = 128;
  const auto t = OptimizedEngine(tiled).run_model(in);
  CHECK(max_diff(t.alpha, d.alpha) <= 1e-4);
  CHECK(max_diff(t.fg, d.fg) <= 1e-4);
}

TEST_CASE("backbone_size off the grid rounds down with a note; bad sizes are usage errors", "[model]") {
  auto o = tiny256("optimized");
  o.engine.backbone_size = 100;  // 96 is the nearest multiple of 32 below
  OptimizedEngine e(o);
  CHECK(e.info().backbone_size == 96);
  CHECK_THAT(e.info().notes, Contains("backbone_size 100 rounded down to 96"));

  auto pct = tiny256("optimized");
  set_option(pct, "backbone_size", "30%", "command line", OptionScope::Profile);  // 76.8 px -> 76 -> 64
  OptimizedEngine ep(pct);
  CHECK(ep.info().backbone_size == 64);
  CHECK_THAT(ep.info().notes, Contains("30% of img_size 256"));

  auto big = tiny256("optimized");
  big.engine.backbone_size = 512;
  CHECK_THROWS_MATCHES(OptimizedEngine(big), ConfigError,
                       Catch::Matchers::Message("backbone_size 512 is larger than img_size 256: the "
                                                "backbone runs at img_size or below (0 = img_size)"));
  auto small = tiny256("optimized");
  small.engine.backbone_size = 20;
  CHECK_THROWS_WITH(OptimizedEngine(small), Contains("below the smallest backbone size 32"));

  auto o2 = load_profile("optimized");
  CHECK_THROWS_WITH(set_option(o2, "backbone_size", "-64", "command line", OptionScope::Profile), Contains("backbone_size"));
  CHECK_THROWS_AS(set_option(o2, "backbone_size", "-64", "command line", OptionScope::Profile), ConfigError);
  CHECK_THROWS_AS(set_option(o2, "backbone_size", "0%", "command line", OptionScope::Profile), ConfigError);
  CHECK_THROWS_AS(set_option(o2, "backbone_size", "150%", "command line", OptionScope::Profile), ConfigError);
  CHECK_THROWS_AS(set_option(o2, "backbone_size", "half", "command line", OptionScope::Profile), ConfigError);
  set_option(o2, "backbone_size", "50%", "command line", OptionScope::Profile);
  CHECK(profile_fields(o2).size() > 0);
  bool printed = false;
  for (const auto& [k, v] : profile_fields(o2))
    if (k == "backbone_size") printed = v == "50%";
  CHECK(printed);
}

TEST_CASE("token routing plans its masks at the backbone size", "[model]") {
  auto o = tiny256("experimental");
  set_option(o, "backbone_size", "50%", "command line", OptionScope::Profile);
  OptimizedEngine e(o);
  CHECK(e.info().backbone_size == 128);
  const auto r = e.run_model(seeded(256));
  REQUIRE(r.alpha.size() == 256u * 256u);
  for (float v : r.alpha) REQUIRE(std::isfinite(v));
  CHECK(r.routed_stage2 <= 1.0);
}
