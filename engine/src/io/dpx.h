// DPX plates (SMPTE 268M; 10-bit camera-log scans and camera originals): the header read
// here, so that its size is checked before any decoder allocates, and the pixels decoded by
// OpenImageIO (the image library of this field). Torch-free.
#pragma once

#include <corridorkey/image.h>

#include "io/image_header.h"
#include "io/plate_metadata.h"

#include <memory>

#include <optional>
#include <string>

namespace corridorkey::io {

struct DpxHeader {
  ImageSize size;
  int transfer = 0;  // first image element's transfer characteristic (SMPTE 268M table 5A)
  std::string transfer_name() const;
};

/// True when the file starts with a DPX magic number (either byte order).
bool has_dpx_magic(const std::string& path);
/// The header of a DPX file, or nullopt when the file is not one or its header is cut
/// short. Never throws.
std::optional<DpxHeader> read_dpx_header(const std::string& path);
/// Decodes a DPX through OpenImageIO as float (integer codes / (2^bits - 1)); RGB or RGBA
/// (a luma file: 1 channel). The caller checks the header's size first. IoError naming the
/// file and OpenImageIO's message. `metadata`, when given, gets what the header carries to
/// EXR outputs: timecode, frame rate and pixel aspect (null when it has none of them).
Image read_dpx(const std::string& path, std::shared_ptr<const PlateMetadata>* metadata = nullptr);

}  // namespace corridorkey::io
