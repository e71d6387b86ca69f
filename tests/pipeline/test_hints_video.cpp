// Clips without hints, blue screens and video deliverables, end to end with the bundled
// tiny checkpoint on generated clips.
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/hint.h>
#include <corridorkey/pipeline.h>
#include <corridorkey/profile.h>

#include <catch2/catch.hpp>

#include "devtools/synthetic_clip.h"
#include "io/image_io.h"
#include "io/video_writer.h"
#include "post/postprocess.h"
#include "support/support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>

using namespace corridorkey;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

/// Everything a shell command writes to stdout (ffmpeg decoding or describing a video).
std::string command_output(const std::string& cmd) {
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  ::pclose(pipe);
  return out;
}

Profile engine_opts() {
  auto o = load_profile("original");
  o.model.device = "cpu";  // bundled checkpoint
  return o;
}

devtools::SyntheticClip spec(int frames, const std::string& screen = "green", bool hints = true) {
  devtools::SyntheticClip c;
  c.frames = frames;
  c.soft_edge_px = 2;
  c.screen = screen;
  c.hints = hints;
  return c;
}

InferenceOptions job_for(const fs::path& clip) {
  InferenceOptions job;
  job.paths = {clip.string()};
  job.color = ColorSpace::Linear;  // synthetic plates are scene-linear EXRs
  return job;
}

double max_diff(const Image& a, const Image& b) {
  REQUIRE(a.pixels.size() == b.pixels.size());
  double d = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) d = std::max(d, double(std::fabs(a.pixels[i] - b.pixels[i])));
  return d;
}

Image swapped(Image im) {
  swap_green_blue(im);
  return im;
}

/// Every file under `dir` with its size and modification time.
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> m;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) m[e.path().string()] = {e.file_size(), e.last_write_time()};
  return m;
}

/// Scoped CORRIDORKEY_FFMPEG.
struct FfmpegEnv {
  explicit FfmpegEnv(const char* v) { ::setenv("CORRIDORKEY_FFMPEG", v, 1); }
  ~FfmpegEnv() { ::unsetenv("CORRIDORKEY_FFMPEG"); }
};

}  // namespace

TEST_CASE("a clip without AlphaHint is keyed from generated hints, kept for review", "[pipeline]") {
  const auto root = ck_test::temp_dir("hint_gen");
  const auto c = spec(3, "green", false);
  const auto clip = devtools::write_synthetic_clip(root / "nohint", c);
  const auto input_before = snapshot(clip / "Input");
  std::vector<std::string> warnings;
  const auto s = run_inference(engine_opts(), job_for(clip), [&](const PipelineEvent& e) {
    if (e.kind == PipelineEvent::Kind::Warning) warnings.push_back(e.message);
  });
  CHECK(s.frames_done == 3);
  CHECK(s.frames_failed == 0);
  CHECK(std::any_of(warnings.begin(), warnings.end(),
                    [](const auto& w) { return w.find("no AlphaHint/") != std::string::npos; }));
  CHECK((snapshot(clip / "Input") == input_before));  // the input folder is never touched
  CHECK_FALSE(fs::exists(clip / "AlphaHint"));
  for (int f = 0; f < 3; ++f) {
    const auto png = clip / "Output" / "AlphaHint" / ("plate_000" + std::to_string(f + 1) + ".png");
    REQUIRE(fs::exists(png));
    const auto hint = io::read_image(png.string());
    CHECK(hint.channels == 1);
    const auto truth = devtools::synthetic_hint(c, f);
    double err = 0;
    for (size_t i = 0; i < truth.pixels.size(); ++i) err += std::fabs(hint.pixels[i] - truth.pixels[i]);
    CHECK(err / truth.pixels.size() < 0.05);
  }

  // The written hints are the ones keyed: used as AlphaHint/ they give the same mattes.
  const auto again = root / "reuse";
  fs::create_directories(again);
  fs::copy(clip / "Input", again / "Input");
  fs::copy(clip / "Output" / "AlphaHint", again / "AlphaHint");
  auto job = job_for(again);
  job.hint = HintSource::Files;
  CHECK(run_inference(engine_opts(), job).frames_done == 3);
  for (int f = 1; f <= 3; ++f) {
    const auto name = "plate_000" + std::to_string(f) + ".exr";
    CHECK(max_diff(io::read_image((clip / "Output" / "Matte" / name).string()),
                   io::read_image((again / "Output" / "Matte" / name).string())) <= 1e-3);
  }
  fs::remove_all(root);
}

TEST_CASE("hint sources: files required, missing frames named, chroma keys anyway", "[pipeline]") {
  const auto root = ck_test::temp_dir("hint_src");
  SECTION("--hint files on a clip without AlphaHint names the clip") {
    const auto clip = devtools::write_synthetic_clip(root / "bare", spec(2, "green", false));
    auto job = job_for(clip);
    job.hint = HintSource::Files;
    CHECK_THROWS_WITH(run_inference(engine_opts(), job),
                      Contains(clip.string()) && Contains("no AlphaHint/"));
  }
  SECTION("frames without a hint are named; --hint chroma generates every hint") {
    const auto clip = devtools::write_synthetic_clip(root / "gap", spec(4));
    fs::remove(clip / "AlphaHint" / "hint_0002.png");
    fs::remove(clip / "AlphaHint" / "hint_0004.png");
    CHECK_THROWS_WITH(run_inference(engine_opts(), job_for(clip)),
                      Contains("plate_0002.exr") && Contains("plate_0004.exr") &&
                          Contains("--hint chroma"));
    auto job = job_for(clip);
    job.hint = HintSource::Chroma;
    const auto s = run_inference(engine_opts(), job);
    CHECK(s.frames_done == 4);
    CHECK(fs::exists(clip / "Output" / "AlphaHint" / "plate_0004.png"));
  }
  SECTION("hints whose numbering drifts from the plates' are keyed with a warning naming the pair") {
    const auto clip = devtools::write_synthetic_clip(root / "drift", spec(4));
    auto warnings_of = [&] {
      std::string w;
      run_inference(engine_opts(), job_for(clip), [&](const PipelineEvent& e) {
        if (e.kind == PipelineEvent::Kind::Warning) w += e.message + "\n";
      });
      return w;
    };
    CHECK_THAT(warnings_of(), !Contains("drifts"));  // same numbers: no warning
    fs::remove(clip / "AlphaHint" / "hint_0003.png");
    fs::copy_file(clip / "AlphaHint" / "hint_0004.png", clip / "AlphaHint" / "hint_0005.png");
    fs::remove_all(clip / "Output");
    CHECK_THAT(warnings_of(), Contains("plate_0003.exr is keyed with hint_0004.png"));
  }
  SECTION("a plate with no backing cannot give a hint: the clip is named") {
    auto c = spec(2, "green", false);
    const auto clip = root / "grey";
    fs::create_directories(clip / "Input");
    for (int f = 0; f < 2; ++f) {
      Image im = devtools::synthetic_plate(c, f);
      for (size_t i = 0; i < im.pixels.size(); i += 3) im.pixels[i + 1] = im.pixels[i + 2] = im.pixels[i];
      io::write_exr((clip / "Input" / ("plate_000" + std::to_string(f + 1) + ".exr")).string(), im,
                    "RGB", io::ExrCompression::Zip);
    }
    CHECK_THROWS_WITH(run_inference(engine_opts(), job_for(clip)),
                      Contains(clip.string()) && Contains("no green or blue backing"));
    CHECK_FALSE(fs::exists(clip / "Output" / "Matte" / "plate_0001.exr"));
    // With hints given, the same plates key as green, with a warning.
    fs::create_directories(clip / "AlphaHint");
    for (int f = 0; f < 2; ++f)
      devtools::write_synthetic_hint((clip / "AlphaHint" / ("h" + std::to_string(f) + ".png")).string(), c, f);
    std::string warning;
    const auto s = run_inference(engine_opts(), job_for(clip), [&](const PipelineEvent& e) {
      if (e.kind == PipelineEvent::Kind::Warning) warning += e.message;
    });
    CHECK(s.frames_done == 2);
    CHECK_THAT(warning, Contains("keyed as a green screen"));
  }
  fs::remove_all(root);
}

TEST_CASE("a blue twin keys to the green clip's matte, colours swapped back", "[pipeline]") {
  const auto root = ck_test::temp_dir("blue");
  for (bool hints : {true, false}) {
    const auto tag = std::string(hints ? "files" : "chroma");
    const auto green = devtools::write_synthetic_clip(root / ("green_" + tag), spec(2, "green", hints));
    const auto blue = devtools::write_synthetic_clip(root / ("blue_" + tag), spec(2, "swapped", hints));
    CHECK(run_inference(engine_opts(), job_for(green)).frames_done == 2);
    std::string warnings;
    CHECK(run_inference(engine_opts(), job_for(blue), [&](const PipelineEvent& e) {
            if (e.kind == PipelineEvent::Kind::Warning) warnings += e.message;
          }).frames_done == 2);
    CHECK_THAT(warnings, Contains("blue backing"));
    const auto g = green / "Output", b = blue / "Output";
    for (const char* stem : {"plate_0001", "plate_0002"}) {
      INFO(tag << " " << stem);
      const std::string exr = std::string(stem) + ".exr", png = std::string(stem) + ".png";
      CHECK(max_diff(io::read_image((g / "Matte" / exr).string()), io::read_image((b / "Matte" / exr).string())) == 0);
      CHECK(max_diff(swapped(io::read_image((g / "FG" / exr).string())), io::read_image((b / "FG" / exr).string())) == 0);
      CHECK(max_diff(swapped(io::read_image((g / "Processed" / exr).string())),
                     io::read_image((b / "Processed" / exr).string())) == 0);
      CHECK(max_diff(swapped(io::read_image((g / "Comp" / png).string())), io::read_image((b / "Comp" / png).string())) == 0);
      if (!hints)
        CHECK(max_diff(io::read_image((g / "AlphaHint" / png).string()),
                       io::read_image((b / "AlphaHint" / png).string())) == 0);
    }
  }
  // A blue backing in its own colours (not a twin): found as blue, the hint still follows the alpha.
  const auto natural = devtools::write_synthetic_clip(root / "natural", spec(2, "blue", false));
  auto job = job_for(natural);
  job.screen = Screen::Green;  // told green: there is none to key against
  CHECK_THROWS_WITH(run_inference(engine_opts(), job), Contains("no green backing"));
  job.screen = Screen::Auto;
  CHECK(run_inference(engine_opts(), job).frames_done == 2);
  const auto hint = io::read_image((natural / "Output" / "AlphaHint" / "plate_0001.png").string());
  const auto truth = devtools::synthetic_hint(spec(2, "blue", false), 0);
  double err = 0;
  for (size_t i = 0; i < truth.pixels.size(); ++i) err += std::fabs(hint.pixels[i] - truth.pixels[i]);
  CHECK(err / truth.pixels.size() < 0.05);

  // The engine API: process_frame(..., Screen::Blue) on the twin equals the green result swapped.
  auto eo = engine_opts();
  eo.engine.input_is_linear = true;
  OriginalEngine engine(eo);
  const auto c = spec(1);
  const auto plate = devtools::synthetic_plate(c, 0);
  const auto hint0 = devtools::synthetic_hint(c, 0);
  const auto rg = engine.process_frame(plate.view(), hint0.view());
  const auto rb = engine.process_frame(swapped(plate).view(), hint0.view(), Screen::Blue);
  CHECK(max_diff(rg.alpha, rb.alpha) == 0);
  CHECK(max_diff(swapped(rg.fg), rb.fg) == 0);
  CHECK(max_diff(swapped(rg.comp), rb.comp) == 0);
  // Screen::Auto (refused before issue 39) estimates this plate's backing: green, the same key.
  CHECK(max_diff(engine.process_frame(plate.view(), hint0.view(), Screen::Auto).alpha, rg.alpha) == 0);
  fs::remove_all(root);
}

TEST_CASE("a video input gets Comp.mp4 at its frame rate and length", "[pipeline]") {
  const auto root = ck_test::temp_dir("video_in");
  const auto clip = root / "vid";
  fs::create_directories(clip);
  const auto c = spec(5, "green", false);
  {
    io::VideoWriter w((clip / "Input.mp4").string(), c.width, c.height, 12.5, VideoCodec::H264, false);
    for (int f = 0; f < c.frames; ++f) {
      Image p = devtools::synthetic_plate(c, f);
      for (auto& v : p.pixels) v = post::linear_to_srgb(v);  // a video is display-referred
      w.write(p);
    }
    w.finish();
  }
  InferenceOptions job;
  job.paths = {clip.string()};
  std::vector<std::string> written;
  const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
    if (e.kind == PipelineEvent::Kind::VideoWritten) written.push_back(e.file);
  });
  CHECK(s.frames_done == 5);
  CHECK(s.videos_written == 1);
  REQUIRE(written == std::vector<std::string>{(clip / "Output" / "Comp.mp4").string()});
  io::VideoReader r(written[0]);
  CHECK(r.fps() == Approx(12.5));
  int n = 0;
  for (Image im; r.next(im); ++n) CHECK((im.width == c.width && im.height == c.height));
  CHECK(n == 5);
  CHECK(fs::exists(clip / "Output" / "AlphaHint" / "00004.png"));
  CHECK_FALSE(fs::exists(clip / "Output" / "Matte.mp4"));  // auto: the comp only
  fs::remove_all(root);
}

TEST_CASE("videos are encoded once the sequence is complete, across --frames runs", "[pipeline]") {
  const auto root = ck_test::temp_dir("video_seq");
  const auto clip = devtools::write_synthetic_clip(root / "seq", spec(4));
  auto job = job_for(clip);
  job.video_out.auto_ = false;
  job.video_out.comp = job.video_out.matte = true;
  job.frames = "1-2";
  std::string warnings;
  auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
    if (e.kind == PipelineEvent::Kind::Warning) warnings += e.message + "\n";
  });
  CHECK(s.videos_written == 0);
  CHECK_FALSE(fs::exists(clip / "Output" / "Comp.mp4"));
  CHECK_THAT(warnings, Contains("Comp.mp4 not encoded yet: 2 of 4 frames missing"));
  job.frames = "3-4";
  s = run_inference(engine_opts(), job);
  CHECK(s.videos_written == 2);
  for (const char* v : {"Comp.mp4", "Matte.mp4"}) {
    io::VideoReader r((clip / "Output" / v).string());
    CHECK(r.fps() == Approx(24));
    int n = 0;
    for (Image im; r.next(im);) ++n;
    CHECK(n == 4);
  }
  // The matte video holds the matte (8-bit, lossy): close to the EXR.
  {
    io::VideoReader r((clip / "Output" / "Matte.mp4").string());
    Image im;
    REQUIRE(r.next(im));
    const auto matte = io::read_image((clip / "Output" / "Matte" / "plate_0001.exr").string());
    double err = 0;
    for (size_t i = 0; i < matte.pixels.size(); ++i) err += std::fabs(im.pixels[i * 3] - matte.pixels[i]);
    CHECK(err / matte.pixels.size() < 0.02);
  }
  // Nothing new keyed: the video is not encoded again.
  const auto t = fs::last_write_time(clip / "Output" / "Comp.mp4");
  job.frames.clear();
  job.skip_existing = true;
  s = run_inference(engine_opts(), job);
  CHECK(s.frames_skipped == 4);
  CHECK(s.videos_written == 0);
  CHECK((fs::last_write_time(clip / "Output" / "Comp.mp4") == t));
  fs::remove_all(root);
}

TEST_CASE("ProRes 4444 FG carries the matte as alpha; without ffmpeg, H.264 through OpenCV", "[pipeline]") {
  const auto root = ck_test::temp_dir("video_codec");
  const auto clip = devtools::write_synthetic_clip(root / "pr", spec(2));
  auto job = job_for(clip);
  job.video_out.auto_ = false;
  job.video_out.fg = true;
  job.video_codec = VideoCodec::ProRes;
  const auto ffmpeg = io::find_ffmpeg();
  if (!ffmpeg.empty()) {  // scripts/setup.sh installs it
    const auto s = run_inference(engine_opts(), job);
    REQUIRE(s.videos_written == 1);
    const auto mov = clip / "Output" / "FG.mov";
    // Decode the first frame's RGBA with ffmpeg itself and compare its alpha with the matte.
    const std::string cmd = "'" + ffmpeg + "' -v error -i '" + mov.string() +
                            "' -frames:v 1 -f rawvideo -pix_fmt rgba64le -";
    const std::string raw = command_output(cmd);
    std::vector<uint16_t> px(static_cast<size_t>(320) * 180 * 4);
    REQUIRE(raw.size() == px.size() * 2);
    std::memcpy(px.data(), raw.data(), px.size() * 2);
    const auto matte = io::read_image((clip / "Output" / "Matte" / "plate_0001.exr").string());
    double worst = 0;
    for (size_t i = 0; i < matte.pixels.size(); ++i)
      worst = std::max(worst, std::fabs(px[i * 4 + 3] / 65535.0 - std::clamp(matte.pixels[i], 0.f, 1.f)));
    CHECK(worst < 2.0 / 1023);  // 10-bit alpha
  }
  {
    FfmpegEnv none("none");
    CHECK(io::find_ffmpeg().empty());
    CHECK_THROWS_WITH(run_inference(engine_opts(), job), Contains("ffmpeg"));
    job.video_codec = VideoCodec::H264;
    job.video_out.fg = false;
    job.video_out.comp = true;
    const auto s = run_inference(engine_opts(), job);
    CHECK(s.videos_written == 1);
    io::VideoReader r((clip / "Output" / "Comp.mp4").string());
    int n = 0;
    for (Image im; r.next(im);) ++n;
    CHECK(n == 2);
  }
  // A video of an output that is not written is refused up front.
  job.fg = false;
  job.video_out.fg = true;
  CHECK_THROWS_WITH(run_inference(engine_opts(), job), Contains("video_out") && Contains("fg"));
  fs::remove_all(root);
}

// Confined writes (review): ffmpeg writes the video and its log through the temporary
// file's own /proc descriptor path, never a name in the folder someone could swap for a
// link; OpenCV, which needs the extension in the name it opens, is refused there.
TEST_CASE("a confined run encodes videos through the file's descriptor, and only with ffmpeg", "[pipeline]") {
  const auto root = ck_test::temp_dir("video_confined");
  const auto clip = devtools::write_synthetic_clip(root / "cv", spec(2));
  auto job = job_for(clip);
  job.video_out.auto_ = false;
  job.video_out.comp = true;
  job.video_codec = VideoCodec::H264;
  job.confine_writes = {root.string()};
  if (!io::find_ffmpeg().empty()) {  // scripts/setup.sh installs it
    const auto s = run_inference(engine_opts(), job);
    REQUIRE(s.videos_written == 1);
    io::VideoReader r((clip / "Output" / "Comp.mp4").string());
    int n = 0;
    for (Image im; r.next(im);) ++n;
    CHECK(n == 2);
    for (const auto& e : fs::directory_iterator(clip / "Output"))  // no temporary file or log left
      CHECK(e.path().filename().string().rfind(".ck-tmp", 0) != 0);
    fs::remove(clip / "Output" / "Comp.mp4");
  } else {
    std::cout << "SKIPPED the ffmpeg half: no ffmpeg binary\n";
  }
  FfmpegEnv none("none");
  std::string failed;
  const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
    if (e.kind == PipelineEvent::Kind::VideoFailed) failed = e.message;
  });
  CHECK(s.videos_written == 0);
  CHECK_THAT(failed, Contains("confined") && Contains("ffmpeg") && Contains("Comp.mp4"));
  CHECK_FALSE(fs::exists(clip / "Output" / "Comp.mp4"));
  fs::remove_all(root);
}

TEST_CASE("a CORRIDORKEY_FFMPEG that names nothing is an error naming it; refused runs leave no Output/",
          "[pipeline]") {
  const auto root = ck_test::temp_dir("video_env");
  const auto clip = devtools::write_synthetic_clip(root / "env", spec(1));
  auto job = job_for(clip);
  job.video_out.auto_ = false;
  job.video_out.comp = true;
  {
    // Before: ignored silently (H.264 fell back to OpenCV; ProRes said "none found on PATH").
    FfmpegEnv bad("/nonexistent/ffmpeg");
    for (auto codec : {VideoCodec::H264, VideoCodec::ProRes}) {
      job.video_codec = codec;
      CHECK_THROWS_AS(run_inference(engine_opts(), job), ConfigError);
      CHECK_THROWS_WITH(run_inference(engine_opts(), job),
                        Contains("CORRIDORKEY_FFMPEG=/nonexistent/ffmpeg: not an executable file"));
    }
  }
  {
    FfmpegEnv none("none");
    job.video_codec = VideoCodec::ProRes;
    CHECK_THROWS_WITH(run_inference(engine_opts(), job), Contains("CORRIDORKEY_FFMPEG=none"));
  }
  // The pre-checks run before any output folder is made (before: empty FG/, Matte/, ...).
  CHECK_FALSE(fs::exists(clip / "Output"));
  fs::remove_all(root);
}

TEST_CASE("a clip whose sampled plates disagree on the backing is warned about", "[pipeline]") {
  // First and last plate green, the middle one blue: the per-clip estimate says green, and
  // the blue frame would get a hint keyed against green. Before: no word of it.
  const auto root = ck_test::temp_dir("mixed_backing");
  const auto clip = devtools::write_synthetic_clip(root / "mixed", spec(3, "green", false));
  auto job = job_for(clip);
  job.frames = "1-1";  // the estimate samples the same plates whatever --frames selects
  auto disagreement = [&] {
    std::vector<std::string> found;
    run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
      if (e.kind == PipelineEvent::Kind::Warning && e.message.find("disagree") != std::string::npos)
        found.push_back(e.message);
    });
    return found;
  };
  CHECK(disagreement().empty());  // all green: no warning
  const auto blue = devtools::synthetic_plate(spec(3, "blue", false), 1);
  io::write_exr((clip / "Input" / "plate_0002.exr").string(), blue, "RGB", io::ExrCompression::Zip);
  const auto w = disagreement();
  REQUIRE(w.size() == 1);
  CHECK_THAT(w[0], Contains("keyed as green") && Contains("plate_0002.exr (blue)"));
  fs::remove_all(root);
}

TEST_CASE("a frame whose generated hint finds no backing fails, named", "[pipeline]") {
  // Frames 1, 2, 4 green; frame 3 blue (a clip with mixed backing) or grey (no screen at all).
  // The clip is keyed as green, so frame 3's hint comes out all foreground (mean 1.0) and the
  // model returns a garbage matte. Before: exit 0, no warning.
  const auto root = ck_test::temp_dir("no_backing");
  auto c = spec(4, "green", false);
  auto mean_of = [](const Image& im) {
    double s = 0;
    for (float v : im.pixels) s += v;
    return s / static_cast<double>(im.pixels.size());
  };
  auto run = [&](const fs::path& clip, InferenceOptions job) {
    job.on_error = OnError::Skip;
    std::vector<std::string> failed;
    const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
      if (e.kind == PipelineEvent::Kind::FrameFailed) failed.push_back(e.message);
    });
    return std::pair{s, failed};
  };
  Image grey = devtools::synthetic_plate(c, 2);
  std::fill(grey.pixels.begin(), grey.pixels.end(), 0.18f);
  for (const auto& [name, odd] : {std::pair{"blue", devtools::synthetic_plate(spec(4, "blue", false), 2)},
                                  std::pair{"grey", grey}}) {
    INFO(name);
    const auto clip = devtools::write_synthetic_clip(root / name, c);
    const auto file = clip / "Input" / "plate_0003.exr";
    io::write_exr(file.string(), odd, "RGB", io::ExrCompression::Zip);
    auto job = job_for(clip);
    const auto [s, failed] = run(clip, job);
    CHECK(s.frames_done == 3);
    CHECK(s.frames_failed == 1);
    REQUIRE(failed.size() == 1);
    CHECK_THAT(failed[0], Contains(file.string()) && Contains("no green backing found") &&
                              Contains("% foreground") && Contains("--no-backing-check"));
    CHECK_FALSE(fs::exists(clip / "Output" / "AlphaHint" / "plate_0003.png"));  // failed: nothing written
    CHECK_FALSE(fs::exists(clip / "Output" / "Matte" / "plate_0003.exr"));
    CHECK(fs::exists(clip / "Output" / "Matte" / "plate_0004.exr"));
    // The flag turns the check off: the frame is keyed from its all-foreground hint.
    job.backing_check = false;
    const auto [s2, failed2] = run(clip, job);
    CHECK(s2.frames_failed == 0);
    CHECK(s2.frames_done == 4);
    CHECK(mean_of(io::read_image((clip / "Output" / "AlphaHint" / "plate_0003.png").string())) >= 0.99);
  }
  {  // A close-up that the subject fills still has backing: keyed.
    // The subject over about 90% of the frame, a green margin of 8 px left and right, 4-5 px
    // top and bottom: its hint is mostly foreground, but not "no backing".
    const auto clip = devtools::write_synthetic_clip(root / "closeup", c);
    Image close = devtools::synthetic_plate(c, 2);
    for (int y = 4; y < close.height - 5; ++y)
      for (int x = 8; x < close.width - 8; ++x) {
        float* px = &close.pixels[(static_cast<size_t>(y) * close.width + x) * 3];
        px[0] = 0.6f, px[1] = 0.35f, px[2] = 0.25f;  // a skin tone
      }
    io::write_exr((clip / "Input" / "plate_0003.exr").string(), close, "RGB", io::ExrCompression::Zip);
    const auto [s, failed] = run(clip, job_for(clip));
    CHECK(failed.empty());
    CHECK(s.frames_done == 4);
    const double m = mean_of(io::read_image((clip / "Output" / "AlphaHint" / "plate_0003.png").string()));
    CHECK(m > 0.85);  // the close-up is what it claims: mostly foreground
    CHECK(m < 0.99);
  }
  fs::remove_all(root);
}

TEST_CASE("NTSC frame rates are encoded as exact rationals", "[pipeline]") {
  const auto ffmpeg = io::find_ffmpeg();
  if (ffmpeg.empty()) {
    WARN("no ffmpeg: skipped (scripts/setup.sh installs it)");
    return;
  }
  const auto root = ck_test::temp_dir("video_ntsc");
  const auto c = spec(2);
  const auto mp4 = root / "ntsc.mp4";
  {
    io::VideoWriter w(mp4.string(), c.width, c.height, 23.976, VideoCodec::H264, false);
    for (int f = 0; f < c.frames; ++f) w.write(devtools::synthetic_plate(c, f));
    w.finish();
  }
  // The container's rate as ffmpeg reports it ("Stream #0:0 ... 23.98 fps, 23.98 tbr,
  // 24k tbn" for 24000/1001; 2997/125 would read "23.98 fps, 23.98 tbr, 11988 tbn").
  const std::string cmd = "'" + ffmpeg + "' -hide_banner -i '" + mp4.string() + "' 2>&1";
  const std::string out = command_output(cmd);
  INFO(out);
  CHECK_THAT(out, Contains("23.98 fps") && Contains("24k tbn"));
  fs::remove_all(root);
}
