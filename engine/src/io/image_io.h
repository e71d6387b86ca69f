// Reading and writing frames: EXR through OpenEXR (half / float, any channel layout),
// PNG / TIFF / JPEG / BMP through OpenCV (8/16-bit and 32-bit float kept at full precision),
// video through OpenCV's FFmpeg backend. Torch-free.
#pragma once

#include <corridorkey/image.h>

#include "io/decode_budget.h"
#include "io/image_header.h"
#include "io/plate_metadata.h"
#include "io/temp_files.h"

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace corridorkey::io {

/// Reads an image as float32: 8-bit /255, 16-bit /65535, float as is; channels as stored
/// (RGB or RGBA order; 1 for grey / Y / single-channel EXR). Throws IoError naming the file,
/// also when the header declares more than max_pixels pixels (checked before decoding).
Image read_image(const std::string& path, int64_t max_pixels = kDefaultMaxPixels);
/// The same, refusing also (before decoding) a file whose decoding would hold more than the
/// decode budget, counted for limits.workers frames decoded at once.
Image read_image(const std::string& path, const DecodeLimits& limits);

/// The extensions of frames (lower case, with the dot): .exr, .dpx (OpenImageIO), and each
/// still format the linked OpenCV decodes (.png .jpg .jpeg .jpe .tif .tiff .bmp .dib .webp
/// .jp2 .hdr .pic .ppm .pgm .pbm .pnm .pxm .pfm .sr .ras .avif, as built).
const std::vector<std::string>& frame_extensions();
/// True for a frame extension (case-insensitive): the one rule clip discovery follows.
bool is_image_file(const std::string& path);
bool is_video_file(const std::string& path);

enum class ExrCompression { None, Rle, Zips, Zip, Piz, Pxr24, Dwaa, Dwab };
ExrCompression parse_exr_compression(const std::string& name);  // ConfigError if unknown
const char* to_string(ExrCompression c);

/// Lets OpenEXR compress and decompress line blocks on `threads` threads (its global pool),
/// unless a host already sized that pool (Imf::globalThreadCount() > 0): an application
/// such as Nuke sets it for its own reasons and keeps it. The pool threads are created by
/// the calling thread and inherit its nice value. Returns the pool size in use.
int ensure_exr_threads(int threads);

/// Writes half-float EXR. Channel names from `names` ("RGB", "Y", "RGBA"); one char each.
/// `chromaticities` (rx ry gx gy bx by wx wy), when given, becomes the `chromaticities`
/// attribute. `plate`, when given, sets the display and data windows (the image is the
/// plate's keyed frame) and adds the plate's attributes (plate_metadata.h); null writes the
/// header as a plate without metadata gets it. Atomic: written to a temporary file in the
/// same folder, then renamed.
void write_exr(const std::string& path, const Image& image, const std::string& names,
               ExrCompression compression, const double* chromaticities = nullptr,
               const PlateMetadata* plate = nullptr);

/// One image's channels in a multi-channel EXR: names[c] is channel c's full name ("FG.R").
struct ExrLayer {
  const Image* image = nullptr;
  std::vector<std::string> names;
};
/// The same for several images of one size in one single-part EXR (the layered output).
void write_exr_layers(const std::string& path, const std::vector<ExrLayer>& layers, ExrCompression compression,
                      const double* chromaticities = nullptr, const PlateMetadata* plate = nullptr);

/// What a frame's header says about its colour (--input-colorspace auto): an EXR's
/// `chromaticities` and `acesImageContainerFlag`, a DPX's transfer characteristic. Reads
/// the header only; never throws (an unreadable header says nothing).
struct ColourHints {
  bool has_chromaticities = false;
  std::array<double, 8> chromaticities{};
  bool aces_container = false;
  /// DPX: the transfer characteristic code of the first image element (-1: not a DPX);
  /// 1 = printing density, 3 = logarithmic (SMPTE 268M); `dpx_transfer_name` spells it.
  int dpx_transfer = -1;
  std::string dpx_transfer_name;
};
ColourHints read_colour_hints(const std::string& path);

/// Writes an 8-bit PNG: values clamped to 0..1, times 255, truncated (as the reference's
/// `(comp * 255).astype(np.uint8)`), or rounded to the nearest level. Atomic like write_exr.
void write_png8(const std::string& path, const Image& image, bool round = false);

/// Writes a 16-bit PNG or TIFF (by extension; values clamped to 0..1 and rounded), as
/// compositing tools write hints and plates. Atomic like write_exr.
void write_image16(const std::string& path, const Image& image);

/// True if the file exists and decodes completely, every pixel (used by --skip-existing: a
/// file cut short by a crash or a full disk is redone, not trusted).
bool readable_output(const std::string& path, int64_t max_pixels = kDefaultMaxPixels);
/// The same, false also for a file refused by the decode budget (it is then redone).
bool readable_output(const std::string& path, const DecodeLimits& limits);

/// Sequential video decoding (one frame at a time, RGB float 0..1).
class VideoReader {
 public:
  /// deep: decoded by the ffmpeg binary to 16 bits per channel (rgb48le) instead of
  /// OpenCV's 8 bits, for camera-log footage whose 10-bit codes 8 bits would band.
  explicit VideoReader(const std::string& path, bool deep = false);
  ~VideoReader();
  /// Frame count as reported by the container (may be approximate for some codecs).
  int frame_count() const;
  double fps() const;
  /// Frame size as the container reports it (before any frame is decoded).
  int width() const;
  int height() const;
  /// Next frame; false at the end. Throws IoError on a decode failure mid-stream.
  bool next(Image& out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corridorkey::io
