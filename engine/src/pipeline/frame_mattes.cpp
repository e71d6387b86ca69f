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
                            const char* folder, int n, bool allow_mismatch,
                            std::vector<std::string>& warnings) {
  io::FrameSource src = given.empty() ? own : io::matte_source(given, key);
  if (src.empty()) return src;
  const int count = src.count();
  if (!src.is_video() && count == 1) return src;  // one image: every frame's
  const std::string name = given.empty() ? std::string(folder) : std::string(key) + " " + given;
  CK_CHECK(count >= n, IoError, where(src), ": ", name, " has ", count, " frames but the clip keys ", n,
           " (one file for every frame, or one per frame, paired by position)");
  if (count > n) {
    CK_CHECK(allow_mismatch, IoError, where(src), ": ", name, " has ", count,
             " frames but the clip keys ", n, " (--allow-mismatch uses the first ", n, ")");
    warnings.push_back(where(src) + ": " + name + " has " + std::to_string(count) +
                       " frames, the clip keys " + std::to_string(n) + ": using the first " +
                       std::to_string(n));
  }
  return src;
}

/// One matte made into a plane of the keyed frame's size (see frame_mattes).
Image plane(const Image& im, const std::string& file, const char* what, int width, int height,
            const io::PlateMetadata* meta, std::vector<std::string>& warnings) {
  if (im.empty()) return {};
  std::string note;
  Image m = post::matte_plane(im, &note);
  // Without the file's name: the same text every frame is told once per clip.
  if (!note.empty()) warnings.push_back(std::string(what) + " matte's " + note);
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
  m.garbage = resolve_one(clip.garbage, job.garbage_matte, "garbage_matte", "GarbageMatte", n,
                          job.allow_mismatch, warnings);
  m.holdout = resolve_one(clip.holdout, job.holdout_matte, "holdout_matte", "HoldoutMatte", n,
                          job.allow_mismatch, warnings);
  return m;
}

std::string matte_file(const io::FrameSource& src, int index) {
  if (src.is_video() || src.frames.empty()) return "";
  return src.frames.size() == 1 ? src.frames.front() : src.frames[static_cast<size_t>(index)];
}

std::shared_ptr<const FrameMattes> frame_mattes(Image garbage, const std::string& garbage_file,
                                                Image holdout, const std::string& holdout_file,
                                                int width, int height, const io::PlateMetadata* meta,
                                                std::vector<std::string>& warnings) {
  if (garbage.empty() && holdout.empty()) return nullptr;
  auto m = std::make_shared<FrameMattes>();
  m->garbage = plane(garbage, garbage_file, "garbage", width, height, meta, warnings);
  m->holdout = plane(holdout, holdout_file, "holdout", width, height, meta, warnings);
  return m;
}

}  // namespace corridorkey::pipeline
