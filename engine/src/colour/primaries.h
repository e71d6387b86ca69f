// Published primaries and white points of the gamuts the built-in colour spaces use, and
// the 3x3 matrices between them. Torch-free, OCIO-free: the EXR `chromaticities`
// attribute is written from and matched against this table.
#pragma once

#include <array>
#include <optional>
#include <string>

namespace corridorkey::colour {

/// CIE xy of red, green, blue and white: the layout of OpenEXR's Chromaticities
/// (rx ry gx gy bx by wx wy).
using Chromaticities = std::array<double, 8>;
using Matrix3 = std::array<double, 9>;  // row-major, applied to column RGB

struct Gamut {
  const char* name;   // "rec709", "ap0", "awg3", ...
  const char* title;  // "Rec.709", "ACES AP0", "ARRI Wide Gamut 3", ...
  Chromaticities xy;
};

/// The table: rec709, rec2020, ap0, ap1, awg3, awg4, sgamut3, sgamut3cine, rwg,
/// cinema-gamut, vgamut. Throws ConfigError for another name.
const Gamut& gamut(const std::string& name);

/// RGB (of `g`) to CIE XYZ, with Y of white = 1.
Matrix3 rgb_to_xyz(const Chromaticities& g);
Matrix3 inverse(const Matrix3& m);
Matrix3 multiply(const Matrix3& a, const Matrix3& b);
/// RGB of `from` to RGB of `to`, for two gamuts of the same white point (no adaptation).
Matrix3 gamut_matrix(const Chromaticities& from, const Chromaticities& to);

/// The name of the table's gamut whose chromaticities all lie within `tolerance` of `c`
/// (only among `candidates`, comma-separated), or nullopt.
std::optional<std::string> match_gamut(const Chromaticities& c, const std::string& candidates,
                                       double tolerance = 1e-3);

}  // namespace corridorkey::colour
