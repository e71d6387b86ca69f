#include "colour/spaces.h"

#include "config/input_file.h"

#include <corridorkey/check.h>

#include <OpenColorIO/OpenColorIO.h>

#include <cstdlib>

namespace corridorkey::colour {
namespace OCIO = OCIO_NAMESPACE;

const std::vector<BuiltinSpace>& builtin_spaces() {
  static const std::vector<BuiltinSpace> v = {
      {"srgb", "rec709", Encoding::Srgb, "ExponentWithLinearTransform (gamma 2.4, offset 0.055)"},
      {"linear-rec709", "rec709", Encoding::Linear, "none (the working space)"},
      {"acescg", "ap1", Encoding::Linear, "UTILITY - ACES-AP1_to_LINEAR-REC709_BFD"},
      {"aces2065-1", "ap0", Encoding::Linear,
       "ACEScg_to_ACES2065-1 (inverse), UTILITY - ACES-AP1_to_LINEAR-REC709_BFD"},
      {"acescct", "ap1", Encoding::Log, "ACEScct_to_ACES2065-1, then as aces2065-1"},
      {"arri-logc3-ei800-awg", "awg3", Encoding::Log,
       "ARRI_ALEXA-LOGC-EI800-AWG_to_ACES2065-1, then as aces2065-1"},
      {"arri-logc4-awg4", "awg4", Encoding::Log,
       "LogCameraTransform (ARRI LogC4 constants, inverse), MatrixTransform AWG4 -> Rec.709"},
      {"sony-slog3-sgamut3", "sgamut3", Encoding::Log,
       "SONY_SLOG3-SGAMUT3_to_ACES2065-1, then as aces2065-1"},
      {"sony-slog3-sgamut3cine", "sgamut3cine", Encoding::Log,
       "SONY_SLOG3-SGAMUT3.CINE_to_ACES2065-1, then as aces2065-1"},
      {"red-log3g10-rwg", "rwg", Encoding::Log, "RED_LOG3G10-RWG_to_ACES2065-1, then as aces2065-1"},
      {"canon-clog2-cgamut", "cinema-gamut", Encoding::Log,
       "CANON_CLOG2-CGAMUT_to_ACES2065-1, then as aces2065-1"},
      {"canon-clog3-cgamut", "cinema-gamut", Encoding::Log,
       "CANON_CLOG3-CGAMUT_to_ACES2065-1, then as aces2065-1"},
      {"panasonic-vlog-vgamut", "vgamut", Encoding::Log,
       "PANASONIC_VLOG-VGAMUT_to_ACES2065-1, then as aces2065-1"},
      {"rec2020-linear", "rec2020", Encoding::Linear, "MatrixTransform Rec.2020 -> Rec.709"},
  };
  return v;
}

const BuiltinSpace* find_builtin(const std::string& name) {
  for (const auto& s : builtin_spaces())
    if (name == s.name) return &s;
  return nullptr;
}

std::string builtin_names() {
  std::string s;
  for (const auto& b : builtin_spaces()) s += (s.empty() ? "" : ", ") + std::string(b.name);
  return s;
}

std::optional<Chromaticities> Space::linear_chromaticities() const {
  if (!builtin) return std::nullopt;
  return gamut(builtin->gamut).xy;
}

std::string Space::linear_title() const {
  if (!builtin) return name + " (config " + config_file + ")";
  const std::string g = builtin->gamut;
  if (g == "rec709") return "scene-linear Rec.709";
  if (g == "ap1") return "ACEScg (linear AP1)";
  if (g == "ap0") return "ACES2065-1 (linear AP0)";
  return std::string("linear ") + gamut(g).title;
}

std::string config_file(const std::string& ocio_config) {
  if (!ocio_config.empty()) return ocio_config;
  const char* env = std::getenv("OCIO");
  return env ? std::string(env) : std::string();
}

namespace {
OCIO::ConstConfigRcPtr load(const std::string& file) {
  config::check_input_file(file, "OCIO config");
  try {
    return OCIO::Config::CreateFromFile(file.c_str());
  } catch (const OCIO::Exception& e) {
    throw ConfigError("OCIO config " + file + ": cannot be read by OpenColorIO " +
                      OCIO::GetVersion() + ": " + e.what());
  }
}
}  // namespace

std::vector<std::string> config_space_names(const std::string& file) {
  const auto cfg = load(file);
  std::vector<std::string> v;
  for (int i = 0; i < cfg->getNumColorSpaces(); ++i) v.emplace_back(cfg->getColorSpaceNameByIndex(i));
  return v;
}

std::vector<std::string> config_display_views(const std::string& file) {
  const auto cfg = load(file);
  std::vector<std::string> v;
  for (int d = 0; d < cfg->getNumDisplays(); ++d) {
    const std::string display = cfg->getDisplay(d);
    for (int i = 0; i < cfg->getNumViews(display.c_str()); ++i)
      v.push_back(display + "/" + cfg->getView(display.c_str(), i));
  }
  return v;
}

Space resolve(const std::string& name, const std::string& ocio_config) {
  Space s;
  s.name = name;
  if ((s.builtin = find_builtin(name))) return s;  // never reads a config, whatever $OCIO says
  const auto file = config_file(ocio_config);
  CK_CHECK(!file.empty(), ConfigError, "unknown colour space '", name, "' (built-in names: ",
           builtin_names(), "; other names need an OCIO config: --ocio-config FILE or $OCIO)");
  const auto cfg = load(file);
  if (!cfg->getColorSpace(name.c_str())) {
    std::string names;
    for (const auto& n : config_space_names(file)) names += (names.empty() ? "" : ", ") + n;
    throw ConfigError("unknown colour space '" + name + "': not built in (" + builtin_names() +
                      ") and not in OCIO config " + file + " (" + names + ")");
  }
  CK_CHECK(cfg->hasRole(OCIO::ROLE_INTERCHANGE_SCENE), ConfigError, "OCIO config ", file,
           ": colour space '", name, "' cannot be converted: the config has no '",
           OCIO::ROLE_INTERCHANGE_SCENE, "' role, so its primaries are unknown");
  s.config_file = file;
  return s;
}

}  // namespace corridorkey::colour
