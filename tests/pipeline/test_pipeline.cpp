// The clip pipeline end to end on small generated clips, with the bundled tiny checkpoint.
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/pipeline.h>
#include <corridorkey/profile.h>

#include <catch2/catch.hpp>

#include "devtools/synthetic_clip.h"
#include "io/image_io.h"
#include "support/support.h"

#include <ImfChannelList.h>
#include <ImfFrameBuffer.h>
#include <ImfHeader.h>
#include <ImfInputFile.h>
#include <ImfOutputFile.h>
#include <ImfThreading.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace corridorkey;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

/// The 29 bytes of a PNG signature and IHDR (8-bit, colour type 2 = RGB, 6 = RGBA) that
/// declare width x height with no image data: a hostile or truncated file's header.
void write_png_header(const fs::path& path, uint32_t width, uint32_t height, unsigned char colour) {
  const unsigned char ihdr[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                                static_cast<unsigned char>(width >> 24), static_cast<unsigned char>(width >> 16),
                                static_cast<unsigned char>(width >> 8), static_cast<unsigned char>(width),
                                static_cast<unsigned char>(height >> 24), static_cast<unsigned char>(height >> 16),
                                static_cast<unsigned char>(height >> 8), static_cast<unsigned char>(height),
                                8, colour, 0, 0, 0};
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(ihdr), sizeof ihdr);
}

/// The shared synthetic clip: plates as scene-linear half EXRs, hints as 16-bit PNGs.
devtools::SyntheticClip clip_spec(int frames, int w = 320, int h = 180) {
  devtools::SyntheticClip c;
  c.frames = frames;
  c.width = w;
  c.height = h;
  return c;
}

Image make_plate(int w, int h, int f) { return devtools::synthetic_plate(clip_spec(1, w, h), f); }

void write_hint_png16(const std::string& path, int w, int h, int f) {
  devtools::write_synthetic_hint(path, clip_spec(1, w, h), f);
}

/// clip/Input/plate_000N.exr (linear, half) + clip/AlphaHint/hint_000N.png (16-bit).
fs::path make_clip(const fs::path& root, const std::string& name, int frames, int w = 320, int h = 180) {
  return devtools::write_synthetic_clip(root / name, clip_spec(frames, w, h));
}

Profile engine_opts() {
  auto o = load_profile("original");
  o.model.device = "cpu";  // bundled tiny checkpoint
  return o;
}

std::vector<std::string> channel_names(const std::string& exr) {
  Imf::InputFile f(exr.c_str());
  std::vector<std::string> n;
  for (auto it = f.header().channels().begin(); it != f.header().channels().end(); ++it) {
    n.emplace_back(it.name());
    CHECK(it.channel().type == Imf::HALF);
  }
  return n;
}

size_t temp_files(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".ck-tmp") != std::string::npos) ++n;
  return n;
}

}  // namespace

TEST_CASE("inference writes the four outputs, equal to the in-memory results", "[pipeline]") {
  const auto root = ck_test::temp_dir("pipe_e2e");
  const auto clip = make_clip(root, "shot010", 4);
  InferenceOptions job;
  job.paths = {clip.string()};
  job.color = ColorSpace::Linear;  // the plates are written as scene-linear EXRs
  std::vector<std::string> kinds;
  const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) { kinds.push_back(to_string(e.kind)); });
  CHECK(s.frames_done == 4);
  CHECK(s.frames_failed == 0);
  CHECK(kinds.front() == "job_started");
  CHECK(kinds.back() == "job_done");
  CHECK(std::count(kinds.begin(), kinds.end(), "frame_done") == 4);

  const auto out = clip / "Output";
  for (int f = 1; f <= 4; ++f) {
    const std::string stem = "plate_000" + std::to_string(f);
    CHECK(channel_names((out / "FG" / (stem + ".exr")).string()) == std::vector<std::string>{"B", "G", "R"});
    CHECK(channel_names((out / "Matte" / (stem + ".exr")).string()) == std::vector<std::string>{"Y"});
    CHECK(channel_names((out / "Processed" / (stem + ".exr")).string()) ==
          std::vector<std::string>{"A", "B", "G", "R"});
    const auto comp = cv::imread((out / "Comp" / (stem + ".png")).string(), cv::IMREAD_UNCHANGED);
    CHECK((comp.cols == 320 && comp.rows == 180 && comp.channels() == 3 && comp.depth() == CV_8U));
  }
  CHECK(temp_files(clip) == 0);

  // The same frame through the engine API, in memory.
  auto eo = engine_opts();
  eo.engine.input_is_linear = true;  // as job.color above
  OriginalEngine engine(eo);
  const auto plate = io::read_image((clip / "Input" / "plate_0002.exr").string());
  const auto hint = io::read_image((clip / "AlphaHint" / "hint_0002.png").string());
  const auto r = engine.process_frame(plate.view(), hint.view());
  const auto matte = io::read_image((out / "Matte" / "plate_0002.exr").string());
  const auto fg = io::read_image((out / "FG" / "plate_0002.exr").string());
  const auto proc = io::read_image((out / "Processed" / "plate_0002.exr").string());
  REQUIRE(matte.pixels.size() == r.alpha.pixels.size());
  double dm = 0, df = 0, dp = 0;
  for (size_t i = 0; i < matte.pixels.size(); ++i) dm = std::max(dm, double(std::fabs(matte.pixels[i] - r.alpha.pixels[i])));
  for (size_t i = 0; i < fg.pixels.size(); ++i) df = std::max(df, double(std::fabs(fg.pixels[i] - r.fg.pixels[i])));
  for (size_t i = 0; i < proc.pixels.size(); ++i) dp = std::max(dp, double(std::fabs(proc.pixels[i] - r.processed.pixels[i])));
  CHECK(dm <= 1e-3);  // half-float storage: 11-bit mantissa
  CHECK(df <= 1e-3);
  CHECK(dp <= 1e-3);
  const auto comp = cv::imread((out / "Comp" / "plate_0002.png").string());
  int worst = 0;
  for (int y = 0; y < 180; ++y)
    for (int x = 0; x < 320; ++x)
      for (int c = 0; c < 3; ++c) {
        // Truncated after clamping, as the reference's (comp * 255).astype(np.uint8).
        const int want = static_cast<int>(std::clamp(r.comp.at(x, y, 2 - c), 0.f, 1.f) * 255.f);
        worst = std::max(worst, std::abs(comp.at<cv::Vec3b>(y, x)[c] - want));
      }
  CHECK(worst == 0);

  // Deterministic: a second run writes identical files.
  const auto before = ck_test::read_file((out / "Processed" / "plate_0003.exr").string());
  run_inference(engine_opts(), job);
  CHECK(ck_test::read_file((out / "Processed" / "plate_0003.exr").string()) == before);
  fs::remove_all(root);
}

TEST_CASE("--frames selects, --skip-existing resumes", "[pipeline]") {
  const auto root = ck_test::temp_dir("pipe_resume");
  const auto clip = make_clip(root, "a", 5);
  InferenceOptions job;
  job.paths = {root.string()};  // a clips root
  job.frames = "2-3";
  auto s = run_inference(engine_opts(), job);
  CHECK(s.frames_done == 2);
  CHECK(fs::exists(clip / "Output" / "Matte" / "plate_0002.exr"));
  CHECK_FALSE(fs::exists(clip / "Output" / "Matte" / "plate_0001.exr"));
  job.frames = "";
  job.skip_existing = true;
  s = run_inference(engine_opts(), job);
  CHECK(s.frames_skipped == 2);
  CHECK(s.frames_done == 3);
  // A truncated output is not "existing": it is redone.
  const auto matte5 = (clip / "Output" / "Matte" / "plate_0005.exr").string();
  std::filesystem::resize_file(matte5, 100);
  s = run_inference(engine_opts(), job);
  CHECK(s.frames_done == 1);
  CHECK(io::readable_output(matte5));
  CHECK_THROWS_WITH(io::parse_exr_compression("lzma"), Contains("pxr24"));
  job.frames = "3-1";
  CHECK_THROWS_WITH(run_inference(engine_opts(), job), Contains("--frames '3-1'"));
  fs::remove_all(root);
}

TEST_CASE("--frames past the clip, or on a sequence numbered from 1001, warns", "[pipeline]") {
  // --frames counts positions: on frames 1001-1005, '2-9' keys positions 2-5 (files 1002-1005)
  // and used to say nothing of either the clipped range or the numbering.
  const auto root = ck_test::temp_dir("pipe_positions");
  const auto clip = make_clip(root, "a", 5, 64, 36);
  for (const char* sub : {"Input", "AlphaHint"})
    for (const auto& e : std::vector<fs::directory_entry>(fs::directory_iterator(clip / sub), {})) {
      auto name = e.path().filename().string();
      const auto at = name.find("_000");
      if (at != std::string::npos) fs::rename(e.path(), e.path().parent_path() / name.replace(at, 4, "_100"));
    }
  InferenceOptions job;
  job.paths = {clip.string()};
  job.frames = "2-9";
  std::vector<std::string> warnings;
  const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
    if (e.kind == PipelineEvent::Kind::Warning) warnings.push_back(e.message);
  });
  CHECK(s.frames_done == 4);
  CHECK(fs::exists(clip / "Output" / "Matte" / "plate_1002.exr"));
  auto said = [&](const std::string& text) {
    return std::any_of(warnings.begin(), warnings.end(), [&](const std::string& w) { return w.find(text) != std::string::npos; });
  };
  CHECK(said("reaches position 9, but the clip has 5 frames"));
  CHECK(said("position 2 is plate_1002"));
  // Positions that are the numbers: no word about numbering.
  warnings.clear();
  const auto plain = make_clip(root, "b", 3, 64, 36);
  job.paths = {plain.string()};
  job.frames = "2";
  run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
    if (e.kind == PipelineEvent::Kind::Warning) warnings.push_back(e.message);
  });
  CHECK_FALSE(said("counts positions"));
  CHECK_FALSE(said("reaches position"));
}

TEST_CASE("only the folders of the outputs asked for are made", "[pipeline]") {
  const auto root = ck_test::temp_dir("pipe_folders");
  const auto clip = make_clip(root, "a", 1, 64, 36);
  InferenceOptions job;
  job.paths = {clip.string()};
  job.fg = job.processed = job.comp = false;  // --outputs matte
  CHECK(run_inference(engine_opts(), job).frames_done == 1);
  CHECK(fs::exists(clip / "Output" / "Matte" / "plate_0001.exr"));
  for (const char* d : {"FG", "Processed", "Comp"}) {
    INFO(d);
    CHECK_FALSE(fs::exists(clip / "Output" / d));
  }
}

TEST_CASE("bad inputs: clear errors, nothing partial", "[pipeline]") {
  const auto root = ck_test::temp_dir("pipe_errors");
  InferenceOptions job;

  SECTION("corrupt EXR stops the job after the good frames are written") {
    const auto clip = make_clip(root, "c", 3);
    std::ofstream(clip / "Input" / "plate_0002.exr", std::ios::trunc) << "not an exr";
    job.paths = {clip.string()};
    job.read_workers = 1;
    std::vector<std::string> errors;
    const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
      if (e.kind == PipelineEvent::Kind::FrameFailed) errors.push_back(e.message);
    });
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Contains("plate_0002.exr") && Contains("cannot read EXR"));
    CHECK(s.frames_failed == 1);
    CHECK(fs::exists(clip / "Output" / "Matte" / "plate_0001.exr"));
    CHECK(temp_files(clip) == 0);
  }
  SECTION("truncated PNG hint is skipped with --on-error skip") {
    const auto clip = make_clip(root, "t", 3);
    const auto hint = (clip / "AlphaHint" / "hint_0003.png").string();
    std::filesystem::resize_file(hint, 60);
    job.paths = {clip.string()};
    job.on_error = OnError::Skip;
    const auto s = run_inference(engine_opts(), job);
    CHECK(s.frames_done == 2);
    CHECK(s.frames_failed == 1);
    REQUIRE(s.failures.size() == 1);
    CHECK_THAT(s.failures[0], Contains("hint_0003.png") && Contains("cannot decode"));
    CHECK_FALSE(fs::exists(clip / "Output" / "Matte" / "plate_0003.exr"));
  }
  SECTION("missing hint frame: counts named") {
    const auto clip = make_clip(root, "m", 3);
    fs::remove(clip / "AlphaHint" / "hint_0003.png");
    job.paths = {clip.string()};
    CHECK_THROWS_AS(run_inference(engine_opts(), job), IoError);
    CHECK_THROWS_WITH(run_inference(engine_opts(), job), Contains("Input has 3 frames but AlphaHint has 2"));
    job.allow_mismatch = true;
    CHECK(run_inference(engine_opts(), job).frames_done == 2);
  }
  SECTION("unwritable output folder") {
    const auto clip = make_clip(root, "u", 1);
    std::ofstream(clip / "Output") << "a file where the Output folder should be";
    job.paths = {clip.string()};
    CHECK_THROWS_AS(run_inference(engine_opts(), job), IoError);
    CHECK_THROWS_WITH(run_inference(engine_opts(), job), Contains("Output") && Contains("cannot be created"));
  }
  SECTION("NaN pixels are reported and zeroed") {
    const auto clip = make_clip(root, "n", 1);
    auto plate = make_plate(320, 180, 0);
    plate.pixels[100] = std::nanf("");
    plate.pixels[200] = INFINITY;
    io::write_exr((clip / "Input" / "plate_0001.exr").string(), plate, "RGB", io::ExrCompression::Zip);
    job.paths = {clip.string()};
    job.color = ColorSpace::Linear;  // no "EXR keyed as sRGB" warning: only the NaN one
    std::vector<std::string> warnings;
    const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
      if (e.kind == PipelineEvent::Kind::Warning) warnings.push_back(e.message);
    });
    CHECK(s.frames_done == 1);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Contains("2 NaN/Inf"));
    for (float v : io::read_image((clip / "Output" / "Matte" / "plate_0001.exr").string()).pixels)
      REQUIRE(std::isfinite(v));
  }
  SECTION("NaN pixels in a hint are reported naming the hint file, not the plate") {
    const auto clip = make_clip(root, "nh", 1);
    Image hint = io::read_image((clip / "AlphaHint" / "hint_0001.png").string());
    hint.pixels[7] = std::nanf("");
    const auto exr = clip / "AlphaHint" / "hint_0001.exr";
    io::write_exr(exr.string(), hint, std::string(static_cast<size_t>(hint.channels), 'Y'),
                  io::ExrCompression::Zip);
    fs::remove(clip / "AlphaHint" / "hint_0001.png");
    job.paths = {clip.string()};
    job.color = ColorSpace::Linear;
    std::vector<std::string> warnings;
    const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
      if (e.kind == PipelineEvent::Kind::Warning) warnings.push_back(e.message);
    });
    CHECK(s.frames_done == 1);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Contains(exr.string() + ": 1 NaN/Inf samples in the hint"));
  }
  SECTION("plate and hint of different aspect") {
    const auto clip = make_clip(root, "a", 1);
    write_hint_png16((clip / "AlphaHint" / "hint_0001.png").string(), 100, 100, 0);
    job.paths = {clip.string()};
    std::string err;
    run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
      if (e.kind == PipelineEvent::Kind::FrameFailed) err = e.message;
    });
    CHECK_THAT(err, Contains("different aspect"));
  }
  SECTION("a plate whose header declares another shape than its hint is refused before decoding") {
    // 29 bytes of PNG header declaring 16000 x 16000 (under --max-pixels): decoding it would
    // take tens of seconds and gigabytes, then fail; the shapes are told from the headers.
    const auto clip = make_clip(root, "hdr", 1);
    fs::remove(clip / "Input" / "plate_0001.exr");
    write_png_header(clip / "Input" / "plate_0001.png", 16000, 16000, 2);
    job.paths = {clip.string()};
    std::string err;
    run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
      if (e.kind == PipelineEvent::Kind::FrameFailed) err = e.message;
    });
    CHECK_THAT(err, Contains("plate_0001.png") && Contains("16000x16000") && Contains("320x180") &&
                        Contains("before decoding"));
  }
  SECTION("a plate whose header declares another shape than its hint video is refused before decoding") {
    // Image plates, an AlphaHint.avi: the plate's header against the video's frame size. The
    // other frame is still keyed (the failed one was its own file, not a broken stream) and
    // the hint video stays paired (frame 2 is keyed with hint frame 2).
    const auto clip = make_clip(root, "hv", 2);
    fs::remove_all(clip / "AlphaHint");
    cv::VideoWriter hv((clip / "AlphaHint.avi").string(), cv::CAP_FFMPEG,
                       cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 24, cv::Size(160, 90));
    REQUIRE(hv.isOpened());
    for (int f = 0; f < 2; ++f) hv.write(cv::Mat(90, 160, CV_8UC3, cv::Scalar::all(255 * f)));
    hv.release();
    fs::remove(clip / "Input" / "plate_0001.exr");
    write_png_header(clip / "Input" / "plate_0001.png", 16000, 16000, 2);
    job.paths = {clip.string()};
    job.on_error = OnError::Skip;
    std::vector<std::string> errs;
    const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
      if (e.kind == PipelineEvent::Kind::FrameFailed) errs.push_back(e.message);
    });
    REQUIRE(errs.size() == 1);
    CHECK_THAT(errs[0], Contains("plate_0001.png") && Contains("16000x16000") && Contains("160x90") &&
                            Contains("before decoding"));
    CHECK(s.frames_failed == 1);
    CHECK(s.frames_done == 1);
    // The hint video stayed paired: plate 2's matte is the one it gets when plate 1 is fine
    // (hint frame 1 is black, frame 2 white: keyed with the wrong one, the matte differs).
    const auto m_after_failure = io::read_image((clip / "Output" / "Matte" / "plate_0002.exr").string());
    fs::remove(clip / "Input" / "plate_0001.png");
    io::write_exr((clip / "Input" / "plate_0001.exr").string(), io::read_image((clip / "Input" / "plate_0002.exr").string()),
                  "RGB", io::ExrCompression::Zip);
    fs::remove_all(clip / "Output");
    CHECK(run_inference(engine_opts(), job).frames_done == 2);
    const auto m = io::read_image((clip / "Output" / "Matte" / "plate_0002.exr").string());
    REQUIRE(m.pixels.size() == m_after_failure.pixels.size());
    double diff = 0;
    for (size_t i = 0; i < m.pixels.size(); ++i)
      diff = std::max(diff, static_cast<double>(std::fabs(m.pixels[i] - m_after_failure.pixels[i])));
    CHECK(diff == 0.0);
  }
  SECTION("no clips") {
    job.paths = {root.string()};
    CHECK_THROWS_WITH(run_inference(engine_opts(), job), Contains("no clips found"));
  }
  fs::remove_all(root);
}

TEST_CASE("video clips and half-size hints", "[pipeline]") {
  const auto root = ck_test::temp_dir("pipe_video");
  const auto clip = root / "v";
  fs::create_directories(clip);
  cv::VideoWriter plate((clip / "Input.avi").string(), cv::CAP_FFMPEG,
                        cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 24, cv::Size(256, 144));
  cv::VideoWriter hint((clip / "AlphaHint.avi").string(), cv::CAP_FFMPEG,
                       cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 24, cv::Size(128, 72));
  REQUIRE(plate.isOpened());
  REQUIRE(hint.isOpened());
  for (int f = 0; f < 3; ++f) {
    cv::Mat p(144, 256, CV_8UC3, cv::Scalar(20, 200, 30)), h(72, 128, CV_8UC3, cv::Scalar(0, 0, 0));
    cv::circle(p, {100 + 5 * f, 72}, 40, cv::Scalar(60, 90, 180), -1);
    cv::circle(h, {50 + 2 * f, 36}, 20, cv::Scalar(255, 255, 255), -1);
    plate.write(p);
    hint.write(h);
  }
  plate.release();
  hint.release();
  InferenceOptions job;
  job.paths = {clip.string()};
  job.frames = "1,3";
  std::vector<std::string> warnings;
  const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
    if (e.kind == PipelineEvent::Kind::Warning) warnings.push_back(e.message);
  });
  CHECK(s.frames_done == 2);
  // said once for the clip, not per frame
  CHECK(std::count_if(warnings.begin(), warnings.end(), [](const std::string& w) {
          return w.find("hints are 128x72, plates 256x144") != std::string::npos;
        }) == 1);
  CHECK(fs::exists(clip / "Output" / "Comp" / "00000.png"));
  CHECK(fs::exists(clip / "Output" / "Processed" / "00002.exr"));
  CHECK_FALSE(fs::exists(clip / "Output" / "Matte" / "00001.exr"));
  const auto m = io::read_image((clip / "Output" / "Matte" / "00002.exr").string());
  CHECK((m.width == 256 && m.height == 144 && m.channels == 1));
  fs::remove_all(root);
}

TEST_CASE("cancel (SIGINT / SIGTERM) finishes frames in flight and leaves nothing partial",
          "[pipeline]") {
  const auto root = ck_test::temp_dir("pipe_cancel");
  const auto clip = make_clip(root, "x", 8);
  std::atomic<bool> cancel{false};
  InferenceOptions job;
  job.paths = {clip.string()};
  job.cancel = &cancel;
  std::vector<std::string> kinds;
  const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
    kinds.push_back(to_string(e.kind));
    if (e.kind == PipelineEvent::Kind::FrameDone) cancel = true;  // as the signal handler does
  });
  CHECK(s.interrupted);
  CHECK(s.frames_done >= 1);
  CHECK(s.frames_done < 8);
  CHECK(s.frames_failed == 0);
  CHECK(kinds.back() == "job_done");
  CHECK(temp_files(clip) == 0);
  // Every frame reported done has all four outputs, complete.
  size_t complete = 0;
  for (const auto& e : fs::directory_iterator(clip / "Output" / "Matte")) {
    const auto stem = e.path().stem().string();
    CHECK(io::readable_output(e.path().string()));
    CHECK(io::readable_output((clip / "Output" / "Processed" / (stem + ".exr")).string()));
    CHECK(io::readable_output((clip / "Output" / "Comp" / (stem + ".png")).string()));
    ++complete;
  }
  CHECK(complete == static_cast<size_t>(s.frames_done));
  // A rerun with --skip-existing finishes the job.
  job.cancel = nullptr;
  job.skip_existing = true;
  const auto r = run_inference(engine_opts(), job);
  CHECK(r.frames_done + r.frames_skipped == 8);
  fs::remove_all(root);
}

TEST_CASE("an on_event callback that throws stops the job with an error, not the process",
          "[pipeline]") {
  const auto root = ck_test::temp_dir("pipe_throwing_cb");
  const auto clip = make_clip(root, "x", 8);
  InferenceOptions job;
  job.paths = {clip.string()};
  job.write_workers = 2;  // frame_done comes from two writer threads
  std::vector<std::string> kinds;
  int done = 0;
  auto throwing = [&](const PipelineEvent& e) {
    kinds.push_back(to_string(e.kind));
    if (e.kind == PipelineEvent::Kind::FrameDone && ++done == 2) throw std::runtime_error("host callback failed");
  };
  // Without the fix the exception escapes a writer std::thread: std::terminate, and this
  // test binary dies instead of reaching the checks below.
  CHECK_THROWS_MATCHES(run_inference(engine_opts(), job, throwing), Error,
                       Catch::Matchers::Message(
                           "on_event callback threw on frame_done: host callback failed"));
  // The callback is not called again once it threw (no job_done after the failure).
  CHECK(done == 2);
  CHECK(kinds.back() == "frame_done");
  CHECK(std::count(kinds.begin(), kinds.end(), "job_done") == 0);
  // Nothing half-written: no temporary files, and every matte written is complete.
  CHECK(temp_files(clip) == 0);
  size_t written = 0;
  for (const auto& e : fs::directory_iterator(clip / "Output" / "Matte")) {
    CHECK(io::readable_output(e.path().string()));
    ++written;
  }
  CHECK(written >= 2);
  CHECK(written < 8);  // the job stopped

  SECTION("on job_started: no frame is keyed") {
    fs::remove_all(clip / "Output");
    CHECK_THROWS_MATCHES(
        run_inference(engine_opts(), job,
                      [](const PipelineEvent& e) {
                        if (e.kind == PipelineEvent::Kind::JobStarted) throw 42;  // not a std::exception
                      }),
        Error, Catch::Matchers::Message("on_event callback threw on job_started: an exception that is "
                                        "not a std::exception"));
    size_t mattes = 0;
    if (fs::exists(clip / "Output" / "Matte"))
      for ([[maybe_unused]] const auto& e : fs::directory_iterator(clip / "Output" / "Matte")) ++mattes;
    CHECK(mattes == 0);
    CHECK(temp_files(clip) == 0);
  }
  fs::remove_all(root);
}

TEST_CASE("EXR plates are keyed as sRGB by default, with a warning; --color auto is linear",
          "[pipeline]") {
  const auto root = ck_test::temp_dir("pipe_color");
  const auto clip = make_clip(root, "c", 1);
  InferenceOptions job;
  job.paths = {clip.string()};
  std::vector<std::string> warnings, started;
  auto on = [&](const PipelineEvent& e) {
    if (e.kind == PipelineEvent::Kind::Warning) warnings.push_back(e.message);
    if (e.kind == PipelineEvent::Kind::ClipStarted) started.push_back(e.message);
  };
  run_inference(engine_opts(), job, on);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Contains("keyed as sRGB") && Contains("--linear"));
  const auto srgb = io::read_image((clip / "Output" / "Matte" / "plate_0001.exr").string());
  job.color = ColorSpace::Auto;
  warnings.clear();
  run_inference(engine_opts(), job, on);
  CHECK(warnings.empty());
  CHECK_THAT(started.back(), Contains("linear input"));
  const auto lin = io::read_image((clip / "Output" / "Matte" / "plate_0001.exr").string());
  CHECK(lin.pixels != srgb.pixels);  // the colour space reached the model
  fs::remove_all(root);
}

namespace {
InferenceOptions one_clip(const fs::path& clip) {
  InferenceOptions job;
  job.paths = {clip.string()};
  job.color = ColorSpace::Linear;
  return job;
}
void truncate_file(const fs::path& p, double keep) {
  const auto n = fs::file_size(p);
  fs::resize_file(p, static_cast<uintmax_t>(static_cast<double>(n) * keep));
}
}  // namespace

TEST_CASE("--on-error stop writes every frame before the failing one", "[pipeline]") {
  // Frame 3 of 5 is a truncated PNG: it fails fast, while frames 1-2 are still being read
  // by the other reader. Earlier runs lost them; several runs cover the race.
  const auto root = ck_test::temp_dir("stop_before");
  for (int run = 0; run < 4; ++run) {
    const auto clip = make_clip(root, std::string("s").append(std::to_string(run)), 5);
    fs::remove(clip / "AlphaHint" / "hint_0003.png");
    std::ofstream(clip / "AlphaHint" / "hint_0003.png") << "\x89PNG\r\n\x1a\n broken";
    auto job = one_clip(clip);
    job.read_workers = 2;
    job.on_error = OnError::Stop;
    const auto s = run_inference(engine_opts(), job);
    INFO("run " << run);
    CHECK(s.frames_failed == 1);
    CHECK(fs::exists(clip / "Output" / "Matte" / "plate_0001.exr"));
    CHECK(fs::exists(clip / "Output" / "Matte" / "plate_0002.exr"));
    CHECK_FALSE(fs::exists(clip / "Output" / "Matte" / "plate_0003.exr"));
  }
  fs::remove_all(root);
}

TEST_CASE("--skip-existing decodes outputs fully: a truncated EXR is keyed again", "[pipeline]") {
  const auto root = ck_test::temp_dir("skip_trunc");
  const auto clip = make_clip(root, "t", 3);
  auto job = one_clip(clip);
  REQUIRE(run_inference(engine_opts(), job).frames_done == 3);
  const auto matte = clip / "Output" / "Matte" / "plate_0002.exr";
  const auto full = io::read_image(matte.string());
  truncate_file(matte, 0.6);  // the offset table survives: isComplete() alone would pass it
  CHECK_FALSE(io::readable_output(matte.string()));
  job.skip_existing = true;
  const auto s = run_inference(engine_opts(), job);
  CHECK(s.frames_skipped == 2);
  CHECK(s.frames_done == 1);
  CHECK(io::readable_output(matte.string()));
  CHECK(io::read_image(matte.string()).pixels == full.pixels);
  fs::remove_all(root);
}

TEST_CASE("earlier versions' temporary files of killed runs are removed, a live process's are kept",
          "[pipeline]") {
  const auto root = ck_test::temp_dir("stale_tmp");
  const auto clip = make_clip(root, "k", 1);
  const auto fg = clip / "Output" / "FG";
  fs::create_directories(fg);
  // A dead process: a child that has exited. A live one: this process's parent (pid 1 may
  // not be ours to signal in a container, but it is alive either way).
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  // Names without a lock (.ck-tmp.<host>.<pid>.<n>), as earlier versions wrote them: by pid.
  const auto host_part = ".ck-tmp." + io::temp_host_tag() + ".";
  const auto dead = fg / (host_part + std::to_string(child) + ".7");
  const auto live = fg / (host_part + std::to_string(::getppid()) + ".7");
  const auto other_host = fg / ".ck-tmp.some-other-host.12345.0";
  for (const auto& p : {dead, live, other_host}) std::ofstream(p) << "partial";
  std::vector<std::string> warnings;
  run_inference(engine_opts(), one_clip(clip), [&](const PipelineEvent& e) {
    if (e.kind == PipelineEvent::Kind::Warning) warnings.push_back(e.message);
  });
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(live));
  CHECK(fs::exists(other_host));
  CHECK(std::any_of(warnings.begin(), warnings.end(),
                    [](const std::string& w) { return w.find("left by a killed run") != std::string::npos; }));
  fs::remove_all(root);
}

TEST_CASE("temporary file names are recognised strictly; others are left alone", "[pipeline]") {
  // What this engine writes (.ck-tmp-l.<host>.<pid>.<n>, videos with the container's
  // extension, ffmpeg's log) and earlier versions wrote (.ck-tmp.<host>.<pid>.<n>) parses.
  const auto dir = ck_test::temp_dir("tmp_own");
  std::vector<std::string> own;
  for (const char* suffix : {"", ".mp4", ".mov", ".log"}) {
    io::TempFile t((dir / "y.exr").string(), suffix);
    own.push_back(fs::path(t.path()).filename().string());
  }
  CHECK(fs::is_empty(dir));  // each removed when not committed
  fs::remove_all(dir);
  for (const auto& n : own) {
    INFO(n);
    REQUIRE(io::parse_temp_name(n).has_value());
    CHECK(io::parse_temp_name(n)->locked);
    CHECK(io::parse_temp_name(n)->pid == ::getpid());
  }
  for (const char* n : {".ck-tmp.render-07.4242.0", ".ck-tmp.h.1.12", ".ck-tmp.h.1.12.mp4"}) {
    INFO(n);
    REQUIRE(io::parse_temp_name(n).has_value());
    CHECK_FALSE(io::parse_temp_name(n)->locked);
  }
  CHECK(io::parse_temp_name(".ck-tmp.render-07.4242.0")->pid == 4242);
  // Near misses: never parsed (before, "abc" as a pid made every later run fail with stol).
  for (const char* n : {".ck-tmp.vm.abc.0", ".ck-tmp.vm.12.x", ".ck-tmp.vm.1.2.3.4", ".ck-tmp..1.2",
                        ".ck-tmp.vm.1234567890.0", ".ck-tmp.vm.-1.0", ".ck-tmp.vm.1.", ".ck-tmp.vm.1.2.",
                        ".ck-tmp.h_st.1.2", ".ck-tmp.vm.1.2.toolongext", ".ck-tmpX.vm.1.2", "plate.exr",
                        ".ck-tmp-l.vm.abc.0", ".ck-tmp-l..1.2", ".ck-tmp-x.vm.1.2"}) {
    INFO(n);
    CHECK_FALSE(io::parse_temp_name(n).has_value());
  }
  const auto root = ck_test::temp_dir("tmp_names");
  std::ofstream(root / ".ck-tmp.vm.abc.0") << "someone's";
  const auto r = io::remove_stale_temp_files(root.string());
  CHECK(r.removed == 0);
  REQUIRE(r.unrecognised.size() == 1);
  CHECK(r.unrecognised[0] == ".ck-tmp.vm.abc.0");
  CHECK(fs::exists(root / ".ck-tmp.vm.abc.0"));
  fs::remove_all(root);
}

TEST_CASE("a live writer's temporary file is kept by its lock, whatever its pid says", "[pipeline]") {
  // Two runs in two PID namespaces on one host share an output folder: the other writer's
  // pid means nothing here (before: a "dead" pid made the cleanup delete a live writer's
  // file). The lock decides: held -> kept, free -> removed.
  const auto root = ck_test::temp_dir("tmp_lock");
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // a pid that is dead here (and could be alive elsewhere)
  const auto name = [&](pid_t pid, int n) {
    return root / (".ck-tmp-l." + io::temp_host_tag() + "." + std::to_string(pid) + "." + std::to_string(n));
  };
  const auto live_dead_pid = name(child, 1), free_live_pid = name(::getppid(), 2), fifo = name(child, 3);
  for (const auto& p : {live_dead_pid, free_live_pid}) std::ofstream(p) << "partial";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);  // never opened for reading: no hang
  // The writer's lock, on its own open file (flock conflicts between open files even within
  // one process, as between two containers).
  const int fd = ::open(live_dead_pid.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  auto r = io::remove_stale_temp_files(root.string());
  CHECK(r.removed == 1);
  CHECK(fs::exists(live_dead_pid));
  CHECK_FALSE(fs::exists(free_live_pid));
  CHECK(fs::exists(fifo));
  CHECK_FALSE(r.locks_refused);
  ::close(fd);  // the writer is gone
  r = io::remove_stale_temp_files(root.string());
  CHECK(r.removed == 1);
  CHECK_FALSE(fs::exists(live_dead_pid));
  // A TempFile holds its lock while it lives: a cleanup meanwhile keeps it.
  {
    io::TempFile t((root / "frame.exr").string());
    std::ofstream(t.path()) << "being written";
    CHECK(io::remove_stale_temp_files(root.string()).removed == 0);
    CHECK(fs::exists(t.path()));
    t.commit((root / "frame.exr").string());
  }
  CHECK(ck_test::read_file((root / "frame.exr").string()) == "being written");
  fs::remove_all(root);
}

TEST_CASE("frame names up to the filesystem's limit are written", "[pipeline]") {
  const auto root = ck_test::temp_dir("longname");
  const auto clip = make_clip(root, "l", 1);
  const std::string stem(250, 'n');  // + ".exr" = 254 bytes, the limit is 255
  fs::rename(clip / "Input" / "plate_0001.exr", clip / "Input" / (stem + ".exr"));
  const auto s = run_inference(engine_opts(), one_clip(clip));
  CHECK(s.frames_done == 1);
  CHECK(fs::exists(clip / "Output" / "Matte" / (stem + ".exr")));
  CHECK(fs::exists(clip / "Output" / "Comp" / (stem + ".png")));
  fs::remove_all(root);
}

TEST_CASE("odd inputs: frame ranges, broken links, oversized headers, colour hints", "[pipeline]") {
  const auto root = ck_test::temp_dir("odd");
  SECTION("a frame range past the end names the clip") {
    const auto clip = make_clip(root, "r", 3);
    auto job = one_clip(clip);
    job.frames = "99-100";
    CHECK_THROWS_AS(run_inference(engine_opts(), job), ConfigError);
    CHECK_THROWS_WITH(run_inference(engine_opts(), job), Contains("no frame of clip 'r'") && Contains("3 frames"));
  }
  SECTION("a dangling symlink frame is one failed frame, named, not skipped or the clip's end") {
    const auto clip = make_clip(root, "b", 3);
    fs::remove(clip / "Input" / "plate_0002.exr");
    fs::create_symlink(root / "nowhere.exr", clip / "Input" / "plate_0002.exr");
    auto job = one_clip(clip);
    job.on_error = OnError::Skip;
    const auto s = run_inference(engine_opts(), job);
    CHECK(s.frames_total == 3);
    CHECK(s.frames_done == 2);
    REQUIRE(s.frames_failed == 1);
    CHECK_THAT(s.failures.at(0), Contains("plate_0002.exr") && Contains("broken symbolic link"));
    CHECK(fs::exists(clip / "Output" / "Matte" / "plate_0003.exr"));
  }
  SECTION("headers declaring too many pixels are refused before decoding") {
    // A PNG header claiming 100000 x 100000 (8-bit RGBA: 40 GB decoded).
    const auto png = root / "huge.png";
    write_png_header(png, 100000, 100000, 6);
    CHECK_THROWS_AS(io::read_image(png.string()), IoError);
    CHECK_THROWS_WITH(io::read_image(png.string()),
                      Contains("huge.png") && Contains("100000x100000") && Contains("--max-pixels"));
    // A thin EXR: few pixels, but one chunk (16 lines of PXR24, all channels) unpacks to
    // 1M x 16 x 3 x 2 = 96 MB, which Imf::InputFile would allocate on opening it (a fuzz
    // finding). Refused from the header under a 4096^2 limit; read under the default.
    const auto thin = root / "thin.exr";
    Image strip;
    strip.width = 1000000;
    strip.height = 1;
    strip.channels = 3;
    strip.pixels.assign(size_t{3000000}, 0.25f);
    io::write_exr(thin.string(), strip, "RGB", io::ExrCompression::Pxr24);
    CHECK_THROWS_WITH(io::read_image(thin.string(), int64_t{4096} * 4096),
                      Contains("thin.exr") && Contains("chunk") && Contains("--max-pixels"));
    CHECK_FALSE(io::readable_output(thin.string(), int64_t{4096} * 4096));
    CHECK(io::read_image(thin.string()).width == 1000000);
    // An EXR, through the pipeline's own limit.
    const auto clip = make_clip(root, "m", 2);
    auto job = one_clip(clip);
    job.max_pixels = 100 * 100;  // the plates are 320 x 180
    job.on_error = OnError::Skip;
    std::vector<std::string> errors;
    const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
      if (e.kind == PipelineEvent::Kind::FrameFailed) errors.push_back(e.message);
    });
    CHECK(s.frames_failed == 2);
    REQUIRE_FALSE(errors.empty());
    CHECK_THAT(errors[0], Contains("plate_000") && Contains("320x180") && Contains("limit of 10000"));
  }
  SECTION("a matte stored in a colour channel of an RGB hint is read, with a warning") {
    const auto clip = make_clip(root, "c", 1);
    auto grey = engine_opts();
    const auto ref = run_inference(grey, one_clip(clip));
    REQUIRE(ref.frames_done == 1);
    const auto want = io::read_image((clip / "Output" / "Matte" / "plate_0001.exr").string());
    // The same matte in the blue channel only of an RGB PNG (R and G black).
    const auto hint = io::read_image((clip / "AlphaHint" / "hint_0001.png").string());
    Image rgb;
    rgb.width = hint.width;
    rgb.height = hint.height;
    rgb.channels = 3;
    rgb.pixels.assign(static_cast<size_t>(hint.width) * hint.height * 3, 0.f);
    for (size_t i = 0; i < hint.pixels.size(); ++i) rgb.pixels[i * 3 + 2] = hint.pixels[i];
    fs::remove(clip / "AlphaHint" / "hint_0001.png");
    io::write_image16((clip / "AlphaHint" / "hint_0001.png").string(), rgb);
    std::vector<std::string> warnings;
    const auto s = run_inference(grey, one_clip(clip), [&](const PipelineEvent& e) {
      if (e.kind == PipelineEvent::Kind::Warning) warnings.push_back(e.message);
    });
    CHECK(s.frames_done == 1);
    CHECK(std::any_of(warnings.begin(), warnings.end(),
                      [](const std::string& w) { return w.find("max(R, G, B)") != std::string::npos; }));
    const auto got = io::read_image((clip / "Output" / "Matte" / "plate_0001.exr").string());
    REQUIRE(got.pixels.size() == want.pixels.size());
    double worst = 0;
    for (size_t i = 0; i < got.pixels.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(got.pixels[i] - want.pixels[i])));
    CHECK(worst < 1e-3);  // same matte as the grey hint (half-float outputs)
  }
  fs::remove_all(root);
}

namespace {
/// A float EXR with the given channels (each filled with base + 0.01 * pixel index + channel
/// offset), display window `disp` and data window `data`, as a renderer writes it.
void write_exr_windows(const std::string& path, const Imath::Box2i& disp, const Imath::Box2i& data,
                       const std::vector<std::pair<std::string, float>>& channels) {
  const int w = data.max.x - data.min.x + 1, h = data.max.y - data.min.y + 1;
  Imf::Header header(disp, data);
  for (const auto& c : channels) header.channels().insert(c.first, Imf::Channel(Imf::FLOAT));
  std::vector<std::vector<float>> px(channels.size(), std::vector<float>(static_cast<size_t>(w) * h));
  Imf::FrameBuffer fb;
  for (size_t c = 0; c < channels.size(); ++c) {
    for (size_t i = 0; i < px[c].size(); ++i) px[c][i] = channels[c].second + 0.01f * static_cast<float>(i);
    fb.insert(channels[c].first, Imf::Slice::Make(Imf::FLOAT, px[c].data(), data, sizeof(float), sizeof(float) * w));
  }
  Imf::OutputFile out(path.c_str(), header);
  out.setFrameBuffer(fb);
  out.writePixels(h);
}
}  // namespace

TEST_CASE("an EXR is read in its display window: data offset, overscan and far origins", "[pipeline]") {
  // Renders with overscan or crop windows. The frame is the display window, as compositing
  // apps read it; keying the data window as the frame put an offset plate's matte off by
  // its offset in comp. The reader offsets its buffers through Imf::Slice::Make, not
  // pointer arithmetic, so a far-off origin is fine.
  const auto root = ck_test::temp_dir("exr_window");
  using B = Imath::Box2i;
  using V = Imath::V2i;
  struct Case {
    const char* name;
    B disp, data;
  };
  for (const Case& c : {Case{"same", B(V(0, 0), V(4, 2)), B(V(0, 0), V(4, 2))},
                       Case{"far", B(V(100000000, -100000000), V(100000004, -99999998)),
                            B(V(100000000, -100000000), V(100000004, -99999998))},
                       Case{"offset", B(V(0, 0), V(9, 5)), B(V(3, 2), V(7, 4))},
                       Case{"overscan", B(V(0, 0), V(4, 2)), B(V(-2, -1), V(6, 3))},
                       Case{"outside", B(V(0, 0), V(4, 2)), B(V(-16, 7), V(-12, 9))}}) {
    INFO(c.name);
    const auto path = (root / (std::string(c.name) + ".exr")).string();
    write_exr_windows(path, c.disp, c.data, {{"Y", 0.5f}});
    const auto im = io::read_image(path);
    const int dw = c.disp.max.x - c.disp.min.x + 1, dh = c.disp.max.y - c.disp.min.y + 1;
    const int w = c.data.max.x - c.data.min.x + 1;
    REQUIRE((im.width == dw && im.height == dh && im.channels == 1));
    const auto probed = io::probe_image_size(path);
    REQUIRE(probed);
    CHECK((probed->width == dw && probed->height == dh));  // the pairing and budget see the same frame
    for (int y = 0; y < dh; ++y)
      for (int x = 0; x < dw; ++x) {
        const int ax = x + c.disp.min.x, ay = y + c.disp.min.y;  // absolute pixel position
        const bool has = ax >= c.data.min.x && ax <= c.data.max.x && ay >= c.data.min.y && ay <= c.data.max.y;
        const float want = has ? 0.5f + 0.01f * static_cast<float>((ay - c.data.min.y) * w + (ax - c.data.min.x)) : 0.f;
        INFO("x " << x << " y " << y);
        CHECK(im.pixels[static_cast<size_t>(y) * dw + x] == want);
      }
    CHECK(io::readable_output(path));
  }
}

TEST_CASE("an EXR plate's RGB is found in a layer or in lower case; several unnamed layers are refused",
          "[pipeline]") {
  const auto root = ck_test::temp_dir("exr_layers");
  const Imath::Box2i win(Imath::V2i(0, 0), Imath::V2i(3, 2));
  auto read = [&](const std::string& name, const std::vector<std::pair<std::string, float>>& ch) {
    const auto path = (root / (name + ".exr")).string();
    write_exr_windows(path, win, win, ch);
    return io::read_image(path);
  };
  // Channel bases tell which were read: R 0.1, G 0.2, B 0.3, A 0.4; others 5+.
  auto rgb_read = [](const Image& im, int channels) {
    INFO("channels " << im.channels);
    REQUIRE(im.channels == channels);
    for (int c = 0; c < channels; ++c) CHECK(std::fabs(im.pixels[static_cast<size_t>(c)] - 0.1f * static_cast<float>(c + 1)) < 1e-6f);
  };
  rgb_read(read("top", {{"R", 0.1f}, {"G", 0.2f}, {"B", 0.3f}, {"diffuse.R", 5.f}, {"diffuse.G", 5.f}, {"diffuse.B", 5.f}}), 3);
  rgb_read(read("lower", {{"r", 0.1f}, {"g", 0.2f}, {"b", 0.3f}, {"a", 0.4f}}), 4);
  rgb_read(read("words", {{"red", 0.1f}, {"green", 0.2f}, {"blue", 0.3f}}), 3);
  rgb_read(read("layer", {{"beauty.R", 0.1f}, {"beauty.G", 0.2f}, {"beauty.B", 0.3f}, {"depth.Z", 7.f}}), 3);
  rgb_read(read("nested", {{"rl.beauty.R", 0.1f}, {"rl.beauty.G", 0.2f}, {"rl.beauty.B", 0.3f}, {"rl.beauty.A", 0.4f}}), 4);
  rgb_read(read("beauty_wins", {{"diffuse.R", 5.f}, {"diffuse.G", 5.f}, {"diffuse.B", 5.f},
                                {"beauty.R", 0.1f}, {"beauty.G", 0.2f}, {"beauty.B", 0.3f}}), 3);
  // Several layers, none the beauty: which is the plate is not guessed.
  try {
    read("two", {{"diffuse.R", 5.f}, {"diffuse.G", 5.f}, {"diffuse.B", 5.f},
                 {"specular.R", 6.f}, {"specular.G", 6.f}, {"specular.B", 6.f}});
    FAIL("two RGB layers were read without a word");
  } catch (const IoError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("two.exr") && Catch::Matchers::Contains("diffuse") &&
                             Catch::Matchers::Contains("specular"));
  }
  // No RGB at all: the grey / hint cases stay as they were.
  CHECK(read("y", {{"Y", 0.7f}}).channels == 1);
  CHECK(read("mask", {{"mask.A", 0.7f}}).channels == 1);
}

TEST_CASE("every still format the linked OpenCV decodes is a frame, read from a file OpenCV wrote",
          "[pipeline]") {
  const auto& exts = io::frame_extensions();
  // The formats that were dropped silently before (OpenCV 4.6 decodes all of them).
  for (const char* e : {".webp", ".hdr", ".ppm", ".pgm", ".png", ".tif", ".jpg", ".bmp", ".exr"}) {
    INFO(e);
    CHECK(std::find(exts.begin(), exts.end(), e) != exts.end());
  }
  // One published rule: the list in docs/clips.md ("Frames") names every extension this build reads.
  const auto doc = ck_test::read_file(std::string(std::getenv("CK_SOURCE_DIR")) + "/docs/clips.md");
  REQUIRE(doc.find("**Frames**") != std::string::npos);
  const auto rule = doc.substr(doc.find("**Frames**"), 1200);
  for (const auto& e : exts) {
    INFO(e);
    CHECK_THAT(rule, Contains("`" + e + "`"));
  }
  const auto root = ck_test::temp_dir("formats");
  const auto clip = root / "all";
  fs::create_directories(clip / "Input");
  fs::create_directories(clip / "AlphaHint");
  const Image plate = make_plate(160, 90, 0);
  cv::Mat rgb(plate.height, plate.width, CV_32FC3, const_cast<float*>(plate.pixels.data())), bgr, u8, grey;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  bgr.convertTo(u8, CV_8UC3, 255.0);
  cv::cvtColor(u8, grey, cv::COLOR_BGR2GRAY);
  std::vector<std::string> written;
  int k = 0;
  for (const auto& e : exts) {
    if (e == ".exr" || e == ".dpx") continue;  // OpenEXR's; DPX: OpenImageIO's (test_colour_io.cpp)
    const bool fp = e == ".hdr" || e == ".pic" || e == ".pfm";
    const bool one = e == ".pgm" || e == ".pbm";
    char stem[16];
    std::snprintf(stem, sizeof stem, "f%02d", ++k);
    const auto file = (clip / "Input" / (stem + e)).string();
    INFO(file);
    REQUIRE(cv::imwrite(file, fp ? bgr : one ? grey : u8));  // written by OpenCV itself
    // The header probe (decode-bomb guard) reads the size OpenCV wrote.
    const auto size = io::probe_image_size(file);
    REQUIRE(size.has_value());
    CHECK(size->width == 160);
    CHECK(size->height == 90);
    write_hint_png16((clip / "AlphaHint" / (std::string("h") + (stem + 1) + ".png")).string(), 160, 90, 0);
    written.push_back(fs::path(file).filename().string());
  }
  auto job = one_clip(clip);
  std::vector<std::string> failures;
  const auto s = run_inference(engine_opts(), job, [&](const PipelineEvent& e) {
    if (e.kind == PipelineEvent::Kind::FrameFailed) failures.push_back(e.message);
  });
  INFO(failures.size() << " failed, first: " << (failures.empty() ? "" : failures.front()));
  CHECK(s.frames_total == static_cast<int>(written.size()));  // every file found ...
  CHECK(s.frames_done == static_cast<int>(written.size()));   // ... and keyed
  for (const auto& w : written) CHECK(fs::exists(clip / "Output" / "Matte" / (fs::path(w).stem().string() + ".exr")));
  fs::remove_all(root);
}

TEST_CASE("EXRs written on OpenEXR's thread pool are byte-identical; a host's pool size is kept",
          "[pipeline]") {
  const auto dir = ck_test::temp_dir("exr_threads");
  Image im;
  im.width = 1000;
  im.height = 700;
  im.channels = 4;
  im.pixels.resize(static_cast<size_t>(im.width) * im.height * im.channels);
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<float>((i * 2654435761u) % 4099) / 4099.f;
  auto bytes = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const int before = Imf::globalThreadCount();
  Imf::setGlobalThreadCount(0);
  for (auto c : {io::ExrCompression::Pxr24, io::ExrCompression::Zip, io::ExrCompression::Piz})
    io::write_exr((dir / ("serial_" + std::string(io::to_string(c)) + ".exr")).string(), im, "RGBA", c);
  REQUIRE(io::ensure_exr_threads(2) == 2);
  for (auto c : {io::ExrCompression::Pxr24, io::ExrCompression::Zip, io::ExrCompression::Piz}) {
    const auto name = std::string(io::to_string(c)) + ".exr";
    io::write_exr((dir / ("pool_" + name)).string(), im, "RGBA", c);
    INFO(name);
    CHECK(bytes(dir / ("pool_" + name)) == bytes(dir / ("serial_" + name)));
  }
  // A host that sized the pool itself keeps its size.
  Imf::setGlobalThreadCount(3);
  CHECK(io::ensure_exr_threads(2) == 3);
  Imf::setGlobalThreadCount(before);
}
