// The plate attributes an EXR output copies (plate_metadata.h), as OpenEXR attributes:
// private to the readers and the writer of engine/src/io.
#pragma once

#include "io/plate_metadata.h"

#include <ImfAttribute.h>
#include <ImfHeader.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace corridorkey::io {

struct ExrAttributes {
  std::vector<std::pair<std::string, std::shared_ptr<const Imf::Attribute>>> list;
};

/// The attributes of `plate` an output carries: all but those describing the plate's pixels
/// (channels, compression, windows, line order, tiles, part type and name, chunk count,
/// deep data, preview) and its colour (chromaticities, adopted neutral, white luminance, the
/// ACES container flag), which the output's own colour space decides. Null when none is left.
std::shared_ptr<const ExrAttributes> carried_attributes(const Imf::Header& plate);

/// Adds (or replaces) `a`'s attributes on an output's header.
void add_attributes(const ExrAttributes& a, Imf::Header& out);

}  // namespace corridorkey::io
