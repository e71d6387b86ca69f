// engine/src/colour against published numbers, not our own: the camera makers' 18% grey
// code values, ARRI's LogC4 formula, the sRGB curve, BT.709 luminance weights; and the
// rules for names (built in whatever $OCIO says; config names; errors that name things).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <corridorkey/errors.h>

#include "colour/conversion.h"
#include "colour/spaces.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace corridorkey;
using namespace corridorkey::colour;
using Catch::Matchers::Contains;

namespace {

std::array<float, 3> decode(const std::string& name, float v) {
  std::array<float, 3> p{v, v, v};
  to_working(resolve(name, "")).apply(p.data(), 1, 3);
  return p;
}

float encode_grey(const std::string& name, float v) {
  std::array<float, 3> p{v, v, v};
  from_working(resolve(name, ""), /*linear_form=*/false).apply(p.data(), 1, 3);
  CHECK(p[0] == Approx(p[1]).margin(1e-6));
  CHECK(p[0] == Approx(p[2]).margin(1e-6));
  return p[0];
}

/// ARRI's LogC4 specification, written out here in double as the document states it,
/// independently of the OCIO LogCameraTransform the engine builds.
double logc4_encode(double e) {
  const double a = (std::pow(2.0, 18) - 16) / 117.45, b = (1023.0 - 95) / 1023, c = 95.0 / 1023;
  const double s = (7 * std::log(2.0) * std::pow(2.0, 7 - 14 * c / b)) / (a * b);
  const double t = (std::pow(2.0, 14 * (-c / b) + 6) - 64) / a;
  return e >= t ? (std::log2(a * e + 64) - 6) / 14 * b + c : (e - t) / s;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("ck_colour_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}

const char* kConfig = R"(ocio_profile_version: 2
roles:
  default: ACES2065-1
  scene_linear: ACEScg
  aces_interchange: ACES2065-1
file_rules:
  - !<Rule> {name: Default, colorspace: default}
displays:
  sRGB:
    - !<View> {name: Raw, colorspace: ACES2065-1}
colorspaces:
  - !<ColorSpace>
    name: ACES2065-1
  - !<ColorSpace>
    name: ACEScg
    to_scene_reference: !<BuiltinTransform> {style: ACEScg_to_ACES2065-1}
)";

}  // namespace

TEST_CASE("colour: published 18% grey code values decode to 0.18 and encode back", "[unit]") {
  const std::pair<const char*, double> published[] = {
      {"arri-logc3-ei800-awg", 0.391007},  // ARRI LogC3, EI 800
      {"sony-slog3-sgamut3", 420.0 / 1023},  // Sony S-Log3: 10-bit code 420
      {"sony-slog3-sgamut3cine", 420.0 / 1023},
      {"red-log3g10-rwg", 1.0 / 3},         // RED Log3G10: 0.333333
      {"acescct", 0.413588},                // ACEScct (S-2016-001)
      {"arri-logc4-awg4", logc4_encode(0.18)},
  };
  for (const auto& [name, code] : published) {
    INFO(name);
    const auto lin = decode(name, static_cast<float>(code));
    for (float x : lin) CHECK(x == Approx(0.18).margin(1e-4));
    CHECK(encode_grey(name, 0.18f) == Approx(code).margin(1e-4));
  }
  // ARRI: LogC4 code value 95/1023 is linear 0; 18% grey is 0.2784 (10-bit 284.8).
  CHECK(logc4_encode(0.18) == Approx(0.2784).margin(1e-4));
  CHECK(decode("arri-logc4-awg4", 95.0f / 1023)[1] == Approx(0.0).margin(1e-6));
  CHECK(encode_grey("arri-logc4-awg4", 0.0f) == Approx(95.0 / 1023).margin(1e-6));
}

TEST_CASE("colour: LogC4 follows ARRI's formula over the whole range", "[unit]") {
  for (double e : {-0.01, 0.0, 0.001, 0.01, 0.05, 0.18, 0.5, 1.0, 4.0, 16.0, 100.0}) {
    INFO(e);
    CHECK(encode_grey("arri-logc4-awg4", static_cast<float>(e)) ==
          Approx(logc4_encode(e)).margin(2e-6));
    CHECK(decode("arri-logc4-awg4", static_cast<float>(logc4_encode(e)))[0] ==
          Approx(e).epsilon(1e-5).margin(1e-6));
  }
}

TEST_CASE("colour: srgb is the sRGB curve; linear-rec709 is exactly the identity", "[unit]") {
  CHECK(decode("srgb", 0.5f)[0] == Approx(0.214041).margin(1e-6));
  CHECK(decode("srgb", 0.04045f)[0] == Approx(0.04045 / 12.92).margin(1e-6));
  CHECK(to_working(resolve("linear-rec709", "")).identity());
  CHECK(from_working(resolve("srgb", ""), true).identity());  // its linear form is Rec.709
}

TEST_CASE("colour: every built-in name encodes and decodes back", "[unit]") {
  const float colours[][3] = {{0.18f, 0.18f, 0.18f}, {0.6f, 0.2f, 0.05f}, {0.02f, 0.5f, 0.1f},
                              {0.9f, 0.9f, 0.95f}, {0.05f, 0.1f, 0.7f}};
  for (const auto& b : builtin_spaces()) {
    INFO(b.name);
    const auto s = resolve(b.name, "");
    for (bool linear_form : {false, true}) {
      for (const auto& c : colours) {
        float p[3] = {c[0], c[1], c[2]};
        from_working(s, linear_form).apply(p, 1, 3);
        if (linear_form) {  // the linear form has the space's gamut: back to Rec.709
          const std::string g = b.gamut;
          if (g == "ap0" || g == "ap1") {  // D60 white: OCIO's Bradford, as acescg decodes
            to_working(resolve(g == "ap0" ? "aces2065-1" : "acescg", "")).apply(p, 1, 3);
          } else {  // D65 gamuts: the primaries matrix alone, computed here
            const auto m = gamut_matrix(gamut(g).xy, gamut("rec709").xy);
            const float q[3] = {p[0], p[1], p[2]};
            for (int r = 0; r < 3; ++r)
              p[r] = static_cast<float>(m[r * 3] * q[0] + m[r * 3 + 1] * q[1] + m[r * 3 + 2] * q[2]);
          }
          for (int k = 0; k < 3; ++k) CHECK(p[k] == Approx(c[k]).margin(1e-5));
        } else {
          to_working(s).apply(p, 1, 3);
          for (int k = 0; k < 3; ++k) CHECK(p[k] == Approx(c[k]).margin(1e-4));
        }
      }
    }
  }
}

TEST_CASE("colour: gamut matrices from published primaries", "[unit]") {
  const auto m = rgb_to_xyz(gamut("rec709").xy);
  CHECK(m[3] == Approx(0.2126).margin(1e-4));  // BT.709 luminance weights
  CHECK(m[4] == Approx(0.7152).margin(1e-4));
  CHECK(m[5] == Approx(0.0722).margin(1e-4));
  const auto ap0 = rgb_to_xyz(gamut("ap0").xy);  // SMPTE ST 2065-1's published matrix
  CHECK(ap0[0] == Approx(0.9525523959).margin(1e-6));
  CHECK(ap0[2] == Approx(0.0000936786).margin(1e-6));
  CHECK(ap0[4] == Approx(0.7281660966).margin(1e-6));
  CHECK(match_gamut(gamut("ap1").xy, "ap0,ap1,rec709") == std::optional<std::string>("ap1"));
  auto off = gamut("rec709").xy;
  off[0] += 0.01;
  CHECK_FALSE(match_gamut(off, "ap0,ap1,rec709"));
}

TEST_CASE("colour: names: built in whatever $OCIO says, config names, errors", "[unit]") {
  const auto broken = temp_file("broken.ocio", "ocio_profile_version: 2\ncolorspaces: [ {\n");
  const auto good = temp_file("good.ocio", kConfig);
  ::setenv("OCIO", broken.c_str(), 1);
  // A studio's broken or unrelated $OCIO never changes (nor reads for) a built-in name.
  CHECK(decode("arri-logc3-ei800-awg", 0.391007f)[0] == Approx(0.18).margin(1e-4));
  CHECK_THROWS_WITH(resolve("ACEScg", ""), Contains(broken) && Contains("cannot be read"));
  CHECK_THROWS_AS(resolve("ACEScg", ""), ConfigError);
  ::unsetenv("OCIO");
  CHECK_THROWS_WITH(resolve("logc", ""), Contains("unknown colour space 'logc'") &&
                                             Contains("arri-logc3-ei800-awg") && Contains("--ocio-config"));
  CHECK_THROWS_WITH(resolve("Nope", good), Contains("not in OCIO config " + good) && Contains("ACEScg"));
  // A config's ACEScg decodes as the built-in acescg does.
  float a[3] = {0.3f, 0.5f, 0.1f}, b[3] = {0.3f, 0.5f, 0.1f};
  to_working(resolve("ACEScg", good)).apply(a, 1, 3);
  to_working(resolve("acescg", "")).apply(b, 1, 3);
  for (int k = 0; k < 3; ++k) CHECK(a[k] == Approx(b[k]).margin(1e-5));
  ::setenv("OCIO", good.c_str(), 1);
  CHECK(resolve("ACEScg", "").config_file == good);
  ::unsetenv("OCIO");
  CHECK_THROWS_WITH(working_to_view(good, "sRGB/Nope"), Contains("no such display/view"));
  CHECK_FALSE(working_to_view(good, "sRGB/Raw").identity());
  std::filesystem::remove(broken);
  std::filesystem::remove(good);
}

// Measurements for docs/colour.md (hidden: `ck_colour_tests "[bench]"`).
TEST_CASE("colour: 4K decode cost and the wide-gamut round trip of a saturated chart", "[.][bench]") {
  // A 3840x2160 RGB float plate of LogC3 values, decoded in place, best of 5.
  std::vector<float> plate(size_t{3840} * 2160 * 3);
  for (size_t i = 0; i < plate.size(); ++i) plate[i] = 0.1f + 0.8f * static_cast<float>(i % 4099) / 4099.f;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  for (const char* name : {"arri-logc3-ei800-awg", "arri-logc4-awg4", "acescg"})
    for (int threads : {1, cores}) {
      const auto c = to_working(resolve(name, ""));
      double best = 1e9;
      std::vector<float> copy;
      for (int k = 0; k < 5; ++k) {
        copy = plate;
        const auto t = std::chrono::steady_clock::now();
        c.apply(copy.data(), 3840 * 2160, 3, threads);
        best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
      }
      std::vector<float> one = plate;
      c.apply(one.data(), 3840 * 2160, 3, 1);
      CHECK(one == copy);  // the same values for any thread count
      std::printf("4K decode %-22s %.1f ms (%d thread(s), best of 5)\n", name, best, threads);
    }
  // A saturated chart in ACEScg and in linear AWG3: primaries and secondaries at full and half
  // saturation, mid grey. Through the engine: decode to Rec.709, what the model can give back
  // (negatives clamped as the plate is, the foreground inside [0, 1] as the model predicts it),
  // then the Processed EXR's encoding back to the plate's space.
  for (const char* name : {"acescg", "arri-logc3-ei800-awg"}) {
    const auto s = resolve(name, "");
    std::vector<float> chart;
    for (float sat : {1.0f, 0.5f})
      for (const auto& c : {std::array<float, 3>{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 0}, {0, 1, 1}, {1, 0, 1}})
        for (float v : c) chart.push_back(0.18f + sat * (v * 0.6f - 0.18f));
    for (int k = 0; k < 3; ++k) chart.push_back(0.18f);
    const auto n = static_cast<int64_t>(chart.size() / 3);
    // The chart's linear values to Rec.709: acescg's own decode; AWG3 (D65) its primaries matrix.
    std::vector<float> x = chart;
    if (std::string(s.builtin->gamut) == "ap1") {
      to_working(s).apply(x.data(), n, 3);
    } else {
      const auto gm = gamut_matrix(gamut(s.builtin->gamut).xy, gamut("rec709").xy);
      for (int64_t i = 0; i < n; ++i)
        for (int row = 0; row < 3; ++row)
          x[i * 3 + row] = static_cast<float>(gm[row * 3] * chart[i * 3] + gm[row * 3 + 1] * chart[i * 3 + 1] +
                                              gm[row * 3 + 2] * chart[i * 3 + 2]);
    }
    const auto to_space = from_working(s, /*linear_form=*/true);
    for (auto& v : x) v = std::min(std::max(v, 0.f), 1.f);
    to_space.apply(x.data(), n, 3);
    double worst = 0;
    for (size_t i = 0; i < chart.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(x[i] - chart[i])));
    std::printf("saturated chart in linear %s: max abs round-trip error %.3f (grey %.1e)\n", s.builtin->gamut,
                worst, static_cast<double>(std::fabs(x[chart.size() - 1] - chart.back())));
  }
}
