#include "pipeline/video_outputs.h"

#include <corridorkey/check.h>

#include "config/option_table.h"
#include "io/image_io.h"
#include "io/video_writer.h"

#include <cstdio>
#include <filesystem>
#include <vector>

namespace corridorkey::pipeline {
namespace fs = std::filesystem;

namespace {

// %g in the classic locale: ffmpeg reads "23.976", never a host locale's "23,976".
std::string fps_text(double fps) { return config::format_real(fps); }

struct VideoJob {
  const char* name;  // Comp | Matte | FG
  std::vector<std::string> frames, alpha;  // alpha: the matte of each frame (ProRes FG)
};

}  // namespace

VideoReport encode_clip_videos(const ClipPlan& p, const InferenceOptions& job, bool keyed_now,
                               const std::function<void(PipelineEvent::Kind, const std::string&,
                                                        const std::string&)>& emit) {
  VideoReport report;
  const bool prores = job.video_codec == VideoCodec::ProRes;
  std::vector<VideoJob> jobs;
  if (p.videos.comp) jobs.push_back({"Comp", {}, {}});
  if (p.videos.matte) jobs.push_back({"Matte", {}, {}});
  if (p.videos.fg) jobs.push_back({"FG", {}, {}});
  for (auto& v : jobs) {
    const std::string name = v.name;
    for (const auto& stem : p.stems) {
      const auto o = outputs_for(p, job, stem);
      v.frames.push_back(name == "Comp" ? o.comp : name == "Matte" ? o.matte : o.fg);
      if (name == "FG" && prores) v.alpha.push_back(o.matte);
    }
    const auto path = (p.out / (name + (prores ? ".mov" : ".mp4"))).string();
    std::vector<std::string> missing;
    for (const auto* list : {&v.frames, &v.alpha})
      for (const auto& f : *list) {
        std::error_code ec;
        if (!fs::is_regular_file(f, ec)) missing.push_back(f);
      }
    if (!missing.empty()) {
      emit(PipelineEvent::Kind::Warning, path,
           path + " not encoded yet: " + std::to_string(missing.size()) + " of " +
               std::to_string(v.frames.size() + v.alpha.size()) + " frames missing (first: " +
               fs::path(missing.front()).filename().string() +
               "); the run that completes the sequence encodes it");
      continue;
    }
    std::error_code ec;
    if (!keyed_now && fs::exists(path, ec)) continue;  // nothing new since it was encoded
    try {
      std::unique_ptr<io::VideoWriter> w;
      for (size_t i = 0; i < v.frames.size(); ++i) {
        Image im = io::read_image(v.frames[i], job.max_pixels);
        if (!v.alpha.empty()) {  // FG with the matte as alpha
          const Image m = io::read_image(v.alpha[i], job.max_pixels);
          CK_CHECK(m.width == im.width && m.height == im.height && im.channels >= 3, IoError,
                   v.alpha[i], ": matte ", m.width, "x", m.height, " does not match ", v.frames[i]);
          Image rgba;
          rgba.width = im.width, rgba.height = im.height, rgba.channels = 4;
          rgba.pixels.resize(static_cast<size_t>(im.width) * im.height * 4);
          for (size_t k = 0; k < static_cast<size_t>(im.width) * im.height; ++k) {
            for (size_t c = 0; c < 3; ++c) rgba.pixels[k * 4 + c] = im.pixels[k * im.channels + c];
            rgba.pixels[k * 4 + 3] = m.pixels[k * m.channels];
          }
          im = std::move(rgba);
        }
        if (!w)
          w = std::make_unique<io::VideoWriter>(path, im.width, im.height, p.fps, job.video_codec,
                                                !v.alpha.empty());
        try {
          w->write(im);
        } catch (const IoError& e) {
          throw IoError(v.frames[i] + ": " + e.what());
        }
      }
      w->finish();
      ++report.written;
      emit(PipelineEvent::Kind::VideoWritten, path,
           std::to_string(v.frames.size()) + " frames at " + fps_text(p.fps) + " fps (" +
               w->encoder() + ")");
    } catch (const std::exception& e) {
      ++report.failed;
      emit(PipelineEvent::Kind::VideoFailed, path, std::string("video not written: ") + e.what());
    }
  }
  return report;
}

}  // namespace corridorkey::pipeline
