// Encoding video deliverables from finished frames: H.264 .mp4 or ProRes 4444 .mov.
//  - The ffmpeg binary when one is installed (found on PATH, or named by the environment
//    variable CORRIDORKEY_FFMPEG; "none" turns it off): H.264 with the reference's settings
//    (libx264, crf 18, yuv420p, BT.709), ProRes 4444 with a 10-bit alpha channel. It is run
//    with an argument vector (no shell) and fed raw frames on a pipe.
//  - Otherwise H.264 through OpenCV's FFmpeg backend (its own rate control; no ProRes).
// Written to a temporary file and renamed when complete, like every output. Torch-free.
#pragma once

#include <corridorkey/image.h>
#include <corridorkey/options.h>

#include <memory>
#include <string>

namespace corridorkey::io {

/// The ffmpeg binary to use, or "" when there is none (or CORRIDORKEY_FFMPEG=none).
/// ConfigError naming it when CORRIDORKEY_FFMPEG names something that is not executable.
std::string find_ffmpeg();

class VideoWriter {
 public:
  /// `alpha`: frames are RGBA and the video keeps the alpha (ProRes only). Frames are
  /// display-encoded float 0..1 (sRGB values; a matte as is), grey or RGB(A).
  VideoWriter(const std::string& path, int width, int height, double fps, VideoCodec codec,
              bool alpha);
  ~VideoWriter();  // an unfinished video's temporary file is removed
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;

  void write(const Image& frame);
  /// Closes the stream, checks the encoder succeeded, moves the file into place.
  void finish();
  /// "ffmpeg libx264 crf 18" / "OpenCV FFmpeg backend" / "ffmpeg prores_ks 4444".
  const std::string& encoder() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corridorkey::io
