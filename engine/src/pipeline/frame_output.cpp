// The torch-free half of frame.h: post-processing and writing one frame's outputs. The
// clip pipeline's writers (frame_writer.cpp) and `serve` call the same two functions, so a
// frame keyed either way gives the same files.
#include <corridorkey/check.h>
#include <corridorkey/frame.h>

#include "colour/primaries.h"
#include "io/image_io.h"
#include "post/postprocess.h"

#include <filesystem>

CORRIDORKEY_NAMESPACE_BEGIN

PostSettings post_settings(const EngineOptions& o, Screen backing) {
  PostSettings s;
  s.despeckle = o.despeckle;
  s.despeckle_size = o.despeckle_size;
  s.despill_strength = o.despill_strength;
  s.backing = backing == Screen::Blue ? Screen::Blue : Screen::Green;
  return s;
}

namespace {
void check_raw(const RawFrame& raw) {
  CK_CHECK(raw.alpha.channels == 1 && raw.fg.channels == 3 && raw.alpha.width == raw.fg.width &&
               raw.alpha.height == raw.fg.height,
           ConfigError, "finish_frame: expected alpha [H,W,1] and fg [H,W,3] of one size, got ",
           raw.alpha.width, "x", raw.alpha.height, "x", raw.alpha.channels, " and ", raw.fg.width,
           "x", raw.fg.height, "x", raw.fg.channels);
}
}  // namespace

Image despeckled_alpha(const RawFrame& raw, const PostSettings& s) {
  check_raw(raw);
  return s.despeckle ? post::despeckle(raw.alpha, static_cast<int>(s.despeckle_size)) : raw.alpha;
}

FinishedFrame finish_frame(const RawFrame& raw, const PostSettings& s, bool processed, bool comp,
                           const Image* despeckled) {
  FinishedFrame out;
  finish_frame(raw, s, processed, comp, despeckled, out);
  return out;
}

void finish_frame(const RawFrame& raw, const PostSettings& s, bool processed, bool comp,
                  const Image* despeckled, FinishedFrame& out) {
  if (!processed) out.processed = Image{};
  if (!comp) out.comp = Image{};
  if (!processed && !comp) return;  // a matte-only request pays for no despeckle
  check_raw(raw);
  // post::finish's steps, each once and only when an output needs it: comp and processed
  // share the despeckled alpha and one row pass over the despilled, linear fg (bit-identical
  // to post::premultiply_linear / checker_comp, tests/unit/test_postprocess.cpp).
  Image own;
  if (!despeckled) {
    own = despeckled_alpha(raw, s);
    despeckled = &own;
  }
  CK_CHECK(despeckled->width == raw.alpha.width && despeckled->height == raw.alpha.height &&
               despeckled->channels == 1,
           ConfigError, "finish_frame: the despeckled alpha is not the frame's size");
  post::despill_premultiply_comp(raw.fg, *despeckled, static_cast<float>(s.despill_strength),
                                 s.backing == Screen::Blue ? 2 : 1, processed ? &out.processed : nullptr,
                                 comp ? &out.comp : nullptr, s.threads);
}

const char* to_string(FrameOutput o) {
  switch (o) {
    case FrameOutput::Matte: return "matte";
    case FrameOutput::Fg: return "fg";
    case FrameOutput::Processed: return "processed";
    case FrameOutput::Comp: return "comp";
    case FrameOutput::Hint: return "hint";
  }
  return "?";
}

void write_frame_output(FrameOutput kind, const std::string& path, const Image& image,
                        const std::string& exr_compression) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const int want = kind == FrameOutput::Matte || kind == FrameOutput::Hint ? 1
                   : kind == FrameOutput::Processed                       ? 4
                                                                          : 3;
  CK_CHECK(image.channels == want && !image.empty(), ConfigError, path, ": ", to_string(kind),
           " needs a ", want, "-channel image, got ", image.width, "x", image.height, "x",
           image.channels);
  const auto compression = io::parse_exr_compression(exr_compression);
  switch (kind) {
    case FrameOutput::Matte:
    case FrameOutput::Fg:
    case FrameOutput::Processed:
      CK_CHECK(ext == ".exr", ConfigError, path, ": ", to_string(kind),
               " is written as a half-float EXR; name it .exr");
      // Processed is scene-linear Rec.709 unless a colour space converted it (the clip
      // pipeline writes those itself): its EXR says so, as the clip pipeline's does.
      io::write_exr(path, image, want == 1 ? "Y" : want == 3 ? "RGB" : "RGBA", compression,
                    kind == FrameOutput::Processed ? colour::gamut("rec709").xy.data() : nullptr);
      return;
    case FrameOutput::Comp:
      CK_CHECK(ext == ".png" || ext == ".exr", ConfigError, path,
               ": comp is written as an 8-bit PNG (.png) or a half-float EXR (.exr)");
      if (ext == ".png") io::write_png8(path, image);
      else io::write_exr(path, image, "RGB", compression);
      return;
    case FrameOutput::Hint:
      CK_CHECK(ext == ".png", ConfigError, path, ": hint is written as an 8-bit PNG; name it .png");
      io::write_png8(path, image, /*round=*/true);
      return;
  }
}

CORRIDORKEY_NAMESPACE_END
