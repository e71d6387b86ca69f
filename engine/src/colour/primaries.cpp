#include "colour/primaries.h"

#include <corridorkey/check.h>

#include <cmath>
#include <sstream>

namespace corridorkey::colour {
namespace {

constexpr double kD65x = 0.3127, kD65y = 0.3290;
constexpr double kAcesWx = 0.32168, kAcesWy = 0.33767;  // SMPTE ST 2065-1

// From each gamut's publication: ITU-R BT.709 / BT.2020, SMPTE ST 2065-1 (AP0) and
// S-2014-004 (AP1), ARRI's ALEXA LogC curve / LogC4 specifications, Sony's S-Gamut3 /
// S-Gamut3.Cine technical summary, RED's IPP2 white paper, Canon's Cinema Gamut and
// Panasonic's V-Log/V-Gamut reference manual. tests/unit/colour_science.py checks every
// row against the colour-science package.
const Gamut kGamuts[] = {
    {"rec709", "Rec.709", {0.64, 0.33, 0.30, 0.60, 0.15, 0.06, kD65x, kD65y}},
    {"rec2020", "Rec.2020", {0.708, 0.292, 0.170, 0.797, 0.131, 0.046, kD65x, kD65y}},
    {"ap0", "ACES AP0", {0.7347, 0.2653, 0.0, 1.0, 0.0001, -0.0770, kAcesWx, kAcesWy}},
    {"ap1", "ACES AP1", {0.713, 0.293, 0.165, 0.830, 0.128, 0.044, kAcesWx, kAcesWy}},
    {"awg3", "ARRI Wide Gamut 3", {0.6840, 0.3130, 0.2210, 0.8480, 0.0861, -0.1020, kD65x, kD65y}},
    {"awg4", "ARRI Wide Gamut 4", {0.7347, 0.2653, 0.1424, 0.8576, 0.0991, -0.0308, kD65x, kD65y}},
    {"sgamut3", "S-Gamut3", {0.730, 0.280, 0.140, 0.855, 0.100, -0.050, kD65x, kD65y}},
    {"sgamut3cine", "S-Gamut3.Cine", {0.766, 0.275, 0.225, 0.800, 0.089, -0.087, kD65x, kD65y}},
    {"rwg", "REDWideGamutRGB",
     {0.780308, 0.304253, 0.121595, 1.493994, 0.095612, -0.084589, kD65x, kD65y}},
    {"cinema-gamut", "Canon Cinema Gamut", {0.74, 0.27, 0.17, 1.14, 0.08, -0.10, kD65x, kD65y}},
    {"vgamut", "Panasonic V-Gamut", {0.730, 0.280, 0.165, 0.840, 0.100, -0.030, kD65x, kD65y}},
};

std::array<double, 3> xyz_of(double x, double y) { return {x / y, 1.0, (1.0 - x - y) / y}; }

}  // namespace

const Gamut& gamut(const std::string& name) {
  for (const auto& g : kGamuts)
    if (name == g.name) return g;
  throw ConfigError("unknown gamut '" + name + "'");
}

Matrix3 multiply(const Matrix3& a, const Matrix3& b) {
  Matrix3 m{};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < 3; ++k) m[r * 3 + c] += a[r * 3 + k] * b[k * 3 + c];
  return m;
}

Matrix3 inverse(const Matrix3& m) {
  const double a = m[0], b = m[1], c = m[2], d = m[3], e = m[4], f = m[5], g = m[6], h = m[7], i = m[8];
  const double A = e * i - f * h, B = -(d * i - f * g), C = d * h - e * g;
  const double det = a * A + b * B + c * C;
  CK_CHECK(std::fabs(det) > 1e-12, ConfigError, "singular colour matrix");
  return {A / det, -(b * i - c * h) / det, (b * f - c * e) / det,
          B / det, (a * i - c * g) / det,  -(a * f - c * d) / det,
          C / det, -(a * h - b * g) / det, (a * e - b * d) / det};
}

Matrix3 rgb_to_xyz(const Chromaticities& p) {
  // Columns are the primaries' XYZ, scaled so that RGB (1,1,1) is the white point.
  const auto r = xyz_of(p[0], p[1]), g = xyz_of(p[2], p[3]), b = xyz_of(p[4], p[5]);
  const auto w = xyz_of(p[6], p[7]);
  const Matrix3 prim = {r[0], g[0], b[0], r[1], g[1], b[1], r[2], g[2], b[2]};
  const auto inv = inverse(prim);
  double s[3];
  for (int k = 0; k < 3; ++k) s[k] = inv[k * 3] * w[0] + inv[k * 3 + 1] * w[1] + inv[k * 3 + 2] * w[2];
  Matrix3 m = prim;
  for (int row = 0; row < 3; ++row)
    for (int c = 0; c < 3; ++c) m[row * 3 + c] *= s[c];
  return m;
}

Matrix3 gamut_matrix(const Chromaticities& from, const Chromaticities& to) {
  return multiply(inverse(rgb_to_xyz(to)), rgb_to_xyz(from));
}

std::optional<std::string> match_gamut(const Chromaticities& c, const std::string& candidates,
                                       double tolerance) {
  std::stringstream ss(candidates);
  for (std::string name; std::getline(ss, name, ',');) {
    const auto& g = gamut(name);
    bool same = true;
    for (size_t k = 0; k < c.size(); ++k) same = same && std::fabs(c[k] - g.xy[k]) <= tolerance;
    if (same) return name;
  }
  return std::nullopt;
}

}  // namespace corridorkey::colour
