// Header probes of the still formats that OpenCV decodes beyond PNG / JPEG / TIFF / BMP:
// WebP, PNM (PBM/PGM/PPM) and PFM, Radiance HDR, Sun raster, JPEG 2000. Each reads only
// the declared size, so that check_image_size refuses a decode bomb of any frame format
// before the decoder allocates for it. Torch-free.
#pragma once

#include "io/image_header.h"

#include <istream>
#include <optional>

namespace corridorkey::io::detail {

/// The size declared by a header of one of those formats (the stream at offset 0), or
/// nullopt when `f` holds none of them or the header is unreadable. Never throws.
std::optional<ImageSize> probe_more_formats(std::istream& f);

}  // namespace corridorkey::io::detail
