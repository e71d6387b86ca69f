#include <corridorkey/errors.h>
#include <corridorkey/job.h>
#include <corridorkey/profile.h>

#include "io/clip.h"
#include "io/image_io.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

CORRIDORKEY_NAMESPACE_BEGIN
namespace {
namespace fs = std::filesystem;

std::string where(const std::string& file, const YAML::Node& n) {
  return file + ":" + std::to_string(n.Mark().line + 1);
}

std::string scalar(const std::string& file, const YAML::Node& n, const std::string& key) {
  CK_CHECK(n.IsScalar(), ConfigError, where(file, n), ": key '", key, "': expected a single value");
  return n.Scalar();
}

template <typename T>
T as(const std::string& file, const YAML::Node& n, const std::string& key, const char* expected) {
  const auto s = scalar(file, n, key);
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    throw ConfigError(where(file, n) + ": key '" + key + "': invalid value '" + s + "' (expected " +
                      expected + ")");
  }
}

std::string resolve(const fs::path& base, const std::string& p) {
  const fs::path x(p);
  return (x.is_absolute() ? x : base / x).lexically_normal().string();
}

}  // namespace

int JobFrames::total() const {
  int n = 0;
  for (const auto& f : frames) n += static_cast<int>(f.size());
  return n;
}

JobSpec load_job(const std::string& path) {
  JobSpec job;
  std::error_code ec;
  CK_CHECK(fs::is_regular_file(path, ec), ConfigError, path, ": job file does not exist");
  job.file = fs::absolute(path).lexically_normal().string();
  const auto base = fs::path(job.file).parent_path();
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ": not valid YAML: " + e.what());
  }
  CK_CHECK(root.IsMap(), ConfigError, path, ": expected a mapping (see jobs/example.yaml)");
  const auto& f = job.file;
  // Profile first: the other keys refine it whatever their order in the file.
  std::string profile = "optimized";
  if (root["profile"]) profile = scalar(f, root["profile"], "profile");
  try {
    job.engine = load_profile(profile.find('/') != std::string::npos ? resolve(base, profile) : profile);
  } catch (const ConfigError& e) {
    throw ConfigError(where(f, root["profile"]) + ": key 'profile': " + e.what());
  }
  static const std::set<std::string> known{
      "version", "name", "clips", "clips_root", "profile", "overrides", "checkpoint", "device",
      "img_size", "outputs", "exr_compression", "comp_format", "color", "despill", "despeckle",
      "despeckle_size", "refiner_scale", "chunk_size", "on_error", "output_root", "read_workers",
      "write_workers", "skip_existing"};
  for (const auto& kv : root) {
    const auto key = kv.first.as<std::string>();
    const auto& v = kv.second;
    const auto w = where(f, kv.first);
    if (!known.count(key)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw ConfigError(w + ": unknown key '" + key + "' (known keys: " + list + ")");
    }
    if (key == "version") {
      CK_CHECK(as<int>(f, v, key, "1") == 1, ConfigError, w, ": key 'version': only version 1 exists");
    } else if (key == "name") {
      job.name = scalar(f, v, key);
      CK_CHECK(!job.name.empty() && job.name.find_first_of(" /\\\"'") == std::string::npos, ConfigError,
               w, ": key 'name': '", job.name, "' must be non-empty without spaces, slashes or quotes");
    } else if (key == "clips") {
      CK_CHECK(v.IsSequence(), ConfigError, w, ": key 'clips': expected a list of clip folders");
      for (const auto& c : v) {
        JobClip jc;
        if (c.IsScalar()) {
          jc.path = resolve(base, c.Scalar());
        } else {
          CK_CHECK(c.IsMap() && c["path"], ConfigError, where(f, c),
                   ": clips entry: expected a path or {path: ..., frames: A-B}");
          for (const auto& e : c) {
            const auto k = e.first.as<std::string>();
            CK_CHECK(k == "path" || k == "frames", ConfigError, where(f, e.first),
                     ": clips entry: unknown key '", k, "' (expected path, frames)");
          }
          jc.path = resolve(base, scalar(f, c["path"], "path"));
          if (c["frames"]) {
            jc.frames = scalar(f, c["frames"], "frames");
            try {
              (void)io::parse_frame_ranges(jc.frames, 1 << 30);
            } catch (const ConfigError& e) {
              throw ConfigError(where(f, c["frames"]) + ": " + e.what());
            }
          }
        }
        job.clips.push_back(jc);
      }
    } else if (key == "clips_root") {
      job.clips_root = resolve(base, scalar(f, v, key));
    } else if (key == "profile") {
      // handled above
    } else if (key == "overrides") {
      CK_CHECK(v.IsMap(), ConfigError, w, ": key 'overrides': expected a mapping of profile fields");
      for (const auto& o : v) set_profile_field(job.engine, o.first.as<std::string>(),
                                                scalar(f, o.second, o.first.as<std::string>()),
                                                where(f, o.first));
    } else if (key == "checkpoint") {
      job.engine.checkpoint = resolve(base, scalar(f, v, key));
    } else if (key == "device") {
      job.engine.device = scalar(f, v, key);
    } else if (key == "img_size") {
      job.engine.img_size = as<int64_t>(f, v, key, "a multiple of 32");
      CK_CHECK(job.engine.img_size % 32 == 0 && job.engine.img_size >= 0, ConfigError, w,
               ": key 'img_size': ", job.engine.img_size, " is not a multiple of 32");
    } else if (key == "outputs") {
      std::vector<std::string> outs;
      if (v.IsSequence()) {
        for (const auto& o : v) outs.push_back(scalar(f, o, key));
      } else {
        std::stringstream ss(scalar(f, v, key));
        for (std::string o; std::getline(ss, o, ',');) outs.push_back(o);
      }
      auto& in = job.inference;
      in.fg = in.matte = in.comp = in.processed = false;
      for (const auto& o : outs) {
        if (o == "fg") in.fg = true;
        else if (o == "matte") in.matte = true;
        else if (o == "comp") in.comp = true;
        else if (o == "processed") in.processed = true;
        else throw ConfigError(w + ": key 'outputs': unknown output '" + o + "' (expected fg, matte, comp, processed)");
      }
    } else if (key == "exr_compression") {
      job.inference.exr_compression = scalar(f, v, key);
    } else if (key == "comp_format") {
      job.inference.comp_format = scalar(f, v, key);
      CK_CHECK(job.inference.comp_format == "png" || job.inference.comp_format == "exr", ConfigError,
               w, ": key 'comp_format': invalid value '", job.inference.comp_format, "' (expected png or exr)");
    } else if (key == "color") {
      const auto c = scalar(f, v, key);
      CK_CHECK(c == "auto" || c == "linear" || c == "srgb", ConfigError, w, ": key 'color': invalid value '",
               c, "' (expected auto, linear or srgb)");
      job.inference.color = c == "linear" ? ColorSpace::Linear : c == "auto" ? ColorSpace::Auto : ColorSpace::Srgb;
    } else if (key == "despill") {
      const auto d = as<double>(f, v, key, "0..10");
      CK_CHECK(d >= 0 && d <= 10, ConfigError, w, ": key 'despill': ", d, " is outside 0..10");
      job.engine.despill_strength = d / 10.0;
    } else if (key == "despeckle") {
      job.engine.despeckle = as<bool>(f, v, key, "true or false");
    } else if (key == "despeckle_size") {
      job.engine.despeckle_size = as<int64_t>(f, v, key, "a positive integer");
      CK_CHECK(job.engine.despeckle_size > 0, ConfigError, w, ": key 'despeckle_size' must be > 0");
    } else if (key == "refiner_scale") {
      job.engine.refiner_scale = as<double>(f, v, key, "a number");
    } else if (key == "chunk_size") {
      job.chunk_size = as<int>(f, v, key, "a positive integer");
      CK_CHECK(job.chunk_size > 0, ConfigError, w, ": key 'chunk_size' must be > 0");
    } else if (key == "on_error") {
      const auto e = scalar(f, v, key);
      CK_CHECK(e == "stop" || e == "skip", ConfigError, w, ": key 'on_error': invalid value '", e,
               "' (expected stop or skip)");
      job.inference.on_error = e == "stop" ? OnError::Stop : OnError::Skip;
    } else if (key == "output_root") {
      job.inference.output_root = resolve(base, scalar(f, v, key));
    } else if (key == "read_workers" || key == "write_workers") {
      const int n = as<int>(f, v, key, "an integer in 1..64");
      CK_CHECK(n >= 1 && n <= 64, ConfigError, w, ": key '", key, "' must be in 1..64");
      (key == "read_workers" ? job.inference.read_workers : job.inference.write_workers) = n;
    } else if (key == "skip_existing") {
      CK_CHECK(as<bool>(f, v, key, "true or false"), ConfigError, w,
               ": key 'skip_existing': jobs always skip finished frames (that is what makes chunks "
               "idempotent); remove the key");
    }
  }
  CK_CHECK(!job.clips.empty() || !job.clips_root.empty(), ConfigError, f,
           ": no 'clips' and no 'clips_root': nothing to key");
  validate_profile(job.engine, f + ": overrides");
  (void)io::parse_exr_compression(job.inference.exr_compression);
  job.inference.skip_existing = true;
  return job;
}

JobFrames job_frames(const JobSpec& job) {
  JobFrames jf;
  std::vector<std::pair<std::string, std::string>> sel;  // (path, frames)
  for (const auto& c : job.clips) sel.emplace_back(c.path, c.frames);
  if (!job.clips_root.empty())
    for (const auto& c : io::discover_clips({job.clips_root})) sel.emplace_back(c.root, "");
  std::set<std::string> seen;
  for (const auto& [path, frames] : sel) {
    const auto clips = io::discover_clips({path});
    CK_CHECK(clips.size() == 1, ConfigError, job.file, ": '", path, "' is not a single clip folder");
    const auto& c = clips.front();
    CK_CHECK(seen.insert(c.name).second, ConfigError, job.file, ": two clips are named '", c.name,
             "' (clip names must be unique within a job)");
    const int n = std::min(c.input.count(), c.hint.count());
    std::vector<int> f;
    if (frames.empty()) {
      for (int i = 1; i <= n; ++i) f.push_back(i);
    } else {
      for (int i : io::parse_frame_ranges(frames, n)) f.push_back(i + 1);
    }
    jf.clip_paths.push_back(c.root);
    jf.clip_names.push_back(c.name);
    jf.frames.push_back(std::move(f));
  }
  return jf;
}

namespace {
/// Consecutive runs of a sorted 1-based frame list, split into parts per chunk.
std::vector<Chunk> split(const JobFrames& jf, const std::vector<size_t>& clips, int n, int chunk_size) {
  struct Ref {
    size_t clip;
    int frame;
  };
  std::vector<Ref> all;
  for (size_t c : clips)
    for (int fr : jf.frames[c]) all.push_back({c, fr});
  const int total = static_cast<int>(all.size());
  if (n <= 0) n = std::max(1, (total + chunk_size - 1) / chunk_size);
  n = std::max(1, std::min(n, std::max(total, 1)));
  std::vector<Chunk> out;
  for (int i = 0; i < n; ++i) {
    // Chunk i gets [i*total/n, (i+1)*total/n): sizes differ by at most one.
    const int a = static_cast<int>(static_cast<int64_t>(i) * total / n);
    const int b = static_cast<int>(static_cast<int64_t>(i + 1) * total / n);
    Chunk ch;
    ch.index = i + 1;
    ch.count = n;
    for (int k = a; k < b; ++k) {
      const auto& r = all[static_cast<size_t>(k)];
      if (!ch.parts.empty() && ch.parts.back().clip_name == jf.clip_names[r.clip] &&
          ch.parts.back().last + 1 == r.frame) {
        ch.parts.back().last = r.frame;
      } else {
        ch.parts.push_back({jf.clip_paths[r.clip], jf.clip_names[r.clip], r.frame, r.frame});
      }
    }
    out.push_back(std::move(ch));
  }
  return out;
}
}  // namespace

std::vector<Chunk> plan_chunks(const JobFrames& jf, int n, int chunk_size) {
  std::vector<size_t> all(jf.clip_names.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return split(jf, all, n, chunk_size);
}

std::vector<Chunk> plan_clip_chunks(const JobFrames& jf, const std::string& name, int n,
                                    int chunk_size) {
  for (size_t i = 0; i < jf.clip_names.size(); ++i)
    if (jf.clip_names[i] == name) return split(jf, {i}, n, chunk_size);
  throw ConfigError("no clip named '" + name + "' in this job");
}

JobSummary run_chunk(const JobSpec& job, const Chunk& chunk,
                     const std::function<void(const PipelineEvent&)>& on_event) {
  JobSummary total;
  for (const auto& part : chunk.parts) {
    auto in = job.inference;
    in.paths = {part.clip_path};
    in.frames = std::to_string(part.first) + "-" + std::to_string(part.last);
    const auto s = run_inference(job.engine, in, on_event);
    total.clips += s.clips;
    total.frames_total += s.frames_total;
    total.frames_done += s.frames_done;
    total.frames_skipped += s.frames_skipped;
    total.frames_failed += s.frames_failed;
    total.failures.insert(total.failures.end(), s.failures.begin(), s.failures.end());
    total.interrupted |= s.interrupted;
    total.wall_ms += s.wall_ms;
    total.read_ms += s.read_ms;
    total.preprocess_ms += s.preprocess_ms;
    total.infer_ms += s.infer_ms;
    total.postprocess_ms += s.postprocess_ms;
    total.write_ms += s.write_ms;
    total.engine = s.engine;
    if (s.interrupted || (s.frames_failed && in.on_error == OnError::Stop)) break;
  }
  return total;
}

std::string export_openjd(const JobSpec& job, const JobFrames& jf, const std::string& cli) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "specificationVersion" << YAML::Value << "jobtemplate-2023-09";
  e << YAML::Key << "name" << YAML::Value << job.name;
  e << YAML::Key << "steps" << YAML::Value << YAML::BeginSeq;
  for (size_t i = 0; i < jf.clip_names.size(); ++i) {
    const int n = static_cast<int>(plan_clip_chunks(jf, jf.clip_names[i], 0, job.chunk_size).size());
    // Step names: letters, digits, '-', '_' and spaces; clip names are folder names.
    e << YAML::BeginMap;
    e << YAML::Key << "name" << YAML::Value << ("key-" + jf.clip_names[i]);
    e << YAML::Key << "parameterSpace" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "taskParameterDefinitions" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
    e << YAML::Key << "name" << YAML::Value << "Chunk";
    e << YAML::Key << "type" << YAML::Value << "INT";
    e << YAML::Key << "range" << YAML::Value << ("1-" + std::to_string(n));
    e << YAML::EndMap << YAML::EndSeq << YAML::EndMap;
    e << YAML::Key << "script" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "actions" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "onRun" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "command" << YAML::Value << cli;
    e << YAML::Key << "args" << YAML::Value << YAML::Flow << YAML::BeginSeq << "job" << "run" << job.file
      << "--clip" << jf.clip_names[i] << "--chunk" << ("{{Task.Param.Chunk}}/" + std::to_string(n))
      << "--quiet" << YAML::EndSeq;
    e << YAML::EndMap << YAML::EndMap << YAML::EndMap;
    e << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  return "# Open Job Description template written by corridorkey-engine job export\n" +
         std::string(e.c_str()) + "\n";
}

std::string export_slurm(const JobSpec& job, const JobFrames& jf, const std::string& cli,
                         const std::string& log_dir) {
  const int n = static_cast<int>(plan_chunks(jf, 0, job.chunk_size).size());
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "# Slurm array job written by corridorkey-engine job export: one array task per chunk.\n"
    << "# Each task is idempotent (finished frames are skipped), so requeues are safe.\n"
    << "#SBATCH --job-name=" << job.name << "\n"
    << "#SBATCH --array=1-" << n << "\n"
    << "#SBATCH --ntasks=1\n"
    << "#SBATCH --output=" << log_dir << "/" << job.name << "-%A_%a.out\n";
  if (job.engine.device.rfind("cuda", 0) == 0) s << "#SBATCH --gres=gpu:1\n";
  s << "set -euo pipefail\n"
    << "exec '" << cli << "' job run '" << job.file << "' --chunk \"${SLURM_ARRAY_TASK_ID}/" << n
    << "\" --quiet\n";
  return s.str();
}

CORRIDORKEY_NAMESPACE_END
