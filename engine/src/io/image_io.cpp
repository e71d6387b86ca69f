#include "io/image_io.h"

#include <corridorkey/check.h>

#include "io/deep_video.h"
#include "io/dpx.h"
#include "io/exr_attributes.h"
#include "io/image_integrity.h"
#include "io/jpeg_check.h"

#include <ImfChannelList.h>
#include <ImfChromaticities.h>
#include <ImfIntAttribute.h>
#include <ImfStandardAttributes.h>
#include <ImfCompressionAttribute.h>
#include <ImfFrameBuffer.h>
#include <ImfHeader.h>
#include <ImfInputFile.h>
#include <ImfThreading.h>

#include <mutex>
#include <ImfOutputFile.h>
#include <Imath/half.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <cstring>
#include <map>
#include <cerrno>
#include <csignal>
#include <unistd.h>

namespace corridorkey::io {
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string lower_ext(const std::string& path) { return lower(fs::path(path).extension().string()); }

/// The channels a plate or hint is read from, in order: R, G, B (and A) at the top level;
/// else the same names in any case (r, g, b; red, green, blue); else one layer's
/// <layer>.R/G/B (and .A), a render's "beauty" or "rgba" layer where several have them.
/// Without any RGB set: Y, A or the first channel, as a grey image or a hint. A plate whose
/// only RGB lies in several other layers is refused, naming them: keying one of them by
/// guess, or a grey channel, gives a wrong matte without a word (max error 0.95 on a
/// `beauty.R/G/B` plate read as grey).
std::vector<std::string> exr_channels(const Imf::ChannelList& cl, const std::string& path) {
  // layer (text before the last '.', "" at the top level) -> lower-cased last part -> name
  std::map<std::string, std::map<std::string, std::string>> layers;
  for (auto c = cl.begin(); c != cl.end(); ++c) {
    const std::string n = c.name();
    const auto dot = n.rfind('.');
    const std::string layer = dot == std::string::npos ? "" : n.substr(0, dot);
    auto part = lower(dot == std::string::npos ? n : n.substr(dot + 1));
    if (part == "red") part = "r";
    if (part == "green") part = "g";
    if (part == "blue") part = "b";
    if (part == "alpha") part = "a";
    layers[layer].emplace(part, n);
  }
  auto rgb_of = [&](const std::map<std::string, std::string>& parts) {
    std::vector<std::string> out;
    for (const char* p : {"r", "g", "b"}) {
      const auto it = parts.find(p);
      if (it == parts.end()) return std::vector<std::string>{};
      out.push_back(it->second);
    }
    if (const auto a = parts.find("a"); a != parts.end()) out.push_back(a->second);
    return out;
  };
  if (cl.findChannel("R") && cl.findChannel("G") && cl.findChannel("B")) {
    std::vector<std::string> out{"R", "G", "B"};
    if (cl.findChannel("A")) out.emplace_back("A");
    return out;
  }
  if (const auto top = layers.find(""); top != layers.end())
    if (auto out = rgb_of(top->second); !out.empty()) return out;
  std::vector<std::string> with_rgb;
  for (const auto& [layer, parts] : layers)
    if (!layer.empty() && !rgb_of(parts).empty()) with_rgb.push_back(layer);
  if (with_rgb.size() == 1) return rgb_of(layers[with_rgb[0]]);
  for (const char* pref : {"beauty", "rgba", "rgb", "main"})
    for (const auto& layer : with_rgb)
      if (lower(layer) == pref) return rgb_of(layers[layer]);
  if (!with_rgb.empty()) {
    std::string names;
    for (const auto& l : with_rgb) names += (names.empty() ? "" : ", ") + l;
    throw IoError(path + ": EXR has no top-level R, G, B but several layers with them (" + names +
                  "); none is named beauty or rgba, so which one is the plate is not known: write the "
                  "plate's layer as R, G, B");
  }
  // Not RGB: a grey / Y / alpha-only / single named channel file.
  for (const char* n : {"Y", "A"})
    if (cl.findChannel(n)) return {n};
  if (cl.begin() != cl.end()) return {cl.begin().name()};
  return {};
}

/// `metadata` null: the display window, as hints are read. Else (a plate) the data window
/// together with the display window, and what the header carries to the outputs.
Image read_exr(const std::string& path, std::shared_ptr<const PlateMetadata>* metadata,
               const DecodeLimits& limits) {
  try {
    Imf::InputFile file(path.c_str());
    const auto& header = file.header();
    const auto dw = header.dataWindow();
    const int w = dw.max.x - dw.min.x + 1, h = dw.max.y - dw.min.y + 1;
    const auto disp_window = header.displayWindow();
    Imath::Box2i frame = disp_window;
    if (metadata) {
      frame.extendBy(dw);
      // A data window far off the display window makes their union huge though each is
      // small (what check_image_size saw): refused like any frame over the pixel limit or
      // the decode budget, before it is allocated.
      const int64_t fw = int64_t{frame.max.x} - frame.min.x + 1,
                    fh = int64_t{frame.max.y} - frame.min.y + 1;
      CK_CHECK(fw * fh <= limits.max_pixels, IoError, path,
               ": its data and display windows together span ", fw, "x", fh,
               " pixels, over the limit of ", limits.max_pixels, " (--max-pixels)");
      if (frame != dw) check_decode_budget(path, ImageSize{fw, fh, 4, 4, 1}, 0, limits);
      auto m = std::make_shared<PlateMetadata>();
      m->display =
          PixelBox{disp_window.min.x, disp_window.min.y, disp_window.max.x, disp_window.max.y};
      m->frame = PixelBox{frame.min.x, frame.min.y, frame.max.x, frame.max.y};
      m->attributes = carried_attributes(header);
      *metadata = std::move(m);
    }
    const auto names = exr_channels(header.channels(), path);
    CK_CHECK(!names.empty(), IoError, path, ": EXR has no channels");
    Image im;
    im.width = w;
    im.height = h;
    im.channels = static_cast<int>(names.size());
    im.pixels.assign(static_cast<size_t>(w) * h * im.channels, 0.f);
    Imf::FrameBuffer fb;
    const size_t xs = sizeof(float) * im.channels, ys = xs * w;
    // Slice::Make shifts the pointer by the data window's origin in integer arithmetic; doing
    // it on a char* is undefined for a far-off origin (UBSan, fuzz_image finding).
    for (int c = 0; c < im.channels; ++c)
      fb.insert(names[c], Imf::Slice::Make(Imf::FLOAT, im.pixels.data() + c, dw, xs, ys));
    file.setFrameBuffer(fb);
    file.readPixels(dw.min.y, dw.max.y);
    const auto disp = frame;
    if (disp == dw) return im;
    // A hint's frame is the display window, as compositing apps read it: pixels of the data
    // window outside it (overscan) are dropped, display pixels without data are 0. A plate's
    // is the union of both windows: overscan is keyed, and its outputs keep the windows, so
    // nothing shifts in comp (an offset plate keyed at 0,0 once came back 50,30 px off).
    // prepare_frame places a display-size hint on the display window, never stretched.
    Image out;
    out.width = disp.max.x - disp.min.x + 1;
    out.height = disp.max.y - disp.min.y + 1;
    out.channels = im.channels;
    out.pixels.assign(static_cast<size_t>(out.width) * out.height * out.channels, 0.f);
    const int64_t x0 = std::max(dw.min.x, disp.min.x), x1 = std::min(dw.max.x, disp.max.x);
    const int64_t y0 = std::max(dw.min.y, disp.min.y), y1 = std::min(dw.max.y, disp.max.y);
    for (int64_t y = y0; y <= y1 && x0 <= x1; ++y)
      std::memcpy(out.pixels.data() + ((y - disp.min.y) * out.width + (x0 - disp.min.x)) * out.channels,
                  im.pixels.data() + ((y - dw.min.y) * int64_t{w} + (x0 - dw.min.x)) * im.channels,
                  sizeof(float) * static_cast<size_t>((x1 - x0 + 1) * im.channels));
    return out;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw IoError(path + ": cannot read EXR: " + e.what());
  }
}

/// The whole file when it is a JPEG (told by its first bytes, whatever its name), else empty.
std::vector<uint8_t> jpeg_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> b(3);
  if (!f.read(reinterpret_cast<char*>(b.data()), 3) || !is_jpeg(b)) return {};
  f.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(std::max<std::streamoff>(f.tellg(), 0));
  b.resize(size);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(size));
  b.resize(static_cast<size_t>(std::max<std::streamsize>(f.gcount(), 0)));
  return b;
}

Image read_cv(const std::string& path) {
  cv::Mat m;
  try {
    // A JPEG is checked whole before it is decoded (libjpeg greys out a truncated one and
    // smears a corrupt one, and returns either as complete), then decoded from the bytes
    // already read.
    if (auto bytes = jpeg_bytes(path); !bytes.empty()) {
      auto why = jpeg_truncation(bytes);
      if (why.empty()) why = jpeg_decode_problem(bytes);
      CK_CHECK(why.empty(), IoError, path, ": truncated or corrupt JPEG: ", why);
      m = cv::imdecode(bytes, cv::IMREAD_UNCHANGED);
    } else {
      m = cv::imread(path, cv::IMREAD_UNCHANGED);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // OpenCV's own limits and assertions
    throw IoError(path + ": cannot decode image: " + e.what());
  }
  CK_CHECK(!m.empty(), IoError, path, ": cannot decode image (corrupt, truncated or unsupported)");
  const int ch = m.channels();
  double scale = 1.0;
  switch (m.depth()) {
    case CV_8U: scale = 1.0 / 255.0; break;
    case CV_16U: scale = 1.0 / 65535.0; break;
    case CV_32F: break;
    default: throw IoError(path + ": unsupported sample type (expected 8/16-bit or float)");
  }
  // Converted straight into the image's pixels, then B and R swapped in place: the decoded
  // image and one float copy, 5 bytes a sample for 8-bit (decode_bytes counts this). Converting
  // into a cv::Mat, swapping with cvtColor (which copies an in-place source) and copying
  // out held 1 + 4 + 4 bytes: 7.2 GB for 16000 x 16000 RGB. The values are the same.
  Image im;
  im.width = m.cols;
  im.height = m.rows;
  im.channels = ch;
  im.pixels.resize(static_cast<size_t>(m.cols) * m.rows * ch);
  cv::Mat f(m.rows, m.cols, CV_32FC(ch), im.pixels.data());
  m.convertTo(f, CV_32F, scale);
  CK_CHECK(f.data == reinterpret_cast<uchar*>(im.pixels.data()), IoError, path,
           ": internal: conversion reallocated");
  m.release();
  if (ch >= 3)
    for (size_t i = 0; i < im.pixels.size(); i += static_cast<size_t>(ch)) std::swap(im.pixels[i], im.pixels[i + 2]);
  return im;
}

}  // namespace

const std::vector<std::string>& frame_extensions() {
  static const std::vector<std::string> exts = [] {
    // EXR through OpenEXR; DPX through OpenImageIO.
    std::vector<std::string> v = {".exr", ".dpx"};
    // Every still format OpenCV has a codec for, kept when the linked build decodes it:
    // a small image is encoded and decoded back (so .jp2 is a frame only where OpenCV was
    // built with OpenJPEG or JasPer).
    for (const char* e : {".png", ".jpg", ".jpeg", ".jpe", ".tif", ".tiff", ".bmp", ".dib", ".webp",
                          ".jp2", ".hdr", ".pic", ".ppm", ".pgm", ".pbm", ".pnm", ".pxm", ".pfm", ".sr",
                          ".ras", ".avif"}) {
      for (int type : {CV_8UC3, CV_8UC1, CV_32FC3}) {
        try {
          std::vector<uchar> bytes;
          if (cv::imencode(e, cv::Mat(64, 64, type, cv::Scalar::all(1)), bytes) &&
              !cv::imdecode(bytes, cv::IMREAD_UNCHANGED).empty()) {
            v.emplace_back(e);
            break;
          }
        } catch (const std::exception&) {  // no codec for it in this build
        }
      }
    }
    return v;
  }();
  return exts;
}

bool is_image_file(const std::string& path) {
  const auto e = lower_ext(path);
  const auto& exts = frame_extensions();
  return std::find(exts.begin(), exts.end(), e) != exts.end();
}

bool is_video_file(const std::string& path) {
  static const char* exts[] = {".mp4", ".mov", ".mkv", ".avi", ".mxf", ".webm", ".m4v"};
  const auto e = lower_ext(path);
  return std::any_of(std::begin(exts), std::end(exts), [&](const char* x) { return e == x; });
}

namespace {
/// Why `path` is not a file to decode, or "" when it is a regular file. Never opens it (a
/// FIFO named frame_0002.png would block the reader forever).
std::string not_a_file(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec.value() == ELOOP) return "is a symbolic link loop (" + ec.message() + ")";
  switch (st.type()) {
    case fs::file_type::regular: return "";
    case fs::file_type::not_found: {
      std::error_code lec;
      return fs::is_symlink(fs::symlink_status(path, lec)) ? "is a broken symbolic link (its target does not exist)"
                                                          : "file does not exist";
    }
    case fs::file_type::directory: return "is a folder, not an image file";
    case fs::file_type::fifo: return "is a FIFO (named pipe), not an image file";
    case fs::file_type::block:
    case fs::file_type::character: return "is a device, not an image file";
    case fs::file_type::socket: return "is a socket, not an image file";
    default: return ec ? "cannot be read (" + ec.message() + ")" : "is not a regular file";
  }
}
}  // namespace

Image read_image(const std::string& path, int64_t max_pixels) {
  DecodeLimits l;
  l.max_pixels = max_pixels;
  return read_image(path, l);
}

Image read_image(const std::string& path, const DecodeLimits& limits) {
  const auto why = not_a_file(path);
  CK_CHECK(why.empty(), IoError, path, ": ", why);
  const auto e = lower_ext(path);
  check_image_size(path, limits);  // before any pixel memory is allocated
  if (e == ".dpx" || has_dpx_magic(path)) return read_dpx(path);
  return e == ".exr" ? read_exr(path, nullptr, limits) : read_cv(path);
}

Image read_plate(const std::string& path, const DecodeLimits& limits,
                 std::shared_ptr<const PlateMetadata>& metadata) {
  metadata = nullptr;
  const auto why = not_a_file(path);
  CK_CHECK(why.empty(), IoError, path, ": ", why);
  const auto e = lower_ext(path);
  check_image_size(path, limits);
  if (e == ".dpx" || has_dpx_magic(path)) return read_dpx(path, &metadata);
  return e == ".exr" ? read_exr(path, &metadata, limits) : read_cv(path);
}

ExrCompression parse_exr_compression(const std::string& n) {
  const std::pair<const char*, ExrCompression> table[] = {
      {"none", ExrCompression::None}, {"rle", ExrCompression::Rle},   {"zips", ExrCompression::Zips},
      {"zip", ExrCompression::Zip},   {"piz", ExrCompression::Piz},   {"pxr24", ExrCompression::Pxr24},
      {"dwaa", ExrCompression::Dwaa}, {"dwab", ExrCompression::Dwab}};
  for (const auto& [k, v] : table)
    if (n == k) return v;
  throw ConfigError("--exr-compression: invalid value '" + n +
                    "' (expected one of zip, zips, piz, pxr24, dwaa, dwab, rle, none)");
}

const char* to_string(ExrCompression c) {
  switch (c) {
    case ExrCompression::None: return "none";
    case ExrCompression::Rle: return "rle";
    case ExrCompression::Zips: return "zips";
    case ExrCompression::Zip: return "zip";
    case ExrCompression::Piz: return "piz";
    case ExrCompression::Pxr24: return "pxr24";
    case ExrCompression::Dwaa: return "dwaa";
    case ExrCompression::Dwab: return "dwab";
  }
  return "?";
}

int ensure_exr_threads(int threads) {
  static std::mutex m;
  std::lock_guard<std::mutex> l(m);
  if (Imf::globalThreadCount() == 0 && threads > 1) Imf::setGlobalThreadCount(threads);
  return Imf::globalThreadCount();
}

ColourHints read_colour_hints(const std::string& path) {
  ColourHints h;
  if (const auto d = read_dpx_header(path)) {
    h.dpx_transfer = d->transfer;
    h.dpx_transfer_name = d->transfer_name();
    return h;
  }
  std::error_code ec;
  if (lower_ext(path) != ".exr" || !fs::is_regular_file(path, ec)) return h;
  try {
    check_image_size(path, kDefaultMaxPixels);  // the same guard as before any EXR read
    Imf::InputFile file(path.c_str());
    const auto& header = file.header();
    if (Imf::hasChromaticities(header)) {
      const auto& c = Imf::chromaticities(header);
      h.has_chromaticities = true;
      h.chromaticities = {c.red.x, c.red.y, c.green.x, c.green.y, c.blue.x, c.blue.y, c.white.x, c.white.y};
    }
    if (const auto* flag = header.findTypedAttribute<Imf::IntAttribute>("acesImageContainerFlag"))
      h.aces_container = flag->value() == 1;
  } catch (const std::exception&) {  // says nothing; reading the frame reports the problem
  }
  return h;
}

void write_exr(const std::string& path, const Image& im, const std::string& names,
               ExrCompression compression, const double* chromaticities,
               const PlateMetadata* plate) {
  CK_CHECK(static_cast<int>(names.size()) == im.channels, IoError, path, ": ", im.channels,
           " channels but names '", names, "'");
  std::vector<std::string> channels;
  for (char c : names) channels.emplace_back(1, c);
  write_exr_layers(path, {{&im, channels}}, compression, chromaticities, plate);
}

void write_exr_layers(const std::string& path, const std::vector<ExrLayer>& layers,
                      ExrCompression compression, const double* chromaticities,
                      const PlateMetadata* plate) {
  CK_CHECK(!layers.empty() && layers[0].image, IoError, path, ": no channels to write");
  const Image& first = *layers[0].image;
  for (const auto& l : layers)
    CK_CHECK(l.image && static_cast<int>(l.names.size()) == l.image->channels &&
                 l.image->width == first.width && l.image->height == first.height,
             IoError, path, ": layers of different sizes or channel counts than their names");
  if (plate)
    CK_CHECK(plate->frame.width() == first.width && plate->frame.height() == first.height, IoError,
             path, ": the image is ", first.width, "x", first.height,
             " but the plate's keyed frame is ", plate->frame.width(), "x", plate->frame.height());
  atomic_write(path, [&](const std::string& tmp) {
    try {
      Imf::Header header(first.width, first.height);
      if (plate) {
        const auto box = [](const PixelBox& b) { return Imath::Box2i({b.x0, b.y0}, {b.x1, b.y1}); };
        header.displayWindow() = box(plate->display);
        header.dataWindow() = box(plate->frame);
        if (plate->attributes) add_attributes(*plate->attributes, header);
      }
      header.compression() = static_cast<Imf::Compression>([&] {
        switch (compression) {
          case ExrCompression::None: return Imf::NO_COMPRESSION;
          case ExrCompression::Rle: return Imf::RLE_COMPRESSION;
          case ExrCompression::Zips: return Imf::ZIPS_COMPRESSION;
          case ExrCompression::Zip: return Imf::ZIP_COMPRESSION;
          case ExrCompression::Piz: return Imf::PIZ_COMPRESSION;
          case ExrCompression::Pxr24: return Imf::PXR24_COMPRESSION;
          case ExrCompression::Dwaa: return Imf::DWAA_COMPRESSION;
          case ExrCompression::Dwab: return Imf::DWAB_COMPRESSION;
        }
        return Imf::PXR24_COMPRESSION;
      }());
      if (chromaticities) {
        const double* c = chromaticities;
        auto v = [](double x, double y) { return Imath::V2f(static_cast<float>(x), static_cast<float>(y)); };
        Imf::addChromaticities(header, Imf::Chromaticities(v(c[0], c[1]), v(c[2], c[3]), v(c[4], c[5]), v(c[6], c[7])));
      }
      std::vector<std::vector<Imath::half>> bufs(layers.size());
      Imf::FrameBuffer fb;
      const auto dw = header.dataWindow();
      for (size_t k = 0; k < layers.size(); ++k) {
        const Image& im = *layers[k].image;
        auto& buf = bufs[k];
        buf.resize(im.pixels.size());
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = Imath::half(im.pixels[i]);
        const size_t xs = sizeof(Imath::half) * im.channels, ys = xs * im.width;
        for (int c = 0; c < im.channels; ++c) {
          const std::string& n = layers[k].names[static_cast<size_t>(c)];
          header.channels().insert(n, Imf::Channel(Imf::HALF));
          // Make: the pointer shifted by the data window's origin in integer arithmetic.
          fb.insert(n, Imf::Slice::Make(Imf::HALF, buf.data() + c, dw, xs, ys));
        }
      }
      Imf::OutputFile out(tmp.c_str(), header);
      out.setFrameBuffer(fb);
      out.writePixels(first.height);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw IoError(path + ": cannot write EXR: " + e.what());
    }
  });
}

namespace {
/// Encodes `m` by `path`'s extension (.png, .tif) and writes it atomically.
void write_encoded(const std::string& path, const cv::Mat& m) {
  const auto ext = fs::path(path).extension().string();
  atomic_write(path, [&](const std::string& tmp) {
    std::vector<uchar> bytes;
    CK_CHECK(cv::imencode(ext, m, bytes), IoError, path, ": ", ext, " encoding failed");
    FILE* fp = std::fopen(tmp.c_str(), "wb");
    CK_CHECK(fp, IoError, path, ": cannot create file in ", fs::path(path).parent_path().string(),
             " (", std::strerror(errno), ")");
    const size_t n = std::fwrite(bytes.data(), 1, bytes.size(), fp);
    const int err = errno;
    const bool closed = std::fclose(fp) == 0;
    CK_CHECK(n == bytes.size() && closed, IoError, path, ": write failed (", std::strerror(err), ")");
  });
}
}  // namespace

void write_png8(const std::string& path, const Image& im, bool round) {
  // As the reference writes its Comp PNG: clip to [0, 1], scale by 255 in float32 and
  // TRUNCATE ((comp * 255).astype(np.uint8)), so 0.999 -> 254, not 255. NaN -> 0.
  cv::Mat u8(im.height, im.width, CV_8UC(im.channels));
  const float* src = im.pixels.data();
  uint8_t* dst = u8.ptr<uint8_t>();
  const size_t n = static_cast<size_t>(im.width) * im.height * im.channels;
  for (size_t i = 0; i < n; ++i) {
    const float v = src[i] > 0.f ? std::min(src[i], 1.f) : 0.f;
    dst[i] = static_cast<uint8_t>(round ? std::lround(v * 255.f) : static_cast<long>(v * 255.f));
  }
  if (im.channels == 3) cv::cvtColor(u8, u8, cv::COLOR_RGB2BGR);
  if (im.channels == 4) cv::cvtColor(u8, u8, cv::COLOR_RGBA2BGRA);
  write_encoded(path, u8);
}

void write_image16(const std::string& path, const Image& im) {
  cv::Mat u16(im.height, im.width, CV_16UC(im.channels));
  uint16_t* dst = u16.ptr<uint16_t>();
  const size_t n = static_cast<size_t>(im.width) * im.height * im.channels;
  for (size_t i = 0; i < n; ++i) {
    const float v = im.pixels[i] > 0.f ? std::min(im.pixels[i], 1.f) : 0.f;
    dst[i] = static_cast<uint16_t>(std::lround(v * 65535.f));
  }
  if (im.channels == 3) cv::cvtColor(u16, u16, cv::COLOR_RGB2BGR);
  if (im.channels == 4) cv::cvtColor(u16, u16, cv::COLOR_RGBA2BGRA);
  write_encoded(path, u16);
}

bool readable_output(const std::string& path, int64_t max_pixels) {
  DecodeLimits l;
  l.max_pixels = max_pixels;
  return readable_output(path, l);
}

bool readable_output(const std::string& path, const DecodeLimits& limits) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) == 0) return false;
  try {
    check_image_size(path, limits);  // a header a decoder would size huge buffers from
    if (lower_ext(path) == ".exr") {

      // isComplete() only checks the offset table: a file cut in half can pass it. Decode
      // every scanline, 64 rows at a time, into a small buffer.
      Imf::InputFile f(path.c_str());
      if (!f.isComplete()) return false;
      const auto dw = f.header().dataWindow();
      const int w = dw.max.x - dw.min.x + 1;
      const auto& cl = f.header().channels();
      int nch = 0;
      for (auto c = cl.begin(); c != cl.end(); ++c) ++nch;
      constexpr int kRows = 64;
      std::vector<float> buf(static_cast<size_t>(w) * kRows * std::max(nch, 1));
      for (int64_t y = dw.min.y; y <= dw.max.y; y += kRows) {  // 64-bit: no overflow near INT_MAX
        const int y0 = static_cast<int>(y);
        const int y1 = static_cast<int>(std::min<int64_t>(dw.max.y, y + kRows - 1));
        Imf::FrameBuffer fb;
        const size_t xs = sizeof(float) * nch, ys = xs * w;
        int k = 0;
        for (auto c = cl.begin(); c != cl.end(); ++c, ++k)
          fb.insert(c.name(), Imf::Slice::Make(Imf::FLOAT, buf.data() + k, Imath::V2i(dw.min.x, y0), w,
                                               y1 - y0 + 1, xs, ys));
        f.setFrameBuffer(fb);
        f.readPixels(y0, y1);
      }
      return true;
    }
    return !cv::imread(path, cv::IMREAD_UNCHANGED).empty();
  } catch (const std::exception&) {
    return false;
  }
}

struct VideoReader::Impl {
  cv::VideoCapture cap;  // frame count, rate and size; the frames unless deep
  std::unique_ptr<DeepVideoFrames> deep;
  std::string path;
  int index = 0;
};

VideoReader::VideoReader(const std::string& path, bool deep) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  std::error_code ec;
  CK_CHECK(fs::is_regular_file(path, ec), IoError, path, ": video file does not exist");
  impl_->cap.open(path, cv::CAP_FFMPEG);
  CK_CHECK(impl_->cap.isOpened(), IoError, path, ": cannot open video (OpenCV FFmpeg backend)");
  if (deep) impl_->deep = std::make_unique<DeepVideoFrames>(path, width(), height());
}
VideoReader::~VideoReader() = default;

int VideoReader::frame_count() const {
  return static_cast<int>(impl_->cap.get(cv::CAP_PROP_FRAME_COUNT));
}
double VideoReader::fps() const { return impl_->cap.get(cv::CAP_PROP_FPS); }
int VideoReader::width() const { return static_cast<int>(impl_->cap.get(cv::CAP_PROP_FRAME_WIDTH)); }
int VideoReader::height() const { return static_cast<int>(impl_->cap.get(cv::CAP_PROP_FRAME_HEIGHT)); }

bool VideoReader::next(Image& out) {
  if (impl_->deep) {
    if (!impl_->deep->next(out)) return false;
    ++impl_->index;
    return true;
  }
  cv::Mat m;
  if (!impl_->cap.read(m) || m.empty()) return false;
  cv::Mat f;
  m.convertTo(f, CV_32F, m.depth() == CV_16U ? 1.0 / 65535.0 : 1.0 / 255.0);
  if (f.channels() == 3) cv::cvtColor(f, f, cv::COLOR_BGR2RGB);
  out.width = f.cols;
  out.height = f.rows;
  out.channels = f.channels();
  out.pixels.assign(reinterpret_cast<const float*>(f.datastart), reinterpret_cast<const float*>(f.dataend));
  ++impl_->index;
  return true;
}

}  // namespace corridorkey::io
