#include "pipeline/clip_plan.h"

#include <corridorkey/errors.h>

#include "io/image_io.h"

#include <algorithm>

namespace corridorkey::pipeline {
namespace fs = std::filesystem;

namespace {
std::string zero_pad(int i, int width) {
  auto s = std::to_string(i);
  return std::string(static_cast<size_t>(std::max(0, width - static_cast<int>(s.size()))), '0') + s;
}
}  // namespace

std::vector<std::string> FrameOutputs::all() const {
  std::vector<std::string> v;
  for (const auto* p : {&fg, &matte, &processed, &comp})
    if (!p->empty()) v.push_back(*p);
  return v;
}

FrameOutputs outputs_for(const ClipPlan& p, const InferenceOptions& job, const std::string& stem) {
  FrameOutputs o;
  if (job.fg) o.fg = (p.out / "FG" / (stem + ".exr")).string();
  if (job.matte) o.matte = (p.out / "Matte" / (stem + ".exr")).string();
  if (job.processed) o.processed = (p.out / "Processed" / (stem + ".exr")).string();
  if (job.comp) o.comp = (p.out / "Comp" / (stem + "." + job.comp_format)).string();
  return o;
}

Plan plan_job(const InferenceOptions& job) {
  Plan plan;
  for (const auto& c : io::discover_clips(job.paths)) {
    ClipPlan p;
    p.clip = c;
    int n = c.input.count();
    const int nh = c.hint.count();
    if (n != nh) {
      CK_CHECK(job.allow_mismatch, IoError, c.root, ": Input has ", n, " frames but AlphaHint has ",
               nh, " (pair by position; --allow-mismatch truncates to the shorter)");
      plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root,
                             "Input has " + std::to_string(n) + " frames, AlphaHint " +
                                 std::to_string(nh) + ": keying the first " +
                                 std::to_string(std::min(n, nh))});
      n = std::min(n, nh);
    }
    CK_CHECK(n > 0, IoError, c.root, ": no frames in Input");
    const bool exr = !c.input.is_video() && fs::path(c.input.frames[0]).extension() == ".exr";
    p.linear = job.color == ColorSpace::Linear || (job.color == ColorSpace::Auto && exr);
    if (exr && job.color == ColorSpace::Srgb)
      plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root,
                             "EXR plates keyed as sRGB (the reference's default); pass --linear "
                             "(or --color auto) if they are scene-linear"});
    p.out = job.output_root.empty() ? fs::path(c.root) / "Output" : fs::path(job.output_root) / c.name;
    for (int i = 0; i < n; ++i)
      p.stems.push_back(c.input.is_video() ? zero_pad(i, 5)
                                           : fs::path(c.input.frames[i]).stem().string());
    std::vector<int> sel;
    if (job.frames.empty()) {
      for (int i = 0; i < n; ++i) sel.push_back(i);
    } else {
      sel = io::parse_frame_ranges(job.frames, n);
      CK_CHECK(!sel.empty(), ConfigError, "--frames '", job.frames, "' selects no frame of clip '",
               c.name, "', which has ", n, " frames (1-", n, ")");
    }
    for (const char* d : {"FG", "Matte", "Processed", "Comp"}) {
      std::error_code ec;
      fs::create_directories(p.out / d, ec);
      CK_CHECK(!ec && fs::is_directory(p.out / d), IoError, (p.out / d).string(),
               ": output folder cannot be created (", ec ? ec.message() : "not a folder", ")");
      // Leftovers of a run killed mid-write (SIGKILL, power loss): its temp files.
      if (const int n_stale = io::remove_stale_temp_files((p.out / d).string()))
        plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", (p.out / d).string(),
                               "removed " + std::to_string(n_stale) +
                                   " temporary file(s) left by a killed run"});
    }
    for (int i : sel) {
      if (job.skip_existing) {
        const auto outs = outputs_for(p, job, p.stems[i]).all();
        if (std::all_of(outs.begin(), outs.end(), io::readable_output)) {
          ++plan.frames_skipped;
          plan.events.push_back({PipelineEvent::Kind::FrameSkipped, c.name, p.stems[i],
                                 outs.front(), "outputs exist"});
          continue;
        }
      }
      p.frames.push_back(i);
    }
    plan.frames_total += static_cast<int>(p.frames.size());
    plan.clips.push_back(std::move(p));
  }
  return plan;
}

}  // namespace corridorkey::pipeline
