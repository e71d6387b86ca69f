// The public view of clip discovery and frame reading (corridorkey/clips.h): the same
// discovery, output names and readers as the clip pipeline, so a tool that looks at a clip
// sees the files `inference` reads and writes.
#include <corridorkey/check.h>
#include <corridorkey/clips.h>
#include <corridorkey/errors.h>

#include "io/clip.h"
#include "io/decode_budget.h"
#include "io/image_io.h"

CORRIDORKEY_NAMESPACE_BEGIN

namespace {
ClipFrames frames_of(const io::FrameSource& s) {
  ClipFrames f;
  f.video = s.video;
  f.files = s.frames;
  f.count = s.count();
  f.fps = s.video_fps;
  return f;
}
}  // namespace

std::vector<ClipListing> list_clips(const std::vector<std::string>& paths, const std::string& output_root,
                                    std::vector<std::string>* skipped) {
  std::vector<ClipListing> out;
  for (const auto& c : io::discover_clips(paths, skipped)) {
    ClipListing l;
    l.name = c.name;
    l.root = c.root;
    l.input = frames_of(c.input);
    l.hint = frames_of(c.hint);
    l.garbage = frames_of(c.garbage);
    l.holdout = frames_of(c.holdout);
    l.output = io::output_folder(c, output_root);
    for (int i = 0; i < c.input.count(); ++i) l.stems.push_back(io::output_stem(c, i));
    l.warnings = c.warnings;
    out.push_back(std::move(l));
  }
  return out;
}

Image read_frame_file(const std::string& path, int64_t max_pixels) {
  // One frame at a time, within half of the memory left (the pipeline's default budget): a
  // 1 KB JPEG declaring 16000 x 16000 is refused from its header, never decoded.
  return io::read_image(path, io::decode_limits(max_pixels, 0, 1));
}

Image read_video_frame(const std::string& path, int index) {
  CK_CHECK(index >= 0, IoError, path, ": frame index ", index, " is negative");
  io::VideoReader reader(path);
  Image im;
  for (int i = 0; i <= index; ++i)
    CK_CHECK(reader.next(im), IoError, path, ": has no frame ", index + 1, " (it ends after ", i, ")");
  return im;
}

CORRIDORKEY_NAMESPACE_END
