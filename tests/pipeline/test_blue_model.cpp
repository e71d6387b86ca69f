// The blue-screen model: in one job, the green clip is keyed with the main checkpoint and
// the blue clip with checkpoint_blue, unswapped; each loads once; without a blue model the
// blue clip is keyed swapped around the main one. Two different seeded models stand in for
// the green and blue weights (their outputs differ, so the mattes prove which model ran).
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/hint.h>
#include <corridorkey/job.h>
#include <corridorkey/pipeline.h>
#include <corridorkey/profile.h>

#include <catch2/catch.hpp>

#include "devtools/synthetic_clip.h"
#include "io/image_io.h"
#include "post/postprocess.h"
#include "runtime/model_factory.h"
#include "support/support.h"

#include <cmath>
#include <fstream>
#include <map>

using namespace corridorkey;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

Profile opts(const std::string& checkpoint, const std::string& blue = "") {
  auto o = load_profile("original");
  o.model.device = "cpu";
  o.model.checkpoint = checkpoint;
  o.model.checkpoint_blue = blue;
  return o;
}

InferenceOptions job_for(std::vector<fs::path> clips, const fs::path& out) {
  InferenceOptions job;
  for (const auto& c : clips) job.paths.push_back(c.string());
  job.color = ColorSpace::Linear;  // synthetic plates are scene-linear EXRs
  job.output_root = out.string();
  return job;
}

Image read(const fs::path& p) { return io::read_image(p.string()); }

double max_diff(const Image& a, const Image& b) {
  REQUIRE(a.pixels.size() == b.pixels.size());
  double d = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) d = std::max(d, double(std::fabs(a.pixels[i] - b.pixels[i])));
  return d;
}

struct Run {
  JobSummary summary;
  std::map<std::string, PipelineEvent> clip_started;
  std::vector<std::string> warnings;
};

Run run(const Profile& o, const InferenceOptions& job) {
  Run r;
  r.summary = run_inference(o, job, [&](const PipelineEvent& e) {
    if (e.kind == PipelineEvent::Kind::ClipStarted) r.clip_started[e.clip] = e;
    if (e.kind == PipelineEvent::Kind::Warning) r.warnings.push_back(e.message);
  });
  return r;
}

devtools::SyntheticClip spec(const std::string& screen) {
  devtools::SyntheticClip c;
  c.frames = 2;
  c.soft_edge_px = 2;
  c.screen = screen;
  return c;
}

}  // namespace

TEST_CASE("one job keys its green clip with the main model and its blue clip with the blue one",
          "[model][blue]") {
  const auto root = ck_test::temp_dir("bluemodel");
  const auto green = devtools::write_synthetic_clip(root / "greenclip", spec("green"));
  const auto blue = devtools::write_synthetic_clip(root / "blueclip", spec("blue"));
  const auto main_ck = ck_test::fixture("tiny128.safetensors");
  const auto blue_ck = ck_test::fixture("tiny128_seed1.safetensors");

  const auto loads = corridorkey::detail::checkpoint_loads();
  const auto both = run(opts(main_ck, blue_ck), job_for({green, blue}, root / "both"));
  CHECK(corridorkey::detail::checkpoint_loads() == loads + 2);  // each model once
  REQUIRE(both.summary.frames_done == 4);
  REQUIRE(both.summary.clip_models.size() == 2);
  std::map<std::string, ClipModel> used;
  for (const auto& m : both.summary.clip_models) used[m.clip] = m;
  CHECK(used["greenclip"].checkpoint == main_ck);
  CHECK(used["greenclip"].screen == "green");
  CHECK_FALSE(used["greenclip"].swapped);
  CHECK(used["blueclip"].checkpoint == blue_ck);
  CHECK(used["blueclip"].screen == "blue");
  CHECK_FALSE(used["blueclip"].swapped);
  CHECK(both.clip_started.at("blueclip").checkpoint == blue_ck);
  CHECK(both.clip_started.at("greenclip").checkpoint == main_ck);
  bool said = false;
  for (const auto& w : both.warnings) said |= w.find("blue-screen model " + blue_ck) != std::string::npos;
  CHECK(said);

  // Each clip alone with its own model gives the same files, bit for bit.
  auto blue_alone = opts(blue_ck);
  blue_alone.model.model_screen = Screen::Blue;
  const auto b1 = run(blue_alone, job_for({blue}, root / "blue_alone"));
  CHECK_FALSE(b1.summary.clip_models.front().swapped);
  const auto g1 = run(opts(main_ck), job_for({green}, root / "green_alone"));
  for (const char* out : {"Matte", "FG", "Processed"}) {
    INFO(out);
    const char* f = "plate_0001.exr";
    CHECK(max_diff(read(root / "both" / "blueclip" / out / f), read(root / "blue_alone" / "blueclip" / out / f)) == 0);
    CHECK(max_diff(read(root / "both" / "greenclip" / out / f),
                   read(root / "green_alone" / "greenclip" / out / f)) == 0);
  }

  // Without a blue model: the main model keys the blue clip with the channels swapped, and
  // the matte is another one (so the blue model above really did the keying).
  const auto swapped = run(opts(main_ck), job_for({blue}, root / "swapped"));
  CHECK(swapped.summary.clip_models.front().swapped);
  CHECK(swapped.summary.clip_models.front().checkpoint == main_ck);
  said = false;
  for (const auto& w : swapped.warnings) said |= w.find("swapped") != std::string::npos;
  CHECK(said);
  CHECK(max_diff(read(root / "swapped" / "blueclip" / "Matte" / "plate_0001.exr"),
                 read(root / "both" / "blueclip" / "Matte" / "plate_0001.exr")) > 1e-3);

  // A job of green clips never loads the blue model.
  const auto before = corridorkey::detail::checkpoint_loads();
  (void)run(opts(main_ck, blue_ck), job_for({green}, root / "green_only"));
  CHECK(corridorkey::detail::checkpoint_loads() == before + 1);

  // A blue model path that does not exist is an error even when no clip is blue.
  CHECK_THROWS_WITH(run(opts(main_ck, (root / "typo.safetensors").string()), job_for({green}, root / "typo")),
                    Contains("checkpoint_blue") && Contains("typo.safetensors"));
  // A blue file that is not a GreenFormer is a ModelError naming it.
  CHECK_THROWS_WITH(run(opts(main_ck, ck_test::fixture("dtypes.safetensors")), job_for({blue}, root / "bad")),
                    Contains("checkpoint_blue") && Contains("dtypes.safetensors"));

  // An engine holds the blue-screen model of its Model's checkpoint_blue: process_frame of
  // a blue plate, with no blue engine given, keys it as inference did (the file is half
  // float: one rounding apart), and loads the blue model once, on the first blue plate.
  auto with_blue = opts(main_ck, blue_ck);
  with_blue.engine.input_is_linear = true;  // the synthetic plates are scene-linear
  auto engine = create_engine(with_blue.model, with_blue.engine);
  const Image plate = read(blue / "Input" / "plate_0001.exr");
  const Image hint = read(blue / "AlphaHint" / "hint_0001.png");
  const Image inferred = read(root / "both" / "blueclip" / "Matte" / "plate_0001.exr");
  const auto before_blue = corridorkey::detail::checkpoint_loads();
  const auto r = engine->process_frame(plate.view(), hint.view(), Screen::Blue, FrameRequest::only_matte());
  CHECK(corridorkey::detail::checkpoint_loads() == before_blue + 1);
  CHECK(max_diff(r.alpha, inferred) <= 1e-3);
  (void)engine->process_frame(plate.view(), hint.view(), Screen::Blue, FrameRequest::only_matte());
  CHECK(corridorkey::detail::checkpoint_loads() == before_blue + 1);  // held, not loaded again
  // The green model with the swap gives another matte: the held blue model did the keying.
  auto green_only = opts(main_ck);
  green_only.engine.input_is_linear = true;
  const auto swapped_frame = create_engine(green_only.model, green_only.engine)
                                 ->process_frame(plate.view(), hint.view(), Screen::Blue, FrameRequest::only_matte());
  CHECK(max_diff(swapped_frame.alpha, inferred) > 1e-3);
  fs::remove_all(root);
}

TEST_CASE("job files take checkpoint_blue; a chunk loads each model once", "[model][blue]") {
  const auto root = ck_test::temp_dir("bluejob");
  devtools::write_synthetic_clip(root / "g", spec("green"));
  devtools::write_synthetic_clip(root / "b", spec("blue"));
  fs::copy_file(ck_test::fixture("tiny128.safetensors"), root / "green.safetensors");
  fs::create_directories(root / "bluedir");
  fs::copy_file(ck_test::fixture("tiny128_seed1.safetensors"), root / "bluedir" / "CorridorKeyBlue.safetensors");
  std::ofstream(root / "job.yaml") << "name: t\nclips: [g, b]\nprofile: original\ndevice: cpu\n"
                                      "checkpoint: green.safetensors\ncheckpoint_blue: bluedir\n"
                                      "color: linear\noutput_root: out\noutputs: [matte]\n";
  const auto job = load_job((root / "job.yaml").string());
  CHECK(job.options.model.checkpoint_blue == (root / "bluedir").lexically_normal().string());
  const auto chunks = plan_chunks(job_frames(job), 1, job.chunk_size);
  const auto loads = corridorkey::detail::checkpoint_loads();
  const auto s = run_chunk(job, chunks.front());
  CHECK(corridorkey::detail::checkpoint_loads() == loads + 2);
  CHECK(s.frames_done == 4);
  REQUIRE(s.clip_models.size() == 2);
  CHECK(s.clip_models[1].checkpoint == (root / "bluedir" / "CorridorKeyBlue.safetensors").lexically_normal().string());
  fs::remove_all(root);
}

TEST_CASE("blue despill is the green despill with green and blue exchanged, bit for bit", "[unit]") {
  Image fg;
  fg.width = 7, fg.height = 5, fg.channels = 3;
  for (int i = 0; i < 7 * 5 * 3; ++i) fg.pixels.push_back(static_cast<float>((i * 37) % 101) / 100.f);
  auto swapped = fg;
  swap_green_blue(swapped);
  for (float s : {0.f, 0.5f, 1.f}) {
    auto via_swap = post::despill(swapped, s, 1);
    swap_green_blue(via_swap);
    CHECK(post::despill(fg, s, 2).pixels == via_swap.pixels);
  }
  CHECK(post::despill(fg, 1.f, 2).pixels != post::despill(fg, 1.f, 1).pixels);
}
