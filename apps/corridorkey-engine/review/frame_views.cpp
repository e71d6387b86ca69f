#include "review/frame_views.h"

#include <corridorkey/clips.h>
#include <corridorkey/colour.h>

#include <zlib.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

namespace corridorkey::review {

/// Least recently used out first once the bytes pass the limit. Thread-safe.
class LruBytes {
 public:
  explicit LruBytes(int64_t limit) : limit_(limit) {}
  std::shared_ptr<const void> get(const std::string& key) {
    std::lock_guard<std::mutex> l(m_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second.pos);
    return it->second.value;
  }
  void put(const std::string& key, std::shared_ptr<const void> v, int64_t bytes) {
    std::lock_guard<std::mutex> l(m_);
    if (bytes > limit_ || map_.count(key)) return;
    order_.push_front(key);
    map_[key] = {std::move(v), bytes, order_.begin()};
    used_ += bytes;
    while (used_ > limit_) {
      auto it = map_.find(order_.back());
      used_ -= it->second.bytes;
      map_.erase(it);
      order_.pop_back();
    }
  }

 private:
  struct Entry {
    std::shared_ptr<const void> value;
    int64_t bytes;
    std::list<std::string>::iterator pos;
  };
  const int64_t limit_;
  std::mutex m_;
  std::list<std::string> order_;
  std::unordered_map<std::string, Entry> map_;
  int64_t used_ = 0;
};

namespace {

int threads() { return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)); }

std::string stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return path + ":missing";
  return path + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

uint8_t level(float v) {  // rounded to the nearest of 256 levels
  if (!(v > 0)) return 0;
  if (v >= 1) return 255;
  return static_cast<uint8_t>(v * 255.0f + 0.5f);
}

float srgb_decode(float c) {
  return c <= 0.04045f ? c / 12.92f : std::pow((c + 0.055f) / 1.055f, 2.4f);
}

/// The view-only background in linear light at (x, y).
struct Background {
  float a[3] = {0, 0, 0}, b[3] = {0, 0, 0};
  bool checker = false;
  explicit Background(const std::string& spec) {
    auto set = [](float* d, float r, float g, float bl) {
      d[0] = srgb_decode(r), d[1] = srgb_decode(g), d[2] = srgb_decode(bl);
    };
    if (spec == "checker") {  // 16-pixel squares of sRGB 0.6 and 0.4 grey
      checker = true;
      set(a, 0.6f, 0.6f, 0.6f);
      set(b, 0.4f, 0.4f, 0.4f);
    } else if (spec == "grey") {
      set(a, 0.5f, 0.5f, 0.5f);
    } else if (spec.size() == 7 && spec[0] == '#') {
      unsigned v = std::stoul(spec.substr(1), nullptr, 16);
      set(a, ((v >> 16) & 255) / 255.0f, ((v >> 8) & 255) / 255.0f, (v & 255) / 255.0f);
    }  // black: zeros
  }
  const float* at(int x, int y) const { return checker && ((x >> 4) + (y >> 4)) % 2 ? b : a; }
};

Pixels grey(const Image& im) {
  Pixels p;
  p.width = im.width, p.height = im.height, p.channels = 1;
  p.data.resize(static_cast<size_t>(im.width) * im.height);
  for (size_t i = 0; i < p.data.size(); ++i) p.data[i] = level(im.pixels[i * im.channels]);
  return p;
}

/// The first three channels (a grey image repeated), as they are.
Image rgb_of(const Image& im) {
  Image o;
  o.width = im.width, o.height = im.height, o.channels = 3;
  o.pixels.resize(static_cast<size_t>(im.width) * im.height * 3);
  const size_t n = static_cast<size_t>(im.width) * im.height;
  for (size_t i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k) o.pixels[i * 3 + k] = im.pixels[i * im.channels + std::min(k, im.channels - 1)];
  return o;
}

Pixels quantize(const Image& rgb) {
  Pixels p;
  p.width = rgb.width, p.height = rgb.height, p.channels = 3;
  p.data.resize(rgb.pixels.size());
  for (size_t i = 0; i < p.data.size(); ++i) p.data[i] = level(rgb.pixels[i]);
  return p;
}

ColourConversion display_of(const ViewParams& v, const std::string& ocio_config) {
  static std::mutex m;
  static std::map<std::string, ColourConversion> made;  // a processor per display, built once
  std::lock_guard<std::mutex> l(m);
  auto it = made.find(v.display);
  if (it == made.end()) it = made.emplace(v.display, linear_to_display(ocio_config, v.display)).first;
  return it->second;
}

/// Scene-linear RGB to the display: exposure, then the display transform, then 8 bits.
Pixels show_linear(Image lin, const ViewParams& v, const std::string& ocio_config) {
  if (v.exposure != 0) {
    const float gain = static_cast<float>(std::exp2(v.exposure));
    for (auto& x : lin.pixels) x *= gain;
  }
  display_of(v, ocio_config).apply(lin, threads());
  return quantize(lin);
}

/// sRGB-encoded RGB (an sRGB plate, a comp): as it is on the sRGB display at exposure 0.
Pixels show_srgb(const Image& im, const ViewParams& v, const std::string& ocio_config) {
  if (v.display.empty() && v.exposure == 0 && im.channels == 3) return quantize(im);  // no copy
  Image rgb = rgb_of(im);
  if (v.display.empty() && v.exposure == 0) return quantize(rgb);
  srgb_to_linear().apply(rgb, threads());
  return show_linear(std::move(rgb), v, ocio_config);
}

HttpError missing(const std::string& what, const ClipEntry& c, int frame) {
  return HttpError(404, c.clip.name + " frame " + std::to_string(frame) + " (" +
                            c.clip.stems[static_cast<size_t>(frame)] + "): no " + what);
}

}  // namespace

std::string file_stamp(const std::string& path) { return stamp(path); }

const Image& in_display_window(const Image& im, const FrameWindow& w, Image& scratch) {
  if (w.whole() || im.width != w.frame_width || im.height != w.frame_height || w.x < 0 || w.y < 0 ||
      w.width <= 0 || w.height <= 0 || w.x + w.width > im.width || w.y + w.height > im.height)
    return im;
  scratch.width = w.width, scratch.height = w.height, scratch.channels = im.channels;
  const size_t row = static_cast<size_t>(w.width) * im.channels;
  scratch.pixels.resize(row * static_cast<size_t>(w.height));
  for (int y = 0; y < w.height; ++y) {
    const float* s = &im.pixels[(static_cast<size_t>(y + w.y) * im.width + w.x) * im.channels];
    std::copy(s, s + row, scratch.pixels.begin() + static_cast<std::ptrdiff_t>(row * static_cast<size_t>(y)));
  }
  return scratch;
}

std::string encode_png(const Pixels& p, int zlevel) {
  const size_t row = static_cast<size_t>(p.width) * p.channels;
  // Filter "Sub" on every row: neighbouring pixels differ little, so the deltas compress
  // well under run-length deflate, at a fraction of full deflate's time. Stored (level 0):
  // no filter, nothing to gain.
  const bool sub = zlevel > 0;
  std::vector<uint8_t> raw((row + 1) * static_cast<size_t>(p.height));
  for (int y = 0; y < p.height; ++y) {
    uint8_t* d = raw.data() + (row + 1) * static_cast<size_t>(y);
    const uint8_t* s = p.data.data() + row * static_cast<size_t>(y);
    d[0] = sub ? 1 : 0;
    if (!sub) {
      std::memcpy(d + 1, s, row);
      continue;
    }
    for (size_t i = 0; i < row; ++i) d[1 + i] = static_cast<uint8_t>(s[i] - (i >= static_cast<size_t>(p.channels) ? s[i - p.channels] : 0));
  }
  z_stream z{};
  deflateInit2(&z, zlevel, Z_DEFLATED, 15, 8, zlevel == 0 ? Z_DEFAULT_STRATEGY : Z_RLE);
  std::string idat(deflateBound(&z, static_cast<uLong>(raw.size())), '\0');
  z.next_in = raw.data();
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(idat.data());
  z.avail_out = static_cast<uInt>(idat.size());
  deflate(&z, Z_FINISH);
  idat.resize(z.total_out);
  deflateEnd(&z);
  std::string out("\x89PNG\r\n\x1a\n", 8);
  auto be32 = [](std::string& s, uint32_t v) {
    for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 255));
  };
  auto chunk = [&](const char* type, const std::string& data) {
    be32(out, static_cast<uint32_t>(data.size()));
    const size_t start = out.size();
    out.append(type, 4);
    out += data;
    be32(out, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(out.data() + start), static_cast<uInt>(out.size() - start))));
  };
  std::string ihdr;
  be32(ihdr, static_cast<uint32_t>(p.width));
  be32(ihdr, static_cast<uint32_t>(p.height));
  ihdr += std::string{8, static_cast<char>(p.channels == 1 ? 0 : 2), 0, 0, 0};
  chunk("IHDR", ihdr);
  chunk("IDAT", idat);
  chunk("IEND", "");
  return out;
}

void ViewParams::validate() const {
  static const char* views[] = {"plate", "hint", "matte", "fg", "processed", "comp", "diff"};
  if (std::none_of(std::begin(views), std::end(views), [&](const char* s) { return view == s; }))
    throw HttpError(400, "view '" + view + "': expected plate, hint, matte, fg, processed, comp or diff");
  if (view == "diff") parse_output(diff_of);
  const bool hex = bg.size() == 7 && bg[0] == '#' && bg.find_first_not_of("0123456789abcdefABCDEF", 1) == std::string::npos;
  if (bg != "checker" && bg != "black" && bg != "grey" && !hex)
    throw HttpError(400, "bg '" + bg + "': expected checker, black, grey or #rrggbb");
  if (!std::isfinite(exposure) || std::fabs(exposure) > 16)
    throw HttpError(400, "exposure: expected stops in -16..16");
}

std::string ViewParams::key() const {
  char e[32];
  std::snprintf(e, sizeof e, "%.4f", exposure);
  return view + "|" + diff_of + "|" + (side_b ? "b" : "a") + "|" + bg + "|" + e + "|" + display;
}

FrameViews::FrameViews(const ClipLibrary& library, int64_t cache_bytes)
    : lib_(library), images_(std::make_unique<LruBytes>(cache_bytes * 3 / 4)),
      previews_(std::make_unique<LruBytes>(cache_bytes / 4)) {}
FrameViews::~FrameViews() = default;

std::shared_ptr<const Image> FrameViews::read(const std::string& path) {
  const auto real = lib_.checked(path);
  const auto key = stamp(real);
  if (auto hit = images_->get(key)) return std::static_pointer_cast<const Image>(hit);
  std::shared_ptr<const Image> im;
  try {
    im = std::make_shared<const Image>(read_frame_file(real));
  } catch (const std::exception& e) {
    throw HttpError(422, e.what());
  }
  images_->put(key, im, static_cast<int64_t>(im->pixels.size() * sizeof(float)));
  return im;
}

std::shared_ptr<const Image> FrameViews::read_plate(const ClipEntry& c, int frame) {
  if (c.clip.input.video.empty()) return read(lib_.plate_file(c, frame));
  const auto real = lib_.checked(c.clip.input.video);
  const auto key = stamp(real) + "#" + std::to_string(frame);
  if (auto hit = images_->get(key)) return std::static_pointer_cast<const Image>(hit);
  std::shared_ptr<const Image> im;
  try {
    im = std::make_shared<const Image>(read_video_frame(real, frame));
  } catch (const std::exception& e) {
    throw HttpError(422, e.what());
  }
  images_->put(key, im, static_cast<int64_t>(im->pixels.size() * sizeof(float)));
  return im;
}

Pixels FrameViews::display(const Image& im, bool comp, const ViewParams& v) const {
  const auto& cfg = lib_.config().ocio_config;
  if (comp) return show_srgb(im, v, cfg);
  // Linear premultiplied RGBA over the background: rgb + bg * (1 - a).
  const Background bg(v.bg);
  Image lin;
  lin.width = im.width, lin.height = im.height, lin.channels = 3;
  lin.pixels.resize(static_cast<size_t>(im.width) * im.height * 3);
  for (int y = 0; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x) {
      const size_t i = static_cast<size_t>(y) * im.width + x;
      const float* p = &im.pixels[i * im.channels];
      const float a = im.channels >= 4 ? p[3] : 1.0f;
      const float* b = bg.at(x, y);
      for (int k = 0; k < 3; ++k) lin.pixels[i * 3 + k] = p[k] + b[k] * (1.0f - a);
    }
  return show_linear(std::move(lin), v, cfg);
}

FrameWindow FrameViews::plate_window(const ClipEntry& c, int frame) const {
  if (!c.clip.input.video.empty()) return {};  // a video has no overscan
  return plate_display_window(lib_.plate_file(c, frame));
}

Pixels FrameViews::render(const ClipEntry& c, int frame, const ViewParams& v) {
  const auto& cfg = lib_.config().ocio_config;
  auto output = [&](Output k, bool b, const char* what) {
    const auto f = lib_.output_file(c, frame, k, b);
    if (f.empty()) throw missing(std::string(what) + (b ? " in the compare root" : " output"), c, frame);
    return read(f);
  };
  if (v.view == "plate") {
    const auto im = read_plate(c, frame);
    if (im->channels < 3) return grey(*im);
    const auto src = c.clip.input.video.empty() ? lib_.plate_file(c, frame) : c.clip.input.video;
    PlateColour pc;
    try {
      pc = plate_colour(src, lib_.plate_colorspace(c), cfg);
    } catch (const std::exception& e) {
      throw HttpError(422, e.what());
    }
    if (pc.srgb) return show_srgb(*im, v, cfg);
    Image rgb = rgb_of(*im);
    pc.to_linear.apply(rgb, threads());
    return show_linear(std::move(rgb), v, cfg);
  }
  if (v.view == "hint") {
    const auto f = lib_.hint_file(c, frame);
    if (f.empty()) throw missing("hint (no AlphaHint/ file, no generated hint yet)", c, frame);
    Image cut;
    return grey(in_display_window(*read(f), plate_window(c, frame), cut));
  }
  if (v.view == "matte") return grey(*output(Output::Matte, v.side_b, "Matte"));
  if (v.view == "comp") {  // a PNG: the keyed frame, cut to the display window as the EXR outputs are read
    Image cut;
    return show_srgb(in_display_window(*output(Output::Comp, v.side_b, "Comp"), plate_window(c, frame), cut), v, cfg);
  }
  if (v.view == "processed") {
    const auto p = output(Output::Processed, v.side_b, "Processed");
    if (p->channels < 4) throw HttpError(422, "Processed output without an alpha channel");
    return display(*p, false, v);
  }
  if (v.view == "fg") {  // FG (sRGB, straight) over the background with the matte, in linear light
    const auto fg = output(Output::Fg, v.side_b, "FG");
    const auto a = output(Output::Matte, v.side_b, "Matte (FG is shown with it)");
    if (fg->width != a->width || fg->height != a->height || fg->channels < 3)
      throw HttpError(422, "FG and Matte of this frame differ in size");
    Image lin = rgb_of(*fg);
    srgb_to_linear().apply(lin, threads());
    Image premult;
    premult.width = lin.width, premult.height = lin.height, premult.channels = 4;
    premult.pixels.resize(lin.pixels.size() / 3 * 4);
    for (size_t i = 0; i < lin.pixels.size() / 3; ++i) {
      const float al = a->pixels[i * a->channels];
      for (int k = 0; k < 3; ++k) premult.pixels[i * 4 + k] = lin.pixels[i * 3 + k] * al;
      premult.pixels[i * 4 + 3] = al;
    }
    return display(premult, false, v);
  }
  // diff: |A - B| x 8 of one output, on its stored values, shown as they are.
  const Output k = parse_output(v.diff_of);
  const auto a = output(k, false, v.diff_of.c_str()), b = output(k, true, v.diff_of.c_str());
  if (a->width != b->width || a->height != b->height)
    throw HttpError(422, "the two roots' " + v.diff_of + " differ in size");
  Image d;
  d.width = a->width, d.height = a->height, d.channels = std::min(3, std::min(a->channels, b->channels));
  d.pixels.resize(static_cast<size_t>(d.width) * d.height * d.channels);
  for (size_t i = 0; i < static_cast<size_t>(d.width) * d.height; ++i)
    for (int ch = 0; ch < d.channels; ++ch)
      d.pixels[i * d.channels + ch] = 8.0f * std::fabs(a->pixels[i * a->channels + ch] - b->pixels[i * b->channels + ch]);
  return d.channels == 1 ? grey(d) : quantize(rgb_of(d));
}

std::shared_ptr<const std::string> FrameViews::png(const ClipEntry& c, int frame, const ViewParams& v) {
  v.validate();
  if (v.side_b && c.compare_output.empty()) throw HttpError(404, "no compare root (--compare-root DIR)");
  // The key names every file the view reads, with its size and time.
  std::string key = c.id + "|" + std::to_string(frame) + "|" + v.key();
  auto add = [&](const std::string& f) {
    key += '|';
    key += f.empty() ? std::string("-") : stamp(f);
  };
  add(c.clip.input.video.empty() ? lib_.plate_file(c, frame) : c.clip.input.video);
  add(lib_.hint_file(c, frame));
  for (int k = 0; k < 4; ++k) {
    add(lib_.output_file(c, frame, static_cast<Output>(k), false));
    if (!c.compare_output.empty()) add(lib_.output_file(c, frame, static_cast<Output>(k), true));
  }
  if (v.view == "plate") {
    key += '|';
    key += lib_.plate_colorspace(c);
  }
  if (auto hit = previews_->get(key)) return std::static_pointer_cast<const std::string>(hit);
  auto out = std::make_shared<const std::string>(encode_png(render(c, frame, v), 1));
  previews_->put(key, out, static_cast<int64_t>(out->size()));
  return out;
}

json FrameViews::probe(const ClipEntry& c, int frame, int x, int y) {
  json r = {{"x", x}, {"y", y}, {"frame", frame}};
  const auto plate = read_plate(c, frame);
  if (x < 0 || y < 0 || x >= plate->width || y >= plate->height)
    throw HttpError(400, "pixel (" + std::to_string(x) + ", " + std::to_string(y) + ") lies outside the " +
                             std::to_string(plate->width) + "x" + std::to_string(plate->height) + " frame");
  json rgb = json::array();
  for (int k = 0; k < std::min(plate->channels, 3); ++k) rgb.push_back(plate->at(x, y, k));
  r["plate"] = rgb;
  for (const auto& [b, name] : {std::pair{false, "alpha"}, {true, "alpha_b"}}) {
    const auto f = lib_.output_file(c, frame, Output::Matte, b);
    if (f.empty()) continue;
    const auto m = read(f);
    if (x < m->width && y < m->height) r[name] = m->at(x, y, 0);
  }
  return r;
}

json FrameViews::matte_mse(const ClipEntry& c) {
  json out = json::array();
  for (int f = 0; f < c.clip.input.count; ++f) {
    const auto a = lib_.output_file(c, f, Output::Matte, false), b = lib_.output_file(c, f, Output::Matte, true);
    if (a.empty() || b.empty()) {
      out.push_back(nullptr);
      continue;
    }
    const auto key = stamp(a) + "|" + stamp(b);
    {
      std::lock_guard<std::mutex> l(mse_m_);
      if (auto it = mse_.find(key); it != mse_.end()) {
        out.push_back(it->second);
        continue;
      }
    }
    const auto ia = read(a), ib = read(b);
    if (ia->width != ib->width || ia->height != ib->height) {
      out.push_back(nullptr);
      continue;
    }
    double sum = 0;
    const size_t n = static_cast<size_t>(ia->width) * ia->height;
    for (size_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(ia->pixels[i * ia->channels]) - ib->pixels[i * ib->channels];
      sum += d * d;
    }
    const double mse = sum / static_cast<double>(n);
    std::lock_guard<std::mutex> l(mse_m_);
    mse_[key] = mse;
    out.push_back(mse);
  }
  return out;
}

}  // namespace corridorkey::review
