// The run's colour decisions (pipeline/clip_colour): names, both spellings, `auto` on real
// EXR / DPX headers, the outputs' spaces and the one line per clip, without LibTorch.
#include <catch2/catch.hpp>

#include <corridorkey/errors.h>

#include "colour/primaries.h"
#include "io/image_io.h"
#include "pipeline/clip_colour.h"

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

using namespace corridorkey;
using namespace corridorkey::pipeline;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  const auto d = fs::temp_directory_path() / ("ck_clip_colour_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

Image grey(float v) {
  Image im;
  im.width = 8, im.height = 4, im.channels = 3;
  im.pixels.assign(8 * 4 * 3, v);
  return im;
}

io::Clip clip_of(const std::string& file) {
  io::Clip c;
  c.name = c.root = fs::path(file).parent_path().string();
  if (io::is_video_file(file)) {
    c.input.video = file;
  } else {
    c.input.frames = {file};
  }
  return c;
}

ClipColour decide(const InferenceOptions& job, const std::string& file, std::vector<std::string>* w = nullptr) {
  std::vector<std::string> warnings;
  auto c = clip_colour(resolve_job_colour(job), clip_of(file), warnings);
  if (w) *w = warnings;
  return c;
}

}  // namespace

TEST_CASE("clip colour: defaults are today's; linear-rec709 is no decode at all", "[unit]") {
  const auto d = temp_dir("defaults");
  const auto png = (d / "f1.png").string();
  InferenceOptions job;
  auto c = decide(job, png);
  CHECK(c.input == "srgb");
  CHECK_FALSE(c.linear);
  CHECK_FALSE(c.decode);
  CHECK_FALSE(c.processed);  // Processed stays scene-linear Rec.709 ...
  REQUIRE(c.processed_xy);   // ... and says so
  CHECK(*c.processed_xy == colour::gamut("rec709").xy);
  CHECK_THAT(c.summary(), Contains("sRGB input: srgb (default)"));
  job.color = ColorSpace::Linear;  // --linear
  job.color_given = true;
  c = decide(job, png);
  CHECK(c.input == "linear-rec709");
  CHECK(c.linear);
  CHECK_FALSE(c.decode);  // the identity is not applied: today's --linear values exactly
  CHECK_THAT(c.summary(), Contains("linear input: linear-rec709 (color linear)"));
  fs::remove_all(d);
}

TEST_CASE("clip colour: usage errors name what is wrong", "[unit]") {
  InferenceOptions job;
  job.input_colorspace = "acescg";
  job.color_given = true;  // --linear too
  CHECK_THROWS_WITH(resolve_job_colour(job), Contains("both given"));
  job.color_given = false;
  job.input_colorspace = "logc";
  ::unsetenv("OCIO");
  CHECK_THROWS_AS(resolve_job_colour(job), ConfigError);
  CHECK_THROWS_WITH(resolve_job_colour(job), Contains("unknown colour space 'logc'") && Contains("acescct"));
  job.input_colorspace = "acescg";
  job.comp_view = "sRGB/Film";
  CHECK_THROWS_WITH(resolve_job_colour(job), Contains("--comp-view") && Contains("OCIO config"));
}

TEST_CASE("clip colour: auto reads EXR chromaticities, the ACES flag and DPX transfer", "[unit]") {
  const auto d = temp_dir("auto");
  InferenceOptions job;
  job.input_colorspace = "auto";
  const Image plate = grey(0.18f);
  const auto ap0 = (d / "ap0.exr").string(), ap1 = (d / "ap1.exr").string(), plain = (d / "plain.exr").string();
  io::write_exr(ap0, plate, "RGB", io::ExrCompression::Zip, colour::gamut("ap0").xy.data());
  io::write_exr(ap1, plate, "RGB", io::ExrCompression::Zip, colour::gamut("ap1").xy.data());
  io::write_exr(plain, plate, "RGB", io::ExrCompression::Zip);
  auto c = decide(job, ap0);
  CHECK(c.input == "aces2065-1");
  CHECK(c.decode);
  REQUIRE(c.processed_xy);
  CHECK(*c.processed_xy == colour::gamut("ap0").xy);  // comes back AP0
  CHECK_THAT(c.summary(), Contains("aces2065-1 (auto: EXR chromaticities are ACES AP0)"));
  CHECK_THAT(c.summary(), Contains("Processed in ACES2065-1 (linear AP0)"));
  CHECK(decide(job, ap1).input == "acescg");
  CHECK(decide(job, plain).input == "linear-rec709");
  CHECK(decide(job, (d / "f.png").string()).input == "srgb");
  if (std::system(("oiiotool " + plain + " -d uint10 --attrib oiio:ColorSpace KodakLog -o " +
                   (d / "log.dpx").string() + " >/dev/null 2>&1").c_str()) == 0) {
    std::vector<std::string> w;
    c = decide(job, (d / "log.dpx").string(), &w);
    CHECK(c.input == "srgb");
    REQUIRE(w.size() == 1);
    CHECK_THAT(w[0], Contains("logarithmic") && Contains("--input-colorspace"));
  }
  fs::remove_all(d);
}

TEST_CASE("clip colour: a LogC3 clip decodes, its outputs follow the flags", "[unit]") {
  InferenceOptions job;
  job.input_colorspace = "arri-logc3-ei800-awg";
  auto c = decide(job, "/nowhere/clip/Input/f1.exr");
  REQUIRE(c.decode);
  Image plate = grey(0.391007f);
  decode_plate(c, plate);
  for (float v : plate.pixels) CHECK(v == Approx(0.18).margin(1e-4));
  REQUIRE(c.processed_xy);
  CHECK(*c.processed_xy == colour::gamut("awg3").xy);  // linear AWG3 by default
  CHECK_FALSE(c.fg);
  CHECK(decide(job, "/nowhere/clip/Input.mov").deep_video);  // 16-bit video decode
  job.output_colorspace = "acescg";
  job.fg_colorspace = "acescg";
  c = decide(job, "/nowhere/clip/Input/f1.exr");
  CHECK(*c.processed_xy == colour::gamut("ap1").xy);
  REQUIRE(c.fg);
  CHECK(*c.fg_xy == colour::gamut("ap1").xy);
  CHECK_THAT(c.summary(), Contains("Processed in ACEScg") && Contains("FG in acescg"));
}
