#include "review/clip_library.h"

#include "review/json_input.h"

#include <corridorkey/base/hash.h>
#include <corridorkey/colour.h>
#include <corridorkey/errors.h>
#include <corridorkey/hint.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace corridorkey::review {
namespace fs = std::filesystem;

namespace {

/// FNV-1a of the clip folder: an id that stays the same when other clips come and go.
std::string clip_id(const std::string& root) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(base::fnv1a64(root)));
  return b;
}

/// The real path of an existing path; of a missing one, its absolute normal form (an
/// output root not made yet).
std::string real_or_absolute(const std::string& p) {
  std::error_code ec;
  auto r = fs::canonical(p, ec);
  if (ec) r = fs::absolute(p, ec).lexically_normal();
  auto s = r.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         (dir == "/" || path[dir.size()] == '/'));
}

bool is_file(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

const char* folder_of(Output k) {
  return k == Output::Matte ? "Matte" : k == Output::Fg ? "FG" : k == Output::Processed ? "Processed" : "Comp";
}

/// A clip's garbage or holdout matte as the page tells it; null for none.
json matte_summary(const ClipFrames& m) {
  if (!m.video.empty()) return "video";
  if (m.files.empty()) return nullptr;
  return m.files.size() == 1 ? std::string("one file for every frame") : std::to_string(m.files.size()) + " files";
}

}  // namespace

Output parse_output(const std::string& n) {
  if (n == "matte") return Output::Matte;
  if (n == "fg") return Output::Fg;
  if (n == "processed") return Output::Processed;
  if (n == "comp") return Output::Comp;
  throw HttpError(400, "unknown output '" + n + "' (expected matte, fg, processed or comp)");
}

int frame_index(const ClipEntry& c, const std::string& text) {
  int v = -1;
  // from_chars: an index past int's range is an error here, where sscanf's was undefined.
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || r.ec != std::errc() ||
      r.ptr != text.data() + text.size())
    throw HttpError(400, "frame '" + text + "' is not a frame index");
  if (v < 0 || v >= c.clip.input.count)
    throw HttpError(404, "clip " + c.clip.name + " has no frame " + text + " (it has " +
                             std::to_string(c.clip.input.count) + ", from 0)");
  return v;
}

ClipLibrary::ClipLibrary(const ReviewConfig& config) : config_(config) {
  for (const auto& r : config.roots) {
    roots_.push_back(real_or_absolute(r));
    allowed_.push_back(roots_.back());
  }
  write_roots_ = roots_;
  if (!config.output_root.empty()) write_roots_.push_back(real_or_absolute(config.output_root));
  if (!config.output_root.empty()) allowed_.push_back(real_or_absolute(config.output_root));
  if (!config.compare_root.empty()) allowed_.push_back(real_or_absolute(config.compare_root));
  list();  // IoError now, at start, for roots that hold no clip
}

json ClipLibrary::list() {
  std::vector<std::string> skipped;
  const auto listed = list_clips(config_.roots, config_.output_root, &skipped);
  std::map<std::string, std::shared_ptr<const ClipEntry>> clips;
  json out = json::array();
  for (const auto& l : listed) {
    auto e = std::make_shared<ClipEntry>();
    e->id = clip_id(real_or_absolute(l.root));
    e->clip = l;
    if (!config_.compare_root.empty()) e->compare_output = (fs::path(config_.compare_root) / l.name).string();
    int counts[4] = {0, 0, 0, 0};
    for (int f = 0; f < l.input.count; ++f)
      for (int k = 0; k < 4; ++k) counts[k] += !output_file(*e, f, static_cast<Output>(k), false).empty();
    int most = 0, kinds = 0;
    for (int k = 0; k < 4; ++k) most = std::max(most, counts[k]), kinds += counts[k] > 0;
    bool all = most == l.input.count;
    for (int k = 0; k < 4; ++k) all = all && (counts[k] == 0 || counts[k] == l.input.count);
    const auto run = run_record(*e);
    json j = {{"id", e->id},
              {"name", l.name},
              {"folder", l.root},
              {"output", l.output},
              {"frames", l.input.count},
              {"video", !l.input.video.empty()},
              {"fps", l.input.fps > 0 ? l.input.fps : 24.0},
              {"hints", l.hint.count > 0 ? "files" : "generated"},
              {"mattes", {{"garbage", matte_summary(l.garbage)}, {"holdout", matte_summary(l.holdout)}}},
              {"status", most == 0 ? "none" : all ? "keyed" : "partial"},
              {"outputs", {{"matte", counts[0]}, {"fg", counts[1]}, {"processed", counts[2]}, {"comp", counts[3]}}},
              {"compare", !e->compare_output.empty() && fs::is_directory(e->compare_output)},
              {"warnings", l.warnings}};
    if (run.is_object() && !run.contains("error")) {
      j["screen"] = run.value("screen", "");
      j["run"] = {{"profile", run.value("profile", "")},     {"precision", run.value("precision", "")},
                  {"finished", run.value("finished", "")},   {"frames_done", run.value("frames_done", 0)},
                  {"frames_failed", run.value("frames_failed", 0)}, {"interrupted", run.value("interrupted", false)}};
    }
    out.push_back(std::move(j));
    clips[e->id] = std::move(e);
  }
  std::lock_guard<std::mutex> l(m_);
  clips_ = std::move(clips);
  return {{"clips", std::move(out)}, {"skipped", skipped}};
}

std::shared_ptr<const ClipEntry> ClipLibrary::find(const std::string& id) const {
  std::lock_guard<std::mutex> l(m_);
  auto it = clips_.find(id);
  if (it == clips_.end()) throw HttpError(404, "no clip with id '" + id + "' (reload the clip list)");
  return it->second;
}

std::string ClipLibrary::checked(const std::string& path) const {
  std::error_code ec;
  const auto real = fs::canonical(path, ec);
  if (ec) throw HttpError(404, path + ": does not exist");
  const auto r = real.string();
  if (!allowed(r))
    throw HttpError(403, path + ": refused: its real path " + r +
                             " lies outside the roots and output folders this review serves");
  if (!fs::is_regular_file(real, ec)) throw HttpError(404, path + ": not a regular file");
  return r;
}

bool ClipLibrary::allowed(const std::string& real) const {
  for (const auto& a : allowed_)
    if (under(real, a)) return true;
  return false;
}

int ClipLibrary::open_checked(const std::string& real) const {
  const int fd = ::open(real.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw HttpError(404, real + ": cannot open: " + std::strerror(errno));
  std::error_code ec;
  const auto opened = fs::read_symlink("/proc/self/fd/" + std::to_string(fd), ec).string();
  struct stat st {};
  if (ec || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !allowed(opened)) {
    ::close(fd);
    throw HttpError(403, real + ": refused: it changed between its check and its opening");
  }
  return fd;
}

void ClipLibrary::check_inputs(const ClipEntry& c) const {
  for (const ClipFrames* f : {&c.clip.input, &c.clip.hint, &c.clip.garbage, &c.clip.holdout}) {
    if (!f->video.empty()) (void)checked(f->video);
    for (const auto& file : f->files) (void)checked(file);
  }
}

std::string ClipLibrary::raw_file(const std::string& root_index, const std::string& rel) const {
  if (root_index.empty() || root_index.find_first_not_of("0123456789") != std::string::npos ||
      root_index.size() > 4 || std::stoul(root_index) >= roots_.size())
    throw HttpError(404, "no root '" + root_index + "'");
  if (rel.empty() || rel.front() == '/' || rel.find('\\') != std::string::npos ||
      rel.find('\0') != std::string::npos)
    throw HttpError(403, "refused: a path relative to the root is expected");
  std::stringstream ss(rel);
  std::string part;
  while (std::getline(ss, part, '/'))
    if (part.empty() || part == "." || part == "..")
      throw HttpError(403, "refused: '" + rel + "' leaves its root or is not a plain relative path");
  return checked((fs::path(roots_[std::stoul(root_index)]) / rel).string());
}

std::string ClipLibrary::writable_folder(const std::string& dir) const {
  std::error_code ec;
  // The folder that holds it is checked before anything is made: a clip folder that is a
  // link out of the roots gets no Output/ made through it.
  const auto parent = fs::canonical(fs::path(dir).parent_path(), ec);
  if (ec) throw HttpError(404, dir + ": its folder does not exist");
  if (!allowed(parent.string()))
    throw HttpError(403, dir + ": refused: it lies outside the roots and output folders this review serves");
  fs::create_directories(dir, ec);
  const auto real = fs::canonical(dir, ec);
  if (ec || !fs::is_directory(real)) throw HttpError(500, dir + ": cannot make the folder");
  if (!allowed(real.string()))
    throw HttpError(403, dir + ": refused: its real path " + real.string() +
                             " lies outside the roots and output folders this review serves");
  return real.string();
}

int ClipLibrary::open_writable_folder(const std::string& dir) const {
  const auto real = writable_folder(dir);
  const int fd = ::open(real.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw HttpError(500, real + ": cannot open the folder: " + std::strerror(errno));
  std::error_code ec;
  const auto opened = fs::read_symlink("/proc/self/fd/" + std::to_string(fd), ec).string();
  if (ec || !allowed(opened)) {
    ::close(fd);
    throw HttpError(403, real + ": refused: it changed between its check and its opening");
  }
  return fd;
}

void ClipLibrary::check_outputs(const ClipEntry& c) const {
  // Every folder and file a key writes, as the pipeline names them (Output/ itself was made
  // and checked by writable_folder()). One that exists must resolve under the roots or the
  // output root; a missing one is made by the job inside a checked folder.
  const fs::path out = c.clip.output;
  for (const fs::path& p : {out / "FG", out / "Matte", out / "Processed", out / "Comp", out / "AlphaHint",
                            out / "run.json"}) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    std::error_code ec;
    const auto real = fs::canonical(p, ec).string();
    bool inside = false;
    for (const auto& r : write_roots_) inside = inside || (!ec && under(real, r));
    if (!inside)
      throw HttpError(403, p.string() + ": refused: " +
                               (ec ? std::string("a link whose target does not exist")
                                   : "it leads to " + real + ", outside the roots and output root") +
                               "; the key would write there");
  }
}

std::string ClipLibrary::raw_link(const std::string& path) const {
  std::error_code ec;
  const auto real = fs::canonical(path, ec).string();
  if (ec) return "";
  for (size_t i = 0; i < roots_.size(); ++i) {
    if (!under(real, roots_[i]) || real == roots_[i]) continue;
    std::string link = "/raw/" + std::to_string(i) + "/";
    static const char* hex = "0123456789ABCDEF";
    for (unsigned char ch : real.substr(roots_[i] == "/" ? 1 : roots_[i].size() + 1)) {
      if (std::isalnum(ch) || ch == '/' || ch == '-' || ch == '_' || ch == '.' || ch == '~') link += static_cast<char>(ch);
      else link += '%', link += hex[ch >> 4], link += hex[ch & 15];
    }
    return link;
  }
  return "";
}

std::string ClipLibrary::plate_file(const ClipEntry& c, int frame) const {
  if (!c.clip.input.video.empty()) return "";
  return c.clip.input.files.at(static_cast<size_t>(frame));
}

std::string ClipLibrary::hint_file(const ClipEntry& c, int frame) const {
  if (!c.clip.hint.files.empty())
    return static_cast<size_t>(frame) < c.clip.hint.files.size() ? c.clip.hint.files[static_cast<size_t>(frame)] : "";
  if (!c.clip.hint.video.empty()) return "";
  const auto p = (fs::path(c.clip.output) / "AlphaHint" / (c.clip.stems.at(static_cast<size_t>(frame)) + ".png")).string();
  return is_file(p) ? p : "";
}

ClipLibrary::Matte ClipLibrary::matte(const ClipEntry& c, int frame, bool holdout) const {
  const ClipFrames& m = holdout ? c.clip.holdout : c.clip.garbage;
  if (m.video.empty() && m.files.empty()) return {};
  if (m.video.empty() && m.files.size() == 1) return {checked(m.files.front()), false};  // every frame's
  // As the pipeline pairs them (resolve_mattes): by position, one per frame; a single-frame
  // video is no exception. Fewer or more would be refused by a key (without
  // --allow-mismatch), so the tweak refuses them too rather than show what no key gives.
  const int n = c.clip.input.count;
  if (m.count != n) {
    const auto where = m.video.empty() ? fs::path(m.files.front()).parent_path().string() : m.video;
    throw HttpError(422, where + ": " + (holdout ? "HoldoutMatte" : "GarbageMatte") + " has " +
                             std::to_string(m.count) + " frames but the clip has " + std::to_string(n) +
                             " (one file for every frame, or one per frame, paired by position)");
  }
  if (!m.video.empty()) return {checked(m.video), true};
  return {checked(m.files.at(static_cast<size_t>(frame))), false};
}

std::string ClipLibrary::output_file(const ClipEntry& c, int frame, Output kind, bool side_b) const {
  if (side_b && c.compare_output.empty()) return "";
  const fs::path dir = fs::path(side_b ? c.compare_output : c.clip.output) / folder_of(kind);
  const auto& stem = c.clip.stems.at(static_cast<size_t>(frame));
  for (const char* ext : {".exr", ".png"}) {
    if (kind != Output::Comp && std::string(ext) == ".png") continue;
    const auto p = (dir / (stem + ext)).string();
    if (is_file(p)) return p;
  }
  return "";
}

json ClipLibrary::run_record(const ClipEntry& c, bool side_b) const {
  const auto dir = side_b ? c.compare_output : c.clip.output;
  if (dir.empty()) return nullptr;
  const auto path = (fs::path(dir) / "run.json").string();
  if (!is_file(path)) return nullptr;
  try {
    std::ifstream f(checked(path), std::ios::binary);
    f.seekg(0, std::ios::end);
    if (f.tellg() > (std::streamoff{16} << 20)) return {{"error", path + ": larger than 16 MiB; not read"}};
    f.seekg(0);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::string error;
    const json j = parse_json_limited(text, error);
    if (!error.empty()) return {{"error", path + ": " + error}};
    if (!j.is_object()) return {{"error", path + ": not a JSON object"}};
    return run_summary(j);  // the known fields only: nothing else of the file reaches the page
  } catch (const std::exception& e) {
    return {{"error", path + ": " + e.what()}};
  }
}

std::string ClipLibrary::plate_colorspace(const ClipEntry& c) const {
  const auto run = run_record(c);
  if (run.is_object() && run.contains("input_colorspace") && run["input_colorspace"].is_string())
    return run["input_colorspace"].get<std::string>();
  return config_.input_colorspace;
}

json ClipLibrary::details(const ClipEntry& c) {
  const auto& l = c.clip;
  json frames = json::array();
  const auto run = run_record(c);
  std::map<std::string, std::string> failed;
  if (run.is_object() && run.contains("failures") && run["failures"].is_array())
    for (const auto& f : run["failures"])
      if (f.is_object()) failed[f.value("frame", "")] = f.value("message", "");
  for (int f = 0; f < l.input.count; ++f) {
    const auto& stem = l.stems[static_cast<size_t>(f)];
    json j = {{"stem", stem}};
    for (const auto& [k, name] : {std::pair{Output::Matte, "matte"}, {Output::Fg, "fg"},
                                  {Output::Processed, "processed"}, {Output::Comp, "comp"}}) {
      j[name] = !output_file(c, f, k, false).empty();
      if (!c.compare_output.empty()) j[std::string(name) + "_b"] = !output_file(c, f, k, true).empty();
    }
    j["hint"] = !hint_file(c, f).empty();
    if (auto it = failed.find(stem); it != failed.end()) j["failed"] = it->second;
    frames.push_back(std::move(j));
  }
  json d = {{"id", c.id},         {"name", l.name},   {"folder", l.root},
            {"output", l.output}, {"frames", frames}, {"fps", l.input.fps > 0 ? l.input.fps : 24.0},
            {"video", l.input.video},
            {"hints", l.hint.count > 0 ? "files" : "generated"},
            {"mattes", {{"garbage", matte_summary(l.garbage)}, {"holdout", matte_summary(l.holdout)}}},
            {"compare_output", c.compare_output},
            {"run", run},
            {"run_b", run_record(c, true)}};
  // The colour the plates are shown in, decided as the pipeline decides it.
  const auto first = l.input.video.empty() ? l.input.files.front() : l.input.video;
  try {
    const auto pc = plate_colour(first, plate_colorspace(c), config_.ocio_config);
    const bool keyed = run.is_object() && run.contains("input_colorspace_why") && run["input_colorspace_why"].is_string();
    d["plate_colour"] = {{"name", pc.name},
                         {"why", keyed ? "as keyed: " + run["input_colorspace_why"].get<std::string>() : pc.why}};
  } catch (const std::exception& e) {
    d["plate_colour"] = {{"error", e.what()}};
  }
  // The backing: as the last run keyed it, else estimated here from the first, middle and
  // last plates as the pipeline estimates it.
  if (run.is_object() && run.contains("screen")) {
    d["screen"] = {{"screen", run["screen"]}, {"source", "run.json"}};
  } else {
    {
      std::lock_guard<std::mutex> g(m_);
      if (auto it = screens_.find(c.id); it != screens_.end()) d["screen"] = it->second;
    }
    if (!d.contains("screen")) {
      json s;
      try {
        const int n = l.input.count;
        std::vector<Image> plates;
        for (int i : {0, n / 2, n - 1}) {
          Image im = l.input.video.empty() ? read_frame_file(checked(plate_file(c, i)))
                                           : read_video_frame(checked(l.input.video), i);
          const auto pc = plate_colour(first, plate_colorspace(c), config_.ocio_config);
          if (!pc.srgb) {  // the estimate works on sRGB values, as the pipeline's
            pc.to_linear.apply(im);
            linear_to_display(config_.ocio_config, "").apply(im);
          }
          plates.push_back(std::move(im));
          if (n == 1) break;
        }
        std::vector<ImageView> views;
        for (const auto& p : plates) views.push_back(p.view());
        const auto e = estimate_screen(views, Screen::Auto, l.name);
        s = {{"screen", to_string(e.screen)}, {"rgb", {e.rgb[0], e.rgb[1], e.rgb[2]}},
             {"coverage", e.coverage}, {"source", "estimated"}};
      } catch (const std::exception& e) {
        s = {{"screen", "unknown"}, {"error", e.what()}, {"source", "estimated"}};
      }
      std::lock_guard<std::mutex> g(m_);
      screens_[c.id] = s;
      d["screen"] = s;
    }
  }
  return d;
}

}  // namespace corridorkey::review
