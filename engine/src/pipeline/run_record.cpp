#include "pipeline/run_record.h"

#include <corridorkey/errors.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/report_json.h>
#include <corridorkey/version.h>

#include "io/temp_files.h"

#include <algorithm>
#include <ctime>
#include <fstream>

namespace corridorkey::pipeline {
namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

}  // namespace

void RunRecords::frame_done(size_t clip, int index, const std::string& stem, const StageTimings& t) {
  std::lock_guard<std::mutex> l(m_);
  frames_.push_back({clip, index, stem, "", t});
}

void RunRecords::frame_failed(size_t clip, int index, const std::string& stem, const std::string& why) {
  std::lock_guard<std::mutex> l(m_);
  frames_.push_back({clip, index, stem, why, {}});
}

std::vector<std::string> RunRecords::write(const Plan& plan, const InferenceOptions& job,
                                           const std::function<const EngineInfo&(size_t)>& info,
                                           const EngineSettings& options, bool interrupted,
                                           double wall_ms) const {
  std::vector<Frame> frames;
  {
    std::lock_guard<std::mutex> l(m_);
    frames = frames_;
  }
  std::sort(frames.begin(), frames.end(),
            [](const Frame& a, const Frame& b) { return std::tie(a.clip, a.index) < std::tie(b.clip, b.index); });
  std::vector<std::string> warnings;
  const std::string finished = utc_now();
  for (size_t ci = 0; ci < plan.clips.size(); ++ci) {
    const auto& p = plan.clips[ci];
    RunRecord r;
    for (const auto& f : frames) {
      if (f.clip != ci) continue;
      if (f.error.empty()) r.frame_times.emplace_back(f.stem, f.t);
      else r.failures.emplace_back(f.stem, f.error);
    }
    if (r.frame_times.empty() && r.failures.empty()) continue;  // nothing tried: the earlier file stays
    r.engine_version = version_string();
    r.finished = finished;
    r.clip = p.clip.name;
    r.clip_folder = p.clip.root;
    r.engine = info(ci);
    r.screen = to_string(p.screen.screen);
    r.swapped = p.swap_gb;
    r.hints = p.generate_hint ? "generated" : "files";
    r.garbage_matte = matte_origin(p.mattes.garbage);
    r.holdout_matte = matte_origin(p.mattes.holdout);
    r.input_colorspace = p.colour.input;
    r.input_colorspace_why = p.colour.why;
    r.ocio_config = job.ocio_config;
    for (const char* key : {"despill", "despeckle", "despeckle_size", "refiner_scale"})
      r.settings.emplace_back(key, option_value(options, key));
    for (const auto& [on, name] : {std::pair{job.fg, "fg"}, {job.matte, "matte"},
                                   {job.processed, "processed"}, {job.comp, "comp"},
                                   {job.layered, "layered"}})
      if (on) r.outputs.push_back(name);
    r.comp_format = job.comp_format;
    r.frames_selected = p.frames.size();
    r.interrupted = interrupted;
    r.job_wall_ms = wall_ms;
    const std::string path = (p.out / "run.json").string();
    try {
      io::atomic_write(path, [&](const std::string& tmp) {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        // A clip or file name that is not UTF-8 is U+FFFD here (report_json.h); the frames
        // themselves are named by their files.
        f << run_json(r);
        f.close();
        if (!f) throw IoError(path + ": cannot write the run summary");
      });
    } catch (const std::exception& x) {
      warnings.push_back(path + ": the run summary was not written: " + x.what());
    }
  }
  return warnings;
}

}  // namespace corridorkey::pipeline
