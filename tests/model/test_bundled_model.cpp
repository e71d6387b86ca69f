// The bundled checkpoint keys the bundled sample clip as well as when it was trained:
// alpha SAD / MSE against the clip's ground truth on a few frames at the checkpoint's own
// img_size, fixed within a small tolerance (tests/bundled_model_metrics.json, rewritten by
// the command recorded in that file). An engine change that degrades the matte fails here.
#include <corridorkey/engine.h>
#include <corridorkey/profile.h>
#include <corridorkey/system.h>

#include <catch2/catch.hpp>

#include "io/image_io.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <vector>

using namespace corridorkey;

namespace {
struct Score {
  double sad = 0, mse = 0;
};
Score score(const Image& a, const Image& gt) {
  Score s;
  for (size_t i = 0; i < gt.pixels.size(); ++i) {
    const double d = a.pixels[i] - gt.pixels[i];
    s.sad += std::fabs(d);
    s.mse += d * d;
  }
  s.sad /= 1000.0;
  s.mse /= static_cast<double>(gt.pixels.size());
  return s;
}
}  // namespace

TEST_CASE("bundled model keeps its measured quality on the sample clip", "[model]") {
  const char* src = std::getenv("CK_SOURCE_DIR");
  REQUIRE(src);  // set by ctest
  const std::string root = src;
  const std::string json_path = root + "/tests/bundled_model_metrics.json";
  std::ifstream f(json_path);
  REQUIRE(f.good());
  auto expected = nlohmann::json::parse(f);
  // CK_REGEN_BUNDLED_METRICS=1: measure and rewrite the JSON (the command is in the file).
  const char* regen_env = std::getenv("CK_REGEN_BUNDLED_METRICS");
  const bool regen = regen_env && *regen_env && std::string(regen_env) != "0";
  auto o = load_profile("original");
  o.model.device = "cpu";  // bundled default checkpoint, img_size 0: the checkpoint's own size
  OriginalEngine e(o);
  CHECK(e.info().checkpoint.find(expected.at("checkpoint").get<std::string>()) != std::string::npos);
  CHECK(e.info().img_size == expected.at("img_size").get<int64_t>());
  double model_mse = 0, hint_mse = 0;
  auto measured = nlohmann::json::array();
  for (const auto& fr : expected.at("frames")) {
    const std::string name = fr.at("frame");
    INFO(name);
    const auto clip = root + "/samples/greenscreen_demo/";
    const auto plate = io::read_image(clip + "Input/" + name + ".png");
    const auto hint = io::read_image(clip + "AlphaHint/" + name + ".png");
    const auto gt = io::read_image(clip + "GT/alpha/" + name + ".png");
    const auto r = e.process_frame(plate.view(), hint.view());
    const auto m = score(r.alpha, gt);
    const auto h = score(hint, gt);
    UNSCOPED_INFO(name << ": model SAD " << m.sad << " MSE " << m.mse << " | hint SAD " << h.sad
                       << " MSE " << h.mse);
    model_mse += m.mse;
    hint_mse += h.mse;
    measured.push_back({{"frame", name}, {"sad", m.sad}, {"mse", m.mse}});
    if (regen) continue;
    CHECK(m.sad == Approx(fr.at("sad").get<double>()).epsilon(0.02).margin(0.01));
    CHECK(m.mse == Approx(fr.at("mse").get<double>()).epsilon(0.02).margin(1e-5));
    CHECK(m.mse < h.mse);  // better than the hint it was given
  }
  // The model card's bar: at default settings, at most half the hint's error.
  CHECK(model_mse <= 0.5 * hint_mse);
  if (regen) {
    expected["frames"] = measured;
    std::ofstream out(json_path);
    out << expected.dump(1) << "\n";
    WARN("rewrote " << json_path);
  }
}

// Each precision this CPU runs natively (float32 always; bfloat16 with avx512_bf16 or AMX,
// the flags the precision rule reads), pinned rather than left to the plan, so the bound
// states which precision it holds for on every CPU kind: the optimized engine within 2% of
// the reference's float32 SAD over 4 frames.
TEST_CASE("each native precision keys the sample clip within 2% SAD of float32", "[model]") {
  const char* src = std::getenv("CK_SOURCE_DIR");
  REQUIRE(src);
  const std::string clip = std::string(src) + "/samples/greenscreen_demo/";
  const auto cpu = cpu_features();
  std::vector<Precision> precisions{Precision::Float32};
  if (cpu.avx512_bf16 || cpu.amx) precisions.push_back(Precision::BFloat16);
  else std::cout << "SKIPPED the bfloat16 case: this CPU has no native bfloat16 (avx512_bf16 or amx_bf16)\n";
  auto exact = load_profile("original");
  exact.model.device = "cpu";
  OriginalEngine b(exact);
  for (const Precision p : precisions) {
    auto fast = load_profile("optimized");
    fast.model.device = "cpu";
    fast.model.tune = TuneMode::Off;
    fast.model.model_precision = p;
    OptimizedEngine a(fast);
    double sad_fast = 0, sad_exact = 0;
    for (const char* name : {"frame_0001", "frame_0006", "frame_0011", "frame_0016"}) {
      const auto plate = io::read_image(clip + "Input/" + name + ".png");
      const auto hint = io::read_image(clip + "AlphaHint/" + name + ".png");
      const auto gt = io::read_image(clip + "GT/alpha/" + name + ".png");
      sad_fast += score(a.process_frame(plate.view(), hint.view()).alpha, gt).sad;
      sad_exact += score(b.process_frame(plate.view(), hint.view()).alpha, gt).sad;
    }
    INFO("precision " << a.info().precision << ": SAD " << sad_fast << " vs float32 original " << sad_exact);
    std::cout << "precision " << a.info().precision << ": SAD " << sad_fast << " vs float32 original " << sad_exact
              << " (" << 100.0 * std::fabs(sad_fast - sad_exact) / sad_exact << "%)\n";
    CHECK(a.info().precision == to_string(p));
    CHECK(std::fabs(sad_fast - sad_exact) <= 0.02 * sad_exact);
  }
}
