// What the viewer shows of a frame, made on the server from the float data of the files:
// plates through OpenColorIO to the display, mattes and hints as grey values, FG and
// Processed over a view-only background composited in linear light, Comp, the |A - B| x 8
// difference of two output roots, and the pixel probe. Previews are 8-bit PNG (no JPEG:
// its artefacts sit on the edges being judged), cached with the decoded frames (LRU,
// keyed by each file's path, size and modification time, so a file rewritten by a key is
// read again). Nothing here writes a file. Thread-safe.
#pragma once

#include "review/clip_library.h"

#include <corridorkey/frame.h>
#include <corridorkey/image.h>

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace corridorkey::review {

struct ViewParams {
  std::string view = "plate";  // plate | hint | matte | fg | processed | comp | diff
  std::string diff_of = "matte";  // diff: |A - B| x 8 of this output
  bool side_b = false;            // the compare root's outputs
  std::string bg = "checker";     // fg / processed: checker | black | grey | #rrggbb (sRGB)
  double exposure = 0;            // stops, applied in scene-linear light (not to data views)
  std::string display;            // "" = sRGB; else DISPLAY/VIEW of the OCIO config
  /// Checked values: HttpError 400 naming the parameter.
  void validate() const;
  std::string key() const;  // for the preview cache
};

/// 8-bit pixels ready to encode: 1 (grey) or 3 channels.
struct Pixels {
  int width = 0, height = 0, channels = 3;
  std::vector<uint8_t> data;
};

/// "path:size:mtime": what a cache keys a file by (a file rewritten is a new entry).
std::string file_stamp(const std::string& path);

/// PNG (8-bit grey or RGB, no colour chunks: a browser draws the values as sRGB). zlib
/// `level` 0..9: 1 for cached previews, 0 where encoding time counts more than size.
std::string encode_png(const Pixels& p, int level);

/// `im` in the display window `w` (display_window, plate_display_window): an overscan EXR
/// plate's output of the keyed frame's size, cut to the window into `scratch`, which is
/// returned; `im` itself when the window is the whole frame or `im` is not the keyed frame's
/// size (already cropped, as read_frame_file crops an EXR; a hint of another size).
const Image& in_display_window(const Image& im, const FrameWindow& w, Image& scratch);

class LruBytes;  // the two caches (frame_views.cpp)

class FrameViews {
 public:
  FrameViews(const ClipLibrary& library, int64_t cache_bytes);
  ~FrameViews();

  /// The PNG of one view of one frame (HttpError 404 when a file it needs is missing).
  std::shared_ptr<const std::string> png(const ClipEntry& c, int frame, const ViewParams& v);
  /// The plate's values (as stored, before any colour conversion) and the matte's alpha,
  /// from the float data of the files, at image pixel (x, y); the compare root's alpha too.
  json probe(const ClipEntry& c, int frame, int x, int y);
  /// The mean squared difference of the two roots' mattes, per frame (null where one is
  /// missing or their sizes differ).
  json matte_mse(const ClipEntry& c);

  /// A finished image on the display, as the comp or processed view shows a file's: for
  /// tweaks, whose outputs are in memory. `comp`: sRGB-encoded RGB; else linear
  /// premultiplied RGBA.
  Pixels display(const Image& image, bool comp, const ViewParams& v) const;

 private:
  std::shared_ptr<const Image> read(const std::string& path);  // checked, cached
  std::shared_ptr<const Image> read_plate(const ClipEntry& c, int frame);
  Pixels render(const ClipEntry& c, int frame, const ViewParams& v);
  /// The plate's display window in the keyed frame (its header; a video's: none).
  FrameWindow plate_window(const ClipEntry& c, int frame) const;

  const ClipLibrary& lib_;
  std::unique_ptr<LruBytes> images_, previews_;
  std::mutex mse_m_;
  std::unordered_map<std::string, double> mse_;  // by both files' stamps
};

}  // namespace corridorkey::review
