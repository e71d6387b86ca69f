// Truncated frames are told from their own structure (io/image_integrity.h): JPEGs written
// by OpenCV's encoder (baseline and progressive, with an EXIF-style thumbnail in APP1) and
// 10-bit DPX written by oiiotool, cut as a copy interrupted mid-file leaves them. The readers
// refuse them naming the file; whole files still read.
#include <catch2/catch.hpp>

#include <corridorkey/errors.h>

#include "io/image_integrity.h"
#include "io/jpeg_check.h"
#include "io/image_io.h"
#include "support/support.h"

#include <opencv2/imgcodecs.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

using namespace corridorkey;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> jpeg_of(bool progressive) {
  cv::Mat im(90, 160, CV_8UC3);
  std::mt19937 rng(5);
  for (int y = 0; y < im.rows; ++y)
    for (int x = 0; x < im.cols; ++x)
      im.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>(rng() % 256), static_cast<uchar>(x), static_cast<uchar>(y));
  std::vector<uint8_t> b;
  REQUIRE(cv::imencode(".jpg", im, b, {cv::IMWRITE_JPEG_PROGRESSIVE, progressive ? 1 : 0}));
  return b;
}

std::vector<uint8_t> cut(const std::vector<uint8_t>& b, size_t percent) {
  return {b.begin(), b.begin() + static_cast<std::ptrdiff_t>(b.size() * percent / 100)};
}

void write(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::vector<uint8_t> bytes_of(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

bool run(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

}  // namespace

TEST_CASE("a JPEG is whole only up to its EOI marker", "[unit][integrity]") {
  for (bool progressive : {false, true}) {
    INFO((progressive ? "progressive" : "baseline"));
    const auto b = jpeg_of(progressive);
    CHECK(io::jpeg_truncation(b).empty());
    for (size_t pct : {10, 50, 90, 99}) {
      INFO(pct);
      CHECK_FALSE(io::jpeg_truncation(cut(b, pct)).empty());
    }
    // The last two bytes are the EOI: without them the image is not whole.
    CHECK_FALSE(io::jpeg_truncation({b.begin(), b.end() - 2}).empty());
    // Padding after EOI, as some cameras write, is allowed.
    auto padded = b;
    padded.insert(padded.end(), 64, 0);
    CHECK(io::jpeg_truncation(padded).empty());
  }
  // An APP1 segment holding a whole thumbnail JPEG (its own SOI ... EOI) is skipped by its
  // length: the main image cut short is still caught.
  const auto thumb = jpeg_of(false);
  auto main = jpeg_of(false);
  std::vector<uint8_t> app1 = {0xFF, 0xE1, 0, 0, 'E', 'x', 'i', 'f', 0, 0};
  app1.insert(app1.end(), thumb.begin(), thumb.end());
  const size_t len = app1.size() - 2;
  app1[2] = static_cast<uint8_t>(len >> 8), app1[3] = static_cast<uint8_t>(len & 0xFF);
  main.insert(main.begin() + 2, app1.begin(), app1.end());
  CHECK(io::jpeg_truncation(main).empty());
  CHECK_FALSE(io::jpeg_truncation(cut(main, 95)).empty());
  CHECK_FALSE(io::jpeg_truncation({0x89, 'P', 'N', 'G'}).empty());
}

TEST_CASE("a truncated JPEG frame is refused by name; a whole one reads", "[unit][integrity]") {
  const auto d = ck_test::temp_dir("jpeg_cut");
  const auto b = jpeg_of(false);
  write(d / "whole.jpg", b);
  CHECK(io::read_image((d / "whole.jpg").string()).width == 160);
  for (size_t pct : {50, 90, 99}) {
    const auto p = d / ("cut" + std::to_string(pct) + ".jpg");
    write(p, cut(b, pct));
    CHECK_THROWS_AS(io::read_image(p.string()), IoError);
    CHECK_THROWS_WITH(io::read_image(p.string()), Contains(p.string()) && Contains("truncated or corrupt JPEG"));
  }
  // Told by content, not the name: a truncated JPEG called .png is caught too.
  write(d / "named.png", cut(b, 90));
  CHECK_THROWS_WITH(io::read_image((d / "named.png").string()), Contains("truncated or corrupt JPEG"));
}

// Entropy-coded data that ends before the image's last block, yet closed by an EOI marker:
// the markers are whole, so only decoding tells, and libjpeg says so only as a warning
// ("Corrupt JPEG data: premature end of data segment"), which the check takes as an error.
TEST_CASE("a JPEG with corrupt data and its EOI is refused by name", "[unit][integrity]") {
  const auto d = ck_test::temp_dir("jpeg_corrupt");
  for (bool progressive : {false, true}) {
    INFO((progressive ? "progressive" : "baseline"));
    const auto b = jpeg_of(progressive);
    CHECK(io::jpeg_decode_problem(b).empty());
    // Cut at 60% and closed with an EOI, as a tool that "repairs" a partial download does.
    // (A stretch cut out of the middle is not always caught: the rest may happen to decode
    // as valid codes for every block, with no byte left over. Decoding tells what it can.)
    auto holed = cut(b, 60);
    holed.push_back(0xFF), holed.push_back(0xD9);
    CHECK(io::jpeg_truncation(holed).empty());  // the marker walk cannot tell
    CHECK_THAT(io::jpeg_decode_problem(holed), Contains("JPEG"));
    const auto p = d / (progressive ? "holed_progressive.jpg" : "holed.jpg");
    write(p, holed);
    CHECK_THROWS_WITH(io::read_image(p.string()), Contains(p.string()) && Contains("truncated or corrupt JPEG"));
  }
  CHECK_FALSE(io::jpeg_decode_problem({0xFF, 0xD8, 0xFF, 0xD9}).empty());
  CHECK_FALSE(io::jpeg_decode_problem({}).empty());
}

TEST_CASE("a DPX cut inside its pixel data is refused by name", "[unit][integrity]") {
  REQUIRE(run("oiiotool --version"));
  const auto d = ck_test::temp_dir("dpx_cut");
  write(d / "p.jpg", jpeg_of(false));
  for (const char* depth : {"uint10", "uint16", "uint8", "uint12"}) {
    INFO(depth);
    const auto dpx = d / (std::string(depth) + ".dpx");
    REQUIRE(run("oiiotool " + (d / "p.jpg").string() + " -d " + depth + " -o " + dpx.string()));
    const auto whole = bytes_of(dpx);
    const uint64_t need = io::dpx_bytes_needed(whole);
    CHECK(need > whole.size() / 2);   // the rule applies to this file
    CHECK(need <= whole.size());      // ... and a whole file meets it
    CHECK(io::read_image(dpx.string()).width == 160);
    const auto cutp = d / (std::string(depth) + "_cut.dpx");
    write(cutp, {whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(need - 1)});
    CHECK_THROWS_WITH(io::read_image(cutp.string()), Contains(cutp.string()) && Contains("truncated DPX"));
    write(cutp, cut(whole, 60));
    CHECK_THROWS_AS(io::read_image(cutp.string()), IoError);
  }
}
