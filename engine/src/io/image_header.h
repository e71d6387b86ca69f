// Image dimensions from the file header alone (PNG IHDR, JPEG SOF, TIFF first IFD, BMP,
// EXR data window), so an absurd size is refused before any pixel memory is allocated:
// a 282 KB EXR claiming 12000 x 12000 would otherwise make the decoder allocate 2.3 GB.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace corridorkey::io {

struct ImageSize {
  int64_t width = 0, height = 0;
  /// Channels and bytes per sample the decoder produces, as far as the header says; 0 when
  /// the probe does not read them (the decode budget then assumes 4 channels of float).
  int channels = 0, bytes_per_sample = 0;
  /// Whole-image buffers the decoder may hold besides the image it returns (TIFF: 1).
  int decoder_copies = 0;
};

/// The size the header declares, or nullopt when the format is not recognised or the header
/// is unreadable (the decoder then reports the problem). Never throws.
std::optional<ImageSize> probe_image_size(const std::string& path);

/// Default limit on pixels per frame: 16384 x 16384.
constexpr int64_t kDefaultMaxPixels = int64_t{16384} * 16384;

/// IoError naming the file when its header declares more than max_pixels pixels (or a
/// non-positive size).
void check_image_size(const std::string& path, int64_t max_pixels);

struct DecodeLimits;  // io/decode_budget.h
/// The same, and the decode budget: IoError when decoding the file would hold more bytes
/// (x the read workers) than limits.budget_bytes.
void check_image_size(const std::string& path, const DecodeLimits& limits);

}  // namespace corridorkey::io
