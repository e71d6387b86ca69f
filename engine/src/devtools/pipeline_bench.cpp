// `corridorkey-engine bench --pipeline`: a generated 4K EXR clip keyed end to end, to check
// that reading, post-processing and writing hide behind inference.
#include <corridorkey/bench.h>
#include <corridorkey/errors.h>
#include <corridorkey/pipeline.h>
#include <corridorkey/profile.h>

#include "io/image_io.h"

#include <cmath>
#include <filesystem>
#include <unistd.h>

CORRIDORKEY_NAMESPACE_BEGIN

PipelineBenchResult run_pipeline_bench(const BenchOptions& b) {
  namespace fs = std::filesystem;
  PipelineBenchResult r;
  const auto dir = fs::temp_directory_path() / ("ck_pipeline_bench_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "Input");
  fs::create_directories(dir / "AlphaHint");
  r.clip_dir = dir.string();
  const int W = b.pipeline_width, H = b.pipeline_height;
  for (int f = 0; f < b.pipeline_frames; ++f) {
    Image plate, hint;
    plate.width = hint.width = W;
    plate.height = hint.height = H;
    plate.channels = 3;
    hint.channels = 1;
    plate.pixels.resize(static_cast<size_t>(W) * H * 3);
    hint.pixels.resize(static_cast<size_t>(W) * H);
    const double cx = W * (0.4 + 0.02 * f), cy = H * 0.5, rad = H * 0.3;
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        const size_t i = static_cast<size_t>(y) * W + x;
        const double d = std::hypot(x - cx, y - cy);
        const float a = static_cast<float>(std::clamp((rad - d) / 40.0 + 0.5, 0.0, 1.0));
        const float n = static_cast<float>(((x * 7 + y * 13 + f) % 17) / 170.0);
        plate.pixels[i * 3 + 0] = a * 0.6f + (1 - a) * 0.05f + n;
        plate.pixels[i * 3 + 1] = a * 0.4f + (1 - a) * 0.7f + n;
        plate.pixels[i * 3 + 2] = a * 0.3f + (1 - a) * 0.08f + n;
        hint.pixels[i] = a;
      }
    char name[32];
    std::snprintf(name, sizeof name, "frame_%04d", f + 1);
    io::write_exr((dir / "Input" / (std::string(name) + ".exr")).string(), plate, "RGB",
                  io::ExrCompression::Zip);
    io::write_exr((dir / "AlphaHint" / (std::string(name) + ".exr")).string(), hint, "Y",
                  io::ExrCompression::Zip);
  }
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
  r.read_ms = s.read_ms;
  r.preprocess_ms = s.preprocess_ms;
  r.infer_ms = s.infer_ms;
  r.postprocess_ms = s.postprocess_ms;
  r.write_ms = s.write_ms;
  r.wall_over_infer = s.wall_ms / std::max(s.infer_ms, 1e-9);
  return r;
}

CORRIDORKEY_NAMESPACE_END
