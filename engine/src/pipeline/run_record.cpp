#include "pipeline/run_record.h"

#include <corridorkey/errors.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/version.h>

#include "io/temp_files.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <ctime>
#include <fstream>

namespace corridorkey::pipeline {
namespace {

using json = nlohmann::ordered_json;

/// A table value as JSON: "5" -> 5, "true" -> true (the table prints numbers in the classic
/// locale, and the JSON parser reads them in it).
json option_json(const EngineSettings& o, const std::string& key) {
  const auto text = option_value(o, key);
  auto v = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return v.is_discarded() ? json(text) : v;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

json timings_json(const StageTimings& t) {
  return {{"read_ms", t.read_ms},           {"preprocess_ms", t.preprocess_ms},
          {"infer_ms", t.infer_ms},         {"encoder_ms", t.encoder_ms},
          {"decoders_ms", t.decoders_ms},   {"refiner_ms", t.refiner_ms},
          {"postprocess_ms", t.postprocess_ms}, {"write_ms", t.write_ms}};
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
    json times = json::array(), failures = json::array();
    for (const auto& f : frames) {
      if (f.clip != ci) continue;
      if (f.error.empty()) {
        json t = {{"frame", f.stem}};
        t.update(timings_json(f.t));
        times.push_back(std::move(t));
      } else {
        failures.push_back({{"frame", f.stem}, {"message", f.error}});
      }
    }
    if (times.empty() && failures.empty()) continue;  // nothing tried: the earlier file stays
    const EngineInfo& e = info(ci);
    json outputs = json::array();
    for (const auto& [on, name] : {std::pair{job.fg, "fg"}, {job.matte, "matte"},
                                   {job.processed, "processed"}, {job.comp, "comp"}})
      if (on) outputs.push_back(name);
    json r = {
        {"run_json", 1},
        {"engine_version", version_string()},
        {"finished", finished},
        {"clip", p.clip.name},
        {"clip_folder", p.clip.root},
        {"profile", e.profile},
        {"checkpoint", e.checkpoint},
        {"device", e.device},
        {"precision", e.precision},
        {"img_size", e.img_size},
        {"backbone_size", e.backbone_size},
        {"plan", {{"origin", to_string(e.tune.origin)}, {"trial_ms", e.tune.trial_ms},
                  {"cache", e.tune.cache_path}, {"decisions", e.tune.summary()}}},
        {"screen", to_string(p.screen.screen)},
        {"swapped", p.swap_gb},
        {"hints", p.generate_hint ? "generated" : "files"},
        {"input_colorspace", p.colour.input},
        {"input_colorspace_why", p.colour.why},
        {"ocio_config", job.ocio_config},
        {"despill", option_json(options, "despill")},
        {"despeckle", option_json(options, "despeckle")},
        {"despeckle_size", option_json(options, "despeckle_size")},
        {"refiner_scale", option_json(options, "refiner_scale")},
        {"outputs", outputs},
        {"comp_format", job.comp_format},
        {"frames_selected", p.frames.size()},
        {"frames_done", times.size()},
        {"frames_failed", failures.size()},
        {"interrupted", interrupted},
        {"job_wall_ms", wall_ms},
        {"frame_times", std::move(times)},
        {"failures", std::move(failures)},
    };
    const std::string path = (p.out / "run.json").string();
    try {
      io::atomic_write(path, [&](const std::string& tmp) {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        // A clip or file name that is not UTF-8 cannot be JSON text: U+FFFD in this summary
        // (the frames themselves are named by their files).
        f << r.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
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
