#include "colour/conversion.h"

#include "config/input_file.h"

#include <corridorkey/check.h>

#include <OpenColorIO/OpenColorIO.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

namespace corridorkey::colour {
namespace OCIO = OCIO_NAMESPACE;

struct Conversion::Impl {
  OCIO::ConstCPUProcessorRcPtr cpu;  // null: the identity
  std::string description;
};

Conversion::Conversion() : impl_(std::make_shared<Impl>()) {}
Conversion::Conversion(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
bool Conversion::identity() const { return !impl_->cpu; }
const std::string& Conversion::description() const { return impl_->description; }

void Conversion::apply(float* data, int64_t pixels, int channels, int threads) const {
  if (!impl_->cpu || channels < 3 || pixels <= 0) return;
  // Chunks of 16K pixels: OCIO's CPU processor converts a packed line through a scratch
  // buffer of the line's length, so one 8.3M-pixel "line" (a 4K frame) thrashed the cache:
  // 4K acescg took 1049 ms as one line, far less in chunks (docs/colour.md).
  constexpr int64_t kChunk = int64_t{1} << 14;
  const int64_t chunks = (pixels + kChunk - 1) / kChunk;
  auto run = [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      const int64_t p0 = k * kChunk, n = std::min(kChunk, pixels - p0);
      OCIO::PackedImageDesc d(data + p0 * channels, static_cast<long>(n), 1, channels);
      impl_->cpu->apply(d);
    }
  };
  const int64_t t = std::max<int64_t>(1, std::min<int64_t>(threads, chunks));
  if (t == 1) return run(0, chunks);
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < t; ++i) pool.emplace_back(run, chunks * i / t, chunks * (i + 1) / t);
  run(0, chunks / t);
  for (auto& th : pool) th.join();
}

namespace {

OCIO::TransformRcPtr builtin(const char* style, bool inverse = false) {
  auto t = OCIO::BuiltinTransform::Create();
  t->setStyle(style);
  t->setDirection(inverse ? OCIO::TRANSFORM_DIR_INVERSE : OCIO::TRANSFORM_DIR_FORWARD);
  return t;
}

OCIO::TransformRcPtr matrix(const Matrix3& m) {
  const double m44[16] = {m[0], m[1], m[2], 0, m[3], m[4], m[5], 0, m[6], m[7], m[8], 0, 0, 0, 0, 1};
  auto t = OCIO::MatrixTransform::Create();
  t->setMatrix(m44);
  return t;
}

constexpr const char* kAp1To709 = "UTILITY - ACES-AP1_to_LINEAR-REC709_BFD";
constexpr const char* kAp1ToAp0 = "ACEScg_to_ACES2065-1";

/// ARRI LogC4 (ARRI's "LogC4 Logarithmic Color Space" specification) as OCIO's
/// LogCameraTransform, forward = linear to LogC4:
///   E >= t: ((log2(a E + 64) - 6) / 14) b + c;  E < t: (E - t) / s.
OCIO::TransformRcPtr logc4_curve() {
  const double a = (std::pow(2.0, 18.0) - 16.0) / 117.45;
  const double b = (1023.0 - 95.0) / 1023.0;
  const double c = 95.0 / 1023.0;
  const double s = (7.0 * std::log(2.0) * std::pow(2.0, 7.0 - 14.0 * c / b)) / (a * b);
  const double t = (std::pow(2.0, 14.0 * (-c / b) + 6.0) - 64.0) / a;
  const double brk[3] = {t, t, t};
  auto l = OCIO::LogCameraTransform::Create(brk);
  l->setBase(2.0);
  const double log_slope[3] = {b / 14, b / 14, b / 14};
  const double log_offset[3] = {c - 6 * b / 14, c - 6 * b / 14, c - 6 * b / 14};
  const double lin_slope[3] = {a, a, a};
  const double lin_offset[3] = {64, 64, 64};
  const double linear_slope[3] = {1 / s, 1 / s, 1 / s};
  l->setLogSideSlopeValue(log_slope);
  l->setLogSideOffsetValue(log_offset);
  l->setLinSideSlopeValue(lin_slope);
  l->setLinSideOffsetValue(lin_offset);
  l->setLinearSlopeValue(linear_slope);
  return l;
}

/// Scene-linear Rec.709 to the linear form of a built-in gamut.
void append_working_to_gamut(OCIO::GroupTransformRcPtr& g, const std::string& gamut_name) {
  if (gamut_name == "rec709") return;
  if (gamut_name == "ap1" || gamut_name == "ap0") {
    g->appendTransform(builtin(kAp1To709, /*inverse=*/true));
    if (gamut_name == "ap0") g->appendTransform(builtin(kAp1ToAp0));
    return;
  }
  // Every camera gamut and Rec.2020 share Rec.709's D65 white: a primaries matrix alone.
  g->appendTransform(matrix(gamut_matrix(gamut("rec709").xy, gamut(gamut_name).xy)));
}

/// A built-in space's values to scene-linear Rec.709.
OCIO::GroupTransformRcPtr builtin_decode(const BuiltinSpace& b) {
  auto g = OCIO::GroupTransform::Create();
  const std::string n = b.name;
  auto aces_to_working = [&] {
    g->appendTransform(builtin(kAp1ToAp0, /*inverse=*/true));
    g->appendTransform(builtin(kAp1To709));
  };
  if (n == "srgb") {
    auto e = OCIO::ExponentWithLinearTransform::Create();
    const double gamma[4] = {2.4, 2.4, 2.4, 1.0}, offset[4] = {0.055, 0.055, 0.055, 0.0};
    e->setGamma(gamma);
    e->setOffset(offset);
    g->appendTransform(e);  // forward: encoded to linear
  } else if (n == "linear-rec709") {
  } else if (n == "acescg") {
    g->appendTransform(builtin(kAp1To709));
  } else if (n == "aces2065-1") {
    aces_to_working();
  } else if (n == "acescct") {
    g->appendTransform(builtin("ACEScct_to_ACES2065-1"));
    aces_to_working();
  } else if (n == "arri-logc4-awg4") {
    auto curve = logc4_curve();
    curve->setDirection(OCIO::TRANSFORM_DIR_INVERSE);
    g->appendTransform(curve);
    g->appendTransform(matrix(gamut_matrix(gamut("awg4").xy, gamut("rec709").xy)));
  } else if (n == "rec2020-linear") {
    g->appendTransform(matrix(gamut_matrix(gamut("rec2020").xy, gamut("rec709").xy)));
  } else {
    static const std::pair<const char*, const char*> camera[] = {
        {"arri-logc3-ei800-awg", "ARRI_ALEXA-LOGC-EI800-AWG_to_ACES2065-1"},
        {"sony-slog3-sgamut3", "SONY_SLOG3-SGAMUT3_to_ACES2065-1"},
        {"sony-slog3-sgamut3cine", "SONY_SLOG3-SGAMUT3.CINE_to_ACES2065-1"},
        {"red-log3g10-rwg", "RED_LOG3G10-RWG_to_ACES2065-1"},
        {"canon-clog2-cgamut", "CANON_CLOG2-CGAMUT_to_ACES2065-1"},
        {"canon-clog3-cgamut", "CANON_CLOG3-CGAMUT_to_ACES2065-1"},
        {"panasonic-vlog-vgamut", "PANASONIC_VLOG-VGAMUT_to_ACES2065-1"}};
    const char* style = nullptr;
    for (const auto& [k, v] : camera)
      if (n == k) style = v;
    CK_CHECK(style, ConfigError, "internal: no transform for built-in colour space '", n, "'");
    g->appendTransform(builtin(style));
    aces_to_working();
  }
  return g;
}

OCIO::ConstConfigRcPtr config_of(const Space& s) {
  if (s.builtin) return OCIO::Config::CreateRaw();  // built-in transforms need no config
  config::check_input_file(s.config_file, "OCIO config");
  try {
    return OCIO::Config::CreateFromFile(s.config_file.c_str());
  } catch (const OCIO::Exception& e) {
    throw ConfigError("OCIO config " + s.config_file + ": " + e.what());
  }
}

/// A config's colour space to scene-linear Rec.709, through its aces_interchange role.
OCIO::GroupTransformRcPtr config_decode(const Space& s) {
  auto g = OCIO::GroupTransform::Create();
  auto cs = OCIO::ColorSpaceTransform::Create();
  cs->setSrc(s.name.c_str());
  cs->setDst(OCIO::ROLE_INTERCHANGE_SCENE);
  g->appendTransform(cs);
  g->appendTransform(builtin(kAp1ToAp0, /*inverse=*/true));
  g->appendTransform(builtin(kAp1To709));
  return g;
}

Conversion make(const OCIO::ConstConfigRcPtr& cfg, const OCIO::ConstTransformRcPtr& t,
                std::string description, const std::string& what) {
  try {
    auto impl = std::make_shared<Conversion::Impl>();
    auto proc = cfg->getProcessor(t);
    impl->description = std::move(description);
    if (!proc->isNoOp())
      // LOSSLESS: no fast log/exp approximations, no LUT stand-ins (the published code
      // values hold to 1e-6); matrices are still composed into one.
      impl->cpu = proc->getOptimizedCPUProcessor(OCIO::BIT_DEPTH_F32, OCIO::BIT_DEPTH_F32,
                                                 OCIO::OPTIMIZATION_LOSSLESS);
    return Conversion(impl);
  } catch (const OCIO::Exception& e) {
    throw ConfigError(what + ": OpenColorIO: " + e.what());
  }
}

}  // namespace

Conversion to_working(const Space& s) {
  const auto g = s.builtin ? builtin_decode(*s.builtin) : config_decode(s);
  return make(config_of(s), g, s.builtin ? s.builtin->ocio : s.name + " -> aces_interchange",
              "colour space '" + s.name + "'");
}

Conversion from_working(const Space& s, bool linear_form) {
  OCIO::GroupTransformRcPtr g;
  std::string what;
  if (s.builtin && (linear_form || s.builtin->encoding == Encoding::Linear)) {
    g = OCIO::GroupTransform::Create();
    append_working_to_gamut(g, s.builtin->gamut);
    what = "Rec.709 -> " + s.linear_title();
  } else {
    g = s.builtin ? builtin_decode(*s.builtin) : config_decode(s);
    g->setDirection(OCIO::TRANSFORM_DIR_INVERSE);
    what = "Rec.709 -> " + s.name;
  }
  return make(config_of(s), g, what, "colour space '" + s.name + "'");
}

Conversion working_to_view(const std::string& file, const std::string& display_view) {
  const auto slash = display_view.find('/');
  CK_CHECK(slash != std::string::npos && slash > 0 && slash + 1 < display_view.size(), ConfigError,
           "--comp-view '", display_view, "': expected DISPLAY/VIEW");
  CK_CHECK(!file.empty(), ConfigError, "--comp-view '", display_view,
           "' needs an OCIO config (--ocio-config FILE or $OCIO)");
  Space s;
  s.config_file = file;
  const auto cfg = config_of(s);
  const auto display = display_view.substr(0, slash), view = display_view.substr(slash + 1);
  CK_CHECK(cfg->hasRole(OCIO::ROLE_INTERCHANGE_SCENE), ConfigError, "OCIO config ", file,
           ": --comp-view needs its '", OCIO::ROLE_INTERCHANGE_SCENE, "' role");
  bool found = false;
  for (int i = 0; i < cfg->getNumViews(display.c_str()); ++i)
    found = found || view == cfg->getView(display.c_str(), i);
  CK_CHECK(found, ConfigError, "--comp-view '", display_view, "': OCIO config ", file,
           " has no such display/view");
  auto g = OCIO::GroupTransform::Create();
  g->appendTransform(builtin(kAp1To709, /*inverse=*/true));
  g->appendTransform(builtin(kAp1ToAp0));
  auto dv = OCIO::DisplayViewTransform::Create();
  dv->setSrc(OCIO::ROLE_INTERCHANGE_SCENE);
  dv->setDisplay(display.c_str());
  dv->setView(view.c_str());
  g->appendTransform(dv);
  return make(cfg, g, "Rec.709 -> " + display_view, "--comp-view '" + display_view + "'");
}

}  // namespace corridorkey::colour
