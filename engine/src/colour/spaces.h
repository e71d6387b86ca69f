// The colour spaces plates can be in: the built-in names (made from OpenColorIO's built-in
// transforms, always the same whatever $OCIO says) and the colour spaces of an OCIO config
// (--ocio-config FILE, else $OCIO), read only when a name is not built in. Torch-free.
#pragma once

#include "colour/primaries.h"

#include <optional>
#include <string>
#include <vector>

namespace corridorkey::colour {

enum class Encoding { Srgb, Linear, Log };

struct BuiltinSpace {
  const char* name;   // lower case, as given on the command line
  const char* gamut;  // primaries of its scene-linear form (colour/primaries.h)
  Encoding encoding;
  const char* ocio;   // the OCIO transforms it is made of (docs/colour.md table, `colorspaces`)
};
const std::vector<BuiltinSpace>& builtin_spaces();
const BuiltinSpace* find_builtin(const std::string& name);
/// "srgb, linear-rec709, ..." for messages.
std::string builtin_names();

/// A resolved name: built in, or a colour space of `config_file`.
struct Space {
  std::string name;
  const BuiltinSpace* builtin = nullptr;
  std::string config_file;  // set for a config's colour space
  /// Chromaticities of its scene-linear form (EXR attribute); none for a config's space.
  std::optional<Chromaticities> linear_chromaticities() const;
  /// "linear AWG3", "ACEScg", "scene-linear Rec.709", or the config space's name.
  std::string linear_title() const;
  bool is_srgb() const { return builtin && builtin->encoding == Encoding::Srgb; }
};

/// The config file for names that are not built in: `ocio_config` when set, else $OCIO,
/// else "".
std::string config_file(const std::string& ocio_config);

/// ConfigError (exit 2) for an unknown name, listing the built-in names and the config's;
/// for a config OCIO cannot read, naming the file and OCIO's message; for a config without
/// an aces_interchange role (its spaces' primaries cannot be told).
Space resolve(const std::string& name, const std::string& ocio_config);

/// The colour spaces of a config file (ConfigError when unreadable).
std::vector<std::string> config_space_names(const std::string& file);
/// Its displays and views as "DISPLAY/VIEW" (ConfigError when unreadable).
std::vector<std::string> config_display_views(const std::string& file);

}  // namespace corridorkey::colour
