// Video frames at 16 bits per channel from the ffmpeg binary (rgb48le on a pipe), for
// camera-log footage: OpenCV's FFmpeg backend hands out 8-bit BGR, which turns 10-bit log
// codes into bands of 4. Run with an argument vector (no shell). Torch-free.
#pragma once

#include <corridorkey/base/atomic_write.h>
#include <corridorkey/image.h>

#include <memory>
#include <string>
#include <sys/types.h>

namespace corridorkey::io {

class DeepVideoFrames {
 public:
  /// Starts `ffmpeg -i path -map 0:v:0 -f rawvideo -pix_fmt rgb48le pipe:1`. IoError when
  /// there is no ffmpeg binary (find_ffmpeg) or it cannot start.
  DeepVideoFrames(const std::string& path, int width, int height);
  ~DeepVideoFrames();
  DeepVideoFrames(const DeepVideoFrames&) = delete;
  DeepVideoFrames& operator=(const DeepVideoFrames&) = delete;
  /// Next frame as RGB float (code / 65535); false at the end of the stream. IoError for a
  /// frame cut short or ffmpeg failing.
  bool next(Image& out);

 private:
  std::string path_;
  int width_, height_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string log_;
  std::unique_ptr<base::TempFile> log_file_;  // ffmpeg's stderr; removed with this object
  bool finish();
};

}  // namespace corridorkey::io
