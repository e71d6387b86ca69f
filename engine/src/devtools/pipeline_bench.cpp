// `corridorkey-engine bench --pipeline`: a generated 4K EXR clip keyed end to end, to check
// that reading, post-processing and writing hide behind inference.
#include <corridorkey/bench.h>
#include <corridorkey/check.h>
#include <corridorkey/pipeline.h>
#include <corridorkey/profile.h>

#include "devtools/synthetic_clip.h"

#include <filesystem>
#include <unistd.h>

CORRIDORKEY_NAMESPACE_BEGIN

PipelineBenchResult run_pipeline_bench(const BenchOptions& b) {
  namespace fs = std::filesystem;
  PipelineBenchResult r;
  CK_CHECK(b.pipeline_frames >= 1 && b.pipeline_width >= 8 && b.pipeline_height >= 8 &&
               b.pipeline_width <= 16384 && b.pipeline_height <= 16384,
           ConfigError, "bench --pipeline: --clip-frames must be >= 1 and --clip-size within "
           "8x8..16384x16384, got ", b.pipeline_frames, " frames of ", b.pipeline_width, "x",
           b.pipeline_height);
  const auto dir = fs::temp_directory_path() / ("ck_pipeline_bench_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  r.clip_dir = dir.string();
  devtools::SyntheticClip clip;
  clip.frames = b.pipeline_frames;
  clip.width = b.pipeline_width;
  clip.height = b.pipeline_height;
  clip.plate_format = "exr";  // scene-linear plates ...
  clip.hint_format = "exr";   // ... and hints, as a compositor renders them
  clip.plate_prefix = clip.hint_prefix = "frame_";
  clip.soft_edge_px = 40;
  clip.noise = 0.1;
  devtools::write_synthetic_clip(dir, clip);
  const auto eo = bench_engine_options(b, b.profiles.front());
  InferenceOptions job;
  job.paths = {dir.string()};
  job.color = ColorSpace::Linear;  // the generated plates are scene-linear EXRs
  job.read_workers = b.read_workers;
  job.write_workers = b.write_workers;
  const auto s = run_inference(eo, job);
  fs::remove_all(dir);
  CK_CHECK(s.frames_failed == 0, IoError, "pipeline bench: ", s.frames_failed, " frames failed: ",
           s.failures.empty() ? "" : s.failures.front());
  r.frames = s.frames_done;
  r.wall_ms = s.wall_ms;
  r.fps = s.frames_done / (s.wall_ms / 1000.0);
  r.stage_sums = s.stage_sums;
  r.infer_wait_ms = s.infer_wait_ms;
  r.wall_over_infer = s.wall_ms / std::max(s.stage_sums.infer_ms, 1e-9);
  return r;
}

CORRIDORKEY_NAMESPACE_END
