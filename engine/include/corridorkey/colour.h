// Colour spaces the engine can read plates in and write outputs in (docs/colour.md): the
// built-in names, made from OpenColorIO's built-in transforms and the same whatever $OCIO
// says, and the colour spaces of an OCIO config. Torch-free.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/version.h>

#include <string>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

struct ColourSpaceInfo {
  std::string name;
  std::string source;      // "built-in", or the config file it comes from
  std::string transforms;  // the OCIO transforms a built-in name is made of; "" for a config's
  std::string linear;      // its scene-linear form ("linear ARRI Wide Gamut 3"); "" for a config's
};

/// The built-in names, then the colour spaces of the config (`ocio_config`, else $OCIO)
/// when there is one. ConfigError naming the file and OCIO's message when it cannot be read.
CORRIDORKEY_API std::vector<ColourSpaceInfo> list_colour_spaces(const std::string& ocio_config);

CORRIDORKEY_NAMESPACE_END
