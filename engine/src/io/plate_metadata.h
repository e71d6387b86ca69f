// What a plate's header says that its EXR outputs carry (docs/clips.md, "What carries
// over"): the display and data windows, pixel aspect, timecode, frame rate and the plate's
// other attributes. Read with the plate (read_plate), handed to write_exr with each output.
// Torch-free; OpenEXR's types stay in plate_metadata.cpp and the writer.
#pragma once

#include <corridorkey/image.h>

#include "io/decode_budget.h"

#include <memory>
#include <optional>
#include <string>

namespace corridorkey::io {

/// An inclusive pixel rectangle in the plate's own coordinates (an EXR window).
struct PixelBox {
  int x0 = 0, y0 = 0, x1 = -1, y1 = -1;
  int width() const { return x1 - x0 + 1; }
  int height() const { return y1 - y0 + 1; }
  bool operator==(const PixelBox& o) const { return x0 == o.x0 && y0 == o.y0 && x1 == o.x1 && y1 == o.y1; }
  bool operator!=(const PixelBox& o) const { return !(*this == o); }
};

/// The plate's attributes an EXR output copies (an Imf::Header's, pixel-describing ones
/// already left out); opaque here.
struct ExrAttributes;

struct PlateMetadata {
  /// The display window: the frame as a compositor shows it.
  PixelBox display;
  /// The pixels read and keyed: the data window together with the display window (display
  /// pixels without data are 0). Outputs are written with this as their data window.
  PixelBox frame;
  std::shared_ptr<const ExrAttributes> attributes;  // null: none to copy

  /// The keyed frame is larger than the display window (an overscan plate).
  bool overscan() const { return frame != display; }
};

/// Reads a plate as read_image does, and what its header carries to the outputs: an EXR's
/// windows and attributes (its whole data window is read, not cropped to the display
/// window), a DPX's timecode, frame rate and pixel aspect. Null metadata for formats whose
/// header carries nothing (PNG, TIFF, JPEG...): their outputs are written as before.
Image read_plate(const std::string& path, const DecodeLimits& limits,
                 std::shared_ptr<const PlateMetadata>& metadata);

/// An EXR's display window and the frame read_plate keys (the union of its data and display
/// windows), from the header only; nullopt for other files and unreadable headers.
struct ExrWindows {
  PixelBox display, frame;
};
std::optional<ExrWindows> exr_windows(const std::string& path);

/// True for an EXR whose data window reaches outside its display window (what read_plate
/// keys whole). Reads the header only; false for other files and unreadable headers.
bool has_overscan(const std::string& path);

/// A video plate's: its frame rate (fps <= 0: unknown, nothing) on a frame of width x height.
std::shared_ptr<const PlateMetadata> video_metadata(int width, int height, double fps);

}  // namespace corridorkey::io
