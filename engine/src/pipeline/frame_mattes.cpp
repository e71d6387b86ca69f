#include "pipeline/frame_mattes.h"

#include <corridorkey/check.h>

#include "post/mattes.h"

#include <algorithm>
#include <filesystem>

namespace corridorkey::pipeline {
namespace {

/// Where a source's frames are, for messages: its folder, or its video.
std::string where(const io::FrameSource& s) {
  if (s.is_video()) return s.video;
  return std::filesystem::path(s.frames.front()).parent_path().string();
}

io::FrameSource resolve_one(const io::FrameSource& own, const std::string& given, const char* key,
                            int n, bool allow_mismatch,
                            std::vector<std::string>& warnings) {
  io::FrameSource src = given.empty() ? own : io::matte_source(given, key);
  if (!given.empty() && !own.empty())  // said, as a hint folder set aside by --hint chroma is
    warnings.push_back(where(own) + ": ignored, " + key + " " + given + " given for every clip");
  if (src.empty()) return src;
  const int count = src.count();
  if (!src.is_video() && count == 1) return src;  // one image: every frame's
  // Named once: the folder or video, and the key that gave it when not the clip's own.
  const std::string name = where(src) + (given.empty() ? "" : " (" + std::string(key) + ")");
  CK_CHECK(count >= n, IoError, name, ": ", count, " matte frames but the clip keys ", n,
           " (one file for every frame, or one per frame, paired by position)");
  if (count > n) {
    CK_CHECK(allow_mismatch, IoError, name, ": ", count, " matte frames but the clip keys ", n,
             " (--allow-mismatch uses the first ", n, ")");
    warnings.push_back(name + ": " + std::to_string(count) + " matte frames, the clip keys " +
                       std::to_string(n) + ": using the first " + std::to_string(n));
  }
  return src;
}

/// `m` (covering `box`) on the keyed frame (covering `frame`) by coordinates; 0 where it has none.
Image placed(const Image& m, const io::PixelBox& box, const io::PixelBox& frame) {
  Image out;
  out.width = frame.width();
  out.height = frame.height();
  out.channels = 1;
  out.pixels.assign(static_cast<size_t>(out.width) * out.height, 0.f);
  const int x0 = std::max(box.x0, frame.x0), x1 = std::min(box.x1, frame.x1);
  for (int y = std::max(box.y0, frame.y0); y <= std::min(box.y1, frame.y1) && x0 <= x1; ++y)
    std::copy_n(m.pixels.begin() + (static_cast<ptrdiff_t>(y - box.y0) * m.width + (x0 - box.x0)),
                x1 - x0 + 1,
                out.pixels.begin() + (static_cast<ptrdiff_t>(y - frame.y0) * out.width + (x0 - frame.x0)));
  return out;
}

/// One matte made into a plane of the keyed frame's size (see frame_mattes).
Image plane(const MatteRead& read, const std::string& file, const char* what, int width, int height,
            const io::PlateMetadata* meta, std::vector<std::string>& warnings) {
  const Image& im = read.image;
  if (im.empty()) return {};
  std::string note;
  Image m = post::matte_plane(im, &note);
  // Without the file's name: the same text every frame is told once per clip.
  if (!note.empty()) warnings.push_back(std::string(what) + " matte's " + note);
  // An EXR matte in the plate's coordinates (its display window the plate's): placed by them,
  // so one rendered with the plate's overscan covers it, one without leaves it unmatted.
  const io::PixelBox whole{0, 0, width - 1, height - 1};
  const io::PixelBox frame = meta ? meta->frame : whole, shown = meta ? meta->display : whole;
  const auto* win = read.windows.get();
  if (win && win->frame.width() == m.width && win->frame.height() == m.height &&
      win->display == shown && frame.width() == width && frame.height() == height)
    return placed(m, win->frame, frame);
  if (m.width == width && m.height == height) return m;
  const bool display = meta && meta->overscan() && m.width == meta->display.width() &&
                       m.height == meta->display.height();
  if (!display) {
    if (meta && meta->overscan())
      throw IoError(file + ": " + what + " matte is " + std::to_string(m.width) + "x" +
                    std::to_string(m.height) + ", but the plate has a " +
                    std::to_string(meta->display.width()) + "x" +
                    std::to_string(meta->display.height()) + " display window in a " +
                    std::to_string(width) + "x" + std::to_string(height) +
                    " keyed frame (overscan): a matte must be the size of one of them");
    throw IoError(file + ": " + what + " matte is " + std::to_string(m.width) + "x" +
                  std::to_string(m.height) + ", the plate " + std::to_string(width) + "x" +
                  std::to_string(height) + " (a matte is never resized: it must be the plate's size)");
  }
  Image out;
  out.width = width;
  out.height = height;
  out.channels = 1;
  out.pixels.assign(static_cast<size_t>(width) * height, 0.f);  // the overscan: no matte
  const int ox = meta->display.x0 - meta->frame.x0, oy = meta->display.y0 - meta->frame.y0;
  for (int y = 0; y < m.height; ++y)
    std::copy(m.pixels.begin() + static_cast<ptrdiff_t>(y) * m.width,
              m.pixels.begin() + static_cast<ptrdiff_t>(y + 1) * m.width,
              out.pixels.begin() + (static_cast<ptrdiff_t>(y + oy) * width + ox));
  return out;
}

}  // namespace

MatteSources resolve_mattes(const io::Clip& clip, const InferenceOptions& job, int n,
                            std::vector<std::string>& warnings) {
  MatteSources m;
  m.garbage = resolve_one(clip.garbage, job.garbage_matte, "garbage_matte", n,
                          job.allow_mismatch, warnings);
  m.holdout = resolve_one(clip.holdout, job.holdout_matte, "holdout_matte", n,
                          job.allow_mismatch, warnings);
  return m;
}

std::string matte_origin(const io::FrameSource& src) {
  if (src.empty()) return "";
  return src.is_video() || src.frames.size() > 1 ? where(src) : src.frames.front();
}

std::string matte_file(const io::FrameSource& src, int index) {
  if (src.is_video() || src.frames.empty()) return "";
  return src.frames.size() == 1 ? src.frames.front() : src.frames[static_cast<size_t>(index)];
}

MatteRead read_matte(const std::string& file, const io::DecodeLimits& limits) {
  MatteRead r;
  r.image = io::read_plate(file, limits, r.windows);
  return r;
}

std::shared_ptr<const FrameMattes> frame_mattes(MatteRead garbage, const std::string& garbage_file,
                                                MatteRead holdout, const std::string& holdout_file,
                                                int width, int height, const io::PlateMetadata* meta,
                                                std::vector<std::string>& warnings) {
  if (garbage.image.empty() && holdout.image.empty()) return nullptr;
  auto m = std::make_shared<FrameMattes>();
  m->garbage = plane(garbage, garbage_file, "garbage", width, height, meta, warnings);
  m->holdout = plane(holdout, holdout_file, "holdout", width, height, meta, warnings);
  return m;
}

}  // namespace corridorkey::pipeline
