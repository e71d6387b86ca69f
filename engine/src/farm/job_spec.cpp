// Job files: the job's own keys (a JobSpec table), `clips`, `profile` + `overrides`, and
// every Run-scope Profile field and InferenceOptions field through their tables.
#include <corridorkey/check.h>
#include <corridorkey/job.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>

#include "config/engine_fields.h"
#include "config/inference_fields.h"
#include "config/input_file.h"
#include "config/yaml_util.h"
#include "io/clip.h"

#include <cctype>
#include <filesystem>

CORRIDORKEY_NAMESPACE_BEGIN
namespace {
namespace fs = std::filesystem;

std::string resolve(const fs::path& base, const std::string& p) {
  const fs::path x(p);
  return (x.is_absolute() ? x : base / x).lexically_normal().string();
}

bool job_name_ok(const std::string& n) {
  if (n.empty() || n.size() > 128) return false;
  for (unsigned char c : n)
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

/// The job's own scalar keys. `clips`, `profile` and `overrides` are structured and read
/// below; `clips_root` and `output_root` are resolved against the job file's folder.
const config::Table<JobSpec>& job_table() {
  using J = JobSpec;
  constexpr auto S = OptionScope::Run;
  static const config::Table<J> t({
      config::int_row<J, int>("version", S, &J::version, 1, 1, "job schema version", "1"),
      config::text_row<J>("name", S, &J::name, "job name (scheduler job / step names)",
                          "letters, digits, '-', '_' or '.' (at most 128)", job_name_ok),
      config::text_row<J>("clips_root", S, &J::clips_root, "key every clip under this folder",
                          "a folder"),
      config::int_row<J, int>("chunk_size", S, &J::chunk_size, 1, 1 << 20,
                              "frames per scheduler task", "a positive integer"),
      config::text_row<J>("profile", S, &J::profile,
                          "original | optimized | performance | experimental | draft | path.yaml",
                          "a profile name or path"),
  });
  return t;
}

std::string all_keys() {
  std::string s = job_table().known_keys() + ", clips, overrides";
  for (const auto& r : config::engine_table().rows())
    if (r.info.scope == OptionScope::Run) s += ", " + r.info.key;
  for (const auto& r : config::inference_table().rows())
    if (r.info.key != "frames" && r.info.key != "skip_existing") s += ", " + r.info.key;
  return s;
}

JobClip read_clip(const YAML::Node& c, const std::string& file, const fs::path& base) {
  JobClip jc;
  const auto w = config::where(file, c);
  if (c.IsScalar()) {
    jc.path = resolve(base, c.Scalar());
    return jc;
  }
  CK_CHECK(c.IsMap() && c["path"], ConfigError, w,
           ": clips entry: expected a path or {path: ..., frames: A-B}");
  config::for_each_entry(c, file, [&](const std::string& k, const YAML::Node& v,
                                      const std::string& kw) {
    if (k == "path") {
      jc.path = resolve(base, config::scalar(v, k, kw));
    } else if (k == "frames") {
      jc.frames = config::scalar(v, k, kw);
      try {
        (void)io::parse_frame_ranges(jc.frames, 1 << 30);
      } catch (const ConfigError& e) {
        throw ConfigError(kw + ": " + e.what());
      }
    } else {
      throw ConfigError(kw + ": clips entry: unknown key '" + k + "' (expected path, frames)");
    }
  });
  return jc;
}

}  // namespace

JobSpec load_job(const std::string& path) {
  std::error_code ec;
  config::check_input_file(path, "job file");
  CK_CHECK(fs::is_regular_file(path, ec), ConfigError, path, ": job file does not exist");
  JobSpec job;
  job.file = fs::absolute(path).lexically_normal().string();
  const auto base = fs::path(job.file).parent_path();
  const auto root = config::load_yaml_file(path);
  CK_CHECK(root.IsMap(), ConfigError, path, ": expected a mapping (see jobs/example.yaml)");
  const auto& f = job.file;

  // Profile first: the other keys refine it whatever their order in the file.
  if (root["profile"]) job.profile = config::scalar(root["profile"], "profile", f);
  try {
    job.options = load_profile(job.profile.find('/') != std::string::npos
                                  ? resolve(base, job.profile)
                                  : job.profile);
  } catch (const ConfigError& e) {
    throw ConfigError(config::where(f, root["profile"]) + ": key 'profile': " + e.what());
  }

  config::for_each_entry(root, f, [&](const std::string& key, const YAML::Node& v,
                                      const std::string& w) {
    if (key == "clips") {
      CK_CHECK(v.IsSequence(), ConfigError, w, ": key 'clips': expected a list of clip folders");
      for (const auto& c : v) job.clips.push_back(read_clip(c, f, base));
    } else if (key == "overrides") {
      CK_CHECK(v.IsMap(), ConfigError, w, ": key 'overrides': expected a mapping of profile fields");
      config::for_each_entry(v, f, [&](const std::string& k, const YAML::Node& ov,
                                       const std::string& ow) {
        set_option(job.options, k, config::scalar(ov, k, ow), ow, OptionScope::Profile);
      });
    } else if (key == "skip_existing") {
      throw ConfigError(w + ": key 'skip_existing': jobs always skip finished frames (that is "
                            "what makes chunks idempotent); remove the key");
    } else if (job_table().find(key)) {
      if (key != "profile") job_table().set(job, key, config::scalar(v, key, w), w);
    } else if (const auto* e = config::engine_table().find(key);
               e && e->info.scope == OptionScope::Run) {
      config::engine_table().set(job.options, key, config::scalar(v, key, w), w);
    } else if (config::inference_table().find(key) && key != "frames") {
      // `outputs` may be a YAML list as well as "fg,matte".
      std::string value;
      if (v.IsSequence()) {
        CK_CHECK(key != "garbage_matte" && key != "holdout_matte", ConfigError, w, ": ", key,
                 " is one path (a folder, an image or a video), not a list");
        for (const auto& o : v) value += (value.empty() ? "" : ",") + config::scalar(o, key, w);
      } else {
        value = config::scalar(v, key, w);
      }
      config::inference_table().set(job.inference, key, value, w);
    } else {
      throw ConfigError(w + ": unknown key '" + key + "' (known keys: " + all_keys() + ")");
    }
  });

  if (!job.clips_root.empty()) job.clips_root = resolve(base, job.clips_root);
  if (!job.inference.output_root.empty())
    job.inference.output_root = resolve(base, job.inference.output_root);
  // The mattes too: a farm task's working folder is not the job file's.
  for (auto* m : {&job.inference.garbage_matte, &job.inference.holdout_matte})
    if (!m->empty()) *m = resolve(base, *m);
  if (!job.options.model.checkpoint.empty()) job.options.model.checkpoint = resolve(base, job.options.model.checkpoint);
  if (!job.options.model.checkpoint_blue.empty())
    job.options.model.checkpoint_blue = resolve(base, job.options.model.checkpoint_blue);
  // Relative to the job file, like the checkpoints: every task resolves it the same way.
  if (!job.options.model.tune_cache.empty()) {
    const bool folder = job.options.model.tune_cache.back() == '/';
    job.options.model.tune_cache = resolve(base, job.options.model.tune_cache);
    if (folder && job.options.model.tune_cache.back() != '/') job.options.model.tune_cache += '/';
  }
  CK_CHECK(!job.clips.empty() || !job.clips_root.empty(), ConfigError, f,
           ": no 'clips' and no 'clips_root': nothing to key");
  validate_profile(job.options, f + ": overrides");
  validate_inference_options(job.inference, f);
  job.inference.skip_existing = true;
  return job;
}

CORRIDORKEY_NAMESPACE_END
