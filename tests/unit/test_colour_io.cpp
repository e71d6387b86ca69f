// The I/O side of colour management, with files written by real tools: DPX through
// OpenImageIO (oiiotool writes it), EXR chromaticities written and read back, the header
// hints --input-colorspace auto uses, and video decoded at 16 bits through the ffmpeg binary
// (a 10-bit ProRes ramp made by ffmpeg here).
#include <catch2/catch.hpp>

#include <corridorkey/errors.h>

#include "colour/primaries.h"
#include "io/image_io.h"
#include "io/video_writer.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <unistd.h>

using namespace corridorkey;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  const auto d = fs::temp_directory_path() / ("ck_colour_io_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

bool run(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

/// A horizontal ramp 0..1 over `w` pixels (all three channels), `h` rows.
Image ramp(int w, int h) {
  Image im;
  im.width = w, im.height = h, im.channels = 3;
  im.pixels.resize(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        im.pixels[(static_cast<size_t>(y) * w + x) * 3 + c] = static_cast<float>(x) / (w - 1);
  return im;
}

}  // namespace

TEST_CASE("colour io: EXR chromaticities written, read back and matched", "[unit]") {
  const auto d = temp_dir("exr");
  const auto ap0 = colour::gamut("ap0").xy;
  io::write_exr((d / "ap0.exr").string(), ramp(16, 4), "RGB", io::ExrCompression::Zip, ap0.data());
  io::write_exr((d / "plain.exr").string(), ramp(16, 4), "RGB", io::ExrCompression::Zip);
  const auto h = io::read_colour_hints((d / "ap0.exr").string());
  REQUIRE(h.has_chromaticities);
  CHECK(colour::match_gamut(h.chromaticities, "ap0,ap1,rec709") == std::optional<std::string>("ap0"));
  CHECK_FALSE(io::read_colour_hints((d / "plain.exr").string()).has_chromaticities);
  // acesImageContainerFlag, as an ACES pipeline writes it (oiiotool, a real tool)
  if (run("oiiotool --version")) {
    REQUIRE(run("oiiotool " + (d / "plain.exr").string() + " --attrib:type=int acesImageContainerFlag 1 -o " +
                (d / "aces.exr").string()));
    CHECK(io::read_colour_hints((d / "aces.exr").string()).aces_container);
  }
  fs::remove_all(d);
}

TEST_CASE("colour io: 10-bit DPX through OpenImageIO, header limits first", "[unit]") {
  REQUIRE(run("oiiotool --version"));
  const auto d = temp_dir("dpx");
  const auto src = (d / "ramp.exr").string(), dpx = (d / "ramp.dpx").string();
  io::write_exr(src, ramp(1024, 2), "RGB", io::ExrCompression::None);
  REQUIRE(run("oiiotool " + src + " -d uint10 --attrib oiio:ColorSpace KodakLog -o " + dpx));
  const Image im = io::read_image(dpx);
  REQUIRE((im.width == 1024 && im.height == 2 && im.channels == 3));
  double worst = 0;
  for (int x = 0; x < 1024; ++x)
    worst = std::max(worst, std::fabs(im.pixels[static_cast<size_t>(x) * 3 + 1] - x / 1023.0));
  CHECK(worst < 0.5 / 1023 + 1e-6);  // 10-bit codes: at most half a code from the source
  const auto h = io::read_colour_hints(dpx);
  CHECK(h.dpx_transfer == 3);
  CHECK(h.dpx_transfer_name == "logarithmic");
  // The pixel limit is checked from the header, before OpenImageIO decodes anything.
  CHECK_THROWS_WITH(io::read_image(dpx, int64_t{1000}), Contains(dpx) && Contains("more than the limit"));
  // A DPX cut inside its header is refused by name, not handed to the decoder.
  fs::resize_file(dpx, 700);
  CHECK_THROWS_WITH(io::read_image(dpx), Contains(dpx) && Contains("DPX header cannot be parsed"));
  fs::remove_all(d);
}

TEST_CASE("colour io: a 10-bit ProRes clip decodes at 16 bits through ffmpeg", "[unit]") {
  if (io::find_ffmpeg().empty()) {
    WARN("SKIPPED: no ffmpeg binary");
    return;
  }
  const auto d = temp_dir("video");
  const auto png = (d / "ramp.png").string(), mov = (d / "ramp.mov").string();
  io::write_image16(png, ramp(1024, 16));
  REQUIRE(run(io::find_ffmpeg() + " -y -i " + png + " -c:v prores_ks -profile:v 4444 -pix_fmt yuv444p10le " + mov));
  auto levels = [&](bool deep, double& worst) {
    io::VideoReader r(mov, deep);
    Image f;
    REQUIRE(r.next(f));
    std::set<float> seen;
    worst = 0;
    for (int x = 0; x < 1024; ++x) {
      const float g = f.pixels[(static_cast<size_t>(8) * 1024 + x) * 3 + 1];
      seen.insert(g);
      worst = std::max(worst, std::fabs(g - x / 1023.0));
    }
    CHECK_FALSE(r.next(f));  // one frame, and the stream ends cleanly
    return seen.size();
  };
  double err8 = 0, err16 = 0;
  const size_t eight = levels(false, err8), sixteen = levels(true, err16);
  INFO("levels: 8-bit decode " << eight << ", 16-bit " << sixteen << "; max error " << err8 << " / " << err16);
  CHECK(eight <= 256);
  CHECK(sixteen > 700);  // the 10-bit codes survive (YUV 4:4:4 limited range: ~876 luma codes)
  CHECK(err16 < err8);
  fs::remove_all(d);
}
