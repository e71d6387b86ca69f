// The decode budget (io/decode_budget.h): what a frame's decoding will hold, told from its
// header, summed over the read workers, against a budget from the available memory.
#include <corridorkey/errors.h>

#include <catch2/catch.hpp>

#include "io/decode_budget.h"
#include "io/image_io.h"
#include "support/support.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>

using namespace corridorkey;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

std::vector<unsigned char> bytes_of(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// A real JPEG written by OpenCV (64 x 48, RGB) whose SOF0 header is then patched to declare
/// w x h, as a corrupt or hostile file would: about 1 KB that decodes to w x h pixels.
fs::path jpeg_bomb(const fs::path& dir, int w, int h) {
  cv::Mat m(48, 64, CV_8UC3, cv::Scalar(40, 200, 30));  // a green screen, a subject on it
  m(cv::Rect(20, 10, 24, 30)).setTo(cv::Scalar(120, 150, 200));
  const auto path = dir / "bomb.jpg";
  REQUIRE(cv::imwrite(path.string(), m));
  auto b = bytes_of(path);
  size_t i = 2;
  while (i + 9 < b.size() && !(b[i] == 0xFF && b[i + 1] == 0xC0)) ++i;
  REQUIRE(i + 9 < b.size());  // SOF0: FF C0, length (2), precision, height (2), width (2)
  b[i + 5] = static_cast<unsigned char>(h >> 8), b[i + 6] = static_cast<unsigned char>(h & 0xFF);
  b[i + 7] = static_cast<unsigned char>(w >> 8), b[i + 8] = static_cast<unsigned char>(w & 0xFF);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
  return path;
}

}  // namespace

TEST_CASE("decode budget: a small JPEG declaring 16000 x 16000 is refused before decoding", "[unit]") {
  const auto root = ck_test::temp_dir("decode_bomb");
  const auto bomb = jpeg_bomb(root, 16000, 16000);
  CHECK(fs::file_size(bomb) < 4096);
  const auto s = io::probe_image_size(bomb.string());
  REQUIRE(s);
  CHECK(s->width == 16000);
  CHECK(s->height == 16000);
  CHECK(s->channels == 3);
  CHECK(s->bytes_per_sample == 1);
  // Under --max-pixels (16384^2), so only the budget stands between it and a full decode
  // (measured before: 35 s and 7.2 GB RSS per read worker).
  CHECK_NOTHROW(io::check_image_size(bomb.string(), io::kDefaultMaxPixels));
  io::DecodeLimits l;
  l.budget_bytes = int64_t{1000} << 20;
  l.workers = 2;
  l.origin = "--decode-budget-mb 1000";
  const auto t = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(io::read_image(bomb.string(), l), IoError);
  CHECK_THROWS_WITH(io::read_image(bomb.string(), l),
                    Contains(bomb.string()) && Contains("16000x16000 x 3 channels") &&
                        Contains("x 2 read worker(s)") && Contains("decode budget of 1000 MiB") &&
                        Contains("--decode-budget-mb 1000") && Contains("before decoding"));
  const double s_taken = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  CHECK(s_taken < 1.0);  // two refusals from the header; one decode takes tens of seconds
  // Summed over the read workers: a budget one frame fits in refuses two at once.
  l.budget_bytes = io::decode_bytes(*s);
  l.workers = 1;
  CHECK_NOTHROW(io::check_image_size(bomb.string(), l));
  l.workers = 2;
  CHECK_THROWS_WITH(io::check_image_size(bomb.string(), l), Contains("x 2 read worker(s)"));
  // The same through the readable-output check of --skip-existing: refused, so redone.
  CHECK_FALSE(io::readable_output(bomb.string(), l));
  fs::remove_all(root);
}

TEST_CASE("decode budget: the estimate bounds what decoding holds, for each format", "[unit]") {
  // decode_bytes must never be below the decoder's image plus the float image it becomes,
  // or the budget lets through more than it says. Files written by OpenCV itself.
  const auto root = ck_test::temp_dir("decode_estimate");
  struct Case {
    const char* name;
    int type;
  };
  for (const auto& c : {Case{"rgb8.jpg", CV_8UC3}, Case{"grey8.jpg", CV_8UC1}, Case{"rgb16.png", CV_16UC3},
                        Case{"rgba8.png", CV_8UC4}, Case{"grey16.png", CV_16UC1}, Case{"rgb16.tif", CV_16UC3},
                        Case{"rgbf.tif", CV_32FC3}, Case{"rgb8.bmp", CV_8UC3}, Case{"rgb8.webp", CV_8UC3},
                        Case{"rgb8.ppm", CV_8UC3}, Case{"grey8.pgm", CV_8UC1}, Case{"rgbf.hdr", CV_32FC3}}) {
    INFO(c.name);
    const auto path = (root / c.name).string();
    cv::Mat m(90, 160, c.type);
    cv::randu(m, 0, c.type == CV_32FC3 ? 1 : 200);  // B, G, R differ: a swap shows
    REQUIRE(cv::imwrite(path, m));
    const auto s = io::probe_image_size(path);
    REQUIRE(s);
    const cv::Mat d = cv::imread(path, cv::IMREAD_UNCHANGED);
    REQUIRE_FALSE(d.empty());
    const int64_t held = static_cast<int64_t>(d.total() * d.elemSize()) +
                         static_cast<int64_t>(d.total()) * d.channels() * 4;
    CHECK(io::decode_bytes(*s) >= held);
    // read_image converts in place now (one float copy, not three): the same values as
    // converting to float and then swapping B and R with cvtColor.
    cv::Mat f;
    d.convertTo(f, CV_32F, d.depth() == CV_8U ? 1 / 255.0 : d.depth() == CV_16U ? 1 / 65535.0 : 1.0);
    if (f.channels() == 3) cv::cvtColor(f, f, cv::COLOR_BGR2RGB);
    if (f.channels() == 4) cv::cvtColor(f, f, cv::COLOR_BGRA2RGBA);
    const Image im = io::read_image(path);
    REQUIRE(im.channels == d.channels());
    REQUIRE(im.pixels.size() == f.total() * f.channels());
    CHECK(std::equal(im.pixels.begin(), im.pixels.end(), f.ptr<float>()));
  }
  // An RGB PNG with a transparent colour (tRNS) decodes to BGRA: 4 channels, from its chunks.
  {
    const auto path = (root / "trns.png").string();
    cv::Mat rgb(90, 160, CV_8UC3, cv::Scalar(10, 20, 30));
    REQUIRE(cv::imwrite(path, rgb));
    auto b = bytes_of(path);
    // tRNS for RGB: one 16-bit sample per channel; CRC over type + data.
    std::vector<unsigned char> chunk = {0, 0, 0, 6, 't', 'R', 'N', 'S', 0, 30, 0, 20, 0, 10};
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 4; i < chunk.size(); ++i) {
      crc ^= chunk[i];
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    crc ^= 0xFFFFFFFFu;
    for (int k = 3; k >= 0; --k) chunk.push_back(static_cast<unsigned char>(crc >> (8 * k)));
    b.insert(b.begin() + 33, chunk.begin(), chunk.end());  // after IHDR
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
    const auto s = io::probe_image_size(path);
    REQUIRE(s);
    const cv::Mat d = cv::imread(path, cv::IMREAD_UNCHANGED);
    REQUIRE(d.channels() == 4);  // OpenCV's own reading of it
    CHECK(s->channels == 4);
  }
  // EXR: the float image (RGB) and the chunk Imf unpacks.
  Image im;
  im.width = 160, im.height = 90, im.channels = 3;
  im.pixels.assign(size_t{160} * 90 * 3, 0.5f);
  const auto exr = (root / "rgb.exr").string();
  io::write_exr(exr, im, "RGB", io::ExrCompression::Zip);
  const auto s = io::probe_image_size(exr);
  REQUIRE(s);
  CHECK(s->channels == 3);
  CHECK(io::decode_bytes(*s, 1) >= static_cast<int64_t>(im.pixels.size() * sizeof(float)));
  fs::remove_all(root);
}

TEST_CASE("decode budget: derived from the available memory, or set", "[unit]") {
  CHECK(io::mem_available_from_meminfo("MemTotal:       24683400 kB\nMemFree:        18646712 kB\n"
                                       "MemAvailable:   22271404 kB\nBuffers:  1 kB\n") ==
        int64_t{22271404} * 1024);
  CHECK(io::mem_available_from_meminfo("MemTotal:       24683400 kB\n") == -1);  // kernels before 3.14
  CHECK(io::mem_available_from_meminfo("MemAvailable: lots\n") == -1);
  const auto set = io::decode_limits(io::kDefaultMaxPixels, 1000, 2);
  CHECK(set.budget_bytes == int64_t{1000} << 20);
  CHECK(set.workers == 2);
  CHECK(set.origin == "--decode-budget-mb 1000");
  const int64_t avail = io::available_memory_bytes();
  REQUIRE(avail > 0);  // Linux: /proc/meminfo
  const auto autob = io::decode_limits(io::kDefaultMaxPixels, 0, 2);
  // Half of what is available; the memory moves between the two reads, so within 10%.
  CHECK(autob.budget_bytes > avail / 2 * 9 / 10);
  CHECK(autob.budget_bytes < avail / 2 * 11 / 10);
  CHECK_THAT(autob.origin, Contains("MemAvailable") && Contains("--decode-budget-mb"));
  // A PNG header declaring 2^20 x 2^15 RGBA (34 G pixels, allowed by a raised pixel limit):
  // the automatic budget refuses it exactly when the estimate is over it.
  const auto root = ck_test::temp_dir("decode_auto");
  const auto png = root / "wide.png";
  const unsigned char ihdr[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                                0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 8, 6, 0, 0, 0};
  std::ofstream(png, std::ios::binary).write(reinterpret_cast<const char*>(ihdr), sizeof ihdr);
  auto l = io::decode_limits(int64_t{1} << 36, 0, 2);
  const auto s = io::probe_image_size(png.string());
  REQUIRE(s);
  CHECK(s->channels == 4);
  if (io::decode_bytes(*s) * 2 > l.budget_bytes)
    CHECK_THROWS_WITH(io::check_image_size(png.string(), l),
                      Contains("wide.png") && Contains("1048576x32768") && Contains("MemAvailable"));
  else
    CHECK_NOTHROW(io::check_image_size(png.string(), l));
  fs::remove_all(root);
}
