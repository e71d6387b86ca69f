// Job frames and their split into scheduler chunks; running one chunk.
#include <corridorkey/check.h>
#include <corridorkey/job.h>

#include "io/clip.h"
#include "pipeline/frame_mattes.h"
#include "pipeline/run.h"

#include <algorithm>
#include <memory>
#include <set>

CORRIDORKEY_NAMESPACE_BEGIN

int JobFrames::total() const {
  int n = 0;
  for (const auto& f : frames) n += static_cast<int>(f.size());
  return n;
}

JobFrames job_frames(const JobSpec& job) {
  JobFrames jf;
  std::vector<std::pair<std::string, std::string>> sel;  // (path, frames)
  for (const auto& c : job.clips) sel.emplace_back(c.path, c.frames);
  if (!job.clips_root.empty())
    for (const auto& c : io::discover_clips({job.clips_root}, &jf.skipped)) sel.emplace_back(c.root, "");
  std::set<std::string> seen;
  for (const auto& [path, frames] : sel) {
    const auto clips = io::discover_clips({path});
    CK_CHECK(clips.size() == 1, ConfigError, job.file, ": '", path, "' is not a single clip folder");
    const auto& c = clips.front();
    CK_CHECK(seen.insert(c.name).second, ConfigError, job.file, ": two clips are named '", c.name,
             "' (clip names must be unique within a job)");
    // Generated hints (no AlphaHint/, or hint chroma): every plate is a frame.
    const bool files = !c.hint.empty() && job.inference.hint != HintSource::Chroma;
    const int n = files ? std::min(c.input.count(), c.hint.count()) : c.input.count();
    // The mattes as a chunk resolves them (existence, counts): validate and plan fail where
    // every chunk would.
    pipeline::resolve_mattes(c, job.inference, n, jf.skipped);
    std::vector<int> f;
    if (frames.empty()) {
      for (int i = 1; i <= n; ++i) f.push_back(i);
    } else {
      int asked = 0;
      for (int i : io::parse_frame_ranges(frames, n, &asked)) f.push_back(i + 1);
      if (asked > n)  // printed as a warning by job plan / run / export
        jf.skipped.push_back(job.file + ": clip '" + c.name + "': frames '" + frames + "' reach position " +
                             std::to_string(asked) + ", but the clip has " + std::to_string(n) +
                             " frames: positions past " + std::to_string(n) + " are not keyed");
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
  // One engine for every part of the chunk: the checkpoint is read once per task.
  auto engine = create_engine(job.options.model, job.options.engine);
  return run_chunk(*engine, job, chunk, on_event);
}

JobSummary run_chunk(BaseEngine& engine, const JobSpec& job, const Chunk& chunk,
                     const std::function<void(const PipelineEvent&)>& on_event) {
  JobSummary total;
  // The blue-screen model too is loaded once per chunk (the engine holds it), and only if a
  // part needs it.
  const auto blue_source = pipeline::held_blue_engine(engine);
  for (const auto& part : chunk.parts) {
    auto in = job.inference;
    in.paths = {part.clip_path};
    in.frames = std::to_string(part.first) + "-" + std::to_string(part.last);
    const auto s = pipeline::run_pipeline(engine, blue_source, in, on_event);
    total.clip_models.insert(total.clip_models.end(), s.clip_models.begin(), s.clip_models.end());
    total.clips += s.clips;
    total.frames_total += s.frames_total;
    total.frames_done += s.frames_done;
    total.frames_skipped += s.frames_skipped;
    total.frames_failed += s.frames_failed;
    total.videos_written += s.videos_written;
    total.videos_failed += s.videos_failed;
    total.failures.insert(total.failures.end(), s.failures.begin(), s.failures.end());
    total.interrupted |= s.interrupted;
    total.wall_ms += s.wall_ms;
    total.infer_wait_ms += s.infer_wait_ms;
    total.stage_sums += s.stage_sums;
    total.engine = s.engine;
    if (s.interrupted || (s.frames_failed && in.on_error == OnError::Stop)) break;
  }
  return total;
}

CORRIDORKEY_NAMESPACE_END
